//! The small kernels the runtime tests and the launch-overhead bench launch,
//! written with the IR builder and compiled by `kda_ir::pipeline` (no PTX is
//! written by hand). `benches/launch_overhead.rs` includes this file too.
#![allow(dead_code)] // each test binary uses its own subset

use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Provenance, Scalar, Type,
};

/// Threads per block of [`pdl_scale`].
pub const SCALE_BLOCK: u32 = 128;

/// `dst[i] = k·src[i] + 1` for `i < len`, one element per thread; the tensors
/// hold `n` elements (symbol) and the scalar `len` bounds the grid's tail
/// (the launch passes `len = n`).
///
/// Releases its dependents at entry and waits for the preceding launch (PDL)
/// before it reads `src`, which that launch produced (the early schedule
/// keeps the wait there rather than at the entry); it writes only after the
/// wait, so it never races a predecessor still reading `dst`.
pub fn pdl_scale() -> Kernel {
    let mut b = Builder::new(
        "pdl_scale",
        LaunchDecl {
            block: SCALE_BLOCK,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    b.set_early(true);
    let n = b.sym("n");
    let vector = [Dim::Sym(n)];
    let src = b.tensor(
        "src",
        Scalar::F32,
        &vector,
        &[Dim::Const(1)],
        Provenance::Produced,
        Access::Read,
    );
    let dst = b.tensor(
        "dst",
        Scalar::F32,
        &vector,
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let k = b.scalar("k", Scalar::F32);
    let len = b.scalar("len", Scalar::U32);

    b.pdl_launch_dependents();
    let cta = b.block_idx(0);
    let block = b.u32(SCALE_BLOCK);
    let tid = b.thread_idx();
    let base = b.mul(cta, block);
    let i = b.add(base, tid);
    let len = b.param(len);
    let inside = b.cmp(CmpOp::Lt, i, len);
    b.if_(inside, |b| {
        b.pdl_wait();
        let x = b.ld_global(src, &[i], Type::F32, CachePolicy::Normal);
        let k = b.param(k);
        let one = b.f32(1.0);
        let y = b.fma(x, k, one, false);
        b.st_global(dst, &[i], y, None, CachePolicy::Normal);
    });
    b.finish()
}

/// Thread 0 of every CTA writes its rank in the cluster and its block index:
/// `out[2·ctaid] = %cluster_ctarank`, `out[2·ctaid + 1] = %ctaid.x`, for
/// `ctas` CTAs in clusters of `cluster`. The cluster is declared by the
/// kernel: the backend emits `.reqnctapercluster` for it.
pub fn cluster_ids(cluster: u32, ctas: u32) -> Kernel {
    let mut b = Builder::new(
        "cluster_ids",
        LaunchDecl {
            block: 32,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out = b.tensor(
        "out",
        Scalar::U32,
        &[Dim::Const(2 * ctas as u64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let tid = b.thread_idx();
    let zero = b.u32(0);
    let first = b.cmp(CmpOp::Eq, tid, zero);
    let cta = b.block_idx(0);
    let rank = b.cluster_rank();
    b.if_(first, |b| {
        let two = b.u32(2);
        let one = b.u32(1);
        let at = b.mul(cta, two);
        let next = b.add(at, one);
        b.st_global(out, &[at], rank, None, CachePolicy::Normal);
        b.st_global(out, &[next], cta, None, CachePolicy::Normal);
    });
    b.finish()
}

/// The launch-overhead kernel: releases its dependents, waits for the
/// preceding launch (PDL), and marks itself: thread 0 of CTA 0 writes
/// `out[slot] = mark`. Each launch of a chain of `slots` gets its own `slot`,
/// so the host can check every launch ran, exactly as issued (the IR has no
/// atomics to count with).
pub fn count_launches(cluster: u32, slots: u32) -> Kernel {
    let mut b = Builder::new(
        "count_launches",
        LaunchDecl {
            block: 32,
            cluster,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    // Keep the release first and the wait right before the store.
    b.set_early(true);
    let out = b.tensor(
        "out",
        Scalar::U32,
        &[Dim::Const(slots as u64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let slot = b.scalar("slot", Scalar::U32);
    let mark = b.scalar("mark", Scalar::U32);

    b.pdl_launch_dependents();
    b.pdl_wait();
    let tid = b.thread_idx();
    let cta = b.block_idx(0);
    let either = b.bin(BinOp::Or, tid, cta);
    let zero = b.u32(0);
    let first = b.cmp(CmpOp::Eq, either, zero);
    b.if_(first, |b| {
        let slot = b.param(slot);
        let mark = b.param(mark);
        b.st_global(out, &[slot], mark, None, CachePolicy::Normal);
    });
    b.finish()
}

/// Reading threads per block of [`bulk_stage`].
pub const STAGE_BLOCK: u32 = 128;

/// One bulk copy of `bytes` per CTA, the pattern of KdaSplit's early 2 and 3
/// state staging: one thread arms an mbarrier and issues one
/// `cp.async.bulk` of CTA `c`'s `bytes` of `src` into shared memory; the
/// [`STAGE_BLOCK`] reading threads wait on the barrier and write
/// `dst[c][i] = 2·shared[i]` for their strided share of the words. The issuer
/// is reading thread 0, or with `separate_issuer` thread 0 of an extra warp
/// that neither waits nor reads. `bytes` is a multiple of 16 · [`STAGE_BLOCK`].
pub fn bulk_stage(bytes: u32, separate_issuer: bool) -> Kernel {
    assert!(bytes.is_multiple_of(16 * STAGE_BLOCK), "{bytes} bytes");
    let words = bytes / 4;
    let block = STAGE_BLOCK + if separate_issuer { 32 } else { 0 };
    let suffix = if separate_issuer { "_split" } else { "" };
    let mut b = Builder::new(
        format!("bulk_stage_{bytes}{suffix}"),
        LaunchDecl {
            block,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let ctas = b.sym("ctas");
    let shape = [Dim::Sym(ctas), Dim::Const(words as u64)];
    let strides = [Dim::Const(words as u64), Dim::Const(1)];
    let src = b.tensor(
        "src",
        Scalar::F32,
        &shape,
        &strides,
        Provenance::Ready,
        Access::Read,
    );
    b.set_align(src, 16);
    let dst = b.tensor(
        "dst",
        Scalar::F32,
        &shape,
        &strides,
        Provenance::Ready,
        Access::Write,
    );
    let loaded = b.mbarrier("loaded", 1, bytes, &[]);
    let stage = b.shared("stage", Scalar::F32, words, 128, &[], Some(loaded));

    let tid = b.thread_idx();
    let cta = b.block_idx(0);
    let zero = b.u32(0);
    let issuer = b.u32(block - 32);
    let is_issuer = b.cmp(CmpOp::Eq, tid, issuer);
    b.if_(is_issuer, |b| {
        b.mbarrier_init(loaded);
        b.fence_mbarrier_init();
    });
    b.bar_sync(0, block);
    b.if_(is_issuer, |b| {
        b.mbarrier_arrive_expect_tx(loaded, bytes);
        b.bulk_copy(
            stage,
            zero,
            src,
            &[cta, zero],
            bytes,
            loaded,
            CachePolicy::Normal,
        );
    });
    let readers = b.u32(STAGE_BLOCK);
    let reads = b.cmp(CmpOp::Lt, tid, readers);
    b.if_(reads, |b| {
        b.wait(loaded);
        let two = b.f32(2.0);
        for k in 0..words / STAGE_BLOCK {
            let off = b.u32(k * STAGE_BLOCK);
            let i = b.add(off, tid);
            let x = b.ld_shared(stage, i, Type::F32);
            let y = b.mul(x, two);
            b.st_global(dst, &[cta, i], y, None, CachePolicy::Normal);
        }
    });
    b.finish()
}

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

//! Lowering details outside the all-ops kernel: the shape of small kernels'
//! PTX (role dispatch, launch directives, layout) and the backend's generic
//! paths (lane-wise vectors, bf16 through f32, 64-bit indices and shifts,
//! packed shuffles and `st.async` of non-f32 payloads), each assembled by
//! ptxas. These kernels go straight to `ptx::emit`: some use forms the
//! verifier keeps out of user kernels today, which the backend still lowers.

mod ptx_common;

use kda_ir::ptx::{Layout, emit};
use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, LaunchDecl, Op, Provenance, Scalar, ShflMode,
    Type, UnOp,
};

fn launch(block: u32, cluster: u32) -> LaunchDecl {
    LaunchDecl {
        block,
        cluster,
        min_blocks_per_sm: None,
        cluster_policy: Default::default(),
    }
}

#[test]
fn a_plain_kernel_has_no_cluster_directives_or_shared_window() {
    let mut b = Builder::new("plain", launch(32, 1));
    let t = b.tensor(
        "t",
        Scalar::F32,
        &[Dim::Const(32)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    let tid = b.thread_idx();
    let v = b.ld_global(t, &[tid], Type::F32, CachePolicy::Normal);
    let v = b.un(UnOp::Sqrt, v);
    b.st_global(t, &[tid], v, None, CachePolicy::Normal);
    let k = b.finish();
    let ptx = emit(&k).unwrap();
    assert!(!ptx.contains("cluster"), "{ptx}");
    assert!(!ptx.contains(".shared"), "{ptx}");
    assert!(ptx.contains(".reqntid 32, 1, 1"));
    assert!(ptx.contains("sqrt.rn.f32"));
    assert_eq!(Layout::of(&k).bytes, 0);
    ptx_common::assemble(&ptx);
}

#[test]
fn roles_branch_on_the_warp_index() {
    let mut b = Builder::new("roles", launch(160, 1));
    let t = b.tensor(
        "t",
        Scalar::U32,
        &[Dim::Const(160)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let first = b.role("first", 0, 64);
    let middle = b.role("middle", 64, 64);
    let last = b.role("last", 128, 32);
    let whole = b.role("whole", 0, 160);
    let tid = b.thread_idx();
    for r in [first, middle, last, whole] {
        b.in_role(r, |b| {
            b.st_global(t, &[tid], tid, None, CachePolicy::Normal);
        });
    }
    let ptx = emit(&b.finish()).unwrap();
    // first: warp >= 2 skips; middle: warp - 2 >= 2 skips; last: warp < 4 skips.
    assert!(ptx.contains("setp.ge.u32 %p0, %r1, 2;"), "{ptx}");
    assert!(
        ptx.contains("sub.u32 %r3, %r1, 2;\n\tsetp.ge.u32 %p1, %r3, 2;"),
        "{ptx}"
    );
    assert!(ptx.contains("setp.lt.u32 %p2, %r1, 4;"), "{ptx}");
    assert_eq!(ptx.matches("bra.uni $L_end_role").count(), 3, "{ptx}");
    ptx_common::assemble(&ptx);
}

#[test]
fn layout_puts_bulk_destinations_at_128_and_barriers_last() {
    let mut b = Builder::new("layout", launch(32, 1));
    let t = b.tensor(
        "t",
        Scalar::F32,
        &[Dim::Const(64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    b.set_align(t, 16);
    let bar = b.mbarrier("full", 1, 256, &[]);
    let small = b.shared("small", Scalar::BF16, 3, 2, &[], None);
    let bulk = b.shared("bulk", Scalar::F32, 64, 16, &[], Some(bar));
    let zero = b.u32(0);
    b.mbarrier_init(bar);
    b.mbarrier_arrive_expect_tx(bar, 256);
    b.bulk_copy(bulk, zero, t, &[zero], 256, bar, CachePolicy::Normal);
    b.wait(bar);
    let v = b.ld_shared(bulk, zero, Type::F32);
    let h = b.cvt(v, Type::BF16);
    b.st_shared(small, zero, h);
    let k = b.finish();
    let l = Layout::of(&k);
    assert_eq!(l.buffers[bulk], 0);
    assert_eq!(l.buffers[small], 256);
    assert_eq!(l.barriers[bar], 264);
    assert_eq!(l.bytes, 272);
    ptx_common::assemble(&emit(&k).unwrap());
}

#[test]
fn generic_lowerings_assemble() {
    let mut b = Builder::new("generic", launch(64, 2));
    let big = b.sym("big");
    let f = b.tensor(
        "f",
        Scalar::F32,
        &[Dim::Sym(big), Dim::Const(4)],
        &[Dim::Const(4), Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    b.set_align(f, 16);
    let h = b.tensor(
        "h",
        Scalar::BF16,
        &[Dim::Sym(big)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    b.set_align(h, 16);
    let q = b.tensor(
        "q",
        Scalar::I64,
        &[Dim::Sym(big)],
        &[Dim::Sym(big)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    b.set_align(q, 16);
    let flag = b.scalar("flag", Scalar::Bool);
    let full = b.mbarrier("full", 1, 64, &[]);
    let inbox = b.shared("inbox", Scalar::U32, 16, 16, &[], Some(full));

    let tid = b.thread_idx();
    let tid64 = b.cvt(tid, Type::I64);
    let zero = b.u32(0);
    let one = b.u32(1);
    // A 64-bit index with a symbolic stride.
    let x = b.ld_global(q, &[tid64], Type::I64, CachePolicy::EvictFirst);
    let sh = b.iconst(Type::I64, 70);
    let xl = b.bin(BinOp::Shl, x, sh);
    let xr = b.bin(BinOp::Shr, x, sh);
    let xs = b.add(xl, xr);
    let xs = b.un(UnOp::Neg, xs);
    let xs = b.un(UnOp::Abs, xs);
    let xs = b.un(UnOp::Not, xs);
    // Lane-wise vector arithmetic and comparisons.
    let v = b.ld_global(
        f,
        &[tid, zero],
        Type::vec(Scalar::F32, 4),
        CachePolicy::Normal,
    );
    let w = b.mul(v, v);
    let w = b.fma(w, v, v, true);
    let w = b.un(UnOp::Exp2 { fast: false }, w);
    let lt = b.cmp(CmpOp::Lt, v, w);
    let w = b.select(lt, v, w);
    // bf16 through f32, bool conversions and a bool parameter.
    let hv = b.ld_global(h, &[tid], Type::vec(Scalar::BF16, 4), CachePolicy::Normal);
    let hs = b.un(UnOp::Sigmoid { fast: false }, hv);
    let hs = b.fma(hs, hv, hv, false);
    let hs = b.un(UnOp::Rsqrt { fast: true }, hs);
    let hle = b.cmp(CmpOp::Le, hs, hv);
    let hp = b.extract(hle, 0);
    let fl = b.param(flag);
    let p = b.cmp(CmpOp::Eq, hp, fl);
    let p = b.select(p, fl, hp);
    let pu = b.cvt(p, Type::U32);
    let pf = b.cvt(p, Type::F32);
    let ph = b.cvt(p, Type::BF16);
    let back = b.cvt(pu, Type::BOOL);
    let fb = b.cvt(pf, Type::BOOL);
    let hb = b.cvt(ph, Type::BOOL);
    let p = b.bin(BinOp::And, back, fb);
    let p = b.bin(BinOp::Or, p, hb);
    let hi = b.cvt(ph, Type::I32);
    let ih = b.cvt(hi, Type::BF16);
    let lf = b.cvt(xs, Type::F32);
    let fl64 = b.cvt(lf, Type::U64);
    // Bitcasts across lane shapes.
    let words = b.bitcast(hv, Type::vec(Scalar::U32, 2));
    let as64 = b.bitcast(words, Type::U64);
    let halves = b.bitcast(as64, Type::vec(Scalar::BF16, 4));
    // Shuffles of packed and 64-bit values.
    let sh_h = b.shfl(ShflMode::Bfly, halves, one);
    let sh_1 = b.shfl(ShflMode::Idx, ih, zero);
    let sh_q = b.shfl(ShflMode::Bfly, fl64, one);
    let pair = b.push(Op::Pack, &[sh_1, sh_1], &[Type::vec(Scalar::BF16, 2)])[0];
    let pair_bits = b.bitcast(pair, Type::U32);
    // st.async of a u32x2 and of bf16x4 (8 bytes each) into the peer.
    let rank = b.cluster_rank();
    let peer = b.bin(BinOp::Xor, rank, one);
    b.if_(p, |b| {
        b.mbarrier_init(full);
        b.mbarrier_arrive_expect_tx(full, 64);
    });
    b.fence_mbarrier_init();
    b.cluster_arrive(false);
    b.cluster_wait();
    let two = b.u32(2);
    let at = b.mul(tid, two);
    let lt4 = b.u32(4);
    let sender = b.cmp(CmpOp::Lt, tid, lt4);
    b.if_(sender, |b| {
        let u2 = b.pack(&[pair_bits, tid]);
        b.st_async(inbox, at, u2, peer, full);
        let eight = b.u32(8);
        let at2 = b.add(at, eight);
        b.st_async(inbox, at2, sh_h, peer, full);
    });
    b.wait(full);
    let got = b.ld_shared(inbox, at, Type::vec(Scalar::U32, 2));
    let g = b.extract(got, 1);
    let gq = b.cvt(g, Type::I64);
    let sum = b.add(gq, xs);
    let sq = b.bitcast(sh_q, Type::I64);
    let sum = b.add(sum, sq);
    b.st_global(q, &[tid64], sum, Some(p), CachePolicy::EvictFirst);
    b.st_global(f, &[tid, zero], w, None, CachePolicy::Normal);
    b.st_global(h, &[tid], halves, None, CachePolicy::Normal);
    b.cluster_arrive(true);
    b.cluster_wait();
    let k = b.finish();
    let ptx = emit(&k).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "shl.b64",
        "shr.s64",
        "min.u64",
        "cvt.f32.bf16",
        "cvt.rn.bf16.f32",
        "selp.b16",
        "setp.neu.f32",
        "mov.b64 {%h",
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32",
        "barrier.cluster.arrive.aligned",
    ] {
        assert!(
            ptx.contains(needle),
            "missing `{needle}` in\n{}",
            ptx_common::numbered(&ptx)
        );
    }
    if let Some(r) = ptx_common::assemble(&ptx) {
        assert_eq!(r.spills(), 0, "{}", r.log);
    }
}

#[test]
fn divergent_code_uses_unaligned_barriers() {
    let mut b = Builder::new("divergent", launch(64, 2));
    let tid = b.thread_idx();
    let c = b.u32(40);
    let p = b.cmp(CmpOp::Lt, tid, c);
    b.if_(p, |b| {
        b.cluster_arrive(false);
        b.bar_sync(2, 64);
    });
    let ptx = emit(&b.finish()).unwrap();
    assert!(ptx.contains("barrier.cluster.arrive;"), "{ptx}");
    assert!(ptx.contains("barrier.sync 2, 64;"), "{ptx}");
    ptx_common::assemble(&ptx);
}

#[test]
fn an_unlowerable_access_names_its_line() {
    let mut b = Builder::new("wide", launch(32, 1));
    let t = b.tensor(
        "t",
        Scalar::F32,
        &[Dim::Const(64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let zero = b.u32(0);
    let line = line!() + 1;
    b.ld_global(t, &[zero], Type::vec(Scalar::F32, 8), CachePolicy::Normal);
    let e = emit(&b.finish()).unwrap_err();
    assert_eq!(e.loc.line, line);
    assert!(e.to_string().contains("f32x8"), "{e}");
}

/// In a one-CTA cluster a send is a local store, released to the waiter by
/// an arrival that counts its bytes: the barrier is initialised with
/// `arrivals + tx` and its arm arrives once without `expect_tx`. A barrier
/// a bulk copy also completes keeps its bytes (`complete_tx` after a fence).
#[test]
fn one_cta_sends_arrive_with_their_bytes() {
    let mut b = Builder::new("one_cta", launch(64, 1));
    let src = b.tensor(
        "src",
        Scalar::F32,
        &[Dim::Const(64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    b.set_align(src, 16);
    let out = b.tensor(
        "out",
        Scalar::F32,
        &[Dim::Const(64)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let sent = b.mbarrier("sent", 1, 128, &[]);
    let mixed = b.mbarrier("mixed", 1, 256 + 128, &[]);
    let inbox = b.shared("inbox", Scalar::F32, 32, 16, &[], Some(sent));
    let stage = b.shared("stage", Scalar::F32, 96, 128, &[], Some(mixed));
    let tid = b.thread_idx();
    let zero = b.u32(0);
    let first = b.cmp(CmpOp::Eq, tid, zero);
    b.if_(first, |b| {
        b.mbarrier_init(sent);
        b.mbarrier_arrive_expect_tx(sent, 128);
        b.mbarrier_init(mixed);
        b.mbarrier_arrive_expect_tx(mixed, 256 + 128);
        b.bulk_copy(stage, zero, src, &[zero], 256, mixed, CachePolicy::Normal);
    });
    b.fence_mbarrier_init();
    b.bar_sync(0, 64);
    let c32 = b.u32(32);
    let low = b.cmp(CmpOp::Lt, tid, c32);
    let rank = b.cluster_rank();
    b.if_(low, |b| {
        let v = b.cvt(tid, Type::F32);
        b.st_async(inbox, tid, v, rank, sent);
        let c64 = b.u32(64);
        let at = b.add(tid, c64);
        b.st_async(stage, at, v, rank, mixed);
    });
    b.wait(sent);
    b.wait(mixed);
    let c31 = b.u32(31);
    let lane = b.bin(BinOp::And, tid, c31);
    let x = b.ld_shared(inbox, lane, Type::F32);
    let y = b.ld_shared(stage, tid, Type::F32);
    let z = b.add(x, y);
    b.st_global(out, &[tid], z, None, CachePolicy::Normal);
    let k = b.finish();
    let ptx = emit(&k).unwrap_or_else(|e| panic!("{e}"));
    let layout = Layout::of(&k);
    let (at_sent, at_mixed) = (layout.barriers[sent], layout.barriers[mixed]);
    for needle in [
        // `sent`: 1 arrival + 128 bytes counted as arrivals.
        format!("mbarrier.init.shared::cta.b64 [%r0+{at_sent}], 129;"),
        format!("mbarrier.arrive.shared::cta.b64 _, [%r0+{at_sent}];"),
        "st.shared.f32".to_string(),
        "mbarrier.arrive.release.cta.shared::cta.b64 _, [".to_string(),
        // `mixed`: the bulk copy completes bytes, so bytes stay bytes.
        format!("mbarrier.init.shared::cta.b64 [%r0+{at_mixed}], 1;"),
        format!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r0+{at_mixed}], 384;"),
        "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [".to_string(),
    ] {
        assert!(
            ptx.contains(&needle),
            "missing `{needle}` in\n{}",
            ptx_common::numbered(&ptx)
        );
    }
    assert!(
        !ptx.lines()
            .any(|l| !l.trim_start().starts_with("//") && l.contains("st.async")),
        "{ptx}"
    );
    assert_eq!(
        ptx.matches("mbarrier.arrive.release.cta").count(),
        1,
        "{ptx}"
    );
    if let Some(r) = ptx_common::assemble(&ptx) {
        assert_eq!(r.spills(), 0, "{}", r.log);
    }
}

//! One kernel that uses every op of the op table (and the variants with their
//! own lowering: vector widths, bf16, 64-bit ints, fast and IEEE math,
//! evict-first, predicated stores, loops with carried values), so ptxas
//! assembles every emitter.

mod ptx_common;

use std::collections::BTreeSet;

use kda_ir::{
    Access, BinOp, Builder, CachePolicy, CmpOp, Dim, Kernel, LaunchDecl, Op, Provenance, Scalar,
    ShflMode, Special, Type, UnOp, Value,
};

/// A dense index per op variant; the match is exhaustive so a new op fails
/// to compile here until this kernel uses it.
fn variant(op: &Op) -> usize {
    match op {
        Op::IConst(_) => 0,
        Op::FConst(_) => 1,
        Op::Special(_) => 2,
        Op::Param(_) => 3,
        Op::Bin(_) => 4,
        Op::Fma { .. } => 5,
        Op::Un(_) => 6,
        Op::Cmp(_) => 7,
        Op::Select => 8,
        Op::Cvt => 9,
        Op::Bitcast => 10,
        Op::Pack => 11,
        Op::Extract(_) => 12,
        Op::LdGlobal { .. } => 13,
        Op::StGlobal { .. } => 14,
        Op::LdShared { .. } => 15,
        Op::StShared { .. } => 16,
        Op::Shfl(_) => 17,
        Op::ElectSync => 18,
        Op::Mma16816 => 19,
        Op::MbarInit { .. } => 20,
        Op::MbarArrive { .. } => 21,
        Op::MbarArriveExpectTx { .. } => 22,
        Op::MbarWait { .. } => 23,
        Op::FenceMbarInit => 24,
        Op::FenceProxyAsync => 25,
        Op::ClusterArrive { .. } => 26,
        Op::ClusterWait => 27,
        Op::BarSync { .. } => 28,
        Op::StAsync { .. } => 29,
        Op::CpAsync { .. } => 30,
        Op::CpAsyncCommit => 31,
        Op::CpAsyncWait(_) => 32,
        Op::BulkCopy { .. } => 33,
        Op::GridDepWait => 34,
        Op::GridDepLaunch => 35,
        Op::If { .. } => 36,
        Op::For { .. } => 37,
        Op::While { .. } => 38,
        Op::InRole { .. } => 39,
        Op::Yield => 40,
        Op::WarpSync => 41,
        Op::MbarWaitParity { .. } => 42,
        Op::BulkStore { .. } => 43,
        Op::BulkCommit => 44,
        Op::BulkWait { .. } => 45,
        Op::SetMaxNReg { .. } => 46,
        Op::AtomAdd { .. } => 47,
        Op::MbarArriveRemote { .. } => 48,
        // Exercised by the wgmma GEMM tile (assembled in `ptx_wgmma.rs`).
        Op::WgmmaFence => 49,
        Op::WgmmaCommit => 50,
        Op::WgmmaWait(_) => 51,
        Op::Wgmma { .. } => 52,
    }
}
const VARIANTS: usize = 53;

const ROWS_PER_CTA: u64 = 1;

fn all_ops_kernel() -> Kernel {
    let mut b = Builder::new(
        "all_ops",
        LaunchDecl {
            block: 128,
            cluster: 2,
            min_blocks_per_sm: Some(1),
            cluster_policy: Default::default(),
        },
    );
    let rows = b.sym("rows");
    let w_stride = b.sym("w_stride");
    let f32_rows = |b: &mut Builder, name: &str, cols: u64, prov, access| {
        let t = b.tensor(
            name,
            Scalar::F32,
            &[Dim::Sym(rows), Dim::Const(cols)],
            &[Dim::Const(cols), Dim::Const(1)],
            prov,
            access,
        );
        b.set_align(t, 128);
        t
    };
    let x = f32_rows(&mut b, "x", 64, Provenance::Produced, Access::Read);
    let state = f32_rows(&mut b, "state", 128, Provenance::Ready, Access::ReadWrite);
    let out = f32_rows(&mut b, "out", 64, Provenance::Ready, Access::Write);
    let w = b.tensor(
        "w",
        Scalar::BF16,
        &[Dim::Const(64), Dim::Const(64)],
        &[Dim::Sym(w_stride), Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    b.set_align(w, 16);
    let slots = b.tensor(
        "slots",
        Scalar::I32,
        &[Dim::Sym(rows)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Read,
    );
    let counts = b.tensor(
        "counts",
        Scalar::U64,
        &[Dim::Sym(rows)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    let queue = b.tensor(
        "queue",
        Scalar::I32,
        &[Dim::Const(1)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::ReadWrite,
    );
    let taken = b.tensor(
        "taken",
        Scalar::I32,
        &[Dim::Sym(rows)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let eps = b.scalar("eps", Scalar::F32);
    let n = b.scalar("n", Scalar::I32);
    let flag = b.scalar("flag", Scalar::I32);
    let scale = b.scalar("scale", Scalar::BF16);
    let seed = b.scalar("seed", Scalar::U64);

    let main = b.role("main", 0, 64);
    let gate = b.role("gate", 64, 32);
    let copy = b.role("copy", 96, 32);
    let state_full = b.mbarrier("state_full", 1, 512, &[main, copy]);
    let inbox_full = b.mbarrier("inbox_full", 2, 512, &[main, gate, copy]);
    // Released by the peer's main warps (one elected lane each) once they
    // have read the inbox: remote arrivals, counted in arrivals.
    let inbox_empty = b.mbarrier("inbox_empty", 2, 0, &[main, gate, copy]);
    let staged = b.shared(
        "staged",
        Scalar::F32,
        128,
        128,
        &[main, copy],
        Some(state_full),
    );
    let inbox = b.shared(
        "inbox",
        Scalar::F32,
        128,
        16,
        &[main, gate],
        Some(inbox_full),
    );
    let landing = b.shared("landing", Scalar::F32, 256, 16, &[main], None);
    let scratch = b.shared("scratch", Scalar::BF16, 64 * 8, 16, &[main], None);

    b.pdl_launch_dependents();
    let tid = b.thread_idx();
    let c31 = b.u32(31);
    let lane = b.bin(BinOp::And, tid, c31);
    let cta = b.block_idx(0);
    let _grid = b.special(Special::GridDim(0));
    let _laneid = b.special(Special::LaneId);
    let rank = b.cluster_rank();
    let zero = b.u32(0);

    // Arm both barriers before the cluster barrier peers wait on.
    b.in_role(copy, |b| {
        let leader = b.elect();
        b.if_(leader, |b| {
            b.mbarrier_init(state_full);
            b.mbarrier_init(inbox_full);
            b.mbarrier_init(inbox_empty);
            b.mbarrier_arrive_expect_tx(state_full, 512);
            b.mbarrier_arrive_expect_tx(inbox_full, 512);
            b.mbarrier_arrive(inbox_full);
        });
        b.fence_mbarrier_init();
    });
    b.cluster_arrive(true);
    b.cluster_wait();

    // The copy warp stages this CTA's state row (half of it evict-first).
    b.in_role(copy, |b| {
        b.fence_proxy_async();
        let first = b.cmp(CmpOp::Eq, lane, zero);
        b.if_(first, |b| {
            let c64 = b.u32(64);
            b.bulk_copy(
                staged,
                zero,
                state,
                &[cta, zero],
                256,
                state_full,
                CachePolicy::Normal,
            );
            b.bulk_copy(
                staged,
                c64,
                state,
                &[cta, c64],
                256,
                state_full,
                CachePolicy::EvictFirst,
            );
        });
    });

    // The gate warp sends 16 bytes per lane to the next CTA of the cluster.
    b.in_role(gate, |b| {
        let one = b.u32(1);
        let two = b.u32(2);
        let four = b.u32(4);
        let next = b.add(rank, one);
        let peer = b.bin(BinOp::Rem, next, two);
        let f = b.cvt(lane, Type::F32);
        let v = b.pack(&[f, f, f, f]);
        let at = b.mul(lane, four);
        b.st_async(inbox, at, v, peer, inbox_full);
        // The peer has read what was sent (an acquire at cluster scope).
        b.wait(inbox_empty);
    });

    b.in_role(main, |b| {
        // Ready loads may come before the PDL wait; produced ones after it.
        let slot = b.ld_global(slots, &[cta], Type::I32, CachePolicy::Normal);
        let four = b.u32(4);
        let col4 = b.mul(lane, four);
        let st = b.ld_global(
            state,
            &[cta, col4],
            Type::vec(Scalar::F32, 4),
            CachePolicy::EvictFirst,
        );
        let wrow = b.ld_global(
            w,
            &[tid, zero],
            Type::vec(Scalar::BF16, 8),
            CachePolicy::Normal,
        );
        let count = b.ld_global(counts, &[cta], Type::U64, CachePolicy::Normal);
        b.pdl_wait();
        let two = b.u32(2);
        let col2 = b.mul(lane, two);
        let xv = b.ld_global(
            x,
            &[cta, col2],
            Type::vec(Scalar::F32, 2),
            CachePolicy::Normal,
        );
        let x0 = b.extract(xv, 0);
        let x1 = b.extract(xv, 1);

        // cp.async 16 bytes per thread into `landing`.
        let c63 = b.u32(63);
        let tid4 = b.mul(tid, four);
        let src = b.bin(BinOp::And, col4, c63);
        b.cp_async(landing, tid4, x, &[cta, src]);
        b.cp_async_commit();
        b.cp_async_wait(0);
        b.bar_sync(1, 64);
        let landed = b.ld_shared(landing, tid4, Type::vec(Scalar::F32, 4));

        // The landed row back out by bulk stores (both policies), their
        // group and both waits.
        b.st_shared(landing, tid4, landed);
        b.fence_proxy_async();
        b.bar_sync(1, 64);
        let first = b.cmp(CmpOp::Eq, tid, zero);
        b.if_(first, |b| {
            b.bulk_store(
                out,
                &[cta, zero],
                landing,
                zero,
                256,
                CachePolicy::EvictFirst,
            );
            b.bulk_store(out, &[cta, zero], landing, zero, 256, CachePolicy::Normal);
            b.bulk_commit();
            b.bulk_wait(0, true);
            b.bulk_wait(0, false);
        });

        // f32 arithmetic, every binary op and the fast / IEEE unary ops.
        let e = b.param(eps);
        let mut acc = b.add(x0, x1);
        for op in [BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Min, BinOp::Max] {
            acc = b.bin(op, acc, x1);
        }
        acc = b.fma(acc, e, x0, true);
        acc = b.fma(acc, e, x1, false);
        for op in [
            UnOp::Neg,
            UnOp::Abs,
            UnOp::Exp { fast: true },
            UnOp::Exp { fast: false },
            UnOp::Exp2 { fast: true },
            UnOp::Exp2 { fast: false },
            UnOp::Rsqrt { fast: true },
            UnOp::Rsqrt { fast: false },
            UnOp::Sqrt,
            UnOp::Sigmoid { fast: true },
            UnOp::Sigmoid { fast: false },
            UnOp::Rcp { fast: true },
            UnOp::Rcp { fast: false },
            UnOp::Log2Approx,
        ] {
            let u = b.un(op, acc);
            acc = b.add(acc, u);
        }

        // Integers: i32 (signed division, arithmetic shift), u32, u64.
        let k3 = b.i32(3);
        let mut si = b.add(slot, k3);
        for op in [
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::Rem,
            BinOp::Min,
            BinOp::Max,
            BinOp::And,
            BinOp::Or,
            BinOp::Xor,
            BinOp::Shl,
            BinOp::Shr,
        ] {
            si = b.bin(op, si, k3);
        }
        si = b.un(UnOp::Neg, si);
        si = b.un(UnOp::Abs, si);
        let mut ui = b.un(UnOp::Not, lane);
        for op in [BinOp::Div, BinOp::Shr, BinOp::Shl, BinOp::Min, BinOp::Max] {
            ui = b.bin(op, ui, two);
        }
        let sd = b.param(seed);
        let lane64 = b.cvt(lane, Type::U64);
        let wide = b.mul(count, sd);
        let wide = b.add(wide, lane64);
        let sh = b.iconst(Type::U64, 3);
        let wide = b.bin(BinOp::Shr, wide, sh);
        let wide = b.bin(BinOp::Rem, wide, sd);
        let si64 = b.cvt(si, Type::I64);
        let sh64 = b.iconst(Type::I64, 1);
        let si64 = b.bin(BinOp::Shr, si64, sh64);

        // bf16: arithmetic through f32, sign ops, conversions.
        let sc = b.param(scale);
        let h0 = b.extract(wrow, 0);
        let h1 = b.extract(wrow, 1);
        let hb = b.push(Op::FConst(1.5), &[], &[Type::BF16])[0];
        let h = b.mul(h0, sc);
        let h = b.add(h, hb);
        let h = b.mul(h, h1);
        let h = b.un(UnOp::Neg, h);
        let h = b.un(UnOp::Abs, h);
        let h = b.bin(BinOp::Max, h, h0);
        let hf = b.cvt(h, Type::F32);
        acc = b.add(acc, hf);

        // Comparisons, selection, bool logic and conversions.
        let one = b.u32(1);
        let flag_i = b.param(flag);
        let izero = b.i32(0);
        let fl = b.cmp(CmpOp::Ne, flag_i, izero);
        let lt = b.cmp(CmpOp::Lt, acc, x0);
        let le = b.cmp(CmpOp::Le, si, k3);
        let gt = b.cmp(CmpOp::Gt, ui, lane);
        let ge = b.cmp(CmpOp::Ge, h0, h1);
        let ne = b.cmp(CmpOp::Ne, acc, acc);
        let eqb = b.cmp(CmpOp::Eq, lt, fl);
        let p = b.bin(BinOp::And, lt, le);
        let p = b.bin(BinOp::Or, p, gt);
        let p = b.bin(BinOp::Xor, p, ge);
        let p = b.bin(BinOp::Or, p, ne);
        let p = b.un(UnOp::Not, p);
        let p = b.select(eqb, p, fl);
        let hsel = b.select(p, h0, h1);
        acc = b.select(p, acc, x1);
        let pu = b.select(p, one, zero);
        let up = b.cmp(CmpOp::Ne, pu, zero);
        let fi = b.cvt(acc, Type::I32);
        let fu = b.cvt(acc, Type::U32);
        let i2f = b.cvt(si, Type::F32);
        let l2f = b.cvt(si64, Type::F32);
        let u2h = b.cvt(ui, Type::BF16);
        let narrow = b.cvt(wide, Type::U32);
        acc = b.add(acc, i2f);
        acc = b.add(acc, l2f);

        // Bitcasts between lane shapes; pack / extract.
        let bits = b.bitcast(acc, Type::U32);
        let hpair = b.pack(&[hsel, u2h]);
        let hword = b.bitcast(hpair, Type::U32);
        let awords = b.bitcast(wrow, Type::vec(Scalar::U32, 4));
        let wide_pair = b.bitcast(wide, Type::vec(Scalar::U32, 2));
        let wide_back = b.bitcast(wide_pair, Type::U64);
        let bvec = b.pack(&[hword, bits]);

        // Warp collectives.
        let bf = b.shfl(ShflMode::Bfly, acc, one);
        let ix = b.shfl(ShflMode::Idx, fi, zero);
        let elected = b.elect();
        b.warp_sync();
        let d = b.mma(awords, bvec, st);
        let d0 = b.extract(d, 0);
        acc = b.add(acc, bf);
        acc = b.add(acc, d0);

        // An if with results, a for and a while carrying values.
        let fsum = b.if_else(
            up,
            |b| {
                let s = b.add(acc, x0);
                vec![s, ix]
            },
            |b| {
                let s = b.sub(acc, x0);
                vec![s, fi]
            },
        );
        let lo = b.i32(0);
        let hi = b.param(n);
        let step = b.i32(1);
        let looped = b.for_(lo, hi, step, &[fsum[0], narrow], |b, iv, carried| {
            let f = b.cvt(iv, Type::F32);
            let a = b.fma(carried[0], f, x1, false);
            let c = b.add(carried[1], one);
            // Swap-free, but yields a carried value in another position.
            vec![a, c]
        });
        let eight = b.u32(8);
        let grown = b.while_(
            &[looped[1], fu],
            |b, c| b.cmp(CmpOp::Lt, c[0], eight),
            |b, c| {
                let m = b.mul(c[0], two);
                let m = b.add(m, one);
                vec![m, c[0]]
            },
        );
        let gf = b.cvt(grown[0], Type::F32);
        acc = b.add(looped[0], gf);

        // Shared memory: a bf16x8 (16 bytes) and a scalar bf16 round trip.
        let eight_el = b.u32(8);
        let hidx = b.mul(tid, eight_el);
        b.st_shared(scratch, hidx, wrow);
        let back = b.ld_shared(scratch, hidx, Type::vec(Scalar::BF16, 8));
        b.st_shared(scratch, hidx, h);
        let hs = b.ld_shared(scratch, hidx, Type::BF16);
        let back0 = b.extract(back, 2);
        let hsum = b.add(back0, hs);
        let hsf = b.cvt(hsum, Type::F32);
        acc = b.add(acc, hsf);

        // What the peer sent, and the staged state row.
        b.wait(inbox_full);
        let got = b.ld_shared(inbox, col4, Type::vec(Scalar::F32, 4));
        // Release the inbox to the CTA that filled it.
        let first_lane = b.elect();
        b.if_(first_lane, |b| {
            let next = b.add(rank, one);
            let sender = b.bin(BinOp::Rem, next, two);
            b.mbarrier_arrive_remote(inbox_empty, sender);
        });
        b.wait(state_full);
        // The same phase again, by its parity in a register (phase 0 has
        // completed, so parity 0 passes).
        b.push(
            Op::MbarWaitParity {
                barrier: state_full,
                ring: 0,
            },
            &[zero],
            &[],
        );
        let row = b.ld_shared(staged, col4, Type::vec(Scalar::F32, 4));
        let g0 = b.extract(got, 0);
        let r0 = b.extract(row, 3);
        let l0 = b.extract(landed, 1);
        acc = b.add(acc, g0);
        acc = b.add(acc, r0);
        acc = b.add(acc, l0);

        // Stores: predicated 16 bytes, evict-first 8 bytes, u64.
        let v4 = b.pack(&[acc, acc, acc, acc]);
        let in_half = b.cmp(CmpOp::Lt, tid, eight);
        b.st_global(out, &[cta, col4], v4, Some(in_half), CachePolicy::Normal);
        let v2 = b.pack(&[acc, x1]);
        b.st_global(
            out,
            &[cta, col2],
            v2,
            Some(elected),
            CachePolicy::EvictFirst,
        );
        b.st_global(state, &[cta, col4], d, None, CachePolicy::EvictFirst);
        b.st_global(
            counts,
            &[cta],
            wide_back,
            Some(elected),
            CachePolicy::Normal,
        );
        // A work queue's ticket: atom.global.add.s32, its old value stored.
        let zero = b.iconst(Type::U32, 0);
        let step = b.iconst(Type::I32, 1);
        let ticket = b.atom_add(queue, &[zero], step);
        b.st_global(taken, &[cta], ticket, Some(elected), CachePolicy::Normal);
        let _ = (ROWS_PER_CTA, eight_el);
    });

    // Keep shared memory alive until every peer's sends have landed.
    b.cluster_arrive(false);
    b.cluster_wait();
    b.finish()
}

/// Register budgets need warpgroup-aligned roles, which the kernel above (a
/// 128-thread block of three roles) has not: two warpgroups here, one giving
/// registers back (`setmaxnreg.dec`), one taking them (`.inc`), emitted by
/// `in_role` at each role's first region.
fn budget_kernel() -> Kernel {
    let mut b = Builder::new(
        "budgets",
        LaunchDecl {
            block: 256,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    b.set_max_regs(128);
    let y = b.tensor(
        "y",
        Scalar::F32,
        &[Dim::Const(256)],
        &[Dim::Const(1)],
        Provenance::Ready,
        Access::Write,
    );
    let producer = b.role("producer", 0, 128);
    let consumer = b.role("consumer", 128, 128);
    b.set_regs(producer, 40);
    b.set_regs(consumer, 216);
    let tid = b.thread_idx();
    for (role, c) in [(producer, 1.0), (consumer, 2.0), (producer, 3.0)] {
        b.in_role(role, |b| {
            let v = b.f32(c);
            b.st_global(y, &[tid], v, None, CachePolicy::Normal);
        });
    }
    b.finish()
}

#[test]
fn budgets_set_once_per_role_and_assemble() {
    let k = budget_kernel();
    kda_ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
    let ptx = kda_ir::ptx::emit(&k).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        ".maxnreg 128",
        "setmaxnreg.dec.sync.aligned.u32 40;",
        "setmaxnreg.inc.sync.aligned.u32 216;",
    ] {
        assert_eq!(ptx.matches(needle).count(), 1, "`{needle}` once in\n{ptx}");
    }
    if let Some(r) = ptx_common::assemble(&ptx) {
        println!("{}", r.log);
        assert_eq!(r.spills(), 0, "{}", r.log);
        assert!(
            !r.log.contains("setmaxnreg"),
            "ptxas ignored setmaxnreg: {}",
            r.log
        );
    }
}

fn used_variants(k: &Kernel) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    k.walk(|i, _| {
        seen.insert(variant(&k.insts[i].op));
    });
    seen
}

#[test]
fn the_kernel_uses_every_op() {
    let mut seen = used_variants(&all_ops_kernel());
    seen.extend(used_variants(&budget_kernel()));
    seen.extend(used_variants(&kda_ir::testkernels::wgmma_gemm(
        8,
        32,
        kda_ir::wgmma::Swizzle::None,
    )));
    let missing: Vec<usize> = (0..VARIANTS).filter(|v| !seen.contains(v)).collect();
    assert!(missing.is_empty(), "op variants not exercised: {missing:?}");
}

#[test]
fn every_emitter_assembles() {
    let k = all_ops_kernel();
    let ptx = kda_ir::ptx::emit(&k).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "ld.global.L1::no_allocate.L2::cache_hint.v4.f32",
        "st.global.L1::no_allocate.L2::cache_hint.v2.f32",
        "ld.global.v4.b32",
        "ld.global.v2.f32",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint",
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _,",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "cp.async.cg.shared.global",
        "shfl.sync.bfly.b32",
        "shfl.sync.idx.b32",
        "elect.sync",
        "bar.warp.sync -1;",
        ".minnctapersm 1",
        "barrier.cluster.arrive.aligned",
        "bar.sync 1, 64",
    ] {
        assert!(
            ptx.contains(needle),
            "missing `{needle}` in\n{}",
            ptx_common::numbered(&ptx)
        );
    }
    if let Some(r) = ptx_common::assemble(&ptx) {
        println!("{}", r.log);
        assert_eq!(r.spills(), 0, "{}", r.log);
    }
}

#[test]
fn the_kernel_compiles_through_the_pipeline() {
    let k = all_ops_kernel();
    let c = kda_ir::pipeline::compile(&k, &kda_ir::pipeline::Options::default())
        .unwrap_or_else(|e| panic!("{e}"));
    // The ready loads of the main role stay before its PDL wait, the produced one after.
    let wait = c.ptx.find("griddepcontrol.wait").unwrap();
    let produced = c.ptx.find("ld.global.v2.f32").unwrap();
    assert!(produced > wait);
    if let Some(r) = ptx_common::assemble(&c.ptx) {
        assert_eq!(r.spills(), 0, "{}", r.log);
    }
}

#[allow(dead_code)]
fn unused(_: Value) {}

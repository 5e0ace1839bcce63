//! The verifier on wgmma: the issuing role is whole warpgroups, operand
//! buffers declare bf16 tiles of the right rows, sized and aligned for their
//! swizzle, accumulators are N/2 f32, N is legal, and a generic `st.shared`
//! into an operand needs `fence.proxy.async` before the wgmma. Each
//! rejection has its passing twin in the first test. The text form
//! round-trips.

use kda_ir::testkernels::wgmma_gemm;
use kda_ir::wgmma::Swizzle;
use kda_ir::{Builder, Kernel, LaunchDecl, Op, Type};

fn errors(k: &Kernel) -> String {
    match kda_ir::verifier::verify(k) {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    }
}

/// One warpgroup role at `first` of `threads`, a 64×16 A tile and an 8×16 B
/// tile (`swizzle`), an `st.shared` into A, optionally the proxy fence, one
/// wgmma m64n8k16.
fn small(first: u32, threads: u32, fence: bool, edit: impl FnOnce(&mut Kernel)) -> Kernel {
    let mut b = Builder::new(
        "wg",
        LaunchDecl {
            block: 256,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let wg = b.role("wg", first, threads);
    let sa = b.shared_tile("a", 64, 16, Swizzle::B32, &[wg]);
    let sb = b.shared_tile("b", 8, 16, Swizzle::B32, &[wg]);
    b.in_role(wg, |b| {
        let z = b.u32(0);
        let one = b.f32(1.0);
        let x = b.cvt(one, Type::BF16);
        b.st_shared(sa, z, x);
        if fence {
            b.fence_proxy_async();
        }
        b.bar_sync(1, threads);
        b.wgmma_fence();
        let _ = b.wgmma(8, sa, z, sb, z, None);
        b.wgmma_commit();
        b.wgmma_wait(0);
    });
    let mut k = b.finish();
    edit(&mut k);
    k
}

#[test]
fn warpgroup_kernels_verify_and_round_trip() {
    assert_eq!(errors(&small(0, 128, true, |_| {})), "");
    assert_eq!(errors(&small(128, 128, true, |_| {})), "");
    for s in Swizzle::ALL {
        let k = wgmma_gemm(64, 64, s);
        assert_eq!(errors(&k), "");
        let text = kda_ir::write::write_kernel(&k);
        assert!(
            text.contains(&format!("tile(64, 64, {})", s.name())),
            "{text}"
        );
        let back = kda_ir::parse::parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(kda_ir::write::write_kernel(&back), text);
        assert_eq!(errors(&back), "");
    }
}

#[test]
fn wgmma_outside_a_warpgroup_is_rejected() {
    let e = errors(&small(32, 128, true, |_| {}));
    assert!(e.contains("not whole warpgroups"), "{e}");
    let e = errors(&small(0, 64, true, |_| {}));
    assert!(e.contains("not whole warpgroups"), "{e}");
}

#[test]
fn operand_tiles_are_checked() {
    // A 128-byte-swizzled tile must be 1024-byte aligned.
    let e = errors(&small(0, 128, true, |k| {
        let b = k.buffers.keys().next().unwrap();
        k.buffers[b].tile.as_mut().unwrap().swizzle = Swizzle::B128;
        k.buffers[b].tile.as_mut().unwrap().cols = 64;
        k.buffers[b].len = 64 * 64;
    }));
    assert!(
        e.contains("aligned to 256 bytes, a sw128 tile needs 1024"),
        "{e}"
    );
    // No tile.
    let e = errors(&small(0, 128, true, |k| {
        let b = k.buffers.keys().nth(1).unwrap();
        k.buffers[b].tile = None;
    }));
    assert!(e.contains("declares no tile layout"), "{e}");
    // B's rows must be N.
    let e = errors(&small(0, 128, true, |k| {
        for (_, d) in k.insts.iter_mut() {
            if let Op::Wgmma { n, .. } = &mut d.op {
                *n = 16;
            }
        }
    }));
    assert!(e.contains("the B operand needs 16"), "{e}");
}

#[test]
fn accumulators_and_shape_are_checked() {
    let e = errors(&small(0, 128, true, |k| {
        for (_, d) in k.insts.iter_mut() {
            if let Op::Wgmma { n, .. } = &mut d.op {
                *n = 12;
            }
        }
    }));
    assert!(e.contains("m64n12k16; allowed"), "{e}");
    let e = errors(&small(0, 128, true, |k| {
        for (_, d) in k.insts.iter_mut() {
            if let Op::Wgmma { scale_d, .. } = &mut d.op {
                *scale_d = true;
            }
        }
    }));
    assert!(
        e.contains("takes the A and B columns and the 4 f32 accumulators: 6 operands, found 2"),
        "{e}"
    );
}

#[test]
fn generic_write_then_wgmma_needs_the_proxy_fence() {
    let e = errors(&small(0, 128, false, |_| {}));
    assert!(e.contains("no `fence.proxy.async` between them"), "{e}");
    assert!(e.contains("the wgmma may read the old bytes"), "{e}");
}

/// One wgmma m64n8k16, then `tail` (commit/wait in some order), then every
/// thread stores its first accumulator.
fn read_after(tail: impl FnOnce(&mut Builder)) -> Kernel {
    let mut b = Builder::new(
        "wg_read",
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out = b.tensor(
        "out",
        kda_ir::Scalar::F32,
        &[kda_ir::Dim::Const(128)],
        &[kda_ir::Dim::Const(1)],
        kda_ir::Provenance::Ready,
        kda_ir::Access::Write,
    );
    let wg = b.role("wg", 0, 128);
    let sa = b.shared_tile("a", 64, 16, Swizzle::None, &[wg]);
    let sb = b.shared_tile("b", 8, 16, Swizzle::None, &[wg]);
    b.in_role(wg, |b| {
        let t = b.thread_idx();
        let z = b.u32(0);
        b.wgmma_fence();
        let d = b.wgmma(8, sa, z, sb, z, None);
        let d = b.wgmma(8, sa, z, sb, z, Some(&d));
        tail(b);
        b.st_global(out, &[t], d[0], None, kda_ir::CachePolicy::Normal);
    });
    b.finish()
}

#[test]
fn accumulator_reads_wait_for_their_group() {
    // Chaining into the next wgmma is fine; reading after commit + wait too.
    assert_eq!(
        errors(&read_after(|b| {
            b.wgmma_commit();
            b.wgmma_wait(0);
        })),
        ""
    );
    let e = errors(&read_after(|_| {}));
    assert!(e.contains("`st.global` reads v"), "{e}");
    assert!(
        e.contains("before a `wgmma.commit_group` and a `wgmma.wait_group`"),
        "{e}"
    );
    let e = errors(&read_after(|b| b.wgmma_commit()));
    assert!(e.contains("while its group may still be in flight"), "{e}");
    // wait_group 1 leaves the newest group pending.
    let e = errors(&read_after(|b| {
        b.wgmma_commit();
        b.wgmma_wait(1);
    }));
    assert!(e.contains("while its group may still be in flight"), "{e}");
    // Chaining an accumulator that is still used afterwards: the emitter
    // copies it (a read) before the wgmma, while it may be in flight.
    let e = errors(&read_after_chain_kept());
    assert!(e.contains("`wgmma.mma_async` reads v"), "{e}");
    // A wait in only one branch of an `if` does not cover the read.
    let e = errors(&read_after(|b| {
        b.wgmma_commit();
        let c = b.bool(true);
        b.if_(c, |b| b.wgmma_wait(0));
    }));
    assert!(e.contains("may still be in flight"), "{e}");
}

/// A K loop that keeps one group in flight across iterations
/// (`wait_group 1`), the accumulator carried by the `for`; after the loop,
/// `tail`, then every thread stores its first accumulator.
fn pipelined(tail: impl FnOnce(&mut Builder)) -> Kernel {
    pipelined_from(true, tail)
}

/// The same; without `waited`, the first wgmma's group is still in flight
/// when the loop copies its result into the loop parameter.
fn pipelined_from(waited: bool, tail: impl FnOnce(&mut Builder)) -> Kernel {
    let mut b = Builder::new(
        "wg_pipe",
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out = b.tensor(
        "out",
        kda_ir::Scalar::F32,
        &[kda_ir::Dim::Const(128)],
        &[kda_ir::Dim::Const(1)],
        kda_ir::Provenance::Ready,
        kda_ir::Access::Write,
    );
    let wg = b.role("wg", 0, 128);
    let sa = b.shared_tile("a", 64, 64, Swizzle::B128, &[wg]);
    let sb = b.shared_tile("b", 8, 64, Swizzle::B128, &[wg]);
    b.in_role(wg, |b| {
        let t = b.thread_idx();
        let z = b.u32(0);
        b.wgmma_fence();
        let d = b.wgmma(8, sa, z, sb, z, None);
        b.wgmma_commit();
        if waited {
            b.wgmma_wait(0);
        }
        let (k16, k64) = (b.u32(16), b.u32(64));
        let d = b.for_(k16, k64, k16, &d, |b, k, acc| {
            b.wgmma_fence();
            let d = b.wgmma(8, sa, k, sb, k, Some(acc));
            b.wgmma_commit();
            b.wgmma_wait(1);
            d
        });
        tail(b);
        b.st_global(out, &[t], d[0], None, kda_ir::CachePolicy::Normal);
    });
    b.finish()
}

#[test]
fn a_pipelined_loop_carries_its_accumulators_in_flight() {
    assert_eq!(errors(&pipelined(|b| b.wgmma_wait(0))), "");
    let e = errors(&pipelined(|_| {}));
    assert!(e.contains("`st.global` reads v"), "{e}");
    assert!(e.contains("may still be in flight"), "{e}");
    // A loop's initial value is copied into the parameter: a read.
    let e = errors(&pipelined_from(false, |b| b.wgmma_wait(0)));
    assert!(e.contains("`for` reads v"), "{e}");
}

/// Two chained wgmmas, the first's accumulators also stored after the wait:
/// the chain is a copy, not in place.
fn read_after_chain_kept() -> Kernel {
    let mut b = Builder::new(
        "wg_kept",
        LaunchDecl {
            block: 128,
            cluster: 1,
            min_blocks_per_sm: None,
            cluster_policy: Default::default(),
        },
    );
    let out = b.tensor(
        "out",
        kda_ir::Scalar::F32,
        &[kda_ir::Dim::Const(256)],
        &[kda_ir::Dim::Const(1)],
        kda_ir::Provenance::Ready,
        kda_ir::Access::Write,
    );
    let wg = b.role("wg", 0, 128);
    let sa = b.shared_tile("a", 64, 16, Swizzle::None, &[wg]);
    let sb = b.shared_tile("b", 8, 16, Swizzle::None, &[wg]);
    b.in_role(wg, |b| {
        let t = b.thread_idx();
        let z = b.u32(0);
        b.wgmma_fence();
        let d1 = b.wgmma(8, sa, z, sb, z, None);
        let d2 = b.wgmma(8, sa, z, sb, z, Some(&d1));
        b.wgmma_commit();
        b.wgmma_wait(0);
        b.st_global(out, &[t], d1[0], None, kda_ir::CachePolicy::Normal);
        let c128 = b.u32(128);
        let t2 = b.add(t, c128);
        b.st_global(out, &[t2], d2[0], None, kda_ir::CachePolicy::Normal);
    });
    b.finish()
}

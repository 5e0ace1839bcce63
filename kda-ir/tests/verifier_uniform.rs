//! Warp collectives (`shfl`, `elect`, `mma`, `warp.sync`) run only in
//! warp-uniform control flow. Each failing case with its legal twin.

mod verifier_support;

use kda_ir::{BinOp, Builder, CmpOp, Scalar, ShflMode, Special, Type, Value};
use verifier_support::*;

/// A shuffle of a constant.
fn shfl(b: &mut Builder) {
    let (x, m) = (b.f32(1.0), b.u32(1));
    b.shfl(ShflMode::Bfly, x, m);
}

/// `if cond(b) { shfl }` in a 128-thread kernel.
fn shfl_under_if(cond: impl FnOnce(&mut Builder) -> Value) -> kda_ir::Kernel {
    kernel(128, |b| {
        let c = cond(b);
        b.if_(c, shfl);
    })
}

fn tid_eq_0(b: &mut Builder) -> Value {
    let (t, z) = (b.thread_idx(), b.u32(0));
    b.cmp(CmpOp::Eq, t, z)
}

#[test]
fn no_collective_under_a_lane_dependent_if() {
    let e = assert_err(
        &shfl_under_if(tid_eq_0),
        "`shfl.bfly` is a warp collective under thread-divergent control flow: the `if` at",
    );
    assert!(e.msg.contains("branches on v2, which varies across the lanes of a warp (it comes from `special tid` at"), "{}", e.msg);
    assert!(e.msg.ends_with("collectives need warp-uniform control flow (conditions on constants, parameters, block or cluster indices or the warp index, or a role region)"));
    // Block and cluster indices, parameters and constants are uniform.
    assert_ok(&shfl_under_if(|b| {
        let (r, z) = (b.cluster_rank(), b.u32(0));
        b.cmp(CmpOp::Eq, r, z)
    }));
    assert_ok(&shfl_under_if(|b| {
        let s = b.scalar("n", Scalar::I32);
        let (n, z) = (b.param(s), b.i32(0));
        b.cmp(CmpOp::Gt, n, z)
    }));
}

#[test]
fn the_warp_index_is_uniform() {
    for op in [BinOp::Div, BinOp::Shr, BinOp::And] {
        assert_ok(&shfl_under_if(|b| {
            let t = b.thread_idx();
            let c = match op {
                BinOp::Div => b.u32(64),
                BinOp::Shr => b.u32(5),
                _ => b.u32(!31),
            };
            let w = b.bin(op, t, c);
            let z = b.u32(0);
            b.cmp(CmpOp::Eq, w, z)
        }));
    }
    // `tid / 16` still splits warps.
    assert_err(
        &shfl_under_if(|b| {
            let (t, c) = (b.thread_idx(), b.u32(16));
            let w = b.bin(BinOp::Div, t, c);
            let z = b.u32(0);
            b.cmp(CmpOp::Eq, w, z)
        }),
        "varies across the lanes of a warp",
    );
}

#[test]
fn variation_flows_through_loads_and_regions() {
    // A load at a lane-dependent index varies; at a uniform index it does not.
    let load = |lane_index: bool| {
        kernel(128, |b| {
            let s = b.shared("s", Scalar::U32, 128, 16, &[], None);
            let i = if lane_index {
                b.special(Special::LaneId)
            } else {
                b.u32(3)
            };
            let v = b.ld_shared(s, i, Type::U32);
            let z = b.u32(0);
            let c = b.cmp(CmpOp::Eq, v, z);
            b.if_(c, |b| {
                b.elect();
            });
        })
    };
    assert_err(
        &load(true),
        "`elect` is a warp collective under thread-divergent control flow",
    );
    assert_ok(&load(false));
    // Through an if's results and a loop's carried values.
    assert_err(
        &shfl_under_if(|b| {
            let c = tid_eq_0(b);
            let r = b.if_else(c, |b| vec![b.bool(true)], |b| vec![b.bool(false)]);
            r[0]
        }),
        "varies across the lanes of a warp (it comes from `special tid`",
    );
    assert_err(
        &shfl_under_if(|b| {
            let (lo, hi, one, t) = (b.u32(0), b.u32(4), b.u32(1), b.thread_idx());
            let z = b.u32(0);
            let r = b.for_(lo, hi, one, &[z], |b, _, c| vec![b.add(c[0], t)]);
            b.cmp(CmpOp::Eq, r[0], z)
        }),
        "varies across the lanes of a warp",
    );
    // shfl.idx from a uniform lane broadcasts: the result is uniform.
    assert_ok(&shfl_under_if(|b| {
        let (t, l) = (b.thread_idx(), b.u32(0));
        let v = b.shfl(ShflMode::Idx, t, l);
        b.cmp(CmpOp::Eq, v, l)
    }));
}

#[test]
fn no_collective_in_a_lane_dependent_loop() {
    let for_loop = |hi_from_lane: bool| {
        kernel(128, |b| {
            let lo = b.u32(0);
            let hi = if hi_from_lane {
                b.special(Special::LaneId)
            } else {
                b.u32(8)
            };
            let one = b.u32(1);
            b.for_(lo, hi, one, &[], |b, _, _| {
                shfl(b);
                vec![]
            });
        })
    };
    assert_err(
        &for_loop(true),
        "`shfl.bfly` is a warp collective under thread-divergent control flow: the `for` at",
    );
    assert_ok(&for_loop(false));

    let while_loop = |lane_bound: bool| {
        kernel(128, |b| {
            let z = b.u32(0);
            let bound = if lane_bound {
                b.thread_idx()
            } else {
                b.block_idx(0)
            };
            b.while_(
                &[z],
                |b, c| b.cmp(CmpOp::Lt, c[0], bound),
                |b, c| {
                    let u = b.u32(0);
                    let a = b.pack(&[u, u, u, u]);
                    let bb = b.pack(&[u, u]);
                    let f = b.f32(0.0);
                    let acc = b.pack(&[f, f, f, f]);
                    b.mma(a, bb, acc);
                    let one = b.u32(1);
                    vec![b.add(c[0], one)]
                },
            );
        })
    };
    assert_err(
        &while_loop(true),
        "`mma.m16n8k16` is a warp collective under thread-divergent control flow: the `while` at",
    );
    assert_ok(&while_loop(false));
}

#[test]
fn role_regions_are_warp_uniform() {
    assert_ok(&kernel(128, |b| {
        let gate = b.role("gate", 96, 32);
        b.in_role(gate, shfl);
    }));
    // An elect picks one lane: code under it is divergent.
    assert_err(
        &kernel(128, |b| {
            let e = b.elect();
            b.if_(e, shfl);
        }),
        "(it comes from `elect` at",
    );
}

#[test]
fn warp_sync_only_in_warp_uniform_control_flow() {
    let sync_under = |lane_dependent: bool| {
        kernel(128, |b| {
            let t = b.thread_idx();
            let c = if lane_dependent { b.u32(0) } else { b.u32(5) };
            let x = if lane_dependent {
                t
            } else {
                b.bin(BinOp::Shr, t, c)
            };
            let z = b.u32(0);
            let cond = b.cmp(CmpOp::Eq, x, z);
            b.if_(cond, |b| b.warp_sync());
        })
    };
    assert_err(
        &sync_under(true),
        "`warp.sync` is a warp collective under thread-divergent control flow",
    );
    // `warp == 0` is uniform across a warp's lanes.
    assert_ok(&sync_under(false));
}

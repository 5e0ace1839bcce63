//! Mbarriers: a waited barrier can complete; expect_tx amounts fit the
//! declaration; the bytes sent per phase add up to the declared transaction
//! bytes (named barrier, both totals, DSL line); waits follow phases in order.

mod verifier_support;

use kda_ir::{
    Access, Barrier, Buffer, Builder, CachePolicy, CmpOp, Dim, Provenance, Role, Scalar, Type,
};
use verifier_support::*;

/// One 32-thread role `w` owning `buf` (f32[64]) and barrier `bar`
/// (`arrivals`, `tx`): lane 0 inits and arms it with `expect` bytes, then the
/// cluster syncs, then `f` runs in the role.
fn one_warp(
    arrivals: u32,
    tx: u32,
    expect: Option<u32>,
    f: impl FnOnce(&mut Builder, Buffer, Barrier, Role),
) -> kda_ir::Kernel {
    kernel(32, |b| {
        let w = b.role("w", 0, 32);
        let bar = b.mbarrier("full", arrivals, tx, &[w]);
        let buf = b.shared("buf", Scalar::F32, 64, 128, &[w], None);
        b.in_role(w, |b| {
            let e = b.elect();
            b.if_(e, |b| {
                b.mbarrier_init(bar);
                if let Some(x) = expect {
                    b.mbarrier_arrive_expect_tx(bar, x);
                }
            });
            b.fence_mbarrier_init();
        });
        b.cluster_arrive(false);
        b.cluster_wait();
        b.in_role(w, |b| f(b, buf, bar, w));
    })
}

/// Every lane of the role sends one value of `ty` into `buf`.
fn send(b: &mut Builder, buf: Buffer, bar: Barrier, ty: Type) {
    let lane = b.special(kda_ir::Special::LaneId);
    let x = b.f32(1.0);
    let v = if ty.is_scalar() {
        x
    } else {
        b.pack(&vec![x; ty.lanes as usize])
    };
    let cta = b.cluster_rank();
    b.st_async(buf, lane, v, cta, bar);
}

#[test]
fn a_waited_barrier_is_initialised() {
    let k = Demo {
        init: false,
        ..Demo::default()
    }
    .build();
    assert_err(
        &k,
        "`mbarrier.wait` on bar0 \"inbox_full\", which no `mbarrier.init` initialises; initialise it (then fence and sync the cluster) before any use",
    );
    assert_ok(&Demo::default().build());
}

#[test]
fn a_waited_barrier_is_arrived_on() {
    let k = one_warp(1, 0, None, |b, _, bar, _| b.wait(bar));
    assert_err(
        &k,
        "`mbarrier.wait` on bar0 \"full\", which nothing arrives on: a phase completes after 1 arrivals (`mbarrier.arrive` or `mbarrier.arrive.expect_tx`)",
    );
    // Every lane of the warp arrives: a phase of 32 arrivals.
    assert_ok(&one_warp(32, 0, None, |b, _, bar, _| {
        b.mbarrier_arrive(bar);
        b.wait(bar);
    }));
}

#[test]
fn a_waited_barrier_with_transactions_is_armed_and_filled() {
    let k = one_warp(1, 128, None, |b, buf, bar, _| {
        b.mbarrier_arrive(bar);
        send(b, buf, bar, Type::F32);
        b.wait(bar);
    });
    assert_err(
        &k,
        "`mbarrier.wait` on bar0 \"full\", which expects 128 transaction bytes per phase but is never armed: add an `mbarrier.arrive.expect_tx`",
    );
    let k = one_warp(1, 128, Some(128), |b, _, bar, _| b.wait(bar));
    assert_err(
        &k,
        "`mbarrier.wait` on bar0 \"full\", which expects 128 transaction bytes per phase, but no `st.async` or `cp.async.bulk` completes bytes on it",
    );
    assert_ok(&one_warp(1, 128, Some(128), |b, buf, bar, _| {
        send(b, buf, bar, Type::F32);
        b.wait(bar);
    }));
}

#[test]
fn expect_tx_fits_the_declaration() {
    let k = Demo {
        expect: 64,
        ..Demo::default()
    }
    .build();
    assert_err(
        &k,
        "`mbarrier.arrive.expect_tx` expects 64 bytes, but bar0 \"inbox_full\" completes a phase on its single arrival, so it must expect exactly the declared 128 bytes",
    );
    // With two arrivals, each may expect part of the phase, but not more than all of it.
    let k = one_warp(2, 128, Some(256), |b, _, bar, _| b.mbarrier_arrive(bar));
    assert_err(
        &k,
        "`mbarrier.arrive.expect_tx` expects 256 bytes, more than the 128 bytes per phase bar0 \"full\" declares",
    );
    assert_ok(&one_warp(2, 128, Some(64), |b, _, bar, _| {
        b.mbarrier_arrive_expect_tx(bar, 64)
    }));
}

#[test]
fn sends_add_up_to_the_declared_bytes() {
    // The demo declares 512 bytes, its 32 senders send 4 bytes each.
    let k = Demo {
        tx: 512,
        expect: 512,
        ..Demo::default()
    }
    .build();
    let e = assert_err(
        &k,
        "transaction bytes of mbarrier bar0 \"inbox_full\" do not add up: it expects 512 bytes per phase (declared at ",
    );
    assert!(
        e.msg
            .contains("), but the sends into it add up to 128 bytes (`st.async` at "),
        "{}",
        e.msg
    );
    assert!(
        e.msg
            .contains(": 4 bytes × 32 threads of role role0 \"sender\")"),
        "{}",
        e.msg
    );
    // The error is at the DSL line of the send.
    let k2 = Demo {
        tx: 512,
        expect: 512,
        ..Demo::default()
    }
    .build();
    let st = find(&k2, "st.async");
    assert_eq!(e.loc, k2.insts[st].loc);
    // Sending f32x4 per lane makes 512.
    assert_ok(
        &Demo {
            tx: 512,
            expect: 512,
            send_lanes: 4,
            ..Demo::default()
        }
        .build(),
    );
    assert_err(
        &Demo {
            send_lanes: 2,
            ..Demo::default()
        }
        .build(),
        "add up to 256 bytes",
    );
}

#[test]
fn bulk_copies_count_their_bytes_once() {
    let bulk = |bytes: u32| {
        kernel(32, |b| {
            let w = b.role("w", 0, 32);
            let t = b.tensor(
                "x",
                Scalar::F32,
                &[Dim::Const(64)],
                &[Dim::Const(1)],
                Provenance::Ready,
                Access::Read,
            );
            b.set_align(t, 16);
            let bar = b.mbarrier("full", 1, 256, &[w]);
            let buf = b.shared("buf", Scalar::F32, 64, 128, &[w], Some(bar));
            b.in_role(w, |b| {
                let e = b.elect();
                b.if_(e, |b| {
                    b.mbarrier_init(bar);
                    b.fence_mbarrier_init();
                    b.mbarrier_arrive_expect_tx(bar, 256);
                    let z = b.u32(0);
                    b.bulk_copy(buf, z, t, &[z], bytes, bar, CachePolicy::EvictFirst);
                });
                b.wait(bar);
                let z = b.u32(0);
                b.ld_shared(buf, z, Type::F32);
            });
        })
    };
    assert_err(&bulk(128), "it expects 256 bytes per phase (declared at");
    assert_err(
        &bulk(128),
        "but the sends into it add up to 128 bytes (`cp.async.bulk` at",
    );
    assert_ok(&bulk(256));
}

#[test]
fn divergent_sends_are_not_counted() {
    // One lane sends 4 bytes: the count of sending threads is unknown, so the
    // (matching) total cannot be proven and is not checked.
    let k = one_warp(1, 4, Some(4), |b, buf, bar, _| {
        let lane = b.special(kda_ir::Special::LaneId);
        let z = b.u32(0);
        let first = b.cmp(CmpOp::Eq, lane, z);
        b.if_(first, |b| send(b, buf, bar, Type::F32));
        b.wait(bar);
    });
    assert_ok(&k);
    // Without the if, all 32 lanes send: 128 bytes into a 4-byte phase.
    let k = one_warp(1, 4, Some(4), |b, buf, bar, _| {
        send(b, buf, bar, Type::F32);
        b.wait(bar);
    });
    assert_err(&k, "it expects 4 bytes per phase");
}

#[test]
fn each_waited_phase_gets_its_bytes() {
    // Two phases waited in straight-line code need two phases' bytes.
    let phases = |sends: usize| {
        one_warp(1, 128, Some(128), |b, buf, bar, _| {
            for _ in 0..sends {
                send(b, buf, bar, Type::F32);
            }
            b.wait(bar);
            let e = b.elect();
            b.if_(e, |b| b.mbarrier_arrive_expect_tx(bar, 128));
            b.wait(bar);
        })
    };
    assert_err(&phases(1), "it expects 2 phases × 128 = 256 bytes");
    assert_ok(&phases(2));
    // Sends in a loop are counted per iteration.
    let looped = |ty: Type| {
        one_warp(1, 128, Some(128), |b, buf, bar, _| {
            let (lo, hi, one) = (b.u32(0), b.u32(4), b.u32(1));
            b.for_(lo, hi, one, &[], |b, _, _| {
                send(b, buf, bar, ty);
                vec![]
            });
        })
    };
    assert_err(
        &looped(Type::vec(Scalar::F32, 2)),
        "add up to 256 bytes per iteration of the `for` at",
    );
    assert_ok(&looped(Type::F32));
}

#[test]
fn waits_follow_phases_in_order() {
    // The warp's 32 arrivals complete each new phase before its first wait.
    let waits = |phases: &[u32]| {
        let phases = phases.to_vec();
        one_warp(32, 0, None, move |b, _, bar, _| {
            let mut last = None;
            for p in phases {
                if last.is_none_or(|l| p > l) {
                    b.mbarrier_arrive(bar);
                    last = Some(p);
                }
                b.wait_phase(bar, p);
            }
        })
    };
    assert_err(
        &waits(&[0, 2, 1]),
        "`mbarrier.wait` waits for phase 1 of bar0 \"full\" after the same threads waited for phase 2; a role waits on a barrier's phases in non-decreasing order",
    );
    // Waiting for a completed phase again is harmless (exclusive branches do it).
    assert_ok(&waits(&[0, 1, 1]));
    assert_err(
        &waits(&[1, 0]),
        "waits for phase 0 of bar0 \"full\" after the same threads waited for phase 1",
    );
    assert_ok(&waits(&[0, 1, 2]));
    // Across regions of the same role.
    let k = one_warp(32, 0, None, |b, _, bar, w| {
        b.mbarrier_arrive(bar);
        b.wait_phase(bar, 1);
        b.in_role(w, |b| b.wait_phase(bar, 0));
    });
    assert_err(
        &k,
        "waits for phase 0 of bar0 \"full\" after the same threads waited for phase 1",
    );
}

//! Ordering: produced tensors are read after `pdl.wait`, guarded buffers after
//! a wait on their guard, DSMEM sends after the cluster barrier that follows
//! the barrier's init — on every path, on the same threads.

mod verifier_support;

use kda_ir::{Access, Builder, CachePolicy, Dim, Provenance, Scalar, Tensor, Type};
use verifier_support::*;

fn input(b: &mut Builder, provenance: Provenance) -> Tensor {
    b.tensor(
        "x",
        Scalar::F32,
        &[Dim::Const(64)],
        &[Dim::Const(1)],
        provenance,
        Access::Read,
    )
}

fn read(b: &mut Builder, t: Tensor) {
    let z = b.u32(0);
    b.ld_global(t, &[z], Type::F32, CachePolicy::Normal);
}

#[test]
fn produced_tensors_are_read_after_the_pdl_wait() {
    let k = Demo {
        pdl_wait: false,
        ..Demo::default()
    }
    .build();
    assert_err(
        &k,
        "`ld.global` reads t0 \"input\", which the preceding launch produces, before `pdl.wait`; wait for the preceding launch first (only ready tensors may be read before the wait)",
    );
    // Ready tensors may be read before the wait.
    assert_ok(&kernel(32, |b| {
        let t = input(b, Provenance::Ready);
        read(b, t);
        b.pdl_wait();
    }));
    // Copies of produced tensors are reads too.
    assert_err(
        &kernel(32, |b| {
            let t = input(b, Provenance::Produced);
            b.set_align(t, 16);
            let s = b.shared("s", Scalar::F32, 64, 16, &[], None);
            let z = b.u32(0);
            b.cp_async(s, z, t, &[z]);
        }),
        "`cp.async` reads t0 \"x\", which the preceding launch produces, before `pdl.wait`",
    );
}

#[test]
fn the_pdl_wait_must_be_on_every_path_of_the_same_threads() {
    // Another role's wait does not order this role's read.
    let k = kernel(64, |b| {
        let t = input(b, Provenance::Produced);
        let (a, c) = (b.role("a", 0, 32), b.role("c", 32, 32));
        b.in_role(a, |b| b.pdl_wait());
        b.in_role(c, |b| read(b, t));
    });
    assert_err(
        &k,
        "`ld.global` reads t0 \"x\", which the preceding launch produces, before `pdl.wait`",
    );
    // The same role's earlier region does; so does a wait of the whole block.
    assert_ok(&kernel(64, |b| {
        let t = input(b, Provenance::Produced);
        let a = b.role("a", 0, 32);
        b.in_role(a, |b| b.pdl_wait());
        b.in_role(a, |b| read(b, t));
    }));
    // A wait in one branch only does not dominate; in both branches it does.
    let branches = |both: bool| {
        kernel(32, |b| {
            let t = input(b, Provenance::Produced);
            let c = b.bool(true);
            b.if_else(
                c,
                |b| {
                    b.pdl_wait();
                    vec![]
                },
                |b| {
                    if both {
                        b.pdl_wait();
                    }
                    vec![]
                },
            );
            read(b, t);
        })
    };
    assert_err(&branches(false), "before `pdl.wait`");
    assert_ok(&branches(true));
    // A loop body may not run; a while condition runs at least once.
    let looped = kernel(32, |b| {
        let t = input(b, Provenance::Produced);
        let (lo, hi, one) = (b.u32(0), b.u32(1), b.u32(1));
        b.for_(lo, hi, one, &[], |b, _, _| {
            b.pdl_wait();
            vec![]
        });
        read(b, t);
    });
    assert_err(&looped, "before `pdl.wait`");
    assert_ok(&kernel(32, |b| {
        let t = input(b, Provenance::Produced);
        b.while_(
            &[],
            |b, _| {
                b.pdl_wait();
                b.bool(false)
            },
            |_, _| vec![],
        );
        read(b, t);
    }));
}

#[test]
fn guarded_buffers_are_read_after_a_wait_on_their_guard() {
    let k = Demo {
        wait: false,
        ..Demo::default()
    }
    .build();
    assert_err(
        &k,
        "`ld.shared` reads buf0 \"inbox\", which bar0 \"inbox_full\" guards, before these threads wait on that barrier; add an `mbarrier.wait` on it first, on every path in this role",
    );
    assert_ok(&Demo::default().build());
}

#[test]
fn dsmem_sends_follow_the_cluster_barrier_after_init() {
    let k = Demo {
        cluster_sync: false,
        ..Demo::default()
    }
    .build();
    let e = assert_err(
        &k,
        "`st.async` sends to bar0 \"inbox_full\" of a peer CTA before a `cluster.wait` that follows its `mbarrier.init` (at ",
    );
    assert!(e.msg.ends_with("); the peer's barrier may not be initialised yet: pass `cluster.arrive` and `cluster.wait` after the init first"));
    // A cluster barrier before the init does not count.
    let k = kernel(64, |b| {
        let (s, r) = (b.role("sender", 0, 32), b.role("receiver", 32, 32));
        let bar = b.mbarrier("full", 1, 128, &[s, r]);
        let buf = b.shared("inbox", Scalar::F32, 32, 16, &[s, r], None);
        b.cluster_arrive(false);
        b.cluster_wait();
        b.in_role(r, |b| {
            let e = b.elect();
            b.if_(e, |b| {
                b.mbarrier_init(bar);
                b.mbarrier_arrive_expect_tx(bar, 128);
            });
        });
        b.in_role(s, |b| {
            let (lane, x, peer) = (
                b.special(kda_ir::Special::LaneId),
                b.f32(1.0),
                b.cluster_rank(),
            );
            b.st_async(buf, lane, x, peer, bar);
        });
    });
    assert_err(
        &k,
        "`st.async` sends to bar0 \"full\" of a peer CTA before a `cluster.wait` that follows its `mbarrier.init`",
    );
    // A send into a barrier nothing initialises.
    let k = Demo {
        init: false,
        ..Demo::default()
    }
    .build();
    assert_err(
        &k,
        "`st.async` completes bytes on bar0 \"inbox_full\" of a peer CTA, but no `mbarrier.init` initialises that barrier",
    );
    assert_ok(&Demo::default().build());
}

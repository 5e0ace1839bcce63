//! Declarations: the launch shape, tensors, scalars, buffers, barriers and the
//! shared-memory budget. Each failing case with its legal twin.

mod verifier_support;

use kda_ir::{Access, Builder, ClusterPolicy, Dim, LaunchDecl, Provenance, Scalar};
use verifier_support::*;

fn with_launch(launch: LaunchDecl) -> kda_ir::Kernel {
    Builder::new("t", launch).finish()
}

#[test]
fn launch_shape() {
    let l = |block, cluster, min| LaunchDecl {
        block,
        cluster,
        min_blocks_per_sm: min,
        cluster_policy: Default::default(),
    };
    assert_err(
        &with_launch(l(48, 1, None)),
        "block of 48 threads; allowed: a positive multiple of 32 up to 1024",
    );
    assert_err(&with_launch(l(2048, 1, None)), "block of 2048 threads");
    assert_err(
        &with_launch(l(64, 17, None)),
        "cluster of 17 CTAs; allowed: 1 to 16",
    );
    assert_err(&with_launch(l(64, 0, None)), "cluster of 0 CTAs");
    assert_err(
        &with_launch(l(64, 1, Some(0))),
        "min_blocks 0; allowed: a positive count of CTAs per SM",
    );
    assert_ok(&with_launch(l(1024, 16, Some(1))));
}

#[test]
fn a_cluster_policy_needs_clusters() {
    let l = |cluster, policy| LaunchDecl {
        block: 64,
        cluster,
        min_blocks_per_sm: None,
        cluster_policy: policy,
    };
    for policy in [ClusterPolicy::Spread, ClusterPolicy::LoadBalancing] {
        assert_err(
            &with_launch(l(1, policy)),
            &format!(
                "cluster_policy={} without clusters: a scheduling policy places clusters of more than one CTA",
                policy.name()
            ),
        );
        assert_ok(&with_launch(l(2, policy)));
    }
    assert_ok(&with_launch(l(1, ClusterPolicy::Default)));
}

#[test]
fn tensors_and_scalars() {
    assert_err(
        &kernel(32, |b| {
            b.tensor(
                "x",
                Scalar::F32,
                &[Dim::Const(4), Dim::Const(4)],
                &[Dim::Const(1)],
                Provenance::Ready,
                Access::Read,
            );
        }),
        "tensor t0 \"x\" has 2 dimensions but 1 strides; give one stride per dimension",
    );
    assert_err(
        &kernel(32, |b| {
            b.tensor(
                "x",
                Scalar::Bool,
                &[Dim::Const(4)],
                &[Dim::Const(1)],
                Provenance::Ready,
                Access::Read,
            );
        }),
        "tensor t0 \"x\" has dtype bool, which has no memory form; use a numeric dtype",
    );
    assert_err(
        &kernel(32, |b| {
            let t = b.tensor(
                "x",
                Scalar::F32,
                &[Dim::Const(4)],
                &[Dim::Const(1)],
                Provenance::Ready,
                Access::Read,
            );
            b.set_align(t, 2);
        }),
        "tensor t0 \"x\" declares align 2; allowed: a power of two of at least 4 (its dtype's size)",
    );
    assert_err(
        &kernel(32, |b| {
            b.scalar("flag", Scalar::Bool);
        }),
        "scalar s0 \"flag\" is bool, which cannot be passed at launch; pass an integer",
    );
    assert_ok(&kernel(32, |b| {
        let n = b.sym("n");
        let t = b.tensor(
            "x",
            Scalar::BF16,
            &[Dim::Sym(n), Dim::Const(8)],
            &[Dim::Const(8), Dim::Const(1)],
            Provenance::Ready,
            Access::Read,
        );
        b.set_align(t, 16);
        b.scalar("eps", Scalar::F32);
    }));
}

#[test]
fn buffers_and_barriers() {
    assert_err(
        &kernel(32, |b| {
            b.shared("s", Scalar::F32, 8, 12, &[], None);
        }),
        "shared buffer buf0 \"s\" declares align 12; allowed: a power of two of at least 4 (its element's size)",
    );
    assert_err(
        &kernel(32, |b| {
            b.shared("s", Scalar::F32, 0, 16, &[], None);
        }),
        "shared buffer buf0 \"s\" has no elements; allowed: a positive length",
    );
    assert_err(
        &kernel(32, |b| {
            b.shared("s", Scalar::Bool, 8, 16, &[], None);
        }),
        "shared buffer buf0 \"s\" has bool elements",
    );
    assert_err(
        &kernel(32, |b| {
            b.mbarrier("full", 0, 0, &[]);
        }),
        "mbarrier bar0 \"full\" counts 0 arrivals per phase; allowed: 1..=1048575",
    );
    assert_err(
        &kernel(32, |b| {
            b.mbarrier("full", 1, 1 << 20, &[]);
        }),
        "mbarrier bar0 \"full\" expects 1048576 transaction bytes per phase; allowed: at most 1048575",
    );
    assert_ok(&kernel(32, |b| {
        b.shared("s", Scalar::BF16, 8, 2, &[], None);
        b.mbarrier("full", 1024, (1 << 20) - 1, &[]);
    }));
}

#[test]
fn shared_memory_budget() {
    // 227 KiB = 232448 bytes: 232440 bytes of buffer and one 8-byte mbarrier fill it exactly.
    assert_ok(&kernel(32, |b| {
        b.shared("state", Scalar::F32, 58110, 128, &[], None);
        b.mbarrier("full", 1, 0, &[]);
    }));
    let k = kernel(32, |b| {
        b.shared("state", Scalar::F32, 58110, 128, &[], None);
        b.shared("extra", Scalar::F32, 1, 16, &[], None);
        b.mbarrier("full", 1, 0, &[]);
    });
    let e = assert_err(
        &k,
        "shared memory needs 232464 bytes (buffers 232444 + 1 mbarriers × 8, with alignment); the limit is 232448 bytes (227 KiB) per CTA; the largest buffer is buf0 \"state\" (232440 bytes)",
    );
    assert!(e.inst.is_none());
}

/// A tensor hint's list in the schedule.
type HintList = fn(&mut kda_ir::ScheduleHints) -> &mut Vec<kda_ir::Tensor>;

/// A kernel declaring one tensor `x` with this access, its schedule hints
/// set by `hint`.
fn hinted(
    access: Access,
    hint: impl FnOnce(&mut kda_ir::ScheduleHints, kda_ir::Tensor),
) -> kda_ir::Kernel {
    let mut x = None;
    let mut k = kernel(32, |b| {
        x = Some(b.tensor(
            "x",
            Scalar::F32,
            &[Dim::Const(32)],
            &[Dim::Const(1)],
            Provenance::Ready,
            access,
        ));
    });
    hint(&mut k.schedule, x.expect("the tensor is declared"));
    k
}

#[test]
fn the_tensor_hints_name_declared_tensors_once() {
    let set: [(&str, HintList); 3] = [
        ("evict_first", |s| &mut s.evict_first),
        ("stage_through_shared", |s| &mut s.stage_through_shared),
        ("store_through_shared", |s| &mut s.store_through_shared),
    ];
    for (name, list) in set {
        // A tensor each hint may name (a stored one for store_through_shared).
        let access = if name == "store_through_shared" {
            Access::ReadWrite
        } else {
            Access::Read
        };
        let named = |hint: fn(kda_ir::Tensor) -> Vec<kda_ir::Tensor>| {
            hinted(access, |s, x| *list(s) = hint(x))
        };
        assert_err(
            &named(|_| vec![kda_ir::Tensor::from_u32(3)]),
            &format!(
                "the {name} hint names t3, which is not a declared tensor (the kernel declares 1)"
            ),
        );
        assert_err(
            &named(|x| vec![x, x]),
            &format!("the {name} hint names t0 twice; name each tensor once"),
        );
        assert_ok(&named(|x| vec![x]));
        assert_ok(&named(|_| vec![]));
    }
}

/// Staging a tensor through shared memory moves its reads: a tensor the
/// kernel only writes is refused (evict_first, which marks stores too, is not).
#[test]
fn the_stage_through_shared_hint_names_a_tensor_the_kernel_reads() {
    let staged = |access| hinted(access, |s, x| s.stage_through_shared = vec![x]);
    assert_err(
        &staged(Access::Write),
        "the stage_through_shared hint names tensor t0 \"x\", which the kernel only writes",
    );
    assert_ok(&staged(Access::Read));
    assert_ok(&staged(Access::ReadWrite));
    assert_ok(&hinted(Access::Write, |s, x| s.evict_first = vec![x]));
}

/// Storing a tensor's tiles through shared memory moves its stores: a
/// tensor the kernel only reads is refused.
#[test]
fn the_store_through_shared_hint_names_a_tensor_the_kernel_writes() {
    let stored = |access| hinted(access, |s, x| s.store_through_shared = vec![x]);
    assert_err(
        &stored(Access::Read),
        "the store_through_shared hint names tensor t0 \"x\", which the kernel only reads",
    );
    assert_ok(&stored(Access::Write));
    assert_ok(&stored(Access::ReadWrite));
}

#[test]
fn the_wave_hint_is_at_least_one() {
    let waved = |wave: Option<u32>| {
        let mut k = Builder::new(
            "t",
            LaunchDecl {
                block: 32,
                cluster: 1,
                min_blocks_per_sm: None,
                cluster_policy: Default::default(),
            },
        )
        .finish();
        k.schedule.wave = wave;
        k
    };
    assert_err(
        &waved(Some(0)),
        "the wave hint is 0; a wave issues at least one row chain",
    );
    assert_ok(&waved(Some(1)));
    assert_ok(&waved(Some(4)));
    assert_ok(&waved(None));
}

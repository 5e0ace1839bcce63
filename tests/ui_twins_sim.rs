//! Every legal twin of the UI tests (`tests/ui/*/pass/*.rs`) on the
//! simulator with its race detector on, under the deterministic schedule,
//! seeded interleavings and hold-back: the twins that show the legal form of
//! each misuse must also be free of the races the simulator can see. Each
//! runs once per schedule with every symbol bound to 64, integer scalars 3
//! and float scalars 1.0, zeroed tensors, and a grid of two clusters. A twin
//! whose generic launch the simulator refuses for another reason (an index
//! its generic shapes do not cover) is listed, not failed; a race fails.
// The twins are DSL code (`v = v + w` is traced), so clippy's style lints
// are off for their modules.
#![allow(dead_code)] // the twins' own `main`s are not called here

#[allow(clippy::all)]
mod bulk_store_source_x_next_iteration {
    pub(super) fn build() -> kda::ir::Kernel {
        stream()
    }
    include!("ui/bulk-store-source/pass/next-iteration.rs");
}
#[allow(clippy::all)]
mod bulk_store_source_x_rewrite_before_wait {
    pub(super) fn build() -> kda::ir::Kernel {
        stage_out()
    }
    include!("ui/bulk-store-source/pass/rewrite-before-wait.rs");
}
#[allow(clippy::all)]
mod divergent_collective_x_closure_call {
    pub(super) fn build() -> kda::ir::Kernel {
        rows()
    }
    include!("ui/divergent-collective/pass/closure-call.rs");
}
#[allow(clippy::all)]
mod divergent_collective_x_shuffle_in_lane_branch {
    pub(super) fn build() -> kda::ir::Kernel {
        reduce()
    }
    include!("ui/divergent-collective/pass/shuffle-in-lane-branch.rs");
}
#[allow(clippy::all)]
mod divergent_collective_x_shuffle_from_varying_lane {
    pub(super) fn build() -> kda::ir::Kernel {
        leaders()
    }
    include!("ui/divergent-collective/pass/shuffle-from-varying-lane.rs");
}
#[allow(clippy::all)]
mod divergent_collective_x_through_bindings {
    pub(super) fn build() -> kda::ir::Kernel {
        norms()
    }
    include!("ui/divergent-collective/pass/through-bindings.rs");
}
#[allow(clippy::all)]
mod divergent_collective_x_varying_loop {
    pub(super) fn build() -> kda::ir::Kernel {
        leaders()
    }
    include!("ui/divergent-collective/pass/varying-loop.rs");
}
#[allow(clippy::all)]
mod guarded_read_x_read_before_wait {
    pub(super) fn build() -> kda::ir::Kernel {
        gated()
    }
    include!("ui/guarded-read/pass/read-before-wait.rs");
}
#[allow(clippy::all)]
mod guarded_read_x_read_other_stage {
    pub(super) fn build() -> kda::ir::Kernel {
        staged(2)
    }
    include!("ui/guarded-read/pass/read-other-stage.rs");
}
#[allow(clippy::all)]
mod guarded_read_x_ring_element_guard {
    pub(super) fn build() -> kda::ir::Kernel {
        element_guard()
    }
    include!("ui/guarded-read/pass/ring-element-guard.rs");
}
#[allow(clippy::all)]
mod guarded_read_x_wait_in_other_role {
    pub(super) fn build() -> kda::ir::Kernel {
        two_readers()
    }
    include!("ui/guarded-read/pass/wait-in-other-role.rs");
}
#[allow(clippy::all)]
mod loop_phases_x_arm_each_iteration {
    pub(super) fn build() -> kda::ir::Kernel {
        arm_each()
    }
    include!("ui/loop-phases/pass/arm-each-iteration.rs");
}
#[allow(clippy::all)]
mod produced_before_pdl_wait_x_bulk_copy_before_wait {
    pub(super) fn build() -> kda::ir::Kernel {
        staged()
    }
    include!("ui/produced-before-pdl-wait/pass/bulk-copy-before-wait.rs");
}
#[allow(clippy::all)]
mod produced_before_pdl_wait_x_read_before_wait {
    pub(super) fn build() -> kda::ir::Kernel {
        scale()
    }
    include!("ui/produced-before-pdl-wait/pass/read-before-wait.rs");
}
#[allow(clippy::all)]
mod produced_before_pdl_wait_x_wait_in_other_role {
    pub(super) fn build() -> kda::ir::Kernel {
        split()
    }
    include!("ui/produced-before-pdl-wait/pass/wait-in-other-role.rs");
}
#[allow(clippy::all)]
mod remote_arrive_x_before_cluster_sync {
    pub(super) fn build() -> kda::ir::Kernel {
        release()
    }
    include!("ui/remote-arrive/pass/before-cluster-sync.rs");
}
#[allow(clippy::all)]
mod remote_arrive_x_no_cluster {
    pub(super) fn build() -> kda::ir::Kernel {
        release()
    }
    include!("ui/remote-arrive/pass/no-cluster.rs");
}
#[allow(clippy::all)]
mod ring_refill_x_refill_after_cluster_barrier {
    pub(super) fn build() -> kda::ir::Kernel {
        with_cluster_barrier()
    }
    include!("ui/ring-refill/pass/refill-after-cluster-barrier.rs");
}
#[allow(clippy::all)]
mod ring_refill_x_refill_after_release {
    pub(super) fn build() -> kda::ir::Kernel {
        with_release()
    }
    include!("ui/ring-refill/pass/refill-after-release.rs");
}
#[allow(clippy::all)]
mod role_access_x_barrier_wrong_role {
    pub(super) fn build() -> kda::ir::Kernel {
        staged()
    }
    include!("ui/role-access/pass/barrier-wrong-role.rs");
}
#[allow(clippy::all)]
mod role_access_x_buffer_outside_roles {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/role-access/pass/buffer-outside-roles.rs");
}
#[allow(clippy::all)]
mod register_budget_x_budget_range {
    pub(super) fn build() -> kda::ir::Kernel {
        budgets()
    }
    include!("ui/register-budget/pass/budget-range.rs");
}
#[allow(clippy::all)]
mod register_budget_x_not_warpgroup_aligned {
    pub(super) fn build() -> kda::ir::Kernel {
        budgets()
    }
    include!("ui/register-budget/pass/not-warpgroup-aligned.rs");
}
#[allow(clippy::all)]
mod register_budget_x_over_budget {
    pub(super) fn build() -> kda::ir::Kernel {
        budgets()
    }
    include!("ui/register-budget/pass/over-budget.rs");
}
#[allow(clippy::all)]
mod role_access_x_send_from_undeclared_role {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/role-access/pass/send-from-undeclared-role.rs");
}
#[allow(clippy::all)]
mod roles_x_empty {
    pub(super) fn build() -> kda::ir::Kernel {
        kda_split()
    }
    include!("ui/roles/pass/empty.rs");
}
#[allow(clippy::all)]
mod roles_x_not_warp_aligned {
    pub(super) fn build() -> kda::ir::Kernel {
        kda_split()
    }
    include!("ui/roles/pass/not-warp-aligned.rs");
}
#[allow(clippy::all)]
mod roles_x_outside_block {
    pub(super) fn build() -> kda::ir::Kernel {
        kda_split()
    }
    include!("ui/roles/pass/outside-block.rs");
}
#[allow(clippy::all)]
mod roles_x_overlap {
    pub(super) fn build() -> kda::ir::Kernel {
        kda_split()
    }
    include!("ui/roles/pass/overlap.rs");
}
#[allow(clippy::all)]
mod send_before_cluster_sync_x_init_after_cluster_barrier {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/send-before-cluster-sync/pass/init-after-cluster-barrier.rs");
}
#[allow(clippy::all)]
mod send_before_cluster_sync_x_never_initialised {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/send-before-cluster-sync/pass/never-initialised.rs");
}
#[allow(clippy::all)]
mod send_before_cluster_sync_x_no_cluster_wait {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/send-before-cluster-sync/pass/no-cluster-wait.rs");
}
#[allow(clippy::all)]
mod send_before_cluster_sync_x_wait_in_other_role {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/send-before-cluster-sync/pass/wait-in-other-role.rs");
}
#[allow(clippy::all)]
mod shared_bounds_x_load_2d {
    pub(super) fn build() -> kda::ir::Kernel {
        rows2()
    }
    include!("ui/shared-bounds/pass/load-2d.rs");
}
#[allow(clippy::all)]
mod shared_bounds_x_send_vector {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/shared-bounds/pass/send-vector.rs");
}
#[allow(clippy::all)]
mod shared_bounds_x_store {
    pub(super) fn build() -> kda::ir::Kernel {
        tail()
    }
    include!("ui/shared-bounds/pass/store.rs");
}
#[allow(clippy::all)]
mod syntax_x_break_out_of_runtime_loop {
    pub(super) fn build() -> kda::ir::Kernel {
        kernel()
    }
    include!("ui/syntax/pass/break-out-of-runtime-loop.rs");
}
#[allow(clippy::all)]
mod syntax_x_constant_extent {
    pub(super) fn build() -> kda::ir::Kernel {
        kernel(4)
    }
    include!("ui/syntax/pass/constant-extent.rs");
}
#[allow(clippy::all)]
mod syntax_x_evict_first_not_a_tensor {
    pub(super) fn build() -> kda::ir::Kernel {
        stream(true, 4)
    }
    include!("ui/syntax/pass/evict-first-not-a-tensor.rs");
}
#[allow(clippy::all)]
mod syntax_x_stage_through_shared_not_a_tensor {
    pub(super) fn build() -> kda::ir::Kernel {
        scale(true, 4)
    }
    include!("ui/syntax/pass/stage-through-shared-not-a-tensor.rs");
}
#[allow(clippy::all)]
mod syntax_x_store_through_shared_not_a_tensor {
    pub(super) fn build() -> kda::ir::Kernel {
        store_tiles(true, 2)
    }
    include!("ui/syntax/pass/store-through-shared-not-a-tensor.rs");
}
#[allow(clippy::all)]
mod syntax_x_zero_wave {
    pub(super) fn build() -> kda::ir::Kernel {
        rows(2)
    }
    include!("ui/syntax/pass/zero-wave.rs");
}
#[allow(clippy::all)]
mod tx_bytes_x_arrive_expect_tx {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/tx-bytes/pass/arrive-expect-tx.rs");
}
#[allow(clippy::all)]
mod tx_bytes_x_multicast {
    pub(super) fn build() -> kda::ir::Kernel {
        broadcast()
    }
    include!("ui/tx-bytes/pass/multicast.rs");
}
#[allow(clippy::all)]
mod tx_bytes_x_too_few {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/tx-bytes/pass/too-few.rs");
}
#[allow(clippy::all)]
mod tx_bytes_x_too_many {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/tx-bytes/pass/too-many.rs");
}
#[allow(clippy::all)]
mod tx_bytes_x_vector_lanes {
    pub(super) fn build() -> kda::ir::Kernel {
        packets()
    }
    include!("ui/tx-bytes/pass/vector-lanes.rs");
}
#[allow(clippy::all)]
mod unarmed_wait_x_armed_another_barrier {
    pub(super) fn build() -> kda::ir::Kernel {
        armed_another()
    }
    include!("ui/unarmed-wait/pass/armed-another-barrier.rs");
}
#[allow(clippy::all)]
mod unarmed_wait_x_never_armed {
    pub(super) fn build() -> kda::ir::Kernel {
        never_armed()
    }
    include!("ui/unarmed-wait/pass/never-armed.rs");
}
#[allow(clippy::all)]
mod unarmed_wait_x_remote_sends_only {
    pub(super) fn build() -> kda::ir::Kernel {
        exchange()
    }
    include!("ui/unarmed-wait/pass/remote-sends-only.rs");
}

use kda::ir::{Dim, Kernel, Scalar};
use kda::runtime::{
    Device, LaunchConfig, RuntimeError, ScalarArg, SimDevice, SimError, SimOptions,
};

const SYM: i64 = 64;

/// One generic launch of `k` on `dev`.
fn smoke(dev: &SimDevice, k: &Kernel) -> Result<(), RuntimeError> {
    let module = dev.load(k)?;
    let value = |d: &Dim| match *d {
        Dim::Const(c) => c as i64,
        Dim::Sym(_) => SYM,
    };
    let buffers = k
        .tensors
        .values()
        .map(|t| {
            let span: i64 = 1 + t
                .shape
                .iter()
                .zip(&t.strides)
                .map(|(n, s)| (value(n) - 1).max(0) * value(s))
                .sum::<i64>();
            dev.upload(&vec![0u8; span as usize * t.dtype.bytes() as usize])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let scalars = k
        .scalars
        .values()
        .map(|s| match s.ty {
            Scalar::F32 => ScalarArg::F32(1.0),
            Scalar::I32 => ScalarArg::I32(3),
            Scalar::U32 => ScalarArg::U32(3),
            Scalar::I64 => ScalarArg::I64(3),
            _ => ScalarArg::U64(3),
        })
        .collect();
    let cfg = LaunchConfig {
        grid: [2 * k.launch.cluster, 1, 1],
        pdl: false,
        syms: vec![SYM; k.syms.len()],
        scalars,
    };
    let refs: Vec<_> = buffers.iter().collect();
    dev.launch(&module, &cfg, &refs)
}

#[test]
fn every_legal_twin_is_race_free_on_the_simulator() {
    let kernels: Vec<(&str, Kernel)> = vec![
        (
            "tests/ui/bulk-store-source/pass/next-iteration.rs",
            bulk_store_source_x_next_iteration::build(),
        ),
        (
            "tests/ui/bulk-store-source/pass/rewrite-before-wait.rs",
            bulk_store_source_x_rewrite_before_wait::build(),
        ),
        (
            "tests/ui/divergent-collective/pass/closure-call.rs",
            divergent_collective_x_closure_call::build(),
        ),
        (
            "tests/ui/divergent-collective/pass/shuffle-in-lane-branch.rs",
            divergent_collective_x_shuffle_in_lane_branch::build(),
        ),
        (
            "tests/ui/divergent-collective/pass/shuffle-from-varying-lane.rs",
            divergent_collective_x_shuffle_from_varying_lane::build(),
        ),
        (
            "tests/ui/divergent-collective/pass/through-bindings.rs",
            divergent_collective_x_through_bindings::build(),
        ),
        (
            "tests/ui/divergent-collective/pass/varying-loop.rs",
            divergent_collective_x_varying_loop::build(),
        ),
        (
            "tests/ui/guarded-read/pass/read-before-wait.rs",
            guarded_read_x_read_before_wait::build(),
        ),
        (
            "tests/ui/guarded-read/pass/read-other-stage.rs",
            guarded_read_x_read_other_stage::build(),
        ),
        (
            "tests/ui/guarded-read/pass/ring-element-guard.rs",
            guarded_read_x_ring_element_guard::build(),
        ),
        (
            "tests/ui/guarded-read/pass/wait-in-other-role.rs",
            guarded_read_x_wait_in_other_role::build(),
        ),
        (
            "tests/ui/loop-phases/pass/arm-each-iteration.rs",
            loop_phases_x_arm_each_iteration::build(),
        ),
        (
            "tests/ui/produced-before-pdl-wait/pass/bulk-copy-before-wait.rs",
            produced_before_pdl_wait_x_bulk_copy_before_wait::build(),
        ),
        (
            "tests/ui/produced-before-pdl-wait/pass/read-before-wait.rs",
            produced_before_pdl_wait_x_read_before_wait::build(),
        ),
        (
            "tests/ui/produced-before-pdl-wait/pass/wait-in-other-role.rs",
            produced_before_pdl_wait_x_wait_in_other_role::build(),
        ),
        (
            "tests/ui/remote-arrive/pass/before-cluster-sync.rs",
            remote_arrive_x_before_cluster_sync::build(),
        ),
        (
            "tests/ui/remote-arrive/pass/no-cluster.rs",
            remote_arrive_x_no_cluster::build(),
        ),
        (
            "tests/ui/ring-refill/pass/refill-after-cluster-barrier.rs",
            ring_refill_x_refill_after_cluster_barrier::build(),
        ),
        (
            "tests/ui/ring-refill/pass/refill-after-release.rs",
            ring_refill_x_refill_after_release::build(),
        ),
        (
            "tests/ui/role-access/pass/barrier-wrong-role.rs",
            role_access_x_barrier_wrong_role::build(),
        ),
        (
            "tests/ui/role-access/pass/buffer-outside-roles.rs",
            role_access_x_buffer_outside_roles::build(),
        ),
        (
            "tests/ui/role-access/pass/send-from-undeclared-role.rs",
            role_access_x_send_from_undeclared_role::build(),
        ),
        (
            "tests/ui/register-budget/pass/budget-range.rs",
            register_budget_x_budget_range::build(),
        ),
        (
            "tests/ui/register-budget/pass/not-warpgroup-aligned.rs",
            register_budget_x_not_warpgroup_aligned::build(),
        ),
        (
            "tests/ui/register-budget/pass/over-budget.rs",
            register_budget_x_over_budget::build(),
        ),
        ("tests/ui/roles/pass/empty.rs", roles_x_empty::build()),
        (
            "tests/ui/roles/pass/not-warp-aligned.rs",
            roles_x_not_warp_aligned::build(),
        ),
        (
            "tests/ui/roles/pass/outside-block.rs",
            roles_x_outside_block::build(),
        ),
        ("tests/ui/roles/pass/overlap.rs", roles_x_overlap::build()),
        (
            "tests/ui/send-before-cluster-sync/pass/init-after-cluster-barrier.rs",
            send_before_cluster_sync_x_init_after_cluster_barrier::build(),
        ),
        (
            "tests/ui/send-before-cluster-sync/pass/never-initialised.rs",
            send_before_cluster_sync_x_never_initialised::build(),
        ),
        (
            "tests/ui/send-before-cluster-sync/pass/no-cluster-wait.rs",
            send_before_cluster_sync_x_no_cluster_wait::build(),
        ),
        (
            "tests/ui/send-before-cluster-sync/pass/wait-in-other-role.rs",
            send_before_cluster_sync_x_wait_in_other_role::build(),
        ),
        (
            "tests/ui/shared-bounds/pass/load-2d.rs",
            shared_bounds_x_load_2d::build(),
        ),
        (
            "tests/ui/shared-bounds/pass/send-vector.rs",
            shared_bounds_x_send_vector::build(),
        ),
        (
            "tests/ui/shared-bounds/pass/store.rs",
            shared_bounds_x_store::build(),
        ),
        (
            "tests/ui/syntax/pass/break-out-of-runtime-loop.rs",
            syntax_x_break_out_of_runtime_loop::build(),
        ),
        (
            "tests/ui/syntax/pass/constant-extent.rs",
            syntax_x_constant_extent::build(),
        ),
        (
            "tests/ui/syntax/pass/evict-first-not-a-tensor.rs",
            syntax_x_evict_first_not_a_tensor::build(),
        ),
        (
            "tests/ui/syntax/pass/stage-through-shared-not-a-tensor.rs",
            syntax_x_stage_through_shared_not_a_tensor::build(),
        ),
        (
            "tests/ui/syntax/pass/store-through-shared-not-a-tensor.rs",
            syntax_x_store_through_shared_not_a_tensor::build(),
        ),
        (
            "tests/ui/syntax/pass/zero-wave.rs",
            syntax_x_zero_wave::build(),
        ),
        (
            "tests/ui/tx-bytes/pass/arrive-expect-tx.rs",
            tx_bytes_x_arrive_expect_tx::build(),
        ),
        (
            "tests/ui/tx-bytes/pass/multicast.rs",
            tx_bytes_x_multicast::build(),
        ),
        (
            "tests/ui/tx-bytes/pass/too-few.rs",
            tx_bytes_x_too_few::build(),
        ),
        (
            "tests/ui/tx-bytes/pass/too-many.rs",
            tx_bytes_x_too_many::build(),
        ),
        (
            "tests/ui/tx-bytes/pass/vector-lanes.rs",
            tx_bytes_x_vector_lanes::build(),
        ),
        (
            "tests/ui/unarmed-wait/pass/armed-another-barrier.rs",
            unarmed_wait_x_armed_another_barrier::build(),
        ),
        (
            "tests/ui/unarmed-wait/pass/never-armed.rs",
            unarmed_wait_x_never_armed::build(),
        ),
        (
            "tests/ui/unarmed-wait/pass/remote-sends-only.rs",
            unarmed_wait_x_remote_sends_only::build(),
        ),
    ];
    // Every twin on disk is in the list (a new one must be added above).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut on_disk: Vec<String> = std::fs::read_dir(root.join("tests/ui"))
        .unwrap()
        .flat_map(|cat| {
            std::fs::read_dir(cat.unwrap().path().join("pass"))
                .into_iter()
                .flatten()
        })
        .map(|f| {
            let p = f.unwrap().path();
            p.strip_prefix(root).unwrap().to_string_lossy().into_owned()
        })
        .filter(|p| p.ends_with(".rs"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = kernels.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "the twins on disk and in this test differ");
    let mut ran = 0;
    let mut refused = Vec::new();
    let mut races = Vec::new();
    for (file, k) in &kernels {
        for (seed, hold_back) in [
            (None, false),
            (Some(1), false),
            (Some(2), true),
            (Some(3), true),
        ] {
            let dev = SimDevice::with_options(SimOptions {
                seed,
                hold_back,
                ..SimOptions::default()
            });
            match smoke(&dev, k) {
                Ok(()) => ran += 1,
                Err(RuntimeError::Sim(
                    e @ (SimError::Race(_) | SimError::GlobalRace(_) | SimError::AtExit(_)),
                )) => {
                    races.push(format!(
                        "{file} (seed {seed:?}, hold-back {hold_back}): {e}"
                    ));
                    break;
                }
                Err(e) => {
                    refused.push(format!(
                        "{file}: {}",
                        e.to_string().lines().next().unwrap_or("")
                    ));
                    break;
                }
            }
        }
    }
    refused.sort();
    refused.dedup();
    eprintln!(
        "{ran} clean runs; generic launch refused for:\n  {}",
        refused.join("\n  ")
    );
    assert!(races.is_empty(), "{}", races.join("\n\n"));
    // Most twins must actually run, or this test proves nothing.
    assert!(
        ran >= 4 * (kernels.len() - refused.len()) && refused.len() * 4 <= kernels.len(),
        "{refused:#?}"
    );
}

//! Every configuration of the matrix, the seed's default configurations of
//! heads 6 / 12 / 32 at batch 1 / 64, and the tuned schedule of every point
//! of the checked-in autotune table (as `run` launches it, strides
//! specialised for contiguous tensors) compile to PTX that
//! `ptxas -arch=sm_90a` assembles with zero spills.

mod common;

use common::MATRIX;
use kda_split::KdaConfig;
use kda_split::kernel::{Dtypes, build};
use kda_split::run::contiguous_kernel;
use kda_split::testing::assembles_without_spills;
use kda_split::tuned::{RawSchedule, TunedTable};

fn assemble(label: &str, cfg: &KdaConfig) -> bool {
    let kernel = build(cfg, &Dtypes::default()).expect("bf16 arguments are supported");
    assembles_without_spills(label, &kernel)
}

#[test]
fn matrix_assembles_without_spills() {
    let spilled: Vec<String> = MATRIX
        .iter()
        .filter(|p| !assemble(&p.label(), &p.config()))
        .map(|p| p.label())
        .collect();
    assert!(
        spilled.is_empty(),
        "configurations that spill: {spilled:#?}"
    );
}

#[test]
fn defaults_assemble_without_spills() {
    for heads in [6, 12, 32] {
        for batch in [1, 64] {
            let cfg = KdaConfig::new(heads, batch, 0, true, &[0, 0, 0], 1).unwrap();
            assert!(assemble(&format!("defaults H{heads} B{batch}"), &cfg));
        }
    }
}

#[test]
fn tuned_schedules_assemble_without_spills() {
    let table = TunedTable::builtin();
    assert!(!table.points.is_empty());
    let spilled: Vec<String> = table
        .points
        .iter()
        .filter(|p| {
            let cfg = KdaConfig::new(p.heads, p.batch, 0, true, p.schedule.entries(), p.tokens)
                .unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            let kernel =
                contiguous_kernel(&cfg, false).unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            !assembles_without_spills(&format!("tuned {} {:?}", p.name(), p.schedule), &kernel)
        })
        .map(|p| p.name())
        .collect();
    assert!(
        spilled.is_empty(),
        "tuned schedules that spill: {spilled:#?}"
    );
}

/// Schedule entry 6 (bulk_store) on the tuned schedule of every T > 1 point
/// of the table.
#[test]
fn bulk_store_variants_of_tuned_schedules_assemble_without_spills() {
    let table = TunedTable::builtin();
    let multi: Vec<_> = table.points.iter().filter(|p| p.tokens > 1).collect();
    assert!(!multi.is_empty());
    let spilled: Vec<String> = multi
        .iter()
        .filter(|p| {
            let mut raw = p.schedule;
            raw.0[5] = 1;
            let cfg = KdaConfig::new(p.heads, p.batch, 0, true, raw.entries(), p.tokens)
                .unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            let kernel =
                contiguous_kernel(&cfg, false).unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            !assembles_without_spills(&format!("bulk store {} {raw:?}", p.name()), &kernel)
        })
        .map(|p| p.name())
        .collect();
    assert!(
        spilled.is_empty(),
        "bulk-store variants that spill: {spilled:#?}"
    );
}

/// Schedule entry 7 (balance) reaches the kernel's launch and its PTX (a
/// comment above the entry: PTX has no directive for the policy, the
/// runtime adds it to each launch), and nothing else of the PTX changes.
/// Balance twins (schedules differing only in entry 7) build the same kernel
/// but for the launch policy and the comment naming it, at T = 1 and at
/// T > 1 with bulk_store on: the kernel `run` launches for contiguous
/// tensors, which the autotune's spill check assembles once for both
/// ([`RawSchedule::without_balance`]).
#[test]
fn balance_is_the_launch_policy_and_leaves_the_code_alone() {
    use kda::ir::ClusterPolicy;
    use kda::ir::pipeline::{Options, compile};
    let ptx = |tokens: u32, schedule: &RawSchedule| {
        let cfg = KdaConfig::new(12, 64, 0, true, schedule.entries(), tokens).unwrap();
        let kernel = contiguous_kernel(&cfg, false).unwrap();
        let policy = kernel.launch.cluster_policy;
        (policy, compile(&kernel, &Options::default()).unwrap().ptx)
    };
    for (tokens, off) in [(1, [2, 8, 0, 2, 1, 0, 0]), (4, [0, 16, 0, 4, 0, 1, 0])] {
        let (off, on) = (
            RawSchedule(off),
            RawSchedule([off[0], off[1], off[2], off[3], off[4], off[5], 1]),
        );
        assert_eq!(on.without_balance(), off);
        let (off_policy, off_ptx) = ptx(tokens, &off);
        let (on_policy, on_ptx) = ptx(tokens, &on);
        assert_eq!(
            (off_policy, on_policy),
            (ClusterPolicy::Default, ClusterPolicy::LoadBalancing),
            "T = {tokens}"
        );
        let comment = "// cluster scheduling policy: balance";
        assert!(
            on_ptx.contains(comment) && !off_ptx.contains(comment),
            "T = {tokens}"
        );
        let without: String = on_ptx
            .lines()
            .filter(|l| !l.starts_with(comment))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(without, off_ptx, "T = {tokens}");
    }
}

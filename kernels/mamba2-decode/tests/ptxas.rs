//! Every configuration of the matrix, the model shapes (Mamba-2 2.7B's 80
//! heads in one group, Codestral / Nemotron-H's 128 heads in 8 groups,
//! tensor-parallel slices) and the largest head (P = 128, N = 256), with bf16
//! and f32 conv weights, compile to PTX that `ptxas -arch=sm_90a` assembles
//! with zero spills, with both default schedules: the small-batch one
//! (`Schedule::for_config`) and, where it differs, the one from
//! `TUNED_BATCH` requests on (`Schedule::for_batch`).

mod common;

use common::{KNOBS, MATRIX, model};
use kda_host::testing::assembles_without_spills;
use mamba2_decode::kernel::{Plan, Schedule, TUNED_BATCH, build_with, sweep_schedules};

#[test]
fn matrix_and_model_shapes_assemble_without_spills() {
    let mut points: Vec<_> = MATRIX.iter().map(|p| (p.label(), p.config())).collect();
    // The bench's shape, whose large-batch default is `c4 early bal`.
    for (heads, n_groups) in [(80, 1), (128, 8), (10, 1), (16, 1), (24, 1)] {
        let p = model(heads, n_groups);
        points.push((p.label(), p.config()));
    }
    let mut largest = model(2, 1);
    (largest.head_dim, largest.d_state) = (128, 256);
    points.push((largest.label(), largest.config()));

    let mut spilled = Vec::new();
    for (label, cfg) in &points {
        let small = Schedule::for_config(cfg);
        let large = Schedule::for_batch(cfg, TUNED_BATCH);
        let schedules = if large == small {
            vec![small]
        } else {
            vec![small, large]
        };
        for schedule in schedules {
            let plan = Plan::with(cfg, &schedule).unwrap();
            for f32_weights in [false, true] {
                let label = format!(
                    "{label} f32 weights {f32_weights} [{}], {plan:?}",
                    schedule.label()
                );
                let kernel = build_with(cfg, f32_weights, f32_weights, &schedule).unwrap();
                if !assembles_without_spills(&label, &kernel) {
                    spilled.push(label);
                }
            }
        }
    }
    assert!(
        spilled.is_empty(),
        "configurations that spill: {spilled:#?}"
    );
}

#[test]
fn schedule_knobs_and_bench_sweep_assemble_without_spills() {
    let mut spilled = Vec::new();
    for p in &KNOBS {
        let kernel = build_with(&p.config(), false, false, &p.schedule).unwrap();
        if !assembles_without_spills(&p.label(), &kernel) {
            spilled.push(p.label());
        }
    }
    // The bench's shape: a TP slice of Mamba-2 2.7B (24 heads, one group).
    let cfg = model(24, 1).config();
    for schedule in sweep_schedules() {
        let label = format!("H24 G1 P64 N128 [{}]", schedule.label());
        let kernel = build_with(&cfg, false, false, &schedule).unwrap();
        if !assembles_without_spills(&label, &kernel) {
            spilled.push(label);
        }
    }
    assert!(spilled.is_empty(), "spills: {spilled:#?}");
}

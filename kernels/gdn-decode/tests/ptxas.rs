//! Every configuration of the matrix, every lane width of a Qwen3-Next-like
//! configuration (HK 16, HV 32) at every T, and f32 weights assemble with
//! `ptxas -arch=sm_90a` without spills.

mod common;

use common::{KNOBS, MATRIX};
use gdn_decode::GdnConfig;
use gdn_decode::kernel::{Dtypes, Schedule, build};
use kda_host::testing::assembles_without_spills;
use kda_ir::Scalar;

fn assemble(label: &str, cfg: &GdnConfig, dt: &Dtypes, schedule: &Schedule) -> bool {
    let kernel = build(cfg, dt, schedule).unwrap_or_else(|e| panic!("{label}: {e}"));
    assembles_without_spills(label, &kernel)
}

#[test]
fn matrix_assembles_without_spills() {
    let spilled: Vec<String> = MATRIX
        .iter()
        .chain(KNOBS)
        .filter(|p| !assemble(&p.label(), &p.config(), &Dtypes::default(), &p.schedule()))
        .map(|p| p.label())
        .collect();
    assert!(spilled.is_empty(), "spills: {spilled:#?}");
}

#[test]
fn every_lane_width_and_token_count_assembles_without_spills() {
    let mut spilled = Vec::new();
    for tokens in 1..=4 {
        for lanes in [8, 16, 32] {
            let cfg = GdnConfig::new(16, 32, tokens, true).unwrap();
            let label = format!("HK16 HV32 T{tokens} lanes{lanes}");
            if !assemble(&label, &cfg, &Dtypes::default(), &Schedule::lanes(lanes)) {
                spilled.push(label);
            }
        }
    }
    assert!(spilled.is_empty(), "spills: {spilled:#?}");
}

#[test]
fn bench_sweep_schedules_assemble_without_spills() {
    // The bench's shapes: Qwen3-Next's TP slice (HK 4, HV 8), T = 1 and 4.
    let mut spilled = Vec::new();
    for tokens in [1, 4] {
        let cfg = GdnConfig::new(4, 8, tokens, true).unwrap();
        for schedule in gdn_decode::kernel::sweep_schedules(tokens) {
            let label = format!("HK4 HV8 T{tokens} {}", schedule.label());
            if !assemble(&label, &cfg, &Dtypes::default(), &schedule) {
                spilled.push(label);
            }
        }
    }
    assert!(spilled.is_empty(), "spills: {spilled:#?}");
}

#[test]
fn f32_weights_assemble_without_spills() {
    let dt = Dtypes {
        conv_weight: Scalar::F32,
        conv_bias: Scalar::F32,
        norm_weight: Scalar::F32,
    };
    let cfg = GdnConfig::new(16, 32, 4, true).unwrap();
    assert!(assemble("f32 weights T4", &cfg, &dt, &Schedule::default()));
}

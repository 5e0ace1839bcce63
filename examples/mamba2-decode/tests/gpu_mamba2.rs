//! The Mamba-2 decode kernel on the GPU: the configuration matrix against the
//! float64 reference and against the simulator, plus the model shapes
//! (clusters of 12 and 16, five heads per CTA) against the reference. Skips
//! where there is no CUDA driver.

mod common;

use common::{Point, model};
use kda_host::testing::run_matrix;
use kda_runtime::cuda::gpu_or_skip;

#[test]
fn matrix_on_the_gpu_matches_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    common::check_matrix(&gpu, true);
}

#[test]
fn model_shapes_on_the_gpu_match_the_reference() {
    let Some(gpu) = gpu_or_skip() else { return };
    // Mamba-2 2.7B (80 heads in one group: clusters of 16, 5 heads per CTA),
    // Nemotron-H / Codestral (128 heads in 8 groups: clusters of 16) and a
    // tensor-parallel slice at batch 32 (24 heads: clusters of 12).
    let points = [(80, 1, 4), (128, 8, 2), (24, 1, 32)].map(|(heads, n_groups, requests)| Point {
        requests,
        ..model(heads, n_groups)
    });
    run_matrix(&gpu, points, Point::label, |dev, point| {
        common::check(dev, point, u64::from(point.heads), false)
    })
    .assert_all_passed();
}

/// Benchmark rows for docs/perf.md: µs per step and state traffic at batch 1
/// and 128 (a tensor-parallel slice of Mamba-2 2.7B: 24 heads of 64 × 128,
/// one group), one graph of 32 PDL-chained steps, median of 50 replays. The
/// same slots are reused by every step, so batch 1 (3 MiB of state) stays in
/// L2.
#[test]
fn bench_rows() {
    let Some(gpu) = gpu_or_skip() else { return };
    for requests in [1usize, 128] {
        let cfg = mamba2_decode::Mamba2Config::new(24, 1).unwrap();
        let args =
            mamba2_decode::generate(&cfg, &mamba2_decode::GenOptions::new(requests).padding(0.0));
        let prepared =
            mamba2_decode::run::prepare(&gpu, &cfg, &args).unwrap_or_else(|e| panic!("{e}"));
        let us = prepared.time_step(&gpu, 32, 50).unwrap();
        let bytes = requests as f64 * 24.0 * 64.0 * 128.0 * 4.0 * 2.0;
        let tbs = bytes / (us as f64 * 1e-6) / 1e12;
        println!("bench mamba2 H24 G1 P64 N128 B{requests}: {us:.2} µs/step, state {tbs:.3} TB/s");
    }
}

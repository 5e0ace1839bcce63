//! The Mamba-2 decode kernel on the GPU: the configuration matrix against the
//! float64 reference and against the simulator, plus the model shapes
//! (clusters of 12 and 16, five heads per CTA) against the reference, and one
//! point per schedule knob. Skips where there is no CUDA driver. (Timing is
//! `decode-bench`'s: state rotated over 4x L2, against the copy ceiling.)

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
fn schedule_knobs_on_the_gpu_match_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    common::check_knobs(&gpu, true);
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

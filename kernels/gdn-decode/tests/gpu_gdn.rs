//! The GDN decode kernel on the GPU: the configuration matrix and one point
//! per schedule knob against the float64 reference and against the
//! simulator. Skips where there is no CUDA driver. (Timing is
//! `decode-bench`'s: state rotated over 4x L2, against the copy ceiling.)

mod common;

use kda_runtime::cuda::gpu_or_skip;

#[test]
fn matrix_on_the_gpu_matches_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    common::check_matrix(&gpu, true).assert_all_passed();
}

#[test]
fn schedule_knobs_on_the_gpu_match_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    common::check_knobs(&gpu, true).assert_all_passed();
}

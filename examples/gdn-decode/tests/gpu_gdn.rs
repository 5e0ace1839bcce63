//! The GDN decode kernel on the GPU: the configuration matrix against the
//! float64 reference and against the simulator. Skips where there is no
//! CUDA driver.

mod common;

use kda_runtime::cuda::gpu_or_skip;

#[test]
fn matrix_on_the_gpu_matches_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    common::check_matrix(&gpu, true).assert_all_passed();
}

/// Benchmark rows for docs/perf.md: µs per step and state traffic at batch 1
/// and 128 (Qwen3-Next's TP-slice shape: 4 k-heads, 8 v-heads; T = 1), one
/// graph of 32 PDL-chained steps, median of 50 replays. The same slots are
/// reused by every step, so batch 1 (4 MiB of state) stays in L2.
#[test]
fn bench_rows() {
    let Some(gpu) = gpu_or_skip() else { return };
    for requests in [1usize, 128] {
        let cfg = gdn_decode::GdnConfig::new(4, 8, 1, true).unwrap();
        let args = gdn_decode::generate(
            &cfg,
            &gdn_decode::GenOptions::new(requests)
                .padding(0.0)
                .holes(0.0),
        );
        let schedule = gdn_decode::kernel::Schedule::default();
        let prepared = gdn_decode::run::prepare(&gpu, &cfg, &args, &schedule)
            .unwrap_or_else(|e| panic!("{e}"));
        let us = prepared.time_step(&gpu, 32, 50).unwrap();
        let bytes = requests as f64 * 8.0 * 128.0 * 128.0 * 4.0 * 2.0;
        let tbs = bytes / (us as f64 * 1e-6) / 1e12;
        println!("bench gdn HK4 HV8 T1 B{requests}: {us:.2} µs/step, state {tbs:.3} TB/s");
    }
}

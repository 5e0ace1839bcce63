//! KdaSplit on the GPU: the configuration matrix against the float64
//! reference and against the simulator. Skips where there is no CUDA driver.
//! For compute-sanitizer, which is slow: `KDA_GPU_ONE_PER_EARLY=1` runs the
//! first configuration of each early level only, `KDA_GPU_POINTS=0,4` the
//! listed matrix points only (`KDA_GPU_POINTS=17,18,19`: the bulk_store
//! points, schedule entry 6).

mod common;

use common::MATRIX;
use kda_runtime::{SimDevice, cuda::gpu_or_skip};
use kda_split::{compare, run::run};

#[test]
fn matrix_on_the_gpu_matches_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    let one_per_early = std::env::var_os("KDA_GPU_ONE_PER_EARLY").is_some();
    let points: Option<Vec<usize>> = std::env::var("KDA_GPU_POINTS").ok().map(|v| {
        v.split(',')
            .map(|n| n.trim().parse().expect("KDA_GPU_POINTS: indices"))
            .collect()
    });
    let mut seen_early = [false; 4];
    let mut failed = Vec::new();
    for (n, point) in MATRIX.iter().enumerate() {
        let early = point.schedule[0] as usize;
        if one_per_early && std::mem::replace(&mut seen_early[early], true) {
            continue;
        }
        if points.as_ref().is_some_and(|p| !p.contains(&n)) {
            continue;
        }
        let case = point.case(100 + n as u64);
        let cfg = point.config();
        let expected = case.expected.as_ref().unwrap();
        let got = run(&gpu, &cfg, &case.args).unwrap_or_else(|e| panic!("{}: {e}", point.label()));
        let sim = run(&SimDevice::new(), &cfg, &case.args)
            .unwrap_or_else(|e| panic!("{}: {e}", point.label()));
        let report = compare(&cfg, &case.args, &got, expected);
        let out_diff = got
            .output
            .iter()
            .zip(&sim.output)
            .filter(|(a, b)| a != b)
            .count();
        let max_ulp = got
            .output
            .iter()
            .zip(&sim.output)
            .map(|(a, b)| kda_split::compare::ulp_distance(*a, *b))
            .max()
            .unwrap_or(0);
        let state_diff = got
            .state
            .iter()
            .zip(&sim.state)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let conv_same = got.conv_state == sim.conv_state;
        println!(
            "{} {}: vs reference {}; vs simulator: {out_diff} outputs differ (max {max_ulp} bf16 ulp), state max |diff| {state_diff:.2e}, conv state {}",
            if report.passed() { "ok  " } else { "FAIL" },
            point.label(),
            if report.passed() {
                "within tolerance"
            } else {
                "OUT OF TOLERANCE"
            },
            if conv_same { "identical" } else { "DIFFERS" },
        );
        if !report.passed() || !conv_same {
            println!("{report}");
            failed.push(point.label());
        }
    }
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

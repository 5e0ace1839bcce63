//! The GDN decode kernel on the GPU: the configuration matrix against the
//! float64 reference and against the simulator. Skips where there is no
//! CUDA driver.

mod common;

use common::MATRIX;
use gdn_decode::run::run_with;
use gdn_decode::{compare, reference};
use kda_runtime::{SimDevice, cuda::gpu_or_skip};
use kda_split::testing::{Agreement, Verdicts};

#[test]
fn matrix_on_the_gpu_matches_the_reference_and_the_simulator() {
    let Some(gpu) = gpu_or_skip() else { return };
    let mut verdicts = Verdicts::default();
    for (n, point) in MATRIX.iter().enumerate() {
        let (cfg, args) = (point.config(), point.args(100 + n as u64));
        let expected = reference(&cfg, &args).unwrap();
        let schedule = point.schedule();
        let got = run_with(&gpu, &cfg, &args, &schedule)
            .unwrap_or_else(|e| panic!("{}: {e}", point.label()));
        let sim = run_with(&SimDevice::new(), &cfg, &args, &schedule)
            .unwrap_or_else(|e| panic!("{}: {e}", point.label()));
        let agreement = Agreement::of(&got, &sim);
        let report = compare(&cfg, &args, &got, &expected);
        let note = format!(": vs simulator: {agreement}");
        verdicts.record(&point.label(), &report, agreement.conv_identical, &note);
    }
    verdicts.assert_all_passed();
}

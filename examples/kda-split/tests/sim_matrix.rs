//! KdaSplit on the CPU simulator across the configuration matrix, against
//! the float64 reference with the spec's tolerances (runs in CI).

mod common;

use common::MATRIX;
use kda_runtime::{SimDevice, SimOptions};
use kda_split::{compare, run::run};

#[test]
fn matrix_matches_the_reference() {
    let dev = SimDevice::new();
    let mut failed = Vec::new();
    for (n, point) in MATRIX.iter().enumerate() {
        let case = point.case(100 + n as u64);
        let cfg = point.config();
        let result = run(&dev, &cfg, &case.args);
        match result {
            Ok(actual) => {
                let report = compare(&cfg, &case.args, &actual, case.expected.as_ref().unwrap());
                println!(
                    "{} {}",
                    if report.passed() { "ok  " } else { "FAIL" },
                    point.label()
                );
                if !report.passed() {
                    println!("{report}");
                    failed.push(point.label());
                }
            }
            Err(e) => {
                println!("ERR  {}: {e}", point.label());
                failed.push(point.label());
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} configurations failed: {failed:#?}",
        failed.len(),
        MATRIX.len()
    );
}

#[test]
fn random_interleavings_give_the_same_result() {
    let point = &MATRIX[9];
    let case = point.case(7);
    let cfg = point.config();
    let base = run(&SimDevice::new(), &cfg, &case.args).unwrap();
    for seed in 1..4 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..Default::default()
        });
        let shaken = run(&dev, &cfg, &case.args).unwrap();
        assert_eq!(base, shaken, "interleaving seed {seed} changed the result");
    }
}

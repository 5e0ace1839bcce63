//! KdaSplit on the CPU simulator across the configuration matrix, against
//! the float64 reference with the spec's tolerances (runs in CI).

mod common;

use common::{MATRIX, padding_and_holes};
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

/// The bulk_store points' cases (the seeds this test and `gpu_kda` use)
/// hold a padding request and a write hole, so the GPU run checks that a
/// token's bulk store is skipped for a hole and nothing is stored for
/// padding.
#[test]
fn bulk_store_points_have_padding_and_a_write_hole() {
    let mut n_bulk = 0;
    for (n, point) in MATRIX.iter().enumerate() {
        if !point.bulk_store() {
            continue;
        }
        n_bulk += 1;
        let case = point.case(100 + n as u64);
        let (padding, holes) = padding_and_holes(&case, point.tokens as usize);
        assert!(
            padding > 0 && holes > 0,
            "{} (point {n}): {padding} padding requests, {holes} write holes",
            point.label()
        );
    }
    assert_eq!(n_bulk, 3);
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

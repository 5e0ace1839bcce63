//! KdaSplit on the CPU simulator across the configuration matrix, against
//! the float64 reference with the spec's tolerances (runs in CI); the
//! persistent schedule's points (`common::PERSISTENT`) on a persistent grid
//! smaller than their work, bit-identical to the one-item kernel.

mod common;

use common::{MATRIX, PERSISTENT};
use kda_runtime::{SimDevice, SimOptions};
use kda_split::{Request, compare, resolve, run::run};

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

fn sim(resident_clusters: u32, seed: Option<u64>) -> SimDevice {
    SimDevice::with_options(SimOptions {
        resident_clusters,
        seed,
        ..Default::default()
    })
}

/// `KDA_PERSIST_POINT=n` runs point `n` only.
#[test]
fn persistent_matches_the_one_item_kernel_and_the_reference() {
    let only: Option<usize> = std::env::var("KDA_PERSIST_POINT")
        .ok()
        .map(|v| v.parse().unwrap());
    let mut failed = Vec::new();
    let (mut padding, mut holes) = (0, 0);
    for (n, &(ref point, resident)) in PERSISTENT.iter().enumerate() {
        if only.is_some_and(|o| o != n) {
            continue;
        }
        let case = point.case(300 + n as u64);
        for b in 0..point.batch {
            match resolve(point.tokens, &case.args, b) {
                Request::Padding => padding += 1,
                Request::Active { writes, .. } => {
                    holes += writes.iter().filter(|w| w.is_none()).count()
                }
            }
        }
        let cfg = point.persistent_config();
        let label = format!("{} persistent over {resident} clusters", point.label());
        let one_item = run(&SimDevice::new(), &point.config(), &case.args).unwrap();
        match run(&sim(resident, None), &cfg, &case.args) {
            Ok(actual) => {
                let report = compare(&cfg, &case.args, &actual, case.expected.as_ref().unwrap());
                let same = actual == one_item;
                println!(
                    "{} {label}: reference {}, one-item kernel {}",
                    if report.passed() && same {
                        "ok  "
                    } else {
                        "FAIL"
                    },
                    if report.passed() { "ok" } else { "FAILED" },
                    if same { "bit-identical" } else { "DIFFERS" }
                );
                if !report.passed() || !same {
                    println!("{report}");
                    failed.push(label);
                }
            }
            Err(e) => {
                println!("ERR  {label}: {e}");
                failed.push(label);
            }
        }
    }
    assert!(failed.is_empty(), "failed: {failed:#?}");
    // The seeded cases do exercise padding requests and write holes.
    if only.is_none() {
        assert!(
            padding > 0 && holes > 0,
            "{padding} padding requests, {holes} holes"
        );
    }
}

#[test]
fn staged_persistent_is_the_same_under_random_interleavings() {
    let (point, resident) = &PERSISTENT[0];
    let resident = *resident;
    let case = point.case(7);
    let cfg = point.persistent_config();
    let base = run(&sim(resident, None), &cfg, &case.args).unwrap();
    for seed in 1..3 {
        let shaken = run(&sim(resident, Some(seed)), &cfg, &case.args).unwrap();
        assert_eq!(base, shaken, "interleaving seed {seed} changed the result");
    }
}

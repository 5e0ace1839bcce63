//! The GDN decode kernel on the CPU simulator across the configuration
//! matrix, against the float64 reference with the crate's tolerances.

mod common;

use common::MATRIX;
use gdn_decode::run::run_with;
use gdn_decode::{Request, resolve};
use kda_runtime::{SimDevice, SimOptions};

#[test]
fn matrix_matches_the_reference() {
    let (mut padding, mut holes) = (0, 0);
    for (n, point) in MATRIX.iter().enumerate() {
        let (cfg, args) = (point.config(), point.args(100 + n as u64));
        for b in 0..args.requests() {
            match resolve(&cfg, &args, b) {
                Request::Padding => padding += 1,
                Request::Active { writes, .. } => {
                    holes += writes.iter().filter(|w| w.is_none()).count()
                }
            }
        }
    }
    common::check_matrix(&SimDevice::new(), false).assert_all_passed();
    assert!(padding > 0 && holes > 0, "padding {padding}, holes {holes}");
}

#[test]
fn schedule_knobs_match_the_reference() {
    let (mut padding, mut holes) = (0, 0);
    for (n, point) in common::KNOBS.iter().enumerate() {
        let (cfg, args) = (point.config(), point.args(200 + n as u64));
        // Every point runs its schedule on at least one active request.
        assert!(
            (0..args.requests()).any(|b| matches!(resolve(&cfg, &args, b), Request::Active { .. })),
            "{}: every request is padding",
            point.label()
        );
        for b in 0..args.requests() {
            match resolve(&cfg, &args, b) {
                Request::Padding => padding += 1,
                Request::Active { writes, .. } => {
                    holes += writes.iter().filter(|w| w.is_none()).count()
                }
            }
        }
    }
    common::check_knobs(&SimDevice::new(), false).assert_all_passed();
    assert!(padding > 0 && holes > 0, "padding {padding}, holes {holes}");
}

#[test]
fn random_interleavings_give_the_same_result() {
    // Grouped heads (a cluster of 4), T = 3.
    let point = &MATRIX[6];
    let (cfg, args) = (point.config(), point.args(7));
    let base = run_with(&SimDevice::new(), &cfg, &args, &point.schedule()).unwrap();
    for seed in 1..4 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..Default::default()
        });
        let shaken = run_with(&dev, &cfg, &args, &point.schedule()).unwrap();
        assert_eq!(base, shaken, "interleaving seed {seed} changed the result");
    }
}

#[test]
fn holding_back_a_cta_gives_the_same_result() {
    // Grouped heads (a cluster of 4), T = 3. One CTA per cluster is held back until the others block or
    // exit: its conv-tap loads must still precede rank 0's rewrite of them.
    let point = &MATRIX[6];
    let (cfg, args) = (point.config(), point.args(7));
    let base = run_with(&SimDevice::new(), &cfg, &args, &point.schedule()).unwrap();
    for seed in 1..7 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            hold_back: true,
            ..Default::default()
        });
        assert_eq!(
            base,
            run_with(&dev, &cfg, &args, &point.schedule()).unwrap(),
            "hold-back seed {seed} changed the result"
        );
    }
}

#[test]
fn invalid_arguments_touch_nothing() {
    let point = &MATRIX[3];
    let (cfg, mut args) = (point.config(), point.args(1));
    args.eps = -1.0;
    let err = run_with(&SimDevice::new(), &cfg, &args, &point.schedule()).unwrap_err();
    assert!(err.to_string().contains("eps = -1 must be"), "{err}");
}

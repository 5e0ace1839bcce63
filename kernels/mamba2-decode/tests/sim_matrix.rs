//! The Mamba-2 decode kernel on the CPU simulator across the configuration
//! matrix, against the float64 reference with the crate's tolerances.

mod common;

use common::MATRIX;
use kda_runtime::{SimDevice, SimOptions};
use mamba2_decode::run::{RunError, run};

#[test]
fn matrix_matches_the_reference() {
    common::check_matrix(&SimDevice::new(), false);
}

#[test]
fn schedule_knobs_match_the_reference() {
    // Every point runs its schedule on at least one active request.
    for (n, point) in common::KNOBS.iter().enumerate() {
        let args = point.args(200 + n as u64);
        assert!(
            (0..args.requests()).any(|b| mamba2_decode::resolve(&args, b).is_some()),
            "{}: every request is padding",
            point.label()
        );
    }
    common::check_knobs(&SimDevice::new(), false);
}

#[test]
fn random_interleavings_give_the_same_result() {
    // A cluster of 8 CTAs sharing one group's conv state.
    let point = &MATRIX[7];
    let (cfg, args) = (point.config(), point.args(7));
    let base = run(&SimDevice::new(), &cfg, &args).unwrap();
    for seed in 1..3 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            ..Default::default()
        });
        assert_eq!(
            base,
            run(&dev, &cfg, &args).unwrap(),
            "interleaving seed {seed} changed the result"
        );
    }
}

#[test]
fn holding_back_a_cta_gives_the_same_result() {
    // A cluster of 8 CTAs sharing one group's conv state. One CTA per cluster is held back until the others block or
    // exit: its conv-tap loads must still precede rank 0's rewrite of them.
    let point = &MATRIX[7];
    let (cfg, args) = (point.config(), point.args(7));
    let base = run(&SimDevice::new(), &cfg, &args).unwrap();
    for seed in 1..7 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            hold_back: true,
            ..Default::default()
        });
        assert_eq!(
            base,
            run(&dev, &cfg, &args).unwrap(),
            "hold-back seed {seed} changed the result"
        );
    }
}

#[test]
fn invalid_arguments_touch_nothing() {
    let point = &MATRIX[0];
    let (cfg, mut args) = (point.config(), point.args(1));
    args.d = None;
    match run(&SimDevice::new(), &cfg, &args) {
        Err(RunError::Args(errors)) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
        }
        other => panic!("expected an argument error, got {other:?}"),
    }
}

//! Every step of the guide on the CPU simulator, against the float64
//! reference; the last one also under random warp interleavings and in a
//! PDL chain.

use guide::host::{Problem, max_error, run, upload};
use guide::step_5::ema_step::Args;
use kda::ir::Kernel;
use kda::runtime::{Device, SimDevice, SimOptions};

/// One step on `dev` matches the reference to float32 rounding.
fn check(dev: &SimDevice, kernel: &Kernel, channels: usize) {
    let p = Problem::new(6, channels, 7);
    let (state, y) = run(dev, kernel, &p).unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
    let (want_state, want_y) = p.reference();
    assert!(
        max_error(&state, &want_state) < 1e-6,
        "state of {}",
        kernel.name
    );
    assert!(max_error(&y, &want_y) < 1e-6, "y of {}", kernel.name);
}

#[test]
fn steps_1_to_4_match_the_reference() {
    let dev = SimDevice::new();
    check(&dev, &guide::step_1::ema_step(), 64);
    check(&dev, &guide::step_2::ema_step(), 64);
    check(&dev, &guide::step_3::ema_step(), 64);
    check(&dev, &guide::step_4::ema_step(), 64);
}

#[test]
fn step_5_matches_the_reference_for_every_cluster_size() {
    for seed in [None, Some(1), Some(2)] {
        let dev = SimDevice::with_options(SimOptions {
            seed, // random warp interleavings
            ..SimOptions::default()
        });
        for cluster in [1, 2, 4, 8] {
            for early in [false, true] {
                let kernel = guide::step_5::ema_step(cluster, early);
                check(&dev, &kernel, 32 * cluster as usize);
            }
        }
    }
}

#[test]
fn a_pdl_chain_of_two_layers() {
    // Layer 2 reads what layer 1 writes: its `x` is layer 1's `y`.
    let dev = SimDevice::new();
    let kernel = guide::step_5::ema_step(2, true);
    let module = dev.load(&kernel).unwrap();
    let first = Problem::new(4, 64, 1);
    let mut second = Problem::new(4, 64, 2);
    let one = upload(&dev, &first).unwrap();
    let two = upload(&dev, &second).unwrap();
    one.args()
        .launch(&dev, &module, first.launch(true))
        .unwrap();
    Args {
        x: one.y.arg(),
        ..two.args()
    }
    .launch(&dev, &module, second.launch(true))
    .unwrap();
    dev.synchronize().unwrap();

    let (_, y1) = first.reference();
    second.x = y1.iter().map(|&v| v as f32).collect();
    let (_, y2) = second.reference();
    let got = two.y.to_vec(&dev).unwrap();
    assert!(max_error(&got, &y2) < 1e-5);
}

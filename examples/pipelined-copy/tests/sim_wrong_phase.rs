//! What the simulator reports when a loop waits on the wrong phase: the
//! consumer below waits for phase 0 of `full` in every iteration (a
//! comptime phase, as `bar.wait()` in a runtime loop did before phases were
//! loop-carried), so from the second iteration on it does not wait for the
//! refill. Under some schedule the simulator stops it with an error naming
//! the barrier; the correct kernel (`sim_matrix`) passes every schedule.

use kda::cluster_kernel;
use kda_runtime::{Device, DeviceTensor, Launch, SimDevice, SimOptions};

#[cluster_kernel(block = 64)]
fn stale_phase(#[align(16)] x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 512, roles = [producer, consumer]);
    let empty = mbarrier!(arrivals = 32, roles = [producer, consumer], released);
    let tile = shared!(
        [f32; 128],
        align = 128,
        guard = full,
        roles = [producer, consumer]
    );
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            full.init();
            empty.init();
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in range(0, n) {
            empty.wait();
            if lane == 0 {
                full.arm();
                bulk_copy!(tile[0] = x[[i, 0]], bytes = 512, completes = full);
            }
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            full.wait_phase(0);
            for j in 0..4 {
                y[[i, 4 * lane + j]] = tile[4 * lane + j];
            }
            empty.arrive();
        }
    });
}

#[test]
fn a_stale_phase_in_a_loop_is_reported() {
    let rows = 6;
    let xs: Vec<f32> = (0..rows * 128).map(|i| i as f32).collect();
    let mut reports = Vec::new();
    for seed in 0..12u64 {
        let dev = SimDevice::with_options(SimOptions {
            seed: Some(seed),
            max_slice: 1 + (seed as u32 % 4) * 8,
            hold_back: seed % 2 == 1,
            ..SimOptions::default()
        });
        let module = dev.load(&stale_phase()).expect("the kernel loads");
        let x = DeviceTensor::upload(&dev, &xs, [rows, 128]).expect("upload");
        let y = DeviceTensor::<SimDevice, f32, 2>::zeros(&dev, [rows, 128]).expect("zeros");
        let args = stale_phase::Args::<SimDevice> {
            x: x.arg(),
            y: y.arg(),
            n: rows as u32,
        };
        match args.launch(&dev, &module, Launch::grid([1, 1, 1])) {
            Err(e) => reports.push(e.to_string()),
            Ok(()) => {
                let got = y.to_vec(&dev).expect("download");
                assert_ne!(
                    got, xs,
                    "seed {seed}: the stale wait went unnoticed and copied right"
                );
                reports.push("wrong data".into());
            }
        }
    }
    // Every schedule goes wrong; the reports name the barrier and the roles.
    let named = reports
        .iter()
        .filter(|r| r.contains("`full`") && r.contains("role `consumer`"))
        .count();
    assert!(
        named > 0,
        "no report names the barrier and the role: {reports:#?}"
    );
    println!("{}", reports[0]);
}

//! Loop-carried mbarrier phases through nested runtime loops, a runtime
//! `while` and a runtime `if`, on the simulator under seeded schedules and
//! hold-back: the producer fills one buffer `n * m` times in a `while`
//! loop, the consumer drains it in two nested `for` loops (its waits carry
//! the phase through both), and a runtime `if` waits in one branch only.

use kda::cluster_kernel;
use kda::runtime::{Device, DeviceTensor, Launch, SimDevice, SimOptions};

#[cluster_kernel(block = 64)]
fn nested(#[align(16)] x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>, n: u32, m: u32) {
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
        let mut r = val::<u32>(0);
        while r < n * m {
            empty.wait();
            if lane == 0 {
                full.arm();
                bulk_copy!(tile[0] = x[[r, 0]], bytes = 512, completes = full);
            }
            r += 1;
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            for j in range(0, m) {
                let r = i * m + j;
                // Each branch waits: both paths advance the phase once.
                if r % 2 == 1 {
                    full.wait();
                } else {
                    full.wait();
                    fence_proxy_async();
                }
                for e in 0..4 {
                    y[[r, 4 * lane + e]] = tile[4 * lane + e] + 1.0;
                }
                empty.arrive();
            }
        }
    });
}

#[test]
fn phases_carry_through_nested_loops_a_while_and_an_if() {
    for (n, m) in [(0, 3), (1, 1), (2, 3), (3, 2)] {
        let rows = (n * m).max(1) as usize;
        let xs: Vec<f32> = (0..rows * 128).map(|i| i as f32).collect();
        for seed in [None, Some(1), Some(2), Some(3)] {
            for hold_back in [false, true] {
                let dev = SimDevice::with_options(SimOptions {
                    seed,
                    hold_back,
                    ..SimOptions::default()
                });
                let module = dev.load(&nested()).unwrap_or_else(|e| panic!("{e}"));
                let x = DeviceTensor::upload(&dev, &xs, [rows, 128]).unwrap();
                let y = DeviceTensor::<SimDevice, f32, 2>::zeros(&dev, [rows, 128]).unwrap();
                let args = nested::Args::<SimDevice> {
                    x: x.arg(),
                    y: y.arg(),
                    n,
                    m,
                };
                args.launch(&dev, &module, Launch::grid([1, 1, 1]))
                    .unwrap_or_else(|e| {
                        panic!("n {n}, m {m}, {seed:?}, hold-back {hold_back}: {e}")
                    });
                let got = y.to_vec(&dev).unwrap();
                for (i, v) in got.iter().enumerate().take((n * m) as usize * 128) {
                    assert_eq!(*v, xs[i] + 1.0, "n {n}, m {m}, {seed:?}: element {i}");
                }
            }
        }
    }
}

#[test]
fn both_loops_carry_the_phase_bits() {
    let text = kda::ir::write::write_kernel(&nested());
    // The while loop and both for loops carry a u32 of phase bits; every
    // wait is a register-parity wait.
    assert!(!text.contains("phase "), "{text}");
    assert_eq!(text.matches("mbarrier.wait.parity").count(), 3, "{text}");
    kda::ir::verifier::verify(&nested()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    if std::env::var_os("DUMP").is_some() {
        println!("{text}");
    }
}

#[test]
fn the_nested_kernel_assembles_without_spills() {
    let ptx = kda::ir::pipeline::compile(&nested(), &kda::ir::pipeline::Options::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .ptx;
    if let Err(e) = kda::ir::ptxas::check_no_spills(&ptx) {
        panic!("{e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)");
    }
}

//! `Tensor::atomic_add` (`atom.global.add`): every thread of every CTA takes
//! a ticket from one counter and writes its id into the ticket's slot. The
//! tickets must be exactly 0..threads (no two threads get the same one,
//! none is skipped) and the counter must end at the total, under seeded
//! interleavings and hold-back on the simulator; the kernel assembles with
//! ptxas. A signed counter counts down through zero.

use kda::cluster_kernel;
use kda::runtime::{Device, DeviceTensor, Launch, SimDevice, SimOptions};

#[cluster_kernel(block = 64)]
fn take_tickets(queue: Tensor<u32, 1>, owner: Tensor<u32, n>, balance: Tensor<i32, 1>) {
    let me = block_idx(0) * 64 + thread_idx();
    let t = queue.atomic_add([0], 1u32);
    owner[[t]] = me;
    balance.atomic_add([0], -1i32);
}

/// One launch of `ctas` CTAs on `dev`, then the checks: the counter ends at
/// the thread count, `balance` (starting at 7) went down by one per thread,
/// and the tickets are exactly 0..threads.
fn take_and_check(
    dev: &SimDevice,
    module: &<SimDevice as Device>::Module,
    ctas: usize,
    what: &str,
) {
    let threads = ctas * 64;
    let queue = DeviceTensor::<SimDevice, u32, 1>::zeros(dev, [1]).unwrap();
    let owner = DeviceTensor::upload(dev, &vec![u32::MAX; threads], [threads]).unwrap();
    let balance = DeviceTensor::upload(dev, &[7i32], [1]).unwrap();
    take_tickets::Args::<SimDevice> {
        queue: queue.arg(),
        owner: owner.arg(),
        balance: balance.arg(),
    }
    .launch(dev, module, Launch::grid([ctas as u32, 1, 1]))
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(queue.to_vec(dev).unwrap(), [threads as u32], "{what}");
    assert_eq!(balance.to_vec(dev).unwrap(), [7 - threads as i32], "{what}");
    let mut owners = owner.to_vec(dev).unwrap();
    owners.sort_unstable();
    let want: Vec<u32> = (0..threads as u32).collect();
    assert_eq!(owners, want, "{what}: each thread owns one ticket");
}

#[test]
fn every_thread_gets_a_distinct_ticket() {
    let k = take_tickets();
    let text = kda::ir::write::write_kernel(&k);
    assert_eq!(text.matches("atom.add").count(), 2, "{text}");
    for seed in [None, Some(1), Some(2), Some(3)] {
        for hold_back in [false, true] {
            let opts = SimOptions {
                seed,
                hold_back,
                max_slice: 1 + 3 * seed.unwrap_or(0) as u32,
                ..SimOptions::default()
            };
            let dev = SimDevice::with_options(opts.clone());
            let module = dev.load(&k).unwrap_or_else(|e| panic!("{e}"));
            take_and_check(&dev, &module, 5, &format!("{opts:?}"));
        }
    }
}

/// Clusters run on several host threads: the simulator's `atom.add` has to
/// be one host atomic, or two CTAs simulated at once read the same old value
/// (a load-then-store did exactly that, and pipelined-copy's work queue then
/// handed one tile out twice).
#[test]
fn tickets_stay_distinct_when_ctas_run_on_several_host_threads() {
    let dev = SimDevice::with_options(SimOptions {
        threads: 8,
        ..SimOptions::default()
    });
    let module = dev.load(&take_tickets()).unwrap_or_else(|e| panic!("{e}"));
    for launch in 0..4 {
        take_and_check(&dev, &module, 256, &format!("launch {launch}"));
    }
}

#[test]
fn the_ticket_kernel_assembles_without_spills() {
    let ptx = kda::ir::pipeline::compile(&take_tickets(), &Default::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .ptx;
    assert!(ptx.contains("atom.global.add.u32"), "{ptx}");
    assert!(ptx.contains("atom.global.add.s32"), "{ptx}");
    if let Err(e) = kda::ir::ptxas::check_no_spills(&ptx) {
        panic!("{e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)");
    }
}

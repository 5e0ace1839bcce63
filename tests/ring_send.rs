//! `send!(.., completes = bars[s])` with a runtime stage `s`: the IR's
//! `st.async` takes a ring operand (`barN[%s of K]`), PTX computes the
//! local barrier address as base + 8·s and `mapa`s it to the peer, the
//! simulator completes the bytes on element `s` of the destination CTA's
//! ring, and the verifier bounds-checks `s`.
//!
//! Two kernels, each through the simulator (seeded schedules, hold-back,
//! the race detector) and ptxas:
//!
//! * `exchange`: every CTA of a cluster of two sends its row into stage
//!   `rank` of the peer's two-stage ring, completing `full[rank]` there; the
//!   receiver waits on `full[peer]` (a runtime element too) and reads stage
//!   `peer`;
//! * `streamed`: a persistent pipeline like `examples/pipelined-copy`, but
//!   the producer fills ring stage `i % stages` with `send!` (32 lanes × 16
//!   bytes, to its own rank through the cluster window) completing
//!   `full[i % stages]`, behind the `released` empty ring.

mod common;

use common::schedules;
use kda::cluster_kernel;
use kda::runtime::{Device, DeviceTensor, Launch, SimDevice};

#[cluster_kernel(block = 64, cluster = 2)]
fn exchange(input: Tensor<f32, rows, 32>, output: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(
        arrivals = 1,
        tx = 128,
        roles = [sender, receiver],
        count = 2
    );
    let inbox = shared!([f32; 2, 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    let rank = cluster_rank();
    let peer = rank.add_mod(1, 2);
    in_role!(receiver, {
        if lane == 0 {
            for s in 0..2 {
                full[s].init();
            }
            // Only the peer's stage is filled: arm that element.
            full[peer].arm();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(sender, {
        let v = input[[cta, lane]] * 2.0 + rank.cast::<f32>();
        send!(inbox[[rank, lane]] = v, to = peer, completes = full[rank]);
    });
    in_role!(receiver, {
        full[peer].wait();
        output[[cta, lane]] = inbox[[peer, lane]];
    });
    // No CTA exits while its peer may still send into it.
    cluster_sync();
}

#[cluster_kernel(block = 64, cluster = 2)]
fn streamed(
    #[comptime] stages: u32,
    #[align(16)] x: Tensor<f32, rows, 128>,
    y: Tensor<f32, rows, 128>,
    n: u32,
) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(
        arrivals = 1,
        tx = 512,
        roles = [producer, consumer],
        count = stages
    );
    let empty = mbarrier!(
        arrivals = 32,
        roles = [producer, consumer],
        count = stages,
        released
    );
    let ring = shared!([f32; stages, 128], guard = full, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    let cta = block_idx(0);
    let rank = cluster_rank();
    in_role!(producer, {
        if lane == 0 {
            for s in 0..stages {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(producer, {
        for i in range(0, n) {
            let s = i % stages;
            empty[s].wait();
            if lane == 0 {
                full[s].arm();
            }
            let row = cta * n + i;
            let v = x.load4([row, 4 * lane]).lanes();
            send!(
                ring[[s, 4 * lane]] = [v[0] + 1.0, v[1] + 1.0, v[2] + 1.0, v[3] + 1.0],
                to = rank,
                completes = full[s]
            );
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            let s = i % stages;
            full[s].wait();
            let row = cta * n + i;
            for e in 0..4 {
                y[[row, 4 * lane + e]] = ring[[s, 4 * lane + e]];
            }
            empty[s].arrive();
        }
    });
    cluster_sync();
}

#[test]
fn exchange_sends_into_the_peer_stage_of_its_rank() {
    let k = exchange();
    let text = kda::ir::write::write_kernel(&k);
    assert!(text.contains("st.async"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("st.async") && l.contains(" of 2]")),
        "the send names a ring element: {text}"
    );
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
    let rows = 4usize;
    let xs: Vec<f32> = (0..rows * 32).map(|i| i as f32).collect();
    for opts in schedules() {
        let dev = SimDevice::with_options(opts.clone());
        let module = dev.load(&k).unwrap_or_else(|e| panic!("{e}"));
        let x = DeviceTensor::upload(&dev, &xs, [rows, 32]).unwrap();
        let y = DeviceTensor::<SimDevice, f32, 2>::zeros(&dev, [rows, 32]).unwrap();
        let args = exchange::Args::<SimDevice> {
            input: x.arg(),
            output: y.arg(),
        };
        args.launch(&dev, &module, Launch::grid([rows as u32, 1, 1]))
            .unwrap_or_else(|e| panic!("{opts:?}: {e}"));
        let got = y.to_vec(&dev).unwrap();
        for cta in 0..rows {
            // CTA `cta` (rank cta % 2) receives its peer's row, doubled plus the peer's rank.
            let src = cta ^ 1;
            let peer_rank = (src % 2) as f32;
            for l in 0..32 {
                let want = xs[src * 32 + l] * 2.0 + peer_rank;
                assert_eq!(got[cta * 32 + l], want, "{opts:?}: cta {cta} lane {l}");
            }
        }
    }
}

#[test]
fn streamed_refills_each_stage_through_send() {
    for stages in [1, 2, 3] {
        let k = streamed(stages);
        kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
        for n in [0u32, 1, 5] {
            let rows = (2 * n).max(1) as usize;
            let xs: Vec<f32> = (0..rows * 128).map(|i| i as f32).collect();
            for opts in schedules() {
                let dev = SimDevice::with_options(opts.clone());
                let module = dev.load(&k).unwrap_or_else(|e| panic!("{e}"));
                let x = DeviceTensor::upload(&dev, &xs, [rows, 128]).unwrap();
                let y = DeviceTensor::<SimDevice, f32, 2>::zeros(&dev, [rows, 128]).unwrap();
                let args = streamed::Args::<SimDevice> {
                    x: x.arg(),
                    y: y.arg(),
                    n,
                };
                args.launch(&dev, &module, Launch::grid([2, 1, 1]))
                    .unwrap_or_else(|e| panic!("stages {stages}, n {n}, {opts:?}: {e}"));
                let got = y.to_vec(&dev).unwrap();
                for (i, v) in got.iter().enumerate().take(2 * n as usize * 128) {
                    assert_eq!(
                        *v,
                        xs[i] + 1.0,
                        "stages {stages}, n {n}, {opts:?}: element {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_ring_send_kernels_assemble_without_spills() {
    for (name, k) in [("exchange", exchange()), ("streamed", streamed(3))] {
        let ptx = kda::ir::pipeline::compile(&k, &kda::ir::pipeline::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .ptx;
        // The barrier address is base + 8·s, then mapped to the peer.
        assert!(ptx.contains("mad.lo.u32"), "{name}: {ptx}");
        assert!(ptx.contains("mapa.shared::cluster.u32"), "{name}: {ptx}");
        if let Err(e) = kda::ir::ptxas::check_no_spills(&ptx) {
            panic!("{name}: {e}\n(run `bash scripts/provision-ptxas.sh` to install ptxas)");
        }
    }
}

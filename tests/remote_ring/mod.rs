//! The kernel of `ring_remote_release.rs` and `gpu_ring_remote_release.rs`:
//! each CTA of a cluster of two sends its rows into the peer's ring
//! (`send!(.., to = peer, completes = full[s])`); the peer's consumers
//! release each stage with `empty[s].arrive_on(peer)` once they have read
//! it. `leaky` stops the releases after `keep` items.

use kda::cluster_kernel;
use kda::runtime::{Device, DeviceTensor, Launch, RuntimeError};

#[cluster_kernel(block = 64, cluster = 2)]
pub fn ping_pong(
    #[comptime] stages: u32,
    #[comptime] leaky: bool,
    #[align(16)] x: Tensor<f32, rows, 128>,
    y: Tensor<f32, rows, 128>,
    n: u32,
    keep: u32,
) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(
        arrivals = 1,
        tx = 512,
        roles = [producer, consumer],
        count = stages
    );
    // Counted in arrivals: the peer's 32 consumer threads, each after its
    // own reads of the stage.
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
    let peer = rank.add_mod(1, 2);
    in_role!(producer, {
        if lane == 0 {
            for s in 0..stages {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    // Both CTAs' barriers exist before anyone sends or arrives remotely.
    cluster_sync();
    in_role!(producer, {
        for i in range(0, n) {
            let s = i % stages;
            // The peer's consumers have read what this stage held.
            empty[s].wait();
            let row = cta * n + i;
            let v = x.load4([row, 4 * lane]).lanes();
            send!(
                ring[[s, 4 * lane]] = [v[0] + 1.0, v[1] + 1.0, v[2] + 1.0, v[3] + 1.0],
                to = peer,
                completes = full[s]
            );
        }
    });
    in_role!(consumer, {
        // The rows of the peer CTA land here.
        let src = cta - rank + peer;
        for i in range(0, n) {
            let s = i % stages;
            if lane == 0 {
                full[s].arm();
            }
            full[s].wait();
            let row = src * n + i;
            for e in 0..4 {
                y[[row, 4 * lane + e]] = ring[[s, 4 * lane + e]];
            }
            if leaky {
                // Releases stop after `keep` items: the producer's wait for
                // item `keep + stages` never returns.
                if i < keep {
                    empty[s].arrive_on(peer);
                }
            } else {
                empty[s].arrive_on(peer);
            }
        }
    });
    // No CTA exits while its peer may still send into it or arrive on it.
    cluster_sync();
}

/// Run `k` on `dev` on a grid of `clusters` clusters with `n` items per
/// CTA; the output (row `c·n + i` of CTA `c`'s items, each `x + 1`).
pub fn run_on<D: Device>(
    dev: &D,
    k: &kda::ir::Kernel,
    clusters: u32,
    n: u32,
    keep: u32,
) -> Result<Vec<f32>, RuntimeError> {
    let rows = (2 * clusters as usize * n as usize).max(1);
    let xs: Vec<f32> = (0..rows * 128).map(|i| i as f32).collect();
    let module = dev.load(k)?;
    let x = DeviceTensor::upload(dev, &xs, [rows, 128])?;
    let y = DeviceTensor::<D, f32, 2>::zeros(dev, [rows, 128])?;
    let args = ping_pong::Args::<D> {
        x: x.arg(),
        y: y.arg(),
        n,
        keep,
    };
    args.launch(dev, &module, Launch::grid([2 * clusters, 1, 1]))?;
    y.to_vec(dev)
}

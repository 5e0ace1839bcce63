// A multicast (`to = all`) sends to every CTA of the cluster, so each CTA
// receives from all 4: 4 CTAs × 32 lanes × 4 bytes = 512 bytes, not 128.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 4)]
fn broadcast(out: Tensor<f32, rows, 128>) {
    let gate = role!(0..32);
    let main = role!(32..64);
    let decay_full = mbarrier!(arrivals = 1, tx = 128, roles = [gate, main]);
    let decay = shared!([f32; 128], guard = decay_full, roles = [gate, main]);
    let lane = thread_idx() % 32;
    let rank = cluster_rank();
    in_role!(main, {
        if lane == 0 {
            decay_full.init();
            decay_full.arm();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(gate, {
        send!(
            decay[rank * 32 + lane] = lane.cast::<f32>(),
            to = all,
            completes = decay_full
        );
    });
    in_role!(main, {
        decay_full.wait();
        for q in 0..4 {
            out[[block_idx(0), 32 * q + lane]] = decay[32 * q + lane];
        }
    });
}

fn main() {
    let _ = broadcast();
}

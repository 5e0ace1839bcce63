// The legal form: wait on the guard, then read. Each CTA multicasts into
// its own half of `decay`, so the two senders never write the same bytes.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn gated(out: Tensor<f32, rows, 32>) {
    let main = role!(0..32);
    let gate = role!(32..64);
    let decay_full = mbarrier!(arrivals = 1, tx = 256, roles = [main, gate]);
    let decay = shared!([f32; 64], guard = decay_full, roles = [main, gate]);
    let lane = thread_idx() % 32;
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
            decay[cluster_rank() * 32 + lane] = lane.cast::<f32>() * 0.5,
            to = all,
            completes = decay_full
        );
    });
    in_role!(main, {
        decay_full.wait();
        out[[block_idx(0), lane]] = decay[lane] + decay[32 + lane];
    });
}

fn main() {
    let k = gated();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

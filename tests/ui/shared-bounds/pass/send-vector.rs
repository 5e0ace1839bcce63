// The legal form: the 4-lane send covers the last four elements, 28..32.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn exchange(out: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 16, roles = [sender, receiver]);
    let inbox = shared!([f32; 32], guard = full, roles = [sender, receiver]);
    let lane = thread_idx() % 32;
    in_role!(receiver, {
        if lane == 0 {
            full.init();
            full.arm();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(sender, {
        let peer = cluster_rank().add_mod(1, 2);
        if lane == 0 {
            let x = lane.cast::<f32>();
            send!(inbox[28] = [x, x, x, x], to = peer, completes = full);
        }
    });
    in_role!(receiver, {
        full.wait();
        out[[block_idx(0), lane]] = inbox[lane];
    });
}

fn main() {
    let k = exchange();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

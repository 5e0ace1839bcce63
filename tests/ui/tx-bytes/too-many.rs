// 64 senders × 4 bytes = 256 bytes into a barrier that expects 128 per phase.
use kda::cluster_kernel;

#[cluster_kernel(block = 96, cluster = 2)]
fn exchange(out: Tensor<f32, rows, 32>) {
    let sender = role!(0..64);
    let receiver = role!(64..96);
    let full = mbarrier!(arrivals = 1, tx = 128, roles = [sender, receiver]);
    let inbox = shared!([f32; 64], guard = full, roles = [sender, receiver]);
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
        send!(
            inbox[lane] = lane.cast::<f32>(),
            to = peer,
            completes = full
        );
    });
    in_role!(receiver, {
        full.wait();
        out[[block_idx(0), lane]] = inbox[lane];
    });
}

fn main() {
    let _ = exchange();
}

// The legal form: the helper role is declared on the barrier and the buffer.
use kda::cluster_kernel;

#[cluster_kernel(block = 96, cluster = 2)]
fn exchange(out: Tensor<f32, rows, 32>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let helper = role!(64..96);
    let full = mbarrier!(arrivals = 1, tx = 256, roles = [sender, receiver, helper]);
    let inbox = shared!([f32; 64], guard = full, roles = [sender, receiver, helper]);
    let lane = thread_idx() % 32;
    in_role!(receiver, {
        if lane == 0 {
            full.init();
            full.arm();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    let peer = cluster_rank().add_mod(1, 2);
    in_role!(sender, {
        send!(
            inbox[lane] = lane.cast::<f32>(),
            to = peer,
            completes = full
        );
    });
    in_role!(helper, {
        send!(inbox[32 + lane] = 1.0, to = peer, completes = full);
    });
    in_role!(receiver, {
        full.wait();
        out[[block_idx(0), lane]] = inbox[lane] + inbox[32 + lane];
    });
}

fn main() {
    let k = exchange();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

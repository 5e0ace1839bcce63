// The legal form: 32 lanes × one 16-byte packet = 512 bytes per phase.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn packets(out: Tensor<f32, rows, 128>) {
    let sender = role!(0..32);
    let receiver = role!(32..64);
    let full = mbarrier!(arrivals = 1, tx = 512, roles = [sender, receiver]);
    let inbox = shared!([f32; 128], guard = full, roles = [sender, receiver]);
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
        let x = lane.cast::<f32>();
        let peer = cluster_rank().add_mod(1, 2);
        send!(
            inbox[4 * lane] = [x, x + 1.0, x + 2.0, x + 3.0],
            to = peer,
            completes = full
        );
    });
    in_role!(receiver, {
        full.wait();
        for e in 0..4 {
            out[[block_idx(0), 4 * lane + e]] = inbox[4 * lane + e];
        }
    });
}

fn main() {
    let k = packets();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

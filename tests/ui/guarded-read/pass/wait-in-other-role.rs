// The legal form: every role that reads the guarded buffer waits on its guard.
use kda::cluster_kernel;

#[cluster_kernel(block = 96, cluster = 2)]
fn two_readers(out: Tensor<f32, rows, 64>) {
    let main = role!(0..32);
    let stats = role!(32..64);
    let sender = role!(64..96);
    let full = mbarrier!(arrivals = 2, tx = 128, roles = [main, stats, sender]);
    let inbox = shared!([f32; 32], guard = full, roles = [main, stats, sender]);
    let lane = thread_idx() % 32;
    let row = block_idx(0);
    in_role!(main, {
        if lane == 0 {
            full.init();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(main, {
        if lane == 0 {
            full.arrive_expect_tx(64);
        }
        full.wait();
        out[[row, lane]] = inbox[lane];
    });
    in_role!(stats, {
        if lane == 0 {
            full.arrive_expect_tx(64);
        }
        full.wait();
        out[[row, 32 + lane]] = inbox[lane] * inbox[lane];
    });
    in_role!(sender, {
        let peer = cluster_rank().add_mod(1, 2);
        send!(
            inbox[lane] = lane.cast::<f32>(),
            to = peer,
            completes = full
        );
    });
}

fn main() {
    let k = two_readers();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

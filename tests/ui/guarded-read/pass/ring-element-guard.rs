// One element of a ring guards a buffer (`guard = bars[1]`): the buffer is
// filled through that barrier and read after waiting on it.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn element_guard(out: Tensor<f32, rows, 32>) {
    let main = role!(0..32);
    let gate = role!(32..64);
    let bars = mbarrier!(arrivals = 1, tx = 128, count = 2, roles = [main, gate]);
    let inbox = shared!([f32; 32], guard = bars[1], roles = [main, gate]);
    let lane = thread_idx() % 32;
    in_role!(main, {
        if lane == 0 {
            bars[1].init();
            bars[1].arm();
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(gate, {
        let next = cluster_rank().add_mod(1, 2);
        send!(
            inbox[lane] = lane.cast::<f32>() * 0.5,
            to = next,
            completes = bars[1]
        );
    });
    in_role!(main, {
        bars[1].wait();
        out[[block_idx(0), lane]] = inbox[lane];
    });
}

fn main() {
    let k = element_guard();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
    // The guard is the ring's second barrier.
    let (_, buf) = k.buffers.iter().next().unwrap();
    let (id, _) = k.barriers.iter().nth(1).unwrap();
    assert_eq!(buf.guard, Some(id));
}

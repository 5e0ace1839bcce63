// Step 4 of docs/guide.md expecting the gates of all 64 channels per phase:
// only the peer's 32 lanes × 4 bytes arrive.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn ema_step(
    #[produced] x: Tensor<f32, rows, 64>,
    w: Tensor<f32, 64>,
    b: Tensor<f32, 64>,
    slots: Tensor<i32, rows>,
    state: Tensor<f32, cache, 64>,
    y: Tensor<f32, rows, 64>,
) {
    let update = role!(0..32);
    let gate = role!(32..64);
    let gates_full = mbarrier!(arrivals = 1, tx = 256, roles = [update, gate]);
    let gates = shared!([f32; 32], guard = gates_full, roles = [update, gate]);

    pdl_trigger();
    let lane = thread_idx() & 31;
    let row = block_idx(0) / 2;
    let rank = cluster_rank();
    let peer = rank.add_mod(1, 2);
    let c = rank * 32 + lane; // the channel this thread updates
    let peer_c = peer * 32 + lane; // the channel this thread gates for the peer

    in_role!(update, {
        if lane == 0 {
            gates_full.init();
            gates_full.arm(); // one arrival, expecting 32 × 4 bytes from the peer
        }
        fence_mbarrier_init();
    });
    cluster_arrive_relaxed();
    cluster_wait(); // every CTA's `gates_full` exists before any send

    in_role!(gate, {
        let (w_c, b_c) = (w[peer_c], b[peer_c]);
        pdl_wait();
        let a = fma(w_c, x[[row, peer_c]], b_c).sigmoid();
        send!(gates[lane] = a, to = peer, completes = gates_full);
    });

    in_role!(update, {
        let slot = slots[row];
        let h = state[[slot, c]];
        pdl_wait();
        let x_t = x[[row, c]];
        gates_full.wait();
        let h_new = fma(gates[lane], h - x_t, x_t);
        state[[slot, c]] = h_new;
        y[[row, c]] = h_new;
    });
}

fn main() {
    let _ = ema_step();
}

// Step 3 of docs/guide.md with the produced input read before the PDL wait.
use kda::cluster_kernel;

#[cluster_kernel(block = 64)]
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
    let gates_full = mbarrier!(arrivals = 32, roles = [update, gate]);
    let gates = shared!([f32; 32], guard = gates_full, roles = [update, gate]);

    pdl_trigger(); // the next launch may start now
    let lane = thread_idx() & 31;
    let row = block_idx(0) / 2;
    let c = (block_idx(0) % 2) * 32 + lane;

    in_role!(update, {
        if lane == 0 {
            gates_full.init();
        }
    });
    bar_sync(0, 64);

    in_role!(gate, {
        let (w_c, b_c) = (w[c], b[c]);
        pdl_wait();
        gates[lane] = fma(w_c, x[[row, c]], b_c).sigmoid();
        gates_full.arrive();
    });

    in_role!(update, {
        let slot = slots[row];
        let h = state[[slot, c]]; // ready: no launch in the chain writes it
        let x_t = x[[row, c]];
        pdl_wait();
        gates_full.wait();
        let h_new = fma(gates[lane], h - x_t, x_t);
        state[[slot, c]] = h_new;
        y[[row, c]] = h_new;
    });
}

fn main() {
    let _ = ema_step();
}

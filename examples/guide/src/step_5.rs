//! Step 5: comptime parameters and the early schedule. The cluster size
//! and the schedule are arguments of the builder function: a cluster of
//! `cluster` CTAs updates `32 · cluster` channels, the gate warps pass gates
//! around the ring, and each role joins the cluster barrier on its own, so
//! the `early` schedule can move each role's wait down to where it is needed.

use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = cluster, early = early)]
pub fn ema_step(
    #[comptime] cluster: u32,
    #[comptime] early: bool,
    #[produced] x: Tensor<f32, rows, { 32 * cluster }>,
    w: Tensor<f32, { 32 * cluster }>,
    b: Tensor<f32, { 32 * cluster }>,
    slots: Tensor<i32, rows>,
    state: Tensor<f32, cache, { 32 * cluster }>,
    y: Tensor<f32, rows, { 32 * cluster }>,
) {
    let update = role!(0..32);
    let gate = role!(32..64);
    let gates_full = mbarrier!(arrivals = 1, tx = 128, roles = [update, gate]);
    let gates = shared!([f32; 32], guard = gates_full, roles = [update, gate]);

    pdl_trigger();
    let lane = thread_idx() & 31;
    let row = block_idx(0) / cluster;
    let rank = cluster_rank();
    let next = rank.add_mod(1, cluster);
    let c = rank * 32 + lane;
    let next_c = next * 32 + lane;

    in_role!(update, {
        if lane == 0 {
            gates_full.init();
            gates_full.arm();
        }
        fence_mbarrier_init();
        cluster_arrive_relaxed();
        cluster_wait(); // `early`: sunk to the end of the role
        let slot = slots[row];
        let h = state[[slot, c]];
        pdl_wait();
        let x_t = x[[row, c]];
        gates_full.wait();
        let h_new = fma(gates[lane], h - x_t, x_t);
        state[[slot, c]] = h_new;
        y[[row, c]] = h_new;
    });

    in_role!(gate, {
        cluster_arrive_relaxed();
        cluster_wait(); // `early`: sunk to the send
        let (w_c, b_c) = (w[next_c], b[next_c]);
        pdl_wait();
        let a = fma(w_c, x[[row, next_c]], b_c).sigmoid();
        send!(gates[lane] = a, to = next, completes = gates_full);
    });
}

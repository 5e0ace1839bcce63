//! Step 1: the recurrence, one thread per channel.

use kda::cluster_kernel;

/// One request's row: 64 channels, 32 per CTA.
#[cluster_kernel(block = 32)]
pub fn ema_step(
    x: Tensor<f32, rows, 64>,
    w: Tensor<f32, 64>,
    b: Tensor<f32, 64>,
    slots: Tensor<i32, rows>,
    state: Tensor<f32, cache, 64>,
    y: Tensor<f32, rows, 64>,
) {
    let lane = thread_idx();
    let row = block_idx(0) / 2;
    let c = (block_idx(0) % 2) * 32 + lane;

    let slot = slots[row];
    let x_t = x[[row, c]];
    let a = fma(w[c], x_t, b[c]).sigmoid();
    let h = state[[slot, c]];
    let h_new = fma(a, h - x_t, x_t); // a·h + (1 − a)·x
    state[[slot, c]] = h_new;
    y[[row, c]] = h_new;
}

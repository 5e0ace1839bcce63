// `rows` is `[f32; 2, 32]`: the first index runs over 0..2, so row 2 does not
// exist and the load reads behind the buffer.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn rows2(out: Tensor<f32, rows, 32>) {
    let rows = shared!([f32; 2, 32]);
    let lane = thread_idx() % 32;
    rows[[0, lane]] = lane.cast::<f32>();
    rows[[1, lane]] = lane.cast::<f32>() + 1.0;
    bar_sync(0, 32);
    out[[block_idx(0), lane]] = rows[[2, lane]];
}

fn main() {
    let _ = rows2();
}

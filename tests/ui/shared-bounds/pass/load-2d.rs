// The legal form: the last row of a `[f32; 2, 32]` buffer is row 1.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn rows2(out: Tensor<f32, rows, 32>) {
    let rows = shared!([f32; 2, 32]);
    let lane = thread_idx() % 32;
    rows[[0, lane]] = lane.cast::<f32>();
    rows[[1, lane]] = lane.cast::<f32>() + 1.0;
    bar_sync(0, 32);
    out[[block_idx(0), lane]] = rows[[1, lane]];
}

fn main() {
    let k = rows2();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

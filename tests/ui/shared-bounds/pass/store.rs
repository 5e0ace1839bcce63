// The legal form: the last element of `tile` is index 31 (`4 * 8 - 1`).
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn tail(out: Tensor<f32, rows, 32>) {
    let tile = shared!([f32; 32]);
    let lane = thread_idx() % 32;
    tile[lane] = lane.cast::<f32>();
    if lane == 0 {
        tile[4 * 8 - 1] = 0.0;
    }
    bar_sync(0, 32);
    out[[block_idx(0), lane]] = tile[lane];
}

fn main() {
    let k = tail();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

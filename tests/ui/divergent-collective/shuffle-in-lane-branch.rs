// Only lanes 0..16 reach the shuffle: the others never join it.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn reduce(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>) {
    let t = thread_idx();
    let lane = t % 32;
    let mut v = x[[block_idx(0), t]];
    if lane < 16 {
        v = v + shfl_bfly(v, 16);
    }
    y[[block_idx(0), t]] = v;
}

fn main() {
    let _ = reduce();
}

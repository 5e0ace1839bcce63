// The legal form: every lane shuffles; the branch selects what to keep.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn reduce(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>) {
    let t = thread_idx();
    let lane = t % 32;
    let mut v = x[[block_idx(0), t]];
    let other = shfl_bfly(v, 16);
    if lane < 16 {
        v = v + other;
    }
    y[[block_idx(0), t]] = v;
}

fn main() {
    let k = reduce();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

// Misspelled and unknown attributes: every one is reported, with what is allowed.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, threads = 2)]
fn kernel(#[producd] x: Tensor<f32, rows, 64>, #[readonly] y: Tensor<f32, rows, 64>) {
    y[[block_idx(0), thread_idx()]] = x[[block_idx(0), thread_idx()]];
}

fn main() {
    let _ = kernel();
}

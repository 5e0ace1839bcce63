// The block size is part of a cluster kernel's declaration.
use kda::cluster_kernel;

#[cluster_kernel(cluster = 2)]
fn kernel(y: Tensor<f32, rows, 64>) {
    y[[block_idx(0), thread_idx()]] = 0.0;
}

fn main() {
    let _ = kernel();
}

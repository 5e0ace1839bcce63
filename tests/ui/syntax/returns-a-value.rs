// A kernel's results are the tensors it stores to; the builder function
// returns the traced kernel.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn kernel(x: Tensor<f32, rows, 32>) -> f32 {
    1.0
}

fn main() {
    let _ = kernel();
}

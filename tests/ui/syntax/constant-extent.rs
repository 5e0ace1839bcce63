// A bare uppercase name in a tensor shape is almost certainly a constant, not a
// symbolic extent: the message says how to write either.
use kda::cluster_kernel;

const LANES: u32 = 32;

#[cluster_kernel(block = 32)]
fn kernel(x: Tensor<f32, rows, LANES>) {
    let _ = x[[block_idx(0), thread_idx()]];
}

fn main() {
    let _ = kernel();
}

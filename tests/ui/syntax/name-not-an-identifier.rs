// `#[name = ".."]` gives a tensor its ABI name (IR, PTX, typed launch,
// descriptor): it must be an identifier, and scalars keep theirs.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn kernel(#[name = "two words"] x: Tensor<f32, rows, 32>, #[name = "s"] scale: f32) {
    let _ = (x, scale);
}

fn main() {}

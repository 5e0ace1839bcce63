// `x` is produced by the preceding launch: reading it before the PDL wait
// races with that launch.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn scale(
    #[produced] x: Tensor<f32, rows, 128>,
    weight: Tensor<f32, 128>,
    y: Tensor<f32, rows, 128>,
) {
    let t = thread_idx();
    let row = block_idx(0);
    let w = weight[t];
    let v = x[[row, t]];
    pdl_wait();
    y[[row, t]] = v * w;
}

fn main() {
    let _ = scale();
}

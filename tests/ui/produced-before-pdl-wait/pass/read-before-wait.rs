// The legal form: weights are ready at launch and may be read before the PDL
// wait; the produced activations only after it.
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
    pdl_wait();
    let v = x[[row, t]];
    y[[row, t]] = v * w;
}

fn main() {
    let k = scale();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

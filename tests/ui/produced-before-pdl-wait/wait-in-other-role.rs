// The PDL wait is per thread: the gate warp waited, the main threads did not.
use kda::cluster_kernel;

#[cluster_kernel(block = 160)]
fn split(
    #[produced] x: Tensor<f32, rows, 128>,
    #[produced] gate: Tensor<f32, rows, 32>,
    y: Tensor<f32, rows, 160>,
) {
    let main = role!(0..128);
    let gates = role!(128..160);
    let t = thread_idx();
    let row = block_idx(0);
    in_role!(gates, {
        pdl_wait();
        y[[row, t]] = gate[[row, t - 128]];
    });
    in_role!(main, {
        y[[row, t]] = x[[row, t]];
    });
}

fn main() {
    let _ = split();
}

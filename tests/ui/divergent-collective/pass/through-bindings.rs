// The legal form: branch on the warp index (`t / 32`), which is the same on
// every lane of a warp, so whole warps take or skip the reduction.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn norms(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 4>) {
    let t = thread_idx();
    let v = x[[block_idx(0), t]];
    let warp = t / 32;
    let odd = warp % 2 == 1;
    let mut sum = v * v;
    if odd {
        sum = warp_sum(sum, 32);
    }
    y[[block_idx(0), warp]] = sum;
}

fn main() {
    let k = norms();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

// The condition is lane-varying through a chain of bindings: `odd` comes from
// the thread index, so `warp_sum` runs on half the lanes of each warp.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn norms(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 4>) {
    let t = thread_idx();
    let v = x[[block_idx(0), t]];
    let parity = t & 1;
    let odd = parity == 1;
    let mut sum = v * v;
    if odd {
        sum = warp_sum(sum, 32);
    }
    y[[block_idx(0), t / 32]] = sum;
}

fn main() {
    let _ = norms();
}

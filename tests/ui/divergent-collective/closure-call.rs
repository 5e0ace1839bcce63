// The collective is inside a helper closure; calling it under a lane-varying
// condition is the error (reported at the call).
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn rows(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>) {
    let t = thread_idx();
    let row_sum = |v: Val<f32>| warp_sum(v, 8);
    let v = x[[block_idx(0), t]];
    let mut out = v;
    if t % 8 == 0 {
        out = row_sum(v);
    }
    y[[block_idx(0), t]] = out;
}

fn main() {
    let _ = rows();
}

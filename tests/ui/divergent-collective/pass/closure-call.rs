// The legal form: call the reducing closure on every lane.
use kda::cluster_kernel;

#[cluster_kernel(block = 128)]
fn rows(x: Tensor<f32, rows, 128>, y: Tensor<f32, rows, 128>) {
    let t = thread_idx();
    let row_sum = |v: Val<f32>| warp_sum(v, 8);
    let v = x[[block_idx(0), t]];
    let total = row_sum(v);
    let mut out = v;
    if t % 8 == 0 {
        out = total;
    }
    y[[block_idx(0), t]] = out;
}

fn main() {
    let k = rows();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

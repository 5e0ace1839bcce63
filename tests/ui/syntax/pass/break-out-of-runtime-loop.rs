// The legal form: express the early exit as data (a mask carried by the loop);
// `break` is fine in loops over comptime ranges, which unroll.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn kernel(x: Tensor<f32, rows, 32>, n: u32) {
    let lane = lane_id();
    let mut acc = val::<f32>(0.0);
    let mut live = val(true);
    for r in 0..n {
        let v = x[[r, lane]];
        live = live & (v >= 0.0);
        acc = select(live, acc + v, acc);
    }
    for k in 0..8 {
        if k == 4 {
            break;
        }
        acc = acc * 0.5;
    }
    x[[0, lane]] = acc;
}

fn main() {
    let k = kernel();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

// The body of a loop over a runtime range is traced once as an IR region: it
// cannot `break` out of it, or `return` from the kernel.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn kernel(x: Tensor<f32, rows, 32>, n: u32) {
    let everyone = role!(0..32);
    let lane = lane_id();
    let mut acc = val::<f32>(0.0);
    for r in 0..n {
        let v = x[[r, lane]];
        if v < 0.0 {
            break;
        }
        acc = acc + v;
    }
    in_role!(everyone, {
        return;
    });
    x[[0, lane]] = acc;
}

fn main() {
    let _ = kernel();
}

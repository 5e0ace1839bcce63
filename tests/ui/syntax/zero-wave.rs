// `wave = n` issues the row chains a body states with `chains(..)` n at a
// time; a wave of no chains would issue nothing.
use kda::cluster_kernel;

#[cluster_kernel(block = 32, wave = 0)]
fn rows(x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 32>) {
    let t = thread_idx();
    let base = block_idx(0) * 4;
    let mut loaded = regs!([f32; 4]);
    chains(4, 2, |r, phase| match phase {
        0 => loaded[r] = x[[base + r as u32, t]],
        _ => y[[base + r as u32, t]] = loaded[r] * 2.0,
    });
}

fn main() {
    let _ = rows();
}

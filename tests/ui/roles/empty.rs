// An empty role (`128..128`) has no threads to run its code.
use kda::cluster_kernel;

#[cluster_kernel(block = 160)]
fn kda_split(out: Tensor<f32, rows, 160>) {
    let state = role!(0..128);
    let gate = role!(128..128);
    in_role!(state, {
        out[[block_idx(0), thread_idx()]] = 1.0;
    });
    in_role!(gate, {
        out[[block_idx(0), thread_idx()]] = 2.0;
    });
}

fn main() {
    let _ = kda_split();
}

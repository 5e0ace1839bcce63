// Malformed DSL macros: each says what it expects.
use kda::cluster_kernel;

#[cluster_kernel(block = 64, cluster = 2)]
fn kernel(y: Tensor<f32, rows, 64>) {
    let lane = thread_idx();
    let all_threads = role!(0..=63);
    let full = mbarrier!(tx = 128);
    let inbox = shared!(f32, 64);
    send!(inbox[lane] = 1.0, to = 1);
    y[[block_idx(0), lane]] = 0.0;
}

fn main() {
    let _ = kernel();
}

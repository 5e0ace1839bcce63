// A loop whose trip count depends on the lane: lanes leave it at different
// iterations, so `elect` inside it does not see the whole warp.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn leaders(counts: Tensor<u32, 32>, y: Tensor<u32, 32>) {
    let lane = lane_id();
    let n = counts[lane];
    let mut hits = val::<u32>(0);
    for _ in 0..n {
        if elect() {
            hits = hits + 1;
        }
    }
    y[lane] = hits;
}

fn main() {
    let _ = leaders();
}

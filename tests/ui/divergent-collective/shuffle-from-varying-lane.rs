// A shuffle reads the lane its index names: from a lane-varying index each
// lane gets another lane's value, so a loop bound taken from it differs
// between the lanes and `elect` inside the loop does not see the whole warp.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn leaders(counts: Tensor<u32, 32>, y: Tensor<u32, 32>) {
    let lane = lane_id();
    let n = shfl_idx(counts[lane], lane % 4);
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

// The legal form: a broadcast from one fixed lane (a work queue's ticket,
// taken by lane 0 and handed to the warp) is the same on every lane, so the
// loop's trip count is warp-uniform.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn leaders(counts: Tensor<u32, 32>, y: Tensor<u32, 32>) {
    let lane = lane_id();
    let n = shfl_idx(counts[lane], 0u32);
    let mut hits = val::<u32>(0);
    for _ in 0..n {
        if elect() {
            hits = hits + 1;
        }
    }
    y[lane] = hits;
}

fn main() {
    let k = leaders();
    kda::ir::verifier::verify(&k).unwrap_or_else(|e| panic!("{e}"));
}

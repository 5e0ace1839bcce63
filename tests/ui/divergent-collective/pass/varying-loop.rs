// The legal form: a warp-uniform trip count (one per CTA).
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn leaders(counts: Tensor<u32, 32>, y: Tensor<u32, 32>) {
    let lane = lane_id();
    let n = counts[block_idx(0)];
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

// `#[evict_first]` marks a tensor's global traffic L2 evict-first; a scalar
// (passed by value) or a comptime parameter has no traffic to mark.
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn stream(
    #[comptime] streamed: bool,
    #[evict_first] #[comptime] rows: u32,
    state: Tensor<f32, cache, 32>,
    #[evict_first(streamed)] decay: f32,
) {
    let t = thread_idx();
    let s = state[[block_idx(0) % rows, t]];
    state[[block_idx(0) % rows, t]] = s * decay;
}

fn main() {
    let _ = stream(true, 4);
}

// The tensor hints take a comptime condition in parentheses, or none, once
// per parameter: `#[stage_through_shared(cfg.staged)]`, `#[evict_first]`.
use kda::cluster_kernel;

#[cluster_kernel(block = 32, early = true)]
fn scale(
    #[comptime] staged: bool,
    #[stage_through_shared = staged] weight: Tensor<f32, weights, 128>,
    #[evict_first = true] bias: Tensor<f32, 128>,
    #[produced] x: Tensor<f32, tokens, 128>,
    #[stage_through_shared] #[stage_through_shared(staged)] y: Tensor<f32, tokens, 128>,
    #[evict_first(staged)] #[evict_first] z: Tensor<f32, tokens, 128>,
) {
    let lane = thread_idx() % 32;
    let w = weight[[0, lane]] + bias[[lane]] + y[[0, lane]];
    pdl_wait();
    z[[block_idx(0), lane]] = x[[block_idx(0), lane]] * w;
}

fn main() {
    let _ = scale(true);
}

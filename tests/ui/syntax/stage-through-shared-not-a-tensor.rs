// `#[stage_through_shared]` stages a tensor's ready data through shared
// memory; a scalar (passed by value) or a comptime parameter has no data in
// global memory to stage.
use kda::cluster_kernel;

#[cluster_kernel(block = 32, early = true)]
fn scale(
    #[comptime] staged: bool,
    #[stage_through_shared] #[comptime] rows: u32,
    #[align(16)] weight: Tensor<f32, weights, 128>,
    #[produced]
    #[align(16)]
    x: Tensor<f32, tokens, 128>,
    y: Tensor<f32, tokens, 128>,
    #[stage_through_shared(staged)] gain: f32,
) {
    let lane = thread_idx() % 32;
    let w = weight.load4([block_idx(0) % rows, 4 * lane]).lanes();
    pdl_wait();
    let v = x.load4([block_idx(0), 4 * lane]).lanes();
    for j in 0..4 {
        y[[block_idx(0), 4 * lane + j as u32]] = v[j] * w[j] * gain;
    }
}

fn main() {
    let _ = scale(true, 4);
}

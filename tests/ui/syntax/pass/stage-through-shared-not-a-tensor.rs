// The legal form: `#[stage_through_shared(cond)]` on the tensor whose ready
// rows are loaded before the PDL wait. The body states its loads once; where
// the comptime condition holds the scheduler issues each 16-byte load of
// `weight` as a cp.async into the lane's own shared slot and reads it back
// after the wait (and nothing of `x`, read after it).
use kda::cluster_kernel;

#[cluster_kernel(block = 32, early = true)]
fn scale(
    #[comptime] staged: bool,
    #[comptime] rows: u32,
    #[align(16)]
    #[stage_through_shared(staged)]
    weight: Tensor<f32, weights, 128>,
    #[produced]
    #[align(16)]
    x: Tensor<f32, tokens, 128>,
    y: Tensor<f32, tokens, 128>,
    gain: f32,
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
    use kda::ir::pipeline::{Options, schedule};
    use kda::ir::write::write_kernel;
    for staged in [false, true] {
        let k = schedule(&scale(staged, 4), &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let text = write_kernel(&k);
        assert_eq!(text.contains(" stage_through_shared=t0 {"), staged, "{text}");
        assert_eq!(text.contains("cp.async buf0[") && text.contains("], t0["), staged, "{text}");
        assert_eq!(text.contains("cp.async.wait 0"), staged, "{text}");
        assert_eq!(text.contains("ld.global t0["), !staged, "{text}");
        assert!(text.contains("ld.global t1["), "{text}");
    }
}

// The legal form: `#[evict_first(cond)]` on the tensor whose traffic is
// streamed. The body states its accesses once, without a policy; where the
// comptime condition holds the scheduler marks every load and store of
// `state` evict-first (and nothing else).
use kda::cluster_kernel;

#[cluster_kernel(block = 32)]
fn stream(
    #[comptime] streamed: bool,
    #[comptime] rows: u32,
    #[evict_first(streamed)] state: Tensor<f32, cache, 32>,
    decay: f32,
) {
    let t = thread_idx();
    let s = state[[block_idx(0) % rows, t]];
    state[[block_idx(0) % rows, t]] = s * decay;
}

fn main() {
    use kda::ir::pipeline::{Options, schedule};
    use kda::ir::write::write_kernel;
    for streamed in [false, true] {
        let k = schedule(&stream(streamed, 4), &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let text = write_kernel(&k);
        assert_eq!(text.contains("ld.global.evict_first t0"), streamed, "{text}");
        assert_eq!(text.contains("st.global.evict_first t0"), streamed, "{text}");
        assert_eq!(text.contains(" evict_first=t0 {"), streamed, "{text}");
    }
}

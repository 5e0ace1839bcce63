//! The bench's control: the same `y = a * x + b` with no ring — each thread
//! loads a float4 into registers and stores it (grid-stride over `quads`
//! float4s, so one kernel serves both a grid of one float4 per thread and a
//! persistent grid). It tells the ring's cost from the memory's: the copy
//! ceiling a plain register kernel reaches in the same run.
use kda::cluster_kernel;

/// Threads per CTA of [`plain_copy()`].
pub const BLOCK: u32 = 256;

#[cluster_kernel(block = 256)]
pub fn plain_copy(
    #[align(16)] x: Tensor<f32, quads, 4>,
    #[align(16)] y: Tensor<f32, quads, 4>,
    quads: u32,
    a: f32,
    b: f32,
) {
    let threads = grid_dim(0) * 256;
    let me = block_idx(0) * 256 + thread_idx();
    // `me < threads`, so this never wraps.
    let mine = (quads + threads - 1 - me) / threads;
    for i in range(0, mine) {
        let q = me + i * threads;
        let v = x.load4([q, 0]).lanes();
        y.evict_first().store([q, 0], pack(v.map(|e| e * a + b)));
    }
}

//! The kernel on GPU 0 at model shapes (K = V = 128, batches up to 64),
//! against the float64 reference. Skips, printing why, where there is no
//! CUDA driver; fails instead under `KDA_REQUIRE_GPU=1`.

use hgrn2_decode::Config;
use hgrn2_decode::host::{LIMITS, Problem};
use kda::runtime::cuda::gpu_or_skip;

#[test]
fn model_shapes_on_the_gpu_match_the_reference() {
    let Some(dev) = gpu_or_skip() else { return };
    let shapes = [
        (128, 128, 1, false, 64, 8),
        (128, 128, 4, true, 16, 8),
        (64, 64, 2, true, 3, 5),
        (256, 128, 1, true, 8, 4),
    ];
    for (n, (k, v, t, lb, batch, heads)) in shapes.into_iter().enumerate() {
        let p = Problem::new(Config::new(k, v, t, lb).unwrap(), batch, heads, n as u64);
        let (o_err, s_err) = p.check(&dev).unwrap();
        let shape = format!("K {k} V {v} T {t} lower bound {lb} B {batch} H {heads}");
        println!("{shape}: relative error o {o_err:.1e}, state {s_err:.1e}");
        assert!(o_err < LIMITS.0 && s_err < LIMITS.1, "{shape}");
    }
}

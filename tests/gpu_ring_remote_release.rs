//! Remote arrivals on the GPU: the ping-pong kernel of
//! `ring_remote_release.rs` (each CTA of a cluster of two fills the peer's
//! ring; the peer releases each stage with `empty[s].arrive_on(peer)`), on
//! many clusters with many more items than stages, so every stage is
//! refilled hundreds of times after remote releases. Every row must arrive
//! as `x + 1`, and equal the simulator's output on a small launch. Skipped
//! without a GPU (`kda_runtime::cuda::gpu_or_skip`).

mod remote_ring;

use kda::runtime::SimDevice;
use kda::runtime::cuda::gpu_or_skip;
use remote_ring::{ping_pong, run_on};

#[test]
fn remote_releases_refill_every_stage_on_the_gpu() {
    let Some(dev) = gpu_or_skip() else { return };
    for stages in [1, 2, 3] {
        let k = ping_pong(stages, false);
        let small = run_on(&dev, &k, 1, 7, 7).unwrap_or_else(|e| panic!("stages {stages}: {e}"));
        let sim = run_on(&SimDevice::new(), &k, 1, 7, 7).unwrap();
        assert_eq!(small, sim, "stages {stages}: GPU and simulator differ");
        // 2 · 132 · 400 rows of 128 floats: below 2^24 elements, so `x + 1` is exact.
        let (clusters, n) = (132, 400);
        let got = run_on(&dev, &k, clusters, n, n)
            .unwrap_or_else(|e| panic!("stages {stages}, {clusters} clusters: {e}"));
        let bad = got
            .iter()
            .enumerate()
            .filter(|&(i, v)| *v != i as f32 + 1.0)
            .count();
        assert_eq!(bad, 0, "stages {stages}: {bad} wrong elements");
        println!(
            "stages {stages}: {clusters} clusters x 2 CTAs x {n} items crossed and released remotely: all {} elements right",
            got.len()
        );
    }
}

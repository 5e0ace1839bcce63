//! The same matrix as `sim_matrix` on the GPU (skipped without a driver,
//! unless `KDA_REQUIRE_GPU` is set): 1..=4 stages, per-CTA trip counts 0, 1,
//! stages - 1, stages + 1 and many on a grid of two CTAs, then the full
//! persistent grid over many tiles.

use kda_runtime::cuda::gpu_or_skip;
use pipelined_copy::run::run_checked;

#[test]
fn every_stage_count_and_trip_count_matches_the_host_on_the_gpu() {
    let Some(dev) = gpu_or_skip() else { return };
    for stages in 1..=4u32 {
        let mut trips = vec![0, 1, stages - 1, stages + 1, 3 * stages + 2];
        trips.sort();
        trips.dedup();
        for &n in &trips {
            let tiles = (2 * n).saturating_sub(1);
            run_checked(&dev, stages, tiles, Some(2))
                .unwrap_or_else(|e| panic!("{stages} stages, {tiles} tiles: {e}"));
        }
        // The persistent grid: every resident CTA loops over many tiles.
        let ran = run_checked(&dev, stages, 20_011, None)
            .unwrap_or_else(|e| panic!("{stages} stages, 20011 tiles: {e}"));
        println!("{stages} stages: persistent grid {}", ran.grid);
    }
}

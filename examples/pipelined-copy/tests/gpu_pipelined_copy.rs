//! The same matrix as `sim_matrix` on the GPU (skipped without a driver,
//! unless `KDA_REQUIRE_GPU` is set): 1..=4 stages, both output paths
//! (register stores, bulk stores of the stage), per-CTA trip counts 0, 1,
//! stages - 1, stages + 1 and many on a grid of two CTAs, then the full
//! persistent grid over many tiles; each with the tiles handed out in a
//! fixed stride and through the work queue.

use kda_runtime::cuda::gpu_or_skip;
use pipelined_copy::run::run_checked;
use pipelined_copy::{Order, Ring};

#[test]
fn every_stage_count_and_trip_count_matches_the_host_on_the_gpu() {
    let Some(dev) = gpu_or_skip() else { return };
    for (stages, order) in (1..=4u32).flat_map(|s| [(s, Order::Strided), (s, Order::Queue)]) {
        for bulk_out in [false, true] {
            let ring = Ring {
                order,
                ..Ring::new(stages, bulk_out)
            };
            let what = format!("{stages} stages, bulk_out {bulk_out}, {order:?}");
            let mut trips = vec![0, 1, stages - 1, stages + 1, 3 * stages + 2];
            trips.sort();
            trips.dedup();
            for &n in &trips {
                let tiles = (2 * n).saturating_sub(1);
                run_checked(&dev, &ring, tiles, Some(2))
                    .unwrap_or_else(|e| panic!("{what}, {tiles} tiles: {e}"));
            }
            // The persistent grid: every resident CTA loops over many tiles.
            let ran = run_checked(&dev, &ring, 20_011, None)
                .unwrap_or_else(|e| panic!("{what}, 20011 tiles: {e}"));
            println!("{what}: persistent grid {}", ran.grid);
        }
    }
}

//! The ring protocol on the simulator: 1..=4 stages, per-CTA trip counts 0,
//! 1, stages - 1, stages + 1 and many (the grid's other CTA runs one fewer),
//! each under the round-robin schedule, seeded interleavings and hold-back.

use kda_runtime::{SimDevice, SimOptions};
use pipelined_copy::run::run_checked;

/// The grid of the matrix: one cluster of two CTAs.
const GRID: u32 = 2;

fn schedules() -> Vec<SimOptions> {
    let mut out = vec![SimOptions::default()];
    for seed in 1..=3 {
        for hold_back in [false, true] {
            out.push(SimOptions {
                seed: Some(seed),
                max_slice: 1 + 5 * seed as u32,
                hold_back,
                resident_clusters: GRID,
                ..SimOptions::default()
            });
        }
    }
    out
}

#[test]
fn every_stage_count_and_trip_count_matches_the_host() {
    for stages in 1..=4 {
        let mut trips = vec![0, 1, stages - 1, stages + 1, 3 * stages + 2];
        trips.sort();
        trips.dedup();
        for &n in &trips {
            // CTA 0 runs `n` iterations, CTA 1 runs `n - 1`.
            let tiles = (GRID * n).saturating_sub(1);
            for opts in schedules() {
                let what = format!("{stages} stages, {tiles} tiles, {opts:?}");
                let dev = SimDevice::with_options(opts);
                let ran = run_checked(&dev, stages, tiles, Some(GRID))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(ran.grid, GRID, "{what}");
            }
        }
        // The persistent grid (two resident clusters on the simulator):
        // four CTAs, each over several tiles.
        for opts in schedules().into_iter().step_by(3) {
            let dev = SimDevice::with_options(opts);
            let ran = run_checked(&dev, stages, 4 * stages + 3, None)
                .unwrap_or_else(|e| panic!("{stages} stages, persistent: {e}"));
            assert_eq!(ran.grid, 4);
        }
    }
}

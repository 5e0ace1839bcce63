//! The ring protocol on the simulator: 1..=4 stages, both output paths
//! (register stores; write-back into the stage and one bulk store of it),
//! both the work queue and the fixed strided tile order,
//! per-CTA trip counts 0, 1, stages - 1, stages + 1 and many (the grid's
//! other CTA runs one fewer), each under the round-robin schedule, seeded
//! interleavings and hold-back, bit-exact against the host, with the race
//! detector on (the default).

use kda_runtime::{SimDevice, SimOptions};
use pipelined_copy::run::run_checked;
use pipelined_copy::{Order, Ring};

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

fn matrix(bulk_out: bool) {
    for (stages, order) in (1..=4).flat_map(|s| [(s, Order::Queue), (s, Order::Strided)]) {
        let ring = Ring {
            order,
            ..Ring::new(stages, bulk_out)
        };
        let mut trips = vec![0, 1, stages - 1, stages + 1, 3 * stages + 2];
        trips.sort();
        trips.dedup();
        for &n in &trips {
            // CTA 0 runs `n` iterations, CTA 1 runs `n - 1`.
            let tiles = (GRID * n).saturating_sub(1);
            for opts in schedules() {
                let what = format!("{ring:?}, {tiles} tiles, {opts:?}");
                let dev = SimDevice::with_options(opts);
                let ran = run_checked(&dev, &ring, tiles, Some(GRID))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(ran.grid, GRID, "{what}");
            }
        }
        // The persistent grid (two resident clusters on the simulator):
        // four CTAs, each over several tiles.
        for opts in schedules().into_iter().step_by(3) {
            let dev = SimDevice::with_options(opts);
            let ran = run_checked(&dev, &ring, 4 * stages + 3, None)
                .unwrap_or_else(|e| panic!("{ring:?}, persistent: {e}"));
            assert_eq!(ran.grid, 4);
        }
    }
}

#[test]
fn every_stage_count_and_trip_count_matches_the_host() {
    matrix(false);
}

#[test]
fn the_bulk_store_path_matches_the_host_for_every_stage_and_trip_count() {
    matrix(true);
}

#[test]
fn other_tile_sizes_and_l2_policies_match_the_host() {
    // The bench's other configurations ([`default_rings`]), a few trip
    // counts each under three schedules: the tile size changes every
    // extent and byte count of the ring, the policy only the cache hints.
    let rings = pipelined_copy::bench::default_rings();
    let default = |r: &Ring| *r == Ring::new(r.stages, r.bulk_out);
    for ring in rings.iter().filter(|r| !default(r)) {
        for tiles in [1, 2 * ring.stages + 1] {
            for opts in schedules().into_iter().step_by(3) {
                let dev = SimDevice::with_options(opts);
                run_checked(&dev, ring, tiles, Some(GRID))
                    .unwrap_or_else(|e| panic!("{ring:?}, {tiles} tiles: {e}"));
            }
        }
    }
}

#[test]
fn the_sweeps_bulk_copies_per_stage_and_tile_orders_match_the_host() {
    // The rings `--bench --sweep` adds: several bulk copies filling one
    // stage, each CTA taking one contiguous run of tiles (trip counts that
    // leave the last CTA short or empty), and the work queue (every tile
    // exactly once, whichever CTA takes it; the queue back at 0 after each
    // launch, which `run_checked` launches twice).
    let mut rings: Vec<Ring> = pipelined_copy::bench::sweep_points()
        .into_iter()
        .map(|p| p.ring)
        .filter(|r| r.split > 1 || r.order != Order::Strided)
        .collect();
    rings.dedup();
    for order in [Order::Contiguous, Order::Queue] {
        for bulk_out in [false, true] {
            for stages in [1, 3] {
                rings.push(Ring {
                    split: 4,
                    order,
                    ..Ring::new(stages, bulk_out)
                });
            }
        }
    }
    for ring in &rings {
        for tiles in [0, 1, 2 * ring.stages + 1, 3 * GRID + 1] {
            for opts in schedules().into_iter().step_by(3) {
                let dev = SimDevice::with_options(opts);
                run_checked(&dev, ring, tiles, Some(GRID))
                    .unwrap_or_else(|e| panic!("{ring:?}, {tiles} tiles: {e}"));
            }
        }
    }
}

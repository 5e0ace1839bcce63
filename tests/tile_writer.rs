//! Stored tiles (`Tensor::tile_writer`): the program states each tile's
//! row stores once; `#[store_through_shared]` decides whether they are
//! register stores or go through the two-stage shared ring as one bulk
//! store per tile. On the simulator (race detector on, the deterministic
//! schedule, seeded interleavings and hold-back) both give the same bytes,
//! the ones computed here: every valid row of every live tile, nothing for
//! a hole (slot 0, or -1, which a store would put out of bounds) or a
//! masked row. Then the trace's refusals of misuse, each by name.

use kda::cluster_kernel;
use kda::ir::Kernel;
use kda::runtime::{
    Device, LaunchConfig, RuntimeError, ScalarArg, SimDevice, SimOptions, TensorShape,
};

/// Each CTA (request) stores `tiles` tiles of `rows` rows of 64 into `y`,
/// tile t at `y[slots[request, t], 8 - rows.., ..]`, row r holding
/// `x[request, ..] * (t + 1) + r`: 16 threads per row, 4 rows per pass, two
/// passes; with `rows` < 8 the second pass is masked (rows 4.. of it are
/// not the tile's).
#[cluster_kernel(block = 64)]
fn write_tiles(
    #[comptime] staged: bool,
    #[comptime] tiles: u32,
    #[comptime] rows: u32,
    #[align(16)] x: Tensor<f32, requests, 64>,
    slots: Tensor<i32, requests, width>,
    #[align(16)]
    #[strides(512, 64, 1)]
    #[store_through_shared(staged)]
    y: Tensor<f32, slot_count, 8, 64>,
) {
    let writers = role!(0..64);
    let request = block_idx(0);
    let out = y.tile_writer([rows, 64], tiles, &writers, 1);
    in_role!(writers, {
        let t = thread_idx();
        let (group, lane) = (t >> 4, t & 15);
        let x4 = x.load4([request, lane * 4]).lanes();
        for tile in 0..tiles {
            let slot = slots[[request, tile]];
            let tile_rows = out.tile([slot, 8 - rows, 0], || Some(slot > 0));
            for p in 0..2u32 {
                let row = group + 4 * p;
                let masked = rows < 8 && p == 1;
                // A masked thread's row past the tile: clamped (and not stored).
                let valid = row < rows;
                let safe = if masked {
                    select(valid, row, row & 3)
                } else {
                    row
                };
                let mask = tile_rows.mask(if masked { Some(valid) } else { None });
                let r = safe.cast::<f32>().val();
                let scale = (tile + 1) as f32;
                let v = [0, 1, 2, 3].map(|e| x4[e] * scale + r);
                tile_rows.row(safe).store4(lane * 4, pack(v), &mask);
            }
            tile_rows.finish(|| t == 0);
        }
        out.drain(|| t == 0);
    });
}

/// The slots of 3 requests of up to 4 tiles: distinct live slots 1..=9,
/// holes 0 and -1.
const SLOTS: [[i32; 4]; 3] = [[1, 0, 2, 3], [-1, 4, 5, 0], [6, 7, -1, 8]];

fn x_value(request: usize, c: usize) -> f32 {
    0.25 * (request * 64 + c) as f32 - 3.0
}

/// Run on the simulator; returns `y` (10 slots of 8 × 64).
fn run(k: &Kernel, opts: SimOptions, tiles: usize) -> Result<Vec<f32>, RuntimeError> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load(k)?;
    let f32s = |v: Vec<f32>| -> Vec<u8> { v.iter().flat_map(|f| f.to_le_bytes()).collect() };
    let x: Vec<f32> = (0..3 * 64).map(|i| x_value(i / 64, i % 64)).collect();
    let slots: Vec<u8> = SLOTS
        .iter()
        .flat_map(|r| r[..tiles].iter().flat_map(|s| s.to_le_bytes()))
        .collect();
    let (bx, bs) = (dev.upload(&f32s(x))?, dev.upload(&slots)?);
    let by = dev.upload(&vec![0u8; 10 * 512 * 4])?;
    let cfg = LaunchConfig {
        grid: [3, 1, 1],
        pdl: false,
        syms: kda::runtime::bind_syms(
            k,
            &[
                TensorShape {
                    shape: vec![3, 64],
                    strides: vec![64, 1],
                },
                TensorShape {
                    shape: vec![3, tiles],
                    strides: vec![tiles, 1],
                },
                TensorShape {
                    shape: vec![10, 8, 64],
                    strides: vec![512, 64, 1],
                },
            ],
        )?,
        scalars: Vec::<ScalarArg>::new(),
    };
    dev.launch(&m, &cfg, &[&bx, &bs, &by])?;
    Ok(dev
        .download(&by)?
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// What the kernel stores (the rest of `y` stays 0).
fn expected(tiles: usize, rows: usize) -> Vec<f32> {
    let mut y = vec![0.0; 10 * 512];
    for (request, slots) in SLOTS.iter().enumerate() {
        for (t, &slot) in slots[..tiles].iter().enumerate() {
            if slot <= 0 {
                continue;
            }
            for r in 0..rows {
                for c in 0..64 {
                    let at = slot as usize * 512 + (8 - rows + r) * 64 + c;
                    y[at] = x_value(request, c) * (t + 1) as f32 + r as f32;
                }
            }
        }
    }
    y
}

/// The deterministic schedule, then seeds at random points, with and
/// without hold-back; the race detector on.
fn schedules() -> Vec<SimOptions> {
    let mut v = vec![SimOptions::default()];
    for seed in 0..4 {
        for hold_back in [false, true] {
            v.push(SimOptions {
                seed: Some(seed),
                max_slice: 1 + seed as u32,
                hold_back,
                ..SimOptions::default()
            });
        }
    }
    v
}

#[test]
fn register_and_bulk_stores_write_the_same_tiles() {
    for tiles in 1..=4u32 {
        for rows in [8, 6] {
            let want = expected(tiles as usize, rows as usize);
            for staged in [false, true] {
                let k = write_tiles(staged, tiles, rows);
                for o in schedules() {
                    let d = format!(
                        "tiles {tiles} rows {rows} staged {staged} seed {:?} hold_back {}",
                        o.seed, o.hold_back
                    );
                    let y = run(&k, o, tiles as usize).unwrap_or_else(|e| panic!("{d}: {e}"));
                    assert!(y == want, "{d}: y differs from the expected tiles");
                }
            }
        }
    }
}

/// What each lowering emits: register stores predicated per row, or stage
/// stores, one fence, barrier and bulk store per tile, the leader's wait
/// before a stage comes round again (tiles 1 and 2 of 4) and at the drain.
#[test]
fn the_hint_picks_the_lowering() {
    use kda::ir::write::write_kernel;
    let count = |text: &str, what: &str| text.matches(what).count();
    let direct = write_kernel(&write_tiles(false, 4, 6));
    assert_eq!(count(&direct, "st.global t2["), 4 * 2, "{direct}");
    assert_eq!(count(&direct, "cp.async.bulk"), 0, "{direct}");
    assert_eq!(count(&direct, "bar.sync"), 0, "{direct}");
    assert!(!direct.contains("store_through_shared"), "{direct}");
    let staged = write_kernel(&write_tiles(true, 4, 6));
    assert!(staged.contains(" store_through_shared=t2 {"), "{staged}");
    assert_eq!(count(&staged, "st.global"), 0, "{staged}");
    assert_eq!(count(&staged, "\"y_tile_out["), 2, "{staged}");
    assert_eq!(count(&staged, "cp.async.bulk.store t2["), 4, "{staged}");
    assert_eq!(count(&staged, "fence.proxy.async"), 4, "{staged}");
    assert_eq!(count(&staged, "bar.sync 1, 64"), 4, "{staged}");
    assert_eq!(
        count(&staged, "cp.async.bulk.wait.read 0"),
        2 + 1,
        "{staged}"
    );
    // One tile: one stage, no wait before the barrier, the drain's.
    let one = write_kernel(&write_tiles(true, 1, 8));
    assert_eq!(count(&one, "\"y_tile_out["), 1, "{one}");
    assert_eq!(count(&one, "cp.async.bulk.wait.read 0"), 1, "{one}");
}

// ---- misuse

/// `y`'s rows are 72 apart: 8 rows of 64 are not one contiguous block.
#[cluster_kernel(block = 32)]
fn padded_rows(
    #[align(16)]
    #[strides(576, 72, 1)]
    #[store_through_shared]
    y: Tensor<f32, slot_count, 8, 64>,
) {
    let writers = role!(0..32);
    let out = y.tile_writer([8, 64], 1, &writers, 1);
    in_role!(writers, {
        let t = thread_idx();
        let tile = out.tile([1u32, 0u32, 0u32], || None);
        tile.finish(|| t == 0);
        out.drain(|| t == 0);
    });
}

#[test]
#[should_panic(
    expected = "kda: `y` is stored through shared memory in tiles of 8 rows of 64, \
                           copied in one piece: its innermost strides must be 64 and 1"
)]
fn staging_needs_contiguous_rows() {
    padded_rows();
}

/// The ways to get the sequence wrong, one per `case`.
#[cluster_kernel(block = 64)]
fn misuse(
    #[comptime] case: u32,
    #[align(16)]
    #[strides(512, 64, 1)]
    #[store_through_shared(case != 5)]
    y: Tensor<f32, slot_count, 8, 64>,
    n: u32,
) {
    let writers = role!(0..32);
    let others = role!(32..64);
    let out = y.tile_writer([8, 64], 2, &writers, 1);
    let other = y.tile_writer([8, 64], 1, &writers, 2);
    in_role!(others, {
        if case == 6 {
            let t = thread_idx();
            let tile = out.tile([1u32, 0u32, 0u32], || None);
            tile.finish(|| t == 32);
        }
    });
    in_role!(writers, {
        let t = thread_idx();
        if case == 7 {
            for i in range(0, n) {
                let tile = out.tile([i, 0u32, 0u32], || None);
                tile.finish(|| t == 0);
            }
        }
        let first = out.tile([1u32, 0u32, 0u32], || None);
        if case == 0 {
            // The second tile before the first is finished.
            let _second = out.tile([2u32, 0u32, 0u32], || None);
        }
        if case == 4 {
            // A mask of another writer's tile.
            let elsewhere = other.tile([3u32, 0u32, 0u32], || None);
            let mask = elsewhere.mask(None);
            first
                .row(t)
                .store4(val(0u32), pack([val(0.0f32); 4]), &mask);
        }
        first.finish(|| t == 0);
        if case == 1 {
            // Drained after one of its two tiles.
            out.drain(|| t == 0);
        }
        let second = out.tile([2u32, 0u32, 0u32], || None);
        second.finish(|| t == 0);
        if case == 2 {
            // A third tile of a writer made for two.
            let _ = out.tile([3u32, 0u32, 0u32], || None);
        }
        if case != 3 && case != 5 {
            out.drain(|| t == 0);
        }
    });
}

#[test]
#[should_panic(expected = "kda: tile 1 of `y` begun before tile 0 is finished")]
fn a_tile_begins_after_the_last_one_is_finished() {
    misuse(0);
}

#[test]
#[should_panic(expected = "kda: `drain` of the tile writer of `y` after 1 of its 2 tiles")]
fn the_drain_comes_after_every_tile() {
    misuse(1);
}

#[test]
#[should_panic(expected = "kda: tile 2 of `y`: the writer was made for 2 tiles")]
fn no_more_tiles_than_declared() {
    misuse(2);
}

#[test]
#[should_panic(expected = "kda: the tile writer of `y` stored 2 tiles but was never drained")]
fn a_writer_that_stored_must_be_drained() {
    misuse(3);
}

#[test]
#[should_panic(expected = "kda: a row of tile 0 of `y` stored with another tile's mask")]
fn a_row_is_stored_with_its_own_tiles_mask() {
    misuse(4);
}

/// Undrained without the hint too: the program is wrong whatever the
/// schedule.
#[test]
#[should_panic(expected = "kda: the tile writer of `y` stored 2 tiles but was never drained")]
fn the_drain_is_required_without_staging_too() {
    misuse(5);
}

#[test]
#[should_panic(
    expected = "kda: `tile` of the tile writer of `y` runs outside the role it was made for"
)]
fn the_writer_runs_in_its_role() {
    misuse(6);
}

#[test]
#[should_panic(expected = "kda: `tile` of the tile writer of `y` runs inside a runtime loop")]
fn tiles_are_a_comptime_sequence() {
    misuse(7);
}

#[test]
#[should_panic(
    expected = "kda: a tile of 1 rows of 6 `y` elements is 24 bytes; a bulk store \
                           moves a multiple of 16"
)]
fn a_staged_tile_is_whole_16_byte_units() {
    six_columns();
}

#[cluster_kernel(block = 32)]
fn six_columns(
    #[align(16)]
    #[store_through_shared]
    y: Tensor<f32, slot_count, 6>,
) {
    let writers = role!(0..32);
    let _ = y.tile_writer([1, 6], 1, &writers, 1);
}

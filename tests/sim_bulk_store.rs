//! Bulk stores on the simulator: the store runs asynchronously (its source
//! is read, and its destination written, at the seeded scheduler's choice,
//! no later than the `bulk_wait_read` / `bulk_wait` covering it), and the
//! race detector reports (a) a write of the source before a
//! `bulk_wait_read` covering the store, (b) a read of the destination
//! before a `bulk_wait` covering it; (c) exiting with stores in flight is
//! legal (the GPU completes them) and the bytes arrive. Each racy kernel
//! also runs with the detector off under every schedule (no error, whatever
//! the bytes), and its legal twin runs clean and bit-exact.

use kda::cluster_kernel;
use kda::ir::Kernel;
use kda::runtime::sim::{AccessKind, GlobalRace, RaceKind, SharedRace};
use kda::runtime::{
    Device, LaunchConfig, RuntimeError, ScalarArg, SimDevice, SimError, SimOptions, TensorShape,
};

/// Each CTA doubles its row of `x` into `tile`, and thread 0 bulk-stores
/// the tile to its row of `y`; then every thread overwrites the tile.
/// `wait`: thread 0 waits for the store to read the tile first (the macro
/// cannot see whether a comptime condition holds, so it accepts both).
#[cluster_kernel(block = 64)]
fn store_then_overwrite(
    #[comptime] wait: bool,
    x: Tensor<f32, rows, 64>,
    #[align(16)] y: Tensor<f32, rows, 64>,
) {
    let tile = shared!([f32; 64], align = 128);
    let t = thread_idx();
    let row = block_idx(0);
    tile[t] = x[[row, t]] * 2.0;
    fence_proxy_async();
    bar_sync(1, 64);
    if t == 0 {
        bulk_store!(y[[row, 0]] = tile[0], bytes = 256);
        bulk_commit();
        if wait {
            bulk_wait_read(0);
        }
    }
    bar_sync(1, 64);
    tile[t] = -1.0;
}

/// Thread 0 bulk-stores the doubled row into `y[row, 0..64]`; then every
/// thread reads it back and writes it to `y[row, 64..128]`. `full`: thread
/// 0 waits for the writes (`bulk_wait(0)`) before the barrier; otherwise
/// only for the read of the source (`bulk_wait_read(0)`), which does not
/// make the global bytes visible.
#[cluster_kernel(block = 64)]
fn store_then_read(
    #[comptime] full: bool,
    x: Tensor<f32, rows, 64>,
    #[align(16)] y: Tensor<f32, rows, 128>,
) {
    let tile = shared!([f32; 64], align = 128);
    let t = thread_idx();
    let row = block_idx(0);
    tile[t] = x[[row, t]] * 2.0;
    fence_proxy_async();
    bar_sync(1, 64);
    if t == 0 {
        bulk_store!(y[[row, 0]] = tile[0], bytes = 256, evict_first);
        bulk_commit();
        if full {
            bulk_wait(0);
        } else {
            bulk_wait_read(0);
        }
    }
    bar_sync(1, 64);
    y[[row, 64 + t]] = y[[row, t]];
}

/// Two stores into halves of the row, then exit: `commit` closes them in a
/// group (never waited for), else they stay in the open group. Either way
/// the GPU completes them after the CTA exits.
#[cluster_kernel(block = 32)]
fn store_and_exit(
    #[comptime] commit: bool,
    x: Tensor<f32, rows, 64>,
    #[align(16)] y: Tensor<f32, rows, 64>,
) {
    let tile = shared!([f32; 64], align = 128);
    let t = thread_idx();
    let row = block_idx(0);
    tile[t] = x[[row, t]] * 2.0;
    tile[t + 32] = x[[row, t + 32]] * 2.0;
    fence_proxy_async();
    sync_warp();
    if t == 0 {
        bulk_store!(y[[row, 0]] = tile[0], bytes = 128);
        bulk_store!(y[[row, 32]] = tile[32], bytes = 128);
        if commit {
            bulk_commit();
        }
    }
}

/// Run `k` on `rows` rows (one CTA each) with `x` = 0.5 * index; returns `y`.
fn run(k: &Kernel, opts: SimOptions, rows: u32, ycols: usize) -> Result<Vec<f32>, RuntimeError> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load(k)?;
    let x: Vec<u8> = (0..rows as usize * 64)
        .flat_map(|i| (0.5 * i as f32).to_le_bytes())
        .collect();
    let bx = dev.upload(&x)?;
    let by = dev.upload(&vec![0u8; rows as usize * ycols * 4])?;
    let cfg = LaunchConfig {
        grid: [rows, 1, 1],
        pdl: false,
        syms: kda::runtime::bind_syms(
            k,
            &[64, ycols].map(|c| TensorShape {
                shape: vec![rows as usize, c],
                strides: vec![c, 1],
            }),
        )?,
        scalars: Vec::<ScalarArg>::new(),
    };
    dev.launch(&m, &cfg, &[&bx, &by])?;
    Ok(dev
        .download(&by)?
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Deterministic (stores retire as late as allowed), seeds (at random
/// points), seeds with hold-back.
fn schedules(race_check: bool) -> Vec<SimOptions> {
    let mut v = vec![SimOptions {
        race_check,
        ..SimOptions::default()
    }];
    for seed in 0..6 {
        for hold_back in [false, true] {
            v.push(SimOptions {
                seed: Some(seed),
                max_slice: 1 + seed as u32,
                hold_back,
                race_check,
                ..SimOptions::default()
            });
        }
    }
    v
}

/// With the detector off every schedule runs (returning each `y`); with it
/// on, every schedule fails: the first error.
fn invisible_then_caught(k: &Kernel, rows: u32, ycols: usize) -> (Vec<Vec<f32>>, SimError) {
    let mut ys = vec![];
    for o in schedules(false) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        ys.push(run(k, o, rows, ycols).unwrap_or_else(|e| panic!("{d}: {e}")));
    }
    let mut first = None;
    for o in schedules(true) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        match run(k, o, rows, ycols) {
            Err(RuntimeError::Sim(e)) => {
                first.get_or_insert(e);
            }
            Err(e) => panic!("{d}: {e}"),
            Ok(_) => panic!("{d}: the race is not reported"),
        }
    }
    (ys, first.expect("schedules"))
}

/// Every schedule runs clean with the detector on and gives `want`.
fn clean(k: &Kernel, rows: u32, ycols: usize, want: &[f32]) {
    for o in schedules(true) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        let y = run(k, o, rows, ycols).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert_eq!(y, want, "{d}");
    }
}

fn doubled(rows: usize) -> Vec<f32> {
    (0..rows * 64).map(|i| i as f32).collect()
}

fn shared_race(e: &SimError) -> &SharedRace {
    match e {
        SimError::Race(r) => r,
        _ => panic!("not a shared-memory race: {e}"),
    }
}

fn global_race(e: &SimError) -> &GlobalRace {
    match e {
        SimError::GlobalRace(r) => r,
        _ => panic!("not a global race: {e}"),
    }
}

#[test]
fn overwriting_the_source_before_wait_read_is_a_race() {
    let (ys, e) = invisible_then_caught(&store_then_overwrite(false), 2, 64);
    let text = e.to_string();
    eprintln!("{text}");
    let r = shared_race(&e);
    assert_eq!(r.kind, RaceKind::BulkSource, "{text}");
    assert_eq!(r.buffer, "tile", "{text}");
    assert_eq!(r.earlier.kind, AccessKind::BulkRead { group: 0 }, "{text}");
    assert_eq!(r.earlier.site.op, "cp.async.bulk.store", "{text}");
    assert_eq!(r.later.kind, AccessKind::Write, "{text}");
    assert!(text.contains("sim_bulk_store.rs"), "{text}");
    // The deterministic schedule reads the source as late as it may (at
    // exit): after the overwrite. The stale bytes are what the GPU may store.
    assert_eq!(ys[0], vec![-1.0; 128]);
    clean(&store_then_overwrite(true), 2, 64, &doubled(2));
}

#[test]
fn reading_the_destination_before_wait_group_is_a_race() {
    let (_, e) = invisible_then_caught(&store_then_read(false), 2, 128);
    let text = e.to_string();
    eprintln!("{text}");
    let r = global_race(&e);
    assert_eq!(r.tensor, "y", "{text}");
    assert_eq!(r.earlier.kind, AccessKind::BulkWrite { group: 0 }, "{text}");
    assert_eq!(r.earlier.site.op, "cp.async.bulk.store", "{text}");
    assert_eq!(r.later.kind, AccessKind::Read, "{text}");
    assert_eq!(r.later.site.op, "ld.global", "{text}");
    // The row's destination bytes, 256 per row.
    assert!(r.start % 512 < 256 && r.end - r.start <= 256, "{text}");
    let mut want = vec![];
    for b in 0..2 {
        let row: Vec<f32> = (0..64).map(|i| (b * 64 + i) as f32).collect();
        want.extend_from_slice(&row);
        want.extend_from_slice(&row);
    }
    clean(&store_then_read(true), 2, 128, &want);
}

#[test]
fn exiting_with_bulk_stores_in_flight_is_legal_and_they_land() {
    for commit in [true, false] {
        clean(&store_and_exit(commit), 3, 64, &doubled(3));
    }
}

/// Without a wait the deterministic schedule never lets the destination
/// bytes land before the kernel ends: a read of them sees the old zeros.
#[test]
fn a_read_before_the_wait_sees_the_old_bytes_without_the_detector() {
    let y = run(
        &store_then_read(false),
        SimOptions {
            race_check: false,
            ..SimOptions::default()
        },
        1,
        128,
    )
    .expect("runs");
    assert_eq!(&y[64..], &[0.0; 64]);
    assert_eq!(&y[..64], &doubled(1)[..]);
}

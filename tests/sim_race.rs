//! The simulator as a race detector (issue 13): kernels that compute the
//! right answer in the simulator under every interleaving, yet read shared
//! memory before the synchronisation that makes it valid, are reported with
//! a race error naming the buffer, the bytes, both accesses and their roles;
//! their legal twins run clean. Each racy kernel is also run with the
//! detector off, under seeds and hold-back schedules, to show that the
//! simulator accepted it before.

use kda::cluster_kernel;
use kda::ir::Kernel;
use kda::runtime::sim::{AccessKind, AtExit, RaceKind, SharedRace};
use kda::runtime::{
    Device, LaunchConfig, RuntimeError, ScalarArg, SimDevice, SimError, SimOptions, TensorShape,
};

/// Per-token barriers: CTA `rank` gets token `k`'s row from every peer
/// through `outs[k]`; the main warp waits on the first `waits` of them and
/// then copies every token's row out. `waits = 1` is the issue's finding
/// (wait on the first token's barrier, read the others early), `waits = 0`
/// has every wait removed, `waits = 3` is the legal kernel.
#[cluster_kernel(block = 64, cluster = 2)]
fn tokens(#[comptime] waits: u32, x: Tensor<f32, rows, 32>, y: Tensor<f32, rows, 192>) {
    let main = role!(0..32);
    let gate = role!(32..64);
    let outs = mbarrier!(arrivals = 1, tx = 256, roles = [main, gate], count = 3);
    let inbox = shared!([f32; 3, 64], roles = [main, gate]);
    let lane = thread_idx() % 32;
    let rank = cluster_rank();
    in_role!(main, {
        if lane == 0 {
            for bar in &outs {
                bar.init();
                bar.arm();
            }
        }
        fence_mbarrier_init();
    });
    cluster_sync();
    in_role!(gate, {
        for k in 0..3u32 {
            let v = x[[block_idx(0), lane]] * ((k + 1) as f32);
            send!(
                inbox[[k, rank * 32 + lane]] = v,
                to = all,
                completes = outs[k as usize]
            );
        }
    });
    in_role!(main, {
        for k in 0..3u32 {
            if k < waits {
                outs[k as usize].wait();
            }
            y[[block_idx(0), k * 64 + lane]] = inbox[[k, lane]];
            y[[block_idx(0), k * 64 + 32 + lane]] = inbox[[k, 32 + lane]];
        }
    });
    cluster_sync();
}

/// A bulk copy stages a row; with `early`, it is read before the wait.
#[cluster_kernel(block = 64)]
fn staged(
    #[comptime] early: bool,
    #[align(16)] x: Tensor<f32, rows, 64>,
    y: Tensor<f32, rows, 64>,
) {
    let loaded = mbarrier!(arrivals = 1, tx = 256);
    let tile = shared!([f32; 64], align = 128);
    let t = thread_idx();
    let row = block_idx(0);
    if t == 0 {
        loaded.init();
        fence_mbarrier_init();
        loaded.arm();
        bulk_copy!(tile[0] = x[[row, 0]], bytes = 256, completes = loaded);
    }
    if early {
        let v = tile[t];
        loaded.wait();
        y[[row, t]] = v;
    } else {
        loaded.wait();
        y[[row, t]] = tile[t];
    }
}

/// Two warps exchange halves through shared memory; `synced` puts the
/// `bar.sync` between the writes and the reads.
#[cluster_kernel(block = 64)]
fn exchange(#[comptime] synced: bool, x: Tensor<f32, rows, 64>, y: Tensor<f32, rows, 64>) {
    let buf = shared!([f32; 64]);
    let t = thread_idx();
    let row = block_idx(0);
    buf[t] = x[[row, t]];
    if synced {
        bar_sync(0, 64);
    }
    y[[row, t]] = buf[63 - t];
}

/// The ring of tests/ui/ring-refill/pass: two stages refilled by bulk copies
/// once the consumer released them. With `early_release`, the consumer
/// releases the stage before it reads it, so the producer's refill may
/// overwrite data still being read.
#[cluster_kernel(block = 64)]
fn ring(
    #[comptime] early_release: bool,
    #[align(16)] x: Tensor<f32, rows, 128>,
    y: Tensor<f32, rows, 128>,
    n: u32,
) {
    let producer = role!(0..32);
    let consumer = role!(32..64);
    let full = mbarrier!(
        arrivals = 1,
        tx = 512,
        roles = [producer, consumer],
        count = 2
    );
    let empty = mbarrier!(
        arrivals = 32,
        roles = [producer, consumer],
        count = 2,
        released
    );
    let ring = shared!([f32; 2, 128], align = 128, guard = full, roles = [producer, consumer]);
    let lane = thread_idx() % 32;
    in_role!(producer, {
        if lane == 0 {
            for s in 0..2u32 {
                full[s].init();
                empty[s].init();
            }
        }
        fence_mbarrier_init();
    });
    bar_sync(0, 64);
    in_role!(producer, {
        for i in range(0, n) {
            let s = i % 2;
            empty[s].wait();
            if lane == 0 {
                full[s].arm();
                bulk_copy!(ring[[s, 0]] = x[[i, 0]], bytes = 512, completes = full[s]);
            }
        }
    });
    in_role!(consumer, {
        for i in range(0, n) {
            let s = i % 2;
            full[s].wait();
            if early_release {
                empty[s].arrive();
                y[[i, lane]] = ring[[s, lane]];
            } else {
                y[[i, lane]] = ring[[s, lane]];
                empty[s].arrive();
            }
        }
    });
}

/// A CTA arms its barrier for a 256-byte copy but copies only 128 bytes
/// and exits without waiting; with `complete`, it copies all 256 and waits.
#[cluster_kernel(block = 32)]
fn short_copy(
    #[comptime] complete: bool,
    #[align(16)] x: Tensor<f32, rows, 64>,
    y: Tensor<f32, rows, 64>,
) {
    let loaded = mbarrier!(arrivals = 1, tx = 256);
    let tile = shared!([f32; 64], align = 128);
    let t = thread_idx();
    let row = block_idx(0);
    if t == 0 {
        loaded.init();
        fence_mbarrier_init();
        loaded.arm();
        if complete {
            bulk_copy!(tile[0] = x[[row, 0]], bytes = 256, completes = loaded);
        } else {
            bulk_copy!(tile[0] = x[[row, 0]], bytes = 128, completes = loaded);
        }
    }
    if complete {
        loaded.wait();
        y[[row, t]] = tile[t];
    }
}

/// Run `k` on `rows` rows (one CTA each) with `x` = 0.5 * index and a zero
/// `y` of the same shape; returns `y`.
fn run(
    k: &Kernel,
    opts: SimOptions,
    rows: u32,
    cols: (usize, usize),
    scalars: Vec<ScalarArg>,
) -> Result<Vec<f32>, RuntimeError> {
    let dev = SimDevice::with_options(opts);
    let m = dev.load(k)?;
    let x: Vec<u8> = (0..rows as usize * cols.0)
        .flat_map(|i| (0.5 * i as f32).to_le_bytes())
        .collect();
    let bx = dev.upload(&x)?;
    let by = dev.upload(&vec![0u8; rows as usize * cols.1 * 4])?;
    let cfg = LaunchConfig {
        grid: [rows, 1, 1],
        pdl: false,
        syms: kda::runtime::bind_syms(
            k,
            &[cols.0, cols.1].map(|c| TensorShape {
                shape: vec![rows as usize, c],
                strides: vec![c, 1],
            }),
        )?,
        scalars,
    };
    dev.launch(&m, &cfg, &[&bx, &by])?;
    Ok(dev
        .download(&by)?
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The schedules the simulator matrices use: deterministic, seeds, seeds
/// with hold-back.
fn schedules(race_check: bool) -> Vec<SimOptions> {
    let mut v = vec![SimOptions {
        race_check,
        ..SimOptions::default()
    }];
    for seed in 0..6 {
        for hold_back in [false, true] {
            v.push(SimOptions {
                seed: Some(seed),
                max_slice: 3,
                hold_back,
                race_check,
                ..SimOptions::default()
            });
        }
    }
    v
}

/// Without the detector, every schedule runs the kernel without an error
/// (what the simulator did before it had one: whether the answer is wrong
/// depends on the interleaving); with it, every schedule fails and the
/// first schedule's error is returned.
fn invisible_then_caught(
    k: &Kernel,
    rows: u32,
    cols: (usize, usize),
    scalars: Vec<ScalarArg>,
) -> SimError {
    for o in schedules(false) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        run(k, o, rows, cols, scalars.clone()).unwrap_or_else(|e| panic!("{d}: {e}"));
    }
    let mut first = None;
    for o in schedules(true) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        match run(k, o, rows, cols, scalars.clone()) {
            Err(RuntimeError::Sim(e)) => {
                first.get_or_insert(e);
            }
            Err(e) => panic!("{d}: {e}"),
            Ok(_) => panic!("{d}: the race is not reported"),
        }
    }
    first.expect("schedules")
}

fn clean(k: &Kernel, rows: u32, cols: (usize, usize), scalars: Vec<ScalarArg>) -> Vec<f32> {
    let mut want = None;
    for o in schedules(true) {
        let d = format!("seed {:?} hold_back {}", o.seed, o.hold_back);
        let y = run(k, o, rows, cols, scalars.clone()).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(
            *want.get_or_insert_with(|| y.clone()) == y,
            "{d}: results differ"
        );
    }
    want.expect("schedules")
}

fn race(e: &SimError) -> &SharedRace {
    match e {
        SimError::Race(r) => r,
        _ => panic!("not a race: {e}"),
    }
}

#[test]
fn reading_tokens_after_waiting_only_on_the_first_is_a_race() {
    let e = invisible_then_caught(&tokens(1), 4, (32, 192), vec![]);
    let r = race(&e);
    let text = e.to_string();
    eprintln!("{text}");
    assert_eq!(r.kind, RaceKind::Unwaited, "{text}");
    assert_eq!(r.buffer, "inbox", "{text}");
    assert!(
        matches!(&r.earlier.kind, AccessKind::AsyncWrite { barrier, .. } if barrier.starts_with("outs[")
            && barrier != "outs[0]"),
        "{text}"
    );
    assert_eq!(r.earlier.site.op, "st.async", "{text}");
    assert_eq!(r.earlier.role.as_deref(), Some("gate"), "{text}");
    assert_eq!(r.later.kind, AccessKind::Read, "{text}");
    assert_eq!(r.later.role.as_deref(), Some("main"), "{text}");
    assert!(r.later.site.lane.is_some(), "{text}");
    // A token row is 64 floats; the range lies in a later token's row.
    assert!(r.start >= 256 && r.end <= 768 && r.start < r.end, "{text}");
    assert!(text.contains("sim_race.rs"), "{text}");
    let y = clean(&tokens(3), 4, (32, 192), vec![]);
    // Row b, token k, sender rank r, lane l: (k + 1) * x[(pair + r) row, l],
    // with x[i, l] = 0.5 * (32 i + l) (x is read as rows of 32).
    for b in 0..4usize {
        let pair = b / 2 * 2;
        for k in 0..3usize {
            for r in 0..2usize {
                for l in 0..32usize {
                    let x = 0.5 * ((pair + r) * 32 + l) as f32;
                    assert_eq!(y[b * 192 + k * 64 + r * 32 + l], (k + 1) as f32 * x);
                }
            }
        }
    }
}

#[test]
fn reading_tokens_without_any_wait_is_a_race() {
    let e = invisible_then_caught(&tokens(0), 2, (32, 192), vec![]);
    let r = race(&e);
    assert_eq!(r.kind, RaceKind::Unwaited, "{e}");
    assert_eq!(r.buffer, "inbox", "{e}");
    assert_eq!(r.later.role.as_deref(), Some("main"), "{e}");
}

#[test]
fn reading_a_bulk_copy_before_its_wait_is_a_race() {
    let e = invisible_then_caught(&staged(true), 2, (64, 64), vec![]);
    let r = race(&e);
    assert_eq!(r.kind, RaceKind::Unwaited, "{e}");
    assert_eq!(r.buffer, "tile", "{e}");
    assert_eq!(r.earlier.site.op, "cp.async.bulk", "{e}");
    assert!(
        matches!(&r.earlier.kind, AccessKind::AsyncWrite { barrier, phase: 0, .. } if barrier == "loaded"),
        "{e}"
    );
    let y = clean(&staged(false), 2, (64, 64), vec![]);
    let want: Vec<f32> = (0..128).map(|i| 0.5 * i as f32).collect();
    assert_eq!(y, want);
}

#[test]
fn shared_exchange_without_bar_sync_is_a_race() {
    let e = invisible_then_caught(&exchange(false), 2, (64, 64), vec![]);
    let r = race(&e);
    assert!(
        matches!(r.kind, RaceKind::WriteRead | RaceKind::ReadWrite),
        "{e}"
    );
    assert_eq!(r.buffer, "buf", "{e}");
    assert_ne!(r.earlier.site.warp, r.later.site.warp, "{e}");
    let y = clean(&exchange(true), 2, (64, 64), vec![]);
    for b in 0..2usize {
        for t in 0..64usize {
            assert_eq!(y[b * 64 + t], 0.5 * (b * 64 + 63 - t) as f32);
        }
    }
}

#[test]
fn ring_stays_clean_and_an_early_release_is_a_race() {
    let rows = 6u32;
    let y = clean(&ring(false), rows, (128, 128), vec![ScalarArg::U32(rows)]);
    // One CTA per row runs the whole ring over all rows: every CTA writes
    // the same y, rows x 32 lanes.
    for i in 0..rows as usize {
        for l in 0..32usize {
            assert_eq!(y[i * 128 + l], 0.5 * (i * 128 + l) as f32);
        }
    }
    let e = invisible_then_caught(&ring(true), rows, (128, 128), vec![ScalarArg::U32(rows)]);
    let r = race(&e);
    assert_eq!(r.buffer, "ring", "{e}");
    let roles = [r.earlier.role.as_deref(), r.later.role.as_deref()];
    assert!(
        roles.contains(&Some("producer")) && roles.contains(&Some("consumer")),
        "{e}"
    );
}

#[test]
fn exiting_with_transaction_bytes_incoming_is_reported() {
    let k = short_copy(false);
    // The verifier sees this one statically; the run-time check is for
    // byte counts it cannot prove (runtime sizes, data-dependent sends).
    let unverified = |o: SimOptions| SimOptions { verify: false, ..o };
    for o in schedules(false) {
        run(&k, unverified(o), 2, (64, 64), vec![]).unwrap_or_else(|e| panic!("{e}"));
    }
    for o in schedules(true) {
        let e = run(&k, unverified(o), 2, (64, 64), vec![]).unwrap_err();
        let RuntimeError::Sim(SimError::AtExit(a)) = &e else {
            panic!("{e}")
        };
        assert_eq!(a.barrier, "loaded", "{e}");
        assert_eq!(
            a.issue,
            AtExit::TxIncoming {
                phase: 0,
                expected: 256,
                arrived: 128
            },
            "{e}"
        );
    }
    clean(&short_copy(true), 2, (64, 64), vec![]);
}

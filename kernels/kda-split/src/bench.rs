//! `kda-split bench`: KdaSplit's step time on the GPU against the targets of
//! the issue, with the two ceilings measured in the same run.
//!
//! 1. **Copy ceiling**: a copy kernel written with the kda-ir builder
//!    (`f32x4` loads and stores) over 1 GiB, several block / unroll variants,
//!    bytes read + written over the median time; the best verified variant
//!    is the ceiling. The driver's device-to-device copy is shown beside it.
//! 2. **Same-bytes copy** (unless `--no-same-bytes-copy`), per point, after
//!    its schedules ([`same_copy`]): a copy that moves exactly the point's state traffic
//!    (reads `B·H` pages, writes `T` copies), PDL-chained in a graph of the
//!    point's steps over the point's slot-group rotation, each copy-step
//!    variant verified and timed; KdaSplit's rows give their state traffic
//!    as "% of same-bytes copy" beside "% of copy": the part of the gap to
//!    the ceiling any kernel moving that much per chained step pays.
//! 3. **Graph kernel-node floor**: graphs of 256 empty kernels, one CTA and
//!    KdaSplit's batch-1 geometry (12 heads × clusters of 8), with and
//!    without PDL.
//! 4. **KdaSplit** over heads × batch × tokens × schedule. Per point, the
//!    state lives in slot groups totalling ≥ 4 × L2 (filled on the device);
//!    a graph holds `max(groups, 32)` PDL-chained steps, step `s` on slot
//!    group `s mod groups`, and is replayed for about 250 ms; µs/step is the
//!    median replay time over the steps. State traffic is
//!    `B·H·128·128·4·(1 + T)` bytes per step (one page read, T written per
//!    request and head; every request active).
//!
//! Prints markdown tables (copy, same-bytes copy, floor, every schedule,
//! targets with verdicts) and writes everything as JSON with `--json FILE`. Without a GPU
//! it says so and fails (exit 4); `--sim` checks the machinery on the
//! simulator instead.
//!
//! `kda-split autotune` ([`autotune`]) searches the schedule space with the
//! same workload and timing ([`measure_point`]) and writes the tuned table.

pub mod autotune;
pub mod error;
pub mod gpu;
pub mod options;
pub mod report;
pub mod schedule;
pub mod sim;
pub mod workload;

/// The helper kernels and the same-bytes copy are `kda_host`'s, shared with
/// `decode-bench`.
pub use kda_host::bench::{kernels, same_copy};

pub use error::BenchError;
pub use options::{Options, SweepArgs, product};
pub use schedule::{Candidate, NAMED, ScheduleError, default_schedules, named};

use std::time::Instant;

use kda_host::bench::trace::print_trace;
use kda_runtime::{CudaDevice, Device, RuntimeError};

use crate::config::KdaConfig;
use gpu::{Budget, copy_ceiling, measure_kda, node_floor, tbps};
use kernels::COPY_VARIANTS;
use report::{Outcome, Resolved, Results, Row};
use same_copy::SameCopies;
use workload::Workload;

/// What `bench --help` adds after the flags.
pub const AFTER_HELP: &str = "\
Default sweep: heads 12 at batch 1, 8, 32, 64, 128, 512 (T = 1) and T = 4 at
batch 8, 64 and 128; heads 6 and 32 at batch 1, 128, 512. With --heads, --batch or
--tokens: their product, a list not given being heads 12, batch 1, 8, 32, 128,
512 or tokens 1. Default schedules: auto, seed and the names above (--quick:
auto, seed, e1 and e2-c2; the same-bytes copies, five variants per distinct
point size, come on top: --no-same-bytes-copy skips them). The targets are issue
15's (state >= 93 % of the copy ceiling at H12/H32 B128/B512 and H6 B512, T = 1;
>= 85 % at H12 T = 4 B8/B64/B128; batch 1 within 2.26 / 2.57 / 3.08 us at
H6 / H12 / H32; >= 1.25x faster than fla's kernel alone where the issue has
its figure) and the unfused Triton stack's. The targets' `default`
column is the kernel's default schedule: `auto` (the tuned table) where it
was measured, else the seed's.";

/// Open GPU 0. Without one, say so and fail (exit 4): a benchmark or search
/// that measured nothing must not pass for one that did.
pub fn open_gpu(command: &str) -> Result<CudaDevice, RuntimeError> {
    CudaDevice::new(0).inspect_err(|e| {
        if let RuntimeError::NoDriver(why) = e {
            println!(
                "{command}: no usable GPU ({why}); nothing measured.\n\
                 The benchmark needs an H100/H200; `kda-split bench --sim` checks its kernels \
                 and workload on the simulator instead."
            );
        }
    })
}

/// `kda-split bench`.
pub fn main(opts: &Options) -> Result<(), BenchError> {
    if opts.sim {
        let ignored = opts.flags_ignored_by_sim();
        if !ignored.is_empty() {
            return Err(BenchError::SimFlags(ignored));
        }
        return sim::sanity();
    }
    let dev = open_gpu("bench")?;
    // Before the measurements: a --json that cannot be written fails now,
    // not after minutes of timing.
    if let Some(path) = &opts.json {
        kda_host::case::check_output(path).map_err(|e| BenchError::Output(e.to_string()))?;
    }
    let results = run(&dev, opts)?;
    let text = report::markdown(&results);
    println!("\n{text}");
    if let Some(path) = &opts.json {
        let doc = report::to_json(&results);
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        kda_host::case::write_atomic(path, text.as_bytes())
            .map_err(|e| BenchError::Output(e.to_string()))?;
        println!("JSON written to {}", path.display());
    }
    Ok(())
}

/// Measure everything `opts` asks for on `dev`.
pub fn run(dev: &CudaDevice, opts: &Options) -> Result<Results, BenchError> {
    let start = Instant::now();
    let budget = opts.sweep.budget();
    let l2 = dev.l2_cache_bytes()?;
    println!("bench on {} (L2 {} MiB)", dev.describe(), l2 >> 20);

    let copy =
        copy_ceiling(dev, opts.copy_mib() << 20, &COPY_VARIANTS, &budget).unwrap_or_else(|e| {
            println!("  copy ceiling failed: {e}");
            Vec::new()
        });
    for c in &copy {
        println!(
            "  copy {}: {:.1} µs, {:.3} TB/s{}",
            c.name,
            c.timing.median_us,
            c.tbps,
            if c.verified { "" } else { " (WRONG RESULT)" }
        );
    }
    let ceiling = copy
        .iter()
        .filter(|c| c.verified && c.name.starts_with("bench_copy"))
        .map(|c| c.tbps)
        .max_by(f64::total_cmp);

    let floor = node_floor(
        dev,
        &[(32, 1, [1, 1, 1]), (160, 8, [8, 12, 1])],
        256,
        &budget,
    )
    .unwrap_or_else(|e| {
        println!("  node floor failed: {e}");
        Vec::new()
    });
    for f in &floor {
        println!(
            "  floor {} grid {:?} pdl {}: {:.3} µs/node",
            f.name, f.grid, f.pdl, f.timing.median_us
        );
    }

    let schedules = opts.schedules();
    let mut rows = Vec::new();
    let mut same_copy = SameCopies::new(opts.trace);
    for point in opts.points() {
        match opts.sweep.workload(dev, point, l2) {
            Ok((mut workload, check)) => {
                let sweep = Sweep {
                    budget,
                    check,
                    ceiling,
                    verbose: true,
                    deadline: None,
                    trace: opts.trace,
                };
                rows.extend(measure_point(dev, &mut workload, &schedules, &sweep));
            }
            Err(e) => {
                let (groups, steps) = workload::rotation(&opts.sweep.plan(l2), &point);
                rows.extend(schedules.iter().map(|c| Row {
                    point,
                    candidate: c.at(&point),
                    resolved: None,
                    groups,
                    steps,
                    outcome: Outcome::Failed(format!("setup: {e}")),
                }));
            }
        }
        // After the point's workload is freed: the copy's groups take as
        // much memory again. Points of the same `B·H` and `T` share one.
        if opts.same_bytes_copy() {
            let plan = opts.sweep.plan(l2);
            match point.same_bytes() {
                Ok(same) => same_copy.measure(
                    dev,
                    &point.to_string(),
                    same,
                    workload::rotation(&plan, &point),
                    plan.seed as u32,
                    &budget,
                    ceiling,
                ),
                Err(e) => println!("  same-bytes copy: {e}"),
            }
        }
    }
    Ok(Results {
        device: dev.describe(),
        l2_bytes: l2,
        copy,
        same_copy: same_copy.rows,
        floor,
        rows,
        options: opts.to_json(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// How [`measure_point`] times and reports.
#[derive(Clone, Copy, Debug)]
pub struct Sweep {
    pub budget: Budget,
    /// Compare each schedule's first step with the float64 reference.
    pub check: bool,
    /// The copy ceiling in TB/s, for each line's "% of copy".
    pub ceiling: Option<f64>,
    /// Print a line per measured schedule.
    pub verbose: bool,
    /// Schedules not started by then are skipped.
    pub deadline: Option<Instant>,
    /// After each measured schedule, trace its steps with CTA timeline
    /// probes and print where its CTAs' time goes ([`gpu::trace_kda`]).
    pub trace: bool,
}

/// Measure `schedules` on `workload`'s point (gate mode 0, bias on), in
/// order: one row each. A schedule that is invalid there, or resolves to
/// one measured before it, is skipped (saying which); `auto` takes the
/// tuned table's schedule of the point.
pub fn measure_point(
    dev: &CudaDevice,
    workload: &mut Workload<CudaDevice>,
    schedules: &[Candidate],
    sweep: &Sweep,
) -> Vec<Row> {
    let point = workload.point;
    let mut seen: Vec<(Resolved, String)> = Vec::new();
    let mut rows = Vec::new();
    for cand in schedules {
        let cand = cand.at(&point);
        let mut row = Row {
            point,
            candidate: cand.clone(),
            resolved: None,
            groups: workload.groups,
            steps: workload.steps,
            outcome: Outcome::Skipped(String::new()),
        };
        let cfg = KdaConfig::new(point.heads, point.batch, 0, true, &cand.raw, point.tokens);
        row.outcome = match cfg {
            Err(e) => Outcome::Skipped(e.to_string()),
            Ok(cfg) => {
                let resolved = cfg.resolved_schedule();
                row.resolved = Some(resolved);
                if let Some((_, first)) = seen.iter().find(|(r, _)| *r == resolved) {
                    Outcome::Skipped(format!("resolves to the schedule of `{first}`"))
                } else if sweep.deadline.is_some_and(|d| Instant::now() >= d) {
                    Outcome::Skipped("time limit".into())
                } else {
                    seen.push((resolved, cand.label.clone()));
                    measure_one(dev, workload, &cand, &cfg, sweep)
                }
            }
        };
        rows.push(row);
    }
    rows
}

fn measure_one(
    dev: &CudaDevice,
    workload: &mut Workload<CudaDevice>,
    cand: &Candidate,
    cfg: &KdaConfig,
    sweep: &Sweep,
) -> Outcome {
    match measure_kda(dev, workload, cfg, &sweep.budget, sweep.check) {
        Ok(mut m) => {
            if sweep.verbose {
                let bw = tbps(workload.point.state_bytes_per_step(), m.timing.median_us);
                println!(
                    "    {:<12} {:>9.2} µs/step  {:.3} TB/s{}{}{}",
                    cand.label,
                    m.timing.median_us,
                    bw,
                    sweep.ceiling.map_or(String::new(), |c| format!(
                        "  {:>5.1} % of copy",
                        bw / c * 100.0
                    )),
                    if m.bad_outputs > 0 {
                        format!("  BAD OUTPUT ({} elements)", m.bad_outputs)
                    } else {
                        String::new()
                    },
                    match &m.check {
                        None => String::new(),
                        Some(Ok(())) => "  (step 0 matches the reference)".into(),
                        Some(Err(report)) => format!("  REFERENCE MISMATCH:\n{report}"),
                    }
                );
            }
            if sweep.trace {
                let traced = gpu::trace_kda(dev, workload, cfg, &m, &sweep.budget);
                m.trace =
                    print_trace(&cand.label, 6, traced).and_then(|t| serde_json::to_value(&t).ok());
            }
            Outcome::Measured(m)
        }
        Err(e) => {
            println!("    {:<12} failed: {e}", cand.label);
            Outcome::Failed(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use report::{BenchFile, OptionsJson};
    use workload::{Plan, Point, rotation};

    #[test]
    fn triton_targets_scale_by_heads_and_interpolate() {
        assert_eq!(report::triton_us(12, 128), Some((79.4, false)));
        let (us, interp) = report::triton_us(6, 1).unwrap();
        assert!((us - 7.65).abs() < 1e-9 && !interp);
        let (us, interp) = report::triton_us(12, 8).unwrap();
        assert!(interp && us > 15.3 && us < 79.4);
        assert_eq!(report::triton_us(12, 1024), None);
    }

    #[test]
    fn plan_rotates_over_four_l2_and_keeps_two_groups() {
        let plan = Plan {
            rotate_bytes: 4 * (50 << 20),
            min_groups: 2,
            min_steps: 32,
            seed: 1,
        };
        let b1 = Point {
            heads: 12,
            batch: 1,
            tokens: 1,
        };
        let (groups, steps) = rotation(&plan, &b1);
        assert!(groups * b1.slot_bytes() >= 200 << 20 && steps == groups);
        let big = Point {
            heads: 32,
            batch: 512,
            tokens: 1,
        };
        assert_eq!(rotation(&plan, &big), (2, 32));
        assert_eq!(b1.state_bytes_per_step(), 12 * 128 * 128 * 4 * 2);
    }

    #[test]
    fn report_renders_targets_and_json() {
        use gpu::{CopyRow, KdaMeasure, Timing};
        use kda_runtime::cuda::KernelResources;
        use same_copy::SameCopyRow;
        let timing = |us: f64| Timing {
            median_us: us,
            p10_us: us * 0.99,
            p90_us: us * 1.01,
            replays: 100,
            units: 32,
        };
        let res = KernelResources {
            registers: 96,
            static_smem_bytes: 0,
            dyn_smem_bytes: 4096,
            local_bytes: 0,
            max_threads_per_block: 1024,
        };
        let row = |heads, batch, tokens, label: &str, us: Option<f64>| Row {
            point: Point {
                heads,
                batch,
                tokens,
            },
            candidate: named(label).unwrap_or_else(|| Candidate::new(label, &[])),
            resolved: None,
            groups: 3,
            steps: 32,
            outcome: match us {
                Some(us) => Outcome::Measured(KdaMeasure {
                    timing: timing(us),
                    resources: res,
                    bad_outputs: 0,
                    check: None,
                    trace: None,
                }),
                None => Outcome::Failed("boom".into()),
            },
        };
        let resolved = Resolved {
            early: 0,
            lanes: 8,
            occupancy: 0,
            cluster: 8,
            evict: false,
            bulk_store: false,
            balance: false,
        };
        let results = Results {
            device: "test".into(),
            l2_bytes: 50 << 20,
            copy: vec![CopyRow {
                name: "bench_copy_b256_u4".into(),
                bytes: 2 << 30,
                timing: timing(500.0),
                tbps: 4.0,
                verified: true,
            }],
            // H12 B128 T1's bytes: the faster variant copied wrongly and
            // does not count; the other takes 60 µs a step.
            same_copy: [("b256_u4", 40.0, false), ("b512_u2", 60.0, true)]
                .map(|(name, us, verified)| {
                    let bytes = 2 * 12 * 128 * 65536;
                    SameCopyRow {
                        bytes_per_step: bytes,
                        copies: 1,
                        name: format!("bench_copy_step_{name}_t1"),
                        read_bytes: bytes / 2,
                        slot_groups: 2,
                        steps_per_graph: 32,
                        tbps: tbps(bytes, us),
                        timing: timing(us),
                        verified,
                        trace: None,
                    }
                })
                .to_vec(),
            floor: vec![],
            rows: vec![
                Row {
                    resolved: Some(resolved),
                    ..row(12, 1, 1, "auto", Some(3.0))
                },
                Row {
                    resolved: Some(resolved),
                    outcome: Outcome::Skipped("resolves to the schedule of `auto`".into()),
                    ..row(12, 1, 1, "default", None)
                },
                row(12, 1, 1, "e1", Some(2.5)),
                row(12, 8, 1, "default", Some(4.0)),
                row(12, 8, 4, "default", Some(5.0)),
                row(12, 8, 4, "e1", None),
                Row {
                    resolved: Some(Resolved {
                        cluster: 2,
                        ..resolved
                    }),
                    ..row(12, 128, 1, "default", Some(50.0))
                },
            ],
            options: OptionsJson::default(),
            seconds: 1.0,
        };
        // The seed's row at batch 1 was skipped as auto's schedule: it is
        // auto's row.
        let b1 = Point {
            heads: 12,
            batch: 1,
            tokens: 1,
        };
        assert_eq!(results.row_of(&b1, "seed").and_then(Row::us), Some(3.0));
        assert_eq!(results.default_row(&b1).map(|(n, _)| n), Some("auto"));
        let b8 = Point { batch: 8, ..b1 };
        assert_eq!(results.default_row(&b8).map(|(n, _)| n), Some("seed"));
        let md = report::markdown(&results);
        // Batch 1: default (auto) 3.0 µs fails 2.57, best (e1) 2.5 passes.
        let b1 = md
            .lines()
            .find(|l| l.starts_with("| H12 B1 T1 | ≤ 2.57"))
            .unwrap();
        assert!(b1.contains("| FAIL |") && b1.contains("| PASS |"), "{b1}");
        // T = 4: 8·12·64 KiB·(1 + 4) in 5 µs = 6.29 TB/s, 157 % of 4.0.
        let t4 = md
            .lines()
            .find(|l| l.starts_with("| H12 B8 T4 | state ≥ 85 %"))
            .unwrap();
        assert!(t4.contains("157.3 %") && t4.contains("PASS"), "{t4}");
        // Against fla's 15.18 µs: 3.04× faster, 5.0 / 12.144 = 0.41 of the limit.
        let fla = md
            .lines()
            .find(|l| l.starts_with("| H12 B8 T4 | ≥ 1.25× fla"))
            .unwrap();
        assert!(fla.contains("3.04× fla") && fla.contains("0.41×"), "{fla}");
        // Batch 128: 128·12·64 KiB·2 B in 50 µs = 4.03 TB/s over a 4.0 ceiling.
        let b128 = md
            .lines()
            .find(|l| l.starts_with("| H12 B128 T1 | state"))
            .unwrap();
        assert!(b128.contains("PASS"), "{b128}");
        assert!(md.contains("FAILED: boom"));
        // The same-bytes copy: 60 µs a step against KdaSplit's 50 µs is
        // 120 %, in the column after "% of copy" (100.7 % of 4.0 TB/s).
        let row = md
            .lines()
            .find(|l| l.starts_with("| H12 B128 T1 | seed"))
            .unwrap();
        assert!(row.ends_with("| 100.7 | 120.0 |"), "{row}");
        // 96 registers x 160 threads and 4 KiB: 4 CTAs per SM, bound by
        // registers; at C 2 each reads 64 rows of 512 bytes: 128 KiB.
        assert!(row.contains("| 96 | 0 | 4 regs | 128 | 32 |"), "{row}");
        // Without a resolved schedule the columns read "—".
        let t4_row = md
            .lines()
            .find(|l| l.starts_with("| H12 B8 T4 | seed"))
            .unwrap();
        assert!(t4_row.contains("| 96 | 0 | — | — | 32 |"), "{t4_row}");
        let t4 = md
            .lines()
            .find(|l| l.starts_with("| H12 B8 T4 | seed"))
            .unwrap();
        assert!(t4.ends_with("| — |"), "no copy of its bytes: {t4}");
        let copy = md
            .lines()
            .find(|l| l.starts_with("| H12 B128 T1 | 201.3 | 1 |"))
            .unwrap();
        assert!(
            copy.contains("bench_copy_step_b512_u2_t1") && copy.contains("| 60.00 |"),
            "{copy}"
        );
        // 201.3 MB in 60 µs: 3.355 TB/s, 83.9 % of the 4.0 TB/s ceiling.
        assert!(copy.ends_with("| 3.355 | 83.9 |"), "{copy}");
        let doc = report::to_json(&results);
        assert_eq!(doc.rows.len(), 7);
        assert_eq!(doc.same_bytes_copy.len(), 2);
        let b128 = doc.rows.iter().find(|r| r.batch == 128).unwrap();
        assert!((b128.fraction_of_same_bytes_copy.unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(
            (b128.ctas_per_sm, b128.state_kib_per_sm),
            (Some(4), Some(128))
        );
        let b8 = doc
            .rows
            .iter()
            .find(|r| r.batch == 8 && r.tokens == 1)
            .unwrap();
        assert_eq!((b8.ctas_per_sm, b8.state_kib_per_sm), (None, None));
        assert!(
            doc.rows
                .iter()
                .filter(|r| r.batch != 128)
                .all(|r| r.fraction_of_same_bytes_copy.is_none())
        );
        assert_eq!(doc.targets[0].default_schedule.as_deref(), Some("auto"));
        assert_eq!(doc.copy_ceiling_tbps, Some(4.0));
        assert!(doc.targets.len() >= 5);
        // The file reads back as written (to the float parser's precision:
        // compared with the untyped reading of the same text).
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let back: BenchFile = serde_json::from_str(&text).unwrap();
        let untyped: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), untyped);
    }

    #[test]
    fn bench_files_from_before_the_same_bytes_copy_still_read() {
        // An older file: no same-bytes copy, no per-row fraction of it, no
        // option for it.
        let old = serde_json::json!({
            "copy_ceiling_tbps": 4.0,
            "options": {"quick": true, "seed": 1},
            "rows": [{
                "batch": 128, "heads": 12, "tokens": 1, "schedule": "auto",
                "status": "ok", "us_per_step": 50.0, "fraction_of_copy": 1.007
            }]
        });
        let doc: BenchFile = serde_json::from_value(old).unwrap();
        assert!(doc.same_bytes_copy.is_empty() && !doc.options.same_bytes_copy);
        assert_eq!(doc.rows[0].fraction_of_same_bytes_copy, None);
        assert_eq!(doc.rows[0].good_us(), Some(50.0));
        // Written again, it gains no field it did not have.
        let row = serde_json::to_value(&doc.rows[0]).unwrap();
        assert!(row.get("fraction_of_same_bytes_copy").is_none());
        assert!(row.get("ctas_per_sm").is_none() && row.get("state_kib_per_sm").is_none());
    }
}

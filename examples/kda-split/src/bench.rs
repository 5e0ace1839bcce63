//! `kda-split bench`: KdaSplit's step time on the GPU against the targets of
//! the issue, with the two ceilings measured in the same run.
//!
//! 1. **Copy ceiling**: a copy kernel written with the kda-ir builder
//!    (`f32x4` loads and stores) over 1 GiB, several block / unroll variants,
//!    bytes read + written over the median time; the best verified variant
//!    is the ceiling. The driver's device-to-device copy is shown beside it.
//! 2. **Graph kernel-node floor**: graphs of 256 empty kernels, one CTA and
//!    KdaSplit's batch-1 geometry (12 heads × clusters of 8), with and
//!    without PDL.
//! 3. **KdaSplit** over heads × batch × tokens × schedule. Per point, the
//!    state lives in slot groups totalling ≥ 4 × L2 (filled on the device);
//!    a graph holds `max(groups, 32)` PDL-chained steps, step `s` on slot
//!    group `s mod groups`, and is replayed for about 250 ms; µs/step is the
//!    median replay time over the steps. State traffic is
//!    `B·H·128·128·4·(1 + T)` bytes per step (one page read, T written per
//!    request and head; every request active).
//!
//! Prints markdown tables (copy, floor, every schedule, targets with
//! verdicts) and writes everything as JSON with `--json FILE`. Without a GPU
//! it says so and exits 0 (unless `KDA_REQUIRE_GPU` is set); `--sim` checks
//! the machinery on the simulator instead.
//!
//! `kda-split autotune` ([`autotune`]) searches the schedule space with the
//! same workload and timing ([`measure_point`]) and writes the tuned table.

pub mod autotune;
pub mod gpu;
pub mod kernels;
pub mod report;
pub mod sim;
pub mod workload;

use std::error::Error;
use std::time::Instant;

use kda_runtime::{CudaDevice, Device, RuntimeError};
use serde_json::json;

use crate::config::KdaConfig;
use gpu::{Budget, copy_ceiling, measure_kda, node_floor, tbps};
use report::{Candidate, Outcome, Resolved, Results, Row};
use workload::{Plan, Point, Workload};

const USAGE: &str = "\
usage: kda-split bench [options]

Measures on GPU 0, in one run: the copy ceiling (a DSL copy kernel), the graph
kernel-node floor, and KdaSplit over heads x batch x tokens x schedule
(state rotating over >= 4 x L2, PDL-chained steps in CUDA graphs, medians
of event-timed replays). Prints markdown tables with verdicts against the
targets; --json writes everything.

options:
  --quick             fewer schedules and shorter timing (about a minute)
  --full              the issue's whole sweep: heads 6, 12, 32 at batch
                      1, 8, 32, 64, 128, 512, plus T = 4 at batch 8 and 64
  --heads LIST        e.g. 6,12,32        (with --batch / --tokens: their product)
  --batch LIST        e.g. 1,8,32,128,512
  --tokens LIST       e.g. 1,4
  --schedule S        a schedule to try, repeatable or ';'-separated: a name
                      (auto: the tuned table's schedule at each point; seed
                      or default: the seed's defaults 0,0,0; e1, e1-l8,
                      e1-l16, e2, e2-c2, e2-c4, e2-c2-evict, e3-c2) or raw
                      early,lanes,occupancy[,cluster[,evict]]
  --json FILE         write the results as JSON
  --budget-ms MS      timed replays per configuration, in ms (default 250)
  --min-steps N       least steps per graph (default 32)
  --copy-mib MIB      bytes of each copy buffer (default 1024)
  --seed N            generator seed (default 1)
  --check             also compare each schedule's first step with the float64
                      reference (host time: seconds per GiB of state)
  --check-mib MIB     with --check, only points of at most this much state
                      (default 2048)
  --sim               no GPU: check the kernels and the workload on the simulator
  -h, --help          this text

Default sweep: heads 12 at batch 1, 8, 32, 64, 128, 512 (T = 1) and T = 4 at
batch 8 and 64; heads 6 and 32 at batch 1, 128, 512. The targets' `default`
column is the kernel's default schedule: `auto` (the tuned table) where it
was measured, else the seed's.";

/// The named schedules.
fn named(label: &str) -> Option<Candidate> {
    let raw: &[u32] = match label {
        "auto" => return Some(Candidate::auto()),
        "seed" | "default" => return Some(Candidate::new("seed", &[0, 0, 0])),
        "e1" => &[1, 0, 0],
        "e1-l8" => &[1, 8, 0],
        "e1-l16" => &[1, 16, 0],
        "e2" => &[2, 0, 0],
        "e2-c2" => &[2, 0, 0, 2],
        "e2-c4" => &[2, 0, 0, 4],
        "e2-c2-evict" => &[2, 0, 0, 2, 1],
        "e3-c2" => &[3, 0, 0, 2],
        _ => return None,
    };
    Some(Candidate::new(label, raw))
}

/// The named schedules besides `auto` and `seed`.
pub const NAMED: [&str; 8] = [
    "e1",
    "e1-l8",
    "e1-l16",
    "e2",
    "e2-c2",
    "e2-c4",
    "e2-c2-evict",
    "e3-c2",
];

/// The sweep's schedules without `--schedule` (`auto` first: it is always
/// measured under its own name).
fn default_schedules(quick: bool) -> Vec<Candidate> {
    let names: &[&str] = if quick { &["e1", "e2-c2"] } else { &NAMED };
    ["auto", "seed"]
        .iter()
        .chain(names)
        .map(|n| named(n).expect("named"))
        .collect()
}

fn parse_schedule(text: &str) -> Result<Candidate, String> {
    if let Some(c) = named(text) {
        return Ok(c);
    }
    let raw = text
        .split(',')
        .map(|x| x.trim().parse::<u32>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("--schedule: `{text}` is neither a name nor a list of integers"))?;
    if !(3..=5).contains(&raw.len()) {
        return Err(format!(
            "--schedule: `{text}` needs 3 to 5 entries (early,lanes,occupancy[,cluster[,evict]])"
        ));
    }
    let label = if raw == [0, 0, 0] {
        "seed".to_string()
    } else {
        format!("[{text}]")
    };
    Ok(Candidate { label, raw })
}

fn parse_list(flag: &str, text: &str) -> Result<Vec<u32>, String> {
    text.split(',')
        .map(|x| {
            x.trim()
                .parse::<u32>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{flag}: `{x}` is not a positive integer"))
        })
        .collect()
}

/// Every `(heads, batch, tokens)` of the lists: heads, then tokens, then batch.
pub fn product(heads: &[u32], batch: &[u32], tokens: &[u32]) -> Vec<Point> {
    let mut points = Vec::new();
    for &heads in heads {
        for &tokens in tokens {
            for &batch in batch {
                points.push(Point {
                    heads,
                    batch,
                    tokens,
                });
            }
        }
    }
    points
}

/// The command line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub quick: bool,
    pub full: bool,
    pub sim: bool,
    pub help: bool,
    pub json: Option<String>,
    pub heads: Option<Vec<u32>>,
    pub batch: Option<Vec<u32>>,
    pub tokens: Option<Vec<u32>>,
    pub schedules: Vec<Candidate>,
    pub budget_ms: Option<f64>,
    pub min_steps: Option<usize>,
    pub copy_mib: Option<usize>,
    pub seed: u64,
    pub check: bool,
    pub check_mib: Option<usize>,
}

/// A flag's value, taken from the arguments when called.
pub type FlagValue<'a> = &'a mut dyn FnMut() -> Result<String, String>;

impl Options {
    /// Parse the flags after `bench` (a leading `bench` is skipped too).
    pub fn parse(args: &[String]) -> Result<Options, String> {
        Self::parse_with(args, "bench", USAGE, |_, _| Ok(false))
    }

    /// Parse `args` (a leading `command` is skipped). Each flag is offered to
    /// `extra` first, with a way to take its value: `Ok(true)` when `extra`
    /// took it. Unknown flags are an error that ends with `usage`.
    pub fn parse_with(
        args: &[String],
        command: &str,
        usage: &str,
        mut extra: impl FnMut(&str, FlagValue) -> Result<bool, String>,
    ) -> Result<Options, String> {
        let mut o = Options {
            seed: 1,
            ..Options::default()
        };
        let mut it = args.iter().skip_while(|a| *a == command);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            if extra(flag, &mut value)? {
                continue;
            }
            let number = |v: String| {
                v.parse::<u64>()
                    .map_err(|_| format!("{flag}: `{v}` is not a number"))
            };
            match flag.as_str() {
                "--quick" => o.quick = true,
                "--full" => o.full = true,
                "--sim" => o.sim = true,
                "-h" | "--help" => o.help = true,
                "--json" => o.json = Some(value()?),
                "--heads" => o.heads = Some(parse_list(flag, &value()?)?),
                "--batch" => o.batch = Some(parse_list(flag, &value()?)?),
                "--tokens" => o.tokens = Some(parse_list(flag, &value()?)?),
                "--schedule" => {
                    for s in value()?.split(';').filter(|s| !s.trim().is_empty()) {
                        o.schedules.push(parse_schedule(s.trim())?);
                    }
                }
                "--budget-ms" => o.budget_ms = Some(number(value()?)? as f64),
                "--min-steps" => o.min_steps = Some(number(value()?)?.max(1) as usize),
                "--copy-mib" => o.copy_mib = Some(number(value()?)?.max(1) as usize),
                "--seed" => o.seed = number(value()?)?,
                "--check" => o.check = true,
                "--check-mib" => o.check_mib = Some(number(value()?)? as usize),
                other => return Err(format!("unknown option `{other}`\n\n{usage}")),
            }
        }
        Ok(o)
    }

    /// Whether `--heads`, `--batch` or `--tokens` was given.
    pub fn has_point_lists(&self) -> bool {
        self.heads.is_some() || self.batch.is_some() || self.tokens.is_some()
    }

    /// The points to measure, in order.
    pub fn points(&self) -> Vec<Point> {
        if !self.has_point_lists() {
            let (h12, other): (&[u32], &[u32]) = if self.full {
                (&[1, 8, 32, 64, 128, 512], &[1, 8, 32, 64, 128, 512])
            } else {
                (&[1, 8, 32, 64, 128, 512], &[1, 128, 512])
            };
            let mut points = product(&[12], h12, &[1]);
            points.extend(product(&[12], &[8, 64], &[4]));
            points.extend(product(&[6, 32], other, &[1]));
            return points;
        }
        product(
            self.heads.as_deref().unwrap_or(&[12]),
            self.batch.as_deref().unwrap_or(&[1, 8, 32, 128, 512]),
            self.tokens.as_deref().unwrap_or(&[1]),
        )
    }

    pub fn schedules(&self) -> Vec<Candidate> {
        if self.schedules.is_empty() {
            default_schedules(self.quick)
        } else {
            self.schedules.clone()
        }
    }

    /// The timing of each measured schedule.
    pub fn budget(&self) -> Budget {
        Budget {
            warmup: 3,
            target_ms: self
                .budget_ms
                .unwrap_or(if self.quick { 100.0 } else { 250.0 }),
            min_replays: 10,
            max_replays: 500,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "quick": self.quick,
            "full": self.full,
            "points": self.points().iter().map(|p| [p.heads, p.batch, p.tokens]).collect::<Vec<_>>(),
            "schedules": self.schedules().iter().map(|c| json!({"label": c.label, "raw": c.raw})).collect::<Vec<_>>(),
            "budget_ms": self.budget().target_ms,
            "min_steps": self.min_steps(),
            "copy_mib": self.copy_mib(),
            "seed": self.seed,
            "check_mib": self.check.then(|| self.check_mib()),
        })
    }

    pub fn min_steps(&self) -> usize {
        self.min_steps.unwrap_or(if self.quick { 16 } else { 32 })
    }

    fn copy_mib(&self) -> usize {
        self.copy_mib.unwrap_or(1024)
    }

    pub fn check_mib(&self) -> usize {
        self.check_mib.unwrap_or(2048)
    }

    /// The slot groups of `point`'s workload: ≥ 4 × L2 of state.
    pub fn plan(&self, l2: usize) -> Plan {
        Plan {
            rotate_bytes: 4 * l2,
            min_groups: 2,
            min_steps: self.min_steps(),
            seed: self.seed,
        }
    }

    /// Set up `point`'s workload on `dev`, saying so (or why it failed), and
    /// whether its schedules are checked against the reference.
    pub fn workload(
        &self,
        dev: &CudaDevice,
        point: Point,
        l2: usize,
    ) -> Result<(Workload<CudaDevice>, bool), RuntimeError> {
        let t0 = Instant::now();
        let workload = Workload::new(dev, point, &self.plan(l2)).inspect_err(|e| {
            println!("  {point}: setup failed: {e}");
        })?;
        let state_bytes = workload.num_slots * point.slot_bytes();
        println!(
            "  {point}: {} slot groups ({:.0} MiB of state), {} steps per graph, set up in {:.1} s",
            workload.groups,
            state_bytes as f64 / (1 << 20) as f64,
            workload.steps,
            t0.elapsed().as_secs_f64()
        );
        let check = self.check && state_bytes <= self.check_mib() << 20;
        Ok((workload, check))
    }
}

/// Open GPU 0, or say that there is none: `Ok(None)` unless
/// `KDA_REQUIRE_GPU` is set.
pub fn open_gpu(command: &str) -> Result<Option<CudaDevice>, RuntimeError> {
    match CudaDevice::new(0) {
        Ok(dev) => Ok(Some(dev)),
        Err(RuntimeError::NoDriver(why)) if std::env::var_os("KDA_REQUIRE_GPU").is_none() => {
            println!(
                "{command}: no usable GPU ({why}); nothing measured.\n\
                 The benchmark needs an H100/H200; `kda-split bench --sim` checks its kernels \
                 and workload on the simulator instead."
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Entry point of `kda-split bench`; `args` are the flags after `bench`.
pub fn main_with_args(args: &[String]) -> Result<(), Box<dyn Error>> {
    let opts = Options::parse(args)?;
    if opts.help {
        println!("{USAGE}");
        return Ok(());
    }
    if opts.sim {
        return sim::sanity();
    }
    let Some(dev) = open_gpu("bench")? else {
        return Ok(());
    };
    let results = run(&dev, &opts)?;
    let text = report::markdown(&results);
    println!("\n{text}");
    if let Some(path) = &opts.json {
        let doc = report::to_json(&results);
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .map_err(|e| format!("writing {path}: {e}"))?;
        println!("JSON written to {path}");
    }
    Ok(())
}

/// Measure everything `opts` asks for on `dev`.
pub fn run(dev: &CudaDevice, opts: &Options) -> Result<Results, Box<dyn Error>> {
    let start = Instant::now();
    let budget = opts.budget();
    let l2 = dev.l2_cache_bytes()?;
    println!("bench on {} (L2 {} MiB)", dev.describe(), l2 >> 20);

    let copy_variants = [(256, 1), (256, 2), (256, 4), (512, 2), (1024, 1)];
    let copy =
        copy_ceiling(dev, opts.copy_mib() << 20, &copy_variants, &budget).unwrap_or_else(|e| {
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
    for point in opts.points() {
        let (mut workload, check) = match opts.workload(dev, point, l2) {
            Ok(w) => w,
            Err(e) => {
                let (groups, steps) = opts.plan(l2).shape(&point);
                rows.extend(schedules.iter().map(|c| Row {
                    point,
                    candidate: c.at(&point),
                    resolved: None,
                    groups,
                    steps,
                    outcome: Outcome::Failed(format!("setup: {e}")),
                }));
                continue;
            }
        };
        let sweep = Sweep {
            budget,
            check,
            ceiling,
            verbose: true,
            deadline: None,
        };
        rows.extend(measure_point(dev, &mut workload, &schedules, &sweep));
    }
    Ok(Results {
        device: dev.describe(),
        l2_bytes: l2,
        copy,
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
        Ok(m) => {
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

    fn parse(args: &[&str]) -> Options {
        Options::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn default_sweep_has_the_issue_points() {
        let points = parse(&[]).points();
        assert_eq!(points.len(), 14);
        assert!(points.contains(&Point {
            heads: 12,
            batch: 64,
            tokens: 4
        }));
        assert!(points.contains(&Point {
            heads: 32,
            batch: 512,
            tokens: 1
        }));
        assert_eq!(parse(&["--full"]).points().len(), 20);
    }

    #[test]
    fn flags_make_a_product() {
        let o = parse(&[
            "bench", "--heads", "6,32", "--batch", "1,128", "--tokens", "1,4", "--quick",
        ]);
        assert_eq!(o.points().len(), 8);
        assert_eq!(o.schedules().len(), 4);
        let o = parse(&[
            "--schedule",
            "e2-c2;1,8,0",
            "--schedule",
            "0,0,0",
            "--schedule",
            "auto;default",
        ]);
        let labels: Vec<_> = o.schedules().iter().map(|c| c.label.clone()).collect();
        assert_eq!(labels, ["e2-c2", "[1,8,0]", "seed", "auto", "seed"]);
        assert!(Options::parse(&["--bogus".to_string()]).is_err());
        assert!(Options::parse(&["--schedule".to_string(), "1,2".to_string()]).is_err());
        assert!(Options::parse(&["--batch".to_string(), "0".to_string()]).is_err());
    }

    #[test]
    fn every_named_schedule_is_valid_somewhere() {
        let point = Point {
            heads: 12,
            batch: 128,
            tokens: 1,
        };
        for c in default_schedules(false) {
            assert!(
                KdaConfig::new(12, 128, 0, true, &c.at(&point).raw, 1).is_ok(),
                "{}",
                c.label
            );
        }
    }

    #[test]
    fn auto_is_the_tuned_schedule_of_each_point() {
        let auto = named("auto").unwrap();
        assert!(auto.raw.is_empty());
        for (heads, batch, tokens) in [(12, 64, 1), (12, 8, 4), (6, 3, 2), (32, 512, 1)] {
            let point = Point {
                heads,
                batch,
                tokens,
            };
            let at = auto.at(&point);
            assert_eq!(at.label, "auto");
            let tuned = KdaConfig::tuned(heads, batch, 0, true, tokens).unwrap();
            assert_eq!(at.raw, tuned.schedule.raw());
            assert!(KdaConfig::new(heads, batch, 0, true, &at.raw, tokens).is_ok());
        }
        // Anything else stays as it is.
        let e1 = named("e1").unwrap();
        assert_eq!(
            e1.at(&Point {
                heads: 12,
                batch: 1,
                tokens: 1
            }),
            e1
        );
    }

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
        let (groups, steps) = plan.shape(&b1);
        assert!(groups * b1.slot_bytes() >= 200 << 20 && steps == groups);
        let big = Point {
            heads: 32,
            batch: 512,
            tokens: 1,
        };
        assert_eq!(plan.shape(&big), (2, 32));
        assert_eq!(b1.state_bytes_per_step(), 12 * 128 * 128 * 4 * 2);
    }

    #[test]
    fn report_renders_targets_and_json() {
        use gpu::{CopyRow, KdaMeasure, Timing};
        use kda_runtime::cuda::KernelResources;
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
                row(12, 128, 1, "default", Some(50.0)),
            ],
            options: json!({}),
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
        // Batch 1: default (auto) 3.0 µs fails 2.6, best (e1) 2.5 passes.
        let b1 = md
            .lines()
            .find(|l| l.starts_with("| H12 B1 T1 | ≤ 2.6"))
            .unwrap();
        assert!(b1.contains("| FAIL |") && b1.contains("| PASS |"), "{b1}");
        // T = 4: 5.0 / 4.0 = 1.25 ≤ 1.5.
        let t4 = md
            .lines()
            .find(|l| l.starts_with("| H12 B8 T4 | ≤"))
            .unwrap();
        println!("{md}");
        assert!(t4.contains("1.25×") && t4.contains("PASS"), "{t4}");
        // Batch 128: 128·12·64 KiB·2 B in 50 µs = 4.03 TB/s over a 4.0 ceiling.
        let b128 = md
            .lines()
            .find(|l| l.starts_with("| H12 B128 T1 | state"))
            .unwrap();
        assert!(b128.contains("PASS"), "{b128}");
        assert!(md.contains("FAILED: boom"));
        let doc = report::to_json(&results);
        assert_eq!(doc["rows"].as_array().unwrap().len(), 7);
        assert_eq!(doc["targets"][0]["default_schedule"], json!("auto"));
        assert_eq!(doc["copy_ceiling_tbps"], json!(4.0));
        assert!(doc["targets"].as_array().unwrap().len() >= 5);
    }
}

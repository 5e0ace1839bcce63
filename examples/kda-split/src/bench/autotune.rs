//! `kda-split autotune`: search the schedule space on the GPU, point by
//! point, with the bench's workload and timing ([`super::measure_point`]),
//! and write the tuned table ([`crate::tuned`]) that `KdaConfig::tuned` and
//! `--schedule auto` read.
//!
//! Per point (heads, batch, tokens):
//!
//! 1. **Search**: the seed's defaults, the bench's named schedules and
//!    every valid schedule of the space (early 0..3 × lanes × cluster ×
//!    occupancy, evict on and off where early >= 2), less the pruned ones
//!    and those resolving to one already listed, each timed briefly
//!    (`--search-ms`, default 20 ms of replays).
//! 2. **Finalists**: the `--top` fastest (default 3) and the seed's defaults,
//!    timed again with the bench's budget (250 ms); the fastest finalist is
//!    the point's schedule unless it beats the seed's defaults by less than
//!    `--min-gain` (1 %): then the seed's defaults stay.
//!
//! Pruned before timing (evidence: `kda-split info`, ptxas 12.9 `-v`,
//! sm_90a, heads 12 and 32 at batch 64):
//! - cluster 1 below early 3: one CTA holds all 128 state rows of a head;
//!   ptxas gives every such schedule 255 registers, most of them spilling;
//! - lanes < cluster: `128 / lanes` row groups for `128 / cluster` rows, so
//!   some threads have no row.
//!
//! The search stays within `--minutes` (default 6): each point gets an equal
//! share of the time left, and a search that runs out of its share skips
//! its remaining schedules (the seed's defaults and the bench's named
//! schedules come first). The table is rewritten after every point.
//!
//! A schedule that spills registers (ptxas `-arch=sm_90a`, the kernel `run`
//! launches for contiguous tensors) is never chosen, and never a finalist:
//! each point's `excluded_spilling` note lists those skipped. The check runs
//! ptxas (about half a second a schedule), so only as far down the ranking
//! as needed; without ptxas nothing is excluded.
//!
//! `--from-bench FILE` builds the table from a `kda-split bench --json` file
//! instead (no GPU): per point, the fastest schedule the bench measured.
//! `--reselect FILE` (no GPU) chooses every point of a tuned table again
//! from the schedules it measured there, with the current rules.

use std::collections::HashMap;
use std::error::Error;
use std::time::{Duration, Instant};

use kda_runtime::{CudaDevice, Device};
use serde_json::{Map, Value, json};

use super::gpu::Budget;
use super::report::{Candidate, Outcome, Resolved, Row};
use super::workload::Point;
use super::{
    NAMED, Options as BenchOptions, Sweep, measure_point, named, open_gpu, parse_list, product,
};
use crate::config::KdaConfig;
use crate::run::contiguous_kernel;
use crate::tuned::{Measured, TunedPoint, TunedTable};

const USAGE: &str = "\
usage: kda-split autotune [options]

Searches KdaSplit's schedule space on GPU 0 for each (heads, batch, tokens)
point with the bench's workload (state rotating over >= 4 x L2, PDL-chained
steps in CUDA graphs): every valid schedule timed briefly, the fastest few and
the seed's defaults timed again in full; writes the tuned table that
`--schedule auto` and KdaConfig::tuned use. Schedules that spill registers
under ptxas (-arch=sm_90a) are neither finalists nor chosen (not checked
where ptxas is not found).

options:
  --out FILE          where to write the table (default examples/kda-split/tuned.json)
  --heads LIST        e.g. 6,12,32        (with --batch / --tokens: their product;
  --batch LIST        e.g. 1,8,64          defaults heads 6,12,32, batch
  --tokens LIST       e.g. 1,4             1,8,32,64,128,512, tokens 1)
  --quick             lanes 8 and 16 only, no evict, 2 finalists, shorter timing,
                      a 2.5-minute limit
  --lanes LIST        lanes to search (default 4,8,16,32)
  --cluster LIST      clusters to search (default 1,2,4,8)
  --occupancy LIST    occupancy values to search (default 0: no launch bound)
  --no-evict          leave evict off
  --schedule S        also try these (the bench's names or raw lists)
  --top K             finalists timed in full besides the seed's defaults (default 3)
  --search-ms MS      timed replays per searched schedule, in ms (default 20)
  --budget-ms MS      timed replays per finalist, in ms (default 250)
  --min-gain F        least gain over the seed's defaults to replace them (default 0.01)
  --minutes M         time limit of the whole search (default 6)
  --min-steps N       least steps per graph (default 32)
  --seed N            generator seed (default 1)
  --check             compare each finalist's first step with the float64 reference
  --check-mib MIB     with --check, only points of at most this much state (default 2048)
  --from-bench FILE   no GPU: the table from a `kda-split bench --json` file (the
                      fastest schedule the bench measured at each point)
  --reselect FILE     no GPU: choose every point of the tuned table FILE again
                      from the schedules measured there, with the current rules
                      (spill exclusion, --min-gain); keeps its measurements
  --device-spills F   with --reselect or --from-bench (repeatable): also leave
                      out schedules a `kda-split bench --json` file F saw using
                      local memory on the GPU (the driver's JIT can spill where
                      ptxas does not); autotune itself reads what the driver
                      reports for every schedule it measures
  -h, --help          this text

Default points: heads 6, 12 and 32 at batch 1, 8, 32, 64, 128, 512 (T = 1) and
at batch 8 and 64 with T = 4.";

/// Where the table goes by default (from the repository root).
pub const DEFAULT_OUT: &str = "examples/kda-split/tuned.json";

/// Why schedules are left out before timing (see the module doc).
pub const PRUNE_RULES: [&str; 2] = [
    "cluster 1 below early 3 (all 128 rows of a head in one CTA: 255 registers, mostly spilling)",
    "lanes < cluster (128/lanes row groups for 128/cluster rows: idle threads)",
];

/// The command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// The bench's flags: points, timing, seed, check.
    pub bench: BenchOptions,
    pub out: String,
    pub lanes: Vec<u32>,
    pub cluster: Vec<u32>,
    pub occupancy: Vec<u32>,
    pub evict: bool,
    pub top: usize,
    pub search_ms: f64,
    pub min_gain: f64,
    pub minutes: f64,
    pub from_bench: Option<String>,
    pub reselect: Option<String>,
    /// `--device-spills`: bench JSON files whose rows say which schedules
    /// used local memory on the GPU.
    pub device_spills: Vec<String>,
}

impl Options {
    /// Parse the flags after `autotune` (a leading `autotune` is skipped too).
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut out = None;
        let (mut lanes, mut cluster, mut occupancy) = (None, None, None);
        let (mut no_evict, mut top, mut search_ms, mut min_gain, mut minutes) =
            (false, None, None, None, None);
        let (mut from_bench, mut reselect) = (None, None);
        let mut device_spills = Vec::new();
        let bench = BenchOptions::parse_with(args, "autotune", USAGE, |flag, value| {
            let number = |v: String| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("{flag}: `{v}` is not a non-negative number"))
            };
            match flag {
                "--out" => out = Some(value()?),
                "--lanes" => lanes = Some(parse_list(flag, &value()?)?),
                "--cluster" => cluster = Some(parse_list(flag, &value()?)?),
                "--occupancy" => {
                    // 0 (no launch bound) is a value here.
                    let v = value()?;
                    let list = v
                        .split(',')
                        .map(|x| x.trim().parse::<u32>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| format!("{flag}: `{v}` is not a list of integers"))?;
                    occupancy = Some(list);
                }
                "--no-evict" => no_evict = true,
                "--top" => top = Some(number(value()?)? as usize),
                "--search-ms" => search_ms = Some(number(value()?)?),
                "--min-gain" => min_gain = Some(number(value()?)?),
                "--minutes" => minutes = Some(number(value()?)?),
                "--from-bench" => from_bench = Some(value()?),
                "--reselect" => reselect = Some(value()?),
                "--device-spills" => device_spills.push(value()?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        for (set, flag) in [
            (bench.full, "--full"),
            (bench.sim, "--sim"),
            (bench.json.is_some(), "--json"),
            (bench.copy_mib.is_some(), "--copy-mib"),
        ] {
            if set {
                return Err(format!(
                    "{flag} is a bench option, not an autotune one\n\n{USAGE}"
                ));
            }
        }
        if !device_spills.is_empty() && from_bench.is_none() && reselect.is_none() {
            return Err(format!(
                "--device-spills goes with --reselect or --from-bench (a GPU search reads the driver's report itself)\n\n{USAGE}"
            ));
        }
        if from_bench.is_some() && reselect.is_some() {
            return Err(format!(
                "--from-bench and --reselect exclude each other\n\n{USAGE}"
            ));
        }
        let quick = bench.quick;
        let occupancy = occupancy.filter(|o| !o.is_empty()).unwrap_or(vec![0]);
        Ok(Options {
            out: out.unwrap_or_else(|| DEFAULT_OUT.to_string()),
            lanes: lanes.unwrap_or_else(|| {
                if quick {
                    vec![8, 16]
                } else {
                    vec![4, 8, 16, 32]
                }
            }),
            cluster: cluster.unwrap_or_else(|| vec![1, 2, 4, 8]),
            occupancy,
            evict: !no_evict && !quick,
            top: top.unwrap_or(if quick { 2 } else { 3 }),
            search_ms: search_ms.unwrap_or(if quick { 10.0 } else { 20.0 }),
            min_gain: min_gain.unwrap_or(0.01),
            minutes: minutes.unwrap_or(if quick { 2.5 } else { 6.0 }),
            from_bench,
            reselect,
            device_spills,
            bench,
        })
    }

    /// The points to tune, in order.
    pub fn points(&self) -> Vec<Point> {
        let b = &self.bench;
        let batches: &[u32] = &[1, 8, 32, 64, 128, 512];
        if !b.has_point_lists() {
            let mut points = Vec::new();
            for heads in [12, 6, 32] {
                points.extend(product(&[heads], batches, &[1]));
                points.extend(product(&[heads], &[8, 64], &[4]));
            }
            return points;
        }
        product(
            b.heads.as_deref().unwrap_or(&[6, 12, 32]),
            b.batch.as_deref().unwrap_or(batches),
            b.tokens.as_deref().unwrap_or(&[1]),
        )
    }

    /// The brief timing of the search.
    pub fn search_budget(&self) -> Budget {
        Budget {
            warmup: 1,
            target_ms: self.search_ms,
            min_replays: 5,
            max_replays: 200,
        }
    }

    /// The space searched, as JSON (for the table's metadata).
    fn space_json(&self) -> Value {
        json!({
            "early": [0, 1, 2, 3],
            "lanes": self.lanes,
            "cluster": self.cluster,
            "occupancy": self.occupancy,
            "evict": if self.evict { "off and on where early >= 2" } else { "off" },
            "extra_schedules": self.bench.schedules.iter().map(|c| c.label.clone()).collect::<Vec<_>>(),
            "pruned": PRUNE_RULES,
        })
    }
}

/// The schedules searched at one point.
#[derive(Clone, Debug, Default)]
pub struct Space {
    /// The seed's defaults first (labelled `seed`), then the bench's named
    /// schedules and `--schedule` extras, then the grid; all distinct once
    /// resolved, with explicit lanes and cluster.
    pub candidates: Vec<Candidate>,
    /// Left out by [`PRUNE_RULES`].
    pub pruned: usize,
    /// Not a valid configuration at this point (`KdaConfig::new`).
    pub invalid: usize,
}

/// Which prune rule leaves `cfg` out, if any.
pub fn pruned_by(cfg: &KdaConfig) -> Option<&'static str> {
    let (early, lanes, cluster) = (cfg.schedule.early, cfg.lanes(), cfg.cluster());
    if cluster == 1 && early < 3 {
        Some(PRUNE_RULES[0])
    } else if lanes < cluster {
        Some(PRUNE_RULES[1])
    } else {
        None
    }
}

/// The space of `opts` at `point` (gate mode 0, bias on).
pub fn space(opts: &Options, point: &Point) -> Space {
    let mut out = Space::default();
    let mut seen: Vec<Resolved> = Vec::new();
    let mut push = |label: Option<&str>, raw: &[u32], prune: bool, out: &mut Space| {
        let cfg = match KdaConfig::new(point.heads, point.batch, 0, true, raw, point.tokens) {
            Ok(cfg) => cfg,
            Err(_) => {
                out.invalid += 1;
                return;
            }
        };
        let resolved = cfg.resolved_schedule();
        if seen.contains(&resolved) {
            return;
        }
        if prune && pruned_by(&cfg).is_some() {
            out.pruned += 1;
            return;
        }
        seen.push(resolved);
        let raw = resolved.raw();
        let label = label.map_or_else(|| format!("{raw:?}").replace(' ', ""), str::to_string);
        out.candidates.push(Candidate {
            label,
            raw: raw.to_vec(),
        });
    };
    push(Some("seed"), &[0, 0, 0], false, &mut out);
    let extras = NAMED
        .iter()
        .filter(|n| opts.evict || !n.ends_with("evict"))
        .map(|n| named(n).expect("named"))
        .chain(opts.bench.schedules.iter().map(|c| c.at(point)));
    for c in extras {
        push(None, &c.raw, false, &mut out);
    }
    for early in 0..=3u32 {
        let evicts: &[u32] = if early >= 2 && opts.evict {
            &[0, 1]
        } else {
            &[0]
        };
        for &lanes in &opts.lanes {
            for &cluster in &opts.cluster {
                for &occupancy in &opts.occupancy {
                    for &evict in evicts {
                        push(
                            None,
                            &[early, lanes, occupancy, cluster, evict],
                            true,
                            &mut out,
                        );
                    }
                }
            }
        }
    }
    out
}

/// Timing kinds, best first: full timings rank before the search's.
fn timing_rank(timing: &str) -> u8 {
    u8::from(timing == "search")
}

/// The note of a point listing the schedules skipped as unusable (they spill).
pub const EXCLUDED_NOTE: &str = "excluded_spilling";

/// Whether `schedule` spills registers at `point` (gate mode 0, bias on, as
/// the workload launches it): the kernel `run` launches for contiguous
/// tensors, compiled and assembled by ptxas for sm_90a. `None` where ptxas is
/// not found; `Some(true)` where it spills (stores or loads), where ptxas
/// rejects it, or where it does not build.
pub fn spills(point: &Point, schedule: &[u32; 5]) -> Option<bool> {
    kda_ir::ptxas::find()?;
    let Ok(cfg) = KdaConfig::new(point.heads, point.batch, 0, true, schedule, point.tokens) else {
        return Some(true);
    };
    let Ok(kernel) = contiguous_kernel(&cfg, false) else {
        return Some(true);
    };
    let Ok(compiled) = kda_ir::pipeline::compile(&kernel, &kda_ir::pipeline::Options::default())
    else {
        return Some(true);
    };
    match kda_ir::ptxas::assemble(&compiled.ptx) {
        Ok(report) => Some(report.spills() > 0),
        Err(kda_ir::ptxas::PtxasError::NotFound) => None,
        Err(_) => Some(true),
    }
}

/// [`spills`] of one run, each (point, schedule) assembled once; without
/// ptxas every schedule is usable.
#[derive(Debug)]
pub struct SpillCheck {
    checked: bool,
    known: HashMap<(Point, [u32; 5]), bool>,
    /// Local memory per thread the GPU's driver reported for a schedule at
    /// a point (its JIT may spill where ptxas does not).
    device: HashMap<(Point, [u32; 5]), u32>,
}

impl Default for SpillCheck {
    fn default() -> Self {
        SpillCheck::new()
    }
}

impl SpillCheck {
    /// A check through ptxas if it is found.
    pub fn new() -> SpillCheck {
        SpillCheck {
            checked: kda_ir::ptxas::find().is_some(),
            known: HashMap::new(),
            device: HashMap::new(),
        }
    }

    /// Record what the GPU's driver reported for `schedule` at `point`: a
    /// schedule with local memory is left out whatever ptxas says.
    pub fn note_device(&mut self, point: &Point, schedule: &[u32; 5], local_bytes: u32) {
        let at = self.device.entry((*point, *schedule)).or_insert(0);
        *at = (*at).max(local_bytes);
    }

    /// [`note_device`](Self::note_device) for every measured row of a
    /// `kda-split bench --json` document (its `resolved` schedule and
    /// `local_bytes`); how many rows it read.
    pub fn note_bench(&mut self, doc: &Value) -> Result<usize, String> {
        let rows = doc["rows"].as_array().ok_or("no `rows` list")?;
        let mut n = 0;
        for r in rows {
            let (Ok(point), Some(schedule), Some(local)) =
                (row_point(r), row_schedule(r), json_u32(&r["local_bytes"]))
            else {
                continue;
            };
            self.note_device(&point, &schedule, local);
            n += 1;
        }
        Ok(n)
    }

    /// One line saying whether spills are checked.
    pub fn describe(&self) -> &'static str {
        if self.checked {
            "schedules that spill under ptxas -arch=sm_90a are left out"
        } else {
            "ptxas not found: spills not checked, no schedule left out"
        }
    }

    /// Whether `schedule` may be chosen at `point`: it does not spill (or
    /// spills cannot be checked). Prints each schedule left out.
    pub fn usable(&mut self, point: &Point, schedule: &[u32; 5]) -> bool {
        if let Some(&bytes) = self.device.get(&(*point, *schedule))
            && bytes > 0
        {
            println!(
                "    {point}: {} uses {bytes} B of local memory per thread on the GPU: left out",
                text(schedule)
            );
            return false;
        }
        if !self.checked {
            return true;
        }
        if let Some(&ok) = self.known.get(&(*point, *schedule)) {
            return ok;
        }
        let ok = match spills(point, schedule) {
            None => {
                self.checked = false;
                println!("    {}", self.describe());
                true
            }
            Some(spill) => !spill,
        };
        if !ok {
            println!("    {point}: {} spills: left out", text(schedule));
        }
        self.known.insert((*point, *schedule), ok);
        ok
    }
}

/// The table's entry for `point` from what was measured there: `measured`
/// in any order (sorted here, full timings first, each schedule once),
/// `seed` the seed defaults' explicit schedule. The fastest schedule
/// `usable` accepts (full timings first) wins unless it beats the seed's by
/// less than `min_gain` and the seed's defaults are usable. `usable` is asked
/// only as far down the ranking as needed; the schedules it rejects on the
/// way are listed in the note [`EXCLUDED_NOTE`]. `None`: nothing usable was
/// measured.
pub fn tuned_point(
    point: &Point,
    seed: [u32; 5],
    mut measured: Vec<Measured>,
    min_gain: f64,
    mut notes: Map<String, Value>,
    usable: &mut dyn FnMut(&[u32; 5]) -> bool,
) -> Option<TunedPoint> {
    measured.sort_by(|a, b| {
        timing_rank(&a.timing)
            .cmp(&timing_rank(&b.timing))
            .then(a.us_per_step.total_cmp(&b.us_per_step))
    });
    let mut once: Vec<Measured> = Vec::new();
    for m in measured {
        if !once.iter().any(|o| o.schedule == m.schedule) {
            once.push(m);
        }
    }
    let mut excluded: Vec<[u32; 5]> = Vec::new();
    let mut best = None;
    for m in &once {
        if usable(&m.schedule) {
            best = Some(m.clone());
            break;
        }
        excluded.push(m.schedule);
    }
    let seed_us = once
        .iter()
        .find(|m| m.schedule == seed)
        .map(|m| m.us_per_step);
    let chosen = best.map(|best| match seed_us {
        Some(s) if best.us_per_step > s * (1.0 - min_gain) && best.schedule != seed => {
            let seed_usable = !excluded.contains(&seed) && {
                let ok = usable(&seed);
                if !ok {
                    excluded.push(seed);
                }
                ok
            };
            if seed_usable {
                Measured {
                    schedule: seed,
                    us_per_step: s,
                    timing: best.timing.clone(),
                }
            } else {
                best
            }
        }
        _ => best,
    });
    notes.remove(EXCLUDED_NOTE);
    if !excluded.is_empty() {
        notes.insert(EXCLUDED_NOTE.into(), json!(excluded));
    }
    let chosen = chosen?;
    Some(TunedPoint {
        heads: point.heads,
        batch: point.batch,
        tokens: point.tokens,
        schedule: chosen.schedule,
        us_per_step: chosen.us_per_step,
        seed_us_per_step: seed_us,
        measured: once,
        notes,
    })
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub fn date_of(unix: u64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = (unix / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The table's metadata of a run on `device` (as `CudaDevice::describe`
/// writes it: `NAME (sm_90, N SMs, driver CUDA X.Y)`) at `unix` time.
pub fn metadata(source: String, device: &str, unix: u64) -> Map<String, Value> {
    let gpu = device.split(" (").next().unwrap_or(device);
    let driver = device
        .split("driver ")
        .nth(1)
        .map(|d| d.trim_end_matches(')'));
    let mut meta = Map::new();
    meta.insert("source".into(), json!(source));
    meta.insert("device".into(), json!(device));
    meta.insert("gpu".into(), json!(gpu));
    meta.insert("driver".into(), json!(driver));
    meta.insert("date".into(), json!(date_of(unix)));
    meta.insert("unix_time".into(), json!(unix));
    meta.insert("gate_mode".into(), json!(0));
    meta.insert("has_bias".into(), json!(true));
    meta
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The point of a row of a `kda-split bench --json` document.
fn row_point(r: &Value) -> Result<Point, String> {
    let field = |k: &str| json_u32(&r[k]).ok_or_else(|| format!("a row without `{k}`"));
    Ok(Point {
        heads: field("heads")?,
        batch: field("batch")?,
        tokens: field("tokens")?,
    })
}

/// The explicit schedule (`[early, lanes, occupancy, cluster, evict]`) a
/// bench row resolved to, if it says.
fn row_schedule(r: &Value) -> Option<[u32; 5]> {
    let s = &r["resolved"];
    let n = |k: &str| json_u32(&s[k]);
    Some([
        n("early")?,
        n("lanes")?,
        n("occupancy")?,
        n("cluster")?,
        u32::from(s["evict"].as_bool()?),
    ])
}

fn json_u32(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|x| u32::try_from(x).ok())
}

/// The table from a `kda-split bench --json` document: per point, every
/// schedule measured (`timing: "bench"`), the fastest chosen as by
/// [`tuned_point`] with `usable` (of a point and a schedule).
pub fn table_from_bench(
    doc: &Value,
    file: &str,
    min_gain: f64,
    usable: &mut dyn FnMut(&Point, &[u32; 5]) -> bool,
) -> Result<TunedTable, String> {
    let rows = doc["rows"].as_array().ok_or("no `rows` list")?;
    let device = doc["device"].as_str().ok_or("no `device`")?;
    let unix = doc["unix_time"].as_u64().unwrap_or(0);
    let mut points: Vec<(Point, Option<[u32; 5]>, Vec<Measured>)> = Vec::new();
    for r in rows {
        let point = row_point(r)?;
        let at = match points.iter().position(|(p, _, _)| *p == point) {
            Some(i) => i,
            None => {
                points.push((point, None, Vec::new()));
                points.len() - 1
            }
        };
        let entry = &mut points[at];
        let raw: Vec<u64> = r["schedule_raw"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        if raw.len() >= 3 && raw.iter().all(|&x| x == 0) {
            entry.1 = row_schedule(r);
        }
        if let (Some("ok"), Some(us), Some(schedule)) = (
            r["status"].as_str(),
            r["us_per_step"].as_f64(),
            row_schedule(r),
        ) {
            entry.2.push(Measured {
                schedule,
                us_per_step: us,
                timing: "bench".into(),
            });
        }
    }
    let names = doc["options"]["schedules"]
        .as_array()
        .map_or(0, |s| s.len());
    let date = date_of(unix);
    let source = format!(
        "seeded from {file} (`kda-split autotune --from-bench`): per point the fastest of the \
         {names} schedules `kda-split bench` measured on {device}, {date}; not a search of the \
         schedule space: `kda-split autotune` on the GPU replaces it"
    );
    let mut meta = metadata(source, device, unix);
    meta.insert("bench_file".into(), json!(file));
    meta.insert("min_gain".into(), json!(min_gain));
    let table_points = points
        .into_iter()
        .filter_map(|(point, seed, measured)| {
            let seed = seed.unwrap_or([u32::MAX; 5]);
            tuned_point(&point, seed, measured, min_gain, Map::new(), &mut |s| {
                usable(&point, s)
            })
        })
        .collect();
    Ok(TunedTable {
        meta,
        points: table_points,
    })
}

/// The seed defaults' explicit schedule at `point` (gate mode 0, bias on).
pub fn seed_schedule(point: &Point) -> Option<[u32; 5]> {
    KdaConfig::new(point.heads, point.batch, 0, true, &[0, 0, 0], point.tokens)
        .ok()
        .map(|c| c.resolved_schedule().raw())
}

/// `table` with every point chosen again by [`tuned_point`] from the
/// schedules it measured there, with `min_gain` and `usable` (of a point and
/// a schedule); the metadata stays but for `min_gain`. A point that measured
/// nothing stays as it is; one where nothing measured is usable is left out.
pub fn reselect(
    table: &TunedTable,
    min_gain: f64,
    usable: &mut dyn FnMut(&Point, &[u32; 5]) -> bool,
) -> TunedTable {
    let mut meta = table.meta.clone();
    meta.insert("min_gain".into(), json!(min_gain));
    let points = table
        .points
        .iter()
        .filter_map(|p| {
            let point = Point {
                heads: p.heads,
                batch: p.batch,
                tokens: p.tokens,
            };
            if p.measured.is_empty() {
                println!("  {point}: no measurements, kept as it is");
                return Some(p.clone());
            }
            let seed = seed_schedule(&point).unwrap_or([u32::MAX; 5]);
            let t = tuned_point(
                &point,
                seed,
                p.measured.clone(),
                min_gain,
                p.notes.clone(),
                &mut |s| usable(&point, s),
            );
            match &t {
                None => println!("  {point}: nothing measured is usable, left out"),
                Some(t) if t.schedule != p.schedule => println!(
                    "  {point}: {} {:.3} µs/step (was {} {:.3})",
                    text(&t.schedule),
                    t.us_per_step,
                    text(&p.schedule),
                    p.us_per_step
                ),
                Some(_) => {}
            }
            t
        })
        .collect();
    TunedTable { meta, points }
}

/// `[3,16,0,2,0]`.
fn text(s: &[u32; 5]) -> String {
    format!("{s:?}").replace(' ', "")
}

/// The table as a markdown summary.
pub fn markdown(table: &TunedTable) -> String {
    let mut s = format!(
        "## Tuned schedules ({}, {})\n\n",
        table.meta_str("device").unwrap_or("?"),
        table.meta_str("date").unwrap_or("?")
    );
    s += "| point | schedule [early,lanes,occ,cluster,evict] | µs/step | seed µs/step | speedup | schedules timed |\n";
    s += "|---|---|---:|---:|---:|---:|\n";
    for p in &table.points {
        s += &format!(
            "| {} | {} | {:.2} | {} | {} | {} |\n",
            p.name(),
            text(&p.schedule),
            p.us_per_step,
            p.seed_us_per_step.map_or("—".into(), |x| format!("{x:.2}")),
            p.seed_us_per_step
                .map_or("—".into(), |x| format!("{:.3}×", x / p.us_per_step)),
            p.measured.len()
        );
    }
    s
}

/// The rows' good measurements as `timing`; with `check`, only those whose
/// first step matched the reference (or was not checked).
/// What the driver reported about each measured schedule's local memory.
fn note_rows(spill: &mut SpillCheck, point: &Point, rows: &[Row]) {
    for r in rows {
        if let (Outcome::Measured(m), Some(res)) = (&r.outcome, r.resolved) {
            spill.note_device(point, &res.raw(), m.resources.local_bytes);
        }
    }
}

fn measurements(rows: &[Row], timing: &str) -> Vec<Measured> {
    rows.iter()
        .filter_map(|r| {
            let m = r.good()?;
            if matches!(m.check, Some(Err(_))) {
                return None;
            }
            Some(Measured {
                schedule: r.resolved?.raw(),
                us_per_step: m.timing.median_us,
                timing: timing.into(),
            })
        })
        .collect()
}

/// Tune every point of `opts` on `dev`; `save` gets the table after each
/// point.
pub fn run(
    dev: &CudaDevice,
    opts: &Options,
    command: &str,
    mut save: impl FnMut(&TunedTable) -> Result<(), String>,
) -> Result<TunedTable, Box<dyn Error>> {
    let start = Instant::now();
    let limit = start + Duration::from_secs_f64(opts.minutes * 60.0);
    let l2 = dev.l2_cache_bytes()?;
    let points = opts.points();
    println!(
        "autotune on {} (L2 {} MiB): {} points, time limit {:.1} min",
        dev.describe(),
        l2 >> 20,
        points.len(),
        opts.minutes
    );
    let unix = now_unix();
    let mut meta = metadata(
        format!(
            "kda-split autotune on {}, {}: per point, every schedule of the space timed \
             briefly, the {} fastest and the seed's defaults timed again in full",
            dev.describe(),
            date_of(unix),
            opts.top
        ),
        &dev.describe(),
        unix,
    );
    meta.insert("command".into(), json!(command));
    meta.insert("l2_bytes".into(), json!(l2));
    meta.insert("space".into(), opts.space_json());
    meta.insert("search_ms".into(), json!(opts.search_ms));
    meta.insert("budget_ms".into(), json!(opts.bench.budget().target_ms));
    meta.insert("top".into(), json!(opts.top));
    meta.insert("min_gain".into(), json!(opts.min_gain));
    meta.insert("min_steps".into(), json!(opts.bench.min_steps()));
    meta.insert("seed".into(), json!(opts.bench.seed));
    let mut spill = SpillCheck::new();
    println!("  {}", spill.describe());
    meta.insert("spills".into(), json!(spill.describe()));
    let mut table = TunedTable {
        meta,
        points: Vec::new(),
    };
    for (i, &point) in points.iter().enumerate() {
        let t0 = Instant::now();
        let space = space(opts, &point);
        let Ok((mut workload, check)) = opts.bench.workload(dev, point, l2) else {
            continue;
        };
        let share = limit.saturating_duration_since(Instant::now()) / (points.len() - i) as u32;
        let search = Sweep {
            budget: opts.search_budget(),
            check: false,
            ceiling: None,
            verbose: false,
            deadline: Some(Instant::now() + share.mul_f64(0.75)),
        };
        let rows = measure_point(dev, &mut workload, &space.candidates, &search);
        let cut = rows
            .iter()
            .filter(|r| matches!(&r.outcome, Outcome::Skipped(w) if w == "time limit"))
            .count();
        let failed = rows
            .iter()
            .filter(|r| match r.outcome {
                Outcome::Failed(_) => true,
                Outcome::Measured(_) => r.good().is_none(),
                Outcome::Skipped(_) => false,
            })
            .count();
        note_rows(&mut spill, &point, &rows);
        let searched = measurements(&rows, "search");
        let seed = rows
            .iter()
            .find(|r| r.candidate.label == "seed")
            .and_then(|r| r.resolved);
        let mut ranked = searched.clone();
        ranked.sort_by(|a, b| a.us_per_step.total_cmp(&b.us_per_step));
        let seed = seed.map(|s| s.raw());
        let label = |s: &[u32; 5]| {
            if Some(*s) == seed {
                "seed".to_string()
            } else {
                text(s)
            }
        };
        // The `top` fastest that do not spill (checked lazily: ptxas runs
        // for each).
        let mut finals: Vec<Candidate> = ranked
            .iter()
            .filter(|m| spill.usable(&point, &m.schedule))
            .take(opts.top)
            .map(|m| Candidate::new(&label(&m.schedule), &m.schedule))
            .collect();
        if let Some(seed) = seed
            && !finals.iter().any(|c| c.raw == seed)
        {
            finals.push(Candidate::new("seed", &seed));
        }
        println!(
            "    searched {} of {} schedules in {:.1} s ({} pruned{}{}); finalists:",
            searched.len(),
            space.candidates.len(),
            t0.elapsed().as_secs_f64(),
            space.pruned,
            if cut > 0 {
                format!(", {cut} cut by the time limit")
            } else {
                String::new()
            },
            if failed > 0 {
                format!(", {failed} failed")
            } else {
                String::new()
            },
        );
        let full = Sweep {
            budget: opts.bench.budget(),
            check,
            ceiling: None,
            verbose: true,
            deadline: None,
        };
        let final_rows = measure_point(dev, &mut workload, &finals, &full);
        drop(workload);
        note_rows(&mut spill, &point, &final_rows);
        let mut measured = measurements(&final_rows, "full");
        measured.extend(searched);
        let mut notes = Map::new();
        notes.insert("candidates".into(), json!(space.candidates.len()));
        notes.insert("pruned".into(), json!(space.pruned));
        if cut > 0 {
            notes.insert("cut_by_time_limit".into(), json!(cut));
        }
        notes.insert(
            "seconds".into(),
            json!((t0.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        );
        let seed = seed.unwrap_or([u32::MAX; 5]);
        match tuned_point(&point, seed, measured, opts.min_gain, notes, &mut |s| {
            spill.usable(&point, s)
        }) {
            Some(p) => {
                println!(
                    "  {point}: {} {:.2} µs/step (seed's defaults {})",
                    text(&p.schedule),
                    p.us_per_step,
                    p.seed_us_per_step
                        .map_or("not measured".into(), |s| format!(
                            "{s:.2} µs/step, {:.3}×",
                            s / p.us_per_step
                        ))
                );
                table.points.push(p);
            }
            None => println!("  {point}: nothing usable measured"),
        }
        table.meta.insert(
            "seconds".into(),
            json!((start.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        );
        save(&table)?;
    }
    Ok(table)
}

fn write(path: &str, table: &TunedTable) -> Result<(), String> {
    std::fs::write(path, table.to_json_string()).map_err(|e| format!("writing {path}: {e}"))
}

/// A [`SpillCheck`] that also knows what the GPU reported in `files`
/// (`kda-split bench --json` output).
fn device_spills(files: &[String]) -> Result<SpillCheck, String> {
    let mut spill = SpillCheck::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
        let n = spill.note_bench(&doc).map_err(|e| format!("{file}: {e}"))?;
        println!("{file}: the GPU's local memory for {n} measured schedules");
    }
    Ok(spill)
}

/// Entry point of `kda-split autotune`; `args` are the flags after `autotune`.
pub fn main_with_args(args: &[String]) -> Result<(), Box<dyn Error>> {
    let opts = Options::parse(args)?;
    if opts.bench.help {
        println!("{USAGE}");
        return Ok(());
    }
    let command = std::iter::once("kda-split autotune".to_string())
        .chain(args.iter().skip_while(|a| *a == "autotune").cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let read =
        |file: &str| std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"));
    if let Some(file) = &opts.from_bench {
        let doc: Value = serde_json::from_str(&read(file)?).map_err(|e| format!("{file}: {e}"))?;
        let mut spill = device_spills(&opts.device_spills)?;
        println!("{}", spill.describe());
        let mut table = table_from_bench(&doc, file, opts.min_gain, &mut |p, s| spill.usable(p, s))
            .map_err(|e| format!("{file}: {e}"))?;
        table.meta.insert("spills".into(), json!(spill.describe()));
        write(&opts.out, &table)?;
        println!("{}", markdown(&table));
        println!("table written to {}", opts.out);
        return Ok(());
    }
    if let Some(file) = &opts.reselect {
        let old = TunedTable::parse(&read(file)?).map_err(|e| format!("{file}: {e}"))?;
        let mut spill = device_spills(&opts.device_spills)?;
        println!("{}", spill.describe());
        let mut table = reselect(&old, opts.min_gain, &mut |p, s| spill.usable(p, s));
        table.meta.insert(
            "reselected".into(),
            json!(format!(
                "by `{command}` on {}: every point chosen again from its measured schedules \
                 (no new timing), min gain {}; {}{}",
                date_of(now_unix()),
                opts.min_gain,
                spill.describe(),
                if opts.device_spills.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; so are schedules the GPU ran with local memory in {}",
                        opts.device_spills.join(", ")
                    )
                }
            )),
        );
        table.meta.insert("spills".into(), json!(spill.describe()));
        write(&opts.out, &table)?;
        println!("{}", markdown(&table));
        println!("table written to {}", opts.out);
        return Ok(());
    }
    let Some(dev) = open_gpu("autotune")? else {
        return Ok(());
    };
    let table = run(&dev, &opts, &command, |t| write(&opts.out, t))?;
    println!("\n{}", markdown(&table));
    println!("table written to {}", opts.out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        Options::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn p(heads: u32, batch: u32, tokens: u32) -> Point {
        Point {
            heads,
            batch,
            tokens,
        }
    }

    #[test]
    fn options_and_default_points() {
        let o = parse(&[]);
        assert_eq!(o.out, DEFAULT_OUT);
        assert_eq!(o.points().len(), 24);
        assert!(o.points().contains(&p(32, 64, 4)));
        assert_eq!((o.top, o.evict, o.lanes.len()), (3, true, 4));
        let o = parse(&[
            "autotune",
            "--out",
            "x.json",
            "--heads",
            "12",
            "--tokens",
            "1,4",
            "--quick",
            "--occupancy",
            "0,2",
            "--minutes",
            "1.5",
        ]);
        assert_eq!(o.out, "x.json");
        assert_eq!(o.points().len(), 12);
        assert_eq!((o.top, o.evict, o.lanes.clone()), (2, false, vec![8, 16]));
        assert_eq!((o.occupancy.clone(), o.minutes), (vec![0, 2], 1.5));
        for bad in [
            &["--full"][..],
            &["--json", "x"],
            &["--bogus"],
            &["--top", "x"],
        ] {
            let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(Options::parse(&args).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_space_is_valid_distinct_and_pruned() {
        let o = parse(&[]);
        let s = space(&o, &p(12, 64, 1));
        assert_eq!(s.candidates[0].label, "seed");
        assert_eq!(s.candidates[0].raw, [0, 16, 0, 4, 0]);
        let mut seen = Vec::new();
        for c in &s.candidates {
            let cfg = KdaConfig::new(12, 64, 0, true, &c.raw, 1).unwrap();
            assert!(
                pruned_by(&cfg).is_none() || c.label == "seed",
                "{}",
                c.label
            );
            assert!(!seen.contains(&c.raw), "{} twice", c.label);
            seen.push(c.raw.clone());
        }
        // early 0/1: 16 lanes x cluster pairs less 4 at cluster 1 and lanes
        // 4 at cluster 8: 11 each; early 2: 11 x evict; early 3: clusters 1
        // and 2 x 4 lanes x evict.
        assert_eq!(s.candidates.len(), 11 + 11 + 22 + 16);
        assert!(s.pruned > 0);
        assert!(seen.contains(&vec![3, 16, 0, 2, 0]) && seen.contains(&vec![2, 32, 0, 8, 1]));
        // T > 1: early 0 and 1 only.
        let s = space(&o, &p(12, 8, 4));
        assert_eq!(s.candidates.len(), 22);
        assert!(s.candidates.iter().all(|c| c.raw[0] < 2));
        // Quick: lanes 8 and 16, no evict.
        let s = space(&parse(&["--quick"]), &p(12, 1, 1));
        assert!(s.candidates.iter().all(|c| c.raw[4] == 0));
        assert!(s.candidates.iter().all(|c| c.raw[1] == 8 || c.raw[1] == 16));
    }

    fn m(schedule: [u32; 5], us_per_step: f64, timing: &str) -> Measured {
        Measured {
            schedule,
            us_per_step,
            timing: timing.into(),
        }
    }

    #[test]
    fn the_seed_stays_unless_the_best_gains_enough() {
        let seed = [0, 16, 0, 4, 0];
        let measured = vec![
            m([1, 8, 0, 2, 0], 9.0, "search"),
            m(seed, 10.0, "full"),
            m([3, 16, 0, 2, 0], 9.5, "full"),
            m([3, 16, 0, 2, 0], 9.4, "search"),
        ];
        let all = &mut |_: &[u32; 5]| true;
        let t = tuned_point(&p(12, 64, 1), seed, measured.clone(), 0.01, Map::new(), all).unwrap();
        // Full timings decide; the search's 9.0 does not.
        assert_eq!((t.schedule, t.us_per_step), ([3, 16, 0, 2, 0], 9.5));
        assert_eq!(t.seed_us_per_step, Some(10.0));
        assert_eq!(t.measured.len(), 3, "each schedule once, full first");
        assert_eq!(t.measured[2].timing, "search");
        assert!(!t.notes.contains_key(EXCLUDED_NOTE));
        // A 5 % gain is under a 6 % threshold: the seed's defaults stay.
        let t = tuned_point(&p(12, 64, 1), seed, measured, 0.06, Map::new(), all).unwrap();
        assert_eq!((t.schedule, t.us_per_step), (seed, 10.0));
        assert!(tuned_point(&p(1, 1, 1), seed, vec![], 0.0, Map::new(), all).is_none());
    }

    #[test]
    fn unusable_schedules_are_not_chosen() {
        let seed = [0, 16, 0, 4, 0];
        let (fast, next, slow) = ([1, 16, 0, 4, 0], [1, 32, 0, 4, 0], [1, 8, 0, 4, 0]);
        let measured = vec![
            m(seed, 10.0, "full"),
            m(next, 8.1, "full"),
            m(fast, 8.0, "full"),
            m(slow, 8.5, "full"),
            m([1, 4, 0, 2, 0], 7.0, "search"),
        ];
        // The fastest spills: the next is chosen, and nothing below it is asked.
        let mut asked = Vec::new();
        let mut usable = |s: &[u32; 5]| {
            asked.push(*s);
            *s != fast
        };
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.01,
            Map::new(),
            &mut usable,
        )
        .unwrap();
        assert_eq!((t.schedule, t.us_per_step), (next, 8.1));
        assert_eq!(asked, [fast, next]);
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([fast]));
        assert_eq!(t.measured.len(), 5, "every measurement kept");
        assert_eq!(t.seed_us_per_step, Some(10.0));
        // The seed's defaults would stay (min gain 25 %) but spill: the
        // fastest usable is chosen, and the seed listed as excluded.
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.25,
            Map::new(),
            &mut |s| *s != seed,
        )
        .unwrap();
        assert_eq!(t.schedule, fast);
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([seed]));
        // Usable, they stay.
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.25,
            Map::new(),
            &mut |s| *s != fast,
        )
        .unwrap();
        assert_eq!((t.schedule, t.us_per_step), (seed, 10.0));
        assert_eq!(t.notes[EXCLUDED_NOTE], json!([fast]));
        // A stale note goes when nothing is excluded; nothing usable: no point.
        let mut notes = Map::new();
        notes.insert(EXCLUDED_NOTE.into(), json!([fast]));
        let t = tuned_point(
            &p(32, 8, 4),
            seed,
            measured.clone(),
            0.01,
            notes,
            &mut |_| true,
        );
        assert!(!t.unwrap().notes.contains_key(EXCLUDED_NOTE));
        assert!(
            tuned_point(&p(32, 8, 4), seed, measured, 0.01, Map::new(), &mut |_| {
                false
            })
            .is_none()
        );
    }

    #[test]
    fn reselect_chooses_again_from_the_measurements() {
        let m = |s: [u32; 5], us: f64| Measured {
            schedule: s,
            us_per_step: us,
            timing: "full".into(),
        };
        let point = p(32, 8, 4);
        let seed = seed_schedule(&point).unwrap();
        let (fast, next) = ([1, 16, 0, 4, 0], [1, 32, 0, 4, 0]);
        let mut notes = Map::new();
        notes.insert("candidates".into(), json!(22));
        let mut meta = Map::new();
        meta.insert("device".into(), json!("X"));
        meta.insert("min_gain".into(), json!(0.01));
        let old = TunedTable {
            meta,
            points: vec![TunedPoint {
                heads: 32,
                batch: 8,
                tokens: 4,
                schedule: fast,
                us_per_step: 8.0,
                seed_us_per_step: Some(10.0),
                measured: vec![m(fast, 8.0), m(next, 8.1), m(seed, 10.0)],
                notes,
            }],
        };
        let same = reselect(&old, 0.01, &mut |_, _| true);
        assert_eq!(same.points, old.points);
        let t = reselect(&old, 0.02, &mut |_, s| *s != fast);
        assert_eq!(t.meta["device"], "X");
        assert_eq!(t.meta["min_gain"], json!(0.02));
        let q = &t.points[0];
        assert_eq!((q.schedule, q.us_per_step), (next, 8.1));
        assert_eq!(q.measured, old.points[0].measured);
        assert_eq!(q.notes["candidates"], 22);
        assert_eq!(q.notes[EXCLUDED_NOTE], json!([fast]));
        assert_eq!(TunedTable::parse(&t.to_json_string()).unwrap(), t);
    }

    #[test]
    fn reselect_and_from_bench_exclude_each_other() {
        assert_eq!(
            parse(&["--reselect", "t.json"]).reselect.as_deref(),
            Some("t.json")
        );
        let args: Vec<String> = ["--reselect", "a", "--from-bench", "b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(Options::parse(&args).is_err());
    }

    #[test]
    fn schedules_the_gpu_ran_with_local_memory_are_left_out() {
        let doc = json!({"rows": [
            {"heads": 12, "batch": 64, "tokens": 4, "local_bytes": 16,
             "resolved": {"early": 0, "lanes": 32, "occupancy": 0, "cluster": 4, "evict": false}},
            {"heads": 12, "batch": 64, "tokens": 4, "local_bytes": 0,
             "resolved": {"early": 0, "lanes": 16, "occupancy": 0, "cluster": 4, "evict": false}},
            {"heads": 12, "batch": 64, "tokens": 4, "status": "skipped",
             "resolved": {"early": 1, "lanes": 16, "occupancy": 0, "cluster": 4, "evict": false}},
        ]});
        let mut spill = SpillCheck::new();
        assert_eq!(spill.note_bench(&doc), Ok(2));
        let at = p(12, 64, 4);
        assert!(!spill.usable(&at, &[0, 32, 0, 4, 0]));
        // The same schedule elsewhere is not known to spill on the GPU.
        let other = p(12, 8, 4);
        spill.checked = false; // no ptxas in this test: only the GPU's report counts
        assert!(spill.usable(&other, &[0, 32, 0, 4, 0]));
        assert!(spill.usable(&at, &[0, 16, 0, 4, 0]));
        assert!(SpillCheck::new().note_bench(&json!({})).is_err());
    }

    #[test]
    fn device_spills_needs_a_table_to_reselect() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Options::parse(&args(&["--device-spills", "b.json"])).is_err());
        let o = parse(&[
            "--reselect",
            "t.json",
            "--device-spills",
            "a.json",
            "--device-spills",
            "b.json",
        ]);
        assert_eq!(o.device_spills, ["a.json", "b.json"]);
    }

    #[test]
    fn dates_and_metadata() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400), "2000-02-29");
        assert_eq!(date_of(1_795_965_996), "2026-11-29");
        let m = metadata(
            "x".into(),
            "NVIDIA H200 (sm_90, 132 SMs, driver CUDA 13.0)",
            1_795_965_996,
        );
        assert_eq!(m["gpu"], "NVIDIA H200");
        assert_eq!(m["driver"], "CUDA 13.0");
        assert_eq!(m["date"], "2026-11-29");
    }

    #[test]
    fn a_bench_file_makes_a_table() {
        let row = |h: u32, b: u32, label: &str, raw: &[u32], res: [u32; 5], us: Option<f64>| {
            json!({
                "heads": h, "batch": b, "tokens": 1, "schedule": label, "schedule_raw": raw,
                "resolved": {"early": res[0], "lanes": res[1], "occupancy": res[2],
                             "cluster": res[3], "evict": res[4] == 1},
                "status": if us.is_some() { "ok" } else { "skipped" },
                "us_per_step": us,
            })
        };
        let doc = json!({
            "device": "NVIDIA H200 (sm_90, 132 SMs, driver CUDA 13.0)",
            "unix_time": 1_795_965_996u64,
            "options": {"schedules": [{"label": "default"}, {"label": "e1"}]},
            "rows": [
                row(12, 1, "default", &[0, 0, 0], [0, 8, 0, 8, 0], Some(3.3)),
                row(12, 1, "e1", &[1, 0, 0], [1, 8, 0, 8, 0], Some(2.6)),
                row(12, 64, "default", &[0, 0, 0], [0, 16, 0, 4, 0], Some(34.0)),
                row(12, 64, "e1", &[1, 0, 0], [1, 16, 0, 4, 0], Some(33.9)),
                row(12, 64, "e1-l16", &[1, 16, 0], [1, 16, 0, 4, 0], None),
            ],
        });
        let t = table_from_bench(&doc, "b.json", 0.01, &mut |_, _| true).unwrap();
        assert_eq!(t.points.len(), 2);
        assert_eq!(t.points[0].schedule, [1, 8, 0, 8, 0]);
        assert_eq!(t.points[0].seed_us_per_step, Some(3.3));
        // 0.3 % faster than the seed's defaults: not enough.
        assert_eq!(t.points[1].schedule, [0, 16, 0, 4, 0]);
        assert!(t.meta_str("source").unwrap().contains("seeded from b.json"));
        assert_eq!(t.meta_str("date"), Some("2026-11-29"));
        assert_eq!(TunedTable::parse(&t.to_json_string()).unwrap(), t);
        assert!(markdown(&t).contains("| H12 B1 T1 | [1,8,0,8,0] | 2.60 | 3.30 | 1.269× | 2 |"));
    }
}

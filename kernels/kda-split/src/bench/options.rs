//! The flags of `kda-split bench`, and those it shares with `autotune`
//! ([`SweepArgs`], flattened into both).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use kda_runtime::{CudaDevice, RuntimeError};
use thiserror::Error;

use super::gpu::Budget;
use super::report::OptionsJson;
use super::schedule::{Candidate, default_schedules};
use super::workload::{Plan, Point, Workload};

/// An entry of `--heads`, `--batch`, ... that is not a positive integer.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("`{0}` is not a positive integer")]
pub struct NotPositive(pub String);

/// A positive integer (spaces around it allowed: `--heads "6, 12"`).
pub fn positive(text: &str) -> Result<u32, NotPositive> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| NotPositive(text.to_string()))
}

/// The flags of both commands: the points, the schedules to try, the timing,
/// the seed and the reference check.
#[derive(Clone, Debug, Args)]
pub struct SweepArgs {
    /// Fewer schedules and shorter timing.
    #[arg(long)]
    pub quick: bool,
    /// Heads to measure, e.g. 6,12,32 (with --batch / --tokens: their
    /// product).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = positive)]
    pub heads: Option<Vec<u32>>,
    /// Requests B, e.g. 1,8,32,128,512.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = positive)]
    pub batch: Option<Vec<u32>>,
    /// Tokens per request T, e.g. 1,4.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = positive)]
    pub tokens: Option<Vec<u32>>,
    /// A schedule to try, repeatable or ';'-separated: a name (auto: the
    /// tuned table's schedule at each point; seed or default: the seed's
    /// defaults 0,0,0; e1, e1-l8, e1-l16, e2, e2-c2, e2-c4, e2-c2-evict,
    /// e3-c2) or raw
    /// `early,lanes,occupancy[,cluster[,evict[,bulk_store[,balance]]]]`.
    #[arg(long = "schedule", value_name = "S", value_delimiter = ';')]
    pub schedules: Vec<Candidate>,
    /// Timed replays per configuration, in ms [default: 250; --quick: 100].
    #[arg(long, value_name = "MS")]
    pub budget_ms: Option<u64>,
    /// Least steps per graph [default: 32; --quick: 16].
    #[arg(long, value_name = "N")]
    pub min_steps: Option<u64>,
    /// Generator seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Also compare each schedule's first step with the float64 reference
    /// (host time: seconds per GiB of state).
    #[arg(long)]
    pub check: bool,
    /// With --check, only points of at most this much state [default: 2048].
    #[arg(long, value_name = "MIB")]
    pub check_mib: Option<u64>,
}

/// `kda-split bench`: the shared flags and the bench's own.
#[derive(Clone, Debug, Args)]
pub struct Options {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// The issue's whole sweep: heads 6, 12, 32 at batch 1, 8, 32, 64, 128,
    /// 512, plus T = 4 at batch 8, 64 and 128.
    #[arg(long)]
    pub full: bool,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Bytes of each copy buffer, in MiB [default: 1024].
    #[arg(long, value_name = "MIB")]
    pub copy_mib: Option<u64>,
    /// No GPU: check the kernels and the workload on the simulator.
    #[arg(long)]
    pub sim: bool,
    /// Skip the same-bytes copy: per point, a PDL-chained copy of exactly the
    /// point's state traffic, the "% of same-bytes copy" column's reference.
    #[arg(long)]
    pub no_same_bytes_copy: bool,
    /// After each measured schedule, run its steps again compiled with CTA
    /// timeline probes (every warp's entry, exit and waits, in the chained
    /// graph) and print where its CTAs' time goes: lifetime, CTAs resident
    /// per SM, how long a freed slot stays empty, when each wait completes
    /// (the same-bytes copy's variants too, for comparison).
    #[arg(long)]
    pub trace: bool,
}

impl Options {
    /// The flags given that `--sim` does not apply: it checks the kernels on
    /// fixed small workloads (issue 32 item 7: `bench --sim --heads 64`
    /// said "ok" for heads it never ran).
    pub fn flags_ignored_by_sim(&self) -> Vec<&'static str> {
        let s = &self.sweep;
        [
            ("--quick", s.quick),
            ("--heads", s.heads.is_some()),
            ("--batch", s.batch.is_some()),
            ("--tokens", s.tokens.is_some()),
            ("--schedule", !s.schedules.is_empty()),
            ("--budget-ms", s.budget_ms.is_some()),
            ("--min-steps", s.min_steps.is_some()),
            ("--seed", s.seed != 1),
            ("--check", s.check),
            ("--check-mib", s.check_mib.is_some()),
            ("--full", self.full),
            ("--json", self.json.is_some()),
            ("--copy-mib", self.copy_mib.is_some()),
            ("--no-same-bytes-copy", self.no_same_bytes_copy),
            ("--trace", self.trace),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }
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

impl SweepArgs {
    /// Whether `--heads`, `--batch` or `--tokens` was given.
    pub fn has_point_lists(&self) -> bool {
        self.heads.is_some() || self.batch.is_some() || self.tokens.is_some()
    }

    /// The product of the point lists; a list not given is the one passed here.
    pub fn product_or(&self, heads: &[u32], batch: &[u32], tokens: &[u32]) -> Vec<Point> {
        product(
            self.heads.as_deref().unwrap_or(heads),
            self.batch.as_deref().unwrap_or(batch),
            self.tokens.as_deref().unwrap_or(tokens),
        )
    }

    /// The timing of each measured schedule.
    pub fn budget(&self) -> Budget {
        Budget {
            warmup: 3,
            target_ms: self
                .budget_ms
                .map_or(if self.quick { 100.0 } else { 250.0 }, |ms| ms as f64),
            min_replays: 10,
            max_replays: 500,
        }
    }

    pub fn min_steps(&self) -> usize {
        self.min_steps
            .map_or(if self.quick { 16 } else { 32 }, |n| n.max(1) as usize)
    }

    pub fn check_mib(&self) -> usize {
        self.check_mib.map_or(2048, |m| m as usize)
    }

    /// The slot groups of a point's workload: ≥ 4 × L2 of state.
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

impl Options {
    /// The points to measure, in order.
    pub fn points(&self) -> Vec<Point> {
        if !self.sweep.has_point_lists() {
            let (h12, other): (&[u32], &[u32]) = if self.full {
                (&[1, 8, 32, 64, 128, 512], &[1, 8, 32, 64, 128, 512])
            } else {
                (&[1, 8, 32, 64, 128, 512], &[1, 128, 512])
            };
            let mut points = product(&[12], h12, &[1]);
            points.extend(product(&[12], &[8, 64, 128], &[4]));
            points.extend(product(&[6, 32], other, &[1]));
            return points;
        }
        self.sweep.product_or(&[12], &[1, 8, 32, 128, 512], &[1])
    }

    pub fn schedules(&self) -> Vec<Candidate> {
        if self.sweep.schedules.is_empty() {
            default_schedules(self.sweep.quick)
        } else {
            self.sweep.schedules.clone()
        }
    }

    /// Whether to measure the same-bytes copy of each point.
    pub fn same_bytes_copy(&self) -> bool {
        !self.no_same_bytes_copy
    }

    pub fn copy_mib(&self) -> usize {
        self.copy_mib.map_or(1024, |m| m.max(1) as usize)
    }

    /// The options as the JSON file records them.
    pub fn to_json(&self) -> OptionsJson {
        let s = &self.sweep;
        OptionsJson {
            budget_ms: s.budget().target_ms,
            check_mib: s.check.then(|| s.check_mib()),
            copy_mib: self.copy_mib(),
            full: self.full,
            min_steps: s.min_steps(),
            points: self
                .points()
                .iter()
                .map(|p| [p.heads, p.batch, p.tokens])
                .collect(),
            quick: s.quick,
            same_bytes_copy: self.same_bytes_copy(),
            schedules: self.schedules(),
            seed: s.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Bench {
        #[command(flatten)]
        options: Options,
    }

    fn try_parse(args: &[&str]) -> Result<Options, clap::Error> {
        let args = args.iter().skip_while(|a| **a == "bench");
        Bench::try_parse_from(std::iter::once(&"bench").chain(args)).map(|b| b.options)
    }

    fn parse(args: &[&str]) -> Options {
        try_parse(args).unwrap()
    }

    #[test]
    fn default_sweep_has_the_issue_points() {
        let points = parse(&[]).points();
        assert_eq!(points.len(), 15);
        for batch in [8, 64, 128] {
            assert!(points.contains(&Point {
                heads: 12,
                batch,
                tokens: 4
            }));
        }
        assert!(points.contains(&Point {
            heads: 32,
            batch: 512,
            tokens: 1
        }));
        assert_eq!(parse(&["--full"]).points().len(), 21);
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
        assert!(try_parse(&["--bogus"]).is_err());
        assert!(try_parse(&["--schedule", "1,2"]).is_err());
        assert!(try_parse(&["--batch", "0"]).is_err());
        assert_eq!(parse(&["--heads", "6, 12"]).sweep.heads, Some(vec![6, 12]));
        assert_eq!(positive("x"), Err(NotPositive("x".into())));
    }

    #[test]
    fn defaults_and_the_recorded_options() {
        let o = parse(&[]);
        assert_eq!(
            (o.sweep.seed, o.sweep.min_steps(), o.copy_mib()),
            (1, 32, 1024)
        );
        assert_eq!(o.sweep.budget().target_ms, 250.0);
        let q = parse(&["--quick", "--min-steps", "0", "--copy-mib", "0"]);
        assert_eq!((q.sweep.min_steps(), q.copy_mib()), (1, 1));
        assert_eq!(q.sweep.budget().target_ms, 100.0);
        let j = parse(&["--check", "--heads", "2", "--batch", "1"]).to_json();
        assert_eq!(j.check_mib, Some(2048));
        assert_eq!(j.points, [[2, 1, 1]]);
        assert_eq!(o.to_json().check_mib, None);
        assert_eq!(o.to_json().schedules.len(), 10);
        assert!(o.same_bytes_copy() && o.to_json().same_bytes_copy);
        let n = parse(&["--no-same-bytes-copy"]);
        assert!(!n.same_bytes_copy() && !n.to_json().same_bytes_copy);
    }
}

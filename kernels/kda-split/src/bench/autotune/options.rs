//! The flags of `kda-split autotune`: the bench's shared ones
//! ([`SweepArgs`]) and the search's own.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use thiserror::Error;

use super::space::PRUNE_RULES;
use crate::bench::gpu::Budget;
use crate::bench::options::{SweepArgs, positive, product};
use crate::bench::workload::Point;

/// Where the table goes by default (from the repository root).
pub const DEFAULT_OUT: &str = "kernels/kda-split/tuned.json";

/// A value of `--search-ms`, `--min-gain` or `--minutes` that is not one.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("`{0}` is not a non-negative number")]
pub struct NotNonNegative(pub String);

fn non_negative(text: &str) -> Result<f64, NotNonNegative> {
    text.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| NotNonNegative(text.to_string()))
}

/// `kda-split autotune`.
#[derive(Clone, Debug, Args)]
pub struct Options {
    /// The points, the extra schedules (`--schedule`: also try these), the
    /// finalists' timing (`--budget-ms`), the seed and the reference check
    /// of the finalists.
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Where to write the table.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Lanes to search [default: 4,8,16,32; --quick: 8,16].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = positive)]
    pub lanes: Option<Vec<u32>>,
    /// Clusters to search.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "1,2,4,8", value_parser = positive)]
    pub cluster: Vec<u32>,
    /// Occupancy values to search (0: no launch bound).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "0")]
    pub occupancy: Vec<u32>,
    /// Leave evict off (--quick does too).
    #[arg(long)]
    pub no_evict: bool,
    /// Leave schedule entry 6 (bulk_store: each token's state rows through
    /// shared memory, one bulk store per token) off at T > 1 (--quick does
    /// too).
    #[arg(long)]
    pub no_bulk_store: bool,
    /// Leave schedule entry 7 (balance: the clusters' load-balancing
    /// scheduling policy) off where the cluster is above 1 (--quick does
    /// too).
    #[arg(long)]
    pub no_balance: bool,
    /// Finalists timed in full besides the seed's defaults [default: 3;
    /// --quick: 2].
    #[arg(long, value_name = "K")]
    pub top: Option<usize>,
    /// Timed replays per searched schedule, in ms [default: 20; --quick: 10].
    #[arg(long, value_name = "MS", value_parser = non_negative)]
    pub search_ms: Option<f64>,
    /// Least gain over the seed's defaults to replace them.
    #[arg(long, value_name = "F", value_parser = non_negative, default_value_t = 0.01)]
    pub min_gain: f64,
    /// Time limit of the whole search, in minutes [default: 10; --quick: 2.5].
    #[arg(long, value_name = "M", value_parser = non_negative)]
    pub minutes: Option<f64>,
    /// No GPU: the table from a `kda-split bench --json` file (the fastest
    /// schedule the bench measured at each point).
    #[arg(long, value_name = "FILE", group = "table_source")]
    pub from_bench: Option<PathBuf>,
    /// No GPU: choose every point of the tuned table FILE again from the
    /// schedules measured there, with the current rules (spill exclusion,
    /// --min-gain); keeps its measurements.
    #[arg(long, value_name = "FILE", group = "table_source")]
    pub reselect: Option<PathBuf>,
    /// No GPU: put the points of the tuned table FILE (e.g. an autotune run
    /// over `--tokens 2,4,8` only) in place of the same points of the table
    /// at --out, keeping its others; both must come from the same GPU.
    #[arg(long, value_name = "FILE", group = "table_source")]
    pub merge: Option<PathBuf>,
    /// With --reselect or --from-bench (repeatable): also leave out schedules
    /// a `kda-split bench --json` file saw using local memory on the GPU (the
    /// driver's JIT can spill where ptxas does not); a GPU search reads what
    /// the driver reports for every schedule it measures.
    #[arg(
        long,
        value_name = "FILE",
        requires = "table_source",
        conflicts_with = "merge"
    )]
    pub device_spills: Vec<PathBuf>,
}

/// The space searched, as the table's metadata records it.
#[derive(Serialize)]
struct SpaceJson<'a> {
    early: [u32; 4],
    lanes: Vec<u32>,
    cluster: &'a [u32],
    occupancy: &'a [u32],
    evict: &'static str,
    bulk_store: &'static str,
    balance: &'static str,
    extra_schedules: Vec<&'a str>,
    pruned: [&'static str; 2],
}

impl Options {
    /// The points to tune, in order.
    pub fn points(&self) -> Vec<Point> {
        let batches: &[u32] = &[1, 8, 32, 64, 128, 512];
        if !self.sweep.has_point_lists() {
            // The points of the checked-in table: a whole search re-chooses
            // every one of them (none is lost to a narrower default).
            let mut points = Vec::new();
            for heads in [12, 6, 32] {
                points.extend(product(&[heads], batches, &[1]));
                if heads == 6 {
                    points.extend(product(&[heads], &[8, 64], &[4]));
                } else {
                    points.extend(product(&[heads], &[8, 64, 128], &[2, 4, 8]));
                }
            }
            return points;
        }
        self.sweep.product_or(&[6, 12, 32], batches, &[1])
    }

    pub fn lanes(&self) -> Vec<u32> {
        match &self.lanes {
            Some(lanes) => lanes.clone(),
            None if self.sweep.quick => vec![8, 16],
            None => vec![4, 8, 16, 32],
        }
    }

    /// Whether evict is searched (where early >= 2).
    pub fn evict(&self) -> bool {
        !self.no_evict && !self.sweep.quick
    }

    /// Whether bulk_store (schedule entry 6) is searched (where T > 1).
    pub fn bulk_store(&self) -> bool {
        !self.no_bulk_store && !self.sweep.quick
    }

    /// Whether balance (schedule entry 7) is searched (where cluster > 1).
    pub fn balance(&self) -> bool {
        !self.no_balance && !self.sweep.quick
    }

    pub fn top(&self) -> usize {
        self.top.unwrap_or(if self.sweep.quick { 2 } else { 3 })
    }

    pub fn search_ms(&self) -> f64 {
        self.search_ms
            .unwrap_or(if self.sweep.quick { 10.0 } else { 20.0 })
    }

    pub fn minutes(&self) -> f64 {
        self.minutes
            .unwrap_or(if self.sweep.quick { 2.5 } else { 10.0 })
    }

    /// The brief timing of the search.
    pub fn search_budget(&self) -> Budget {
        Budget {
            warmup: 1,
            target_ms: self.search_ms(),
            min_replays: 5,
            max_replays: 200,
        }
    }

    /// The space searched, as JSON (for the table's metadata).
    pub fn space_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        let space = SpaceJson {
            early: [0, 1, 2, 3],
            lanes: self.lanes(),
            cluster: &self.cluster,
            occupancy: &self.occupancy,
            evict: if self.evict() {
                "off and on where early >= 2"
            } else {
                "off"
            },
            bulk_store: if self.bulk_store() {
                "off and on where tokens > 1"
            } else {
                "off"
            },
            balance: if self.balance() {
                "off and on where cluster > 1"
            } else {
                "off"
            },
            extra_schedules: self
                .sweep
                .schedules
                .iter()
                .map(|c| c.label.as_str())
                .collect(),
            pruned: PRUNE_RULES,
        };
        serde_json::to_value(space)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use clap::Parser;

    use super::*;
    use crate::bench::workload::Point;

    #[derive(Parser)]
    #[command(args_override_self = true)]
    struct Autotune {
        #[command(flatten)]
        options: Options,
    }

    pub(crate) fn try_parse(args: &[&str]) -> Result<Options, clap::Error> {
        let args = args.iter().skip_while(|a| **a == "autotune");
        Autotune::try_parse_from(std::iter::once(&"autotune").chain(args)).map(|a| a.options)
    }

    pub(crate) fn parse(args: &[&str]) -> Options {
        try_parse(args).unwrap()
    }

    #[test]
    fn options_and_default_points() {
        let o = parse(&[]);
        assert_eq!(o.out.to_str(), Some(DEFAULT_OUT));
        assert_eq!(o.points().len(), 38);
        assert!(o.points().contains(&Point::new(32, 64, 4)));
        assert!(o.points().contains(&Point::new(12, 128, 8)));
        assert!(o.points().contains(&Point::new(6, 64, 4)));
        // Every point of the checked-in table is a default point.
        let table = crate::tuned::TunedTable::parse(crate::tuned::TUNED_JSON).unwrap();
        for p in &table.points {
            let point = Point::new(p.heads, p.batch, p.tokens);
            assert!(o.points().contains(&point), "{point}");
        }
        assert_eq!(table.points.len(), o.points().len());
        assert_eq!(o.minutes(), 10.0);
        assert_eq!((o.top(), o.evict(), o.lanes().len()), (3, true, 4));
        assert!(o.bulk_store() && !parse(&["--no-bulk-store"]).bulk_store());
        assert!(o.balance() && !parse(&["--no-balance"]).balance());
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
        assert_eq!(o.out.to_str(), Some("x.json"));
        assert_eq!(o.points().len(), 12);
        assert_eq!((o.top(), o.evict(), o.lanes()), (2, false, vec![8, 16]));
        assert!(!o.bulk_store());
        assert_eq!((o.occupancy.clone(), o.minutes()), (vec![0, 2], 1.5));
        for bad in [
            &["--full"][..],
            &["--json", "x"],
            &["--bogus"],
            &["--top", "x"],
            &["--min-gain", "-1"],
        ] {
            assert!(try_parse(bad).is_err(), "{bad:?}");
        }
        // The last of a repeated flag wins, as before clap.
        assert_eq!(parse(&["--seed", "2", "--seed", "3"]).sweep.seed, 3);
    }

    #[test]
    fn reselect_and_from_bench_exclude_each_other() {
        assert_eq!(
            parse(&["--reselect", "t.json"]).reselect,
            Some(PathBuf::from("t.json"))
        );
        assert!(try_parse(&["--reselect", "a", "--from-bench", "b"]).is_err());
    }

    #[test]
    fn merge_excludes_the_other_table_sources() {
        assert_eq!(
            parse(&["--merge", "t4.json"]).merge,
            Some(PathBuf::from("t4.json"))
        );
        assert!(try_parse(&["--merge", "a", "--reselect", "b"]).is_err());
        assert!(try_parse(&["--merge", "a", "--from-bench", "b"]).is_err());
        // A merge chooses nothing, so it has no spills to apply.
        assert!(try_parse(&["--merge", "a", "--device-spills", "b"]).is_err());
    }

    #[test]
    fn device_spills_needs_a_table_to_reselect() {
        assert!(try_parse(&["--device-spills", "b.json"]).is_err());
        let o = parse(&[
            "--reselect",
            "t.json",
            "--device-spills",
            "a.json",
            "--device-spills",
            "b.json",
        ]);
        assert_eq!(
            o.device_spills,
            [PathBuf::from("a.json"), PathBuf::from("b.json")]
        );
        assert!(
            parse(&["--from-bench", "b.json", "--device-spills", "a.json"])
                .from_bench
                .is_some()
        );
    }
}

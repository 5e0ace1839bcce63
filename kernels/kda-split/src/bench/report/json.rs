//! The `kda-split bench --json` file, written by `bench` and read by
//! `autotune --from-bench` and `--device-spills`.
//!
//! Keys are declared in alphabetical order: the order the files of earlier
//! runs have (they were written through a sorted map), so a new run's file
//! diffs cleanly against a checked-in one. Readers need only the points and
//! what was measured; everything else defaults when absent, so hand-made and
//! older files read too.

use serde::{Deserialize, Serialize};

use crate::bench::gpu::{CopyRow, Timing};
use crate::bench::same_copy::SameCopyRow;
use crate::bench::schedule::Candidate;
use crate::bench::workload::Point;
use crate::config::Schedule;
use crate::tuned::RawSchedule;

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchFile {
    #[serde(default)]
    pub copy: Vec<CopyRow>,
    #[serde(default)]
    pub copy_ceiling_tbps: Option<f64>,
    /// `CudaDevice::describe` of the GPU; always written.
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub floor: Vec<FloorJson>,
    #[serde(default)]
    pub l2_bytes: usize,
    #[serde(default)]
    pub options: OptionsJson,
    pub rows: Vec<RowJson>,
    /// Every same-bytes copy measurement: per distinct (bytes read, T) of
    /// the points, each copy-step variant (absent in older files and with
    /// `--no-same-bytes-copy`).
    #[serde(default)]
    pub same_bytes_copy: Vec<SameCopyRow>,
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub targets: Vec<TargetJson>,
    /// When the file was written (0: unknown).
    #[serde(default)]
    pub unix_time: u64,
}

/// The command line of the run, as measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OptionsJson {
    pub budget_ms: f64,
    /// `null` without `--check`.
    pub check_mib: Option<usize>,
    pub copy_mib: usize,
    pub full: bool,
    pub min_steps: usize,
    /// `[heads, batch, tokens]`.
    pub points: Vec<[u32; 3]>,
    pub quick: bool,
    /// The same-bytes copy was measured (false in files from before it).
    pub same_bytes_copy: bool,
    pub schedules: Vec<Candidate>,
    pub seed: u64,
}

/// One floor measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FloorJson {
    pub block: u32,
    pub cluster: u32,
    pub grid: [u32; 3],
    pub name: String,
    pub pdl: bool,
    pub timing: Timing,
    pub us_per_node: f64,
}

/// What became of a (point, schedule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Measured, but some outputs were not written or not finite.
    BadOutput,
    Skipped,
    Failed,
}

/// One (point, schedule). The measurement's fields are there only for
/// measured rows, `reason` only for skipped ones, `error` only for failed
/// ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_outputs: Option<usize>,
    pub batch: u32,
    /// Measured rows with a resolved schedule: CTAs per SM by the sm_90
    /// occupancy calculation from the kernel's registers and shared memory
    /// (`Row::residency`). Absent otherwise, and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctas_per_sm: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dyn_smem_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Measured rows: the state traffic over the copy ceiling, `null` when
    /// there is no ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction_of_copy: Option<Option<f64>>,
    /// Measured rows whose point has a same-bytes copy (its best verified
    /// variant; `BenchFile::same_bytes_copy`): the state traffic over the
    /// copy's, i.e. the copy's µs/step over this row's. Absent otherwise,
    /// and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction_of_same_bytes_copy: Option<f64>,
    pub heads: u32,
    /// Local memory per thread the driver reported (spills show here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    /// The schedule with every value explicit, where the configuration was
    /// valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<ResolvedJson>,
    /// The label (`auto`, `seed`, `e1`, `[1,8,0]`, ...).
    #[serde(default)]
    pub schedule: String,
    /// The raw entries as given (for `auto`: the tuned ones of the point).
    #[serde(default)]
    pub schedule_raw: Vec<u32>,
    #[serde(default)]
    pub slot_groups: usize,
    #[serde(default)]
    pub state_bytes_per_step: usize,
    /// With `ctas_per_sm`: the state rows those CTAs read, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_kib_per_sm: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_tbps: Option<f64>,
    /// Always written.
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub steps_per_graph: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    pub tokens: u32,
    /// `bench --trace`: the traced run (`kda_host::bench::trace::Traced`:
    /// the probed build's registers and timing, and the probe report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub us_per_step: Option<f64>,
}

impl RowJson {
    pub fn point(&self) -> Point {
        Point {
            heads: self.heads,
            batch: self.batch,
            tokens: self.tokens,
        }
    }

    /// The explicit schedule (`[early, lanes, occupancy, cluster,
    /// evict[, bulk_store[, balance]]]`) the row resolved to, if it says.
    pub fn schedule(&self) -> Option<RawSchedule> {
        self.resolved.map(|r| r.raw())
    }

    /// The µs/step of a good measurement.
    pub fn good_us(&self) -> Option<f64> {
        match self.status {
            Some(Status::Ok) => self.us_per_step,
            _ => None,
        }
    }
}

/// A resolved schedule in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedJson {
    pub cluster: u32,
    pub early: u32,
    pub evict: bool,
    pub lanes: u32,
    pub occupancy: u32,
    /// Schedule entry 6, each token's state rows through shared memory as
    /// one bulk store (written only when on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bulk_store: bool,
    /// Schedule entry 7, the clusters' load-balancing scheduling policy
    /// (written only when on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub balance: bool,
}

impl ResolvedJson {
    /// `[early, lanes, occupancy, cluster, evict, bulk_store, balance]`.
    pub fn raw(&self) -> RawSchedule {
        RawSchedule([
            self.early,
            self.lanes,
            self.occupancy,
            self.cluster,
            u32::from(self.evict),
            u32::from(self.bulk_store),
            u32::from(self.balance),
        ])
    }
}

impl From<Schedule> for ResolvedJson {
    fn from(s: Schedule) -> Self {
        ResolvedJson {
            cluster: s.cluster,
            early: u32::from(s.early),
            evict: s.evict,
            lanes: s.lanes,
            occupancy: s.occupancy,
            bulk_store: s.bulk_store,
            balance: s.balance,
        }
    }
}

/// One target at one point, for the default schedule and the best one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetJson {
    pub batch: u32,
    pub best: String,
    pub best_pass: Option<bool>,
    pub best_ratio: Option<f64>,
    pub best_schedule: Option<String>,
    pub best_us: Option<f64>,
    pub default: String,
    pub default_pass: Option<bool>,
    pub default_ratio: Option<f64>,
    /// `auto` or `seed`.
    pub default_schedule: Option<String>,
    pub heads: u32,
    pub target: String,
    pub tokens: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row's resolved schedule writes `bulk_store` and `balance` only when
    /// on, reads files written before them, and reads back what it wrote.
    #[test]
    fn resolved_schedules_round_trip_with_and_without_the_late_entries() {
        let base = ResolvedJson {
            cluster: 4,
            early: 0,
            evict: false,
            lanes: 16,
            occupancy: 0,
            bulk_store: false,
            balance: false,
        };
        let text = serde_json::to_string(&base).unwrap();
        assert!(
            !text.contains("bulk_store") && !text.contains("balance"),
            "{text}"
        );
        let old = r#"{"cluster":4,"early":0,"evict":false,"lanes":16,"occupancy":0}"#;
        assert_eq!(serde_json::from_str::<ResolvedJson>(old).unwrap(), base);
        let on = ResolvedJson {
            bulk_store: true,
            balance: true,
            ..base
        };
        let text = serde_json::to_string(&on).unwrap();
        assert!(text.contains("\"balance\":true"), "{text}");
        let back: ResolvedJson = serde_json::from_str(&text).unwrap();
        assert_eq!(back, on);
        assert_eq!(back.raw(), [0, 16, 0, 4, 0, 1, 1]);
        let balance_only = ResolvedJson {
            balance: true,
            ..base
        };
        assert_eq!(balance_only.raw().entries(), [0, 16, 0, 4, 0, 0, 1]);
    }
}

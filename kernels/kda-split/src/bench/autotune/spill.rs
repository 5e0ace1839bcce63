//! Which schedules spill: ptxas's report of the kernel as `run` launches it,
//! and what the GPU's driver reported (its JIT can spill where ptxas does
//! not). A spilling schedule is never chosen.

use std::collections::HashMap;
use std::path::PathBuf;

use super::error::AutotuneError;
use super::table::read_bench;
use super::text;
use crate::bench::report::BenchFile;
use crate::bench::workload::Point;
use crate::config::KdaConfig;
use crate::run::contiguous_kernel;
use crate::tuned::RawSchedule;

/// Whether `schedule` spills registers at `point` (gate mode 0, bias on, as
/// the workload launches it): the kernel `run` launches for contiguous
/// tensors, compiled and assembled by ptxas for sm_90a. `None` where ptxas is
/// not found; `Some(true)` where it spills (stores or loads), where ptxas
/// rejects it, or where it does not build.
pub fn spills(point: &Point, schedule: &RawSchedule) -> Option<bool> {
    kda_ir::ptxas::find()?;
    let Ok(cfg) = KdaConfig::new(
        point.heads,
        point.batch,
        0,
        true,
        schedule.entries(),
        point.tokens,
    ) else {
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

/// [`spills`] of one run, each (point, schedule) assembled once, and
/// balance twins (schedules differing only in entry 7, which compile to the
/// same code: [`RawSchedule::without_balance`]) once for both; without ptxas
/// every schedule is usable.
#[derive(Debug)]
pub struct SpillCheck {
    checked: bool,
    /// ptxas's verdict per point and schedule without balance.
    known: HashMap<(Point, RawSchedule), bool>,
    /// Local memory per thread the GPU's driver reported for a schedule at
    /// a point (its JIT may spill where ptxas does not).
    device: HashMap<(Point, RawSchedule), u32>,
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
    pub fn note_device(&mut self, point: &Point, schedule: &RawSchedule, local_bytes: u32) {
        let at = self.device.entry((*point, *schedule)).or_insert(0);
        *at = (*at).max(local_bytes);
    }

    /// [`note_device`](Self::note_device) for every measured row of a
    /// `kda-split bench --json` file (its `resolved` schedule and
    /// `local_bytes`); how many rows it read.
    pub fn note_bench(&mut self, doc: &BenchFile) -> usize {
        let mut n = 0;
        for r in &doc.rows {
            if let (Some(schedule), Some(local)) = (r.schedule(), r.local_bytes) {
                self.note_device(&r.point(), &schedule, local);
                n += 1;
            }
        }
        n
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
    pub fn usable(&mut self, point: &Point, schedule: &RawSchedule) -> bool {
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
        let code = (*point, schedule.without_balance());
        if let Some(&ok) = self.known.get(&code) {
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
        self.known.insert(code, ok);
        ok
    }
}

/// A [`SpillCheck`] that also knows what the GPU reported in `files`
/// (`kda-split bench --json` output).
pub fn device_spills(files: &[PathBuf]) -> Result<SpillCheck, AutotuneError> {
    let mut spill = SpillCheck::new();
    for file in files {
        let n = spill.note_bench(&read_bench(file)?);
        println!(
            "{}: the GPU's local memory for {n} measured schedules",
            file.display()
        );
    }
    Ok(spill)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        assert_eq!(spill.note_bench(&serde_json::from_value(doc).unwrap()), 2);
        let at = Point {
            heads: 12,
            batch: 64,
            tokens: 4,
        };
        assert!(!spill.usable(&at, &[0, 32, 0, 4, 0].into()));
        // The same schedule elsewhere is not known to spill on the GPU.
        let other = Point { batch: 8, ..at };
        spill.checked = false; // no ptxas in this test: only the GPU's report counts
        assert!(spill.usable(&other, &[0, 32, 0, 4, 0].into()));
        assert!(spill.usable(&at, &[0, 16, 0, 4, 0].into()));
        assert!(serde_json::from_value::<BenchFile>(json!({})).is_err());
    }

    /// Balance twins build the same code (`tests/ptxas_matrix.rs`,
    /// `balance_is_the_launch_policy_and_leaves_the_code_alone`), so one
    /// ptxas verdict serves both.
    #[test]
    fn balance_twins_share_one_ptxas_verdict() {
        let at = Point::new(12, 64, 1);
        let (off, on): (RawSchedule, RawSchedule) =
            ([0, 16, 0, 4, 0].into(), [0, 16, 0, 4, 0, 0, 1].into());
        let mut spill = SpillCheck::new();
        // As if ptxas had found the twin without balance spilling: the
        // other is not assembled again (without ptxas it would be usable,
        // with it it does not spill).
        spill.checked = true;
        spill.known.insert((at, off), false);
        assert!(!spill.usable(&at, &on));
        assert!(!spill.usable(&at, &off));
        spill.known.clear();
        spill.known.insert((at, off), true);
        assert!(spill.usable(&at, &on));
        assert_eq!(spill.known.len(), 1);
    }
}

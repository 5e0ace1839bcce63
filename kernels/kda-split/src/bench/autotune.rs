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
//! `--merge FILE` (no GPU) puts the points of a partial table in place of
//! the same points of the table at `--out` ([`merge`](mod@merge)).

//!
//! The modules: [`options`] (the flags), [`space`](mod@space) (what is searched),
//! [`search`] (the measurements on the GPU), [`select`] (choosing a point's
//! schedule, and `--reselect`), [`spill`] (which schedules spill), [`table`]
//! (the table's metadata, `--from-bench`, the markdown summary, writing).

pub mod error;
pub mod merge;
pub mod options;
pub mod search;
pub mod select;
pub mod space;
pub mod spill;
pub mod table;

pub use error::AutotuneError;
pub use options::{DEFAULT_OUT, Options};
pub use search::run;
pub use select::{EXCLUDED_NOTE, reselect, seed_schedule, tuned_point};
pub use space::{PRUNE_RULES, Space, pruned_by, space};
pub use spill::{SpillCheck, spills};
pub use table::{date_of, markdown, metadata, table_from_bench};

use std::path::Path;

use serde_json::json;

use super::open_gpu;
use crate::tuned::{RawSchedule, TunedTable};

/// What `autotune --help` adds after the flags.
pub const AFTER_HELP: &str = "\
Default points (those of the checked-in table): heads 6, 12 and 32 at batch 1,
8, 32, 64, 128, 512 (T = 1); heads 12 and 32 at batch 8, 64, 128 with T = 2, 4
and 8; heads 6 at batch 8 and 64 with T = 4. With --heads, --batch or --tokens: their
product, a list not given being heads 6, 12, 32, batch 1, 8, 32, 64, 128, 512
or tokens 1. --schedule adds schedules to the search, --budget-ms and --check
apply to the finalists. At T > 1 every schedule is also tried with
bulk_store (schedule entry 6) unless --no-bulk-store; with a cluster above 1,
with balance (entry 7, the load-balancing cluster scheduling policy) unless
--no-balance. --quick: lanes 8 and 16 only, no evict, no bulk_store, no
balance, 2 finalists, shorter timing, a 2.5-minute limit.";

/// `[3,16,0,2,0]`.
fn text(s: &RawSchedule) -> String {
    format!("{s:?}").replace(' ', "")
}

/// `kda-split autotune`; `command` is its command line as typed (recorded in
/// the table).
pub fn main(opts: &Options, command: &str) -> Result<(), AutotuneError> {
    if let Some(file) = &opts.from_bench {
        let doc = table::read_bench(file)?;
        let mut spill = spill::device_spills(&opts.device_spills)?;
        println!("{}", spill.describe());
        let mut table =
            table_from_bench(&doc, file, opts.min_gain, &mut |p, s| spill.usable(p, s))?;
        table.meta.insert("spills".into(), json!(spill.describe()));
        return finish(&opts.out, &table);
    }
    if let Some(file) = &opts.merge {
        let base = table::read_table(&opts.out)?;
        let part = table::read_table(file)?;
        let merged = merge::merge(&base, &opts.out, &part, file)?;
        finish(&opts.out, &merged)?;
        println!(
            "{} point(s) of {} merged into {}",
            part.points.len(),
            file.display(),
            opts.out.display()
        );
        return Ok(());
    }
    if let Some(file) = &opts.reselect {
        let old = table::read_table(file)?;
        let mut spill = spill::device_spills(&opts.device_spills)?;
        println!("{}", spill.describe());
        let mut table = reselect(&old, opts.min_gain, &mut |p, s| spill.usable(p, s));
        let files: Vec<String> = opts
            .device_spills
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        table.meta.insert(
            "reselected".into(),
            json!(format!(
                "by `{command}` on {}: every point chosen again from its measured schedules \
                 (no new timing), min gain {}; {}{}",
                date_of(table::now_unix()),
                opts.min_gain,
                spill.describe(),
                if files.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; so are schedules the GPU ran with local memory in {}",
                        files.join(", ")
                    )
                }
            )),
        );
        table.meta.insert("spills".into(), json!(spill.describe()));
        return finish(&opts.out, &table);
    }
    let dev = open_gpu("autotune")?;
    table::check_output(&opts.out)?;
    let table = run(&dev, opts, command, |t| table::write(&opts.out, t))?;
    println!();
    finish_summary(&opts.out, &table);
    Ok(())
}

/// Write `table` to `out` and summarize it.
fn finish(out: &Path, table: &TunedTable) -> Result<(), AutotuneError> {
    table::write(out, table)?;
    finish_summary(out, table);
    Ok(())
}

fn finish_summary(out: &Path, table: &TunedTable) {
    println!("{}", markdown(table));
    println!("table written to {}", out.display());
}

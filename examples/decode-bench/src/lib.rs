//! `decode-bench`: GDN and Mamba-2 decode steps on the GPU, swept over their
//! schedules, against the copy ceiling measured in the same run (issue 15:
//! ≥ 85 % of the copy ceiling on the state traffic at batch 128).
//!
//! * **Copy ceiling**: the driver's device-to-device copy of 1 GiB
//!   (`cuMemcpyDtoDAsync`), bytes read + written over the median time.
//! * **Points**: GDN (4 k-heads, 8 v-heads: Qwen3-Next's TP slice) at T = 1
//!   and T = 4, Mamba-2 (24 heads of 64 × 128, one group: a TP slice of
//!   Mamba-2 2.7B). At batch 128 every schedule of the kernel's sweep list
//!   (`gdn_decode::kernel::sweep_schedules`,
//!   `mamba2_decode::kernel::sweep_schedules`), the kernel's default at that
//!   batch first ([`Family::default_schedule`]); at batch 1, 64 and 512 the
//!   default there and the run's best at batch 128 ([`best_row`]), so a
//!   change of default can be judged at every batch.
//! * **Workload** ([`workload`]): the state lives in slot groups totalling
//!   ≥ 4 × L2 (read from the device), at least three; a graph holds
//!   `max(groups, 32)` PDL-chained steps, step `s` on group `s mod groups`,
//!   and is replayed for about 100 ms after 3 warm-up replays; µs/step is
//!   the median replay over its steps. State traffic per step is one page
//!   read and `T` written per request and head (every request active).
//! * **Same-bytes copy** (unless `--no-same-bytes-copy`), per point after
//!   its rows ([`kda_host::bench::same_copy`], KdaSplit's bench's): a copy
//!   that moves exactly the point's state traffic (reads one slot of state
//!   per request, writes `T` copies: [`Family::same_bytes`]) with the
//!   kernels' PDL structure (trigger at entry, loads before the wait, stores
//!   after), in a graph of the point's steps over its slot-group rotation;
//!   five copy-step variants, each verified and timed, the fastest verified
//!   one the reference. Rows give their state traffic as "of same-bytes
//!   copy" beside "of copy" (the bytes are the same): the part of the gap to
//!   the ceiling that any kernel moving that much per chained step pays.
//! * **Checks**: before timing, each schedule runs once on a generated
//!   launch of 8 requests (padding and write holes included) at the same
//!   shape, compared with the float64 reference (`checked` in the row);
//!   after timing, the bench's own output must be fully written and finite
//!   (it is poisoned first).
//!
//! The sweep stops starting new rows and copies after `deadline` (rows say
//! so).

pub mod family;
pub mod gpu;
pub mod workload;

use std::ffi::OsString;
use std::time::Instant;

use kda_host::bench::same_copy::{SameBytes, SameCopies, SameCopyRow, markdown_table};
use kda_runtime::{CudaDevice, Device};

use family::{Family, Gdn, Mamba2};
use gpu::{Budget, CopyCeiling, copy_ceiling, measure, tbps};
use workload::{Plan, Workload, plan_for_l2, rotation};

/// Requests of the generated launch each schedule is checked on.
pub const CHECK_REQUESTS: usize = 8;
/// Batches at which only the default schedule and the best at
/// [`SWEEP_BATCH`] are measured.
pub const DEFAULT_ONLY_BATCHES: [usize; 3] = [1, 64, 512];
/// The batch every schedule is measured at.
pub const SWEEP_BATCH: usize = 128;
/// Bytes of the copy-ceiling buffer.
pub const COPY_BYTES: usize = 1 << 30;

/// Seconds after which no row or same-bytes copy starts, unless
/// `KDA_SWEEP_SECONDS` says otherwise. On the H200 the rows take 18 to 38 s
/// and the same-bytes copies about 30 s more (eleven distinct sizes, five
/// variants each, every one verified on up to 1.3 GB downloaded): 90 s
/// leaves room for both.
pub const DEFAULT_SWEEP_SECONDS: u64 = 90;

/// `decode-bench --help`.
pub const USAGE: &str = "\
usage: decode-bench [--no-same-bytes-copy] [--trace]

GDN and Mamba-2 decode steps swept over their schedules on the GPU, state
rotated over >= 4x L2, against the driver copy of 1 GiB (\"of copy\") and, per
point, a PDL-chained copy of exactly the point's state bytes over the same
rotation (\"of same-bytes copy\").

  --no-same-bytes-copy  skip the same-bytes copies (the column reads —)
  --trace               after each row (and copy), run its steps again with CTA
                        timeline probes and print where its CTAs' time goes
  -h, --help            print this text

KDA_SWEEP_SECONDS (default 90): no row or copy starts after that many seconds.
Exit status: 0 when every row was measured, checked and fully written and every
copy verified; 1 when not; 2 for a bad argument; 4 without a GPU.";

/// What the command line asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Time each point's same-bytes copy (`--no-same-bytes-copy`: not).
    pub same_bytes_copy: bool,
    /// Trace each measured row (and same-bytes copy) with CTA timeline
    /// probes (`--trace`; `kda_host::bench::trace`).
    pub trace: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            same_bytes_copy: true,
            trace: false,
        }
    }
}

/// A parsed command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Run the sweep.
    Run(Options),
    /// Print [`USAGE`].
    Help,
}

impl Options {
    /// Parse the arguments (without the program name); `Err` names the
    /// first one not understood (a non-UTF-8 one too), with [`USAGE`].
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
        let mut opts = Options::default();
        for arg in args {
            match arg.to_str() {
                Some("--no-same-bytes-copy") => opts.same_bytes_copy = false,
                Some("--trace") => opts.trace = true,
                Some("-h" | "--help") => return Ok(Command::Help),
                _ => {
                    return Err(format!(
                        "decode-bench: unknown argument {}\n\n{USAGE}",
                        arg.to_string_lossy()
                    ));
                }
            }
        }
        Ok(Command::Run(opts))
    }
}

/// How a schedule fared against the reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Checked {
    /// Matched the float64 reference on the GPU.
    Passed,
    /// Differed (the report) or did not run (why).
    Failed(String),
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Row {
    pub kernel: String,
    pub batch: usize,
    pub schedule: String,
    pub groups: usize,
    pub steps: usize,
    pub state_bytes: usize,
    /// The same-bytes copy of `state_bytes` (`None` where the sizes make
    /// none).
    pub same: Option<SameBytes>,
    pub outcome: Outcome,
    pub checked: Option<Checked>,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    Measured(gpu::Measure),
    Failed(String),
    Skipped(String),
}

impl Row {
    /// State TB/s of a measured row.
    pub fn tbps(&self) -> Option<f64> {
        match &self.outcome {
            Outcome::Measured(m) => Some(tbps(self.state_bytes, m.timing.median_us)),
            _ => None,
        }
    }

    /// Whether the row shows a fault: a failed measurement or check, or
    /// output left unwritten or not finite.
    pub fn is_bad(&self) -> bool {
        matches!(self.outcome, Outcome::Failed(_))
            || matches!(&self.outcome, Outcome::Measured(m) if m.bad_outputs > 0)
            || matches!(self.checked, Some(Checked::Failed(_)))
    }

    /// The fastest verified same-bytes copy of the row's bytes in `copies`.
    pub fn same_copy<'a>(&self, copies: &'a [SameCopyRow]) -> Option<&'a SameCopyRow> {
        self.same?.fastest(copies)
    }

    /// The row's state TB/s over its same-bytes copy's in `copies` (the
    /// copy's µs/step over the row's: the bytes are the same), if both were
    /// measured.
    pub fn of_same_copy(&self, copies: &[SameCopyRow]) -> Option<f64> {
        Some(self.tbps()? / self.same_copy(copies)?.tbps)
    }

    /// The markdown table line (see [`HEADER`]); `ceiling` is the copy
    /// ceiling's TB/s, `copies` the same-bytes copies measured so far.
    pub fn line(&self, ceiling: Option<f64>, copies: &[SameCopyRow]) -> String {
        let checked = match &self.checked {
            Some(Checked::Passed) => "checked".to_string(),
            Some(Checked::Failed(_)) => "**REFERENCE MISMATCH**".to_string(),
            None => "not checked".to_string(),
        };
        match &self.outcome {
            Outcome::Measured(m) => {
                let bw = self.tbps().expect("measured");
                let pct = ceiling.map_or("—".into(), |c| format!("{:.1} %", bw / c * 100.0));
                let same = self
                    .of_same_copy(copies)
                    .map_or("—".into(), |f| format!("{:.1} %", f * 100.0));
                let bad = if m.bad_outputs > 0 {
                    format!(", **{} BAD OUTPUTS**", m.bad_outputs)
                } else {
                    String::new()
                };
                format!(
                    "| {} | {} | {} | {:.2} ({:.2}–{:.2}) | {:.3} | {} | {} | {} / {} B / {} B | {}{} |",
                    self.kernel,
                    self.batch,
                    self.schedule,
                    m.timing.median_us,
                    m.timing.p10_us,
                    m.timing.p90_us,
                    bw,
                    pct,
                    same,
                    m.registers,
                    m.smem_bytes,
                    m.local_bytes,
                    checked,
                    bad
                )
            }
            Outcome::Failed(why) => format!(
                "| {} | {} | {} | **FAILED**: {} | | | | | {} |",
                self.kernel,
                self.batch,
                self.schedule,
                why.replace('\n', " "),
                checked
            ),
            Outcome::Skipped(why) => format!(
                "| {} | {} | {} | skipped: {} | | | | | {} |",
                self.kernel, self.batch, self.schedule, why, checked
            ),
        }
    }
}

/// The table header of [`Row::line`].
pub const HEADER: &str = "| kernel | batch | schedule | µs/step (p10–p90) | state TB/s | of copy | of same-bytes copy | regs / smem / local | checked |\n|---|---:|---|---:|---:|---:|---:|---|---|";

/// Everything one run measured.
pub struct Results {
    pub device: String,
    pub l2_bytes: usize,
    pub copy: Option<CopyCeiling>,
    /// Every same-bytes copy measurement (each variant of each distinct
    /// point's bytes); empty with `--no-same-bytes-copy`.
    pub same_copy: Vec<SameCopyRow>,
    pub rows: Vec<Row>,
    pub seconds: f64,
}

impl Results {
    /// The copy ceiling in TB/s (when it was measured and verified).
    pub fn ceiling(&self) -> Option<f64> {
        self.copy.as_ref().filter(|c| c.verified).map(|c| c.tbps)
    }

    /// Any faulty row, or an unverified copy (the ceiling's or a
    /// same-bytes copy's variant: a wrong copy is a fault of the compiler
    /// or the device, like a wrong row).
    pub fn failed(&self) -> bool {
        self.rows.iter().any(Row::is_bad)
            || self.copy.as_ref().is_some_and(|c| !c.verified)
            || self.same_copy.iter().any(|c| !c.verified)
    }

    /// The report: the ceiling, every row, then the best schedule per
    /// kernel at the sweep batch against the 85 % target.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "decode-bench on {} (L2 {} MiB), {:.1} s\n\n",
            self.device,
            self.l2_bytes >> 20,
            self.seconds
        );
        match &self.copy {
            Some(c) => {
                out += &format!(
                    "copy ceiling: cuMemcpyDtoDAsync of {} MiB: {:.1} µs (p10 {:.1}, p90 {:.1}, {} copies), {:.3} TB/s read + written{}\n\n",
                    (c.bytes_moved / 2) >> 20,
                    c.timing.median_us,
                    c.timing.p10_us,
                    c.timing.p90_us,
                    c.timing.replays,
                    c.tbps,
                    if c.verified {
                        ""
                    } else {
                        " (**COPY WRONG**: no ceiling)"
                    }
                )
            }
            None => out += "copy ceiling: not measured\n\n",
        }
        if !self.same_copy.is_empty() {
            out += "same-bytes copy: per point, a copy of exactly its state traffic (one slot of state read per request, `T` copies written), its loads before the PDL wait and its stores after, in a graph of the point's steps over its slot-group rotation; the fastest verified copy-step variant (`% of copy`: of the ceiling above):\n\n";
            out += &markdown_table(&self.same_copy, self.ceiling(), "points", |read, copies| {
                let mut points: Vec<String> = Vec::new();
                for r in &self.rows {
                    let point = format!("{} B{}", r.kernel, r.batch);
                    if r.same
                        .is_some_and(|s| s.read_bytes() == read && s.copies() == copies)
                        && !points.contains(&point)
                    {
                        points.push(point);
                    }
                }
                points.join(", ")
            });
            out += "\n";
        }
        out += HEADER;
        out += "\n";
        for r in &self.rows {
            out += &r.line(self.ceiling(), &self.same_copy);
            out += "\n";
        }
        out += &format!(
            "\nbest checked schedule per kernel at batch {SWEEP_BATCH} (target: >= 85 % of copy):\n"
        );
        // Each kernel once, in the order of its first row (the batch-128
        // sweep comes first; the other batches' rows repeat the kernels).
        let mut kernels: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !kernels.contains(&r.kernel.as_str()) {
                kernels.push(&r.kernel);
            }
        }
        for k in kernels {
            let best = best_row(&self.rows, k);
            let default = self
                .rows
                .iter()
                .find(|r| r.kernel == k && r.batch == SWEEP_BATCH)
                .and_then(Row::tbps);
            if let Some(best) = best.filter(|r| r.tbps().is_some()) {
                let bw = best.tbps().expect("measured");
                let pct = |x: f64| {
                    self.ceiling()
                        .map_or("—".into(), |c| format!("{:.1} %", x / c * 100.0))
                };
                out += &format!(
                    "  {k}: {} at {:.3} TB/s = {} of copy (default: {}){}{}\n",
                    best.schedule,
                    bw,
                    pct(bw),
                    default.map_or("—".into(), pct),
                    match self.ceiling() {
                        Some(c) if bw / c >= 0.85 => ", target met",
                        Some(_) => ", target not met",
                        None => "",
                    },
                    best.of_same_copy(&self.same_copy)
                        .map_or(String::new(), |f| format!(
                            "; {:.1} % of its same-bytes copy",
                            f * 100.0
                        ))
                );
            } else {
                out += &format!("  {k}: nothing measured and checked\n");
            }
        }
        out
    }
}

/// Run the whole sweep on `dev`; rows (and same-bytes copies) not started
/// by `deadline` are skipped.
pub fn run(dev: &CudaDevice, deadline: Instant, budget: &Budget, opts: &Options) -> Results {
    let start = Instant::now();
    let l2 = dev.l2_cache_bytes().unwrap_or(0);
    let device = dev.describe();
    println!("decode-bench on {device} (L2 {} MiB)", l2 >> 20);
    let copy = match copy_ceiling(dev, COPY_BYTES, budget) {
        Ok(c) => {
            println!(
                "copy ceiling: {:.1} µs, {:.3} TB/s{}",
                c.timing.median_us,
                c.tbps,
                if c.verified { "" } else { " (WRONG RESULT)" }
            );
            Some(c)
        }
        Err(e) => {
            println!("copy ceiling failed: {e}");
            None
        }
    };
    // At least 64 MiB of rotation even where the driver reports no L2.
    let mut sweep = Sweep {
        dev,
        plan: plan_for_l2(l2.max(16 << 20)),
        budget,
        deadline,
        ceiling: copy.as_ref().filter(|c| c.verified).map(|c| c.tbps),
        same_copies: opts.same_bytes_copy.then(|| SameCopies::new(opts.trace)),
        trace: opts.trace,
        rows: Vec::new(),
    };
    let gdn = [Gdn::new(4, 8, 1), Gdn::new(4, 8, 4)];
    let mamba = Mamba2::new(24, 1);
    // Batch 128 first (every schedule, the default first), then at the
    // other batches each kernel's default there and this run's best at batch
    // 128: what a change of default would gain or lose there.
    for g in &gdn {
        sweep.point(g, SWEEP_BATCH, &g.sweep_at(SWEEP_BATCH));
    }
    sweep.point(&mamba, SWEEP_BATCH, &mamba.sweep_at(SWEEP_BATCH));
    for batch in DEFAULT_ONLY_BATCHES {
        for g in &gdn {
            let pair = sweep.default_and_best(g, batch);
            sweep.point(g, batch, &pair);
        }
        let pair = sweep.default_and_best(&mamba, batch);
        sweep.point(&mamba, batch, &pair);
    }
    Results {
        device,
        l2_bytes: l2,
        copy,
        same_copy: sweep.same_copies.map(|c| c.rows).unwrap_or_default(),
        rows: sweep.rows,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The fastest row of `kernel` at [`SWEEP_BATCH`] that was measured, wrote
/// every output and passed the reference check.
pub fn best_row<'a>(rows: &'a [Row], kernel: &str) -> Option<&'a Row> {
    rows.iter()
        .filter(|r| {
            r.kernel == kernel
                && r.batch == SWEEP_BATCH
                && !r.is_bad()
                && r.checked == Some(Checked::Passed)
                && r.tbps().is_some()
        })
        .max_by(|a, b| a.tbps().unwrap_or(0.0).total_cmp(&b.tbps().unwrap_or(0.0)))
}

/// What the points of one run share: the device, the rotation, the timing,
/// the deadline, the copy ceiling (TB/s, when verified), the same-bytes
/// copies (`None`: not measured) and the rows so far.
pub struct Sweep<'a> {
    pub dev: &'a CudaDevice,
    pub plan: Plan,
    pub budget: &'a Budget,
    /// Rows not started by then are skipped.
    pub deadline: Instant,
    pub ceiling: Option<f64>,
    pub same_copies: Option<SameCopies>,
    /// Trace each measured row (`trace` of [`gpu::measure`]).
    pub trace: bool,
    pub rows: Vec<Row>,
}

impl Sweep<'_> {
    /// `family`'s default at `batch`, then the best schedule of its sweep
    /// list measured at [`SWEEP_BATCH`] so far (by [`best_row`]) when that
    /// is another one.
    pub fn default_and_best<F: Family>(&self, family: &F, batch: usize) -> Vec<F::Schedule> {
        let default = family.default_schedule(batch);
        let label = family.label();
        let best = best_row(&self.rows, &label).and_then(|r| {
            family
                .sweep()
                .into_iter()
                .find(|s| family.schedule_label(s) == r.schedule)
        });
        match best {
            Some(b) if b != default => vec![default, b],
            _ => vec![default],
        }
    }

    /// Measure `schedules` of `family` at `batch` (one workload), each
    /// checked against the reference first; one row each, printed as it is
    /// done. Then, once the workload is freed (the copy's groups take as
    /// much memory again), the point's same-bytes copy.
    pub fn point<F: Family>(&mut self, family: &F, batch: usize, schedules: &[F::Schedule]) {
        let shape = rotation(&self.plan, family, batch);
        self.rows_of(family, batch, schedules, shape);
        self.same_copy(family, batch, shape);
    }

    /// The same-bytes copy of `family` at `batch` over the point's
    /// `(groups, steps)`, unless it is not measured, a point of the same
    /// bytes measured it already, or the deadline has passed.
    fn same_copy<F: Family>(&mut self, family: &F, batch: usize, shape: (usize, usize)) {
        let Some(copies) = &mut self.same_copies else {
            return;
        };
        let label = format!("{} B{batch}", family.label());
        match family.same_bytes(batch) {
            Err(e) => println!("  {label}: no same-bytes copy: {e}"),
            Ok(same) if copies.has(&same) => {}
            Ok(_) if Instant::now() >= self.deadline => {
                println!("  {label}: same-bytes copy skipped: time limit")
            }
            Ok(same) => copies.measure(
                self.dev,
                &label,
                same,
                shape,
                self.plan.seed as u32,
                self.budget,
                self.ceiling,
            ),
        }
    }

    /// [`Sweep::point`]'s rows, over `(groups, steps)`.
    fn rows_of<F: Family>(
        &mut self,
        family: &F,
        batch: usize,
        schedules: &[F::Schedule],
        (groups, steps): (usize, usize),
    ) {
        let (dev, plan, budget, deadline) = (self.dev, &self.plan, self.budget, self.deadline);
        let copies = self.same_copies.as_ref().map_or(&[][..], |c| &c.rows[..]);
        let rows = &mut self.rows;
        let group_bytes = batch * family.tokens() * family.slot_bytes();
        let row = |schedule: &F::Schedule, outcome, checked| Row {
            kernel: family.label(),
            batch,
            schedule: family.schedule_label(schedule),
            groups,
            steps,
            state_bytes: family.state_bytes(batch),
            same: family.same_bytes(batch).ok(),
            outcome,
            checked,
        };
        if Instant::now() >= deadline {
            for s in schedules {
                rows.push(row(s, Outcome::Skipped("time limit".into()), None));
            }
            return;
        }
        println!(
            "{} B{batch}: {groups} slot groups of {} MiB, {steps} steps per graph",
            family.label(),
            group_bytes >> 20
        );
        let mut workload = match Workload::new(dev, family, batch, plan) {
            Ok(w) => w,
            Err(e) => {
                for s in schedules {
                    rows.push(row(s, Outcome::Failed(format!("setup: {e}")), None));
                }
                return;
            }
        };
        for (n, s) in schedules.iter().enumerate() {
            let r = if Instant::now() >= deadline {
                row(s, Outcome::Skipped("time limit".into()), None)
            } else {
                let checked = match family.check(dev, s, CHECK_REQUESTS, 300 + n as u64) {
                    Ok(()) => Checked::Passed,
                    Err(e) => Checked::Failed(e),
                };
                let outcome = match measure(dev, family, &mut workload, s, budget, self.trace) {
                    Ok(m) => Outcome::Measured(m),
                    Err(e) => Outcome::Failed(e),
                };
                row(s, outcome, Some(checked))
            };
            println!("{}", r.line(self.ceiling, copies));
            if let Some(Checked::Failed(report)) = &r.checked {
                println!("  reference mismatch of {}:\n{report}", r.schedule);
            }
            rows.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu::{Measure, Timing};

    fn timing(us: f64, units: usize) -> Timing {
        Timing {
            median_us: us,
            p10_us: us,
            p90_us: us,
            replays: 10,
            units,
        }
    }

    /// GDN HK4 HV8 T1's bytes at batch 128 (128 slots of 512 KiB read, one
    /// copy written: 128 MiB a step).
    fn same() -> SameBytes {
        Gdn::new(4, 8, 1).same_bytes(SWEEP_BATCH).unwrap()
    }

    fn row(schedule: &str, us: Option<f64>, checked: Option<Checked>, bad: usize) -> Row {
        Row {
            kernel: "gdn HK4 HV8 T1".into(),
            batch: SWEEP_BATCH,
            schedule: schedule.into(),
            groups: 4,
            steps: 32,
            state_bytes: 128 << 20,
            same: Some(same()),
            outcome: match us {
                Some(us) => Outcome::Measured(Measure {
                    timing: timing(us, 32),
                    registers: 127,
                    smem_bytes: 2080,
                    local_bytes: 0,
                    bad_outputs: bad,
                }),
                None => Outcome::Failed("boom".into()),
            },
            checked,
        }
    }

    /// A same-bytes copy variant of [`same`]'s bytes taking `us` a step.
    fn copy_row(name: &str, us: f64, verified: bool) -> SameCopyRow {
        SameCopyRow {
            bytes_per_step: same().bytes_per_step(),
            copies: 1,
            name: name.into(),
            read_bytes: same().read_bytes(),
            slot_groups: 4,
            steps_per_graph: 32,
            tbps: tbps(same().bytes_per_step(), us),
            timing: timing(us, 32),
            verified,
            trace: None,
        }
    }

    #[test]
    fn report_picks_the_best_checked_row_against_the_ceiling() {
        let results = Results {
            device: "test".into(),
            l2_bytes: 50 << 20,
            copy: Some(CopyCeiling {
                bytes_moved: 2 << 30,
                timing: timing(500.0, 1),
                tbps: 4.0,
                verified: true,
            }),
            // The faster variant copied wrongly and does not count; the
            // other takes 36 µs a step.
            same_copy: vec![copy_row("fast", 30.0, false), copy_row("ok", 36.0, true)],
            rows: vec![
                row("l16", Some(40.0), Some(Checked::Passed), 0),
                // Faster but wrong, unwritten or failed: never the best.
                row("l8", Some(20.0), Some(Checked::Failed("x".into())), 0),
                row("l32", Some(20.0), Some(Checked::Passed), 3),
                row("staged", None, Some(Checked::Passed), 0),
                row("evict", Some(38.0), Some(Checked::Passed), 0),
                // No same-bytes copy of its sizes: no column.
                Row {
                    same: None,
                    ..row("late", Some(50.0), Some(Checked::Passed), 0)
                },
            ],
            seconds: 1.0,
        };
        assert!(results.failed());
        let text = results.markdown();
        // 128 MiB in 38 µs: 3.532 TB/s, 88.3 % of 4 TB/s; the copy of the
        // same bytes takes 36 µs: 94.7 % of it.
        assert!(
            text.contains(
                "gdn HK4 HV8 T1: evict at 3.532 TB/s = 88.3 % of copy (default: 83.9 %), target met; 94.7 % of its same-bytes copy"
            ),
            "{text}"
        );
        assert!(
            text.contains("| evict | 38.00 (38.00–38.00) | 3.532 | 88.3 % | 94.7 % | 127 / 2080 B / 0 B | checked |"),
            "{text}"
        );
        assert!(
            text.contains("| late | 50.00 (50.00–50.00) | 2.684 | 67.1 % | — | 127"),
            "{text}"
        );
        // The copy's table: its points, 134.2 MB in 36 µs = 3.728 TB/s,
        // 93.2 % of the ceiling.
        assert!(
            text.contains("| gdn HK4 HV8 T1 B128 | 134.2 | 1 | ok | 32 | 4 | 36.00 | 36.00–36.00 | 3.728 | 93.2 |"),
            "{text}"
        );
        assert!(text.contains("**REFERENCE MISMATCH**") && text.contains("**3 BAD OUTPUTS**"));
        assert!(
            text.contains("| gdn HK4 HV8 T1 | 128 | staged | **FAILED**: boom | | | | | checked |")
        );
        let ok = Results {
            rows: vec![row("l16", Some(40.0), Some(Checked::Passed), 0)],
            same_copy: vec![copy_row("ok", 36.0, true)],
            ..results
        };
        assert!(!ok.failed());
        // A wrong same-bytes copy alone fails the run, as a wrong ceiling
        // copy does.
        let wrong = Results {
            same_copy: vec![copy_row("fast", 30.0, false)],
            ..ok
        };
        assert!(wrong.failed());
        assert!(
            wrong
                .markdown()
                .contains("| 40.00 (40.00–40.00) | 3.355 | 83.9 % | — |")
        );
    }

    #[test]
    fn the_summary_names_each_kernel_once() {
        // The batch-128 sweeps of two kernels, then each kernel's default at
        // another batch: the kernels alternate, the summary must not.
        let other = |kernel: &str, batch| Row {
            kernel: kernel.into(),
            batch,
            ..row("l16", Some(40.0), Some(Checked::Passed), 0)
        };
        let results = Results {
            device: "test".into(),
            l2_bytes: 50 << 20,
            copy: None,
            same_copy: Vec::new(),
            rows: vec![
                other("a", SWEEP_BATCH),
                other("b", SWEEP_BATCH),
                other("a", 1),
                other("b", 1),
                other("a", 64),
                other("b", 64),
            ],
            seconds: 1.0,
        };
        let text = results.markdown();
        let summary = &text[text.find("best checked").expect("a summary")..];
        assert_eq!(summary.matches("\n  a:").count(), 1, "{summary}");
        assert_eq!(summary.matches("\n  b:").count(), 1, "{summary}");
        // Nothing measured: no same-bytes table, the column reads "—".
        assert!(!text.contains("same-bytes copy:"), "{text}");
        assert!(
            text.contains("| 3.355 | — | — | 127 / 2080 B / 0 B |"),
            "{text}"
        );
    }

    /// Sweep rows are told apart by their schedule's label (`best_row` is
    /// found again in the sweep list by it), so every label in a family's
    /// sweep is distinct, the load-balancing (`bal`) variants included.
    fn assert_distinct_labels<F: Family>(family: &F) {
        let list = family.sweep_at(SWEEP_BATCH);
        let mut labels: Vec<String> = list.iter().map(|s| family.schedule_label(s)).collect();
        assert!(labels.iter().any(|l| l.ends_with(" bal")), "{labels:?}");
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), list.len(), "{}: {labels:?}", family.label());
    }

    #[test]
    fn sweep_labels_are_distinct_and_include_the_balanced_schedules() {
        assert_distinct_labels(&Gdn::new(4, 8, 1));
        assert_distinct_labels(&Gdn::new(4, 8, 4));
        assert_distinct_labels(&Mamba2::new(24, 1));
    }

    #[test]
    fn mamba2_default_depends_on_the_batch() {
        // `c8 early` below the tuned batch, `c4 early bal` from it on (the
        // kernel's `Schedule::for_batch`): the sweep at batch 128 leads with
        // the latter and the batch-1 point measures the former.
        let m = Mamba2::new(24, 1);
        let label = |batch| m.schedule_label(&m.default_schedule(batch));
        assert_eq!(label(1), "c8 early");
        assert_eq!(label(63), "c8 early");
        for batch in [64, SWEEP_BATCH, 512] {
            assert_eq!(label(batch), "c4 early bal");
        }
        let list = m.sweep_at(SWEEP_BATCH);
        assert_eq!(list[0], m.default_schedule(SWEEP_BATCH));
        assert!(list.contains(&m.default_schedule(1)));
    }

    #[test]
    fn same_bytes_are_the_state_traffic_the_rows_count() {
        // The bytes behind "of copy" and "of same-bytes copy" are the same,
        // at every batch the sweep measures, for both families.
        let gdn = [Gdn::new(4, 8, 1), Gdn::new(4, 8, 4)];
        let mamba = Mamba2::new(24, 1);
        for batch in [SWEEP_BATCH].into_iter().chain(DEFAULT_ONLY_BATCHES) {
            for g in &gdn {
                let same = g.same_bytes(batch).unwrap();
                assert_eq!(same.bytes_per_step(), g.state_bytes(batch));
                // HV·B pages of 128 × 128 f32 read, T copies written.
                assert_eq!(same.read_bytes(), 8 * batch * 128 * 128 * 4);
                assert_eq!(same.copies() as usize, g.tokens());
            }
            let same = mamba.same_bytes(batch).unwrap();
            assert_eq!(same.bytes_per_step(), mamba.state_bytes(batch));
            // H·B pages of P × N f32 read, one written.
            assert_eq!(same.read_bytes(), 24 * batch * 64 * 128 * 4);
            assert_eq!(same.copies(), 1);
            // Every copy-step variant covers it in whole tiles.
            for (block, unroll) in kda_host::bench::kernels::COPY_VARIANTS {
                assert!(same.launch(block, unroll).is_ok());
                assert!(
                    gdn[1]
                        .same_bytes(batch)
                        .unwrap()
                        .launch(block, unroll)
                        .is_ok()
                );
            }
        }
        assert!(gdn[0].same_bytes(0).is_err());
    }

    #[test]
    fn the_command_line_takes_its_flags_and_refuses_the_rest() {
        let parse = |args: &[&str]| Options::parse(args.iter().map(OsString::from));
        assert_eq!(parse(&[]), Ok(Command::Run(Options::default())));
        assert!(Options::default().same_bytes_copy);
        assert_eq!(
            parse(&["--no-same-bytes-copy"]),
            Ok(Command::Run(Options {
                same_bytes_copy: false,
                trace: false,
            }))
        );
        assert_eq!(
            parse(&["--trace", "--no-same-bytes-copy"]),
            Ok(Command::Run(Options {
                same_bytes_copy: false,
                trace: true,
            }))
        );
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
        assert_eq!(parse(&["-h", "--bogus"]), Ok(Command::Help));
        assert!(USAGE.contains(&format!(
            "KDA_SWEEP_SECONDS (default {DEFAULT_SWEEP_SECONDS})"
        )));
        let e = parse(&["--no-same-bytes-copy", "--quick"]).unwrap_err();
        assert!(
            e.contains("unknown argument --quick") && e.contains("usage:"),
            "{e}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let e = Options::parse([OsString::from_vec(vec![0xff])]).unwrap_err();
            assert!(e.contains("unknown argument"), "{e}");
        }
    }
}

//! The same-bytes copy: what a plain copy reaches when it moves exactly a
//! point's state traffic, chained the way the decode kernels' steps are.
//! KdaSplit's `bench` and `decode-bench` (GDN, Mamba-2) both time it, per
//! point, beside their kernels ("% of same-bytes copy").
//!
//! A copy ceiling is one launch over 1 GiB; a decode step at batch 128
//! moves tens to hundreds of MB inside a graph of PDL-chained launches, so
//! the fixed cost of a step (the launch / PDL boundary, the first wave's
//! ramp, the tail) weighs far more. This copy pays the same: per point it
//! reads `R` bytes (one state page per request and head) and writes `T`
//! copies of them (`W = T·R`) with [`copy_step_kernel`] (the ceiling's
//! tiles; PDL trigger at the entry, loads before the wait, stores after),
//! in a graph of as many steps as the point's graph, step `s` on group
//! `s mod groups` of source and destination regions, the groups and steps
//! being those of the point's workload (each bench passes its own to
//! [`CopyRotation::new`]). `R + W` is the point's state traffic, so a
//! kernel's "% of same-bytes copy" is the copy's µs/step over the kernel's.
//!
//! Generic over the device, so the simulator runs the same rotation and
//! check ([`check_rotation`]); the timing ([`same_bytes_copy`],
//! [`SameCopies`]) needs the GPU.

use kda_ir::Scalar;
use kda_runtime::{CudaDevice, Device, LaunchConfig, RuntimeError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::kernels::{
    COPY_VARIANTS, FILL_MAX, copy_launch, copy_step_kernel, copy_tile, fill, fill_kernel,
};
use super::{BenchDevice, Budget, Timing, tbps, time_steps};

/// Floats one copy-step launch reads at most: its element indices are u32,
/// and the fill kernel fills one source region in one launch.
pub const MAX_READ_FLOATS: usize = FILL_MAX;

/// Why a state traffic has no same-bytes copy.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SizeError {
    /// `pages · page_bytes` does not fit `usize`.
    #[error("{pages} pages of {page_bytes} bytes read overflow usize")]
    ReadOverflow {
        /// Pages read per step.
        pages: usize,
        /// Bytes of one page.
        page_bytes: usize,
    },
    /// `R + T·R` does not fit `usize`, or `T` not the kernel's u32.
    #[error("{copies} copies of {read_bytes} bytes read: the bytes written overflow usize")]
    WriteOverflow {
        /// Bytes read per step.
        read_bytes: usize,
        /// Copies written per step.
        copies: usize,
    },
    /// A page is not a whole number of f32s (the copy moves f32s).
    #[error("a page of {page_bytes} bytes is not whole f32s")]
    NotFloats {
        /// Bytes of one page.
        page_bytes: usize,
    },
    /// Nothing to move.
    #[error("it moves no bytes (pages, page bytes and copies must be positive)")]
    Empty,
    /// More floats than one copy-step launch reads.
    #[error("{floats} floats read per step; one copy step reads at most {MAX_READ_FLOATS}")]
    TooLarge {
        /// Floats read per step.
        floats: usize,
    },
}

/// A point's state traffic as a copy: `read_bytes` read, `copies` copies
/// of them written, per step. Built by [`SameBytes::new`], which checks
/// that every size fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SameBytes {
    read_bytes: usize,
    copies: u32,
}

impl SameBytes {
    /// `pages` pages of `page_bytes` read per step (one per request and
    /// head: KdaSplit's `B·H` pages of 64 KiB, or a decode family's `B`
    /// slots of state), `copies` copies of them written (`T`). Fails when a
    /// size overflows, nothing moves, or the source is larger than one
    /// copy-step launch reads ([`MAX_READ_FLOATS`]).
    pub fn new(pages: usize, page_bytes: usize, copies: usize) -> Result<SameBytes, SizeError> {
        let read_bytes = pages
            .checked_mul(page_bytes)
            .ok_or(SizeError::ReadOverflow { pages, page_bytes })?;
        let write = SizeError::WriteOverflow { read_bytes, copies };
        let same = SameBytes {
            read_bytes,
            copies: u32::try_from(copies).map_err(|_| write.clone())?,
        };
        if read_bytes
            .checked_mul(copies)
            .and_then(|w| w.checked_add(read_bytes))
            .is_none()
        {
            return Err(write);
        }
        if read_bytes == 0 || copies == 0 {
            return Err(SizeError::Empty);
        }
        if !page_bytes.is_multiple_of(4) {
            return Err(SizeError::NotFloats { page_bytes });
        }
        if same.floats() > MAX_READ_FLOATS {
            return Err(SizeError::TooLarge {
                floats: same.floats(),
            });
        }
        Ok(same)
    }

    /// Bytes read per step (`R`).
    pub fn read_bytes(&self) -> usize {
        self.read_bytes
    }

    /// Copies written per step (`T`).
    pub fn copies(&self) -> u32 {
        self.copies
    }

    /// Floats read per step.
    pub fn floats(&self) -> usize {
        self.read_bytes / 4
    }

    /// Bytes written per step (`W = T·R`; [`SameBytes::new`] checked that
    /// `R + W` fits).
    pub fn write_bytes(&self) -> usize {
        self.read_bytes * self.copies as usize
    }

    /// Bytes read + written per step (`R + W`: the point's state traffic).
    pub fn bytes_per_step(&self) -> usize {
        self.read_bytes + self.write_bytes()
    }

    /// The launch of `copy_step_kernel(block, unroll, T)` over the read
    /// bytes, PDL on. Fails when the bytes are not whole tiles of the
    /// variant.
    pub fn launch(&self, block: u32, unroll: u32) -> Result<LaunchConfig, RuntimeError> {
        step_launch(block, unroll, self.floats())
    }

    /// The fastest verified measurement of these bytes in `rows`.
    pub fn fastest<'a>(&self, rows: &'a [SameCopyRow]) -> Option<&'a SameCopyRow> {
        fastest_verified(rows, self.read_bytes, self.copies)
    }
}

/// `copy_step_kernel(block, unroll, _)`'s launch over `floats` floats read,
/// PDL on; `floats` must be whole tiles.
pub fn step_launch(block: u32, unroll: u32, floats: usize) -> Result<LaunchConfig, RuntimeError> {
    let tile = copy_tile(block, unroll) as usize;
    if floats == 0 || !floats.is_multiple_of(tile) || floats > MAX_READ_FLOATS {
        return Err(RuntimeError::BadLaunch {
            kernel: format!("bench_copy_step_b{block}_u{unroll}"),
            msg: format!(
                "{floats} floats is not a positive multiple of the tile ({tile}) of at most {MAX_READ_FLOATS}"
            ),
        });
    }
    Ok(LaunchConfig {
        pdl: true,
        ..copy_launch(block, unroll, floats)
    })
}

/// A copy step that did not write its source into every destination
/// region (`copy`: which one; `index`: the first float that differs).
#[derive(Clone, Debug, Error, PartialEq)]
#[error("{kernel}: copy {copy}, element {index} is {got} after the step, the source holds {want}")]
pub struct CopyMismatch {
    /// The copy-step kernel's name.
    pub kernel: String,
    /// The destination region.
    pub copy: usize,
    /// The float's index in the region.
    pub index: usize,
    /// What the region holds there.
    pub got: f32,
    /// What the source holds there.
    pub want: f32,
}

/// What can go wrong running or checking the same-bytes copy.
#[derive(Debug, Error)]
pub enum CopyError {
    /// The device or the driver failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A copy was wrong.
    #[error(transparent)]
    Mismatch(#[from] CopyMismatch),
}

/// The same-bytes copy's buffers on a device: `groups` source regions of
/// `R` bytes (filled with seeded values) and as many destination regions of
/// `W` bytes; step `s` copies source `s mod groups` into destination
/// `s mod groups`.
pub struct CopyRotation<B> {
    /// The bytes each step moves.
    pub same: SameBytes,
    /// Source / destination region pairs.
    pub groups: usize,
    /// Steps per graph.
    pub steps: usize,
    seed: u32,
    srcs: Vec<B>,
    dsts: Vec<B>,
}

impl<B> CopyRotation<B> {
    /// Allocate and fill `groups` groups of `same` on `dev` for a graph of
    /// `steps` steps (`(groups, steps)`: the point's workload's, so the copy
    /// rotates over as much memory and as many steps as its kernel); `seed`
    /// varies the source values (and the destinations' poison).
    pub fn new<D: BenchDevice<Buffer = B>>(
        dev: &D,
        same: SameBytes,
        (groups, steps): (usize, usize),
        seed: u32,
    ) -> Result<Self, RuntimeError> {
        if groups == 0 {
            return Err(RuntimeError::BadLaunch {
                kernel: "bench_copy_step".into(),
                msg: "a rotation of no groups".into(),
            });
        }
        let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
        let mut srcs = Vec::with_capacity(groups);
        let mut dsts = Vec::with_capacity(groups);
        for g in 0..groups {
            let src = dev.alloc(same.read_bytes)?;
            fill(
                dev,
                &fill_f32,
                &src,
                same.floats(),
                seed ^ (g as u32).wrapping_mul(0x9e37_79b9),
                1.0,
            )?;
            srcs.push(src);
            dsts.push(dev.alloc(same.write_bytes())?);
        }
        dev.synchronize()?;
        Ok(CopyRotation {
            same,
            groups,
            steps,
            seed,
            srcs,
            dsts,
        })
    }

    /// Bytes the groups hold in all (`groups · (R + W)`).
    pub fn bytes(&self) -> usize {
        self.groups.saturating_mul(self.same.bytes_per_step())
    }

    /// Fill every destination region with seeded values unlike any
    /// source's, so a check after a launch sees what that launch wrote (not
    /// what an earlier variant left there).
    pub fn poison<D: BenchDevice<Buffer = B>>(&self, dev: &D) -> Result<(), RuntimeError> {
        let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
        let floats = self.same.write_bytes() / 4;
        for (g, dst) in self.dsts.iter().enumerate() {
            fill(
                dev,
                &fill_f32,
                dst,
                floats,
                !self.seed ^ (g as u32).wrapping_mul(0x85eb_ca6b),
                1.0,
            )?;
        }
        dev.synchronize()
    }

    /// Launch step `step` of the loaded copy-step kernel `module`.
    pub fn launch<D: Device<Buffer = B>>(
        &self,
        dev: &D,
        module: &D::Module,
        cfg: &LaunchConfig,
        step: usize,
    ) -> Result<(), RuntimeError> {
        let g = step % self.groups;
        dev.launch(module, cfg, &[&self.srcs[g], &self.dsts[g]])
    }

    /// Download group `group`'s source and destination and check that the
    /// destination holds `T` exact copies of the source.
    pub fn check_group<D: Device<Buffer = B>>(
        &self,
        dev: &D,
        kernel: &str,
        group: usize,
    ) -> Result<(), CopyError> {
        let src = dev.download(&self.srcs[group])?;
        let dst = dev.download(&self.dsts[group])?;
        Ok(compare_copies(kernel, &src, &dst)?)
    }
}

/// Whether `dst` is `src` repeated (bit for bit); else the first element
/// that differs.
pub fn compare_copies(kernel: &str, src: &[u8], dst: &[u8]) -> Result<(), CopyMismatch> {
    let f32_at = |b: &[u8], i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    let n = src.len() / 4;
    if n == 0 || !dst.len().is_multiple_of(src.len()) {
        return Err(CopyMismatch {
            kernel: kernel.into(),
            copy: 0,
            index: 0,
            got: f32::NAN,
            want: f32::NAN,
        });
    }
    for (copy, region) in dst.chunks_exact(src.len()).enumerate() {
        if region != src
            && let Some(index) = (0..n).find(|&i| src[4 * i..4 * i + 4] != region[4 * i..4 * i + 4])
        {
            return Err(CopyMismatch {
                kernel: kernel.into(),
                copy,
                index,
                got: f32_at(region, index),
                want: f32_at(src, index),
            });
        }
    }
    Ok(())
}

/// One launch of the loaded copy-step kernel `module` (`copies` copies)
/// over `floats` filled floats into a poisoned destination, compared with
/// its source: `Ok(())` when every copy is exact.
pub fn check_copy_step<D: BenchDevice>(
    dev: &D,
    module: &D::Module,
    block: u32,
    unroll: u32,
    copies: u32,
    floats: usize,
) -> Result<(), CopyError> {
    let launch = step_launch(block, unroll, floats)?;
    let write = floats
        .checked_mul(4 * copies as usize)
        .ok_or_else(|| RuntimeError::BadLaunch {
            kernel: dev.module_kernel(module).name.clone(),
            msg: format!("{copies} copies of {floats} floats overflow usize"),
        })?;
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
    let src = dev.alloc(floats * 4)?;
    let dst = dev.alloc(write)?;
    fill(dev, &fill_f32, &src, floats, 21, 1.0)?;
    fill(dev, &fill_f32, &dst, write / 4, 22, 1.0)?;
    dev.launch(module, &launch, &[&src, &dst])?;
    Ok(compare_copies(
        &dev.module_kernel(module).name,
        &dev.download(&src)?,
        &dev.download(&dst)?,
    )?)
}

/// The same-bytes copy of `rotation` checked on `dev` (the simulator's
/// counterpart of [`same_bytes_copy`], nothing timed), for each `(block,
/// unroll)` of `variants`: one launch over two tiles
/// ([`check_copy_step`]), then the rotation's steps, PDL-chained, into
/// poisoned destinations, each step's destination checked to hold `T`
/// copies of its source. Returns one line per variant.
pub fn check_rotation<D: BenchDevice>(
    dev: &D,
    rotation: &CopyRotation<D::Buffer>,
    variants: &[(u32, u32)],
) -> Result<Vec<String>, CopyError> {
    let same = rotation.same;
    let mut lines = Vec::new();
    for &(block, unroll) in variants {
        let kernel = copy_step_kernel(block, unroll, same.copies());
        let module = dev.load(&kernel)?;
        let tile = copy_tile(block, unroll) as usize;
        check_copy_step(dev, &module, block, unroll, same.copies(), 2 * tile)?;
        // Each variant writes into poisoned destinations: the checks below
        // see this variant's copies, not the previous one's.
        rotation.poison(dev)?;
        let launch = same.launch(block, unroll)?;
        for step in 0..rotation.steps {
            rotation.launch(dev, &module, &launch, step)?;
            rotation.check_group(dev, &kernel.name, step % rotation.groups)?;
        }
        lines.push(format!(
            "same-bytes copy {}: {} chained steps over {} groups write {} exact copies",
            kernel.name,
            rotation.steps,
            rotation.groups,
            same.copies()
        ));
    }
    Ok(lines)
}

/// One same-bytes copy measurement: `copy_step_kernel(block, unroll, T)`
/// over one point's bytes, PDL-chained in a graph like the point's steps
/// (fields in the bench files' key order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SameCopyRow {
    /// Bytes read + written per step (`R + W`: the point's state traffic).
    pub bytes_per_step: usize,
    /// Destination copies per step (`T`).
    pub copies: u32,
    /// The copy-step kernel's name (its variant and `T`).
    pub name: String,
    /// Bytes read per step (`R`: one state page per request and head).
    pub read_bytes: usize,
    /// Source / destination region pairs rotated through.
    pub slot_groups: usize,
    /// Steps per graph.
    pub steps_per_graph: usize,
    /// `bytes_per_step` over the median µs per step.
    pub tbps: f64,
    /// Per step.
    pub timing: Timing,
    /// One small launch ([`CHECK_FLOATS`] read) reproduced its source in
    /// every destination region, and so did step 0 of the timed launch
    /// (group 0).
    pub verified: bool,
    /// The steps traced with CTA timeline probes ([`super::trace::Traced`]
    /// as JSON), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
}

impl SameCopyRow {
    /// The progress line of this measurement; with the copy ceiling
    /// `ceiling` (TB/s), its "% of copy".
    pub fn summary(&self, ceiling: Option<f64>) -> String {
        format!(
            "same-bytes copy {} ({:.1} MB/step, {} steps over {} groups): {:.2} µs/step, {:.3} TB/s{}{}",
            self.name,
            self.bytes_per_step as f64 / 1e6,
            self.steps_per_graph,
            self.slot_groups,
            self.timing.median_us,
            self.tbps,
            ceiling.map_or(String::new(), |ceil| format!(
                "  {:>5.1} % of copy",
                self.tbps / ceil * 100.0
            )),
            if self.verified { "" } else { " (WRONG RESULT)" }
        )
    }
}

/// The fastest verified row of `rows` reading `read_bytes` and writing
/// `copies` copies.
pub fn fastest_verified(
    rows: &[SameCopyRow],
    read_bytes: usize,
    copies: u32,
) -> Option<&SameCopyRow> {
    rows.iter()
        .filter(|c| c.verified && c.read_bytes == read_bytes && c.copies == copies)
        .min_by(|a, b| a.timing.median_us.total_cmp(&b.timing.median_us))
}

/// The markdown table of `rows`: per distinct (bytes read, `T`), in the
/// order measured, the fastest verified variant, or `NO VERIFIED VARIANT`.
/// The first column, headed `first`, is `label(read_bytes, T)` (the points
/// the copy serves); `ceiling` (TB/s) gives the last column, "% of copy".
pub fn markdown_table(
    rows: &[SameCopyRow],
    ceiling: Option<f64>,
    first: &str,
    label: impl Fn(usize, u32) -> String,
) -> String {
    let mut s = format!(
        "| {first} | MB/step (read + written) | T | copy | steps/graph | slot groups | µs/step | p10–p90 | TB/s | % of copy |\n"
    );
    s += "|---|---:|---:|---|---:|---:|---:|---|---:|---:|\n";
    let mut keys: Vec<(usize, u32)> = Vec::new();
    for c in rows {
        if !keys.contains(&(c.read_bytes, c.copies)) {
            keys.push((c.read_bytes, c.copies));
        }
    }
    for (read, copies) in keys {
        let points = label(read, copies);
        match fastest_verified(rows, read, copies) {
            Some(c) => {
                s += &format!(
                    "| {points} | {:.1} | {copies} | {} | {} | {} | {:.2} | {:.2}–{:.2} | {:.3} | {} |\n",
                    c.bytes_per_step as f64 / 1e6,
                    c.name,
                    c.steps_per_graph,
                    c.slot_groups,
                    c.timing.median_us,
                    c.timing.p10_us,
                    c.timing.p90_us,
                    c.tbps,
                    ceiling.map_or("—".into(), |ceil| format!("{:.1}", c.tbps / ceil * 100.0)),
                );
            }
            None => {
                s += &format!(
                    "| {points} | {:.1} | {copies} | NO VERIFIED VARIANT | | | | | | |\n",
                    read as f64 * (1 + copies as usize) as f64 / 1e6
                );
            }
        }
    }
    s
}

/// Floats the same-bytes copy's verification launch reads (4 MiB: 64
/// KdaSplit state pages, whole tiles of every variant).
pub const CHECK_FLOATS: usize = 1 << 20;

/// A copy check's result as "copied exactly": a mismatch is `false` (the
/// row says so), any other error ends the measurement.
fn copied(check: Result<(), CopyError>) -> Result<bool, CopyError> {
    match check {
        Ok(()) => Ok(true),
        Err(CopyError::Mismatch(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The same-bytes copy of `same` on the GPU over `groups` groups in graphs
/// of `steps` steps (the point's workload's; `seed` varies the values):
/// for each `(block, unroll)` variant, verify one small launch and step 0
/// of the timed one, then time a graph of the PDL-chained steps, step `s`
/// on group `s mod groups`. A wrong copy is a row with `verified: false`; a
/// failure of the device an error.
pub fn same_bytes_copy(
    dev: &CudaDevice,
    same: SameBytes,
    (groups, steps): (usize, usize),
    seed: u32,
    variants: &[(u32, u32)],
    budget: &Budget,
    trace: bool,
) -> Result<Vec<SameCopyRow>, CopyError> {
    let rotation = CopyRotation::new(dev, same, (groups, steps), seed)?;
    let mut rows = Vec::new();
    for &(block, unroll) in variants {
        let kernel = copy_step_kernel(block, unroll, same.copies());
        let module = dev.load(&kernel)?;
        let small = copied(check_copy_step(
            dev,
            &module,
            block,
            unroll,
            same.copies(),
            CHECK_FLOATS,
        ))?;
        let launch = same.launch(block, unroll)?;
        // One step outside the graph, into poisoned destinations: a fault
        // surfaces here, named, and the launch the graph times is checked
        // (group 0 holds T exact copies of its source).
        rotation.poison(dev)?;
        rotation.launch(dev, &module, &launch, 0)?;
        dev.synchronize()?;
        let verified = small && copied(rotation.check_group(dev, &kernel.name, 0))?;
        let timing = time_steps(dev, rotation.steps, budget, |d, s| {
            rotation.launch(d, &module, &launch, s)
        })?;
        let traced = trace.then(|| {
            let traced = super::trace::trace_steps(
                dev,
                &kernel,
                &module.resources(),
                launch.grid,
                rotation.steps,
                budget,
                None,
                |d, m, s| rotation.launch(d, m, &launch, s),
            );
            super::trace::print_trace(&kernel.name, 6, traced)
                .and_then(|t| serde_json::to_value(&t).ok())
        });
        rows.push(SameCopyRow {
            bytes_per_step: same.bytes_per_step(),
            copies: same.copies(),
            name: kernel.name.clone(),
            read_bytes: same.read_bytes(),
            slot_groups: rotation.groups,
            steps_per_graph: rotation.steps,
            tbps: tbps(same.bytes_per_step(), timing.median_us),
            timing,
            verified,
            trace: traced.flatten(),
        });
    }
    Ok(rows)
}

/// The same-bytes copies of one run: each distinct [`SameBytes`] measured
/// once (points of the same bytes per step and `T` share one: their
/// rotations are alike too, being sized by the bytes written).
#[derive(Debug, Default)]
pub struct SameCopies {
    /// Every variant measured, in order.
    pub rows: Vec<SameCopyRow>,
    /// Trace each variant's steps with CTA timeline probes too.
    pub trace: bool,
    done: Vec<SameBytes>,
}

impl SameCopies {
    /// No copy measured yet; `trace`: trace each variant's steps too.
    pub fn new(trace: bool) -> SameCopies {
        SameCopies {
            trace,
            ..SameCopies::default()
        }
    }

    /// Measure `same` with every [`COPY_VARIANTS`] entry
    /// ([`same_bytes_copy`]), unless this run already did (or tried);
    /// prints a line per variant, or why it failed (naming the point,
    /// `label`: the measurement then has no rows). The copy's groups take
    /// as much memory as the point's workload: measure it after that is
    /// freed.
    pub fn measure(
        &mut self,
        dev: &CudaDevice,
        label: &str,
        same: SameBytes,
        rotation: (usize, usize),
        seed: u32,
        budget: &Budget,
        ceiling: Option<f64>,
    ) {
        if self.done.contains(&same) {
            return;
        }
        self.done.push(same);
        match same_bytes_copy(
            dev,
            same,
            rotation,
            seed,
            &COPY_VARIANTS,
            budget,
            self.trace,
        ) {
            Ok(rows) => {
                for c in &rows {
                    println!("    {}", c.summary(ceiling));
                }
                self.rows.extend(rows);
            }
            Err(e) => println!("  {label}: same-bytes copy failed: {e}"),
        }
    }

    /// Whether `same` was measured (or tried) in this run.
    pub fn has(&self, same: &SameBytes) -> bool {
        self.done.contains(same)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kda_runtime::SimDevice;

    /// KdaSplit's state page: one head of one request, `128 × 128` f32.
    const PAGE: usize = 128 * 128 * 4;

    #[test]
    fn bytes_are_pages_read_and_copies_written() {
        // KdaSplit H12 B128 T1: 1536 pages, 100.7 MB read, as much written.
        let same = SameBytes::new(12 * 128, PAGE, 1).unwrap();
        assert_eq!(same.read_bytes(), 12 * 128 * PAGE);
        assert_eq!(same.write_bytes(), same.read_bytes());
        assert_eq!(same.bytes_per_step(), 2 * 12 * 128 * 128 * 128 * 4);
        assert_eq!((same.copies(), same.floats() * 4), (1, same.read_bytes()));
        // T = 4: four copies written.
        let t4 = SameBytes::new(12 * 8, PAGE, 4).unwrap();
        assert_eq!(t4.bytes_per_step(), 5 * t4.read_bytes());
        // The same bytes are the same copy, however they are cut in pages.
        assert_eq!(same, SameBytes::new(128, 12 * PAGE, 1).unwrap());
        assert_ne!(same, SameBytes::new(12 * 128, PAGE, 2).unwrap());
    }

    #[test]
    fn sizes_past_the_limits_are_errors_not_panics() {
        let big = usize::MAX / 2;
        assert!(matches!(
            SameBytes::new(big, PAGE, 1),
            Err(SizeError::ReadOverflow { .. })
        ));
        // Read fits usize, T copies of it do not; nor does a T past u32.
        let e = SameBytes::new(1 << 32, PAGE, u32::MAX as usize).unwrap_err();
        assert!(e.to_string().contains("written overflow"), "{e}");
        let e = SameBytes::new(1, PAGE, u32::MAX as usize + 1).unwrap_err();
        assert!(matches!(e, SizeError::WriteOverflow { .. }), "{e}");
        // Fits usize, but more floats than one launch reads.
        let e = SameBytes::new(32 << 19, PAGE, 1).unwrap_err();
        assert!(e.to_string().contains("reads at most"), "{e}");
        for (pages, page, copies) in [(0, PAGE, 1), (1, 0, 1), (1, PAGE, 0)] {
            assert_eq!(SameBytes::new(pages, page, copies), Err(SizeError::Empty));
        }
        assert!(matches!(
            SameBytes::new(2, 6, 1),
            Err(SizeError::NotFloats { page_bytes: 6 })
        ));
        // KdaSplit's largest default point fits.
        assert!(SameBytes::new(32 * 512, PAGE, 4).is_ok());
    }

    #[test]
    fn launches_cover_the_bytes_in_whole_tiles() {
        let same = SameBytes::new(12 * 8, PAGE, 4).unwrap();
        for (block, unroll) in COPY_VARIANTS {
            let cfg = same.launch(block, unroll).unwrap();
            assert!(cfg.pdl);
            assert_eq!(
                cfg.grid[0] as u64 * copy_tile(block, unroll),
                same.floats() as u64
            );
            assert_eq!(cfg.syms, [same.floats() as i64]);
            assert!(CHECK_FLOATS.is_multiple_of(copy_tile(block, unroll) as usize));
        }
        assert!(step_launch(256, 4, 4096 + 4).is_err());
        assert!(step_launch(256, 4, 0).is_err());
        // A source that is not whole tiles of a variant: an error, not a
        // launch that drops the tail.
        let odd = SameBytes::new(3, 64, 1).unwrap();
        assert!(odd.launch(32, 1).is_err());
    }

    #[test]
    fn copies_compare_bit_for_bit() {
        let src: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [src.clone(), src.clone()].concat();
        compare_copies("k", &src, &dst).unwrap();
        dst[12..16].copy_from_slice(&(-0.0f32).to_le_bytes());
        let e = compare_copies("k", &src, &dst).unwrap_err();
        assert!(
            matches!(e, CopyMismatch { copy: 1, index: 1, got, want: 2.0, .. } if got == 0.0),
            "{e}"
        );
        assert!(compare_copies("k", &src, &dst[..12]).is_err());
    }

    #[test]
    fn the_rotation_writes_its_copies_on_the_simulator() {
        // Two 1 KiB pages, three copies, over three groups in four steps.
        let dev = SimDevice::new();
        let same = SameBytes::new(2, 1024, 3).unwrap();
        let rotation = CopyRotation::new(&dev, same, (3, 4), 5).unwrap();
        assert_eq!(rotation.bytes(), 3 * 4 * 2048);
        let lines = check_rotation(&dev, &rotation, &[(32, 1), (64, 2)]).unwrap();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[1].contains(
                "bench_copy_step_b64_u2_t3: 4 chained steps over 3 groups write 3 exact copies"
            ),
            "{lines:?}"
        );
        // A rotation of no groups is refused, not a division by zero.
        assert!(CopyRotation::new(&dev, same, (0, 4), 5).is_err());
    }

    #[test]
    fn the_fastest_verified_variant_serves_its_bytes_alone() {
        let row = |name: &str, us: f64, verified, copies| SameCopyRow {
            bytes_per_step: 4096 * (1 + copies as usize),
            copies,
            name: name.into(),
            read_bytes: 4096,
            slot_groups: 3,
            steps_per_graph: 32,
            tbps: tbps(4096 * (1 + copies as usize), us),
            timing: Timing {
                median_us: us,
                p10_us: us,
                p90_us: us,
                replays: 10,
                units: 32,
            },
            verified,
            trace: None,
        };
        let rows = [
            row("wrong", 1.0, false, 1),
            row("slow", 3.0, true, 1),
            row("fast", 2.0, true, 1),
            row("t2", 0.5, true, 2),
        ];
        let same = SameBytes::new(1, 4096, 1).unwrap();
        assert_eq!(same.fastest(&rows).map(|r| r.name.as_str()), Some("fast"));
        let table = markdown_table(&rows[..1], Some(1.0), "points", |r, t| format!("{r}/{t}"));
        assert!(
            table.ends_with("| 4096/1 | 0.0 | 1 | NO VERIFIED VARIANT | | | | | | |\n"),
            "{table}"
        );
        let table = markdown_table(&rows, None, "kernel", |r, t| format!("{r}/{t}"));
        assert!(table.starts_with("| kernel | MB/step"), "{table}");
        assert!(
            table.contains("| 4096/1 | 0.0 | 1 | fast | 32 | 3 | 2.00 |"),
            "{table}"
        );
        assert!(table.contains("| 4096/2 | 0.0 | 2 | t2 |"), "{table}");
        assert!(
            rows[0]
                .summary(Some(1.0))
                .ends_with("% of copy (WRONG RESULT)")
        );
    }
}

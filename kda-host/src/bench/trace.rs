//! A benchmark's steps traced with CTA timeline probes: the kernel compiled
//! with `pipeline::Options::probes`, held to the plain build's registers
//! (`.maxnreg`) so that an SM holds as many of its CTAs as of the plain
//! kernel's, launched over the same PDL-chained graph of steps as the timed
//! run, its last step's records analysed ([`crate::probe::analyse`]).

use kda_ir::Kernel;
use kda_ir::pipeline::Options;
use kda_runtime::cuda::KernelResources;
use kda_runtime::{CudaDevice, CudaKernel, Device, RuntimeError};
use serde::Serialize;
use thiserror::Error;

use super::{Budget, Timing, time_steps};
use crate::probe::{ProbeError, ProbeLayout, ProbeReport, analyse};

/// Why a traced run failed.
#[derive(Debug, Error)]
pub enum TraceError {
    /// Compiling, loading or launching the probed kernel.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The records could not be analysed.
    #[error("probe records: {0}")]
    Probe(#[from] ProbeError),
}

/// A traced run: its timing (probes included), both builds' resources and
/// where the last step's CTAs spent their time.
#[derive(Clone, Debug, Serialize)]
pub struct Traced {
    /// The probed steps' timing, to set against the plain run's.
    pub timing: Timing,
    /// Registers per thread of the plain build (the driver's figure).
    pub plain_registers: u32,
    /// Registers and local memory of the probed build (spills show here).
    pub probed_registers: u32,
    /// Local memory per thread of the probed build.
    pub probed_local_bytes: u32,
    /// The analysis of the last step's records.
    pub report: ProbeReport,
}

impl Traced {
    /// The report, preceded by one line on the probed build and its timing.
    pub fn render(&self) -> String {
        format!(
            "probed build: {} registers ({} plain), {} B local, {:.2} µs/step with probes\n{}",
            self.probed_registers,
            self.plain_registers,
            self.probed_local_bytes,
            self.timing.median_us,
            self.report.render()
        )
    }
}

/// Trace `kernel` (whose plain build is `plain`) over `steps` chained steps
/// of a `grid` of CTAs each: `launch(dev, module, step)` launches step `step` of
/// the given module, as the timed run does. `expect_ctas_per_sm`: the
/// residency the occupancy calculation gives, for the report's "of
/// expected".
pub fn trace_steps(
    dev: &CudaDevice,
    kernel: &Kernel,
    plain: &KernelResources,
    grid: [u32; 3],
    steps: usize,
    budget: &Budget,
    expect_ctas_per_sm: Option<u32>,
    launch: impl Fn(&CudaDevice, &CudaKernel, usize) -> Result<(), RuntimeError>,
) -> Result<Traced, TraceError> {
    let ctas = grid.iter().map(|&g| u64::from(g)).product();
    let mut k = kernel.clone();
    // `.maxnreg` (a multiple of 8 in 24..=248) at the plain count: the
    // probes' registers must not cost residency. A kernel with register
    // budgets already fixes it.
    if k.max_regs.is_none() {
        k.max_regs = Some(plain.registers.div_ceil(8).clamp(3, 31) * 8);
    }
    let opts = Options {
        probes: true,
        ..Options::default()
    };
    let module = dev.load_with(&k, &opts)?;
    let sites = module.probe_sites().unwrap_or_default();
    let layout = ProbeLayout::of(sites, ctas, k.launch.block);
    let bytes = layout.words()?.checked_mul(8).ok_or(ProbeError::TooLarge {
        ctas,
        warps: layout.warps,
        sites: sites.len(),
    })?;
    let buf = dev.alloc_zeroed(bytes)?;
    dev.set_probe_buffer(&module, Some(&buf))?;
    let timed = time_steps(dev, steps, budget, |d, s| launch(d, &module, s));
    // Off again before anything can fail past here: the module may be
    // cached and launched later without a buffer of this size.
    let off = dev.set_probe_buffer(&module, None);
    let timing = timed?;
    let raw = dev.download(&buf)?;
    off?;
    let words: Vec<u64> = raw
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes")))
        .collect();
    let report = analyse(&layout, &words, expect_ctas_per_sm)?;
    let r = module.resources();
    Ok(Traced {
        timing,
        plain_registers: plain.registers,
        probed_registers: r.registers,
        probed_local_bytes: r.local_bytes,
        report,
    })
}

/// Print a traced run under its measurement's line (`trace of <label>:`,
/// then the report, `indent` spaces in), or why it failed; the run, if any.
pub fn print_trace(
    label: &str,
    indent: usize,
    traced: Result<Traced, TraceError>,
) -> Option<Traced> {
    let pad = " ".repeat(indent);
    match traced {
        Ok(t) => {
            println!("{pad}trace of {label}:");
            for line in t.render().lines() {
                println!("{pad}  {line}");
            }
            Some(t)
        }
        Err(e) => {
            println!("{pad}trace of {label} failed: {e}");
            None
        }
    }
}

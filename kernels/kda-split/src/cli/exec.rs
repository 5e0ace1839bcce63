//! Opening a device and running one launch on it through `kda_split::run`,
//! with wall times of each phase and the device's own timing: the median of
//! timed graph replays on the GPU, the simulator's wall time and
//! warp-instruction count on the CPU.

use std::time::Instant;

use kda_host::KernelArgs;
use kda_ir::pipeline::{self, Options};
use kda_runtime::{CudaDevice, Device, Graph, RuntimeError, SimDevice, SimOptions};
use kda_split::run::{self, Prepared, RunError};
use kda_split::{Actual, KdaArgs, KdaConfig, validate};

use super::Failure;
use super::options::{DeviceArg, DeviceArgs, fmt_duration};

/// The device a command runs on.
pub enum Opened {
    Cuda(CudaDevice),
    /// The simulator, and why it was chosen.
    Sim(SimDevice, String),
}

impl Opened {
    /// Open what `--device` asks for; `auto` falls back to the simulator only
    /// when there is no usable CUDA driver or GPU (like
    /// `AnyDevice::gpu_or_sim`), and says why.
    pub fn open(args: &DeviceArgs) -> Result<Self, Failure> {
        let sim = || {
            SimDevice::with_options(SimOptions {
                seed: args.sim_seed,
                ..SimOptions::default()
            })
        };
        match args.device {
            DeviceArg::Sim => Ok(Self::Sim(sim(), "--device sim".into())),
            DeviceArg::Cuda => CudaDevice::new(0)
                .map(Self::Cuda)
                .map_err(|e| Failure::device(format!("--device cuda: {e}"))),
            DeviceArg::Auto => match CudaDevice::new(0) {
                Ok(dev) => Ok(Self::Cuda(dev)),
                Err(RuntimeError::NoDriver(why)) => {
                    Ok(Self::Sim(sim(), format!("no GPU here: {why}")))
                }
                Err(e) => Err(Failure::device(format!("cannot open GPU 0: {e}"))),
            },
        }
    }

    /// `device: ...`, saying when the simulator stands in for a GPU.
    pub fn line(&self) -> String {
        match self {
            Self::Cuda(dev) => format!("device: GPU 0, {}", dev.describe()),
            Self::Sim(dev, why) => format!("device: {} ({why})", dev.describe()),
        }
    }

    /// Validate, build, compile, load, launch once and read back, printing the
    /// wall time of each phase and the device's timing.
    pub fn execute(
        &self,
        cfg: &KdaConfig,
        args: &KdaArgs,
        repeat: usize,
    ) -> Result<Actual, Failure> {
        match self {
            Self::Cuda(dev) => execute_on(dev, cfg, args, repeat),
            Self::Sim(dev, _) => execute_on(dev, cfg, args, repeat),
        }
    }
}

/// Argument-contract violations (spec §4) as one exit-3 failure.
pub fn check_contract(cfg: &KdaConfig, args: &KdaArgs) -> Result<(), Failure> {
    let errors = validate(cfg, args);
    if errors.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
    Err(Failure::input(format!(
        "the arguments break the caller contract (spec §4):\n{}",
        list.join("\n")
    )))
}

fn runtime(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::device(format!("{what}: {e}"))
}

/// Prints one `  <phase>  <time>` line.
pub fn phase(name: &str, seconds: std::time::Duration, note: &str) {
    let time = fmt_duration(seconds);
    if note.is_empty() {
        say!("  {name:<30} {time:>10}");
    } else {
        say!("  {name:<30} {time:>10}  {note}");
    }
}

fn execute_on<D: Timed>(
    dev: &D,
    cfg: &KdaConfig,
    args: &KdaArgs,
    repeat: usize,
) -> Result<Actual, Failure> {
    check_contract(cfg, args)?;
    let free = dev
        .free_memory()
        .map_err(|e| runtime("reading the GPU's free memory", e))?;
    check_fits(upload_bytes(args), free)?;
    say!("timing (wall clock unless noted):");
    let start = Instant::now();
    let kernel = run::kernel_for(cfg, args).map_err(|e| Failure::input(e.to_string()))?;
    phase(
        "build (trace the kernel IR)",
        start.elapsed(),
        &format!("{} instructions", kernel.insts.len()),
    );
    let start = Instant::now();
    let compiled = pipeline::compile(&kernel, &Options::default())
        .map_err(|e| runtime("compiling the kernel", e))?;
    phase(
        "compile (schedule + PTX)",
        start.elapsed(),
        &format!(
            "{} lines of PTX, {} B dynamic shared memory",
            compiled.ptx.lines().count(),
            compiled.layout.bytes
        ),
    );
    let start = Instant::now();
    let prepared = run::prepare(dev, cfg, args).map_err(|e| match e {
        RunError::Args(_) | RunError::Build(_) => Failure::input(e.to_string()),
        RunError::Runtime(e) => runtime("preparing the launch", e),
    })?;
    phase(
        "prepare (build, load, upload)",
        start.elapsed(),
        D::LOAD_NOTE,
    );
    let start = Instant::now();
    prepared
        .launch(dev)
        .and_then(|()| dev.synchronize())
        .map_err(|e| runtime("launch", e))?;
    phase(
        "first launch (+ synchronize)",
        start.elapsed(),
        &format!(
            "grid ({}, {}, {}), cluster {}, {} threads per CTA",
            prepared.cfg.grid[0],
            prepared.cfg.grid[1],
            prepared.cfg.grid[2],
            cfg.cluster(),
            kda_split::kernel::BLOCK
        ),
    );
    let start = Instant::now();
    let actual = prepared
        .results(dev, args)
        .map_err(|e| runtime("reading the results back", e))?;
    phase("read back", start.elapsed(), "");
    for line in dev
        .device_timing(&prepared, repeat)
        .map_err(|e| runtime("timing", e))?
    {
        say!("  {line}");
    }
    Ok(actual)
}

/// What each device adds to the wall times.
trait Timed: Device + Sized {
    /// What `prepare` does on this device besides building.
    const LOAD_NOTE: &'static str;

    /// Lines about the launch just made, or about timed repeats of it. Runs
    /// after the results were read: repeats change the state in place.
    fn device_timing(&self, p: &Prepared<Self>, repeat: usize)
    -> Result<Vec<String>, RuntimeError>;

    /// Device memory free for the launch's tensors; `None`: host memory
    /// (the simulator), which the case-size limit already bounds.
    fn free_memory(&self) -> Result<Option<usize>, RuntimeError> {
        Ok(None)
    }
}

/// Bytes the launch uploads: every tensor's storage as it is.
fn upload_bytes(args: &KdaArgs) -> usize {
    args.tensors()
        .iter()
        .map(|t| t.data().len().saturating_mul(t.dtype().size()))
        .fold(0, usize::saturating_add)
}

/// The launch's tensors against the device's free memory, before anything
/// is allocated there: a case the GPU cannot hold is bad input (exit 3).
fn check_fits(need: usize, free: Option<usize>) -> Result<(), Failure> {
    match free {
        Some(free) if need > free => Err(Failure::input(format!(
            "the case's tensors need {need} bytes of device memory; the GPU has {free} bytes free"
        ))),
        _ => Ok(()),
    }
}

impl Timed for SimDevice {
    const LOAD_NOTE: &'static str = "verify, schedule and decode for the simulator";

    fn device_timing(
        &self,
        p: &Prepared<Self>,
        _repeat: usize,
    ) -> Result<Vec<String>, RuntimeError> {
        let stats = self.last_stats();
        let rate = stats.warp_instructions as f64 / stats.wall.as_secs_f64().max(1e-9);
        Ok(vec![
            format!(
                "simulator: {} clusters, {} warp-instructions in {} ({:.1} M warp-instructions/s)",
                stats.clusters,
                stats.warp_instructions,
                fmt_duration(stats.wall),
                rate / 1e6
            ),
            format!(
                "simulator: {} decoded instructions, {} register words per thread, {} B shared memory per CTA",
                p.module.program_len(),
                p.module.register_words(),
                p.module.shared_bytes()
            ),
            "(no kernel time on the simulator: it executes every lane of every warp on the CPU)"
                .into(),
        ])
    }
}

impl Timed for CudaDevice {
    fn free_memory(&self) -> Result<Option<usize>, RuntimeError> {
        Ok(Some(self.memory()?.0))
    }

    const LOAD_NOTE: &'static str = "compile, JIT-load the PTX, upload the tensors";

    fn device_timing(
        &self,
        p: &Prepared<Self>,
        repeat: usize,
    ) -> Result<Vec<String>, RuntimeError> {
        let r = p.module.resources();
        let mut lines = vec![format!(
            "kernel resources (driver): {} registers, {} B local memory per thread, {} B static + {} B dynamic shared memory per CTA",
            r.registers, r.local_bytes, r.static_smem_bytes, r.dyn_smem_bytes
        )];
        if repeat == 0 {
            return Ok(lines);
        }
        // One launch per graph replay, timed with events; warm up first.
        let graph = Graph::capture(self, |dev| p.launch(dev))?;
        for _ in 0..3 {
            graph.replay()?;
        }
        self.synchronize()?;
        let times = graph.time_replays(self, repeat)?;
        let median = kda_runtime::cuda::median(&times);
        let min = times.iter().copied().fold(f32::INFINITY, f32::min);
        lines.push(format!(
            "kernel time (GPU events, {repeat} graph replays of one launch): median {:.2} µs, min {:.2} µs",
            median * 1e3,
            min * 1e3
        ));
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_larger_than_the_free_device_memory_is_bad_input() {
        assert!(check_fits(100, Some(100)).is_ok());
        assert!(check_fits(usize::MAX, None).is_ok()); // the simulator
        let e = check_fits(101, Some(100)).unwrap_err();
        assert!(format!("{e:?}").contains("need 101 bytes"), "{e:?}");
        let args = kda_split::generate(&kda_split::GenOptions::new(6, 2, 1));
        let by_hand: usize = args
            .tensors()
            .iter()
            .map(|t| t.data().len() * t.dtype().size())
            .sum();
        assert_eq!(upload_bytes(&args), by_hand);
        assert!(by_hand > 0);
    }
}

//! kda-sim: the CPU simulator, a [`Device`] that executes a kernel's IR on the host.
//!
//! Every CTA of every cluster of the grid runs, every warp and lane, with
//! per-lane registers, per-CTA shared memory laid out from the kernel's buffer
//! and barrier declarations, DSMEM between the CTAs of a cluster, mbarrier
//! phases with arrival counts and transaction bytes, the cluster barrier,
//! named barriers, warp shuffles, `elect`, `mma.sync` and async copies.
//!
//! * `decode`: the kernel becomes a flat program with register slots;
//! * `exec`: the SIMT interpreter of one warp;
//! * `sched`: warp interleaving in a cluster (deterministic or seeded
//!   random) and deadlock detection;
//! * `mbarrier`: barrier semantics; `memory`: global and shared memory;
//!   `numeric`: f32 / bf16 / mma numerics; the reports ([`SimError`]) live
//!   in `kda-device` (`kda_device::error::sim`) so that `RuntimeError` can
//!   hold them without depending on the simulator;
//! * `options`: [`SimOptions`], a leaf that `sched` reads;
//! * `race`: the race detector (shadow state of shared memory, vector
//!   clocks of warps and barriers), on with `SimOptions::race_check`.
//!
//! Clusters are independent and run in parallel on host threads. Launches
//! run synchronously (`launch` returns when the kernel has finished), so PDL
//! wait / launch_dependents are ordering points with nothing to wait for;
//! with `LaunchConfig::pdl` the simulator reports any read of a `produced`
//! tensor that happens before the reading warp's `griddepcontrol.wait`.

#![warn(missing_docs)]

mod decode;
mod exec;
mod mbarrier;
mod memory;
mod numeric;
mod options;
mod race;
mod sched;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kda_device::RuntimeError;
use kda_device::launch::{Device, LaunchConfig, ScalarArg, check_launch};
use kda_ir::Kernel;

pub use kda_device::error::sim::{
    AccessKind, AtExit, BarrierAtExit, BarrierMisuse, BlockedWarp, Deadlock, GlobalRace,
    Misaligned, OutOfBounds, RaceAccess, RaceKind, SharedRace, SimError, Site, Space, TxOverflow,
    WaitOn,
};
pub use memory::SimBuffer;
pub use options::SimOptions;

/// Counters of the last launch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimStats {
    /// Clusters run.
    pub clusters: u32,
    /// Warp-instructions executed over all clusters.
    pub warp_instructions: u64,
    /// Host time the launch took.
    pub wall: Duration,
}

/// The CPU simulator device.
#[derive(Debug, Default)]
pub struct SimDevice {
    opts: SimOptions,
    last: Mutex<SimStats>,
}

/// A kernel decoded for the simulator.
pub struct SimModule {
    prog: Arc<decode::Program>,
}

impl SimModule {
    /// The kernel this module runs.
    pub fn kernel(&self) -> &Kernel {
        &self.prog.kernel
    }

    /// Bytes of shared memory per CTA: the PTX backend's layout (`kda_ir::ptx::Layout`).
    pub fn shared_bytes(&self) -> u32 {
        self.prog.layout.bytes
    }

    /// Byte offset of each shared buffer in a CTA's shared memory, in declaration order.
    pub fn buffer_offsets(&self) -> &[u32] {
        &self.prog.layout.buffers
    }

    /// Byte offset of each mbarrier in a CTA's shared memory, in declaration order.
    pub fn barrier_offsets(&self) -> &[u32] {
        &self.prog.layout.barriers
    }

    /// 32-bit register words per thread after slot reuse.
    pub fn register_words(&self) -> u32 {
        self.prog.reg_words
    }

    /// Decoded instructions.
    pub fn program_len(&self) -> usize {
        self.prog.code.len()
    }
}

impl std::fmt::Debug for SimModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimModule")
            .field("kernel", &self.prog.kernel.name)
            .field("program_len", &self.prog.code.len())
            .field("register_words", &self.prog.reg_words)
            .field("shared_bytes", &self.prog.layout.bytes)
            .finish()
    }
}

impl SimDevice {
    /// A simulator with default options (deterministic, all cores, verifying).
    pub fn new() -> SimDevice {
        SimDevice::default()
    }

    /// A simulator with these options.
    pub fn with_options(opts: SimOptions) -> SimDevice {
        SimDevice {
            opts,
            last: Mutex::default(),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &SimOptions {
        &self.opts
    }

    /// Counters of the last finished launch.
    pub fn last_stats(&self) -> SimStats {
        self.last.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Decode a kernel without verifying it (to run kernels the verifier
    /// rejects, e.g. to see how they fail).
    pub fn load_unverified(&self, kernel: &Kernel) -> Result<SimModule, RuntimeError> {
        Ok(SimModule {
            prog: Arc::new(decode::decode(kernel)?),
        })
    }

    /// Launch, wait for the kernel and return the launch's counters. A
    /// simulator failure is `RuntimeError::Sim` holding the [`SimError`].
    pub fn run(
        &self,
        module: &SimModule,
        cfg: &LaunchConfig,
        tensors: &[&SimBuffer],
    ) -> Result<SimStats, RuntimeError> {
        let prog = &*module.prog;
        let k = &prog.kernel;
        let sizes: Vec<usize> = tensors.iter().map(|b| b.len()).collect();
        check_launch(k, cfg, &sizes)?;
        let start = Instant::now();
        let views: Vec<memory::TensorView<'_>> = k
            .tensors
            .keys()
            .zip(tensors)
            .map(|(t, b)| memory::TensorView::new(k, t, b, &cfg.syms))
            .collect();
        let params: Vec<[u32; 2]> = cfg
            .scalars
            .iter()
            .map(|s| match *s {
                ScalarArg::F32(x) => [x.to_bits(), 0],
                ScalarArg::I32(x) => [x as u32, 0],
                ScalarArg::U32(x) => [x, 0],
                ScalarArg::I64(x) => [x as u32, (x >> 32) as u32],
                ScalarArg::U64(x) => [x as u32, (x >> 32) as u32],
            })
            .collect();
        let c = k.launch.cluster.max(1);
        let per_row = cfg.grid[0] / c;
        let clusters = per_row * cfg.grid[1] * cfg.grid[2];
        let lx = sched::LaunchCtx {
            prog,
            tensors: &views,
            params: &params,
            grid: cfg.grid,
            check_pdl: cfg.pdl && self.opts.check_pdl,
            opts: &self.opts,
        };
        let blocks_of = |i: u32| -> Vec<[u32; 3]> {
            let (cx, rest) = (i % per_row, i / per_row);
            let (y, z) = (rest % cfg.grid[1], rest / cfg.grid[1]);
            (0..c).map(|r| [cx * c + r, y, z]).collect()
        };
        let threads = match self.opts.threads {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        }
        .min(clusters as usize)
        .max(1);
        let next = AtomicU32::new(0);
        let first_err = AtomicU32::new(u32::MAX);
        let errors: Mutex<Vec<(u32, SimError)>> = Mutex::default();
        let total = AtomicU64::new(0);
        let worker = || {
            let mut runner = sched::Runner::new(prog, self.opts.race_check);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= clusters || i > first_err.load(Ordering::Relaxed) {
                    break;
                }
                match runner.run_cluster(&lx, i, &blocks_of(i)) {
                    Ok(n) => {
                        total.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => {
                        first_err.fetch_min(i, Ordering::Relaxed);
                        errors.lock().expect("error list").push((i, e));
                    }
                }
            }
        };
        if threads == 1 {
            worker();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(worker);
                }
            });
        }
        let mut errors = errors.into_inner().expect("error list");
        errors.sort_by_key(|e| e.0);
        if let Some((_, e)) = errors.into_iter().next() {
            return Err(e.into());
        }
        let stats = SimStats {
            clusters,
            warp_instructions: total.into_inner(),
            wall: start.elapsed(),
        };
        if let Ok(mut l) = self.last.lock() {
            *l = stats.clone();
        }
        Ok(stats)
    }
}

impl Device for SimDevice {
    type Buffer = SimBuffer;
    type Module = SimModule;

    fn describe(&self) -> String {
        match self.opts.seed {
            None => "CPU simulator".to_string(),
            Some(s) if self.opts.hold_back => {
                format!("CPU simulator (random interleavings, one CTA held back, seed {s})")
            }
            Some(s) => format!("CPU simulator (random interleavings, seed {s})"),
        }
    }

    fn upload(&self, bytes: &[u8]) -> Result<SimBuffer, RuntimeError> {
        Ok(SimBuffer::from_bytes(bytes))
    }

    fn download(&self, buf: &SimBuffer) -> Result<Vec<u8>, RuntimeError> {
        Ok(buf.to_bytes())
    }

    /// Verify and schedule the kernel with the compile pipeline (unless
    /// `SimOptions::verify` is off), then decode it.
    fn load(&self, kernel: &Kernel) -> Result<SimModule, RuntimeError> {
        if !self.opts.verify {
            return self.load_unverified(kernel);
        }
        let scheduled = kda_ir::pipeline::schedule(kernel, &self.opts.pipeline).map_err(|e| {
            RuntimeError::Build {
                kernel: kernel.name.clone(),
                msg: e.to_string(),
            }
        })?;
        self.load_unverified(&scheduled)
    }

    fn module_kernel<'m>(&self, module: &'m SimModule) -> &'m Kernel {
        module.kernel()
    }

    fn max_resident_clusters(&self, _: &SimModule) -> Result<u32, RuntimeError> {
        Ok(self.opts.resident_clusters.max(1))
    }

    fn launch(
        &self,
        module: &SimModule,
        cfg: &LaunchConfig,
        tensors: &[&SimBuffer],
    ) -> Result<(), RuntimeError> {
        self.run(module, cfg, tensors).map(|_| ())
    }

    fn synchronize(&self) -> Result<(), RuntimeError> {
        Ok(())
    }
}

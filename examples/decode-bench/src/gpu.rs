//! Measurements on the GPU: the driver-copy ceiling and the decode steps,
//! each the median over replays of a CUDA graph, timed with events.

use kda_runtime::{CudaDevice, CudaKernel, Device, Graph, RuntimeError};

use crate::family::Family;
use crate::workload::Workload;

/// Per-unit times (one copy, one step) over the timed replays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub replays: usize,
}

impl Timing {
    /// From milliseconds per replay of `units` units each.
    pub fn of(ms_per_replay: &[f32], units: usize) -> Timing {
        let mut us: Vec<f64> = ms_per_replay
            .iter()
            .map(|&ms| ms as f64 * 1e3 / units as f64)
            .collect();
        us.sort_by(f64::total_cmp);
        let n = us.len();
        let at = |q: f64| us[((n - 1) as f64 * q).round() as usize];
        let median = if n % 2 == 1 {
            us[n / 2]
        } else {
            (us[n / 2 - 1] + us[n / 2]) / 2.0
        };
        Timing {
            median_us: median,
            p10_us: at(0.1),
            p90_us: at(0.9),
            replays: n,
        }
    }
}

/// How long to time one graph: untimed replays, then about `target_ms` of
/// timed ones, at least `min_replays`, at most `max_replays`.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub warmup: usize,
    pub target_ms: f64,
    pub min_replays: usize,
    pub max_replays: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            warmup: 3,
            target_ms: 100.0,
            min_replays: 10,
            max_replays: 200,
        }
    }
}

/// TB/s of `bytes` moved in `us` microseconds.
pub fn tbps(bytes: usize, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e12
}

fn replays(budget: &Budget, per_ms: f64) -> usize {
    ((budget.target_ms / per_ms.max(1e-4)).ceil() as usize)
        .clamp(budget.min_replays, budget.max_replays)
}

/// Warm `graph` up, size the number of replays from a short probe, time them.
pub fn time_graph(
    dev: &CudaDevice,
    graph: &Graph,
    units: usize,
    budget: &Budget,
) -> Result<Timing, RuntimeError> {
    for _ in 0..budget.warmup {
        graph.replay()?;
    }
    dev.synchronize()?;
    let probe = graph.time_replays(dev, 3)?;
    let n = replays(budget, kda_runtime::cuda::median(&probe) as f64);
    let ms = graph.time_replays(dev, n)?;
    Ok(Timing::of(&ms, units))
}

/// The copy ceiling: the driver's device-to-device copy (`cuMemcpyDtoDAsync`)
/// of `bytes` bytes, bytes read + written over the median time.
pub struct CopyCeiling {
    pub bytes_moved: usize,
    pub timing: Timing,
    pub tbps: f64,
    /// The same copy reproduced a 16 MiB source exactly.
    pub verified: bool,
}

/// Time the driver copy of `bytes` bytes (see [`CopyCeiling`]).
pub fn copy_ceiling(
    dev: &CudaDevice,
    bytes: usize,
    budget: &Budget,
) -> Result<CopyCeiling, RuntimeError> {
    let pattern: Vec<u8> = (0..(4u32 << 20))
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    let (check_src, check_dst) = (dev.upload(&pattern)?, dev.alloc_zeroed(pattern.len())?);
    dev.copy_buffer(&check_src, &check_dst)?;
    let verified = dev.download(&check_dst)? == pattern;
    let (src, dst) = (dev.alloc_zeroed(bytes)?, dev.alloc_zeroed(bytes)?);
    for _ in 0..budget.warmup {
        dev.copy_buffer(&src, &dst)?;
    }
    dev.synchronize()?;
    let per_ms = dev.time(|d| d.copy_buffer(&src, &dst))? as f64;
    let ms = (0..replays(budget, per_ms))
        .map(|_| dev.time(|d| d.copy_buffer(&src, &dst)))
        .collect::<Result<Vec<_>, _>>()?;
    let timing = Timing::of(&ms, 1);
    let moved = 2 * bytes;
    Ok(CopyCeiling {
        bytes_moved: moved,
        timing,
        tbps: tbps(moved, timing.median_us),
        verified,
    })
}

/// One timed schedule at one point.
#[derive(Clone, Debug)]
pub struct Measure {
    pub timing: Timing,
    pub registers: u32,
    pub smem_bytes: u32,
    pub local_bytes: u32,
    /// Output elements not finite or never written after the timed replays.
    pub bad_outputs: usize,
}

/// Build and load `schedule`'s kernel, run one step directly (a fault
/// surfaces here, named), capture `workload.steps` PDL-chained steps into a
/// graph (step `s` on slot group `s mod groups`) with the output poisoned,
/// time its replays and count the output elements left unwritten.
pub fn measure<F: Family>(
    dev: &CudaDevice,
    family: &F,
    workload: &mut Workload<F, CudaDevice>,
    schedule: &F::Schedule,
    budget: &Budget,
) -> Result<Measure, String> {
    let (kernel, launch) = workload.kernel(family, schedule)?;
    let module: CudaKernel = dev.load(&kernel).map_err(|e| e.to_string())?;
    let run = |w: &mut Workload<F, CudaDevice>| -> Result<Measure, RuntimeError> {
        w.poison_output(dev)?;
        w.launch(dev, &module, &launch, 0)?;
        dev.synchronize()?;
        let w = &*w;
        let graph = Graph::capture(dev, |d| {
            (0..w.steps).try_for_each(|s| w.launch(d, &module, &launch, s))
        })?;
        let timing = time_graph(dev, &graph, w.steps, budget)?;
        drop(graph);
        let res = module.resources();
        Ok(Measure {
            timing,
            registers: res.registers,
            smem_bytes: res.static_smem_bytes + res.dyn_smem_bytes,
            local_bytes: res.local_bytes,
            bad_outputs: w.bad_outputs(dev)?,
        })
    };
    run(workload).map_err(|e| e.to_string())
}

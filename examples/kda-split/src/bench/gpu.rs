//! Measurements on the GPU: the copy ceiling, the graph kernel-node floor and
//! KdaSplit steps, each as the median over many replays of a CUDA graph,
//! timed with events.

use kda_ir::Scalar;
use kda_runtime::{
    CudaDevice, CudaKernel, Device, Graph, LaunchConfig, RuntimeError, cuda::KernelResources,
};
use serde::{Deserialize, Serialize};

use super::error::StepMismatch;
use super::kernels::{copy_kernel, copy_launch, copy_tile, empty_kernel, fill, fill_kernel};
use super::workload::Workload;
use crate::args::KdaArgs;
use crate::compare::{Actual, compare};
use crate::config::KdaConfig;
use crate::reference::{RawGateOrder, reference};

/// How long to time one graph.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Untimed replays first.
    pub warmup: usize,
    /// Timed replays: about this many milliseconds of them...
    pub target_ms: f64,
    /// ...but at least / at most this many.
    pub min_replays: usize,
    pub max_replays: usize,
}

/// Per-unit times (one copy, one node, one step) over the timed replays.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    /// Timed replays.
    pub replays: usize,
    /// Units (launches) per replay.
    #[serde(rename = "units_per_replay")]
    pub units: usize,
}

impl Timing {
    fn of(ms_per_replay: &[f32], units: usize) -> Timing {
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
            units,
        }
    }
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
    let per_replay_ms = kda_runtime::cuda::median(&probe).max(1e-4) as f64;
    let n = ((budget.target_ms / per_replay_ms).ceil() as usize)
        .clamp(budget.min_replays, budget.max_replays);
    let ms = graph.time_replays(dev, n)?;
    Ok(Timing::of(&ms, units))
}

/// TB/s of `bytes` moved in `us` microseconds.
pub fn tbps(bytes: usize, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e12
}

/// One copy measurement (fields in the bench file's key order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyRow {
    /// Bytes read + bytes written per copy.
    #[serde(rename = "bytes_moved")]
    pub bytes: usize,
    pub name: String,
    pub tbps: f64,
    pub timing: Timing,
    /// The copy reproduced its source exactly (checked on a 16 MiB buffer).
    pub verified: bool,
}

/// The copy ceiling: `copy_kernel` variants (block, unroll) over `bytes`
/// bytes (rounded down to whole tiles) and the driver's device-to-device
/// copy, for reference. The ceiling is the best DSL copy.
pub fn copy_ceiling(
    dev: &CudaDevice,
    bytes: usize,
    variants: &[(u32, u32)],
    budget: &Budget,
) -> Result<Vec<CopyRow>, RuntimeError> {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let lcm = variants
        .iter()
        .map(|&(b, u)| copy_tile(b, u) as usize)
        .fold(1, |l, t| l / gcd(l, t) * t);
    let floats = (bytes / 4 / lcm).max(1) * lcm;
    let check_floats = (4usize << 20).div_ceil(lcm) * lcm;
    let fill_f32 = dev.load(&fill_kernel(Scalar::F32))?;
    let src = dev.alloc_zeroed(floats * 4)?;
    let dst = dev.alloc_zeroed(floats * 4)?;
    fill(dev, &fill_f32, &src, floats, 1, 1.0)?;
    fill(dev, &fill_f32, &dst, floats, 2, 1.0)?;
    let check_src = dev.alloc_zeroed(check_floats * 4)?;
    let check_dst = dev.alloc_zeroed(check_floats * 4)?;
    fill(dev, &fill_f32, &check_src, check_floats, 3, 1.0)?;
    let expected = dev.download(&check_src)?;
    let moved = 2 * floats * 4;

    let mut rows = Vec::new();
    for &(block, unroll) in variants {
        let kernel = copy_kernel(block, unroll);
        let module = dev.load(&kernel)?;
        // Poison, copy, compare.
        fill(dev, &fill_f32, &check_dst, check_floats, 4, 1.0)?;
        let small = copy_launch(block, unroll, check_floats);
        dev.launch(&module, &small, &[&check_src, &check_dst])?;
        let verified = dev.download(&check_dst)? == expected;
        let big = copy_launch(block, unroll, floats);
        let graph = Graph::capture(dev, |d| d.launch(&module, &big, &[&src, &dst]))?;
        let timing = time_graph(dev, &graph, 1, budget)?;
        rows.push(CopyRow {
            name: kernel.name.clone(),
            bytes: moved,
            timing,
            tbps: tbps(moved, timing.median_us),
            verified,
        });
    }

    // The driver's copy, launched on the stream (a graph would hold a memcpy node).
    for _ in 0..budget.warmup {
        dev.copy_buffer(&src, &dst)?;
    }
    dev.synchronize()?;
    let per_ms = dev.time(|d| d.copy_buffer(&src, &dst))?.max(1e-4) as f64;
    let n =
        ((budget.target_ms / per_ms).ceil() as usize).clamp(budget.min_replays, budget.max_replays);
    let ms = (0..n)
        .map(|_| dev.time(|d| d.copy_buffer(&src, &dst)))
        .collect::<Result<Vec<_>, _>>()?;
    let timing = Timing::of(&ms, 1);
    fill(dev, &fill_f32, &check_dst, check_floats, 5, 1.0)?;
    dev.copy_buffer(&check_src, &check_dst)?;
    rows.push(CopyRow {
        name: "cuMemcpyDtoDAsync (driver, reference)".into(),
        bytes: moved,
        timing,
        tbps: tbps(moved, timing.median_us),
        verified: dev.download(&check_dst)? == expected,
    });
    Ok(rows)
}

/// One floor measurement: a graph of `nodes` launches of an empty kernel.
#[derive(Clone, Debug)]
pub struct FloorRow {
    pub name: String,
    pub grid: [u32; 3],
    pub block: u32,
    pub cluster: u32,
    pub pdl: bool,
    pub timing: Timing,
}

/// The graph kernel-node floor: `nodes` empty kernels per graph, for each
/// `(block, cluster, grid)` shape, with and without PDL.
pub fn node_floor(
    dev: &CudaDevice,
    shapes: &[(u32, u32, [u32; 3])],
    nodes: usize,
    budget: &Budget,
) -> Result<Vec<FloorRow>, RuntimeError> {
    let mut rows = Vec::new();
    for &(block, cluster, grid) in shapes {
        let kernel = empty_kernel(block, cluster);
        let module = dev.load(&kernel)?;
        for pdl in [false, true] {
            let cfg = LaunchConfig {
                grid,
                pdl,
                syms: vec![],
                scalars: vec![],
            };
            let graph = Graph::capture(dev, |d| {
                (0..nodes).try_for_each(|_| d.launch(&module, &cfg, &[]))
            })?;
            let timing = time_graph(dev, &graph, nodes, budget)?;
            rows.push(FloorRow {
                name: kernel.name.clone(),
                grid,
                block,
                cluster,
                pdl,
                timing,
            });
        }
    }
    Ok(rows)
}

/// One KdaSplit measurement.
#[derive(Clone, Debug)]
pub struct KdaMeasure {
    pub timing: Timing,
    pub resources: KernelResources,
    /// Output elements not finite or never written after the timed replays.
    pub bad_outputs: usize,
    /// The first step against the float64 reference, if checked.
    pub check: Option<Result<(), StepMismatch>>,
}

/// Step 0's results against the reference of its arguments.
fn check_step(cfg: &KdaConfig, args: &KdaArgs, actual: &Actual) -> Result<(), StepMismatch> {
    let expected =
        reference(cfg, args, RawGateOrder::Exact).map_err(StepMismatch::InvalidLaunch)?;
    let report = compare(cfg, args, actual, &expected);
    if report.passed() {
        Ok(())
    } else {
        Err(StepMismatch::Report(Box::new(report)))
    }
}

/// Build and load `cfg`'s kernel, run one step directly (a fault surfaces
/// here, named; with `check`, its results are compared with the float64
/// reference), capture `workload.steps` PDL-chained steps into a graph
/// (step `s` on slot group `s mod groups`) and time its replays.
pub fn measure_kda(
    dev: &CudaDevice,
    workload: &mut Workload<CudaDevice>,
    cfg: &KdaConfig,
    budget: &Budget,
    check: bool,
) -> Result<KdaMeasure, RuntimeError> {
    let (kernel, launch) = workload.kernel(cfg)?;
    let module: CudaKernel = dev.load(&kernel)?;
    workload.poison_output(dev)?;
    let before = if check {
        Some(workload.host_args(dev, 0)?)
    } else {
        None
    };
    workload.launch(dev, &module, &launch, 0)?;
    dev.synchronize()?;
    let check = match before {
        Some(args) => Some(check_step(cfg, &args, &workload.actual(dev)?)),
        None => None,
    };
    let w = &*workload;
    let graph = Graph::capture(dev, |d| {
        (0..w.steps).try_for_each(|s| w.launch(d, &module, &launch, s))
    })?;
    let timing = time_graph(dev, &graph, w.steps, budget)?;
    drop(graph);
    Ok(KdaMeasure {
        timing,
        resources: module.resources(),
        bad_outputs: w.bad_outputs(dev)?,
        check,
    })
}

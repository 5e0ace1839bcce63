//! Measurements on the GPU: the copy ceiling, the graph kernel-node floor
//! and KdaSplit steps, each as the median over many replays of a CUDA
//! graph, timed with events (the same-bytes copy is
//! [`kda_host::bench::same_copy`]'s, shared with `decode-bench`).

use kda_host::bench::trace::{TraceError, Traced, trace_steps};
pub use kda_host::bench::{Budget, Timing, tbps};
use kda_host::bench::{time_driver_copy, time_steps};
use kda_ir::Scalar;
use kda_runtime::{
    CudaDevice, CudaKernel, Device, LaunchConfig, RuntimeError, cuda::KernelResources,
};
use serde::{Deserialize, Serialize};

use super::error::StepMismatch;
use super::kernels::{copy_kernel, copy_launch, copy_tile, empty_kernel, fill, fill_kernel};
use super::workload::Workload;
use crate::args::KdaArgs;
use crate::compare::{Actual, compare};
use crate::config::KdaConfig;
use crate::reference::{RawGateOrder, reference};

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
        let timing = time_steps(dev, 1, budget, |d, _| {
            d.launch(&module, &big, &[&src, &dst])
        })?;
        rows.push(CopyRow {
            name: kernel.name.clone(),
            bytes: moved,
            timing,
            tbps: tbps(moved, timing.median_us),
            verified,
        });
    }

    // The driver's copy, for reference.
    let timing = time_driver_copy(dev, &src, &dst, budget)?;
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
            let timing = time_steps(dev, nodes, budget, |d, _| d.launch(&module, &cfg, &[]))?;
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
    /// The traced run (`bench --trace`) as JSON.
    pub trace: Option<serde_json::Value>,
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
    workload.rotation.launch(dev, &module, &launch, 0)?;
    dev.synchronize()?;
    let check = match before {
        Some(args) => Some(check_step(cfg, &args, &workload.actual(dev)?)),
        None => None,
    };
    let w = &*workload;
    let timing = time_steps(dev, w.steps, budget, |d, s| {
        w.rotation.launch(d, &module, &launch, s)
    })?;
    Ok(KdaMeasure {
        timing,
        resources: module.resources(),
        bad_outputs: w.bad_outputs(dev)?,
        check,
        trace: None,
    })
}

/// `cfg`'s steps on `workload` again, compiled with CTA timeline probes
/// and held to the registers of the plain build `plain` measured
/// ([`kda_host::bench::trace::trace_steps`]).
pub fn trace_kda(
    dev: &CudaDevice,
    workload: &Workload<CudaDevice>,
    cfg: &KdaConfig,
    plain: &KdaMeasure,
    budget: &Budget,
) -> Result<Traced, TraceError> {
    let (kernel, launch) = workload.kernel(cfg)?;
    let r = &plain.resources;
    let (occupancy, _) = crate::kernel::residency(
        r.registers,
        r.static_smem_bytes + r.dyn_smem_bytes,
        cfg.cluster(),
    );
    trace_steps(
        dev,
        &kernel,
        r,
        launch.grid,
        workload.steps,
        budget,
        Some(occupancy.ctas),
        |d, module, s| workload.rotation.launch(d, module, &launch, s),
    )
}

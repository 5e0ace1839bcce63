//! Measurements on the GPU: the driver-copy ceiling and the decode steps,
//! each the median over replays of a CUDA graph, timed with events.

use kda_host::bench::trace::{print_trace, trace_steps};
pub use kda_host::bench::{Budget, Timing, tbps};
use kda_host::bench::{time_driver_copy, time_steps};
use kda_runtime::{CudaDevice, CudaKernel, Device, RuntimeError};

use crate::family::Family;
use crate::workload::Workload;

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
    let timing = time_driver_copy(dev, &src, &dst, budget)?;
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
    trace: bool,
) -> Result<Measure, String> {
    let (kernel, launch) = workload.kernel(family, schedule)?;
    let module: CudaKernel = dev.load(&kernel).map_err(|e| e.to_string())?;
    let run = |w: &mut Workload<F, CudaDevice>| -> Result<Measure, RuntimeError> {
        w.poison_output(dev)?;
        w.rotation.launch(dev, &module, &launch, 0)?;
        dev.synchronize()?;
        let w = &*w;
        let timing = time_steps(dev, w.steps, budget, |d, s| {
            w.rotation.launch(d, &module, &launch, s)
        })?;
        let res = module.resources();
        Ok(Measure {
            timing,
            registers: res.registers,
            smem_bytes: res.static_smem_bytes + res.dyn_smem_bytes,
            local_bytes: res.local_bytes,
            bad_outputs: w.bad_outputs(dev)?,
        })
    };
    let measured = run(workload).map_err(|e| e.to_string())?;
    if trace {
        let res = module.resources();
        let expect = kda_ir::occupancy::ctas_per_sm(
            kernel.launch.block,
            res.registers,
            res.static_smem_bytes + res.dyn_smem_bytes,
        );
        let w = &*workload;
        let traced = trace_steps(
            dev,
            &kernel,
            &res,
            launch.grid,
            w.steps,
            budget,
            Some(expect.ctas),
            |d, m, s| w.rotation.launch(d, m, &launch, s),
        );
        print_trace(&kernel.name, 2, traced);
    }
    Ok(measured)
}

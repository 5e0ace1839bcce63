//! kda-cuda: the CUDA device, kda kernels on an NVIDIA GPU through the driver API
//! (cudarc 0.19, loaded at run time, so the crate builds with no CUDA toolkit).
//!
//! * [`CudaDevice`] implements [`Device`](kda_device::Device): it compiles a kernel with
//!   `kda_ir::pipeline` (verify, schedule, PTX), JIT-loads the PTX (one module
//!   per distinct text) and launches it with
//!   `cuLaunchKernelEx`, passing the kernel's cluster shape and, when asked,
//!   programmatic stream serialization (PDL). Every launch of a device goes to
//!   its one stream, so launches form a stream-ordered chain.
//! * [`Graph`] captures such a chain into a CUDA graph and replays it; it also
//!   times replays with events.
//!
//! No call here panics when the driver or a GPU is missing: [`CudaDevice::new`]
//! returns [`RuntimeError::NoDriver`] and callers fall back to the
//! simulator.

#![warn(missing_docs)]

mod device;
mod error;
mod graph;
mod launch;
mod module;

use kda_device::RuntimeError;

pub use device::{CudaBuffer, CudaDevice};
pub use graph::{Graph, median};
pub use module::{CudaKernel, KernelResources};

/// GPU 0 for a GPU test, or `None` (printing why the test is skipped) when
/// this machine has no CUDA driver. With `KDA_REQUIRE_GPU` set (the staged
/// GPU suite sets it), a missing driver is a failure instead of a skip.
pub fn gpu_or_skip() -> Option<CudaDevice> {
    match CudaDevice::new(0) {
        Ok(dev) => Some(dev),
        Err(RuntimeError::NoDriver(why)) if std::env::var_os("KDA_REQUIRE_GPU").is_none() => {
            println!("skipped: no CUDA driver ({why})");
            None
        }
        Err(e) => panic!("cannot open GPU 0: {e}"),
    }
}

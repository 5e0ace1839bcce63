//! Errors of the runtime. Every variant names the kernel or call it concerns;
//! nothing in the runtime panics on a user mistake or a missing driver.
//!
//! The error modules are the leaves of the crate: [`arg`] (typed-launch
//! arguments) and [`sim`] (the simulator's reports) depend on nothing else
//! in it, and [`RuntimeError`] only on them, so the launch API, the tensors,
//! the typed launches and both devices (`kda-sim`, `kda-cuda`) all build on
//! the errors and never the other way round.

pub mod arg;
pub mod sim;

use thiserror::Error;

#[derive(Debug, Error)]
/// What can go wrong in a launch, a load or a device call.
pub enum RuntimeError {
    /// The launch does not fit the kernel's declarations.
    #[error("bad launch of `{kernel}`: {msg}")]
    BadLaunch {
        /// The kernel concerned.
        kernel: String,
        /// What does not fit.
        msg: String,
    },
    /// No CUDA driver could be loaded on this machine.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// A CUDA driver call failed.
    #[error("{call} failed for `{kernel}`: {msg}")]
    Driver {
        /// The driver entry point that failed (`cuLaunchKernelEx`, ..).
        call: &'static str,
        /// The kernel concerned, or `<none>`.
        kernel: String,
        /// The driver's error.
        msg: String,
    },
    /// The kernel did not verify or compile.
    #[error("kernel `{kernel}` failed to build:\n{msg}")]
    Build {
        /// The kernel concerned.
        kernel: String,
        /// The verifier's, the pipeline's or the JIT's report.
        msg: String,
    },
    /// A typed launch argument does not fit the kernel's declaration.
    #[error(transparent)]
    Arg(#[from] Box<arg::ArgError>),
    /// A device tensor's shape, strides or data do not fit together.
    #[error("device tensor: {0}")]
    Tensor(String),
    /// The simulator stopped: deadlock, out-of-bounds access, tx-byte overflow...
    #[error("{0}")]
    Sim(#[from] sim::SimError),
}

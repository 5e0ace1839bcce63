//! kda-runtime: the same launch API on a CUDA device and on a CPU simulator.
//!
//! A facade over three crates, re-exported under the paths they had when
//! they were modules of this one:
//!
//! * `kda-device` ([`error`], [`launch`], [`tensor`], [`typed`]): the
//!   [`Device`] trait, launch configuration, typed tensors and launches, and
//!   the errors;
//! * `kda-sim` ([`sim`]): the CPU simulator;
//! * `kda-cuda` ([`cuda`]): the CUDA device through cudarc.
//!
//! Only [`any`] ([`AnyDevice`]: the GPU where there is one, else the
//! simulator) lives here, as it needs both devices.

#![warn(missing_docs)]

pub mod any;

pub use kda_cuda as cuda;
pub use kda_device::{error, launch, tensor, typed};
pub use kda_sim as sim;

pub use any::{AnyBuffer, AnyDevice, AnyModule};
pub use cuda::{CudaBuffer, CudaDevice, CudaKernel, Graph};
pub use error::RuntimeError;
pub use launch::{Device, LaunchConfig, ScalarArg, TensorShape, bind_syms, check_launch};
pub use sim::{SimBuffer, SimDevice, SimError, SimOptions};
pub use tensor::{AnyElem, DeviceTensor, Element, ErasedArg, TensorArg, TensorType};
pub use typed::{ArgError, ArgIssue, Launch};

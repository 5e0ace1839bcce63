//! kda-runtime: the same launch API on a CUDA device and on a CPU simulator.

#![warn(missing_docs)]

pub mod any;
pub mod cuda;
pub mod error;
pub mod launch;
pub mod sim;
pub mod tensor;
pub mod typed;

pub use any::{AnyBuffer, AnyDevice, AnyModule};
pub use cuda::{CudaBuffer, CudaDevice, CudaKernel, Graph};
pub use error::RuntimeError;
pub use launch::{Device, LaunchConfig, ScalarArg, TensorShape, bind_syms, check_launch};
pub use sim::{SimBuffer, SimDevice, SimError, SimOptions};
pub use tensor::{AnyElem, DeviceTensor, Element, ErasedArg, TensorArg, TensorType};
pub use typed::{ArgError, ArgIssue, Launch};

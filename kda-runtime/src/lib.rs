//! kda-runtime: the same launch API on a CUDA device and on a CPU simulator.

pub mod error;
pub mod launch;

pub use error::RuntimeError;
pub use launch::{Device, LaunchConfig, ScalarArg, check_launch};

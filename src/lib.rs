//! kda: write fused recurrent GPU kernels as `#[cluster_kernel]` Rust functions.
//!
//! This facade re-exports the three layers: the macro (`kda-macros`), the IR
//! and PTX backend (`kda-ir`) and the launch runtime with its CPU simulator
//! (`kda-runtime`).

pub use kda_ir as ir;
pub use kda_macros::cluster_kernel;
pub use kda_runtime as runtime;

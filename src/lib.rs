//! kda: write fused recurrent GPU kernels as `#[cluster_kernel]` Rust functions.
//!
//! This facade re-exports the three layers: the macro (`kda-macros`), the IR
//! and PTX backend (`kda-ir`) and the launch runtime with its CPU simulator
//! (`kda-runtime`), and holds [`dsl`], the tracing support the macro's
//! expansion calls.

// Expansions name `::kda`, also inside this crate's own tests and docs.
extern crate self as kda;

pub mod dsl;

pub use kda_ir as ir;
pub use kda_macros::cluster_kernel;
pub use kda_runtime as runtime;

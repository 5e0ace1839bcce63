//! kda: write fused recurrent GPU kernels as `#[cluster_kernel]` Rust functions.
//!
//! This facade re-exports the four layers: the macro (`kda-macros`), the
//! tracing support its expansion calls ([`dsl`], `kda-dsl`), the IR and PTX
//! backend (`kda-ir`) and the launch runtime with its CPU simulator
//! (`kda-runtime`). Expansions name their paths through this crate
//! (`::kda::dsl`, `::kda::ir`), so a kernel crate depends on `kda` alone.

pub use kda_dsl as dsl;
pub use kda_ir as ir;
pub use kda_macros::cluster_kernel;
pub use kda_runtime as runtime;

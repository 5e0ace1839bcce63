//! kda-device: what every kda device shares, the GPU (`kda-cuda`) and the CPU
//! simulator (`kda-sim`) alike, and what `kda-runtime` re-exports.
//!
//! The modules form a chain with the errors at the bottom; each uses only
//! those listed before it:
//!
//! * [`error`]: [`RuntimeError`], with its leaves [`error::arg`] (a typed
//!   launch's [`ArgError`]) and [`error::sim`] (the simulator's
//!   [`SimError`] reports);
//! * [`launch`]: the [`Device`] trait, [`LaunchConfig`], [`ScalarArg`] and
//!   the checks of a launch against the kernel ([`check_launch`],
//!   [`bind_syms`]);
//! * [`tensor`]: typed device tensors ([`DeviceTensor`], [`TensorArg`],
//!   [`ErasedArg`]);
//! * [`typed`]: typed launches by parameter name ([`typed::bind`]), which
//!   `#[cluster_kernel]`'s generated `Args::launch` calls.

#![warn(missing_docs)]

pub mod error;
pub mod launch;
pub mod tensor;
pub mod typed;

pub use error::RuntimeError;
pub use error::arg::{ArgError, ArgIssue};
pub use error::sim::SimError;
pub use launch::{Device, LaunchConfig, ScalarArg, TensorShape, bind_syms, check_launch};
pub use tensor::{AnyElem, DeviceTensor, Element, ErasedArg, TensorArg, TensorType};
pub use typed::Launch;

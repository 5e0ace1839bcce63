//! KdaSplit, the fused KDA decode / spec-verify kernel, on the host side: its
//! configuration, arguments and their contract, a float64 reference, a seeded
//! case generator, and the safetensors case files that carry cases between
//! tools (spec: `../shared/spec/KDA.md`).

pub mod args;
pub mod case;
pub mod compare;
pub mod config;
pub mod generator;
pub mod kernel;
pub mod reference;
pub mod round;
pub mod run;
pub mod validate;

pub use args::{Arg, DType, HostData, HostTensor, KdaArgs, TensorError};
pub use case::{Case, CaseError, CaseMeta};
pub use compare::{Actual, Check, Measure, Report, compare};
pub use config::{ConfigError, GateMode, KdaConfig, Schedule};
pub use generator::{ConvLayout, DtBias, GateInputs, GenOptions, generate};
pub use reference::{Expected, RawGateOrder, Request, reference, resolve};
pub use validate::{ArgError, validate, validate_layout};

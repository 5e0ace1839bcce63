//! KdaSplit, the fused KDA decode / spec-verify kernel, on the host side: its
//! configuration, arguments and their contract, a float64 reference, a seeded
//! case generator, and the safetensors case files that carry cases between
//! tools (spec: `../shared/spec/KDA.md`). What other kernels share with it
//! lives in `kda-host` (host side) and `kda-std` (traced fragments); the
//! modules here re-export those parts at their old paths.

pub mod args;
pub mod bench;
pub mod case;
pub mod compare;
pub mod config;
pub mod generator;
pub mod kernel;
pub mod object;
pub mod reference;
pub use kda_host::round;
pub mod run;
pub use kda_host::testing;
pub mod tuned;
pub mod validate;

pub use args::{Arg, DType, HostData, HostTensor, KdaArgs, TensorError};
pub use case::{Case, CaseError, CaseMeta};
pub use compare::{Actual, Check, Footprint, Measure, Report, compare, compare_footprint};
pub use config::{ConfigError, GateMode, KdaConfig, Schedule};
pub use generator::{
    ConvLayout, DtBias, GateInputs, GenOptions, SlotOptions, generate, slot_table,
};
pub use object::{KdaSplitKernel, ScheduleChoice};
pub use reference::{Expected, RawGateOrder, Request, reference, resolve, resolve_slots};
pub use tuned::{RawSchedule, Tuned, TunedPoint, TunedTable, tuned_schedule};
pub use validate::{
    ArgError, SlotError, SlotRef, SlotTensor, check_slot_table, validate, validate_layout,
};

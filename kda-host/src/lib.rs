//! The host side the kda decode kernels share (KdaSplit, GDN, Mamba-2): strided
//! host tensors, correctly rounded bf16, the slot-table semantics and checks
//! of their caches, seeded generators, the comparison with the references'
//! results, safetensors case files, a runner for any `kda_runtime::Device`,
//! the benchmarks' graph timing, rotating state, reference kernels and
//! same-bytes copy ([`mod@bench`]), the analysis of CTA timeline probe
//! buffers ([`probe`]), and test helpers. Nothing here knows a
//! particular kernel: each kernel's crate names its arguments (a
//! [`KernelArgs`] and a [`validate::TensorArg`]) and builds its reference,
//! checks and generator on top.

#![warn(missing_docs)]

pub mod args;
pub mod bench;
pub mod case;
pub mod compare;
pub mod generator;
pub mod kernel;
pub mod probe;
pub mod reference;
pub mod round;
pub mod run;
pub mod tensor;
pub mod testing;
pub mod validate;

pub use args::KernelArgs;
pub use compare::{
    Actual, Check, Footprint, Measure, OUTPUT_LIMIT, Report, STATE_LIMIT, compare_footprint,
    compare_valid, max_abs_error, rel_error, slot_footprint, ulp_distance,
};
pub use generator::{
    ConvLayout, Draw, OUTPUT_SENTINEL, PAD_SLOT, SlotOptions, sentinel_output, slot_table, to_f32,
};
pub use reference::{Expected, Request, resolve_slots};
pub use round::bf16_rne;
pub use run::{Chosen, Prepared, RunError, gpu_or_sim};
pub use tensor::{DType, HostData, HostTensor, TensorError, dtype_list};
pub use validate::{
    Checker, Dim, LayoutIssue, ShapePattern, SlotError, SlotRef, SlotTensor, TensorArg,
    check_slot_table, with_slot_table,
};

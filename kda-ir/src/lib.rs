//! kda-ir: the typed SSA IR of kda with structured regions, its text form,
//! verifier, scheduling passes and the sm_90a PTX backend.

#![warn(missing_docs)]

pub mod builder;
pub mod desc;
pub mod entities;
pub mod kernel;
pub mod loc;
pub mod occupancy;
pub mod op;
pub mod parse;
pub mod passes;
pub mod pipeline;
pub mod ptx;
pub mod ptxas;
#[doc(hidden)]
pub mod testkernels;
pub mod types;
pub mod verifier;
pub mod wgmma;
pub mod write;

pub use builder::Builder;
pub use entities::{Barrier, Buffer, Inst, Region, Role, ScalarParam, Sym, Tensor, Value};
pub use kernel::{Access, ClusterPolicy, Dim, Kernel, LaunchDecl, Provenance, ScheduleHints};
pub use loc::Loc;
pub use op::{BinOp, CachePolicy, CmpOp, Op, ShflMode, Special, UnOp};
pub use types::{Scalar, Type};

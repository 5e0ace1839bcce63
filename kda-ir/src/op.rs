//! The op table. Each operation is one variant of [`Op`]: its immediates and
//! entity references live in the variant, its SSA operands in
//! [`InstData::args`], its results in [`InstData::results`]. [`Op::name`] is the
//! text form shared by the printer, the parser and error reports; the
//! signature comments below are what the verifier checks.
//!
//! Operand conventions: global memory is always addressed as a tensor plus one
//! `i32`/`i64` index per dimension (so the checker knows which tensor is read
//! and the simulator can bounds-check it); shared memory as a buffer plus one
//! element index.

use crate::entities::Value;
use crate::entities::{Barrier, Buffer, Region, Role, ScalarParam, Tensor};
use crate::loc::Loc;

/// Hardware indices a kernel can read.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Special {
    /// `%tid.x`: the thread's index in the block.
    ThreadIdx,
    /// `%ctaid.{x,y,z}`.
    BlockIdx(u8),
    /// `%nctaid.{x,y,z}`.
    GridDim(u8),
    /// `%cluster_ctarank`: the CTA's rank in its cluster.
    ClusterRank,
    /// `%laneid`.
    LaneId,
}

/// Binary arithmetic on two operands of the same type (ints or floats).
///
/// Semantics shared by the PTX backend and the simulator: integer `add`,
/// `sub`, `mul` wrap; f32 ops round once to nearest even (never contracted
/// into an fma); bf16 ops compute in f32 and round the result to bf16
/// (nearest even).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Integer division truncates toward zero (per signedness); float
    /// division is IEEE (`div.rn`). Integer division by zero is unspecified.
    Div,
    /// Integer remainder (ints only), sign of the dividend (per signedness).
    Rem,
    /// Float `min`/`max` return the other operand when one is NaN.
    Min,
    Max,
    /// Bitwise / logical ops: ints and `bool`.
    And,
    Or,
    Xor,
    /// Shifts: ints only; `Shr` is arithmetic on signed types. The amount is
    /// read as unsigned and clamps at the width (PTX semantics, not Rust's
    /// masking): `shl` and unsigned `shr` by >= width give 0, signed `shr`
    /// gives the sign fill.
    Shl,
    Shr,
}

/// Unary operations. `fast` selects the approximate hardware instruction
/// (`ex2.approx.ftz`, `rcp.approx.ftz`, `rsqrt.approx`; subnormals flush to
/// zero); otherwise the result is correctly rounded (`sqrt`, `rcp`, `rsqrt`
/// as `1 / sqrt`, `sigmoid` as `1 / (1 + exp(-x))` with IEEE division) or,
/// for `exp`/`exp2`, within 1 ulp.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum UnOp {
    Neg,
    /// Bitwise not (ints, bool).
    Not,
    Abs,
    Exp {
        fast: bool,
    },
    Exp2 {
        fast: bool,
    },
    /// `1/sqrt(x)`; PTX only has the approximate form, `fast: false` computes
    /// `1 / sqrt.rn(x)` with IEEE division.
    Rsqrt {
        fast: bool,
    },
    Sqrt,
    /// `1 / (1 + e^-x)`.
    Sigmoid {
        fast: bool,
    },
    Rcp {
        fast: bool,
    },
    /// `log2(x)`, approximate only (`lg2.approx.ftz.f32`: subnormals flush to
    /// zero, max relative error about 2^-22): there is no IEEE form.
    Log2Approx,
}

#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// L2 cache policy of a global access.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum CachePolicy {
    #[default]
    Normal,
    EvictFirst,
}

#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ShflMode {
    /// `shfl.sync.bfly`: exchange with `lane ^ mask`.
    Bfly,
    /// `shfl.sync.idx`: read from the given lane.
    Idx,
}

/// One operation. Signatures: `args -> results`.
#[derive(Clone, PartialEq, Debug)]
pub enum Op {
    // ---- constants and indices
    /// `-> int` (result type given by the result value).
    IConst(i64),
    /// `-> f32 | bf16`.
    FConst(f64),
    /// `-> u32`.
    Special(Special),
    /// `-> ty(param)`.
    Param(ScalarParam),

    // ---- arithmetic
    /// `a, b -> ty(a)`.
    Bin(BinOp),
    /// `a, b, c -> a*b+c` (f32); `ftz` flushes denormals.
    Fma { ftz: bool },
    /// `a -> ty(a)`.
    Un(UnOp),
    /// `a, b -> bool`. Float comparisons are ordered (false with a NaN)
    /// except `ne`, which holds when either operand is NaN, as in Rust.
    Cmp(CmpOp),
    /// `cond: bool, a, b -> ty(a)`.
    Select,
    /// `a -> result type`: value conversion. Float to int truncates toward
    /// zero and saturates, NaN giving 0 (Rust's `as`); int to float and f32 to
    /// bf16 round once to nearest even; int widening extends by the source's
    /// signedness, narrowing keeps the low bits.
    Cvt,
    /// `a -> result type` of the same byte size: reinterpretation.
    Bitcast,
    /// `s0..sN -> vector of N` (all the same scalar type).
    Pack,
    /// `vec -> scalar` (lane index).
    Extract(u8),

    // ---- memory
    /// `idx0..idxR -> ty`: load `ty` (scalar or vector of 2/4/8 elements of the
    /// tensor's dtype, 4/8/16 bytes) at the element index.
    LdGlobal { tensor: Tensor, policy: CachePolicy },
    /// `idx0..idxR, value [, pred] ->`: store; with `pred`, only where it holds.
    StGlobal {
        tensor: Tensor,
        policy: CachePolicy,
        predicated: bool,
    },
    /// `idx -> ty`: load from this CTA's shared buffer at an element index.
    LdShared { buffer: Buffer },
    /// `idx, value ->`.
    StShared { buffer: Buffer },

    // ---- warp collectives
    /// `value, lane_or_mask -> ty(value)` (32-bit values).
    Shfl(ShflMode),
    /// `-> bool`: true in exactly one lane of the (full) warp.
    ElectSync,
    /// `a: u32x4, b: u32x2, c: f32x4 -> f32x4`: `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32`.
    Mma16816,
    /// `->`: `bar.warp.sync` of the whole warp (CUDA's `__syncwarp()`): the
    /// lanes wait for each other, and each lane's memory accesses before it
    /// are ordered before the other lanes' accesses after it.
    WarpSync,

    // ---- barriers and fences
    /// `->`: initialise with the declared arrival count.
    MbarInit { barrier: Barrier },
    /// `->`: one arrival.
    MbarArrive { barrier: Barrier },
    /// `->`: one arrival that also expects `bytes` of transactions this phase.
    MbarArriveExpectTx { barrier: Barrier, bytes: u32 },
    /// `->`: wait until the `phase`-th completion (parity `phase & 1`).
    MbarWait { barrier: Barrier, phase: u32 },
    /// `fence.mbarrier_init.release.cluster`.
    FenceMbarInit,
    /// `fence.proxy.async.shared::cta`.
    FenceProxyAsync,
    /// `barrier.cluster.arrive[.relaxed]`.
    ClusterArrive { relaxed: bool },
    /// `barrier.cluster.wait`.
    ClusterWait,
    /// `bar.sync id, threads`: a named barrier among `threads` threads.
    BarSync { id: u8, threads: u32 },

    // ---- DSMEM and async copies
    /// `idx, value, cta ->`: `st.async` of `value` into `buffer[idx]` of CTA
    /// `cta` in the cluster, completing `size(value)` transaction bytes on that
    /// CTA's `barrier`.
    StAsync { buffer: Buffer, barrier: Barrier },
    /// `sidx, gidx0..gidxR ->`: 16-byte `cp.async.cg` global -> shared.
    CpAsync { buffer: Buffer, tensor: Tensor },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n`.
    CpAsyncWait(u32),
    /// `sidx, gidx0..gidxR ->`: `cp.async.bulk` of `bytes` from the tensor into
    /// the buffer, completing them on `barrier`.
    BulkCopy {
        buffer: Buffer,
        tensor: Tensor,
        barrier: Barrier,
        bytes: u32,
        policy: CachePolicy,
    },

    // ---- programmatic dependent launch
    /// `griddepcontrol.wait`: the preceding launch's outputs are visible after.
    GridDepWait,
    /// `griddepcontrol.launch_dependents`.
    GridDepLaunch,

    // ---- structure
    /// `cond -> results`: `then` and `els` yield the results.
    If { then: Region, els: Region },
    /// `lo, hi, step, init.. -> results`: body params `(iv, carried..)`, yields carried.
    For { body: Region },
    /// `init.. -> results`: `cond` (params = carried) yields `bool, carried..`;
    /// `body` (params = carried) yields carried.
    While { cond: Region, body: Region },
    /// `->`: `body` runs only in the role's threads.
    InRole { role: Role, body: Region },
    /// Region terminator: `values ->`.
    Yield,
}

impl Op {
    /// The op's name in the text form.
    pub fn name(&self) -> &'static str {
        match self {
            Op::IConst(_) => "iconst",
            Op::FConst(_) => "fconst",
            Op::Special(_) => "special",
            Op::Param(_) => "param",
            Op::Bin(b) => match b {
                BinOp::Add => "add",
                BinOp::Sub => "sub",
                BinOp::Mul => "mul",
                BinOp::Div => "div",
                BinOp::Rem => "rem",
                BinOp::Min => "min",
                BinOp::Max => "max",
                BinOp::And => "and",
                BinOp::Or => "or",
                BinOp::Xor => "xor",
                BinOp::Shl => "shl",
                BinOp::Shr => "shr",
            },
            Op::Fma { .. } => "fma",
            Op::Un(u) => match u {
                UnOp::Neg => "neg",
                UnOp::Not => "not",
                UnOp::Abs => "abs",
                UnOp::Exp { .. } => "exp",
                UnOp::Exp2 { .. } => "exp2",
                UnOp::Rsqrt { .. } => "rsqrt",
                UnOp::Sqrt => "sqrt",
                UnOp::Sigmoid { .. } => "sigmoid",
                UnOp::Rcp { .. } => "rcp",
                UnOp::Log2Approx => "lg2.approx",
            },
            Op::Cmp(_) => "cmp",
            Op::Select => "select",
            Op::Cvt => "cvt",
            Op::Bitcast => "bitcast",
            Op::Pack => "pack",
            Op::Extract(_) => "extract",
            Op::LdGlobal { .. } => "ld.global",
            Op::StGlobal { .. } => "st.global",
            Op::LdShared { .. } => "ld.shared",
            Op::StShared { .. } => "st.shared",
            Op::Shfl(_) => "shfl",
            Op::ElectSync => "elect",
            Op::Mma16816 => "mma.m16n8k16",
            Op::WarpSync => "warp.sync",
            Op::MbarInit { .. } => "mbarrier.init",
            Op::MbarArrive { .. } => "mbarrier.arrive",
            Op::MbarArriveExpectTx { .. } => "mbarrier.arrive.expect_tx",
            Op::MbarWait { .. } => "mbarrier.wait",
            Op::FenceMbarInit => "fence.mbarrier_init",
            Op::FenceProxyAsync => "fence.proxy.async",
            Op::ClusterArrive { .. } => "cluster.arrive",
            Op::ClusterWait => "cluster.wait",
            Op::BarSync { .. } => "bar.sync",
            Op::StAsync { .. } => "st.async",
            Op::CpAsync { .. } => "cp.async",
            Op::CpAsyncCommit => "cp.async.commit",
            Op::CpAsyncWait(_) => "cp.async.wait",
            Op::BulkCopy { .. } => "cp.async.bulk",
            Op::GridDepWait => "pdl.wait",
            Op::GridDepLaunch => "pdl.launch_dependents",
            Op::If { .. } => "if",
            Op::For { .. } => "for",
            Op::While { .. } => "while",
            Op::InRole { .. } => "role",
            Op::Yield => "yield",
        }
    }

    /// Nested regions, in order.
    pub fn regions(&self) -> Vec<Region> {
        match *self {
            Op::If { then, els } => vec![then, els],
            Op::For { body } => vec![body],
            Op::While { cond, body } => vec![cond, body],
            Op::InRole { body, .. } => vec![body],
            _ => vec![],
        }
    }

    /// Warp collectives must run in warp-uniform control flow.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Op::Shfl(_) | Op::ElectSync | Op::Mma16816 | Op::WarpSync
        )
    }

    /// Ops whose effect is visible outside the thread (never removed, never reordered
    /// across each other by the scheduler).
    pub fn has_side_effects(&self) -> bool {
        !matches!(
            self,
            Op::IConst(_)
                | Op::FConst(_)
                | Op::Special(_)
                | Op::Param(_)
                | Op::Bin(_)
                | Op::Fma { .. }
                | Op::Un(_)
                | Op::Cmp(_)
                | Op::Select
                | Op::Cvt
                | Op::Bitcast
                | Op::Pack
                | Op::Extract(_)
        )
    }
}

/// One instruction: an op, its SSA operands, its results and where it came from.
#[derive(Clone, Debug)]
pub struct InstData {
    pub op: Op,
    pub args: Vec<Value>,
    pub results: Vec<Value>,
    pub loc: Loc,
}

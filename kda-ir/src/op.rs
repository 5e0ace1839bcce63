//! The ops. Each operation is one variant of [`Op`]: its immediates and
//! entity references live in the variant, its SSA operands in
//! [`InstData::args`], its results in [`InstData::results`]. Each variant maps
//! to one row of the op table ([`Opcode`], in `op/table.rs`), which spells the
//! mnemonic once for the printer, the parser and error reports, with the
//! modifier it may carry, its operand and result types ([`Sig`], what the
//! verifier checks) and its [`Effects`] (what the passes may move or drop).
//!
//! Operand conventions: global memory is always addressed as a tensor plus one
//! `i32`/`i64` index per dimension (so the checker knows which tensor is read
//! and the simulator can bounds-check it); shared memory as a buffer plus one
//! element index.

use crate::entities::Value;
use crate::entities::{Barrier, Buffer, Region, Role, ScalarParam, Tensor};
use crate::loc::Loc;

mod table;

pub use table::{Arg, Arity, Class, Effects, Modifier, Opcode, Sig, Ty};

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
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b` (the low half for ints: `mul.lo`).
    Mul,
    /// Integer division truncates toward zero (per signedness); float
    /// division is IEEE (`div.rn`). Integer division by zero is unspecified.
    Div,
    /// Integer remainder (ints only), sign of the dividend (per signedness).
    Rem,
    /// Float `min`/`max` return the other operand when one is NaN.
    Min,
    /// The larger operand (NaN as for [`BinOp::Min`]).
    Max,
    /// Bitwise / logical ops: ints and `bool`.
    And,
    /// Bitwise / logical or: ints and `bool`.
    Or,
    /// Bitwise / logical exclusive or: ints and `bool`.
    Xor,
    /// Shifts: ints only; `Shr` is arithmetic on signed types. The amount is
    /// read as unsigned and clamps at the width (PTX semantics, not Rust's
    /// masking): `shl` and unsigned `shr` by >= width give 0, signed `shr`
    /// gives the sign fill.
    Shl,
    /// Right shift (see [`BinOp::Shl`]).
    Shr,
}

/// Unary operations. `fast` selects the approximate hardware instruction
/// (`ex2.approx.ftz`, `rcp.approx.ftz`, `rsqrt.approx`; subnormals flush to
/// zero); otherwise the result is correctly rounded (`sqrt`, `rcp`, `rsqrt`
/// as `1 / sqrt`, `sigmoid` as `1 / (1 + exp(-x))` with IEEE division) or,
/// for `exp`/`exp2`, within 1 ulp.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum UnOp {
    /// `-a`: signed ints (wrapping) or floats.
    Neg,
    /// Bitwise not (ints, bool).
    Not,
    /// `|a|`: signed ints or floats.
    Abs,
    /// `e^x`.
    Exp {
        /// `ex2.approx.ftz` of `x * log2(e)`.
        fast: bool,
    },
    /// `2^x`.
    Exp2 {
        /// `ex2.approx.ftz`.
        fast: bool,
    },
    /// `1/sqrt(x)`; PTX only has the approximate form, `fast: false` computes
    /// `1 / sqrt.rn(x)` with IEEE division.
    Rsqrt {
        /// `rsqrt.approx`.
        fast: bool,
    },
    /// `sqrt.rn`: correctly rounded.
    Sqrt,
    /// `1 / (1 + e^-x)`.
    Sigmoid {
        /// `ex2.approx.ftz` and `rcp.approx.ftz` in place of the exact exponential and
        /// the IEEE division.
        fast: bool,
    },
    /// `1 / x` (`rcp.rn`).
    Rcp {
        /// `rcp.approx.ftz`.
        fast: bool,
    },
    /// `log2(x)`, approximate only (`lg2.approx.ftz.f32`: subnormals flush to
    /// zero, max relative error about 2^-22): there is no IEEE form.
    Log2Approx,
}

/// A comparison ([`Op::Cmp`]); ints compare by their signedness.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum CmpOp {
    /// `a == b`.
    Eq,
    /// `a != b` (true when either is NaN).
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

/// L2 cache policy of a global access.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum CachePolicy {
    /// No hint: the L2's default replacement.
    #[default]
    Normal,
    /// `.L2::cache_hint` with an `evict_first` policy (`createpolicy` once per
    /// kernel): streamed data that should not displace what is reused.
    EvictFirst,
}

/// Which lane a [`Op::Shfl`] reads.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ShflMode {
    /// `shfl.sync.bfly`: exchange with `lane ^ mask`.
    Bfly,
    /// `shfl.sync.idx`: read from the given lane.
    Idx,
}

impl Special {
    /// Every register the text form names (the axis of `BlockIdx`/`GridDim` is 0..3).
    pub const ALL: [Special; 9] = [
        Special::ThreadIdx,
        Special::LaneId,
        Special::ClusterRank,
        Special::BlockIdx(0),
        Special::BlockIdx(1),
        Special::BlockIdx(2),
        Special::GridDim(0),
        Special::GridDim(1),
        Special::GridDim(2),
    ];

    /// The register's name in the text form (`special tid`, `special ctaid.y`).
    pub fn name(self) -> &'static str {
        // An axis past z (which the verifier rejects) still prints.
        let axis = |d: u8| d as usize % 3;
        match self {
            Special::ThreadIdx => "tid",
            Special::BlockIdx(d) => ["ctaid.x", "ctaid.y", "ctaid.z"][axis(d)],
            Special::GridDim(d) => ["nctaid.x", "nctaid.y", "nctaid.z"][axis(d)],
            Special::ClusterRank => "cluster_rank",
            Special::LaneId => "laneid",
        }
    }
}

impl CmpOp {
    /// Every comparison (what the parser tries a `cmp.` modifier against).
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    /// The comparison's modifier in the text form (`cmp.le`).
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }
}

impl ShflMode {
    /// Every mode (what the parser tries a `shfl.` modifier against).
    pub const ALL: [ShflMode; 2] = [ShflMode::Bfly, ShflMode::Idx];

    /// The mode's modifier in the text form (`shfl.bfly`).
    pub fn name(self) -> &'static str {
        match self {
            ShflMode::Bfly => "bfly",
            ShflMode::Idx => "idx",
        }
    }
}

/// A mnemonic as written, split by the op table.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Mnemonic {
    /// An opcode with no modifier, or with its optional flag on or off.
    Plain(Opcode, bool),
    /// `cmp.<op>`.
    Cmp(CmpOp),
    /// `shfl.<mode>`.
    Shfl(ShflMode),
    /// `extract.<lane>`.
    Extract(u8),
}

/// Why a mnemonic does not name an op.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum MnemonicError {
    /// No opcode, or a modifier the opcode does not take.
    Unknown,
    /// `extract.` followed by something other than a lane number.
    BadLane,
}

impl Opcode {
    /// Split `m` into its opcode and modifier: `m` itself when it names an
    /// opcode, else the first prefix up to a `.` that names an opcode taking a
    /// modifier, with the rest as that modifier (`cluster.arrive` + `relaxed`,
    /// `cp.async.bulk` + `evict_first`).
    pub fn parse_mnemonic(m: &str) -> Result<Mnemonic, MnemonicError> {
        if let Some(code) = Opcode::from_name(m) {
            return match code.modifier() {
                Modifier::Cmp | Modifier::Shfl | Modifier::Lane => Err(MnemonicError::Unknown),
                _ => Ok(Mnemonic::Plain(code, false)),
            };
        }
        for (dot, _) in m.match_indices('.') {
            let (base, rest) = (&m[..dot], &m[dot + 1..]);
            let Some(code) = Opcode::from_name(base) else {
                continue;
            };
            let modifier = code.modifier();
            return match modifier {
                Modifier::None => continue,
                Modifier::Cmp => CmpOp::ALL
                    .into_iter()
                    .find(|c| c.name() == rest)
                    .map(Mnemonic::Cmp)
                    .ok_or(MnemonicError::Unknown),
                Modifier::Shfl => ShflMode::ALL
                    .into_iter()
                    .find(|s| s.name() == rest)
                    .map(Mnemonic::Shfl)
                    .ok_or(MnemonicError::Unknown),
                Modifier::Lane => rest
                    .parse::<u8>()
                    .map(Mnemonic::Extract)
                    .map_err(|_| MnemonicError::BadLane),
                _ if modifier.flag() == Some(rest) => Ok(Mnemonic::Plain(code, true)),
                // A longer mnemonic may start with this one
                // (`cp.async.bulk` + `store.evict_first`).
                _ => continue,
            };
        }
        Err(MnemonicError::Unknown)
    }
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
    Fma {
        /// `fma.rn.ftz`: subnormal inputs and results flush to zero.
        ftz: bool,
    },
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
    LdGlobal {
        /// The tensor read.
        tensor: Tensor,
        /// The load's L2 policy.
        policy: CachePolicy,
    },
    /// `idx0..idxR, value [, pred] ->`: store; with `pred`, only where it holds.
    StGlobal {
        /// The tensor written.
        tensor: Tensor,
        /// The store's L2 policy.
        policy: CachePolicy,
        /// Whether the last operand is a `bool` that guards the store.
        predicated: bool,
    },
    /// `idx0..idxR, addend -> ty`: `atom.global.add` (relaxed, GPU scope)
    /// of a 32-bit integer element; the result is the element's value
    /// before the add. Adds to one element from any thread of any CTA never
    /// race: each is one indivisible read-modify-write, and every thread
    /// sees them in one order (a work queue's ticket counter).
    AtomAdd {
        /// The tensor updated (`u32` or `i32`).
        tensor: Tensor,
    },
    /// `idx -> ty`: load from this CTA's shared buffer at an element index.
    LdShared {
        /// The buffer read.
        buffer: Buffer,
    },
    /// `idx, value ->`.
    StShared {
        /// The buffer written (this CTA's).
        buffer: Buffer,
    },

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
    MbarInit {
        /// The barrier; its arrival count is in its declaration.
        barrier: Barrier,
    },
    /// `[ring index] ->`: one arrival. With `ring > 0` the barrier is element
    /// `index` of the `ring` consecutive barriers starting at `barrier`
    /// (the same for every op that has a `ring`).
    MbarArrive {
        /// The barrier, or the first barrier of the ring.
        barrier: Barrier,
        /// The ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `[ring index] ->`: one arrival that also expects `bytes` of transactions this phase.
    MbarArriveExpectTx {
        /// The barrier, or the first barrier of the ring.
        barrier: Barrier,
        /// Transaction bytes the current phase waits for (1 to 2^20 - 1).
        bytes: u32,
        /// The ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `cta [, ring index] ->`: one arrival on `barrier` of CTA `cta` of the
    /// cluster (`mapa` + `mbarrier.arrive.release.cluster.shared::cluster`):
    /// how a consumer in one CTA releases a ring stage whose producer lives in
    /// another (the ring's "empty" barrier, counted in arrivals). The
    /// arrival releases this thread's earlier accesses at cluster scope, and
    /// every wait on a barrier that remote arrivals reach acquires at cluster
    /// scope (`mbarrier.try_wait.parity.acquire.cluster`), so the consumer's
    /// reads of the stage happen before the producer's next writes into it.
    MbarArriveRemote {
        /// The barrier (at its offset in CTA `cta`'s shared memory), or the
        /// first barrier of its ring.
        barrier: Barrier,
        /// The ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `->`: wait until the `phase`-th completion (parity `phase & 1`).
    MbarWait {
        /// The barrier waited on.
        barrier: Barrier,
        /// Which completion, counted from 0 after `mbarrier.init`. Only its
        /// parity reaches the hardware (`mbarrier.try_wait.parity`), so the
        /// wait must run after completion `phase - 1` and before `phase + 1`.
        phase: u32,
    },
    /// `parity: u32 [, ring index] ->`: wait until the barrier's current
    /// phase parity differs from `parity & 1` (`mbarrier.try_wait.parity`
    /// with a register parity): the phase with that parity has completed.
    /// On a fresh barrier a wait for parity 1 passes at once (the phase
    /// "before" phase 0 counts as completed), which is how a ring's empty
    /// barriers start released. The builder emits it for waits inside
    /// runtime loops, where the parity is loop-carried state.
    MbarWaitParity {
        /// The barrier, or the first barrier of the ring.
        barrier: Barrier,
        /// The ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `fence.mbarrier_init.release.cluster`.
    FenceMbarInit,
    /// `fence.proxy.async.shared::cta`.
    FenceProxyAsync,
    /// `barrier.cluster.arrive[.relaxed]`.
    ClusterArrive {
        /// `.relaxed`: no release, so this thread's earlier memory accesses
        /// are not ordered before the peers' `cluster.wait`.
        relaxed: bool,
    },
    /// `barrier.cluster.wait`.
    ClusterWait,
    /// `bar.sync id, threads`: a named barrier among `threads` threads.
    BarSync {
        /// The named barrier, 0..16.
        id: u8,
        /// How many threads arrive: a positive multiple of 32, at most the block.
        threads: u32,
    },

    // ---- DSMEM and async copies
    /// `idx, value, cta [, ring index] ->`: `st.async` of `value` into
    /// `buffer[idx]` of CTA `cta` in the cluster, completing `size(value)`
    /// transaction bytes on that CTA's `barrier` (with `ring > 0`, on element
    /// `index` of the ring from `barrier`).
    StAsync {
        /// The buffer written, at its offset in CTA `cta`'s shared memory.
        buffer: Buffer,
        /// The mbarrier of CTA `cta` that receives the transaction bytes,
        /// or the first barrier of its ring.
        barrier: Barrier,
        /// The ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `sidx, gidx0..gidxR ->`: 16-byte `cp.async.cg` global -> shared.
    CpAsync {
        /// The destination (this CTA's).
        buffer: Buffer,
        /// The source.
        tensor: Tensor,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n`.
    CpAsyncWait(u32),
    /// `sidx, gidx0..gidxR ->`: `cp.async.bulk` of `bytes` from the tensor into
    /// the buffer, completing them on `barrier`.
    BulkCopy {
        /// The destination (this CTA's), 16-byte aligned.
        buffer: Buffer,
        /// The source, 16-byte aligned.
        tensor: Tensor,
        /// The mbarrier the bytes complete on, or the first of its ring.
        barrier: Barrier,
        /// Bytes copied: a positive multiple of 16, at most the buffer.
        bytes: u32,
        /// The read's L2 policy.
        policy: CachePolicy,
        /// The barrier ring's length; 0 for a single barrier.
        ring: u32,
    },
    /// `sidx, gidx0..gidxR ->`: `cp.async.bulk.global.shared::cta.bulk_group`
    /// of `bytes` from the buffer into the tensor, in the issuing thread's
    /// open bulk group ([`Op::BulkCommit`] closes it, [`Op::BulkWait`] waits
    /// for it). The bytes reach global memory asynchronously; the shared
    /// source may be overwritten only after a `cp.async.bulk.wait.read`
    /// covering the group, and the destination read back only after a
    /// `cp.async.bulk.wait`. Generic-proxy writes of the source
    /// (`st.shared`) must be ordered before it by `fence.proxy.async`.
    BulkStore {
        /// The source (this CTA's), 16-byte aligned.
        buffer: Buffer,
        /// The destination, 16-byte aligned.
        tensor: Tensor,
        /// Bytes stored: a positive multiple of 16, at most the buffer.
        bytes: u32,
        /// The write's L2 policy.
        policy: CachePolicy,
    },
    /// `cp.async.bulk.commit_group`: close the issuing thread's open bulk
    /// group (its bulk stores since the last commit).
    BulkCommit,
    /// `cp.async.bulk.wait_group[.read] n`: wait until at most `n` of the
    /// thread's committed bulk groups are pending; with `read`, only until
    /// their shared sources have been read (the writes to global may still
    /// be in flight).
    BulkWait {
        /// Groups that may still be pending.
        n: u32,
        /// `.read`: wait for the source reads only.
        read: bool,
    },

    // ---- warpgroup MMA (see [`crate::wgmma`])
    /// `wgmma.fence.sync.aligned`: orders the warpgroup's register accesses
    /// before the wgmmas that follow (before the first wgmma, and between a
    /// register write and a wgmma that reads those registers).
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`: close the warpgroup's wgmmas since
    /// the last commit into a group.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned n`: wait until at most `n` committed
    /// groups are pending; the accumulators of the others may be read.
    WgmmaWait(u32),
    /// `a column, b column [, c0..c(N/2-1)] -> d0..d(N/2-1)`:
    /// `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16`, issued by a
    /// warpgroup (a role of 4 warps whose first warp index is a multiple of
    /// 4). `D = A·Bᵀ (+ C)`: A is the 64×16 slice of buffer `a`'s tile at K
    /// column `a column`, B the N×16 slice of buffer `b`'s tile at K column
    /// `b column` (multiples of 16; both tiles K-major, declared with
    /// [`BufferDecl::tile`](crate::kernel::BufferDecl::tile)); the compiler
    /// builds their matrix descriptors. Each of the 128 threads holds `N/2`
    /// f32 of the 64×N accumulator, element `i` at
    /// [`acc_coord`](crate::wgmma::acc_coord)`(thread, i)`:
    /// row `16·warp + lane/4 + 8·((i/2)%2)`, column `8·(i/4) + 2·(lane%4) + i%2`.
    /// The results may be read (by anything but another wgmma's accumulator
    /// operand) only after a [`Op::WgmmaCommit`] and a [`Op::WgmmaWait`]
    /// covering this op.
    Wgmma {
        /// The A operand's buffer: a tile of 64 rows.
        a: Buffer,
        /// The B operand's buffer: a tile of `n` rows.
        b: Buffer,
        /// N: a multiple of 8 in 8..=256.
        n: u32,
        /// Accumulate (`scale-d` = 1): the op takes the N/2 accumulators
        /// `C`; else `D = A·Bᵀ` and it takes none.
        scale_d: bool,
    },

    // ---- programmatic dependent launch
    /// `griddepcontrol.wait`: the preceding launch's outputs are visible after.
    GridDepWait,
    /// `griddepcontrol.launch_dependents`.
    GridDepLaunch,

    // ---- register budgets
    /// `->`: `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: the executing
    /// warpgroup's per-thread register count becomes `regs` (24..=256, a
    /// multiple of 8), taking registers from the CTA's pool (`inc`, which
    /// blocks until the pool holds enough) or returning them to it (`dec`).
    /// Every warp of the warpgroup executes it, converged; the builder puts
    /// it first in the first region of a role with a register budget
    /// ([`crate::kernel::RoleDecl::regs`]).
    SetMaxNReg {
        /// `inc` (more than the count before) or `dec` (fewer).
        inc: bool,
        /// The new per-thread register count.
        regs: u32,
    },

    // ---- structure
    /// `cond -> results`: `then` and `els` yield the results.
    If {
        /// Runs when `cond` holds.
        then: Region,
        /// Runs otherwise.
        els: Region,
    },
    /// `lo, hi, step, init.. -> results`: body params `(iv, carried..)`, yields carried.
    For {
        /// Runs for `iv` from `lo` while `iv < hi` (in the bounds' type),
        /// stepping by `step`.
        body: Region,
    },
    /// `init.. -> results`: `cond` (params = carried) yields `bool, carried..`;
    /// `body` (params = carried) yields carried.
    While {
        /// Runs before each iteration; its `bool` ends the loop when false,
        /// and its carried values go to `body` (or become the results).
        cond: Region,
        /// One iteration.
        body: Region,
    },
    /// `->`: `body` runs only in the role's threads.
    InRole {
        /// The role whose threads run `body`.
        role: Role,
        /// No parameters; yields nothing.
        body: Region,
    },
    /// Region terminator: `values ->`.
    Yield,
}

impl Op {
    /// The op's row in the [`Opcode`] table.
    pub fn opcode(&self) -> Opcode {
        use Opcode as C;
        match self {
            Op::IConst(_) => C::IConst,
            Op::FConst(_) => C::FConst,
            Op::Special(_) => C::Special,
            Op::Param(_) => C::Param,
            Op::Bin(b) => match b {
                BinOp::Add => C::Add,
                BinOp::Sub => C::Sub,
                BinOp::Mul => C::Mul,
                BinOp::Div => C::Div,
                BinOp::Rem => C::Rem,
                BinOp::Min => C::Min,
                BinOp::Max => C::Max,
                BinOp::And => C::And,
                BinOp::Or => C::Or,
                BinOp::Xor => C::Xor,
                BinOp::Shl => C::Shl,
                BinOp::Shr => C::Shr,
            },
            Op::Fma { .. } => C::Fma,
            Op::Un(u) => match u {
                UnOp::Neg => C::Neg,
                UnOp::Not => C::Not,
                UnOp::Abs => C::Abs,
                UnOp::Exp { .. } => C::Exp,
                UnOp::Exp2 { .. } => C::Exp2,
                UnOp::Rsqrt { .. } => C::Rsqrt,
                UnOp::Sqrt => C::Sqrt,
                UnOp::Sigmoid { .. } => C::Sigmoid,
                UnOp::Rcp { .. } => C::Rcp,
                UnOp::Log2Approx => C::Log2Approx,
            },
            Op::Cmp(_) => C::Cmp,
            Op::Select => C::Select,
            Op::Cvt => C::Cvt,
            Op::Bitcast => C::Bitcast,
            Op::Pack => C::Pack,
            Op::Extract(_) => C::Extract,
            Op::LdGlobal { .. } => C::LdGlobal,
            Op::StGlobal { .. } => C::StGlobal,
            Op::AtomAdd { .. } => C::AtomAdd,
            Op::LdShared { .. } => C::LdShared,
            Op::StShared { .. } => C::StShared,
            Op::Shfl(_) => C::Shfl,
            Op::ElectSync => C::ElectSync,
            Op::Mma16816 => C::Mma16816,
            Op::WarpSync => C::WarpSync,
            Op::MbarInit { .. } => C::MbarInit,
            Op::MbarArrive { .. } => C::MbarArrive,
            Op::MbarArriveExpectTx { .. } => C::MbarArriveExpectTx,
            Op::MbarArriveRemote { .. } => C::MbarArriveRemote,
            Op::MbarWait { .. } => C::MbarWait,
            Op::MbarWaitParity { .. } => C::MbarWaitParity,
            Op::FenceMbarInit => C::FenceMbarInit,
            Op::FenceProxyAsync => C::FenceProxyAsync,
            Op::ClusterArrive { .. } => C::ClusterArrive,
            Op::ClusterWait => C::ClusterWait,
            Op::BarSync { .. } => C::BarSync,
            Op::StAsync { .. } => C::StAsync,
            Op::CpAsync { .. } => C::CpAsync,
            Op::CpAsyncCommit => C::CpAsyncCommit,
            Op::CpAsyncWait(_) => C::CpAsyncWait,
            Op::BulkCopy { .. } => C::BulkCopy,
            Op::BulkStore { .. } => C::BulkStore,
            Op::BulkCommit => C::BulkCommit,
            Op::BulkWait { .. } => C::BulkWait,
            Op::WgmmaFence => C::WgmmaFence,
            Op::WgmmaCommit => C::WgmmaCommit,
            Op::WgmmaWait(_) => C::WgmmaWait,
            Op::Wgmma { .. } => C::Wgmma,
            Op::GridDepWait => C::GridDepWait,
            Op::GridDepLaunch => C::GridDepLaunch,
            Op::SetMaxNReg { inc: true, .. } => C::SetMaxNRegInc,
            Op::SetMaxNReg { inc: false, .. } => C::SetMaxNRegDec,
            Op::If { .. } => C::If,
            Op::For { .. } => C::For,
            Op::While { .. } => C::While,
            Op::InRole { .. } => C::InRole,
            Op::Yield => C::Yield,
        }
    }

    /// The op's name in the text form (the table's mnemonic, no modifier).
    pub fn name(&self) -> &'static str {
        self.opcode().name()
    }

    /// The mnemonic with its modifier, as the text form writes it
    /// (`fma.ftz`, `cmp.lt`, `exp.fast`, `extract.3`, `ld.global.evict_first`).
    pub fn mnemonic(&self) -> String {
        let name = self.name();
        match self {
            Op::Cmp(c) => format!("{name}.{}", c.name()),
            Op::Shfl(m) => format!("{name}.{}", m.name()),
            Op::Extract(lane) => format!("{name}.{lane}"),
            _ => match self.opcode().modifier().flag() {
                Some(f) if self.flag_set() => format!("{name}.{f}"),
                _ => name.into(),
            },
        }
    }

    /// Whether the op's optional flag modifier ([`Modifier::flag`]) is on.
    fn flag_set(&self) -> bool {
        match *self {
            Op::Fma { ftz } => ftz,
            Op::Un(
                UnOp::Exp { fast }
                | UnOp::Exp2 { fast }
                | UnOp::Rsqrt { fast }
                | UnOp::Sigmoid { fast }
                | UnOp::Rcp { fast },
            ) => fast,
            Op::ClusterArrive { relaxed } => relaxed,
            Op::BulkWait { read, .. } => read,
            _ => self.cache_policy() == Some(CachePolicy::EvictFirst),
        }
    }

    /// The L2 policy of a global access that takes one (loads, stores, bulk
    /// copies and bulk stores), with the tensor it accesses.
    pub fn cache_policy_of(&self) -> Option<(Tensor, CachePolicy)> {
        match *self {
            Op::LdGlobal { tensor, policy }
            | Op::StGlobal { tensor, policy, .. }
            | Op::BulkCopy { tensor, policy, .. }
            | Op::BulkStore { tensor, policy, .. } => Some((tensor, policy)),
            _ => None,
        }
    }

    /// The L2 policy of a global access that takes one ([`Op::cache_policy_of`]).
    pub fn cache_policy(&self) -> Option<CachePolicy> {
        self.cache_policy_of().map(|(_, p)| p)
    }

    /// The policy field of a global access that takes one, to set it.
    pub fn cache_policy_mut(&mut self) -> Option<&mut CachePolicy> {
        match self {
            Op::LdGlobal { policy, .. }
            | Op::StGlobal { policy, .. }
            | Op::BulkCopy { policy, .. }
            | Op::BulkStore { policy, .. } => Some(policy),
            _ => None,
        }
    }

    /// The barrier the op names and its ring length (0: a single barrier;
    /// else the ring index is the op's last operand).
    pub fn barrier(&self) -> Option<(Barrier, u32)> {
        match *self {
            Op::MbarInit { barrier } | Op::MbarWait { barrier, .. } => Some((barrier, 0)),
            Op::MbarArrive { barrier, ring }
            | Op::MbarArriveRemote { barrier, ring }
            | Op::StAsync { barrier, ring, .. }
            | Op::MbarArriveExpectTx { barrier, ring, .. }
            | Op::MbarWaitParity { barrier, ring }
            | Op::BulkCopy { barrier, ring, .. } => Some((barrier, ring)),
            _ => None,
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

    /// The op's effects, from its row in the table.
    pub fn effects(&self) -> Effects {
        self.opcode().effects()
    }

    /// Whether the op only computes its results: no memory access, no
    /// synchronisation, no regions. Passes may move such an op anywhere its
    /// operands are defined and drop it when its results are unused.
    pub fn is_pure(&self) -> bool {
        self.effects().is_pure()
    }

    /// Warp collectives must run in warp-uniform control flow.
    pub fn is_collective(&self) -> bool {
        self.effects().collective()
    }

    /// The tensor the op accesses.
    pub fn tensor(&self) -> Option<Tensor> {
        match *self {
            Op::LdGlobal { tensor, .. }
            | Op::StGlobal { tensor, .. }
            | Op::AtomAdd { tensor }
            | Op::CpAsync { tensor, .. }
            | Op::BulkCopy { tensor, .. }
            | Op::BulkStore { tensor, .. } => Some(tensor),
            _ => None,
        }
    }

    /// The shared buffer the op accesses (this CTA's, or a peer's for `st.async`).
    pub fn buffer(&self) -> Option<Buffer> {
        match *self {
            Op::LdShared { buffer }
            | Op::StShared { buffer }
            | Op::StAsync { buffer, .. }
            | Op::CpAsync { buffer, .. }
            | Op::BulkCopy { buffer, .. }
            | Op::BulkStore { buffer, .. }
            | Op::Wgmma { a: buffer, .. } => Some(buffer),
            _ => None,
        }
    }

    /// Every shared buffer the op accesses: [`Op::buffer`], and a wgmma's B.
    pub fn buffers(&self) -> Vec<Buffer> {
        match *self {
            Op::Wgmma { a, b, .. } if a != b => vec![a, b],
            _ => self.buffer().into_iter().collect(),
        }
    }
}

/// One instruction: an op, its SSA operands, its results and where it came from.
#[derive(Clone, Debug)]
pub struct InstData {
    /// The operation, with its immediates and entity references.
    pub op: Op,
    /// SSA operands, in the order the op's signature lists them.
    pub args: Vec<Value>,
    /// The values it defines (each defined only here).
    pub results: Vec<Value>,
    /// The DSL source line it came from ([`Loc::synthetic`] for pass-made ones).
    pub loc: Loc,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Kernel;
    use crate::parse::parse_kernel;

    #[test]
    fn every_mnemonic_parses_back_to_its_opcode() {
        let mut seen = std::collections::HashSet::new();
        for &code in Opcode::ALL {
            assert!(seen.insert(code.name()), "{} twice", code.name());
            let want = match code.modifier() {
                Modifier::Cmp | Modifier::Shfl | Modifier::Lane => Err(MnemonicError::Unknown),
                _ => Ok(Mnemonic::Plain(code, false)),
            };
            assert_eq!(Opcode::parse_mnemonic(code.name()), want, "{}", code.name());
            if let Some(f) = code.modifier().flag() {
                let m = format!("{}.{f}", code.name());
                assert_eq!(Opcode::parse_mnemonic(&m), Ok(Mnemonic::Plain(code, true)));
            }
        }
        for c in CmpOp::ALL {
            let m = Op::Cmp(c).mnemonic();
            assert_eq!(Opcode::parse_mnemonic(&m), Ok(Mnemonic::Cmp(c)), "{m}");
        }
        for s in ShflMode::ALL {
            let m = Op::Shfl(s).mnemonic();
            assert_eq!(Opcode::parse_mnemonic(&m), Ok(Mnemonic::Shfl(s)), "{m}");
        }
        assert_eq!(
            Opcode::parse_mnemonic("extract.7"),
            Ok(Mnemonic::Extract(7))
        );
        assert_eq!(
            Opcode::parse_mnemonic("extract.x"),
            Err(MnemonicError::BadLane)
        );
    }

    #[test]
    fn modifiers_belong_to_their_ops() {
        for m in [
            "cmp",
            "cmp.eq.fast",
            "shfl.up",
            "extract",
            "sqrt.fast",
            "fma.fast",
            "cp.async.evict_first",
            "cp.async.bulk.commit.read",
            "cp.async.bulk.wait.evict_first",
            "cp.async.bulk.store.read",
            "iconst.evict_first",
            "mbarrier.arrive.relaxed",
            "frob",
        ] {
            assert_eq!(
                Opcode::parse_mnemonic(m),
                Err(MnemonicError::Unknown),
                "{m}"
            );
        }
    }

    /// The table's counts hold for every instruction of the filetest kernels
    /// that verify.
    #[test]
    fn arities_match_the_filetest_kernels() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
        let mut checked = 0;
        for dir in ["ptx", "verifier"] {
            for e in std::fs::read_dir(root.join(dir)).expect("filetests folder") {
                let p = e.expect("directory entry").path();
                let name = p.to_string_lossy().into_owned();
                if !(name.ends_with(".kir") && (dir == "ptx" || name.ends_with("-ok.kir"))) {
                    continue;
                }
                let text = std::fs::read_to_string(&p).expect("filetest");
                let k: Kernel = parse_kernel(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                for (_, d) in k.insts.iter() {
                    let code = d.op.opcode();
                    for (arity, n, what) in [
                        (code.operands(), d.args.len(), "operands"),
                        (code.results(), d.results.len(), "results"),
                    ] {
                        if let Arity::Exact(want) = arity {
                            assert_eq!(n, want as usize, "{name}: `{}` {what}", code.name());
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 0);
    }
}

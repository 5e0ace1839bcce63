//! The op table: one row per [`Opcode`] with its mnemonic, the modifier the
//! mnemonic may carry, its signature ([`Sig`]: each operand's and result's
//! type rule) and its [`Effects`]. The printer and parser read the mnemonic
//! and modifier, the verifier's type check (`verifier/signature.rs`) reads
//! the signature, and the passes ask the effects which ops they may move,
//! drop or pass (`Op::is_pure`, `Effects::writes_global`, ...), as
//! Cranelift's `meta` tables drive its verifier and optimisations.
//!
//! # Adding an op (e.g. `wgmma.fence`)
//!
//! 1. Add the variant to [`Op`](super::Op) with its immediates and map it to
//!    its opcode in `Op::opcode` (the compiler lists every match to extend).
//!    If it names a tensor, buffer or barrier, return it from `Op::tensor`,
//!    `Op::buffer` or `Op::barrier`: the structure, role and access checks
//!    follow from those.
//! 2. Add one row below: `WgmmaFence "wgmma.fence" None NONE, fx!(FENCE);`.
//!    Reuse a signature constant (`NONE`, `BINARY.of(NUM)`, ...) or write one
//!    with [`Sig::new`]: named operands of a fixed type or any integer scalar,
//!    the row's type variable `T` with its [`Class`], tensor indices, a ring
//!    index, element accesses, or [`Ty::Dep`] where the type depends on
//!    immediates. The verifier then checks counts and types with the usual
//!    messages, and every pass knows from the effects whether it may move,
//!    pass or drop the op.
//! 3. Only a type that depends on the op's immediates or declarations (a tile
//!    shape, a descriptor) needs a hook in `verifier/signature.rs`.
//! 4. Print and parse the immediates (`write.rs`, `parse/insts.rs`), lower it
//!    (`ptx/`) and give it simulator semantics (`kda-runtime`'s `sim/`).

use std::fmt;

use crate::types::{Scalar, Type};

/// What may follow an op's mnemonic after a `.`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Modifier {
    /// Nothing: the mnemonic is the whole op.
    None,
    /// `.ftz`, optional: flush denormals.
    Ftz,
    /// `.fast`, optional: the approximate instruction.
    Fast,
    /// `.evict_first`, optional: the L2 policy ([`CachePolicy`](super::CachePolicy)).
    Policy,
    /// `.relaxed`, optional.
    Relaxed,
    /// `.read`, optional: wait only until the sources have been read.
    Read,
    /// Required: the comparison ([`CmpOp::name`](super::CmpOp::name)).
    Cmp,
    /// Required: the mode ([`ShflMode::name`](super::ShflMode::name)).
    Shfl,
    /// Required: the lane, a number.
    Lane,
}

impl Modifier {
    /// The text of an optional on/off modifier.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Modifier::Ftz => Some("ftz"),
            Modifier::Fast => Some("fast"),
            Modifier::Policy => Some("evict_first"),
            Modifier::Relaxed => Some("relaxed"),
            Modifier::Read => Some("read"),
            Modifier::None | Modifier::Cmp | Modifier::Shfl | Modifier::Lane => None,
        }
    }
}

/// A count of operands or results.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Arity {
    /// Always this many.
    Exact(u8),
    /// Set by the op's immediates or declarations: a tensor's rank, the lanes
    /// packed, the values a region carries.
    Variadic,
}

/// A set of value types, with the phrase an error states it by.
#[derive(Copy, Clone)]
pub struct Class {
    /// Whether a type is in the set.
    pub admits: fn(Type) -> bool,
    /// The op's rule as an error words it after the mnemonic
    /// (`` `add` takes integers or floats, found v0:bool``).
    pub phrase: &'static str,
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase)
    }
}

/// Every type.
pub const ANY: Class = Class {
    admits: |_| true,
    phrase: "takes any type",
};
/// Integers or floats, scalar or vector (arithmetic).
pub const NUM: Class = Class {
    admits: |t| t.elem.is_int() || t.elem.is_float(),
    phrase: "takes integers or floats",
};
/// Integers, scalar or vector (`rem`, shifts).
pub const INT: Class = Class {
    admits: |t| t.elem.is_int(),
    phrase: "takes integers",
};
/// Integers or bool (bitwise and logical ops).
pub const INT_OR_BOOL: Class = Class {
    admits: |t| t.elem.is_int() || t.elem == Scalar::Bool,
    phrase: "takes integers or bool",
};
/// Signed integers or floats (`neg`, `abs`).
pub const SIGNED_OR_FLOAT: Class = Class {
    admits: |t| t.elem.is_float() || t.elem.is_signed(),
    phrase: "takes signed integers or floats",
};
/// A scalar f32 (the transcendental ops).
pub const F32: Class = Class {
    admits: |t| t == Type::F32,
    phrase: "takes f32",
};
/// What one `shfl` moves: 32 bits, not bool.
pub const BITS32: Class = Class {
    admits: |t| t.bytes() == 4 && t.elem != Scalar::Bool,
    phrase: "moves 32-bit values (f32, i32, u32, bf16x2)",
};
/// What `iconst` produces.
pub const INT_OR_BOOL_SCALAR: Class = Class {
    admits: |t| t.is_scalar() && (t.elem.is_int() || t.elem == Scalar::Bool),
    phrase: "produces an integer or bool scalar",
};
/// What `fconst` produces.
pub const FLOAT_SCALAR: Class = Class {
    admits: |t| t == Type::F32 || t == Type::BF16,
    phrase: "produces f32 or bf16",
};

/// The type rule of one operand or result.
#[derive(Copy, Clone, Debug)]
pub enum Ty {
    /// The row's type variable: every `T` of an instruction has one type,
    /// which the row's [`Class`] admits.
    T,
    /// Exactly this type.
    Is(Type),
    /// One of the four integer types, as a scalar (indices, ranks, lanes).
    IntScalar,
    /// A result type the class admits; the error names the type found
    /// (`` `fconst` produces f32 or bf16, found i32``).
    In(Class),
    /// An element access of the op's tensor: its dtype, a scalar or a vector
    /// of 4, 8 or 16 bytes that the tensor's alignment and strides allow.
    GlobalElem,
    /// An element access of the op's buffer: its element type, a scalar or a
    /// vector of 4, 8 or 16 bytes that the buffer's alignment covers.
    SharedElem,
    /// Depends on the op's immediates or declarations: the op's hook in
    /// `verifier/signature.rs` checks it.
    Dep,
}

impl Ty {
    /// A fixed rule (`Is`, `IntScalar`): whether `t` satisfies it and how an
    /// error says what the value must be (`a u32`, `bool`, `u32x4`). `None`
    /// for the rules that relate several values or entities.
    pub fn fixed(self, t: Type) -> Option<(bool, String)> {
        match self {
            Ty::Is(want) => {
                let what = match want.elem {
                    _ if want == Type::BOOL || !want.is_scalar() => want.to_string(),
                    Scalar::I32 | Scalar::I64 | Scalar::F32 => format!("an {want}"),
                    _ => format!("a {want}"),
                };
                Some((t == want, what))
            }
            Ty::IntScalar => Some((t.is_scalar() && t.elem.is_int(), "an integer scalar".into())),
            Ty::T | Ty::In(_) | Ty::GlobalElem | Ty::SharedElem | Ty::Dep => None,
        }
    }
}

/// One operand or result slot of a signature, or a run of them.
#[derive(Copy, Clone, Debug)]
pub enum Arg {
    /// One value: its name in errors (`condition`, `lane or mask`; empty
    /// where only the type variable's message names it) and its type.
    One(&'static str, Ty),
    /// One integer scalar index per dimension of the op's tensor.
    Indices,
    /// The ring index, a u32, when the op's barrier is a ring (`ring > 0`).
    RingIndex,
    /// A bool predicate, when the store is predicated.
    Predicate,
    /// Any number of values (packed lanes, carried or yielded values): the
    /// op's hook checks them.
    Rest,
}

/// An op's operands and results, and the class of its type variable.
#[derive(Copy, Clone, Debug)]
pub struct Sig {
    /// Operand slots, in order.
    pub args: &'static [Arg],
    /// Result slots, in order.
    pub results: &'static [Arg],
    /// The types the type variable `T` may take.
    pub class: Class,
}

impl Sig {
    /// `args -> results`, with no constraint on `T`.
    pub const fn new(args: &'static [Arg], results: &'static [Arg]) -> Sig {
        Sig {
            args,
            results,
            class: ANY,
        }
    }

    /// The same with `T` in `class`.
    pub const fn of(self, class: Class) -> Sig {
        Sig { class, ..self }
    }

    fn arity(slots: &[Arg]) -> Arity {
        if slots.iter().all(|a| matches!(a, Arg::One(..))) {
            Arity::Exact(slots.len() as u8)
        } else {
            Arity::Variadic
        }
    }
}

/// What an op does besides computing its results: the memory it reads and
/// writes and how it synchronises. An op with none is pure: the passes may
/// move it anywhere its operands are defined, or drop it when unused.
/// Region ops are `CONTROL`; what they contain has its own effects.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
pub struct Effects(u16);

macro_rules! effects {
    ($($(#[$doc:meta])* $name:ident = $bit:literal, $query:ident;)*) => {
        impl Effects {
            $($(#[$doc])* pub const $name: Effects = Effects(1 << $bit);)*
            $(
                #[doc = concat!("Whether the op has [`Effects::", stringify!($name), "`].")]
                pub fn $query(self) -> bool {
                    self.contains(Effects::$name)
                }
            )*
            const NAMES: &'static [(Effects, &'static str)] = &[$((Effects::$name, stringify!($name))),*];
        }
    };
}

effects! {
    /// Reads global memory (loads, atomics, copies from a tensor).
    READ_GLOBAL = 0, reads_global;
    /// Writes global memory (stores, atomics, bulk stores).
    WRITE_GLOBAL = 1, writes_global;
    /// Reads this CTA's shared memory.
    READ_SHARED = 2, reads_shared;
    /// Writes this CTA's shared memory (data, not barriers).
    WRITE_SHARED = 3, writes_shared;
    /// Reaches another CTA's shared memory (DSMEM): `st.async`, remote arrivals.
    PEER = 4, reaches_peer;
    /// Runs on the async copy unit, or opens/closes its groups; completes
    /// through its own wait or barrier, not in program order.
    ASYNC = 5, is_async;
    /// A signal other threads of the launch wait on: mbarrier init and
    /// arrivals, `st.async`'s bytes, `cluster.arrive`.
    SIGNAL = 6, signals;
    /// May wait until a thread outside its warp gets further (barrier waits,
    /// `setmaxnreg`, a `while` whose condition may poll memory).
    BLOCKS = 7, blocks;
    /// Orders writes of other threads, or of its own async copies, before
    /// the thread's later accesses (barrier and async-group waits).
    ACQUIRE = 8, acquires;
    /// A memory or proxy fence.
    FENCE = 9, fences;
    /// Waits for or signals the neighbouring launch (PDL).
    GRID = 10, grid;
    /// A warp collective: runs in warp-uniform control flow.
    COLLECTIVE = 11, collective;
    /// Holds regions (`if`, `for`, `while`, `role`) or ends one (`yield`).
    CONTROL = 12, control;
}

impl Effects {
    /// No effect.
    pub const PURE: Effects = Effects(0);

    /// Both sets.
    pub const fn with(self, other: Effects) -> Effects {
        Effects(self.0 | other.0)
    }

    /// Whether every effect of `other` is in `self`.
    pub const fn contains(self, other: Effects) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share an effect.
    pub const fn intersects(self, other: Effects) -> bool {
        self.0 & other.0 != 0
    }

    /// No effect at all.
    pub const fn is_pure(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for Effects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_pure() {
            return f.write_str("PURE");
        }
        let names: Vec<&str> = Effects::NAMES
            .iter()
            .filter(|(e, _)| self.contains(*e))
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&names.join(" | "))
    }
}

/// The union of the named effects (`fx(READ_GLOBAL | ASYNC)` in a row).
macro_rules! fx {
    ($($name:ident)|*) => {
        Effects::PURE$(.with(Effects::$name))*
    };
}

const WAIT: Effects = fx!(BLOCKS | ACQUIRE);

// Slots, by the rule their values follow.
const T: Arg = Arg::One("", Ty::T);
const OPERAND: Arg = Arg::One("operand", Ty::T);
const INDEX: Arg = Arg::One("index", Ty::IntScalar);
const SHARED_INDEX: Arg = Arg::One("shared index", Ty::IntScalar);
const CTA: Arg = Arg::One("destination cta", Ty::IntScalar);
const CONDITION: Arg = Arg::One("condition", Ty::Is(Type::BOOL));
const DEP: Arg = Arg::One("", Ty::Dep);
const BOOL: Arg = Arg::One("", Ty::Is(Type::BOOL));
const U32: Arg = Arg::One("", Ty::Is(Type::U32));
const F32X4: Type = Type::vec(Scalar::F32, 4);

// Signatures shared by several rows.
/// `->`.
pub const NONE: Sig = Sig::new(&[], &[]);
/// `a: T, b: T -> T`.
const BINARY: Sig = Sig::new(&[T, T], &[T]);
/// `operand: T -> T`.
const UNARY: Sig = Sig::new(&[OPERAND], &[T]);
/// `x -> y`, types set by the hook.
const DEP_TO_DEP: Sig = Sig::new(&[DEP], &[DEP]);
/// `-> y`, the type set by the hook.
const TO_DEP: Sig = Sig::new(&[], &[DEP]);
/// `[ring index] ->`.
const RING_ONLY: Sig = Sig::new(&[Arg::RingIndex], &[]);
/// `values.. -> values..`: checked by the region op's hook.
const CARRIED: Sig = Sig::new(&[Arg::Rest], &[Arg::Rest]);

/// The op table: one row per opcode with its mnemonic, the modifier the
/// mnemonic may carry, its signature and its effects.
/// [`Op::name`](super::Op::name) and [`Op::mnemonic`](super::Op::mnemonic)
/// (the printer), the parser's mnemonic lookup, the verifier, the passes and
/// error reports all read it.
macro_rules! op_table {
    ($($(#[$doc:meta])* $code:ident $name:literal $modifier:ident $sig:expr, $fx:expr;)*) => {
        /// An op without its immediates: a row of the op table.
        #[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
        pub enum Opcode {
            $(#[doc = concat!("`", $name, "`.")] $(#[$doc])* $code,)*
        }

        impl Opcode {
            /// Every row, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$code),*];

            /// The mnemonic in the text form, without a modifier.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$code => $name,)*
                }
            }

            /// What may follow the mnemonic.
            pub fn modifier(self) -> Modifier {
                match self {
                    $(Opcode::$code => Modifier::$modifier,)*
                }
            }

            /// Operand and result types.
            pub fn sig(self) -> &'static Sig {
                match self {
                    $(Opcode::$code => {
                        const SIG: Sig = $sig;
                        &SIG
                    })*
                }
            }

            /// What the op does besides computing its results.
            pub fn effects(self) -> Effects {
                match self {
                    $(Opcode::$code => $fx,)*
                }
            }

            /// The opcode a mnemonic without modifier names.
            pub fn from_name(s: &str) -> Option<Opcode> {
                match s {
                    $($name => Some(Opcode::$code),)*
                    _ => None,
                }
            }
        }
    };
}

impl Opcode {
    /// SSA operands.
    pub fn operands(self) -> Arity {
        Sig::arity(self.sig().args)
    }

    /// Results.
    pub fn results(self) -> Arity {
        Sig::arity(self.sig().results)
    }
}

op_table! {
    // ---- constants and indices
    /// The result's range is checked against the immediate.
    IConst "iconst" None Sig::new(&[], &[Arg::One("", Ty::In(INT_OR_BOOL_SCALAR))]), fx!();
    FConst "fconst" None Sig::new(&[], &[Arg::One("", Ty::In(FLOAT_SCALAR))]), fx!();
    Special "special" None Sig::new(&[], &[U32]), fx!();
    /// The result is the scalar's declared type.
    Param "param" None TO_DEP, fx!();

    // ---- arithmetic
    Add "add" None BINARY.of(NUM), fx!();
    Sub "sub" None BINARY.of(NUM), fx!();
    Mul "mul" None BINARY.of(NUM), fx!();
    Div "div" None BINARY.of(NUM), fx!();
    Rem "rem" None BINARY.of(INT), fx!();
    Min "min" None BINARY.of(NUM), fx!();
    Max "max" None BINARY.of(NUM), fx!();
    And "and" None BINARY.of(INT_OR_BOOL), fx!();
    Or "or" None BINARY.of(INT_OR_BOOL), fx!();
    Xor "xor" None BINARY.of(INT_OR_BOOL), fx!();
    Shl "shl" None BINARY.of(INT), fx!();
    Shr "shr" None BINARY.of(INT), fx!();
    Fma "fma" Ftz Sig::new(
        &[
            Arg::One("operand a", Ty::Is(Type::F32)),
            Arg::One("operand b", Ty::Is(Type::F32)),
            Arg::One("operand c", Ty::Is(Type::F32)),
        ],
        &[Arg::One("", Ty::Is(Type::F32))],
    ), fx!();
    Neg "neg" None UNARY.of(SIGNED_OR_FLOAT), fx!();
    Not "not" None UNARY.of(INT_OR_BOOL), fx!();
    Abs "abs" None UNARY.of(SIGNED_OR_FLOAT), fx!();
    Exp "exp" Fast UNARY.of(F32), fx!();
    Exp2 "exp2" Fast UNARY.of(F32), fx!();
    Rsqrt "rsqrt" Fast UNARY.of(F32), fx!();
    Sqrt "sqrt" None UNARY.of(F32), fx!();
    Sigmoid "sigmoid" Fast UNARY.of(F32), fx!();
    Rcp "rcp" Fast UNARY.of(F32), fx!();
    Log2Approx "lg2.approx" None UNARY.of(F32), fx!();
    /// Operands of one scalar type (bool only with `eq`/`ne`): the hook.
    Cmp "cmp" Cmp Sig::new(&[DEP, DEP], &[BOOL]), fx!();
    Select "select" None Sig::new(&[CONDITION, T, T], &[T]), fx!();
    Cvt "cvt" None DEP_TO_DEP, fx!();
    Bitcast "bitcast" None DEP_TO_DEP, fx!();
    Pack "pack" None Sig::new(&[Arg::Rest], &[DEP]), fx!();
    Extract "extract" Lane DEP_TO_DEP, fx!();

    // ---- memory
    /// Operands: one index per dimension of the tensor.
    LdGlobal "ld.global" Policy Sig::new(&[Arg::Indices], &[Arg::One("", Ty::GlobalElem)]),
        fx!(READ_GLOBAL);
    /// Operands: the indices, the value and, when predicated, the predicate.
    StGlobal "st.global" Policy Sig::new(
        &[Arg::Indices, Arg::One("value", Ty::GlobalElem), Arg::Predicate],
        &[],
    ), fx!(WRITE_GLOBAL);
    /// Operands: one index per dimension of the tensor, then the addend.
    AtomAdd "atom.add" None Sig::new(&[Arg::Indices, Arg::One("addend", Ty::Dep)], &[DEP]),
        fx!(READ_GLOBAL | WRITE_GLOBAL);
    LdShared "ld.shared" None Sig::new(&[INDEX], &[Arg::One("", Ty::SharedElem)]),
        fx!(READ_SHARED);
    StShared "st.shared" None Sig::new(&[INDEX, Arg::One("value", Ty::SharedElem)], &[]),
        fx!(WRITE_SHARED);

    // ---- warp collectives
    Shfl "shfl" Shfl Sig::new(
        &[Arg::One("value", Ty::T), Arg::One("lane or mask", Ty::IntScalar)],
        &[T],
    ).of(BITS32), fx!(COLLECTIVE);
    ElectSync "elect" None Sig::new(&[], &[BOOL]), fx!(COLLECTIVE);
    Mma16816 "mma.m16n8k16" None Sig::new(
        &[
            Arg::One("operand a", Ty::Is(Type::vec(Scalar::U32, 4))),
            Arg::One("operand b", Ty::Is(Type::vec(Scalar::U32, 2))),
            Arg::One("operand c", Ty::Is(F32X4)),
        ],
        &[Arg::One("", Ty::Is(F32X4))],
    ), fx!(COLLECTIVE);
    WarpSync "warp.sync" None NONE, fx!(COLLECTIVE);

    // ---- barriers and fences
    MbarInit "mbarrier.init" None NONE, fx!(SIGNAL);
    /// Operands: the ring index when the barrier is an element of a ring.
    MbarArrive "mbarrier.arrive" None RING_ONLY, fx!(SIGNAL);
    /// Operands: the ring index when the barrier is an element of a ring.
    MbarArriveExpectTx "mbarrier.arrive.expect_tx" None RING_ONLY, fx!(SIGNAL);
    /// Operands: the destination cta, then the ring index when the barrier
    /// is an element of a ring.
    MbarArriveRemote "mbarrier.arrive.remote" None Sig::new(&[CTA, Arg::RingIndex], &[]),
        fx!(SIGNAL | PEER);
    MbarWait "mbarrier.wait" None NONE, WAIT;
    /// Operands: the parity, then the ring index when the barrier is an
    /// element of a ring.
    MbarWaitParity "mbarrier.wait.parity" None Sig::new(
        &[Arg::One("parity", Ty::Is(Type::U32)), Arg::RingIndex],
        &[],
    ), WAIT;
    FenceMbarInit "fence.mbarrier_init" None NONE, fx!(FENCE);
    FenceProxyAsync "fence.proxy.async" None NONE, fx!(FENCE);
    ClusterArrive "cluster.arrive" Relaxed NONE, fx!(SIGNAL);
    ClusterWait "cluster.wait" None NONE, WAIT;
    BarSync "bar.sync" None NONE, WAIT;

    // ---- DSMEM and async copies
    /// Operands: the shared index, the value, the cta, then the ring index
    /// when the barrier is an element of a ring.
    StAsync "st.async" None Sig::new(
        &[INDEX, Arg::One("value", Ty::Dep), CTA, Arg::RingIndex],
        &[],
    ), fx!(PEER | SIGNAL);
    /// Operands: the shared index, then one global index per dimension.
    CpAsync "cp.async" None Sig::new(&[SHARED_INDEX, Arg::Indices], &[]),
        fx!(READ_GLOBAL | WRITE_SHARED | ASYNC);
    CpAsyncCommit "cp.async.commit" None NONE, fx!(ASYNC);
    CpAsyncWait "cp.async.wait" None NONE, fx!(ACQUIRE);
    /// Operands: the shared index, one global index per dimension, then the
    /// ring index when the barrier is an element of a ring.
    BulkCopy "cp.async.bulk" Policy Sig::new(&[SHARED_INDEX, Arg::Indices, Arg::RingIndex], &[]),
        fx!(READ_GLOBAL | WRITE_SHARED | ASYNC);
    /// Operands: the shared index of the source, then one global index per
    /// dimension of the destination.
    BulkStore "cp.async.bulk.store" Policy Sig::new(&[SHARED_INDEX, Arg::Indices], &[]),
        fx!(READ_SHARED | WRITE_GLOBAL | ASYNC);
    BulkCommit "cp.async.bulk.commit" None NONE, fx!(ASYNC);
    BulkWait "cp.async.bulk.wait" Read NONE, fx!(ACQUIRE);

    // ---- warpgroup MMA
    WgmmaFence "wgmma.fence" None NONE, fx!(FENCE | COLLECTIVE);
    WgmmaCommit "wgmma.commit_group" None NONE, fx!(ASYNC | COLLECTIVE);
    WgmmaWait "wgmma.wait_group" None NONE, fx!(ACQUIRE | COLLECTIVE);
    /// Operands: the K columns of A and B, then (with `scale_d`) the N/2
    /// f32 accumulators; results: the N/2 f32 accumulators.
    Wgmma "wgmma.mma_async" None Sig::new(
        &[
            Arg::One("a column", Ty::IntScalar),
            Arg::One("b column", Ty::IntScalar),
            Arg::Rest,
        ],
        &[Arg::Rest],
    ), fx!(READ_SHARED | ASYNC | COLLECTIVE);

    // ---- programmatic dependent launch
    GridDepWait "pdl.wait" None NONE, fx!(GRID);
    GridDepLaunch "pdl.launch_dependents" None NONE, fx!(GRID);

    // ---- register budgets
    SetMaxNRegInc "setmaxnreg.inc" None NONE, fx!(BLOCKS);
    SetMaxNRegDec "setmaxnreg.dec" None NONE, fx!(BLOCKS);

    // ---- structure
    /// Results: what both branches yield.
    If "if" None Sig::new(&[CONDITION], &[Arg::Rest]), fx!(CONTROL);
    /// Operands: lo, hi, step and the initial carried values.
    For "for" None CARRIED, fx!(CONTROL);
    /// Its condition may poll memory that another thread writes.
    While "while" None CARRIED, fx!(CONTROL | BLOCKS);
    InRole "role" None NONE, fx!(CONTROL);
    Yield "yield" None Sig::new(&[Arg::Rest], &[]), fx!(CONTROL);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every opcode has a row whose signature is well formed: named slots
    /// only where an error names them, `T` only with a class that says
    /// something or shared by two slots, variadic runs in the forms the
    /// verifier expands.
    #[test]
    fn every_opcode_has_a_well_formed_row() {
        assert_eq!(Opcode::ALL.len(), 74);
        for &code in Opcode::ALL {
            let sig = code.sig();
            let n = code.name();
            let uses_t = |slots: &[Arg]| {
                slots
                    .iter()
                    .filter(|a| matches!(a, Arg::One(_, Ty::T)))
                    .count()
            };
            let ts = uses_t(sig.args) + uses_t(sig.results);
            assert!(
                ts != 1,
                "{n}: a type variable used once constrains nothing; use Ty::In"
            );
            if ts == 0 {
                assert_eq!(sig.class.phrase, ANY.phrase, "{n}: a class without T");
            }
            for a in sig.args {
                if let Arg::One(name, Ty::Is(_) | Ty::IntScalar) = a {
                    assert!(!name.is_empty(), "{n}: a fixed-type operand needs a name");
                }
                assert!(
                    !matches!(a, Arg::One(_, Ty::In(_))),
                    "{n}: a class phrase words results; name the operand and use Ty::T"
                );
            }
            assert!(
                sig.results
                    .iter()
                    .all(|r| matches!(r, Arg::One(..) | Arg::Rest)),
                "{n}: results are values or a run"
            );
            let rest = sig.args.iter().filter(|a| matches!(a, Arg::Rest)).count();
            assert!(rest <= 1, "{n}: one run of operands at most");
            // The memory effects and the entity rules agree.
            let global = sig
                .args
                .iter()
                .chain(sig.results)
                .any(|a| matches!(a, Arg::Indices | Arg::One(_, Ty::GlobalElem)));
            let fx = code.effects();
            assert_eq!(
                global,
                fx.reads_global() || fx.writes_global(),
                "{n}: tensor indices iff the op accesses global memory"
            );
        }
    }

    /// The pure rows are exactly the arithmetic, constants and conversions
    /// (what the passes hoisted and staged before the table knew effects).
    #[test]
    fn pure_rows() {
        let pure: Vec<&str> = Opcode::ALL
            .iter()
            .filter(|c| c.effects().is_pure())
            .map(|c| c.name())
            .collect();
        assert_eq!(
            pure,
            [
                "iconst",
                "fconst",
                "special",
                "param",
                "add",
                "sub",
                "mul",
                "div",
                "rem",
                "min",
                "max",
                "and",
                "or",
                "xor",
                "shl",
                "shr",
                "fma",
                "neg",
                "not",
                "abs",
                "exp",
                "exp2",
                "rsqrt",
                "sqrt",
                "sigmoid",
                "rcp",
                "lg2.approx",
                "cmp",
                "select",
                "cvt",
                "bitcast",
                "pack",
                "extract",
            ]
        );
        assert_eq!(
            format!("{:?}", Opcode::BulkCopy.effects()),
            "READ_GLOBAL | WRITE_SHARED | ASYNC"
        );
    }
}

//! Typed entity handles. Every reference inside the IR is one of these `u32`
//! newtypes, never a raw index or a name; each prints with its own prefix
//! (`v3`, `inst7`, `r2`, `role1`, `buf0`, `bar1`, `t4`, `s0`, `sym2`).

use cranelift_entity::entity_impl;

/// An SSA value: an instruction result or a region parameter.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An instruction.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "inst");

/// A structured region: an ordered list of instructions with parameters.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region(u32);
entity_impl!(Region, "r");

/// A named, warp-aligned range of the block's threads.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Role(u32);
entity_impl!(Role, "role");

/// A shared-memory buffer of the CTA.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(u32);
entity_impl!(Buffer, "buf");

/// An mbarrier in shared memory.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Barrier(u32);
entity_impl!(Barrier, "bar");

/// A global tensor parameter of the kernel.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tensor(u32);
entity_impl!(Tensor, "t");

/// A scalar parameter of the kernel (f32 / i32 value passed at launch).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScalarParam(u32);
entity_impl!(ScalarParam, "s");

/// A symbolic extent or stride, bound to a number at launch.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(u32);
entity_impl!(Sym, "sym");

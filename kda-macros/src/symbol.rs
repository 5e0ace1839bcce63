//! Every name the macro recognises, in one place: attribute keys, the DSL's
//! own macros inside a kernel body, and the DSL functions and methods the
//! static checks give a meaning to. A kernel body uses these names as written
//! (the expansion imports `kda::dsl::prelude`).

use std::fmt;

use syn::{Ident, Path};

#[derive(Copy, Clone)]
pub struct Symbol(&'static str);

impl Symbol {
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

// ---- #[cluster_kernel(...)] arguments
pub const BLOCK: Symbol = Symbol("block");
pub const CLUSTER: Symbol = Symbol("cluster");
pub const MIN_BLOCKS: Symbol = Symbol("min_blocks");
pub const EARLY: Symbol = Symbol("early");
pub const TRIGGER_AT_ENTRY: Symbol = Symbol("trigger_at_entry");
pub const LATE_RELEASE: Symbol = Symbol("late_release");
pub const CLUSTER_POLICY: Symbol = Symbol("cluster_policy");
pub const MAX_REGS: Symbol = Symbol("max_regs");
pub const WAVE: Symbol = Symbol("wave");
pub const NAME: Symbol = Symbol("name");

// ---- parameter attributes and types
pub const COMPTIME: Symbol = Symbol("comptime");
pub const PRODUCED: Symbol = Symbol("produced");
pub const READY: Symbol = Symbol("ready");
pub const ALIGN: Symbol = Symbol("align");
pub const STRIDES: Symbol = Symbol("strides");
pub const WHEN: Symbol = Symbol("when");
pub const DOC: Symbol = Symbol("doc");
pub const TENSOR: Symbol = Symbol("Tensor");

/// Element types of tensors, buffers and scalars: name and byte size.
pub const ELEMS: &[(&str, u64)] = &[
    ("f32", 4),
    ("bf16", 2),
    ("i32", 4),
    ("u32", 4),
    ("i64", 8),
    ("u64", 8),
];
/// Scalar kernel parameter types (passed at launch).
pub const SCALARS: &[&str] = &["f32", "i32", "u32", "i64", "u64"];

// ---- DSL macros inside a kernel body
pub const ROLE: Symbol = Symbol("role");
pub const MBARRIER: Symbol = Symbol("mbarrier");
pub const SHARED: Symbol = Symbol("shared");
pub const REGS: Symbol = Symbol("regs");
pub const IN_ROLE: Symbol = Symbol("in_role");
pub const SEND: Symbol = Symbol("send");
pub const BULK_COPY: Symbol = Symbol("bulk_copy");
pub const CP_ASYNC: Symbol = Symbol("cp_async");
pub const BULK_STORE: Symbol = Symbol("bulk_store");
/// What a DSL macro becomes inside the macro until expansion.
pub const NODE: Symbol = Symbol("__kda_node");

// ---- DSL macro arguments
pub const ARRIVALS: Symbol = Symbol("arrivals");
pub const TX: Symbol = Symbol("tx");
pub const ROLES: Symbol = Symbol("roles");
/// `shared!([bf16; rows, k], swizzle = 128)`: a wgmma operand tile.
pub const SWIZZLE: Symbol = Symbol("swizzle");
pub const COUNT: Symbol = Symbol("count");
pub const GUARD: Symbol = Symbol("guard");
pub const RELEASED: Symbol = Symbol("released");
pub const FILL: Symbol = Symbol("fill");
pub const TO: Symbol = Symbol("to");
pub const ALL: Symbol = Symbol("all");
pub const COMPLETES: Symbol = Symbol("completes");
pub const BYTES: Symbol = Symbol("bytes");
pub const EVICT_FIRST: Symbol = Symbol("evict_first");
pub const STAGE_THROUGH_SHARED: Symbol = Symbol("stage_through_shared");
pub const STORE_THROUGH_SHARED: Symbol = Symbol("store_through_shared");

// ---- mbarrier methods
pub const INIT: Symbol = Symbol("init");
pub const ARRIVE: Symbol = Symbol("arrive");
/// `bar.arrive_on(rank)`: one arrival on CTA `rank`'s `bar`.
pub const ARRIVE_ON: Symbol = Symbol("arrive_on");
pub const ARM: Symbol = Symbol("arm");
pub const ARRIVE_EXPECT_TX: Symbol = Symbol("arrive_expect_tx");
pub const WAIT: Symbol = Symbol("wait");
pub const WAIT_PHASE: Symbol = Symbol("wait_phase");

// ---- tensor / shared-buffer methods
/// Methods whose first argument, an array literal, is a tensor index (its
/// elements may have different integer types): the loads and `tile`.
pub const LOADS: &[&str] = &["load", "load2", "load4", "load8", "tile"];
pub const STORES: &[&str] = &["store", "store_if"];
pub const EVICT_FIRST_VIEW: Symbol = Symbol("evict_first");

// ---- DSL functions with a meaning for the checks
pub const PDL_WAIT: Symbol = Symbol("pdl_wait");
pub const CLUSTER_ARRIVE: &[&str] = &["cluster_arrive", "cluster_arrive_relaxed"];
pub const CLUSTER_WAIT: Symbol = Symbol("cluster_wait");
pub const CLUSTER_SYNC: Symbol = Symbol("cluster_sync");
/// `bulk_wait(n)`, `bulk_wait_read(n)`: the waits that let a bulk store's
/// source be written again.
pub const BULK_WAITS: &[&str] = &["bulk_wait", "bulk_wait_read"];
pub const WARP_SUM: Symbol = Symbol("warp_sum");
/// `shfl_idx(v, lane)`: warp-uniform when `lane` is.
pub const SHFL_IDX: Symbol = Symbol("shfl_idx");
/// Warp collectives: every lane of the warp must reach them together.
pub const COLLECTIVES: &[&str] = &[
    "shfl_bfly",
    "shfl_idx",
    "elect",
    "mma",
    "warp_sum",
    "wgmma",
    "wgmma_acc",
    "wgmma_fence",
    "wgmma_commit",
    "wgmma_wait",
];
/// Values that differ between the lanes of a warp.
pub const LANE_VARYING: &[&str] = &[
    "thread_idx",
    "lane_id",
    "elect",
    "shfl_bfly",
    "shfl_idx",
    "mma",
    "wgmma",
    "wgmma_acc",
    "wgmma_coord",
];
/// Values that are the same on every thread of a CTA.
pub const UNIFORM: &[&str] = &["block_idx", "grid_dim", "cluster_rank"];
/// Functions whose result is a runtime value even from comptime arguments.
pub const RUNTIME_VALUES: &[&str] = &["fma", "fma_ftz", "fma_with", "select", "pack", "val"];
/// Methods that tell the shape of a Rust container, comptime even when it
/// holds runtime values (`history.len()`, `state_full.is_some()`).
pub const SHAPE_METHODS: &[&str] = &["len", "is_empty", "is_some", "is_none", "capacity", "dims"];
/// `range(a, b)`: a loop range that may have runtime bounds.
pub const RANGE: Symbol = Symbol("range");

/// The marker attribute the analysis puts on control flow and comparisons
/// that must be dispatched on the type at trace time (not proven comptime).
pub const RUNTIME_MARK: Symbol = Symbol("__kda_runtime");

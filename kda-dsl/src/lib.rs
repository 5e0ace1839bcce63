//! kda-dsl: the runtime side of `#[cluster_kernel]`, re-exported by the `kda`
//! facade as `kda::dsl` (the path expansions name).
//!
//! The macro turns a kernel function into a builder function that *traces*
//! the body: comptime values are plain Rust (the `#[comptime]` parameters,
//! numbers, arrays, `Vec`s), runtime values are [`Val<T>`]s whose operators
//! emit IR instructions into the kernel being built. Control flow on a
//! comptime value runs at trace time (an `if` picks a branch, a `for`
//! unrolls); on a runtime value it becomes an IR region ([`range`], [`Cond`]).
//!
//! See `docs/language.md` for the language; the items here are what a kernel
//! body calls (all in [`prelude`], which the macro imports into every kernel).

#![warn(missing_docs)]

mod arith;
mod control;
mod hw;
mod mem;
mod sched;
mod sync;
mod tile;
mod trace;
mod val;
mod warp;
mod wgmma;

#[doc(hidden)]
#[path = "rt.rs"]
pub mod __rt;

pub use arith::{fma, fma_ftz, fma_with, select};
pub use control::{Carry, Cond, RtRange, range};
pub use half::bf16;
pub use hw::{block_idx, cluster_rank, grid_dim, lane_id, thread_idx};
pub use mem::{
    AtomicElem, IntoIx, Ix, Regs, Shared, SharedIndex, StoreValue, Tensor, TensorIndex, ix,
};
pub use sched::chains;
pub use sync::{
    Barrier, Barriers, Dest, RingIndex, Role, bar_sync, bulk_commit, bulk_wait, bulk_wait_read,
    cluster_arrive, cluster_arrive_relaxed, cluster_sync, cluster_wait, cp_async_commit,
    cp_async_wait, fence_mbarrier_init, fence_proxy_async, pdl_trigger, pdl_wait,
};
pub use tile::{StoreMask, StoreRow, StoreTile, Tile, TileRow, TileWriter};
pub use val::{Cast, Elem, Operand, Ty, Val, pack, val};
pub use warp::{Word, elect, mma, shfl_bfly, shfl_idx, sync_warp, warp_sum};
pub use wgmma::{wgmma, wgmma_acc, wgmma_commit, wgmma_coord, wgmma_fence, wgmma_wait};

/// Everything a kernel body uses; `#[cluster_kernel]` imports it into each kernel.
pub mod prelude {
    pub use super::{
        Barrier, Regs, Role, Shared, Tensor, Val, bar_sync, bf16, block_idx, bulk_commit,
        bulk_wait, bulk_wait_read, chains, cluster_arrive, cluster_arrive_relaxed, cluster_rank,
        cluster_sync, cluster_wait, cp_async_commit, cp_async_wait, elect, fence_mbarrier_init,
        fence_proxy_async, fma, fma_ftz, fma_with, grid_dim, ix, lane_id, mma, pack, pdl_trigger,
        pdl_wait, range, select, shfl_bfly, shfl_idx, sync_warp, thread_idx, val, warp_sum, wgmma,
        wgmma_acc, wgmma_commit, wgmma_coord, wgmma_fence, wgmma_wait,
    };
    /// For `#[cluster_kernel(cluster_policy = ClusterPolicy::LoadBalancing)]`.
    pub use kda_ir::ClusterPolicy;
}

//! Hardware indices.

use kda_ir::Special;

use super::trace::emit;
use super::val::Val;

/// `%tid.x`: the thread's index in the block (lane-varying).
#[track_caller]
pub fn thread_idx() -> Val<u32> {
    Val::from_value(emit(|b| b.thread_idx()))
}

/// `%laneid`: the thread's lane in its warp (lane-varying).
#[track_caller]
pub fn lane_id() -> Val<u32> {
    Val::from_value(emit(|b| b.special(Special::LaneId)))
}

/// `%ctaid.{x,y,z}` for `dim` 0, 1, 2: the CTA's index in the grid (uniform).
#[track_caller]
pub fn block_idx(dim: u8) -> Val<u32> {
    Val::from_value(emit(|b| b.block_idx(dim)))
}

/// `%nctaid.{x,y,z}`: the grid's extent (uniform).
#[track_caller]
pub fn grid_dim(dim: u8) -> Val<u32> {
    Val::from_value(emit(|b| b.special(Special::GridDim(dim))))
}

/// `%cluster_ctarank`: the CTA's rank in its cluster (uniform).
#[track_caller]
pub fn cluster_rank() -> Val<u32> {
    Val::from_value(emit(|b| b.cluster_rank()))
}

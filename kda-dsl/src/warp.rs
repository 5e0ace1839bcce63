//! Warp collectives. Every lane of the warp must execute them together:
//! `#[cluster_kernel]` rejects them inside control flow that depends on a
//! lane-varying value, and the IR verifier rechecks after tracing.

use kda_ir::ShflMode;

use super::trace::emit;
use super::val::{Operand, Ty, Val};

/// A 32-bit type a shuffle can move.
pub trait Word: Ty {}
impl Word for f32 {}
impl Word for u32 {}
impl Word for i32 {}

#[track_caller]
fn shfl<T: Word>(mode: ShflMode, v: Val<T>, lane: Val<u32>) -> Val<T> {
    let (v, l) = (v.value(), lane.value());
    Val::from_value(emit(|b| b.shfl(mode, v, l)))
}

/// `shfl.sync.bfly`: the value of lane `lane ^ mask`.
#[track_caller]
pub fn shfl_bfly<T: Word>(v: Val<T>, mask: impl Operand<u32>) -> Val<T> {
    let m = mask.val();
    shfl(ShflMode::Bfly, v, m)
}

/// `shfl.sync.idx`: the value of lane `lane`.
#[track_caller]
pub fn shfl_idx<T: Word>(v: Val<T>, lane: impl Operand<u32>) -> Val<T> {
    let l = lane.val();
    shfl(ShflMode::Idx, v, l)
}

/// `bar.warp.sync` of the whole warp (CUDA's `__syncwarp()`): the lanes
/// wait for each other, and what each lane wrote to memory before it is
/// ordered before what the others read after it. A warp collective: only in
/// warp-uniform control flow.
#[track_caller]
pub fn sync_warp() {
    emit(|b| b.warp_sync())
}

/// `elect.sync`: true in exactly one lane of the warp.
#[track_caller]
pub fn elect() -> Val<bool> {
    Val::from_value(emit(|b| b.elect()))
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: `a` (4 words of
/// packed bf16 pairs), `b` (2 words), accumulator `c`.
#[track_caller]
pub fn mma(a: Val<[u32; 4]>, b: Val<[u32; 2]>, c: Val<[f32; 4]>) -> Val<[f32; 4]> {
    let (a, bb, c) = (a.value(), b.value(), c.value());
    Val::from_value(emit(|b| b.mma(a, bb, c)))
}

/// The sum over groups of `width` lanes (a power of two up to 32), by a
/// butterfly: every lane of a group gets the group's sum.
#[track_caller]
pub fn warp_sum(v: Val<f32>, width: u32) -> Val<f32> {
    assert!(
        width.is_power_of_two() && width <= 32,
        "kda: warp_sum width {width} is not a power of two up to 32"
    );
    let mut acc = v;
    let mut shift = width / 2;
    while shift > 0 {
        acc = acc + shfl_bfly(acc, shift);
        shift /= 2;
    }
    acc
}

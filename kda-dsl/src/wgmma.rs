//! Warpgroup MMA (`wgmma.mma_async.m64nNk16`, bf16 → f32) on operand tiles
//! declared `shared!([bf16; rows, k], swizzle = ..)`. A warpgroup (a role of
//! 128 threads starting at a multiple of 128) runs them all together:
//!
//! ```ignore
//! wgmma_fence();
//! let d = wgmma(n, a_tile, 0u32, b_tile, 0u32);   // D = A·Bᵀ
//! let d = wgmma_acc(&d, a_tile, 16u32, b_tile, 16u32); // D += A·Bᵀ
//! wgmma_commit();
//! wgmma_wait(0);
//! ```
//!
//! `D` is `Regs<f32>` of `n/2` values per thread; element `i` of thread `t`
//! of the warpgroup is at [`wgmma_coord`]`(i)`: row `16·(t/32) + (t%32)/4 +
//! 8·((i/2)%2)`, column `8·(i/4) + 2·(t%4) + i%2` (`kda_ir::wgmma::acc_coord`).

use super::mem::{Regs, Shared};
use super::trace::emit;
use super::val::{Operand, Val};
use half::bf16;

/// `wgmma.fence`: before the first wgmma, and between writing registers and
/// a wgmma that reads them.
#[track_caller]
pub fn wgmma_fence() {
    emit(|b| b.wgmma_fence())
}

/// `wgmma.commit_group`: the wgmmas since the last commit become a group.
#[track_caller]
pub fn wgmma_commit() {
    emit(|b| b.wgmma_commit())
}

/// `wgmma.wait_group n`: at most `n` groups still pending; the accumulators
/// of the others may be read.
#[track_caller]
pub fn wgmma_wait(n: u32) {
    emit(|b| b.wgmma_wait(n))
}

#[track_caller]
fn issue(
    n: u32,
    acc: Option<&Regs<f32>>,
    a: Shared<bf16>,
    ka: Val<u32>,
    b: Shared<bf16>,
    kb: Val<u32>,
) -> Regs<f32> {
    assert!(
        a.is_tile() && b.is_tile(),
        "kda: wgmma operands are tiles: declare them `shared!([bf16; rows, k], swizzle = ..)`"
    );
    let c: Option<Vec<_>> = acc.map(|r| r.values().map(|v| v.value()).collect());
    let (ia, ib, ka, kb) = (a.id(), b.id(), ka.value(), kb.value());
    let d = emit(|bb| bb.wgmma(n, ia, ka, ib, kb, c.as_deref()));
    Regs::from_vals(d.into_iter().map(Val::from_value).collect())
}

/// `D = A·Bᵀ` (`wgmma.mma_async.m64n{n}k16`, `scale-d` 0): A the 64×16 slice
/// of tile `a` at K column `ka`, B the n×16 slice of tile `b` at `kb`.
#[track_caller]
pub fn wgmma(
    n: u32,
    a: Shared<bf16>,
    ka: impl Operand<u32>,
    b: Shared<bf16>,
    kb: impl Operand<u32>,
) -> Regs<f32> {
    issue(n, None, a, ka.val(), b, kb.val())
}

/// `D = A·Bᵀ + acc`, N = 2 · `acc.len()`.
#[track_caller]
pub fn wgmma_acc(
    acc: &Regs<f32>,
    a: Shared<bf16>,
    ka: impl Operand<u32>,
    b: Shared<bf16>,
    kb: impl Operand<u32>,
) -> Regs<f32> {
    let n = 2 * acc.len() as u32;
    issue(n, Some(acc), a, ka.val(), b, kb.val())
}

/// The (row, column) of accumulator element `i` held by this thread.
#[track_caller]
pub fn wgmma_coord(i: u32) -> (Val<u32>, Val<u32>) {
    use kda_ir::BinOp;
    let r = emit(|b| {
        let t = b.thread_idx();
        let c127 = b.u32(127);
        let t = b.bin(BinOp::And, t, c127);
        let (c5, c31, c2, c3, c1, c4) =
            (b.u32(5), b.u32(31), b.u32(2), b.u32(3), b.u32(1), b.u32(4));
        let warp = b.bin(BinOp::Shr, t, c5);
        let lane = b.bin(BinOp::And, t, c31);
        let w16 = b.bin(BinOp::Shl, warp, c4);
        let g = b.bin(BinOp::Shr, lane, c2);
        let row0 = b.add(w16, g);
        let q = b.bin(BinOp::And, lane, c3);
        let col0 = b.bin(BinOp::Shl, q, c1);
        let dr = b.u32(8 * ((i / 2) % 2));
        let dc = b.u32(8 * (i / 4) + i % 2);
        (b.add(row0, dr), b.add(col0, dc))
    });
    (Val::from_value(r.0), Val::from_value(r.1))
}

//! Warp collectives: shuffles, `elect` and `mma.sync`. They read every
//! lane, as the hardware's full-warp forms do, whatever the active mask.

use kda_ir::ShflMode;

use super::{Warp, f, lanes, out};
use crate::decode::Ins;
use crate::numeric::mma_m16n8k16;

/// Run one op of the family.
#[inline(always)]
pub(super) fn exec(ins: &Ins, w: &mut Warp) {
    let active = w.active;
    let regs = &mut w.regs;
    match *ins {
        Ins::Shfl {
            mode,
            d,
            v,
            l: src,
            words,
        } => {
            let sv = lanes(regs, src);
            let from: [usize; 32] = std::array::from_fn(|l| match mode {
                ShflMode::Bfly => (l as u32 ^ (sv[l] & 31)) as usize,
                ShflMode::Idx => (sv[l] & 31) as usize,
            });
            for i in 0..words {
                let x = lanes(regs, v + i);
                let o = out(regs, d + i);
                (0..32).for_each(|l| o[l] = x[from[l]]);
            }
        }
        Ins::Elect { d } => {
            let o = out(regs, d);
            let first = active.trailing_zeros() as usize;
            (0..32).for_each(|l| o[l] = (l == first) as u32);
        }
        Ins::Mma { d, a, b, c } => {
            let am: [[u32; 4]; 32] =
                std::array::from_fn(|l| std::array::from_fn(|i| regs[(a as usize + i) * 32 + l]));
            let bm: [[u32; 2]; 32] =
                std::array::from_fn(|l| std::array::from_fn(|i| regs[(b as usize + i) * 32 + l]));
            let cm: [[f32; 4]; 32] = std::array::from_fn(|l| {
                std::array::from_fn(|i| f(regs[(c as usize + i) * 32 + l]))
            });
            let dm = mma_m16n8k16(&am, &bm, &cm);
            for (l, r) in dm.iter().enumerate() {
                for (i, x) in r.iter().enumerate() {
                    regs[(d as usize + i) * 32 + l] = x.to_bits();
                }
            }
        }
        _ => unreachable!("not a warp collective"),
    }
}

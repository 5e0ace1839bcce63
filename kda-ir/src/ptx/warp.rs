//! Warp collectives: `shfl.sync`, `elect.sync`, `mma.sync` (full warp mask;
//! the verifier keeps them out of divergent control flow).

use crate::entities::Inst;
use crate::op::ShflMode;
use crate::types::Scalar;

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg, brace};

const FULL_MASK: &str = "0xffffffff";

impl Emitter<'_> {
    /// One `shfl.sync` per 32-bit word of the value (bf16 pairs packed, 64-bit split).
    pub fn shfl(&mut self, i: Inst, mode: ShflMode) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.args[0]).elem;
        if s == Scalar::Bool {
            return Err(self.err(i, "shuffle of a bool (use a u32)"));
        }
        let src = self.regs(d.args[0]);
        let lane = self.reg(d.args[1]);
        let lane = self.narrow32(lane);
        let dst = self.def(d.results[0]);
        let words = self.words32(s, &src);
        let same = s.bytes() == 4;
        let outs: Vec<Reg> = if same {
            dst.clone()
        } else {
            words.iter().map(|_| self.new_reg(Bank::B32)).collect()
        };
        // c = 31: the whole warp is one segment (clamp for idx, unused for bfly).
        let m = match mode {
            ShflMode::Bfly => "bfly",
            ShflMode::Idx => "idx",
        };
        for (o, w) in outs.iter().zip(&words) {
            self.ins(format!(
                "shfl.sync.{m}.b32 {o}, {w}, {lane}, 31, {FULL_MASK}"
            ));
        }
        if !same {
            self.unpack_words32(s, &outs, &dst);
        }
        Ok(())
    }

    pub fn elect(&mut self, i: Inst) -> Result<(), PtxError> {
        let p = self.def1(self.k.insts[i].results[0]);
        self.ins(format!("elect.sync _|{p}, {FULL_MASK}"));
        Ok(())
    }

    /// `D = A·B + C` on a 16x8x16 bf16 tile with f32 accumulators; A and B are
    /// packed bf16 pairs (`u32x4`/`u32x2`, or `bf16x8`/`bf16x4`).
    pub fn mma(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let (ta, tb, tc) = (
            self.k.ty(d.args[0]),
            self.k.ty(d.args[1]),
            self.k.ty(d.args[2]),
        );
        let (ra, rb, rc) = (
            self.regs(d.args[0]),
            self.regs(d.args[1]),
            self.regs(d.args[2]),
        );
        let a = self.words32(ta.elem, &ra);
        let b = self.words32(tb.elem, &rb);
        if a.len() != 4 || b.len() != 2 || tc.elem != Scalar::F32 || rc.len() != 4 {
            return Err(self.err(
                i,
                format!("mma.m16n8k16 takes 16 + 8 bytes of bf16 and f32x4, not {ta}, {tb}, {tc}"),
            ));
        }
        let dst = self.def(d.results[0]);
        self.ins(format!(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {}, {}, {}, {}",
            brace(&dst),
            brace(&a),
            brace(&b),
            brace(&rc)
        ));
        Ok(())
    }
}

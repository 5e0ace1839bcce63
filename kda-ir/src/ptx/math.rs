//! f32 transcendental and reciprocal ops: `neg`, `abs`, `exp`, `exp2`,
//! `rsqrt`, `sqrt`, `sigmoid`, `rcp`, and the approximate `lg2.approx`.
//!
//! `fast` forms are the SFU approximations the seed uses with fast math
//! (`ex2.approx.ftz` after a multiply by log2(e), `rcp.approx.ftz`,
//! `rsqrt.approx`), which flush subnormals. The IEEE forms are correctly
//! rounded where PTX has the instruction (`sqrt.rn`, `rcp.rn`, `div.rn`);
//! `exp`/`exp2` use a Cody-Waite reduction and a degree-6 polynomial on
//! [-ln2/2, ln2/2] (max error < 1 ulp over the whole f32 range, subnormal
//! results included; NaN propagates, ±inf give inf/0).

use crate::op::UnOp;

use super::arith::f32_imm;
use super::emitter::{Bank, Emitter, Reg};

const LOG2_E: f32 = std::f32::consts::LOG2_E;
const LN_2: f32 = std::f32::consts::LN_2;
/// 1.5 · 2^23: adding it rounds an f32 below 2^22 to an integer.
const ROUND_MAGIC: f32 = 12582912.0;
/// ln 2 split so that `j · LN2_HI` is exact for |j| < 2^10.
const LN2_HI: f32 = 6.931_457_5e-1;
const LN2_LO: f32 = 1.428_606_8e-6;
/// e^f on [-ln2/2, ln2/2], highest degree first.
const EXP_POLY: [f32; 7] = [
    1.378_059_4e-3,
    8.373_124_5e-3,
    4.166_953_6e-2,
    1.666_647_2e-1,
    4.999_998_5e-1,
    1.0,
    1.0,
];

impl Emitter<'_> {
    pub fn un_f32(&mut self, op: UnOp, d: Reg, a: Reg) {
        match op {
            UnOp::Neg => self.ins(format!("neg.f32 {d}, {a}")),
            UnOp::Abs => self.ins(format!("abs.f32 {d}, {a}")),
            UnOp::Not => unreachable!("not on f32 is rejected before"),
            UnOp::Exp { fast: true } => {
                let t = self.new_reg(Bank::F32);
                self.ins(format!("mul.rn.f32 {t}, {a}, {}", f32_imm(LOG2_E)));
                self.ins(format!("ex2.approx.ftz.f32 {d}, {t}"));
            }
            UnOp::Exp { fast: false } => self.exp_ieee(d, a, false),
            UnOp::Exp2 { fast: true } => self.ins(format!("ex2.approx.ftz.f32 {d}, {a}")),
            UnOp::Exp2 { fast: false } => self.exp_ieee(d, a, true),
            UnOp::Rsqrt { fast: true } => self.ins(format!("rsqrt.approx.f32 {d}, {a}")),
            UnOp::Rsqrt { fast: false } => {
                let t = self.new_reg(Bank::F32);
                self.ins(format!("sqrt.rn.f32 {t}, {a}"));
                self.ins(format!("div.rn.f32 {d}, {}, {t}", f32_imm(1.0)));
            }
            UnOp::Sqrt => self.ins(format!("sqrt.rn.f32 {d}, {a}")),
            UnOp::Sigmoid { fast } => {
                // 1 / (1 + e^-x)
                let e = self.new_reg(Bank::F32);
                let den = self.new_reg(Bank::F32);
                if fast {
                    let t = self.new_reg(Bank::F32);
                    self.ins(format!("mul.rn.f32 {t}, {a}, {}", f32_imm(-LOG2_E)));
                    self.ins(format!("ex2.approx.ftz.f32 {e}, {t}"));
                    self.ins(format!("add.rn.f32 {den}, {e}, {}", f32_imm(1.0)));
                    self.ins(format!("rcp.approx.ftz.f32 {d}, {den}"));
                } else {
                    let na = self.new_reg(Bank::F32);
                    self.ins(format!("neg.f32 {na}, {a}"));
                    self.exp_ieee(e, na, false);
                    self.ins(format!("add.rn.f32 {den}, {e}, {}", f32_imm(1.0)));
                    self.ins(format!("div.rn.f32 {d}, {}, {den}", f32_imm(1.0)));
                }
            }
            UnOp::Rcp { fast: true } => self.ins(format!("rcp.approx.ftz.f32 {d}, {a}")),
            UnOp::Rcp { fast: false } => self.ins(format!("rcp.rn.f32 {d}, {a}")),
            UnOp::Log2Approx => self.ins(format!("lg2.approx.ftz.f32 {d}, {a}")),
        }
    }

    /// `e^a` (or `2^a` with `base2`): a = j·ln2 + f with j an integer and
    /// |f| <= ln2/2; e^f by polynomial; the result scaled by 2^j in two
    /// exact steps so that subnormal results round once.
    fn exp_ieee(&mut self, d: Reg, a: Reg, base2: bool) {
        let f32r = |e: &mut Self| e.new_reg(Bank::F32);
        let (j, f) = (f32r(self), f32r(self));
        if base2 {
            let t = f32r(self);
            self.ins(format!("cvt.rni.f32.f32 {j}, {a}"));
            self.ins(format!("sub.rn.f32 {t}, {a}, {j}"));
            self.ins(format!("mul.rn.f32 {f}, {t}, {}", f32_imm(LN_2)));
        } else {
            let magic = f32_imm(ROUND_MAGIC);
            self.ins(format!("fma.rn.f32 {j}, {a}, {}, {magic}", f32_imm(LOG2_E)));
            self.ins(format!("sub.rn.f32 {j}, {j}, {magic}"));
            self.ins(format!("fma.rn.f32 {f}, {j}, {}, {a}", f32_imm(-LN2_HI)));
            self.ins(format!("fma.rn.f32 {f}, {j}, {}, {f}", f32_imm(-LN2_LO)));
        }
        let r = f32r(self);
        self.ins(format!("mov.f32 {r}, {}", f32_imm(EXP_POLY[0])));
        for c in &EXP_POLY[1..] {
            self.ins(format!("fma.rn.f32 {r}, {r}, {f}, {}", f32_imm(*c)));
        }
        // 2^j = s · t with s = 2^127 (j > 0) or 2^-123 (j <= 0).
        let b32 = |e: &mut Self| e.new_reg(Bank::B32);
        let (ji, ia, sb, tb) = (b32(self), b32(self), b32(self), b32(self));
        let (pos, big, gt0) = (
            self.new_reg(Bank::Pred),
            self.new_reg(Bank::Pred),
            self.new_reg(Bank::Pred),
        );
        let (s, t, mag, lim) = (f32r(self), f32r(self), f32r(self), f32r(self));
        self.ins(format!("cvt.rzi.s32.f32 {ji}, {j}"));
        self.ins(format!("setp.gt.s32 {pos}, {ji}, 0"));
        self.ins(format!("selp.b32 {ia}, 0, 0x83000000, {pos}"));
        self.ins(format!("add.s32 {sb}, {ia}, 0x7F000000"));
        self.ins(format!("mov.b32 {s}, {sb}"));
        self.ins(format!("shl.b32 {tb}, {ji}, 23"));
        self.ins(format!("sub.s32 {tb}, {tb}, {ia}"));
        self.ins(format!("mov.b32 {t}, {tb}"));
        self.ins(format!("mul.rn.f32 {r}, {r}, {s}"));
        self.ins(format!("mul.rn.f32 {r}, {r}, {t}"));
        // Far outside the range the result is inf or 0 (and j may not fit).
        let bound = if base2 { 150.0 } else { 104.0 };
        self.ins(format!("abs.f32 {mag}, {a}"));
        self.ins(format!("setp.ge.f32 {big}, {mag}, {}", f32_imm(bound)));
        self.ins(format!("setp.gt.f32 {gt0}, {a}, {}", f32_imm(0.0)));
        self.ins(format!(
            "selp.f32 {lim}, {}, {}, {gt0}",
            f32_imm(f32::INFINITY),
            f32_imm(0.0)
        ));
        self.ins(format!("selp.f32 {d}, {lim}, {r}, {big}"));
    }
}

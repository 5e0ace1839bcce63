//! Constants, special registers, scalar parameters and element-wise
//! arithmetic: `iconst`, `fconst`, `special`, `param`, `add`.. `shr`, `fma`,
//! unary ops, `cmp`, `select`, `cvt`, `bitcast`, `pack`, `extract`.
//!
//! Vectors are lowered lane by lane. f32 `add`/`sub`/`mul` carry `.rn` so
//! ptxas never contracts them into an fma the IR did not ask for (the
//! simulator rounds each op). bf16 arithmetic runs in f32 and rounds the
//! result to bf16 (nearest even).

use crate::entities::{Inst, ScalarParam};
use crate::op::{BinOp, CmpOp, Special, UnOp};
use crate::types::Scalar;

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg, brace};
use super::entry::{scalar_param, scalar_param_type};

/// `.s32`-style type suffix of an integer scalar.
pub(super) fn int_ty(s: Scalar) -> &'static str {
    match s {
        Scalar::I32 => "s32",
        Scalar::U32 => "u32",
        Scalar::I64 => "s64",
        Scalar::U64 => "u64",
        _ => unreachable!("int_ty of {s}"),
    }
}

/// Bit-size type suffix (`b16`, `b32`, `b64`, `pred`) of a scalar.
pub(super) fn bits_ty(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "pred",
        Scalar::BF16 => "b16",
        Scalar::I32 | Scalar::U32 | Scalar::F32 => "b32",
        Scalar::I64 | Scalar::U64 => "b64",
    }
}

/// `0fXXXXXXXX`: an exact f32 immediate.
pub(super) fn f32_imm(x: f32) -> String {
    format!("0f{:08X}", x.to_bits())
}

fn is64(s: Scalar) -> bool {
    matches!(s, Scalar::I64 | Scalar::U64)
}

impl Emitter<'_> {
    /// `mov` of one lane of any type.
    pub fn mov(&mut self, s: Scalar, d: Reg, a: Reg) {
        if s == Scalar::F32 {
            self.ins(format!("mov.f32 {d}, {a}"));
        } else {
            self.ins(format!("mov.{} {d}, {a}", bits_ty(s)));
        }
    }

    /// A bf16 register widened to f32 (exact).
    pub fn bf16_to_f32(&mut self, a: Reg) -> Reg {
        let f = self.new_reg(Bank::F32);
        self.ins(format!("cvt.f32.bf16 {f}, {a}"));
        f
    }

    /// Round an f32 register to bf16, nearest even.
    pub fn f32_to_bf16(&mut self, d: Reg, f: Reg) {
        self.ins(format!("cvt.rn.bf16.f32 {d}, {f}"));
    }

    pub fn iconst(&mut self, i: Inst, c: i64) -> Result<(), PtxError> {
        let v = self.k.insts[i].results[0];
        let ty = self.k.ty(v);
        let imm = match ty.elem {
            Scalar::Bool => ((c != 0) as u8).to_string(),
            Scalar::I32 => (c as i32).to_string(),
            Scalar::U32 => (c as u32).to_string(),
            Scalar::I64 | Scalar::U64 => c.to_string(),
            Scalar::F32 | Scalar::BF16 => return Err(self.err(i, "iconst of a float type")),
        };
        for d in self.def(v) {
            self.ins(format!("mov.{} {d}, {imm}", bits_ty(ty.elem)));
        }
        Ok(())
    }

    pub fn fconst(&mut self, i: Inst, c: f64) -> Result<(), PtxError> {
        let v = self.k.insts[i].results[0];
        let ty = self.k.ty(v);
        let text = match ty.elem {
            Scalar::F32 => format!("mov.f32 {{}}, {}", f32_imm(c as f32)),
            Scalar::BF16 => format!("mov.b16 {{}}, 0x{:04X}", half::bf16::from_f64(c).to_bits()),
            _ => return Err(self.err(i, format!("fconst of type {ty}"))),
        };
        for d in self.def(v) {
            self.ins(text.replace("{}", &d.to_string()));
        }
        Ok(())
    }

    pub fn special(&mut self, i: Inst, s: Special) -> Result<(), PtxError> {
        let xyz = |d: u8| ["x", "y", "z"][d.min(2) as usize];
        let sreg = match s {
            Special::ThreadIdx => "%tid.x".to_string(),
            Special::BlockIdx(d) => format!("%ctaid.{}", xyz(d)),
            Special::GridDim(d) => format!("%nctaid.{}", xyz(d)),
            Special::ClusterRank => "%cluster_ctarank".to_string(),
            Special::LaneId => "%laneid".to_string(),
        };
        let d = self.def1(self.k.insts[i].results[0]);
        self.ins(format!("mov.u32 {d}, {sreg}"));
        Ok(())
    }

    pub fn param(&mut self, i: Inst, s: ScalarParam) -> Result<(), PtxError> {
        let k = self.k;
        let ty = k.scalars[s].ty;
        let name = scalar_param(k, s);
        let d = self.def1(k.insts[i].results[0]);
        if ty == Scalar::Bool {
            let t = self.new_reg(Bank::B32);
            self.ins(format!("ld.param.u32 {t}, [{name}]"));
            self.ins(format!("setp.ne.u32 {d}, {t}, 0"));
        } else {
            self.ins(format!("ld.param{} {d}, [{name}]", scalar_param_type(ty)));
        }
        Ok(())
    }

    // ---- binary

    pub fn bin(&mut self, i: Inst, op: BinOp) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let (a, b, v) = (d.args[0], d.args[1], d.results[0]);
        let s = self.k.ty(a).elem;
        let (ra, rb) = (self.regs(a), self.regs(b));
        let rd = self.def(v);
        for l in 0..rd.len() {
            self.bin_lane(i, op, s, rd[l], ra[l], rb[l])?;
        }
        Ok(())
    }

    fn bin_lane(
        &mut self,
        i: Inst,
        op: BinOp,
        s: Scalar,
        d: Reg,
        a: Reg,
        b: Reg,
    ) -> Result<(), PtxError> {
        use BinOp::*;
        let bad = |e: &Self| Err(e.err(i, format!("`{op:?}` is not defined on {s}")));
        match s {
            Scalar::Bool => {
                let m = match op {
                    And => "and",
                    Or => "or",
                    Xor => "xor",
                    _ => return bad(self),
                };
                self.ins(format!("{m}.pred {d}, {a}, {b}"));
            }
            Scalar::BF16 => {
                if !matches!(op, Add | Sub | Mul | Div | Min | Max) {
                    return bad(self);
                }
                let (fa, fb) = (self.bf16_to_f32(a), self.bf16_to_f32(b));
                let t = self.new_reg(Bank::F32);
                self.bin_lane(i, op, Scalar::F32, t, fa, fb)?;
                self.f32_to_bf16(d, t);
            }
            Scalar::F32 => {
                let m = match op {
                    Add => "add.rn.f32",
                    Sub => "sub.rn.f32",
                    Mul => "mul.rn.f32",
                    Div => "div.rn.f32",
                    Min => "min.f32",
                    Max => "max.f32",
                    _ => return bad(self),
                };
                self.ins(format!("{m} {d}, {a}, {b}"));
            }
            _ => {
                let t = int_ty(s);
                let bits = bits_ty(s);
                let m = match op {
                    Add => format!("add.{t}"),
                    Sub => format!("sub.{t}"),
                    Mul => format!("mul.lo.{t}"),
                    Div => format!("div.{t}"),
                    Rem => format!("rem.{t}"),
                    Min => format!("min.{t}"),
                    Max => format!("max.{t}"),
                    And => format!("and.{bits}"),
                    Or => format!("or.{bits}"),
                    Xor => format!("xor.{bits}"),
                    Shl | Shr => {
                        // PTX shift amounts are u32 and clamp at the width.
                        let amount = if is64(s) {
                            let c = self.new_reg(Bank::B64);
                            let n = self.new_reg(Bank::B32);
                            self.ins(format!("min.u64 {c}, {b}, 64"));
                            self.ins(format!("cvt.u32.u64 {n}, {c}"));
                            n
                        } else {
                            b
                        };
                        let m = match op {
                            Shl => format!("shl.{bits}"),
                            _ if s.is_signed() => format!("shr.{t}"),
                            _ => format!("shr.{bits}"),
                        };
                        self.ins(format!("{m} {d}, {a}, {amount}"));
                        return Ok(());
                    }
                };
                self.ins(format!("{m} {d}, {a}, {b}"));
            }
        }
        Ok(())
    }

    pub fn fma(&mut self, i: Inst, ftz: bool) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.args[0]).elem;
        let (ra, rb, rc) = (
            self.regs(d.args[0]),
            self.regs(d.args[1]),
            self.regs(d.args[2]),
        );
        let rd = self.def(d.results[0]);
        let ftz = if ftz { ".ftz" } else { "" };
        for l in 0..rd.len() {
            match s {
                Scalar::F32 => self.ins(format!(
                    "fma.rn{ftz}.f32 {}, {}, {}, {}",
                    rd[l], ra[l], rb[l], rc[l]
                )),
                Scalar::BF16 => {
                    let (a, b, c) = (
                        self.bf16_to_f32(ra[l]),
                        self.bf16_to_f32(rb[l]),
                        self.bf16_to_f32(rc[l]),
                    );
                    let t = self.new_reg(Bank::F32);
                    self.ins(format!("fma.rn{ftz}.f32 {t}, {a}, {b}, {c}"));
                    self.f32_to_bf16(rd[l], t);
                }
                s if s.is_int() => self.ins(format!(
                    "mad.lo.{} {}, {}, {}, {}",
                    int_ty(s),
                    rd[l],
                    ra[l],
                    rb[l],
                    rc[l]
                )),
                _ => return Err(self.err(i, format!("fma is not defined on {s}"))),
            }
        }
        Ok(())
    }

    // ---- unary

    pub fn un(&mut self, i: Inst, op: UnOp) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.args[0]).elem;
        let ra = self.regs(d.args[0]);
        let rd = self.def(d.results[0]);
        for l in 0..rd.len() {
            self.un_lane(i, op, s, rd[l], ra[l])?;
        }
        Ok(())
    }

    fn un_lane(&mut self, i: Inst, op: UnOp, s: Scalar, d: Reg, a: Reg) -> Result<(), PtxError> {
        let bad = |e: &Self| Err(e.err(i, format!("`{op:?}` is not defined on {s}")));
        match (op, s) {
            (UnOp::Not, Scalar::Bool) => self.ins(format!("not.pred {d}, {a}")),
            (_, Scalar::Bool) => return bad(self),
            (UnOp::Not, s) if s.is_int() => self.ins(format!("not.{} {d}, {a}", bits_ty(s))),
            (UnOp::Neg, s) if s.is_int() => {
                let t = if is64(s) { "s64" } else { "s32" };
                self.ins(format!("neg.{t} {d}, {a}"));
            }
            (UnOp::Abs, s) if s.is_signed() => self.ins(format!("abs.{} {d}, {a}", int_ty(s))),
            (UnOp::Abs, s) if s.is_int() => self.mov(s, d, a),
            (_, s) if s.is_int() => return bad(self),
            // Sign-bit ops on bf16 are exact without a round trip through f32.
            (UnOp::Neg, Scalar::BF16) => self.ins(format!("xor.b16 {d}, {a}, 0x8000")),
            (UnOp::Abs, Scalar::BF16) => self.ins(format!("and.b16 {d}, {a}, 0x7FFF")),
            (UnOp::Not, _) => return bad(self),
            (_, Scalar::BF16) => {
                let f = self.bf16_to_f32(a);
                let t = self.new_reg(Bank::F32);
                self.un_lane(i, op, Scalar::F32, t, f)?;
                self.f32_to_bf16(d, t);
            }
            (op, _) => self.un_f32(op, d, a),
        }
        Ok(())
    }

    // ---- comparisons and selection

    pub fn cmp(&mut self, i: Inst, op: CmpOp) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.args[0]).elem;
        let (ra, rb) = (self.regs(d.args[0]), self.regs(d.args[1]));
        let rd = self.def(d.results[0]);
        for l in 0..rd.len() {
            let (a, b, p) = (ra[l], rb[l], rd[l]);
            let c = match op {
                CmpOp::Eq => "eq",
                // Unordered: NaN != x holds, as in Rust.
                CmpOp::Ne if s.is_float() => "neu",
                CmpOp::Ne => "ne",
                CmpOp::Lt => "lt",
                CmpOp::Le => "le",
                CmpOp::Gt => "gt",
                CmpOp::Ge => "ge",
            };
            match s {
                Scalar::Bool => match op {
                    CmpOp::Ne => self.ins(format!("xor.pred {p}, {a}, {b}")),
                    CmpOp::Eq => {
                        let t = self.new_reg(Bank::Pred);
                        self.ins(format!("xor.pred {t}, {a}, {b}"));
                        self.ins(format!("not.pred {p}, {t}"));
                    }
                    _ => return Err(self.err(i, "bool values compare only for (in)equality")),
                },
                Scalar::F32 => self.ins(format!("setp.{c}.f32 {p}, {a}, {b}")),
                Scalar::BF16 => {
                    let (fa, fb) = (self.bf16_to_f32(a), self.bf16_to_f32(b));
                    self.ins(format!("setp.{c}.f32 {p}, {fa}, {fb}"));
                }
                s => self.ins(format!("setp.{c}.{} {p}, {a}, {b}", int_ty(s))),
            }
        }
        Ok(())
    }

    pub fn select(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.args[1]).elem;
        let (rc, ra, rb) = (
            self.regs(d.args[0]),
            self.regs(d.args[1]),
            self.regs(d.args[2]),
        );
        let rd = self.def(d.results[0]);
        for l in 0..rd.len() {
            let c = if rc.len() == 1 { rc[0] } else { rc[l] };
            self.select_lane(s, rd[l], c, ra[l], rb[l]);
        }
        Ok(())
    }

    /// `d = c ? a : b` for one lane.
    pub fn select_lane(&mut self, s: Scalar, d: Reg, c: Reg, a: Reg, b: Reg) {
        if s == Scalar::Bool {
            let (t, nc, u) = (
                self.new_reg(Bank::Pred),
                self.new_reg(Bank::Pred),
                self.new_reg(Bank::Pred),
            );
            self.ins(format!("and.pred {t}, {c}, {a}"));
            self.ins(format!("not.pred {nc}, {c}"));
            self.ins(format!("and.pred {u}, {nc}, {b}"));
            self.ins(format!("or.pred {d}, {t}, {u}"));
        } else {
            let t = if s == Scalar::F32 { "f32" } else { bits_ty(s) };
            self.ins(format!("selp.{t} {d}, {a}, {b}, {c}"));
        }
    }

    // ---- conversions

    pub fn cvt(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let from = self.k.ty(d.args[0]).elem;
        let to = self.k.ty(d.results[0]).elem;
        let ra = self.regs(d.args[0]);
        let rd = self.def(d.results[0]);
        for l in 0..rd.len() {
            self.cvt_lane(from, to, rd[l], ra[l]);
        }
        Ok(())
    }

    /// One lane of a value conversion. Float to int truncates toward zero and
    /// saturates (NaN gives 0), as Rust's `as`; int to float and f32 to bf16
    /// round to nearest even; int widening extends by the source's signedness,
    /// narrowing keeps the low bits.
    fn cvt_lane(&mut self, from: Scalar, to: Scalar, d: Reg, a: Reg) {
        use Scalar::*;
        let f32_zero = f32_imm(0.0);
        match (from, to) {
            _ if from == to => self.mov(from, d, a),
            (Bool, F32) => self.ins(format!("selp.f32 {d}, {}, {f32_zero}, {a}", f32_imm(1.0))),
            (Bool, BF16) => self.ins(format!("selp.b16 {d}, 0x3F80, 0x0000, {a}")),
            (Bool, t) => self.ins(format!("selp.{} {d}, 1, 0, {a}", int_ty(t))),
            (F32, Bool) => self.ins(format!("setp.neu.f32 {d}, {a}, {f32_zero}")),
            (BF16, Bool) => {
                let f = self.bf16_to_f32(a);
                self.ins(format!("setp.neu.f32 {d}, {f}, {f32_zero}"));
            }
            (s, Bool) => self.ins(format!("setp.ne.{} {d}, {a}, 0", int_ty(s))),
            (F32, BF16) => self.f32_to_bf16(d, a),
            (BF16, F32) => self.ins(format!("cvt.f32.bf16 {d}, {a}")),
            (F32 | BF16, t) => {
                let f = if from == F32 { "f32" } else { "bf16" };
                self.ins(format!("cvt.rzi.{}.{f} {d}, {a}", int_ty(t)));
            }
            (s, F32) => self.ins(format!("cvt.rn.f32.{} {d}, {a}", int_ty(s))),
            (s, BF16) => self.ins(format!("cvt.rn.bf16.{} {d}, {a}", int_ty(s))),
            (s, t) if is64(s) == is64(t) => self.mov(s, d, a),
            (s, t) if is64(t) => {
                // Widen by the source's signedness.
                let dt = if s.is_signed() { "s64" } else { "u64" };
                self.ins(format!("cvt.{dt}.{} {d}, {a}", int_ty(s)));
            }
            (s, _) => self.ins(format!("cvt.u32.{} {d}, {a}", int_ty(s))),
        }
    }

    pub fn bitcast(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let (ta, td) = (self.k.ty(d.args[0]), self.k.ty(d.results[0]));
        if ta.bytes() != td.bytes() || ta.elem == Scalar::Bool || td.elem == Scalar::Bool {
            return Err(self.err(i, format!("bitcast from {ta} to {td}")));
        }
        let ra = self.regs(d.args[0]);
        let rd = self.def(d.results[0]);
        let (na, nd) = (ra.len(), rd.len());
        if na == nd {
            for l in 0..nd {
                self.ins(format!("mov.{} {}, {}", bits_ty(td.elem), rd[l], ra[l]));
            }
        } else if na > nd {
            // Several source lanes make one destination lane.
            let per = na / nd;
            for l in 0..nd {
                let src = brace(&ra[l * per..(l + 1) * per]);
                self.ins(format!("mov.{} {}, {src}", bits_ty(td.elem), rd[l]));
            }
        } else {
            let per = nd / na;
            for l in 0..na {
                let dst = brace(&rd[l * per..(l + 1) * per]);
                self.ins(format!("mov.{} {dst}, {}", bits_ty(ta.elem), ra[l]));
            }
        }
        Ok(())
    }

    pub fn pack(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let s = self.k.ty(d.results[0]).elem;
        let srcs: Vec<Reg> = d.args.iter().map(|&a| self.reg(a)).collect();
        let rd = self.def(d.results[0]);
        for (dst, src) in rd.into_iter().zip(srcs) {
            self.mov(s, dst, src);
        }
        Ok(())
    }

    pub fn extract(&mut self, i: Inst, lane: u8) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let ty = self.k.ty(d.args[0]);
        if lane >= ty.lanes {
            return Err(self.err(i, format!("lane {lane} of a {ty}")));
        }
        let src = self.regs(d.args[0])[lane as usize];
        let dst = self.def1(d.results[0]);
        self.mov(ty.elem, dst, src);
        Ok(())
    }
}

//! Global and shared memory: `ld.global`, `st.global`, `ld.shared`,
//! `st.shared`, and the addressing and operand forms the async copies share.
//!
//! A global element address is `base + Σ idx_i · stride_i · size(dtype)` in
//! 64 bits: a 32-bit index with a constant stride is one `mad.wide`; a
//! symbolic stride multiplies by the symbol's parameter. A shared address is
//! the 32-bit shared-window address `smem + idx · size(elem)` with the
//! buffer's offset as the immediate of the access. Values move as one
//! instruction of 4, 8 or 16 bytes (`.v2`/`.v4`); bf16 vectors travel as
//! packed 32-bit words. Evict-first accesses skip L1 and carry the
//! `createpolicy` L2 evict-first hint.

use crate::entities::{Buffer, Inst, Tensor, Value};
use crate::kernel::Dim;
use crate::op::CachePolicy;
use crate::types::Scalar;

use super::PtxError;
use super::arith::int_ty;
use super::emitter::{Bank, Emitter, Reg, brace};

/// The PTX type of one scalar lane in memory.
fn mem_ty(s: Scalar) -> &'static str {
    match s {
        Scalar::F32 => "f32",
        Scalar::BF16 => "b16",
        Scalar::I32 | Scalar::U32 => "b32",
        Scalar::I64 | Scalar::U64 => "b64",
        Scalar::Bool => unreachable!("bool has no memory form"),
    }
}

fn operand(regs: &[Reg]) -> String {
    if regs.len() == 1 {
        regs[0].to_string()
    } else {
        brace(regs)
    }
}

impl Emitter<'_> {
    /// `.v2`/`.v4` for 2/4 registers, or an error.
    fn vec_suffix(&self, i: Inst, n: usize) -> Result<&'static str, PtxError> {
        match n {
            1 => Ok(""),
            2 => Ok(".v2"),
            4 => Ok(".v4"),
            _ => Err(self.err(
                i,
                format!("a memory access of {n} registers (at most 16 bytes as 1, 2 or 4)"),
            )),
        }
    }

    fn check_memory_type(&self, i: Inst, v: Value) -> Result<(), PtxError> {
        let ty = self.k.ty(v);
        if ty.elem == Scalar::Bool || ![1, 2, 4, 8, 16].contains(&ty.bytes()) {
            return Err(self.err(
                i,
                format!("a {ty} value does not fit one access of 1, 2, 4, 8 or 16 bytes"),
            ));
        }
        Ok(())
    }

    /// Pack bf16 lanes pairwise into 32-bit words; split 64-bit lanes in two;
    /// 32-bit lanes as they are.
    pub fn words32(&mut self, s: Scalar, regs: &[Reg]) -> Vec<Reg> {
        match s {
            Scalar::BF16 => regs
                .chunks(2)
                .map(|pair| {
                    let w = self.new_reg(Bank::B32);
                    if pair.len() == 2 {
                        self.ins(format!("mov.b32 {w}, {}", brace(pair)));
                    } else {
                        self.ins(format!("cvt.u32.u16 {w}, {}", pair[0]));
                    }
                    w
                })
                .collect(),
            Scalar::I64 | Scalar::U64 => regs
                .iter()
                .flat_map(|&r| {
                    let (lo, hi) = (self.new_reg(Bank::B32), self.new_reg(Bank::B32));
                    self.ins(format!("mov.b64 {{{lo}, {hi}}}, {r}"));
                    [lo, hi]
                })
                .collect(),
            _ => regs.to_vec(),
        }
    }

    /// The inverse of [`Emitter::words32`]: fill `dst` from 32-bit words.
    pub fn unpack_words32(&mut self, s: Scalar, words: &[Reg], dst: &[Reg]) {
        match s {
            Scalar::BF16 => {
                for (w, pair) in words.iter().zip(dst.chunks(2)) {
                    if pair.len() == 2 {
                        self.ins(format!("mov.b32 {}, {w}", brace(pair)));
                    } else {
                        self.ins(format!("cvt.u16.u32 {}, {w}", pair[0]));
                    }
                }
            }
            Scalar::I64 | Scalar::U64 => {
                for (d, lohi) in dst.iter().zip(words.chunks(2)) {
                    self.ins(format!("mov.b64 {d}, {}", brace(lohi)));
                }
            }
            _ => {
                for (d, w) in dst.iter().zip(words) {
                    if d != w {
                        self.ins(format!("mov.b32 {d}, {w}"));
                    }
                }
            }
        }
    }

    /// Define `v` by one load: `f(self, ".v4.f32", "{%f1, ..}")` emits it.
    pub fn load_value(
        &mut self,
        i: Inst,
        v: Value,
        f: impl FnOnce(&mut Self, String, String),
    ) -> Result<(), PtxError> {
        self.check_memory_type(i, v)?;
        let ty = self.k.ty(v);
        let dst = self.def(v);
        if ty.elem == Scalar::BF16 && ty.lanes > 1 {
            let words: Vec<Reg> = (0..ty.lanes / 2).map(|_| self.new_reg(Bank::B32)).collect();
            let vec = self.vec_suffix(i, words.len())?;
            f(self, format!("{vec}.b32"), operand(&words));
            self.unpack_words32(Scalar::BF16, &words, &dst);
        } else {
            let vec = self.vec_suffix(i, dst.len())?;
            f(self, format!("{vec}.{}", mem_ty(ty.elem)), operand(&dst));
        }
        Ok(())
    }

    /// `v` as the source operand of one store: `(".v4.f32", "{%f1, ..}")`.
    pub fn store_value(&mut self, i: Inst, v: Value) -> Result<(String, String), PtxError> {
        self.check_memory_type(i, v)?;
        let ty = self.k.ty(v);
        let regs = self.regs(v);
        if ty.elem == Scalar::BF16 && ty.lanes > 1 {
            let words = self.words32(Scalar::BF16, &regs);
            let vec = self.vec_suffix(i, words.len())?;
            Ok((format!("{vec}.b32"), operand(&words)))
        } else {
            let vec = self.vec_suffix(i, regs.len())?;
            Ok((format!("{vec}.{}", mem_ty(ty.elem)), operand(&regs)))
        }
    }

    /// A 32-bit or 64-bit integer register as 64 bits (by its signedness).
    pub fn widen64(&mut self, s: Scalar, r: Reg) -> Reg {
        if r.bank == Bank::B64 {
            return r;
        }
        let w = self.new_reg(Bank::B64);
        let to = if s.is_signed() { "s64" } else { "u64" };
        self.ins(format!("cvt.{to}.{} {w}, {r}", int_ty(s)));
        w
    }

    /// An integer register as 32 bits (low bits of a 64-bit one).
    pub fn narrow32(&mut self, r: Reg) -> Reg {
        if r.bank == Bank::B32 {
            return r;
        }
        let n = self.new_reg(Bank::B32);
        self.ins(format!("cvt.u32.u64 {n}, {r}"));
        n
    }

    /// The 64-bit global address of `t[idx..]`.
    pub fn global_addr(&mut self, i: Inst, t: Tensor, idx: &[Value]) -> Result<Reg, PtxError> {
        let k = self.k;
        let decl = &k.tensors[t];
        if idx.len() != decl.strides.len() {
            return Err(self.err(
                i,
                format!(
                    "{} indices for the {}-d tensor {t}",
                    idx.len(),
                    decl.strides.len()
                ),
            ));
        }
        let size = decl.dtype.bytes() as u64;
        let mut acc = self.tensor_base[t].expect("every tensor base is loaded in the prologue");
        for (&ix, &stride) in idx.iter().zip(&decl.strides) {
            let s = k.ty(ix).elem;
            let r = self.reg(ix);
            let next = match stride {
                Dim::Const(0) => continue,
                Dim::Const(c) => {
                    // The byte stride is an s64 immediate.
                    let coef = c
                        .checked_mul(size)
                        .filter(|&b| i64::try_from(b).is_ok())
                        .ok_or_else(|| {
                            self.err(
                                i,
                                format!(
                                    "tensor {t} {:?}: stride {c} × {size} bytes overflows a 64-bit byte offset",
                                    decl.name
                                ),
                            )
                        })?;
                    let next = self.new_reg(Bank::B64);
                    if r.bank == Bank::B32 && coef <= i32::MAX as u64 {
                        let w = if s.is_signed() { "s32" } else { "u32" };
                        self.ins(format!("mad.wide.{w} {next}, {r}, {coef}, {acc}"));
                    } else {
                        let x = self.widen64(s, r);
                        self.ins(format!("mad.lo.s64 {next}, {x}, {coef}, {acc}"));
                    }
                    next
                }
                Dim::Sym(sym) => {
                    let x = self.widen64(s, r);
                    let sr = self.sym_reg[sym].expect("every symbol is loaded in the prologue");
                    let (e, next) = (self.new_reg(Bank::B64), self.new_reg(Bank::B64));
                    self.ins(format!("mul.lo.s64 {e}, {x}, {sr}"));
                    self.ins(format!("mad.lo.s64 {next}, {e}, {size}, {acc}"));
                    next
                }
            };
            acc = next;
        }
        Ok(acc)
    }

    /// `[addr+offset]`: the shared-window address of `buf[idx]`.
    pub fn shared_addr(&mut self, b: Buffer, idx: Value) -> String {
        let (reg, off) = self.shared_addr_parts(b, idx);
        if off == 0 {
            format!("[{reg}]")
        } else {
            format!("[{reg}+{off}]")
        }
    }

    /// The register part and the buffer offset of a shared address.
    pub fn shared_addr_parts(&mut self, b: Buffer, idx: Value) -> (Reg, u32) {
        let size = self.k.buffers[b].elem.bytes();
        let off = self.layout.buffers[b];
        let ix = self.reg(idx);
        let ix = self.narrow32(ix);
        let smem = self
            .smem
            .expect("a kernel with buffers has a shared window");
        let a = self.new_reg(Bank::B32);
        self.ins(format!("mad.lo.u32 {a}, {ix}, {size}, {smem}"));
        (a, off)
    }

    /// `.L1::no_allocate.L2::cache_hint` and the policy operand, for evict-first.
    fn cache_hint(&self, p: CachePolicy) -> (&'static str, String) {
        match (p, self.evict_first) {
            (CachePolicy::EvictFirst, Some(pol)) => {
                (".L1::no_allocate.L2::cache_hint", format!(", {pol}"))
            }
            _ => ("", String::new()),
        }
    }

    pub fn ld_global(&mut self, i: Inst, t: Tensor, p: CachePolicy) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let addr = self.global_addr(i, t, &d.args)?;
        let (hint, pol) = self.cache_hint(p);
        self.load_value(i, d.results[0], |e, ty, dst| {
            e.ins(format!("ld.global{hint}{ty} {dst}, [{addr}]{pol}"));
        })
    }

    pub fn st_global(
        &mut self,
        i: Inst,
        t: Tensor,
        p: CachePolicy,
        predicated: bool,
    ) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let n = d.args.len() - 1 - predicated as usize;
        let addr = self.global_addr(i, t, &d.args[..n])?;
        let (ty, src) = self.store_value(i, d.args[n])?;
        let pred = predicated.then(|| self.reg(d.args[n + 1]));
        let (hint, pol) = self.cache_hint(p);
        self.ins_if(pred, format!("st.global{hint}{ty} [{addr}], {src}{pol}"));
        Ok(())
    }

    /// `atom.global.add.{u32,s32}` (relaxed, GPU scope): the old value.
    pub fn atom_add(&mut self, i: Inst, t: Tensor) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let n = d.args.len() - 1;
        let addr = self.global_addr(i, t, &d.args[..n])?;
        let addend = self.reg(d.args[n]);
        let ty = int_ty(self.k.ty(d.results[0]).elem);
        let dst = self.def1(d.results[0]);
        self.ins(format!("atom.global.add.{ty} {dst}, [{addr}], {addend}"));
        Ok(())
    }

    pub fn ld_shared(&mut self, i: Inst, b: Buffer) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let addr = self.shared_addr(b, d.args[0]);
        self.load_value(i, d.results[0], |e, ty, dst| {
            e.ins(format!("ld.shared{ty} {dst}, {addr}"))
        })
    }

    pub fn st_shared(&mut self, i: Inst, b: Buffer) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let addr = self.shared_addr(b, d.args[0]);
        let (ty, src) = self.store_value(i, d.args[1])?;
        self.ins(format!("st.shared{ty} {addr}, {src}"));
        Ok(())
    }
}

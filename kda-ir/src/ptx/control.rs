//! Structured control flow: `if` (results assigned in each branch), `for`
//! and `while` (carried values live in the body's parameter registers, which
//! are also the loop's results), and role dispatch.
//!
//! A role branches on the warp index (`%tid.x / 32` against the role's first
//! and end warps), so every warp takes the branch as a whole (`bra.uni`).

use crate::entities::{Inst, Region, Role, Value};
use crate::op::Op;

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg};

impl Emitter<'_> {
    /// Copy `srcs` into `dsts` as if at once (a yielded value may be one of
    /// the registers being overwritten: then go through temporaries).
    fn parallel_copy(&mut self, srcs: &[Value], dsts: &[Vec<Reg>]) {
        let k = self.k;
        let src_regs: Vec<Vec<Reg>> = srcs.iter().map(|&v| self.regs(v)).collect();
        let clash = src_regs.iter().enumerate().any(|(n, s)| {
            dsts.iter()
                .enumerate()
                .any(|(m, d)| n != m && s.iter().any(|r| d.contains(r)))
        });
        let staged: Vec<Vec<Reg>> = if clash {
            srcs.iter()
                .zip(&src_regs)
                .map(|(&v, regs)| {
                    let s = k.ty(v).elem;
                    regs.iter()
                        .map(|&r| {
                            let t = self.new_reg(r.bank);
                            self.mov(s, t, r);
                            t
                        })
                        .collect()
                })
                .collect()
        } else {
            src_regs
        };
        for ((&v, src), dst) in srcs.iter().zip(&staged).zip(dsts) {
            let s = k.ty(v).elem;
            for (&a, &d) in src.iter().zip(dst) {
                if a != d {
                    self.mov(s, d, a);
                }
            }
        }
    }

    fn region_is_empty(&self, r: Region) -> bool {
        self.k.regions[r]
            .insts
            .iter()
            .all(|&i| self.k.insts[i].op == Op::Yield && self.k.insts[i].args.is_empty())
    }

    pub fn if_(&mut self, i: Inst, then: Region, els: Region) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let cond = self.reg(d.args[0]);
        let results: Vec<Vec<Reg>> = d.results.iter().map(|&v| self.def(v)).collect();
        let has_else = !self.region_is_empty(els);
        let end = self.new_label("endif");
        let else_l = if has_else {
            self.new_label("else")
        } else {
            end.clone()
        };
        self.ins(format!("@!{cond} bra {else_l}"));
        self.divergent += 1;
        let ys = self.region(then)?;
        if !ys.is_empty() {
            self.at(i);
        }
        self.parallel_copy(&ys, &results);
        if has_else {
            self.ins(format!("bra.uni {end}"));
            self.label(&else_l);
            let ys = self.region(els)?;
            if !ys.is_empty() {
                self.at(i);
            }
            self.parallel_copy(&ys, &results);
        }
        self.divergent -= 1;
        self.label(&end);
        Ok(())
    }

    pub fn for_(&mut self, i: Inst, body: Region) -> Result<(), PtxError> {
        let k = self.k;
        let d = &k.insts[i];
        let (lo, hi, step) = (d.args[0], d.args[1], d.args[2]);
        let s = k.ty(lo).elem;
        if !s.is_int() {
            return Err(self.err(i, format!("a for loop counts in an integer type, not {s}")));
        }
        let params = k.regions[body].params.clone();
        let regs: Vec<Vec<Reg>> = params.iter().map(|&p| self.def(p)).collect();
        self.parallel_copy(&d.args[3..], &regs[1..]);
        let iv = regs[0][0];
        self.mov(s, iv, self.reg(lo));
        let (head, end) = (self.new_label("for"), self.new_label("endfor"));
        let done = self.new_reg(Bank::Pred);
        self.label(&head);
        let t = super::arith::int_ty(s);
        self.ins(format!("setp.ge.{t} {done}, {iv}, {}", self.reg(hi)));
        self.ins(format!("@{done} bra {end}"));
        self.divergent += 1;
        let ys = self.region(body)?;
        self.at(i);
        self.parallel_copy(&ys, &regs[1..]);
        self.ins(format!("add.{t} {iv}, {iv}, {}", self.reg(step)));
        self.ins(format!("bra {head}"));
        self.divergent -= 1;
        self.label(&end);
        for (&v, r) in d.results.iter().zip(&regs[1..]) {
            self.alias(v, r.clone());
        }
        Ok(())
    }

    pub fn while_(&mut self, i: Inst, cond: Region, body: Region) -> Result<(), PtxError> {
        let k = self.k;
        let d = &k.insts[i];
        let cparams: Vec<Vec<Reg>> = k.regions[cond]
            .params
            .clone()
            .iter()
            .map(|&p| self.def(p))
            .collect();
        let bparams: Vec<Vec<Reg>> = k.regions[body]
            .params
            .clone()
            .iter()
            .map(|&p| self.def(p))
            .collect();
        self.parallel_copy(&d.args, &cparams);
        let (head, end) = (self.new_label("while"), self.new_label("endwhile"));
        self.label(&head);
        self.divergent += 1;
        let ys = self.region(cond)?;
        self.at(i);
        let Some((&c, passed)) = ys.split_first() else {
            return Err(self.err(i, "a while condition yields no bool"));
        };
        let c = self.reg(c);
        self.parallel_copy(passed, &bparams);
        self.ins(format!("@!{c} bra {end}"));
        let ys = self.region(body)?;
        self.at(i);
        self.parallel_copy(&ys, &cparams);
        self.ins(format!("bra {head}"));
        self.divergent -= 1;
        self.label(&end);
        for (&v, r) in d.results.iter().zip(&bparams) {
            self.alias(v, r.clone());
        }
        Ok(())
    }

    pub fn in_role(&mut self, _i: Inst, role: Role, body: Region) -> Result<(), PtxError> {
        let r = &self.k.roles[role];
        let block = self.k.launch.block;
        let (first, end) = (r.first, r.end().min(block));
        if first == 0 && end >= block {
            // The role is the whole block: no branch.
            self.region(body)?;
            return Ok(());
        }
        let skip = self.new_label("end_role");
        let out = self.new_reg(Bank::Pred);
        let aligned = first % 32 == 0 && end % 32 == 0;
        let (x, lo, hi, uni) = if aligned {
            (
                self.warp.expect("roles load the warp index"),
                first / 32,
                end / 32,
                ".uni",
            )
        } else {
            (
                self.tid.expect("roles load the thread index"),
                first,
                end,
                "",
            )
        };
        if lo == 0 {
            self.ins(format!("setp.ge.u32 {out}, {x}, {hi}"));
        } else if end >= block {
            self.ins(format!("setp.lt.u32 {out}, {x}, {lo}"));
        } else {
            // x - lo wraps below lo, so one unsigned compare covers both ends.
            let t = self.new_reg(Bank::B32);
            self.ins(format!("sub.u32 {t}, {x}, {lo}"));
            self.ins(format!("setp.ge.u32 {out}, {t}, {}", hi - lo));
        }
        self.ins(format!("@{out} bra{uni} {skip}"));
        if !aligned {
            self.divergent += 1;
        }
        self.region(body)?;
        if !aligned {
            self.divergent -= 1;
        }
        self.label(&skip);
        Ok(())
    }
}

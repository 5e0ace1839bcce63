//! Instructions: `results = mnemonic operands  ; @loc`, and the regions of
//! `if`, `for`, `while` and `role`.

use cranelift_entity::EntityRef;

use super::lexer::{Pos, T, err};
use super::{MAX_NESTING, Parser, R, Ref};
use crate::entities::{Inst, Region, ScalarParam, Value};
use crate::kernel::{RegionData, ValueDef};
use crate::loc::Loc;
use crate::op::{BinOp, CachePolicy, InstData, Mnemonic, MnemonicError, Op, Opcode, Special, UnOp};

impl Parser {
    pub(super) fn inst(&mut self, r: Region) -> R<()> {
        let mut results = Vec::new();
        if self.is_value() && self.peek_at(1) == Some(&T::Punct(':')) {
            results.push(self.typed()?);
            while self.eat(',') {
                results.push(self.typed()?);
            }
            self.expect('=')?;
        }
        let (m, mpos) = self.ident("an instruction")?;
        let (op, args, implied) = self.op(&m, mpos)?;
        let loc = self.loc();
        for y in implied {
            self.k.insts[y].loc = loc.clone();
        }
        let inst = self.k.insts.push(InstData {
            op,
            args,
            results: Vec::new(),
            loc,
        });
        for (n, &(v, ty, pos)) in results.iter().enumerate() {
            self.define(v, ty, ValueDef::Result(inst, n as u32), pos)?;
        }
        self.k.insts[inst].results = results.iter().map(|r| r.0).collect();
        self.k.regions[r].insts.push(inst);
        Ok(())
    }

    /// A nested region: `|v1:i32, v2:f32| { ... }` (parameters optional).
    /// Returns it and the implied empty `yield` added at its end, if any.
    /// `[v]`: the one element index of a shared buffer (buffers are flat).
    fn flat_index(&mut self) -> R<Vec<Value>> {
        let pos = self.pos();
        let index = self.index()?;
        if index.len() != 1 {
            return err(
                pos,
                format!(
                    "a shared buffer takes one element index (`buf0[v3]`), found {}",
                    index.len()
                ),
            );
        }
        Ok(index)
    }

    fn region(&mut self) -> R<(Region, Option<Inst>)> {
        if self.depth >= MAX_NESTING {
            return err(
                self.pos(),
                format!("regions nest deeper than {MAX_NESTING} levels"),
            );
        }
        self.depth += 1;
        let region = self.region_body();
        self.depth -= 1;
        region
    }

    fn region_body(&mut self) -> R<(Region, Option<Inst>)> {
        let r = self.k.regions.push(RegionData::default());
        if self.eat('|') {
            let mut n = 0;
            if !self.eat('|') {
                loop {
                    let (v, ty, pos) = self.typed()?;
                    self.define(v, ty, ValueDef::Param(r, n), pos)?;
                    self.k.regions[r].params.push(v);
                    n += 1;
                    if self.eat('|') {
                        break;
                    }
                    self.expect(',')?;
                }
            }
        }
        self.expect('{')?;
        self.statements(r, false)?;
        self.expect('}')?;
        let ends = self.k.regions[r]
            .insts
            .last()
            .is_some_and(|&i| self.k.insts[i].op == Op::Yield);
        let implied = if ends {
            None
        } else {
            let y = self.k.insts.push(InstData {
                op: Op::Yield,
                args: Vec::new(),
                results: Vec::new(),
                loc: Loc::synthetic(),
            });
            self.k.regions[r].insts.push(y);
            Some(y)
        };
        Ok((r, implied))
    }

    /// The op named `m` and its operands; region ops also return the implied
    /// yields whose location is the op's.
    fn op(&mut self, m: &str, mpos: Pos) -> R<(Op, Vec<Value>, Vec<Inst>)> {
        use Opcode as C;
        let (code, flag) = match Opcode::parse_mnemonic(m) {
            Ok(Mnemonic::Plain(code, flag)) => (code, flag),
            Ok(Mnemonic::Cmp(c)) => return self.plain(Op::Cmp(c)),
            Ok(Mnemonic::Shfl(s)) => return self.plain(Op::Shfl(s)),
            Ok(Mnemonic::Extract(lane)) => return self.plain(Op::Extract(lane)),
            Err(MnemonicError::BadLane) => return err(mpos, format!("bad lane in `{m}`")),
            Err(MnemonicError::Unknown) => {
                return err(mpos, format!("unknown instruction `{m}`"));
            }
        };
        // The optional modifier, where the table gives the op one.
        let fast = flag;
        let policy = if flag {
            CachePolicy::EvictFirst
        } else {
            CachePolicy::Normal
        };
        let bin = |b| Op::Bin(b);
        let un = |u| Op::Un(u);
        Ok(match code {
            C::Add => return self.plain(bin(BinOp::Add)),
            C::Sub => return self.plain(bin(BinOp::Sub)),
            C::Mul => return self.plain(bin(BinOp::Mul)),
            C::Div => return self.plain(bin(BinOp::Div)),
            C::Rem => return self.plain(bin(BinOp::Rem)),
            C::Min => return self.plain(bin(BinOp::Min)),
            C::Max => return self.plain(bin(BinOp::Max)),
            C::And => return self.plain(bin(BinOp::And)),
            C::Or => return self.plain(bin(BinOp::Or)),
            C::Xor => return self.plain(bin(BinOp::Xor)),
            C::Shl => return self.plain(bin(BinOp::Shl)),
            C::Shr => return self.plain(bin(BinOp::Shr)),
            C::Fma => return self.plain(Op::Fma { ftz: flag }),
            C::Neg => return self.plain(un(UnOp::Neg)),
            C::Not => return self.plain(un(UnOp::Not)),
            C::Abs => return self.plain(un(UnOp::Abs)),
            C::Exp => return self.plain(un(UnOp::Exp { fast })),
            C::Exp2 => return self.plain(un(UnOp::Exp2 { fast })),
            C::Rsqrt => return self.plain(un(UnOp::Rsqrt { fast })),
            C::Sqrt => return self.plain(un(UnOp::Sqrt)),
            C::Sigmoid => return self.plain(un(UnOp::Sigmoid { fast })),
            C::Rcp => return self.plain(un(UnOp::Rcp { fast })),
            C::Log2Approx => return self.plain(un(UnOp::Log2Approx)),
            // The mnemonic split gives these with their modifier.
            C::Cmp | C::Shfl | C::Extract => {
                return err(mpos, format!("unknown instruction `{m}`"));
            }
            C::Select => return self.plain(Op::Select),
            C::Cvt => return self.plain(Op::Cvt),
            C::Bitcast => return self.plain(Op::Bitcast),
            C::Pack => return self.plain(Op::Pack),
            C::ElectSync => return self.plain(Op::ElectSync),
            C::Mma16816 => return self.plain(Op::Mma16816),
            C::WarpSync => return self.plain(Op::WarpSync),
            C::FenceMbarInit => return self.plain(Op::FenceMbarInit),
            C::FenceProxyAsync => return self.plain(Op::FenceProxyAsync),
            C::ClusterArrive => return self.plain(Op::ClusterArrive { relaxed: flag }),
            C::ClusterWait => return self.plain(Op::ClusterWait),
            C::CpAsyncCommit => return self.plain(Op::CpAsyncCommit),
            C::BulkCommit => return self.plain(Op::BulkCommit),
            C::GridDepWait => return self.plain(Op::GridDepWait),
            C::GridDepLaunch => return self.plain(Op::GridDepLaunch),
            C::Yield => return self.plain(Op::Yield),
            C::IConst => {
                let c = self.number::<i64>("an integer")?;
                (Op::IConst(c), vec![], vec![])
            }
            C::FConst => (Op::FConst(self.fnum()?), vec![], vec![]),
            C::Special => {
                let (s, pos) = self.ident("a special register")?;
                let Some(sp) = Special::ALL.into_iter().find(|r| r.name() == s) else {
                    return err(pos, format!("unknown special register `{s}`"));
                };
                (Op::Special(sp), vec![], vec![])
            }
            C::Param => (
                Op::Param(ScalarParam::new(self.reference(Ref::Scalar)?)),
                vec![],
                vec![],
            ),
            C::LdGlobal => {
                let tensor = self.tensor()?;
                (Op::LdGlobal { tensor, policy }, self.index()?, vec![])
            }
            C::StGlobal => {
                let tensor = self.tensor()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                let predicated = self.same_line() && self.eat_ident("if");
                if predicated {
                    args.push(self.value()?);
                }
                (
                    Op::StGlobal {
                        tensor,
                        policy,
                        predicated,
                    },
                    args,
                    vec![],
                )
            }
            C::AtomAdd => {
                let tensor = self.tensor()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                (Op::AtomAdd { tensor }, args, vec![])
            }
            C::LdShared => {
                let buffer = self.buffer()?;
                (Op::LdShared { buffer }, self.flat_index()?, vec![])
            }
            C::StShared => {
                let buffer = self.buffer()?;
                let mut args = self.flat_index()?;
                self.expect(',')?;
                args.push(self.value()?);
                (Op::StShared { buffer }, args, vec![])
            }
            C::MbarInit => (
                Op::MbarInit {
                    barrier: self.barrier()?,
                },
                vec![],
                vec![],
            ),
            C::MbarArrive => {
                let (barrier, ring, at) = self.bar_ref()?;
                (Op::MbarArrive { barrier, ring }, at, vec![])
            }
            C::MbarArriveRemote => {
                let (barrier, ring, at) = self.bar_ref()?;
                self.expect(',')?;
                self.keyword("cta")?;
                let mut args = vec![self.value()?];
                args.extend(at);
                (Op::MbarArriveRemote { barrier, ring }, args, vec![])
            }
            C::MbarArriveExpectTx => {
                let (barrier, ring, at) = self.bar_ref()?;
                self.expect(',')?;
                (
                    Op::MbarArriveExpectTx {
                        barrier,
                        bytes: self.u32()?,
                        ring,
                    },
                    at,
                    vec![],
                )
            }
            C::MbarWaitParity => {
                let (barrier, ring, at) = self.bar_ref()?;
                self.expect(',')?;
                let mut args = vec![self.value()?];
                args.extend(at);
                (Op::MbarWaitParity { barrier, ring }, args, vec![])
            }
            C::MbarWait => {
                let barrier = self.barrier()?;
                self.expect(',')?;
                self.keyword("phase")?;
                (
                    Op::MbarWait {
                        barrier,
                        phase: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            C::BarSync => {
                let id = self.number::<u8>("a barrier id (0..=255)")?;
                self.expect(',')?;
                (
                    Op::BarSync {
                        id,
                        threads: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            C::StAsync => {
                let buffer = self.buffer()?;
                let mut args = self.flat_index()?;
                self.expect(',')?;
                args.push(self.value()?);
                self.expect(',')?;
                self.keyword("cta")?;
                args.push(self.value()?);
                self.expect(',')?;
                let (barrier, ring, at) = self.bar_ref()?;
                args.extend(at);
                (
                    Op::StAsync {
                        buffer,
                        barrier,
                        ring,
                    },
                    args,
                    vec![],
                )
            }
            C::CpAsync => {
                let buffer = self.buffer()?;
                let mut args = self.flat_index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                (Op::CpAsync { buffer, tensor }, args, vec![])
            }
            C::CpAsyncWait => (Op::CpAsyncWait(self.u32()?), vec![], vec![]),
            C::WgmmaFence => return self.plain(Op::WgmmaFence),
            C::WgmmaCommit => return self.plain(Op::WgmmaCommit),
            C::WgmmaWait => (Op::WgmmaWait(self.u32()?), vec![], vec![]),
            C::Wgmma => {
                // `wgmma.mma_async N, bufA[ka], bufB[kb] [, acc(c..)]`
                let n = self.u32()?;
                self.expect(',')?;
                let a = self.buffer()?;
                let mut args = self.flat_index()?;
                self.expect(',')?;
                let b = self.buffer()?;
                args.extend(self.flat_index()?);
                let mut scale_d = false;
                if self.eat(',') {
                    self.keyword("acc")?;
                    self.expect('(')?;
                    args.extend(self.values_until(')')?);
                    self.expect(')')?;
                    scale_d = true;
                }
                (Op::Wgmma { a, b, n, scale_d }, args, vec![])
            }
            C::SetMaxNRegInc | C::SetMaxNRegDec => {
                let regs = self.u32()?;
                let inc = code == C::SetMaxNRegInc;
                return self.plain(Op::SetMaxNReg { inc, regs });
            }
            C::BulkCopy => {
                let buffer = self.buffer()?;
                let mut args = self.flat_index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                self.expect(',')?;
                let bytes = self.u32()?;
                self.expect(',')?;
                let (barrier, ring, at) = self.bar_ref()?;
                args.extend(at);
                (
                    Op::BulkCopy {
                        buffer,
                        tensor,
                        barrier,
                        bytes,
                        policy,
                        ring,
                    },
                    args,
                    vec![],
                )
            }
            C::BulkStore => {
                // `cp.async.bulk.store tN[g..], bufN[s], BYTES`: destination
                // first, as PTX writes it; the operands keep the shared index
                // first, as for `cp.async.bulk`.
                let tensor = self.tensor()?;
                let g = self.index()?;
                self.expect(',')?;
                let buffer = self.buffer()?;
                let mut args = self.flat_index()?;
                args.extend(g);
                self.expect(',')?;
                let bytes = self.u32()?;
                (
                    Op::BulkStore {
                        buffer,
                        tensor,
                        bytes,
                        policy,
                    },
                    args,
                    vec![],
                )
            }
            C::BulkWait => (
                Op::BulkWait {
                    n: self.u32()?,
                    read: flag,
                },
                vec![],
                vec![],
            ),
            C::If => {
                let cond = self.value()?;
                let (then, y1) = self.region()?;
                self.keyword("else")?;
                let (els, y2) = self.region()?;
                (
                    Op::If { then, els },
                    vec![cond],
                    y1.into_iter().chain(y2).collect(),
                )
            }
            C::For => {
                let lo = self.value()?;
                if !matches!(self.next()?.t, T::DotDot) {
                    self.at -= 1;
                    return self.unexpected("`..`");
                }
                let hi = self.value()?;
                self.keyword("step")?;
                let step = self.value()?;
                let mut args = vec![lo, hi, step];
                if self.eat_ident("iter") {
                    self.expect('(')?;
                    args.extend(self.values_until(')')?);
                    self.expect(')')?;
                }
                let (body, y) = self.region()?;
                (Op::For { body }, args, y.into_iter().collect())
            }
            C::While => {
                self.expect('(')?;
                let args = self.values_until(')')?;
                self.expect(')')?;
                let (cond, y1) = self.region()?;
                self.keyword("do")?;
                let (body, y2) = self.region()?;
                (
                    Op::While { cond, body },
                    args,
                    y1.into_iter().chain(y2).collect(),
                )
            }
            C::InRole => {
                let role = self.role_ref()?;
                let (body, y) = self.region()?;
                (Op::InRole { role, body }, vec![], y.into_iter().collect())
            }
        })
    }

    /// An op whose operands are the values on its line.
    fn plain(&mut self, op: Op) -> R<(Op, Vec<Value>, Vec<Inst>)> {
        let args = self.values_on_line()?;
        Ok((op, args, Vec::new()))
    }
}

//! Instructions: `results = mnemonic operands  ; @loc`, and the regions of
//! `if`, `for`, `while` and `role`.

use cranelift_entity::EntityRef;

use super::lexer::{Pos, T, err};
use super::{Parser, R, Ref};
use crate::entities::{Inst, Region, ScalarParam, Value};
use crate::kernel::{RegionData, ValueDef};
use crate::loc::Loc;
use crate::op::{BinOp, CachePolicy, CmpOp, InstData, Op, ShflMode, Special, UnOp};

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
    fn region(&mut self) -> R<(Region, Option<Inst>)> {
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
        let (base, policy) = match m.strip_suffix(".evict_first") {
            Some(b) => (b, CachePolicy::EvictFirst),
            None => (m, CachePolicy::Normal),
        };
        let (unary, fast) = match m.strip_suffix(".fast") {
            Some(b) => (b, true),
            None => (m, false),
        };
        let bin = |b| Some(Op::Bin(b));
        let simple = match m {
            "add" => bin(BinOp::Add),
            "sub" => bin(BinOp::Sub),
            "mul" => bin(BinOp::Mul),
            "div" => bin(BinOp::Div),
            "rem" => bin(BinOp::Rem),
            "min" => bin(BinOp::Min),
            "max" => bin(BinOp::Max),
            "and" => bin(BinOp::And),
            "or" => bin(BinOp::Or),
            "xor" => bin(BinOp::Xor),
            "shl" => bin(BinOp::Shl),
            "shr" => bin(BinOp::Shr),
            "fma" => Some(Op::Fma { ftz: false }),
            "fma.ftz" => Some(Op::Fma { ftz: true }),
            "neg" => Some(Op::Un(UnOp::Neg)),
            "not" => Some(Op::Un(UnOp::Not)),
            "abs" => Some(Op::Un(UnOp::Abs)),
            "sqrt" => Some(Op::Un(UnOp::Sqrt)),
            "lg2.approx" => Some(Op::Un(UnOp::Log2Approx)),
            "cmp.eq" => Some(Op::Cmp(CmpOp::Eq)),
            "cmp.ne" => Some(Op::Cmp(CmpOp::Ne)),
            "cmp.lt" => Some(Op::Cmp(CmpOp::Lt)),
            "cmp.le" => Some(Op::Cmp(CmpOp::Le)),
            "cmp.gt" => Some(Op::Cmp(CmpOp::Gt)),
            "cmp.ge" => Some(Op::Cmp(CmpOp::Ge)),
            "select" => Some(Op::Select),
            "cvt" => Some(Op::Cvt),
            "bitcast" => Some(Op::Bitcast),
            "pack" => Some(Op::Pack),
            "shfl.bfly" => Some(Op::Shfl(ShflMode::Bfly)),
            "shfl.idx" => Some(Op::Shfl(ShflMode::Idx)),
            "elect" => Some(Op::ElectSync),
            "mma.m16n8k16" => Some(Op::Mma16816),
            "fence.mbarrier_init" => Some(Op::FenceMbarInit),
            "warp.sync" => Some(Op::WarpSync),
            "fence.proxy.async" => Some(Op::FenceProxyAsync),
            "cluster.arrive" => Some(Op::ClusterArrive { relaxed: false }),
            "cluster.arrive.relaxed" => Some(Op::ClusterArrive { relaxed: true }),
            "cluster.wait" => Some(Op::ClusterWait),
            "cp.async.commit" => Some(Op::CpAsyncCommit),
            "pdl.wait" => Some(Op::GridDepWait),
            "pdl.launch_dependents" => Some(Op::GridDepLaunch),
            "yield" => Some(Op::Yield),
            _ => match unary {
                "exp" => Some(Op::Un(UnOp::Exp { fast })),
                "exp2" => Some(Op::Un(UnOp::Exp2 { fast })),
                "rsqrt" => Some(Op::Un(UnOp::Rsqrt { fast })),
                "sigmoid" => Some(Op::Un(UnOp::Sigmoid { fast })),
                "rcp" => Some(Op::Un(UnOp::Rcp { fast })),
                _ => None,
            },
        };
        if let Some(op) = simple {
            let args = self.values_on_line()?;
            return Ok((op, args, Vec::new()));
        }
        if let Some(n) = m.strip_prefix("extract.") {
            let Ok(lane) = n.parse::<u8>() else {
                return err(mpos, format!("bad lane in `{m}`"));
            };
            let args = self.values_on_line()?;
            return Ok((Op::Extract(lane), args, Vec::new()));
        }
        Ok(match base {
            "iconst" => {
                let c = self.number::<i64>("an integer")?;
                (Op::IConst(c), vec![], vec![])
            }
            "fconst" => (Op::FConst(self.fnum()?), vec![], vec![]),
            "special" => {
                let (s, pos) = self.ident("a special register")?;
                let sp = match s.as_str() {
                    "tid" => Special::ThreadIdx,
                    "laneid" => Special::LaneId,
                    "cluster_rank" => Special::ClusterRank,
                    "ctaid.x" => Special::BlockIdx(0),
                    "ctaid.y" => Special::BlockIdx(1),
                    "ctaid.z" => Special::BlockIdx(2),
                    "nctaid.x" => Special::GridDim(0),
                    "nctaid.y" => Special::GridDim(1),
                    "nctaid.z" => Special::GridDim(2),
                    _ => return err(pos, format!("unknown special register `{s}`")),
                };
                (Op::Special(sp), vec![], vec![])
            }
            "param" => (
                Op::Param(ScalarParam::new(self.reference(Ref::Scalar)?)),
                vec![],
                vec![],
            ),
            "ld.global" => {
                let tensor = self.tensor()?;
                (Op::LdGlobal { tensor, policy }, self.index()?, vec![])
            }
            "st.global" => {
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
            "ld.shared" => {
                let buffer = self.buffer()?;
                (Op::LdShared { buffer }, self.index()?, vec![])
            }
            "st.shared" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                (Op::StShared { buffer }, args, vec![])
            }
            "mbarrier.init" => (
                Op::MbarInit {
                    barrier: self.barrier()?,
                },
                vec![],
                vec![],
            ),
            "mbarrier.arrive" => (
                Op::MbarArrive {
                    barrier: self.barrier()?,
                },
                vec![],
                vec![],
            ),
            "mbarrier.arrive.expect_tx" => {
                let barrier = self.barrier()?;
                self.expect(',')?;
                (
                    Op::MbarArriveExpectTx {
                        barrier,
                        bytes: self.u32()?,
                    },
                    vec![],
                    vec![],
                )
            }
            "mbarrier.wait" => {
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
            "bar.sync" => {
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
            "st.async" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                args.push(self.value()?);
                self.expect(',')?;
                self.keyword("cta")?;
                args.push(self.value()?);
                self.expect(',')?;
                (
                    Op::StAsync {
                        buffer,
                        barrier: self.barrier()?,
                    },
                    args,
                    vec![],
                )
            }
            "cp.async" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                (Op::CpAsync { buffer, tensor }, args, vec![])
            }
            "cp.async.wait" => (Op::CpAsyncWait(self.u32()?), vec![], vec![]),
            "cp.async.bulk" => {
                let buffer = self.buffer()?;
                let mut args = self.index()?;
                self.expect(',')?;
                let tensor = self.tensor()?;
                args.extend(self.index()?);
                self.expect(',')?;
                let bytes = self.u32()?;
                self.expect(',')?;
                let barrier = self.barrier()?;
                (
                    Op::BulkCopy {
                        buffer,
                        tensor,
                        barrier,
                        bytes,
                        policy,
                    },
                    args,
                    vec![],
                )
            }
            "if" => {
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
            "for" => {
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
            "while" => {
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
            "role" => {
                let role = self.role_ref()?;
                let (body, y) = self.region()?;
                (Op::InRole { role, body }, vec![], y.into_iter().collect())
            }
            _ => return err(mpos, format!("unknown instruction `{m}`")),
        })
    }
}

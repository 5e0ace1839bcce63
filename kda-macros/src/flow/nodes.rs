//! The DSL's macro nodes (`role!`, `mbarrier!`, `shared!`, `regs!`,
//! `in_role!`, `send!`, `bulk_copy!`, `cp_async!`): their operands are
//! walked like any expression, `in_role!` sets the role of the events in its
//! body, and sends and copies become events naming their buffer and
//! barrier, with their byte counts where the macro can compute them.

use syn::Expr;
use syn::spanned::Spanned;

use super::{Access, Kind, Level, RoleCtx, UNKNOWN, Walker, const_eval};
use crate::ast::{Decl, Dest, Node, SendValue};

impl Walker<'_> {
    pub(super) fn node(&mut self, n: usize) -> Level {
        let mut node = std::mem::replace(&mut self.nodes[n], Node::Taken);
        let lv = self.node_inner(&mut node);
        self.nodes[n] = node;
        lv
    }

    pub(super) fn node_inner(&mut self, node: &mut Node) -> Level {
        match node {
            Node::Role(r) => {
                self.expr(&mut r.lo);
                self.expr(&mut r.hi);
                Level::Comptime
            }
            Node::Mbarrier(b) => {
                self.expr(&mut b.arrivals);
                if let Some(t) = &mut b.tx {
                    self.expr(t);
                }
                if let Some(c) = &mut b.count {
                    self.expr(c);
                }
                Level::Comptime
            }
            Node::Shared(s) => {
                self.exprs(s.dims.iter_mut());
                Level::Comptime
            }
            Node::Regs(r) => {
                self.exprs(r.dims.iter_mut());
                match &mut r.fill {
                    Some(f) => self.expr(f).join(UNKNOWN),
                    None => UNKNOWN,
                }
            }
            Node::InRole(ir) => {
                let role = match ir.role.clone() {
                    Expr::Path(p) if p.path.get_ident().is_some() => {
                        let id = p.path.get_ident().unwrap().to_string();
                        match self.decls.get(&id) {
                            Some(Decl::Role(_)) => RoleCtx::Named(id),
                            _ => RoleCtx::Unknown,
                        }
                    }
                    _ => RoleCtx::Unknown,
                };
                let role = if self.role == RoleCtx::Unknown {
                    RoleCtx::Unknown
                } else {
                    role
                };
                let saved = std::mem::replace(&mut self.role, role);
                self.block(&mut ir.body);
                self.role = saved;
                Level::Comptime
            }
            Node::Send(s) => {
                self.expr(&mut s.index);
                match &mut s.value {
                    SendValue::One(v) => {
                        self.expr(v);
                    }
                    SendValue::Lanes(vs) => {
                        self.exprs(vs.iter_mut());
                    }
                }
                let all = match &mut s.to {
                    Dest::Rank(r) => {
                        self.expr(r);
                        false
                    }
                    Dest::All => true,
                };
                self.place(&mut s.completes);
                let buf = self.decl(&s.base);
                let lanes = match &s.value {
                    SendValue::One(_) => 1,
                    SendValue::Lanes(v) => v.len() as u64,
                };
                let bytes = match &buf {
                    Some((_, Decl::Buffer(i))) => match &self.nodes.get(*i) {
                        Some(Node::Shared(sh)) => sh.elem.bytes.map(|b| b * lanes),
                        _ => None,
                    },
                    _ => None,
                };
                let bar = self
                    .decl(&s.completes)
                    .filter(|(_, d)| matches!(d, Decl::Barrier(_)))
                    .map(|(n, _)| n);
                self.event(
                    Kind::Send {
                        bar: bar.clone(),
                        bytes,
                        all,
                    },
                    s.span,
                );
                if let Some((name, Decl::Buffer(_))) = buf {
                    self.shared_access(&name, &s.index, lanes, Access::Send);
                    self.event(Kind::UseBuffer(name), s.base.span());
                }
                if let Some(name) = bar {
                    self.event(Kind::UseBarrier(name), s.completes.span());
                }
                Level::Comptime
            }
            Node::BulkStore(c) => {
                self.expr(&mut c.dst_index);
                self.expr(&mut c.src_index);
                if let Some(b) = &mut c.bytes {
                    self.expr(b);
                }
                if let Some((name, Decl::Buffer(_))) = self.decl(&c.src) {
                    self.event(Kind::ReadShared(name.clone()), c.src.span());
                    self.event(Kind::BulkStore(name.clone()), c.span);
                    self.event(Kind::UseBuffer(name), c.src.span());
                }
                Level::Comptime
            }
            Node::BulkCopy(c) | Node::CpAsync(c) => {
                self.expr(&mut c.dst_index);
                self.expr(&mut c.src_index);
                if let Some(b) = &mut c.bytes {
                    self.expr(b);
                }
                if let Some((name, Decl::Tensor(_))) = self.decl(&c.src) {
                    self.event(Kind::ReadTensor(name), c.src.span());
                }
                if let Some(done) = &c.completes {
                    let bar = self
                        .decl(done)
                        .filter(|(_, d)| matches!(d, Decl::Barrier(_)))
                        .map(|(n, _)| n);
                    let bytes = c.bytes.as_ref().and_then(const_eval);
                    self.event(
                        Kind::BulkCopy {
                            bar: bar.clone(),
                            bytes,
                        },
                        c.span,
                    );
                    if let Some(name) = bar {
                        self.event(Kind::UseBarrier(name), done.span());
                    }
                }
                if let Some((name, Decl::Buffer(_))) = self.decl(&c.dst) {
                    self.event(Kind::WriteShared(name.clone()), c.dst.span());
                    self.event(Kind::UseBuffer(name), c.dst.span());
                }
                Level::Comptime
            }
            Node::Taken => Level::Comptime,
        }
    }
}

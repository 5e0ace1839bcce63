//! Statements and expressions in program order: each expression's level,
//! the marks on runtime comparisons, and the events of barrier methods,
//! tensor and shared-buffer reads and writes and the DSL's free functions
//! (PDL wait, cluster barriers, collectives, lane-varying and uniform
//! values). Calls of `let`-bound closures are inlined (`closures`),
//! branches and loops handed to `control`, the DSL's macro nodes to
//! `nodes`.

use syn::spanned::Spanned;
use syn::{
    BinOp, Block, Expr, ExprBinary, ExprCall, ExprIndex, ExprMethodCall, Item, Local, Pat, Stmt,
};

use super::syntax::{let_ident, strip};
use super::{Access, ClosureDef, Kind, Level, UNKNOWN, Walker, const_eval, mark, root};
use crate::ast::Decl;
use crate::symbol::*;

impl Walker<'_> {
    pub(super) fn block(&mut self, b: &mut Block) -> Level {
        self.push_scope();
        let mut last = Level::Comptime;
        for s in &mut b.stmts {
            last = self.stmt(s);
        }
        self.pop_scope();
        last
    }

    pub(super) fn stmt(&mut self, s: &mut Stmt) -> Level {
        match s {
            Stmt::Local(l) => {
                self.local(l);
                Level::Comptime
            }
            Stmt::Item(Item::Fn(f)) => {
                let inputs: Vec<Pat> = f
                    .sig
                    .inputs
                    .iter()
                    .filter_map(|a| match a {
                        syn::FnArg::Typed(pt) => Some(Pat::Type(pt.clone())),
                        _ => None,
                    })
                    .collect();
                let mut body = Expr::Block(syn::ExprBlock {
                    attrs: vec![],
                    label: None,
                    block: (*f.block).clone(),
                });
                self.definition(None, &inputs, &mut body, true);
                if let Expr::Block(b) = body {
                    *f.block = b.block;
                }
                Level::Comptime
            }
            Stmt::Item(_) | Stmt::Macro(_) => Level::Comptime,
            Stmt::Expr(e, semi) => {
                let lv = self.expr(e);
                if semi.is_some() { Level::Comptime } else { lv }
            }
        }
    }

    pub(super) fn local(&mut self, l: &mut Local) {
        let Some(init) = &mut l.init else {
            self.bind_pat(&l.pat, Level::Comptime);
            return;
        };
        if let (Some(name), Expr::Closure(c)) = (let_ident(&l.pat), strip(&mut init.expr)) {
            let inputs: Vec<Pat> = c.inputs.iter().cloned().collect();
            self.definition(Some(name.clone()), &inputs, &mut c.body, false);
            self.closures.insert(
                name.clone(),
                ClosureDef {
                    inputs,
                    body: (*c.body).clone(),
                },
            );
            self.bind_pat(&l.pat, Level::Comptime);
            return;
        }
        let lv = self.expr(&mut init.expr);
        if let Some((_, e)) = &mut init.diverge {
            self.expr(e);
        }
        self.bind_pat(&l.pat, lv);
        self.alias(&l.pat, &init.expr);
    }

    pub(super) fn exprs<'a>(&mut self, es: impl IntoIterator<Item = &'a mut Expr>) -> Level {
        es.into_iter()
            .fold(Level::Comptime, |a, e| a.join(self.expr(e)))
    }

    pub(super) fn expr(&mut self, e: &mut Expr) -> Level {
        match e {
            Expr::Lit(_) | Expr::Const(_) | Expr::Infer(_) | Expr::Verbatim(_) => Level::Comptime,
            Expr::Path(p) => match (p.qself.is_none(), p.path.get_ident()) {
                (true, Some(id)) => self.lookup(&id.to_string()).unwrap_or(Level::Comptime),
                _ => Level::Comptime,
            },
            Expr::Paren(p) => self.expr(&mut p.expr),
            Expr::Group(g) => self.expr(&mut g.expr),
            Expr::Reference(r) => self.expr(&mut r.expr),
            Expr::Unary(u) => self.expr(&mut u.expr),
            Expr::Cast(c) => self.expr(&mut c.expr),
            Expr::Field(f) => self.expr(&mut f.base),
            Expr::Tuple(t) => self.exprs(t.elems.iter_mut()),
            Expr::Array(a) => self.exprs(a.elems.iter_mut()),
            Expr::Repeat(r) => {
                self.expr(&mut r.len);
                self.expr(&mut r.expr)
            }
            Expr::Struct(s) => {
                let mut lv = self.exprs(s.fields.iter_mut().map(|f| &mut f.expr));
                if let Some(rest) = &mut s.rest {
                    lv = lv.join(self.expr(rest));
                }
                lv
            }
            Expr::Range(r) => {
                let a = r.start.as_mut().map_or(Level::Comptime, |s| self.expr(s));
                let b = r.end.as_mut().map_or(Level::Comptime, |s| self.expr(s));
                a.join(b)
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Assign(a) => {
                let r = self.expr(&mut a.right);
                self.assign_target(&mut a.left, r, false);
                Level::Comptime
            }
            Expr::Index(i) => self.index(i),
            Expr::MethodCall(m) => self.method(m),
            Expr::Call(c) => self.call(c),
            Expr::If(i) => self.if_(i),
            Expr::ForLoop(f) => self.for_(f),
            Expr::While(w) => self.while_(w),
            Expr::Loop(l) => {
                self.loops.push((self.next_loop, None));
                self.next_loop += 1;
                let rec = std::mem::replace(&mut self.record, false);
                self.block(&mut l.body);
                self.record = rec;
                self.block(&mut l.body);
                self.loops.pop();
                UNKNOWN.join(Level::Comptime)
            }
            Expr::Block(b) => self.block(&mut b.block),
            Expr::Unsafe(u) => self.block(&mut u.block),
            Expr::Closure(c) => self.anon_closure(c),
            Expr::Match(m) => self.match_(m),
            Expr::Macro(m) => match crate::ast::node_index(&m.mac) {
                Some(n) => self.node(n),
                None => Level::Comptime,
            },
            Expr::Let(l) => {
                let lv = self.expr(&mut l.expr);
                self.bind_pat(&l.pat, lv);
                self.alias(&l.pat, &l.expr);
                lv
            }
            Expr::Return(r) => {
                if let Some(e) = &mut r.expr {
                    self.expr(e);
                }
                Level::Comptime
            }
            Expr::Break(b) => {
                if let Some(e) = &mut b.expr {
                    self.expr(e);
                }
                Level::Comptime
            }
            Expr::Try(t) => self.expr(&mut t.expr),
            _ => UNKNOWN,
        }
    }

    pub(super) fn binary(&mut self, b: &mut ExprBinary) -> Level {
        use BinOp::*;
        if matches!(
            b.op,
            AddAssign(_)
                | SubAssign(_)
                | MulAssign(_)
                | DivAssign(_)
                | RemAssign(_)
                | BitXorAssign(_)
                | BitAndAssign(_)
                | BitOrAssign(_)
                | ShlAssign(_)
                | ShrAssign(_)
        ) {
            let r = self.expr(&mut b.right);
            self.assign_target(&mut b.left, r, true);
            return Level::Comptime;
        }
        let l = self.expr(&mut b.left);
        let r = self.expr(&mut b.right);
        let lv = l.join(r);
        match b.op {
            Eq(_) | Ne(_) | Lt(_) | Le(_) | Gt(_) | Ge(_) | And(_) | Or(_) if !lv.comptime() => {
                mark(&mut b.attrs);
                lv
            }
            // The warp index is the same on all lanes of a warp.
            Div(_) if l.varying() && const_eval(&b.right).is_some_and(|d| d > 0 && d % 32 == 0) => {
                UNKNOWN
            }
            Shr(_) if l.varying() && const_eval(&b.right).is_some_and(|s| s >= 5) => UNKNOWN,
            _ => lv,
        }
    }

    /// The left side of `=` or `op=`.
    pub(super) fn assign_target(&mut self, lhs: &mut Expr, r: Level, compound: bool) {
        match lhs {
            Expr::Paren(p) => self.assign_target(&mut p.expr, r, compound),
            Expr::Index(ix) => {
                let il = self.expr(&mut ix.index);
                match self.decl(&ix.expr) {
                    Some((name, Decl::Tensor(_))) => {
                        self.place(&mut ix.expr);
                        if compound {
                            self.event(Kind::ReadTensor(name), ix.expr.span());
                        }
                    }
                    Some((name, Decl::Buffer(_))) => {
                        self.place(&mut ix.expr);
                        if compound {
                            self.event(Kind::ReadShared(name.clone()), ix.expr.span());
                        }
                        self.shared_access(&name, &ix.index, 1, Access::Store);
                        self.event(Kind::WriteShared(name.clone()), ix.expr.span());
                        self.event(Kind::UseBuffer(name), ix.expr.span());
                    }
                    _ => {
                        self.place(&mut ix.expr);
                        if let Some(r0) = root(&ix.expr) {
                            let n = r0.to_string();
                            self.assign(&n, r.join(il));
                        }
                    }
                }
            }
            Expr::Field(f) => {
                self.place(&mut f.base);
                if let Some(r0) = root(&f.base) {
                    let n = r0.to_string();
                    self.assign(&n, r);
                }
            }
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let n = p.path.get_ident().unwrap().to_string();
                self.assign(&n, r);
            }
            other => {
                self.expr(other);
            }
        }
    }

    /// The sub-expressions of a place (indices), without reading it.
    pub(super) fn place(&mut self, e: &mut Expr) {
        match e {
            Expr::Index(i) => {
                self.expr(&mut i.index);
                self.place(&mut i.expr);
            }
            Expr::Field(f) => self.place(&mut f.base),
            Expr::Paren(p) => self.place(&mut p.expr),
            Expr::MethodCall(m) if m.method == EVICT_FIRST_VIEW => self.place(&mut m.receiver),
            Expr::Path(_) => {}
            other => {
                self.expr(other);
            }
        }
    }

    pub(super) fn index(&mut self, ix: &mut ExprIndex) -> Level {
        let il = self.expr(&mut ix.index);
        match self.decl(&ix.expr) {
            Some((name, Decl::Tensor(_))) => {
                self.place(&mut ix.expr);
                self.event(Kind::ReadTensor(name), ix.expr.span());
                Level::Runtime {
                    varying: il.varying(),
                }
            }
            Some((name, Decl::Buffer(_))) => {
                self.place(&mut ix.expr);
                let stage = first_of_array(&ix.index);
                self.staged(Kind::ReadShared(name.clone()), ix.expr.span(), stage);
                self.shared_access(&name, &ix.index, 1, Access::Load);
                self.event(Kind::UseBuffer(name), ix.expr.span());
                Level::Runtime {
                    varying: il.varying(),
                }
            }
            _ => {
                let bl = self.expr(&mut ix.expr);
                bl.join(il)
            }
        }
    }

    pub(super) fn method(&mut self, m: &mut ExprMethodCall) -> Level {
        let args = self.exprs(m.args.iter_mut());
        let method = m.method.to_string();
        match self.decl(&m.receiver) {
            Some((name, Decl::Barrier(_))) => {
                self.place(&mut m.receiver);
                let span = m.receiver.span();
                let kind = if m.method == INIT {
                    Some(Kind::Init(name.clone()))
                } else if m.method == ARRIVE {
                    Some(Kind::Arrive(name.clone()))
                } else if m.method == ARRIVE_ON {
                    Some(Kind::ArriveOn(name.clone()))
                } else if m.method == ARM {
                    Some(Kind::Arm(name.clone()))
                } else if m.method == ARRIVE_EXPECT_TX {
                    let bytes = m.args.first().and_then(const_eval);
                    let arg = m.args.first().map_or(span, |a| a.span());
                    Some(Kind::ArriveTx {
                        bar: name.clone(),
                        bytes,
                        arg,
                    })
                } else if m.method == WAIT || m.method == WAIT_PHASE {
                    Some(Kind::Wait(name.clone()))
                } else {
                    None
                };
                let stage = match strip_parens(&m.receiver) {
                    Expr::Index(ix) => Some((*ix.index).clone()),
                    _ => None,
                };
                if let Some(k) = kind {
                    self.staged(k, span, stage.as_ref());
                    self.event(Kind::UseBarrier(name), span);
                }
                Level::Comptime
            }
            Some((name, decl)) if m.method == ARRIVE_ON => {
                self.place(&mut m.receiver);
                let what = match decl {
                    Decl::Tensor(_) => "a tensor",
                    Decl::Buffer(_) => "a shared buffer",
                    Decl::Role(_) => "a role",
                    Decl::Scalar(_) => "a scalar parameter",
                    Decl::Regs(_) => "a register array",
                    Decl::Barrier(_) => unreachable!("barriers are matched above"),
                };
                self.event(Kind::ArriveOnNonBarrier { name, what }, m.method.span());
                Level::Comptime
            }
            Some((name, Decl::Tensor(_))) if LOADS.contains(&method.as_str()) => {
                self.place(&mut m.receiver);
                self.event(Kind::ReadTensor(name), m.receiver.span());
                Level::Runtime {
                    varying: args.varying(),
                }
            }
            Some((name, Decl::Buffer(_))) if LOADS.contains(&method.as_str()) => {
                self.place(&mut m.receiver);
                let stage = m.args.first().and_then(first_of_array);
                self.staged(Kind::ReadShared(name.clone()), m.receiver.span(), stage);
                self.event(Kind::UseBuffer(name), m.receiver.span());
                Level::Runtime {
                    varying: args.varying(),
                }
            }
            Some((name, Decl::Buffer(_))) if STORES.contains(&method.as_str()) => {
                self.place(&mut m.receiver);
                self.event(Kind::WriteShared(name.clone()), m.receiver.span());
                self.event(Kind::UseBuffer(name), m.receiver.span());
                Level::Comptime
            }
            Some((_, Decl::Tensor(_) | Decl::Buffer(_))) => {
                self.place(&mut m.receiver);
                Level::Comptime
            }
            _ => {
                self.escapes(m.args.iter());
                let r = self.expr(&mut m.receiver);
                if SHAPE_METHODS.contains(&method.as_str()) {
                    return Level::Comptime;
                }
                r.join(args)
            }
        }
    }

    pub(super) fn call(&mut self, c: &mut ExprCall) -> Level {
        let levels: Vec<Level> = c.args.iter_mut().map(|a| self.expr(a)).collect();
        let args = levels.iter().fold(Level::Comptime, |a, &l| a.join(l));
        let (name, single) = match &*c.func {
            Expr::Path(p) if p.qself.is_none() => (
                p.path.segments.last().map(|s| s.ident.to_string()),
                p.path.segments.len() == 1,
            ),
            _ => (None, false),
        };
        let span = c.func.span();
        let Some(name) = name else {
            let f = self.expr(&mut c.func);
            return f.join(args).join(UNKNOWN);
        };
        if single
            && self.closures.contains_key(&name)
            && !self.inlining.iter().any(|(n, _)| *n == name)
        {
            return self.inline(&name, &levels, c.span());
        }
        let n = name.as_str();
        if !["pdl_wait", "pdl_trigger"].contains(&n) {
            self.escapes(c.args.iter());
        }
        if n == PDL_WAIT.name() {
            self.event(Kind::PdlWait, span);
            return Level::Comptime;
        }
        if CLUSTER_ARRIVE.contains(&n) {
            self.event(Kind::ClusterArrive, span);
            return Level::Comptime;
        }
        if n == CLUSTER_WAIT.name() {
            self.event(Kind::ClusterWait, span);
            return Level::Comptime;
        }
        if BULK_WAITS.contains(&n) {
            self.event(Kind::BulkWait, span);
            return Level::Comptime;
        }
        if n == CLUSTER_SYNC.name() {
            self.event(Kind::ClusterArrive, span);
            self.event(Kind::ClusterWait, span);
            return Level::Comptime;
        }
        if COLLECTIVES.contains(&n) {
            self.event(Kind::Collective(name.clone()), span);
        }
        if n == WARP_SUM.name() {
            // A full-warp sum is the same on every lane.
            let full = c.args.iter().nth(1).and_then(const_eval) == Some(32);
            return Level::Runtime { varying: !full };
        }
        if n == SHFL_IDX.name() && levels.get(1).is_some_and(|l| !l.varying()) {
            // A broadcast from one lane (the same source lane on every lane)
            // is the same on every lane.
            return Level::Runtime { varying: false };
        }
        if LANE_VARYING.contains(&n) {
            return Level::Runtime { varying: true };
        }
        if UNIFORM.contains(&n) {
            return UNKNOWN;
        }
        if RUNTIME_VALUES.contains(&n) {
            return args.join(UNKNOWN);
        }
        if n == RANGE.name() {
            return args;
        }
        if c.args.is_empty() && single {
            UNKNOWN
        } else {
            args
        }
    }
}

/// `e` without the parentheses and groups around it.
fn strip_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_parens(&p.expr),
        Expr::Group(g) => strip_parens(&g.expr),
        e => e,
    }
}

/// The first index of `[a, b, ..]` (a per-dimension index: the stage of a
/// ring buffer); `None` for a flat index.
fn first_of_array(e: &Expr) -> Option<&Expr> {
    match strip_parens(e) {
        Expr::Array(a) if a.elems.len() > 1 => a.elems.first(),
        _ => None,
    }
}

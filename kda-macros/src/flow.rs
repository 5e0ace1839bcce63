//! Flow analysis of the kernel body, on the syn AST. One walk in program
//! order computes:
//!
//! * the **level** of every expression: comptime (known when the kernel is
//!   traced: literals, `#[comptime]` parameters, constants), warp-uniform
//!   runtime (`block_idx`, `cluster_rank`, scalar parameters, loads at uniform
//!   indices, `tid / 32`), or lane-varying runtime (`thread_idx`, `lane_id`,
//!   shuffles, `elect`, and whatever is computed from them) — through `let`
//!   bindings and assignments, including assignments under runtime branches;
//! * the **annotations** the expansion needs: an `if`/`for`/`while` or a
//!   comparison that is not provably comptime gets the `#[__kda_runtime]`
//!   marker and is dispatched on its type at trace time;
//! * the **events** the static checks read ([`Event`]): barrier operations,
//!   cluster barriers, the PDL wait, DSMEM sends, bulk copies, reads of
//!   tensors and shared buffers, warp collectives — each with its span, the
//!   role it runs in, its enclosing loops and conditions.
//!
//! Closures bound with `let f = |..| ..` are analysed where they are called
//! (`f(..)`), in the caller's role and conditions; other closures (iterator
//! adapters) where they are written, as loops of unknown trip count.
//! Comptime conditions the macro cannot evaluate make the events under them
//! "maybe executed": the ordering checks then accept them (the IR verifier
//! rechecks the traced kernel), and byte totals under them are unknown.

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{
    Attribute, BinOp, Block, Expr, ExprBinary, ExprCall, ExprClosure, ExprForLoop, ExprIf,
    ExprIndex, ExprMatch, ExprMethodCall, ExprWhile, Item, Lit, Local, Pat, Stmt, Type,
};

use crate::ast::{Decl, Dest, Kernel, Node, SendValue};
use crate::symbol::*;

/// What is known about a value when the macro runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Level {
    /// Known when the kernel is traced.
    Comptime,
    /// A runtime value; `varying`: it may differ between the lanes of a warp.
    Runtime { varying: bool },
}

/// What the macro cannot classify: runtime, warp-uniform (dispatching on the
/// type is always correct; no divergence is claimed without evidence).
const UNKNOWN: Level = Level::Runtime { varying: false };

impl Level {
    pub fn join(self, o: Level) -> Level {
        match (self, o) {
            (Level::Comptime, x) | (x, Level::Comptime) => x,
            (Level::Runtime { varying: a }, Level::Runtime { varying: b }) => {
                Level::Runtime { varying: a || b }
            }
        }
    }
    pub fn comptime(self) -> bool {
        self == Level::Comptime
    }
    pub fn varying(self) -> bool {
        self == Level::Runtime { varying: true }
    }
}

/// The threads an event runs on.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RoleCtx {
    /// Outside any `in_role!`: every thread of the block.
    All,
    Named(String),
    /// Inside a closure or function definition, or a role the macro cannot name.
    Unknown,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Init(String),
    Arrive(String),
    Arm(String),
    ArriveTx {
        bar: String,
        bytes: Option<u64>,
        arg: Span,
    },
    Wait(String),
    ClusterArrive,
    ClusterWait,
    PdlWait,
    /// A DSMEM send; `bytes`: per sending thread and destination.
    Send {
        bar: Option<String>,
        bytes: Option<u64>,
        all: bool,
    },
    BulkCopy {
        bar: Option<String>,
        bytes: Option<u64>,
    },
    ReadTensor(String),
    ReadShared(String),
    UseBarrier(String),
    UseBuffer(String),
    Collective(String),
    /// A barrier passed to code the macro cannot see (a function call).
    Escape(String),
}

/// A collective under a lane-varying condition.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// Where to report: the collective, or the call of the closure holding it.
    pub at: Span,
    /// The condition, as written.
    pub cond: String,
    /// The closure called at `at`, when the collective is inside it.
    pub via: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub kind: Kind,
    pub span: Span,
    pub role: RoleCtx,
    /// Position in program order.
    pub seq: usize,
    /// Enclosing loops (ids).
    pub loops: Vec<usize>,
    /// Not under any condition: runs once per iteration of its loops.
    pub exact: bool,
    /// Under a condition on a comptime value the macro cannot evaluate.
    pub comptime_cond: bool,
    /// Iterations of the enclosing loops when all are literal ranges.
    pub mult: Option<u64>,
    /// Recorded in a closure or function definition (not where it runs).
    pub def: bool,
    /// For `def` events: the `let`-bound closure (None: a nested `fn`).
    pub owner: Option<String>,
    /// For a collective: the lane-varying condition it is under, if any.
    pub divergent: Option<Divergence>,
}

pub struct Flow {
    pub events: Vec<Event>,
    /// `let`-bound closures that are never called by name.
    pub uncalled: HashSet<String>,
}

#[derive(Clone)]
struct Frame {
    runtime: bool,
    varying: bool,
    text: String,
    depth: usize,
}

struct ClosureDef {
    inputs: Vec<Pat>,
    body: Expr,
}

struct Walker<'k> {
    decls: &'k HashMap<String, Decl>,
    /// Locals that name a declaration (`for bar in &outs`, `let b = outs[k]`),
    /// scoped like `scopes`.
    aliases: Vec<HashMap<String, String>>,
    nodes: &'k mut Vec<Node>,
    events: Vec<Event>,
    scopes: Vec<HashMap<String, Level>>,
    role: RoleCtx,
    loops: Vec<(usize, Option<u64>)>,
    next_loop: usize,
    conds: Vec<Frame>,
    record: bool,
    def: bool,
    closures: HashMap<String, ClosureDef>,
    called: HashSet<String>,
    inlining: Vec<(String, Span)>,
    owner: Option<String>,
}

/// Analyse `k`'s body, marking its runtime control flow and comparisons.
pub fn analyse(k: &mut Kernel) -> Flow {
    let mut top = HashMap::new();
    for pt in &k.comptime {
        bind_pat_into(&mut top, &pt.pat, Level::Comptime);
    }
    for p in &k.params {
        let lv = match p.kind {
            crate::ast::ParamKind::Tensor(_) => Level::Comptime,
            crate::ast::ParamKind::Scalar(_) => UNKNOWN,
        };
        top.insert(p.ident.to_string(), lv);
    }
    let mut w = Walker {
        decls: &k.decls,
        aliases: vec![HashMap::new()],
        nodes: &mut k.nodes,
        events: Vec::new(),
        scopes: vec![top],
        role: RoleCtx::All,
        loops: Vec::new(),
        next_loop: 0,
        conds: Vec::new(),
        record: true,
        def: false,
        closures: HashMap::new(),
        called: HashSet::new(),
        inlining: Vec::new(),
        owner: None,
    };
    w.block(&mut k.body);
    let uncalled = w
        .closures
        .keys()
        .filter(|n| !w.called.contains(*n))
        .cloned()
        .collect();
    Flow {
        events: w.events,
        uncalled,
    }
}

/// Mark a node for dispatch at trace time.
pub fn mark(attrs: &mut Vec<Attribute>) {
    if !is_marked(attrs) {
        let id = syn::Ident::new(RUNTIME_MARK.name(), Span::call_site());
        attrs.push(syn::parse_quote!(#[#id]));
    }
}

pub fn is_marked(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path() == RUNTIME_MARK)
}

/// Remove the marker; whether it was there.
pub fn take_mark(attrs: &mut Vec<Attribute>) -> bool {
    let had = is_marked(attrs);
    attrs.retain(|a| a.path() != RUNTIME_MARK);
    had
}

/// The value of an integer expression made of literals, if the macro can
/// compute it (`4 * 32`, `1 << 7`, `(128 + 31) / 32`).
pub fn const_eval(e: &Expr) -> Option<u64> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => i.base10_parse().ok(),
            _ => None,
        },
        Expr::Paren(p) => const_eval(&p.expr),
        Expr::Group(g) => const_eval(&g.expr),
        Expr::Cast(c) => const_eval(&c.expr),
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            Stmt::Expr(e, None) => const_eval(e),
            _ => None,
        },
        Expr::Binary(b) => {
            let (x, y) = (const_eval(&b.left)?, const_eval(&b.right)?);
            match b.op {
                BinOp::Add(_) => x.checked_add(y),
                BinOp::Sub(_) => x.checked_sub(y),
                BinOp::Mul(_) => x.checked_mul(y),
                BinOp::Div(_) => x.checked_div(y),
                BinOp::Rem(_) => x.checked_rem(y),
                BinOp::Shl(_) => u32::try_from(y).ok().and_then(|y| x.checked_shl(y)),
                BinOp::Shr(_) => u32::try_from(y).ok().and_then(|y| x.checked_shr(y)),
                BinOp::BitAnd(_) => Some(x & y),
                BinOp::BitOr(_) => Some(x | y),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The name at the root of a place: `buf` in `buf[i]`, `outs[k]`,
/// `state.evict_first()`.
pub fn root(e: &Expr) -> Option<&syn::Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        Expr::Index(i) => root(&i.expr),
        Expr::Field(f) => root(&f.base),
        Expr::Paren(p) => root(&p.expr),
        Expr::Group(g) => root(&g.expr),
        Expr::Reference(r) => root(&r.expr),
        Expr::MethodCall(m) if m.method == EVICT_FIRST_VIEW && m.args.is_empty() => {
            root(&m.receiver)
        }
        _ => None,
    }
}

fn bind_pat_into(scope: &mut HashMap<String, Level>, pat: &Pat, lv: Level) {
    match pat {
        Pat::Ident(pi) => {
            scope.insert(pi.ident.to_string(), lv);
            if let Some((_, sub)) = &pi.subpat {
                bind_pat_into(scope, sub, lv);
            }
        }
        Pat::Type(pt) => {
            let lv = typed_level(&pt.ty, lv);
            bind_pat_into(scope, &pt.pat, lv)
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| bind_pat_into(scope, p, lv)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| bind_pat_into(scope, p, lv)),
        Pat::Struct(s) => s
            .fields
            .iter()
            .for_each(|f| bind_pat_into(scope, &f.pat, lv)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| bind_pat_into(scope, p, lv)),
        Pat::Reference(r) => bind_pat_into(scope, &r.pat, lv),
        Pat::Or(o) => o.cases.iter().for_each(|p| bind_pat_into(scope, p, lv)),
        Pat::Paren(p) => bind_pat_into(scope, &p.pat, lv),
        _ => {}
    }
}

/// A type annotation decides: Rust primitives are comptime; a type holding
/// `Val`s or `Regs` (`Val<f32>`, `Vec<Val<u32>>`, `[Val<f32>; 4]`) runtime.
fn typed_level(ty: &Type, lv: Level) -> Level {
    const PRIMS: &[&str] = &[
        "bool", "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize", "f32",
        "f64", "char",
    ];
    if let Type::Path(p) = ty
        && p.path
            .get_ident()
            .is_some_and(|id| PRIMS.iter().any(|n| id == n))
    {
        return Level::Comptime;
    }
    if holds_values(ty) {
        lv.join(UNKNOWN)
    } else {
        lv
    }
}

fn holds_values(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p.path.segments.iter().any(|seg| {
            seg.ident == "Val"
                || seg.ident == "Regs"
                || match &seg.arguments {
                    syn::PathArguments::AngleBracketed(a) => a.args.iter().any(|g| match g {
                        syn::GenericArgument::Type(t) => holds_values(t),
                        _ => false,
                    }),
                    _ => false,
                }
        }),
        Type::Array(a) => holds_values(&a.elem),
        Type::Slice(s) => holds_values(&s.elem),
        Type::Tuple(t) => t.elems.iter().any(holds_values),
        Type::Reference(r) => holds_values(&r.elem),
        Type::Paren(p) => holds_values(&p.elem),
        Type::Group(g) => holds_values(&g.elem),
        _ => false,
    }
}

fn let_ident(pat: &Pat) -> Option<String> {
    match pat {
        Pat::Ident(pi) => Some(pi.ident.to_string()),
        Pat::Type(pt) => let_ident(&pt.pat),
        _ => None,
    }
}

fn strip(e: &mut Expr) -> &mut Expr {
    match e {
        Expr::Paren(p) => strip(&mut p.expr),
        Expr::Group(g) => strip(&mut g.expr),
        e => e,
    }
}

/// Whether an expression contains a DSL macro (a declaration's `let`).
fn declares(e: &Expr) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.0 |= crate::ast::node_index(m).is_some();
        }
    }
    let mut f = Finder(false);
    syn::visit::Visit::visit_expr(&mut f, e);
    f.0
}

/// The declaration an expression's value comes from: a place (`outs[k]`,
/// `&outs`) or an iteration over one (`outs.iter()`).
fn handle_root(e: &Expr) -> Option<&syn::Ident> {
    match e {
        Expr::MethodCall(m)
            if [
                "iter",
                "into_iter",
                "copied",
                "cloned",
                "enumerate",
                "as_ref",
            ]
            .contains(&m.method.to_string().as_str()) =>
        {
            handle_root(&m.receiver)
        }
        e => root(e),
    }
}

/// A loop over a range whose bounds may be runtime values.
pub fn is_range_iter(e: &Expr) -> bool {
    match e {
        Expr::Range(r) => {
            matches!(r.limits, syn::RangeLimits::HalfOpen(_))
                && r.start.is_some()
                && r.end.is_some()
        }
        Expr::Paren(p) => is_range_iter(&p.expr),
        Expr::Group(g) => is_range_iter(&g.expr),
        Expr::MethodCall(m) if m.method == "step_by" => is_range_iter(&m.receiver),
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == RANGE))
        }
        _ => false,
    }
}

fn literal_trip(e: &Expr) -> Option<u64> {
    match e {
        Expr::Range(r) => {
            let (lo, hi) = (const_eval(r.start.as_ref()?)?, const_eval(r.end.as_ref()?)?);
            Some(match r.limits {
                syn::RangeLimits::HalfOpen(_) => hi.saturating_sub(lo),
                syn::RangeLimits::Closed(_) => (hi + 1).saturating_sub(lo),
            })
        }
        Expr::Paren(p) => literal_trip(&p.expr),
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            let n = literal_trip(&m.receiver)?;
            let s = const_eval(&m.args[0])?;
            (s > 0).then(|| n.div_ceil(s))
        }
        Expr::MethodCall(m) if m.method == "rev" && m.args.is_empty() => literal_trip(&m.receiver),
        _ => None,
    }
}

fn text(e: &impl ToTokens) -> String {
    let s = e.to_token_stream().to_string();
    // Tighten the token printer's spacing for messages.
    s.replace(" (", "(")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" .", ".")
        .replace(". ", ".")
}

impl Walker<'_> {
    // ---- scopes and levels

    fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
        self.aliases.push(HashMap::new());
    }

    fn pop_scope(&mut self) {
        self.scopes.pop();
        self.aliases.pop();
    }

    /// `name` now stands for the declaration `source` comes from (or for
    /// nothing known).
    fn alias(&mut self, pat: &Pat, source: &Expr) {
        // `Some(b)` from an `Option` of a declaration; `(i, b)` from `.enumerate()`.
        match (pat, source) {
            (Pat::TupleStruct(ts), _) if ts.path.is_ident("Some") && ts.elems.len() == 1 => {
                return self.alias(&ts.elems[0], source);
            }
            (Pat::Tuple(t), Expr::MethodCall(m))
                if m.method == "enumerate" && t.elems.len() == 2 =>
            {
                return self.alias(&t.elems[1], &m.receiver);
            }
            (Pat::Tuple(t), Expr::Tuple(e)) if t.elems.len() == e.elems.len() => {
                for (p, x) in t.elems.iter().zip(&e.elems) {
                    self.alias(p, x);
                }
                return;
            }
            (Pat::Type(pt), _) => return self.alias(&pt.pat, source),
            _ => {}
        }
        let Some(name) = let_ident(pat) else { return };
        // `let full = mbarrier!(..)`, `let s = cfg.staged().then(|| shared!(..))`:
        // the declaration itself.
        if declares(source) {
            return;
        }
        let target = handle_root(source).and_then(|r| self.resolve(&r.to_string()));
        let scope = self.aliases.last_mut().expect("a scope");
        match target {
            Some(t) => scope.insert(name, t),
            // A shadowing local hides a declaration of the same name.
            None => scope.insert(name, String::new()),
        };
    }

    /// The declaration a name refers to.
    fn resolve(&self, name: &str) -> Option<String> {
        for s in self.aliases.iter().rev() {
            if let Some(t) = s.get(name) {
                return (!t.is_empty()).then(|| t.clone());
            }
        }
        self.decls.contains_key(name).then(|| name.to_string())
    }

    fn bind_pat(&mut self, pat: &Pat, lv: Level) {
        let scope = self.scopes.last_mut().expect("a scope");
        bind_pat_into(scope, pat, lv);
    }

    fn lookup(&self, name: &str) -> Option<Level> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// The level conditions add to what is assigned under them.
    fn cond_level(&self) -> Level {
        self.conds
            .iter()
            .filter(|f| f.runtime)
            .fold(Level::Comptime, |a, f| {
                a.join(Level::Runtime { varying: f.varying })
            })
    }

    fn assign(&mut self, name: &str, lv: Level) {
        let add = lv.join(self.cond_level());
        for s in self.scopes.iter_mut().rev() {
            if let Some(old) = s.get_mut(name) {
                *old = old.join(add);
                return;
            }
        }
    }

    fn decl(&self, e: &Expr) -> Option<(String, Decl)> {
        let name = self.resolve(&root(e)?.to_string())?;
        let d = *self.decls.get(&name)?;
        Some((name, d))
    }

    // ---- events

    fn event(&mut self, kind: Kind, span: Span) {
        if !self.record {
            return;
        }
        let mult = self
            .loops
            .iter()
            .try_fold(1u64, |a, (_, n)| n.map(|n| a.saturating_mul(n)));
        let divergent = if let Kind::Collective(_) = &kind {
            self.divergence(span)
        } else {
            None
        };
        self.events.push(Event {
            kind,
            span,
            role: self.role.clone(),
            seq: self.events.len(),
            loops: self.loops.iter().map(|(id, _)| *id).collect(),
            exact: self.conds.is_empty(),
            comptime_cond: self.conds.iter().any(|f| !f.runtime),
            mult,
            def: self.def,
            owner: self.owner.clone(),
            divergent,
        });
    }

    /// Where a collective at `span` under a lane-varying condition is
    /// reported: at itself when the condition is in the same closure, at the
    /// call of the inlined closure otherwise.
    fn divergence(&self, span: Span) -> Option<Divergence> {
        let f = self.conds.iter().rev().find(|f| f.runtime && f.varying)?;
        let depth = self.inlining.len();
        if f.depth == depth {
            // Inside the closure being inlined: its definition reported it.
            (depth == 0).then(|| Divergence {
                at: span,
                cond: f.text.clone(),
                via: None,
            })
        } else {
            let (name, call) = &self.inlining[f.depth];
            Some(Divergence {
                at: *call,
                cond: f.text.clone(),
                via: Some(name.clone()),
            })
        }
    }

    /// Barriers handed to code the macro does not see.
    fn escapes<'a>(&mut self, args: impl IntoIterator<Item = &'a Expr>) {
        let names: Vec<(String, Span)> = args
            .into_iter()
            .filter_map(|a| match self.decl(a) {
                Some((n, Decl::Barrier(_))) => Some((n, a.span())),
                _ => None,
            })
            .collect();
        for (n, s) in names {
            self.event(Kind::Escape(n), s);
        }
    }

    // ---- statements

    fn block(&mut self, b: &mut Block) -> Level {
        self.push_scope();
        let mut last = Level::Comptime;
        for s in &mut b.stmts {
            last = self.stmt(s);
        }
        self.pop_scope();
        last
    }

    fn stmt(&mut self, s: &mut Stmt) -> Level {
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

    fn local(&mut self, l: &mut Local) {
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

    /// Walk a closure or nested function where it is defined: annotations
    /// and facts local to it (its own divergence, existence of barrier
    /// operations); its role and order are those of its calls.
    fn definition(
        &mut self,
        owner: Option<String>,
        inputs: &[Pat],
        body: &mut Expr,
        isolated: bool,
    ) {
        let saved_owner = std::mem::replace(&mut self.owner, owner);
        let saved_role = std::mem::replace(&mut self.role, RoleCtx::Unknown);
        let saved_conds = std::mem::take(&mut self.conds);
        let saved_loops = std::mem::take(&mut self.loops);
        let saved_inlining = std::mem::take(&mut self.inlining);
        let saved_def = std::mem::replace(&mut self.def, true);
        let saved_scopes = if isolated {
            Some(std::mem::replace(&mut self.scopes, vec![HashMap::new()]))
        } else {
            None
        };
        self.push_scope();
        for p in inputs {
            self.bind_pat(p, UNKNOWN);
        }
        self.expr(body);
        self.pop_scope();
        if let Some(s) = saved_scopes {
            self.scopes = s;
        }
        self.role = saved_role;
        self.conds = saved_conds;
        self.loops = saved_loops;
        self.inlining = saved_inlining;
        self.def = saved_def;
        self.owner = saved_owner;
    }

    // ---- expressions

    fn exprs<'a>(&mut self, es: impl IntoIterator<Item = &'a mut Expr>) -> Level {
        es.into_iter()
            .fold(Level::Comptime, |a, e| a.join(self.expr(e)))
    }

    fn expr(&mut self, e: &mut Expr) -> Level {
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

    fn binary(&mut self, b: &mut ExprBinary) -> Level {
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
    fn assign_target(&mut self, lhs: &mut Expr, r: Level, compound: bool) {
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
    fn place(&mut self, e: &mut Expr) {
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

    fn index(&mut self, ix: &mut ExprIndex) -> Level {
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
                self.event(Kind::ReadShared(name.clone()), ix.expr.span());
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

    fn method(&mut self, m: &mut ExprMethodCall) -> Level {
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
                if let Some(k) = kind {
                    self.event(k, span);
                    self.event(Kind::UseBarrier(name), span);
                }
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
                self.event(Kind::ReadShared(name.clone()), m.receiver.span());
                self.event(Kind::UseBuffer(name), m.receiver.span());
                Level::Runtime {
                    varying: args.varying(),
                }
            }
            Some((name, Decl::Buffer(_))) if STORES.contains(&method.as_str()) => {
                self.place(&mut m.receiver);
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

    fn call(&mut self, c: &mut ExprCall) -> Level {
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

    /// Analyse a `let`-bound closure at its call, in the caller's context.
    fn inline(&mut self, name: &str, args: &[Level], call: Span) -> Level {
        self.called.insert(name.to_string());
        let def = &self.closures[name];
        let (inputs, mut body) = (def.inputs.clone(), def.body.clone());
        self.push_scope();
        for (p, &lv) in inputs.iter().zip(args) {
            self.bind_pat(p, lv);
        }
        self.inlining.push((name.to_string(), call));
        let lv = self.expr(&mut body);
        self.inlining.pop();
        self.pop_scope();
        lv
    }

    /// A closure passed along (an iterator adapter): runs here, any number
    /// of times. Its level is that of what it computes.
    fn anon_closure(&mut self, c: &mut ExprClosure) -> Level {
        self.loops.push((self.next_loop, None));
        self.next_loop += 1;
        let mut lv = Level::Comptime;
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            for p in &c.inputs {
                self.bind_pat(p, UNKNOWN);
            }
            lv = self.expr(&mut c.body);
            self.pop_scope();
            self.record = rec;
        }
        self.loops.pop();
        lv
    }

    fn merge(
        &mut self,
        before: &[HashMap<String, Level>],
        branches: Vec<Vec<HashMap<String, Level>>>,
        cond: Level,
    ) {
        for (d, scope) in before.iter().enumerate() {
            for (name, &old) in scope {
                let mut lv = old;
                let mut changed = false;
                for b in &branches {
                    if let Some(&x) = b.get(d).and_then(|s| s.get(name)) {
                        changed |= x != old;
                        lv = lv.join(x);
                    }
                }
                if changed && !cond.comptime() {
                    lv = lv.join(cond);
                }
                self.scopes[d].insert(name.clone(), lv);
            }
        }
    }

    fn if_(&mut self, i: &mut ExprIf) -> Level {
        self.push_scope();
        let is_let = matches!(strip(&mut i.cond), Expr::Let(_));
        let cond_text = text(strip(&mut i.cond));
        let c = self.expr(&mut i.cond);
        let runtime = !is_let && !c.comptime();
        if runtime {
            mark(&mut i.attrs);
        }
        let before = self.scopes.clone();
        self.conds.push(Frame {
            runtime,
            varying: runtime && c.varying(),
            text: cond_text,
            depth: self.inlining.len(),
        });
        let t = self.block(&mut i.then_branch);
        let after_then = std::mem::replace(&mut self.scopes, before.clone());
        let el = match &mut i.else_branch {
            Some((_, e)) => self.expr(e),
            None => Level::Comptime,
        };
        self.conds.pop();
        let after_else = std::mem::replace(&mut self.scopes, before.clone());
        let cond = if runtime { c } else { Level::Comptime };
        self.merge(&before, vec![after_then, after_else], cond);
        self.pop_scope();
        let lv = t.join(el);
        if runtime { lv.join(c) } else { lv }
    }

    fn for_(&mut self, f: &mut ExprForLoop) -> Level {
        let iter_text = text(strip(&mut f.expr));
        let it = self.expr(&mut f.expr);
        let runtime = is_range_iter(&f.expr) && !it.comptime();
        if runtime {
            mark(&mut f.attrs);
        }
        let trip = if runtime { None } else { literal_trip(&f.expr) };
        self.loops.push((self.next_loop, trip));
        self.next_loop += 1;
        // A comptime loop's body runs unconditionally (once per iteration).
        if runtime {
            self.conds.push(Frame {
                runtime,
                varying: it.varying(),
                text: iter_text,
                depth: self.inlining.len(),
            });
        }
        let before = self.scopes.clone();
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            self.bind_pat(&f.pat, it);
            self.alias(&f.pat, &f.expr);
            self.block(&mut f.body);
            self.pop_scope();
            self.record = rec;
        }
        if runtime {
            self.conds.pop();
        }
        let after = std::mem::replace(&mut self.scopes, before.clone());
        self.merge(
            &before,
            vec![after],
            if runtime { it } else { Level::Comptime },
        );
        self.loops.pop();
        Level::Comptime
    }

    fn while_(&mut self, w: &mut ExprWhile) -> Level {
        let is_let = matches!(strip(&mut w.cond), Expr::Let(_));
        let cond_text = text(strip(&mut w.cond));
        self.push_scope();
        let c = self.expr(&mut w.cond);
        self.pop_scope();
        let runtime = !is_let && !c.comptime();
        if runtime {
            mark(&mut w.attrs);
        }
        self.loops.push((self.next_loop, None));
        self.next_loop += 1;
        self.conds.push(Frame {
            runtime,
            varying: runtime && c.varying(),
            text: cond_text,
            depth: self.inlining.len(),
        });
        let before = self.scopes.clone();
        for pass in [false, true] {
            let rec = self.record;
            self.record = rec && pass;
            self.push_scope();
            self.expr(&mut w.cond);
            self.block(&mut w.body);
            self.pop_scope();
            self.record = rec;
        }
        self.conds.pop();
        let after = std::mem::replace(&mut self.scopes, before.clone());
        self.merge(
            &before,
            vec![after],
            if runtime { c } else { Level::Comptime },
        );
        self.loops.pop();
        Level::Comptime
    }

    fn match_(&mut self, m: &mut ExprMatch) -> Level {
        let s = self.expr(&mut m.expr);
        let before = self.scopes.clone();
        let mut branches = Vec::new();
        let mut lv = Level::Comptime;
        self.conds.push(Frame {
            runtime: false,
            varying: false,
            text: String::new(),
            depth: self.inlining.len(),
        });
        for arm in &mut m.arms {
            self.push_scope();
            self.bind_pat(&arm.pat, s);
            if let Some((_, g)) = &mut arm.guard {
                self.expr(g);
            }
            lv = lv.join(self.expr(&mut arm.body));
            self.pop_scope();
            branches.push(std::mem::replace(&mut self.scopes, before.clone()));
        }
        self.conds.pop();
        self.merge(&before, branches, Level::Comptime);
        lv
    }

    // ---- DSL nodes

    fn node(&mut self, n: usize) -> Level {
        let mut node = std::mem::replace(&mut self.nodes[n], Node::Taken);
        let lv = self.node_inner(&mut node);
        self.nodes[n] = node;
        lv
    }

    fn node_inner(&mut self, node: &mut Node) -> Level {
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
                    self.event(Kind::UseBuffer(name), s.base.span());
                }
                if let Some(name) = bar {
                    self.event(Kind::UseBarrier(name), s.completes.span());
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
                    self.event(Kind::UseBuffer(name), c.dst.span());
                }
                Level::Comptime
            }
            Node::Taken => Level::Comptime,
        }
    }
}

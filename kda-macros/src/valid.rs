//! Well-formedness: what the expansion relies on, beyond parsing. The
//! launch figures, declarations that are named, names that refer to the
//! right kind of declaration, roles that do not nest, and control flow that
//! does not try to leave a traced region (an `in_role!` block, a runtime
//! `if`/`for`/`while`), whose body runs once at trace time inside a closure.

use syn::visit::{self, Visit};
use syn::{Expr, ExprClosure, Ident, ItemFn};

use crate::ast::{Decl, Kernel, Node};
use crate::ctxt::Ctxt;
use crate::flow::{const_eval, is_marked, root};

/// Before the flow analysis.
pub fn declarations(cx: &Ctxt, k: &Kernel) {
    check_launch(cx, k);
    for node in &k.nodes {
        match node {
            Node::Role(r) if r.name.is_none() => cx.error_at(
                r.span,
                "a role is declared with a name: `let sender = role!(0..32);` (the name is the role's name in the IR)",
            ),
            Node::Mbarrier(b) => {
                if b.name.is_none() {
                    cx.error_at(b.span, "an mbarrier is declared with a name: `let full = mbarrier!(arrivals = 1, ..);`");
                }
                for r in b.roles.iter().flatten() {
                    expect(cx, k, r, |d| matches!(d, Decl::Role(_)), "a role", "in `roles = [..]`");
                }
            }
            Node::Shared(s) => {
                if s.name.is_none() {
                    cx.error_at(s.span, "a shared buffer is declared with a name: `let inbox = shared!([f32; 32]);`");
                }
                for r in s.roles.iter().flatten() {
                    expect(cx, k, r, |d| matches!(d, Decl::Role(_)), "a role", "in `roles = [..]`");
                }
                if let Some(g) = &s.guard {
                    expect(cx, k, g, |d| matches!(d, Decl::Barrier(_)), "an mbarrier", "as `guard`");
                }
            }
            Node::InRole(ir) => {
                if let Expr::Path(p) = &ir.role
                    && let Some(id) = p.path.get_ident() {
                        expect(cx, k, id, |d| matches!(d, Decl::Role(_)), "a role", "in `in_role!`");
                    }
            }
            Node::Send(s) => {
                expect_root(cx, k, &s.base, |d| matches!(d, Decl::Buffer(_)), "a shared buffer", "as a `send!` destination");
                expect_root(cx, k, &s.completes, |d| matches!(d, Decl::Barrier(_)), "an mbarrier", "in `completes`");
            }
            Node::BulkStore(c) => {
                expect_root(cx, k, &c.dst, |d| matches!(d, Decl::Tensor(_)), "a tensor parameter", "as a bulk store destination");
                expect_root(cx, k, &c.src, |d| matches!(d, Decl::Buffer(_)), "a shared buffer", "as a bulk store source");
            }
            Node::BulkCopy(c) | Node::CpAsync(c) => {
                expect_root(cx, k, &c.dst, |d| matches!(d, Decl::Buffer(_)), "a shared buffer", "as a copy destination");
                expect_root(cx, k, &c.src, |d| matches!(d, Decl::Tensor(_)), "a tensor parameter", "as a copy source");
                if let Some(done) = &c.completes {
                    expect_root(cx, k, done, |d| matches!(d, Decl::Barrier(_)), "an mbarrier", "in `completes`");
                }
            }
            _ => {}
        }
    }
    let mut nest = Nesting { cx, k, depth: 0 };
    nest.visit_block(&k.body);
}

fn check_launch(cx: &Ctxt, k: &Kernel) {
    if let Some(b) = &k.launch.block
        && let Some(n) = const_eval(b)
        && (n == 0 || n % 32 != 0 || n > 1024)
    {
        cx.error_spanned_by(
            b,
            format!("`block = {n}`: a block is 32 to 1024 threads, a multiple of 32 (whole warps)"),
        );
    }
    if let Some(c) = &k.launch.cluster
        && let Some(n) = const_eval(c)
        && !(1..=16).contains(&n)
    {
        cx.error_spanned_by(c, format!("`cluster = {n}`: a cluster is 1 to 16 CTAs"));
    }
    if let Some(m) = &k.launch.min_blocks
        && const_eval(m) == Some(0)
    {
        cx.error_spanned_by(m, "`min_blocks = 0`: at least one block per SM");
    }
    if let Some(w) = &k.launch.wave
        && const_eval(w) == Some(0)
    {
        cx.error_spanned_by(
            w,
            "`wave = 0`: a wave issues at least one row chain (`chains(..)`); `wave = 1` issues them one at a time",
        );
    }
}

fn kind_name(d: Decl) -> &'static str {
    match d {
        Decl::Tensor(_) => "a tensor parameter",
        Decl::Scalar(_) => "a scalar parameter",
        Decl::Role(_) => "a role",
        Decl::Barrier(_) => "an mbarrier",
        Decl::Buffer(_) => "a shared buffer",
        Decl::Regs(_) => "a register array",
    }
}

fn expect(cx: &Ctxt, k: &Kernel, id: &Ident, ok: impl Fn(Decl) -> bool, want: &str, place: &str) {
    match k.decl(id) {
        Some(d) if !ok(d) => cx.error_spanned_by(
            id,
            format!("`{id}` is {}, but {place} it must be {want}", kind_name(d)),
        ),
        None => cx.error_spanned_by(
            id,
            format!("unknown name `{id}` {place}: expected {want} declared in this kernel"),
        ),
        _ => {}
    }
}

fn expect_root(
    cx: &Ctxt,
    k: &Kernel,
    e: &Expr,
    ok: impl Fn(Decl) -> bool,
    want: &str,
    place: &str,
) {
    if let Some(id) = root(e)
        && let Some(d) = k.decl(id)
        && !ok(d)
    {
        cx.error_spanned_by(
            id,
            format!("`{id}` is {}, but {place} it must be {want}", kind_name(d)),
        );
    }
}

/// `in_role!` blocks do not nest: a thread runs the code of one role.
struct Nesting<'a> {
    cx: &'a Ctxt,
    k: &'a Kernel,
    depth: usize,
}

impl<'ast> Visit<'ast> for Nesting<'_> {
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let Some(n) = crate::ast::node_index(m) else {
            return;
        };
        if let Node::InRole(ir) = &self.k.nodes[n] {
            if self.depth > 0 {
                self.cx.error_at(
                    ir.span,
                    "`in_role!` inside another `in_role!`: a thread belongs to one role; close the outer block first",
                );
            }
            self.depth += 1;
            self.visit_block(&ir.body);
            self.depth -= 1;
        }
        if let Node::Send(s) = &self.k.nodes[n] {
            self.visit_expr(&s.index);
        }
    }
}

/// After the flow analysis (which marks runtime control flow).
pub fn control_flow(cx: &Ctxt, k: &Kernel) {
    let mut v = Escapes {
        cx,
        k,
        regions: Vec::new(),
    };
    v.visit_block(&k.body);
}

struct Region {
    what: &'static str,
    loops: usize,
    labels: Vec<String>,
}

struct Escapes<'a> {
    cx: &'a Ctxt,
    k: &'a Kernel,
    regions: Vec<Region>,
}

impl Escapes<'_> {
    fn region(&mut self, what: &'static str, f: impl FnOnce(&mut Self)) {
        self.regions.push(Region {
            what,
            loops: 0,
            labels: Vec::new(),
        });
        f(self);
        self.regions.pop();
    }

    fn plain_loop(&mut self, label: Option<&syn::Label>, f: impl FnOnce(&mut Self)) {
        if let Some(r) = self.regions.last_mut() {
            r.loops += 1;
            if let Some(l) = label {
                r.labels.push(l.name.ident.to_string());
            }
        }
        f(self);
        if let Some(r) = self.regions.last_mut() {
            r.loops -= 1;
            if label.is_some() {
                r.labels.pop();
            }
        }
    }

    fn leaves(&self, label: Option<&syn::Lifetime>) -> Option<&'static str> {
        let r = self.regions.last()?;
        let inside = match label {
            Some(l) => r.labels.iter().any(|x| l.ident == x),
            None => r.loops > 0,
        };
        (!inside).then_some(r.what)
    }
}

impl<'ast> Visit<'ast> for Escapes<'_> {
    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::If(i) if is_marked(&i.attrs) => {
                self.visit_expr(&i.cond);
                self.region("a runtime `if`", |v| {
                    v.visit_block(&i.then_branch);
                    if let Some((_, e)) = &i.else_branch {
                        v.visit_expr(e);
                    }
                });
            }
            Expr::ForLoop(f) if is_marked(&f.attrs) => {
                self.visit_expr(&f.expr);
                self.region("a runtime `for`", |v| v.visit_block(&f.body));
            }
            Expr::While(w) if is_marked(&w.attrs) => {
                self.region("a runtime `while`", |v| {
                    v.visit_expr(&w.cond);
                    v.visit_block(&w.body);
                });
            }
            Expr::ForLoop(f) => {
                self.visit_expr(&f.expr);
                self.plain_loop(f.label.as_ref(), |v| v.visit_block(&f.body));
            }
            Expr::While(w) => self.plain_loop(w.label.as_ref(), |v| {
                v.visit_expr(&w.cond);
                v.visit_block(&w.body);
            }),
            Expr::Loop(l) => self.plain_loop(l.label.as_ref(), |v| v.visit_block(&l.body)),
            Expr::Break(b) => {
                if let Some(what) = self.leaves(b.label.as_ref()) {
                    self.cx.error_spanned_by(
                        b.break_token,
                        format!("`break` cannot leave {what}: its body is traced once as an IR region; use a condition instead"),
                    );
                }
                visit::visit_expr(self, e);
            }
            Expr::Continue(c) => {
                if let Some(what) = self.leaves(c.label.as_ref()) {
                    self.cx.error_spanned_by(
                        c.continue_token,
                        format!("`continue` cannot leave {what}: its body is traced once as an IR region; use a condition instead"),
                    );
                }
            }
            Expr::Return(r) => {
                if let Some(reg) = self.regions.last() {
                    self.cx.error_spanned_by(
                        r.return_token,
                        format!("`return` inside {}: its body is traced as an IR region, it cannot return from the kernel", reg.what),
                    );
                }
                visit::visit_expr(self, e);
            }
            Expr::Try(t) => {
                if let Some(reg) = self.regions.last() {
                    self.cx.error_spanned_by(
                        t.question_token,
                        format!("`?` inside {}: its body is traced as an IR region, it cannot return from the kernel", reg.what),
                    );
                }
                visit::visit_expr(self, e);
            }
            Expr::Macro(m) => match crate::ast::node_index(&m.mac).map(|n| &self.k.nodes[n]) {
                Some(Node::InRole(ir)) => {
                    self.region("an `in_role!` block", |v| v.visit_block(&ir.body))
                }
                _ => visit::visit_expr(self, e),
            },
            _ => visit::visit_expr(self, e),
        }
    }

    fn visit_expr_closure(&mut self, c: &'ast ExprClosure) {
        let saved = std::mem::take(&mut self.regions);
        visit::visit_expr_closure(self, c);
        self.regions = saved;
    }

    fn visit_item_fn(&mut self, f: &'ast ItemFn) {
        let saved = std::mem::take(&mut self.regions);
        visit::visit_item_fn(self, f);
        self.regions = saved;
    }
}

//! Names to declarations: which `mbarrier!`, `shared!` buffer, tensor or
//! role a place refers to, through the locals that alias one (`for bar in
//! &outs`, `let b = outs[k]`, `Some(b)`, the `(i, b)` of `.enumerate()`),
//! and hidden by a shadowing local of the same name. Events name the
//! declaration itself, so the checks see one barrier however the code
//! spells it.

use syn::{Expr, Pat};

use super::Walker;
use super::syntax::let_ident;
use crate::ast::Decl;
use crate::symbol::*;

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

impl Walker<'_> {
    /// `name` now stands for the declaration `source` comes from (or for
    /// nothing known).
    pub(super) fn alias(&mut self, pat: &Pat, source: &Expr) {
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
    pub(super) fn resolve(&self, name: &str) -> Option<String> {
        for s in self.aliases.iter().rev() {
            if let Some(t) = s.get(name) {
                return (!t.is_empty()).then(|| t.clone());
            }
        }
        self.decls.contains_key(name).then(|| name.to_string())
    }

    pub(super) fn decl(&self, e: &Expr) -> Option<(String, Decl)> {
        let name = self.resolve(&root(e)?.to_string())?;
        let d = *self.decls.get(&name)?;
        Some((name, d))
    }
}

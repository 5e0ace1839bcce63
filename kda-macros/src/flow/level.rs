//! Levels: whether a value is known when the kernel is traced (comptime), a
//! runtime value the same on every lane of a warp, or one that may differ
//! between the lanes. The level of a condition or comparison decides
//! whether it is marked for dispatch at trace time (comptime ones stay
//! plain Rust), and a lane-varying condition is what makes a warp
//! collective under it divergent. Levels live in lexical scopes and flow
//! through `let` bindings, patterns, type annotations and assignments; an
//! assignment under a runtime condition also takes the condition's level,
//! since the value now depends on it.

use std::collections::HashMap;

use syn::{Pat, Type};

use super::Walker;

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
pub(super) const UNKNOWN: Level = Level::Runtime { varying: false };

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

pub(super) fn bind_pat_into(scope: &mut HashMap<String, Level>, pat: &Pat, lv: Level) {
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

impl Walker<'_> {
    pub(super) fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
        self.aliases.push(HashMap::new());
    }

    pub(super) fn pop_scope(&mut self) {
        self.scopes.pop();
        self.aliases.pop();
    }

    pub(super) fn bind_pat(&mut self, pat: &Pat, lv: Level) {
        let scope = self.scopes.last_mut().expect("a scope");
        bind_pat_into(scope, pat, lv);
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Level> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// The level conditions add to what is assigned under them.
    pub(super) fn cond_level(&self) -> Level {
        self.conds
            .iter()
            .filter(|f| f.runtime)
            .fold(Level::Comptime, |a, f| {
                a.join(Level::Runtime { varying: f.varying })
            })
    }

    pub(super) fn assign(&mut self, name: &str, lv: Level) {
        let add = lv.join(self.cond_level());
        for s in self.scopes.iter_mut().rev() {
            if let Some(old) = s.get_mut(name) {
                *old = old.join(add);
                return;
            }
        }
    }
}

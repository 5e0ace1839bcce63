//! What the syntax alone says, without the walk's state: integer constants
//! the macro can evaluate (byte counts, trip counts, divisors), whether a
//! loop runs over a range, a literal range's trip count, a `let`'s simple
//! name, and an expression's text for messages.

use quote::ToTokens;
use syn::{BinOp, Expr, Lit, Pat, Stmt};

use crate::symbol::*;

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

pub(super) fn literal_trip(e: &Expr) -> Option<u64> {
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

pub(super) fn let_ident(pat: &Pat) -> Option<String> {
    match pat {
        Pat::Ident(pi) => Some(pi.ident.to_string()),
        Pat::Type(pt) => let_ident(&pt.pat),
        _ => None,
    }
}

pub(super) fn strip(e: &mut Expr) -> &mut Expr {
    match e {
        Expr::Paren(p) => strip(&mut p.expr),
        Expr::Group(g) => strip(&mut g.expr),
        e => e,
    }
}

pub(super) fn text(e: &impl ToTokens) -> String {
    let s = e.to_token_stream().to_string();
    // Tighten the token printer's spacing for messages.
    s.replace(" (", "(")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" .", ".")
        .replace(". ", ".")
}

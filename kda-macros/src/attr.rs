//! Attribute parsing: the `#[cluster_kernel(...)]` arguments and the
//! attributes of kernel parameters.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Lit, LitStr, Meta, MetaNameValue, Token};

use crate::ctxt::Ctxt;
use crate::symbol::*;

/// `#[cluster_kernel(block = .., cluster = .., min_blocks = .., max_regs = ..,
/// early = .., trigger_at_entry = .., late_release = .., cluster_policy = ..,
/// wave = .., name = "..")]`.
/// The values are Rust expressions evaluated when the kernel is traced, so
/// they may use the `#[comptime]` parameters.
pub struct Launch {
    pub block: Option<Expr>,
    pub cluster: Option<Expr>,
    pub min_blocks: Option<Expr>,
    /// The scheduler's early schedule (`kda::ir::ScheduleHints::early`).
    pub early: Option<Expr>,
    /// Trigger dependent launches at the entry
    /// (`kda::ir::ScheduleHints::trigger_at_entry`).
    pub trigger_at_entry: Option<Expr>,
    /// Releasing cluster arrives at their latest place
    /// (`kda::ir::ScheduleHints::late_release`).
    pub late_release: Option<Expr>,
    /// The cluster scheduling policy (`kda::ir::ClusterPolicy`, set by the
    /// runtime on the loaded function).
    pub cluster_policy: Option<Expr>,
    /// `.maxnreg`: the registers per thread every warp starts with.
    pub max_regs: Option<Expr>,
    /// Row chains issued together (`kda::ir::ScheduleHints::wave`, applied
    /// by `kda::dsl::chains`).
    pub wave: Option<Expr>,
    pub name: Option<LitStr>,
}

pub fn launch(cx: &Ctxt, args: TokenStream) -> Launch {
    let mut out = Launch {
        block: None,
        cluster: None,
        min_blocks: None,
        early: None,
        trigger_at_entry: None,
        late_release: None,
        cluster_policy: None,
        max_regs: None,
        wave: None,
        name: None,
    };
    let parsed = match Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args) {
        Ok(p) => p,
        Err(e) => {
            cx.error_at(
                e.span(),
                "expected `key = value` arguments: `#[cluster_kernel(block = 160, cluster = cfg.cluster)]`",
            );
            return out;
        }
    };
    for nv in parsed {
        // `counts`: the argument is a thread or CTA count, never a string;
        // the other expressions (flags, the cluster policy) are left to the
        // type checker.
        let (slot, counts) = if nv.path == BLOCK {
            (&mut out.block, true)
        } else if nv.path == CLUSTER {
            (&mut out.cluster, true)
        } else if nv.path == MIN_BLOCKS {
            (&mut out.min_blocks, true)
        } else if nv.path == MAX_REGS {
            (&mut out.max_regs, true)
        } else if nv.path == WAVE {
            (&mut out.wave, true)
        } else if nv.path == EARLY {
            (&mut out.early, false)
        } else if nv.path == TRIGGER_AT_ENTRY {
            (&mut out.trigger_at_entry, false)
        } else if nv.path == LATE_RELEASE {
            (&mut out.late_release, false)
        } else if nv.path == CLUSTER_POLICY {
            (&mut out.cluster_policy, false)
        } else if nv.path == NAME {
            match &nv.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(s), ..
                }) if out.name.is_none() => out.name = Some(s.clone()),
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(_), ..
                }) => cx.error_spanned_by(&nv.path, "duplicate `cluster_kernel` argument `name`"),
                other => cx.error_spanned_by(
                    other,
                    "`name` is the kernel's name in the IR and PTX: a string literal",
                ),
            }
            continue;
        } else {
            cx.error_spanned_by(
                &nv.path,
                format!(
                    "unknown `cluster_kernel` argument `{}`; expected `block`, `cluster`, `min_blocks`, `max_regs`, `early`, `trigger_at_entry`, `late_release`, `cluster_policy`, `wave` or `name`",
                    nv.path.get_ident().map_or_else(|| "?".to_string(), |i| i.to_string())
                ),
            );
            continue;
        };
        if let (
            true,
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }),
        ) = (counts, &nv.value)
        {
            cx.error_spanned_by(
                s,
                "expected a thread or CTA count (an integer expression), found a string",
            );
        } else if slot.is_some() {
            cx.error_spanned_by(&nv.path, "duplicate `cluster_kernel` argument");
        } else {
            *slot = Some(nv.value);
        }
    }
    if out.block.is_none() {
        cx.error_at(
            Span::call_site(),
            "missing `block = <threads>`: a cluster kernel declares its block size, e.g. `#[cluster_kernel(block = 128)]`",
        );
    }
    out
}

/// A scheduler hint a tensor parameter may carry (`#[name]` or
/// `#[name(cond)]`): the scheduler applies it to the tensor's traffic.
#[derive(Clone, Copy)]
pub struct TensorHint {
    pub name: Symbol,
    /// What it does to a tensor, for messages.
    pub does: &'static str,
    /// A configuration field in the example of the expected syntax.
    pub example: &'static str,
}

/// The tensor hints; each sets the IR hint of its name through the
/// runtime function of its name (`kda::dsl::__rt::evict_first`, ..).
pub const TENSOR_HINTS: [TensorHint; 3] = [
    TensorHint {
        name: EVICT_FIRST,
        does: "it marks their global loads, stores and bulk copies L2 evict-first",
        example: "evict",
    },
    TensorHint {
        name: STAGE_THROUGH_SHARED,
        does: "it stages their ready data through shared memory",
        example: "staged",
    },
    TensorHint {
        name: STORE_THROUGH_SHARED,
        does: "it stores their tiles through shared memory, one bulk store each",
        example: "bulk_store",
    },
];

/// The attributes of one kernel parameter.
#[derive(Default)]
pub struct ParamAttrs {
    pub comptime: Option<Span>,
    pub produced: Option<Span>,
    pub ready: Option<Span>,
    pub align: Option<Expr>,
    pub strides: Option<(Span, Vec<Expr>)>,
    /// `#[when(cond)]`: the tensor is a parameter only when `cond` (comptime) holds.
    pub when: Option<Expr>,
    /// `#[name = "abi_name"]`: the parameter's name in the kernel's ABI
    /// (IR, PTX, typed launch, descriptor) where the Rust identifier must
    /// differ, e.g. two `#[when]` forms of one argument with different ranks.
    pub name: Option<syn::LitStr>,
    /// Scheduler hints on a tensor (`#[evict_first]`,
    /// `#[stage_through_shared(cond)]`, `#[store_through_shared(cond)]`, see
    /// [`TENSOR_HINTS`]): the hint, the
    /// attribute's span and the comptime condition (`true` when bare).
    pub hints: Vec<(TensorHint, Span, Expr)>,
    /// Attributes passed through to the generated function (`#[comptime]` parameters only).
    pub other: Vec<Attribute>,
}

pub fn param(cx: &Ctxt, attrs: &[Attribute]) -> ParamAttrs {
    let mut out = ParamAttrs::default();
    for attr in attrs {
        let path = attr.path();
        if path == DOC {
            out.other.push(attr.clone());
        } else if path == COMPTIME || path == PRODUCED || path == READY {
            if !matches!(attr.meta, Meta::Path(_)) {
                cx.error_spanned_by(
                    attr,
                    format!("`#[{}]` takes no arguments", path.get_ident().unwrap()),
                );
            }
            let slot = if path == COMPTIME {
                &mut out.comptime
            } else if path == PRODUCED {
                &mut out.produced
            } else {
                &mut out.ready
            };
            if slot.is_some() {
                cx.error_spanned_by(attr, "duplicate attribute");
            }
            *slot = Some(path.get_ident().unwrap().span());
        } else if path == ALIGN {
            match attr.parse_args::<Expr>() {
                Ok(e) => out.align = Some(e),
                Err(_) => {
                    cx.error_spanned_by(attr, "expected `#[align(<bytes>)]`, e.g. `#[align(16)]`")
                }
            }
        } else if path == NAME {
            let lit = match &attr.meta {
                Meta::NameValue(nv) => match &nv.value {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(s.clone()),
                    _ => None,
                },
                _ => None,
            };
            match lit {
                Some(s) if syn::parse_str::<syn::Ident>(&s.value()).is_ok() => {
                    if out.name.is_some() {
                        cx.error_spanned_by(attr, "duplicate attribute");
                    }
                    out.name = Some(s);
                }
                Some(s) => cx.error_spanned_by(
                    &s,
                    "`#[name = \"..\"]` takes an identifier: the argument's name in the kernel's ABI",
                ),
                None => cx.error_spanned_by(
                    attr,
                    "expected `#[name = \"<identifier>\"]`, e.g. `#[name = \"slots\"]`",
                ),
            }
        } else if path == WHEN {
            match attr.parse_args::<Expr>() {
                Ok(e) => out.when = Some(e),
                Err(_) => cx.error_spanned_by(
                    attr,
                    "expected `#[when(<comptime bool>)]`, e.g. `#[when(cfg.tokens > 1)]`",
                ),
            }
        } else if let Some(hint) = TENSOR_HINTS.iter().find(|h| path == h.name) {
            let span = path.get_ident().unwrap().span();
            let cond = match &attr.meta {
                Meta::Path(_) => Some(syn::parse_quote_spanned!(span=> true)),
                Meta::List(_) => attr.parse_args::<Expr>().ok(),
                Meta::NameValue(_) => None,
            };
            let name = hint.name.name();
            match cond {
                Some(_) if out.hints.iter().any(|(h, ..)| h.name.name() == name) => {
                    cx.error_spanned_by(attr, "duplicate attribute")
                }
                Some(c) => out.hints.push((*hint, span, c)),
                None => cx.error_spanned_by(
                    attr,
                    format!(
                        "expected `#[{name}]` or `#[{name}(<comptime bool>)]`, e.g. `#[{name}(cfg.{})]`",
                        hint.example
                    ),
                ),
            }
        } else if path == STRIDES {
            match attr.parse_args_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
                Ok(p) => out.strides = Some((path.get_ident().unwrap().span(), p.into_iter().collect())),
                Err(_) => cx.error_spanned_by(
                    attr,
                    "expected `#[strides(..)]` with one stride per dimension: a number, `{expr}`, a symbolic name or `_`",
                ),
            }
        } else {
            cx.error_spanned_by(
                path,
                format!(
                    "unknown parameter attribute `#[{}]`; expected `#[comptime]`, `#[produced]`, `#[ready]`, \
                     `#[align(..)]`, `#[strides(..)]`, `#[when(..)]`, `#[name = \"..\"]`, `#[evict_first(..)]`, \
                     `#[stage_through_shared(..)]` or `#[store_through_shared(..)]`",
                    quote::ToTokens::to_token_stream(path).to_string().replace(' ', "")
                ),
            );
        }
    }
    out
}

//! Token generation. The kernel function becomes a builder function with the
//! `#[comptime]` parameters that traces the body into a `kda::ir::Kernel`:
//! declarations first (symbols, tensors, scalars), then the body, rewritten
//! where Rust's own semantics cannot emit IR:
//!
//! * DSL macros (`role!`, `send!`, ...) become calls into `kda::dsl::__rt`;
//! * `t[i]` and `t[i] = v` become `__kda_load`/`__kda_store` calls, which
//!   load or store on tensors and shared buffers and index any other value
//!   as Rust does;
//! * comparisons, `&&`/`||`, `if`, `for` and `while` that the flow analysis
//!   marked (not provably comptime) are dispatched on their type at trace
//!   time; the locals their bodies assign travel through the call as state.
//!
//! Every generated call carries the span of the user's tokens it replaces,
//! so `#[track_caller]` locations in the IR are the user's lines.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Block, Expr, ExprBinary, ExprForLoop, ExprIf, ExprWhile, Ident, ItemFn, Pat};

use crate::ast::{Decl, Dest, DimSpec, Kernel, Node, ParamKind, SendValue};
use crate::ctxt::Ctxt;
use crate::flow::{self, take_mark};
use crate::symbol::*;
use crate::{check, fallback, valid};

/// The whole macro: parse, validate, analyse, check, then expand (or, on any
/// error, emit every error with a stub of the builder function).
pub fn cluster_kernel(args: TokenStream, item: ItemFn) -> TokenStream {
    let cx = Ctxt::new();
    let mut k = Kernel::from_syn(&cx, args, item.clone());
    if !cx.has_errors() {
        valid::declarations(&cx, &k);
        let flow = flow::analyse(&mut k);
        check::check(&cx, &k, &flow);
        valid::control_flow(&cx, &k);
    }
    match cx.check() {
        Ok(()) => expand(k),
        Err(errors) => fallback::stub(&item, errors),
    }
}

fn rt(span: Span) -> TokenStream {
    quote_spanned!(span=> ::kda::dsl::__rt)
}

fn elem_path(name: &str, span: Span) -> TokenStream {
    match name {
        "bf16" => quote_spanned!(span=> ::kda::dsl::bf16),
        other => {
            let id = Ident::new(other, span);
            quote!(#id)
        }
    }
}

fn scalar_variant(name: &str, span: Span) -> TokenStream {
    let elem = elem_path(name, span);
    if !crate::symbol::ELEMS.iter().any(|(n, _)| *n == name) {
        return quote_spanned!(span=> <#elem as ::kda::dsl::Elem>::SCALAR);
    }
    let v = Ident::new(
        match name {
            "f32" => "F32",
            "bf16" => "BF16",
            "i32" => "I32",
            "u32" => "U32",
            "i64" => "I64",
            _ => "U64",
        },
        span,
    );
    quote_spanned!(span=> ::kda::ir::Scalar::#v)
}

/// `{expr}` (a const generic argument) as `expr`.
fn unbrace(e: &Expr) -> &Expr {
    match e {
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(inner, None) => inner,
            _ => e,
        },
        _ => e,
    }
}

fn count(e: &Expr, what: &str) -> TokenStream {
    let span = e.span();
    let rt = rt(span);
    quote_spanned!(span=> #rt::count(#e, #what))
}

fn expand(k: Kernel) -> TokenStream {
    let Kernel {
        attrs,
        vis,
        ident,
        generics,
        launch,
        comptime,
        params,
        body,
        nodes,
        decls,
    } = k;
    let name = launch
        .name
        .as_ref()
        .map_or_else(|| ident.to_string(), |n| n.value());
    let where_clause = &generics.where_clause;
    let call = Span::call_site();
    let rtc = rt(call);

    let block = count(
        launch.block.as_ref().expect("checked: block is given"),
        "block",
    );
    let cluster = launch
        .cluster
        .as_ref()
        .map_or_else(|| quote!(1u32), |c| count(c, "cluster"));
    let min_blocks = launch.min_blocks.as_ref().map_or_else(
        || quote!(::core::option::Option::None),
        |m| {
            let span = m.span();
            let rt = rt(span);
            quote_spanned!(span=> #rt::min_blocks(#m))
        },
    );

    let early = launch.early.as_ref().map(|e| {
        let span = e.span();
        let rt = rt(span);
        quote_spanned!(span=> #rt::early(#e);)
    });
    let trigger_at_entry = launch.trigger_at_entry.as_ref().map(|e| {
        let span = e.span();
        let rt = rt(span);
        quote_spanned!(span=> #rt::trigger_at_entry(#e);)
    });
    let late_release = launch.late_release.as_ref().map(|e| {
        let span = e.span();
        let rt = rt(span);
        quote_spanned!(span=> #rt::late_release(#e);)
    });
    let cluster_policy = launch.cluster_policy.as_ref().map(|e| {
        let span = e.span();
        let rt = rt(span);
        quote_spanned!(span=> #rt::cluster_policy(#e);)
    });
    let wave = launch.wave.as_ref().map(|w| {
        let span = w.span();
        let rt = rt(span);
        let w = count(w, "wave");
        quote_spanned!(span=> #rt::wave(#w);)
    });
    let max_regs = launch.max_regs.as_ref().map(|m| {
        let span = m.span();
        let rt = rt(span);
        let m = count(m, "max_regs");
        quote_spanned!(span=> #rt::max_regs(#m);)
    });

    // Symbols in order of first appearance, then tensors and scalars in
    // parameter order, then the scalars' values.
    let mut syms: Vec<String> = Vec::new();
    let mut decl_tokens = Vec::new();
    let mut reads = Vec::new();
    for p in &params {
        if let ParamKind::Tensor(t) = &p.kind {
            for d in t.dims.iter().chain(t.strides.iter().flatten()) {
                if let DimSpec::Sym(s) = d
                    && !syms.contains(&s.to_string())
                {
                    syms.push(s.to_string());
                }
            }
        }
    }
    let sym_var = |s: &str| format_ident!("__kda_sym_{}", s);
    // A symbol is created where a declared tensor first uses it (a tensor
    // under `#[when]` may not be declared).
    let sym_decls = syms.iter().map(|s| {
        let v = sym_var(s);
        quote!(let #v = #rtc::LazySym::new(#s);)
    });
    let dim = |d: &DimSpec, tensor: &str, i: usize, stride: bool| match d {
        DimSpec::Sym(s) => {
            let v = sym_var(&s.to_string());
            quote!(#v.get())
        }
        DimSpec::Anon(span) => {
            let rt = rt(*span);
            let name = format!("{tensor}.stride{i}");
            quote_spanned!(*span=> #rt::sym(#name))
        }
        DimSpec::Const(e) => {
            let span = e.span();
            let rt = rt(span);
            let e = unbrace(e);
            let name = format!("{tensor}.{}{i}", if stride { "stride" } else { "dim" });
            quote_spanned!(span=> #rt::dim(#e, #name))
        }
    };
    for p in &params {
        let id = &p.ident;
        let span = id.span();
        let pname = p.abi_name();
        let rt = rt(span);
        match &p.kind {
            ParamKind::Tensor(t) => {
                let elem = elem_path(&t.elem.name, t.elem.span);
                let rank = t.dims.len();
                let dims: Vec<TokenStream> = t
                    .dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| dim(d, &pname, i, false))
                    .collect();
                let strides = match &t.strides {
                    Some(ss) => {
                        let ss: Vec<TokenStream> = ss
                            .iter()
                            .enumerate()
                            .map(|(i, d)| dim(d, &pname, i, true))
                            .collect();
                        quote!([#(#ss),*])
                    }
                    None => quote_spanned!(span=> #rt::default_strides::<#rank>(#pname)),
                };
                let produced = t.produced;
                let align = t.align.as_ref().map_or_else(
                    || quote!(::core::option::Option::None),
                    |a| {
                        let c = count(a, "align");
                        quote!(::core::option::Option::Some(#c))
                    },
                );
                let hints = t.hints.iter().map(|(hint, c)| {
                    let span = c.span();
                    let set = syn::Ident::new(hint.name(), span);
                    quote_spanned!(span=> #rt::#set(__kda_tensor.id(), #c);)
                });
                let declare = quote_spanned! {span=>
                    {
                        let __kda_shape = [#(#dims),*];
                        let __kda_strides = #strides;
                        let __kda_tensor = #rt::tensor::<#elem, #rank>(#pname, __kda_shape, __kda_strides, #produced, #align);
                        #(#hints)*
                        __kda_tensor
                    }
                };
                decl_tokens.push(match &t.when {
                    None => quote_spanned! {span=>
                        #[allow(unused_variables)]
                        let #id: ::kda::dsl::Tensor<#elem, #rank> = #declare;
                    },
                    Some(cond) => quote_spanned! {span=>
                        #[allow(unused_variables)]
                        let #id: ::core::option::Option<::kda::dsl::Tensor<#elem, #rank>> =
                            if #cond { ::core::option::Option::Some(#declare) } else { ::core::option::Option::None };
                    },
                });
            }
            ParamKind::Scalar(s, when) => {
                let var = format_ident!("__kda_scalar_{}", id);
                let ty = scalar_variant(&s.name, s.span);
                let elem = elem_path(&s.name, s.span);
                match when {
                    None => {
                        decl_tokens
                            .push(quote_spanned!(span=> let #var = #rt::scalar(#pname, #ty);));
                        reads.push(quote_spanned! {span=>
                            #[allow(unused_variables)]
                            let #id: ::kda::dsl::Val<#elem> = #rt::param::<#elem>(#var);
                        });
                    }
                    // Declared only when the comptime condition holds.
                    Some(cond) => {
                        decl_tokens.push(quote_spanned! {span=>
                            let #var = if #cond { ::core::option::Option::Some(#rt::scalar(#pname, #ty)) } else { ::core::option::Option::None };
                        });
                        reads.push(quote_spanned! {span=>
                            #[allow(unused_variables)]
                            let #id: ::core::option::Option<::kda::dsl::Val<#elem>> =
                                #var.map(|v| #rt::param::<#elem>(v));
                        });
                    }
                }
            }
        }
    }

    let launch_module = crate::launch::module(&vis, &ident, &generics, &params, &comptime);
    let mut rw = Rewrite {
        nodes,
        decls: &decls,
    };
    let mut body = body;
    rw.visit_block_mut(&mut body);

    quote! {
        #(#attrs)*
        #vis fn #ident #generics (#(#comptime),*) -> ::kda::ir::Kernel #where_clause {
            #[allow(unused_imports)]
            use ::kda::dsl::prelude::*;
            #[allow(unused_imports)]
            use ::kda::dsl::__rt::{LoadHandle as _, LoadIndex as _, StoreMut as _, StoreRef as _};
            let __kda_trace = #rtc::Trace::begin(#name, #rtc::launch(#block, #cluster, #min_blocks));
            #early
            #trigger_at_entry
            #late_release
            #cluster_policy
            #wave
            #max_regs
            #(#sym_decls)*
            #(#decl_tokens)*
            #(#reads)*
            #body
            __kda_trace.finish()
        }

        #launch_module
    }
}

/// The body rewrite (see the module doc).
struct Rewrite<'a> {
    nodes: Vec<Node>,
    decls: &'a std::collections::HashMap<String, Decl>,
}

fn parse(tokens: TokenStream) -> Expr {
    match syn::parse2(tokens.clone()) {
        Ok(e) => e,
        Err(err) => panic!(
            "kda-macros generated an unparsable expression ({err}): {}",
            tokens.to_string().replace('\n', " ")
        ),
    }
}

fn paren(e: &Expr) -> TokenStream {
    quote!((#e))
}

impl Rewrite<'_> {
    fn decl(&self, e: &Expr) -> Option<Decl> {
        flow::root(e).and_then(|r| self.decls.get(&r.to_string()).copied())
    }

    /// `bars` of `bars[i]`, a ring of mbarriers (`mbarrier!(.., count = n)`):
    /// its elements are taken by value, `bars[s]` with a runtime `s` too.
    fn is_barrier_array(&self, e: &Expr) -> bool {
        matches!(e, Expr::Path(_)) && matches!(self.decl(e), Some(Decl::Barrier(_)))
    }

    fn is_handle(&self, e: &Expr) -> bool {
        matches!(self.decl(e), Some(Decl::Tensor(_) | Decl::Buffer(_)))
    }

    /// The index of an access: `[a, b]` with each element made an `Ix`
    /// (their types may differ: `[slot, head, 0]`).
    fn index(&self, idx: &Expr) -> TokenStream {
        match idx {
            Expr::Array(a) => {
                let elems = a.elems.iter().map(|e| {
                    let span = e.span();
                    let rt = rt(span);
                    quote_spanned!(span=> #rt::ix(#e))
                });
                quote_spanned!(a.bracket_token.span.join()=> [#(#elems),*])
            }
            other => quote!(#other),
        }
    }

    /// Rewrite the sub-expressions of a place, leaving the place itself.
    fn place(&mut self, e: &mut Expr) {
        match e {
            Expr::Index(i) if self.is_barrier_array(&i.expr) => self.visit_expr_mut(e),
            Expr::Index(i) if !self.is_handle(&i.expr) => {
                self.place(&mut i.expr);
                self.visit_expr_mut(&mut i.index);
            }
            Expr::Field(f) => self.place(&mut f.base),
            Expr::Paren(p) => self.place(&mut p.expr),
            Expr::Path(_) => {}
            other => self.visit_expr_mut(other),
        }
    }

    /// Locals a block assigns that are declared outside it (and are not DSL handles).
    fn carried(&self, blocks: &[&Block], exprs: &[&Expr]) -> Vec<Ident> {
        let mut c = Assigned {
            nodes: &self.nodes,
            scopes: vec![HashSet::new()],
            out: Vec::new(),
        };
        for b in blocks {
            c.visit_block(b);
        }
        for e in exprs {
            c.visit_expr(e);
        }
        c.out
            .into_iter()
            .filter(|id| {
                !matches!(
                    self.decls.get(&id.to_string()),
                    Some(
                        Decl::Tensor(_)
                            | Decl::Scalar(_)
                            | Decl::Role(_)
                            | Decl::Barrier(_)
                            | Decl::Buffer(_)
                    )
                )
            })
            .collect()
    }

    fn dispatch_if(&mut self, i: &mut ExprIf) -> Expr {
        let span = i.if_token.span;
        let rt = rt(span);
        let mut blocks = vec![&i.then_branch];
        let mut exprs = Vec::new();
        if let Some((_, e)) = &i.else_branch {
            exprs.push(&**e);
        }
        let names = self.carried(&std::mem::take(&mut blocks), &exprs);
        self.visit_expr_mut(&mut i.cond);
        self.visit_block_mut(&mut i.then_branch);
        if let Some((_, e)) = &mut i.else_branch {
            self.visit_expr_mut(e);
        }
        let (cond, then) = (&i.cond, &i.then_branch);
        let branch = match &i.else_branch {
            Some((_, e)) => quote_spanned!(span=> if __kda_branch #then else #e),
            None => quote_spanned!(span=> if __kda_branch #then),
        };
        if names.is_empty() {
            return parse(quote_spanned! {span=>
                { #rt::if_else(#cond, &mut (), &[], |__kda_branch: bool, _: &mut ()| #branch) }
            });
        }
        let strs: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        parse(quote_spanned! {span=>
            {
                let __kda_cond = #cond;
                let mut __kda_state = (#(#names,)*);
                #[allow(clippy::let_unit_value)]
                let __kda_out = #rt::if_else(__kda_cond, &mut __kda_state, &[#(#strs),*], |__kda_branch: bool, __kda_s: &mut _| {
                    #[allow(unused_mut, unused_variables, unused_assignments)]
                    let (#(mut #names,)*) = ::core::clone::Clone::clone(&*__kda_s);
                    #[allow(clippy::let_unit_value)]
                    let __kda_r = #branch;
                    *__kda_s = (#(#names,)*);
                    __kda_r
                });
                #[allow(unused_assignments)]
                {
                    (#(#names,)*) = __kda_state;
                };
                __kda_out
            }
        })
    }

    fn range(&mut self, e: &mut Expr) -> TokenStream {
        match e {
            Expr::Range(r) if r.start.is_some() && r.end.is_some() => {
                let span = r.limits.span();
                let rt = rt(span);
                let (lo, hi) = (r.start.as_mut().unwrap(), r.end.as_mut().unwrap());
                self.visit_expr_mut(lo);
                self.visit_expr_mut(hi);
                quote_spanned!(span=> #rt::range(#lo, #hi))
            }
            Expr::Paren(p) => self.range(&mut p.expr),
            Expr::MethodCall(m) if m.method == "step_by" => {
                let recv = self.range(&mut m.receiver);
                for a in m.args.iter_mut() {
                    self.visit_expr_mut(a);
                }
                let (method, args) = (&m.method, &m.args);
                quote!(#recv.#method(#args))
            }
            other => {
                self.visit_expr_mut(other);
                quote!(#other)
            }
        }
    }

    fn dispatch_for(&mut self, f: &mut ExprForLoop) -> Expr {
        let span = f.for_token.span;
        let rt = rt(span);
        let names = self.carried(&[&f.body], &[]);
        let iter = self.range(&mut f.expr);
        self.visit_block_mut(&mut f.body);
        let (pat, body) = (&f.pat, &f.body);
        if names.is_empty() {
            return parse(quote_spanned! {span=>
                { #rt::for_each(#iter, &mut (), &[], |#pat, _: &mut ()| #body) }
            });
        }
        let strs: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        parse(quote_spanned! {span=>
            {
                let __kda_iter = #iter;
                let mut __kda_state = (#(#names,)*);
                #rt::for_each(__kda_iter, &mut __kda_state, &[#(#strs),*], |#pat, __kda_s| {
                    #[allow(unused_mut, unused_variables, unused_assignments)]
                    let (#(mut #names,)*) = ::core::clone::Clone::clone(&*__kda_s);
                    #body;
                    *__kda_s = (#(#names,)*);
                });
                #[allow(unused_assignments)]
                {
                    (#(#names,)*) = __kda_state;
                };
            }
        })
    }

    fn dispatch_while(&mut self, w: &mut ExprWhile) -> Expr {
        let span = w.while_token.span;
        let rt = rt(span);
        let names = self.carried(&[&w.body], &[&w.cond]);
        self.visit_expr_mut(&mut w.cond);
        self.visit_block_mut(&mut w.body);
        let (cond, body) = (&w.cond, &w.body);
        if names.is_empty() {
            return parse(quote_spanned! {span=>
                { #rt::while_loop(&mut (), &[], |_: &()| #cond, |_: &mut ()| #body) }
            });
        }
        let strs: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        parse(quote_spanned! {span=>
            {
                let mut __kda_state = (#(#names,)*);
                #rt::while_loop(&mut __kda_state, &[#(#strs),*], |__kda_s| {
                    #[allow(unused_variables)]
                    let (#(#names,)*) = ::core::clone::Clone::clone(__kda_s);
                    #cond
                }, |__kda_s| {
                    #[allow(unused_mut, unused_variables, unused_assignments)]
                    let (#(mut #names,)*) = ::core::clone::Clone::clone(&*__kda_s);
                    #body;
                    *__kda_s = (#(#names,)*);
                });
                #[allow(unused_assignments)]
                {
                    (#(#names,)*) = __kda_state;
                };
            }
        })
    }

    fn binary(&mut self, b: &mut ExprBinary) -> Option<Expr> {
        let marked = take_mark(&mut b.attrs);
        let compound = match b.op {
            BinOp::AddAssign(_) => Some(quote!(+)),
            BinOp::SubAssign(_) => Some(quote!(-)),
            BinOp::MulAssign(_) => Some(quote!(*)),
            BinOp::DivAssign(_) => Some(quote!(/)),
            BinOp::RemAssign(_) => Some(quote!(%)),
            BinOp::BitXorAssign(_) => Some(quote!(^)),
            BinOp::BitAndAssign(_) => Some(quote!(&)),
            BinOp::BitOrAssign(_) => Some(quote!(|)),
            BinOp::ShlAssign(_) => Some(quote!(<<)),
            BinOp::ShrAssign(_) => Some(quote!(>>)),
            _ => None,
        };
        if let (Some(op), Expr::Index(ix)) = (compound, &mut *b.left) {
            self.visit_expr_mut(&mut b.right);
            self.place(&mut ix.expr);
            self.visit_expr_mut(&mut ix.index);
            let span = ix.expr.span();
            let idx = self.index(&ix.index);
            let base = paren(&ix.expr);
            let rhs = &b.right;
            return Some(parse(quote_spanned! {span=>
                {
                    let __kda_i = #idx;
                    let __kda_v = #base.__kda_load(::core::clone::Clone::clone(&__kda_i)) #op #rhs;
                    #base.__kda_store(__kda_i, __kda_v)
                }
            }));
        }
        visit_mut::visit_expr_binary_mut(self, b);
        if !marked {
            return None;
        }
        let span = b.op.span();
        let rt = rt(span);
        let (l, r) = (&b.left, &b.right);
        let f = match b.op {
            BinOp::Eq(_) => "eq",
            BinOp::Ne(_) => "ne",
            BinOp::Lt(_) => "lt",
            BinOp::Le(_) => "le",
            BinOp::Gt(_) => "gt",
            BinOp::Ge(_) => "ge",
            BinOp::And(_) => return Some(parse(quote_spanned!(span=> #rt::and(#l, || #r)))),
            BinOp::Or(_) => return Some(parse(quote_spanned!(span=> #rt::or(#l, || #r)))),
            _ => return None,
        };
        let f = Ident::new(f, span);
        Some(parse(quote_spanned!(span=> #rt::#f(&(#l), &(#r)))))
    }

    fn node(&mut self, n: usize) -> Expr {
        let mut node = std::mem::replace(&mut self.nodes[n], Node::Taken);
        let e = self.node_expr(&mut node);
        self.nodes[n] = node;
        e
    }

    fn node_expr(&mut self, node: &mut Node) -> Expr {
        let span = node.span();
        let rt = rt(span);
        match node {
            Node::Role(r) => {
                let name = r.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
                let (lo, hi) = (count(&r.lo, "role start"), count(&r.hi, "role end"));
                match &r.regs {
                    None => parse(quote_spanned!(span=> #rt::role(#name, #lo, #hi))),
                    Some(regs) => {
                        let regs = count(regs, "regs");
                        parse(quote_spanned!(span=> #rt::role_regs(#name, #lo, #hi, #regs)))
                    }
                }
            }
            Node::Mbarrier(b) => {
                let name = b.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
                let arrivals = count(&b.arrivals, "arrivals");
                let tx =
                    b.tx.as_ref()
                        .map_or_else(|| quote!(0u32), |t| count(t, "tx"));
                let roles: Vec<TokenStream> = b
                    .roles
                    .iter()
                    .flatten()
                    .map(|r| quote_spanned!(r.span()=> &#r))
                    .collect();
                let released = b.released;
                match &b.count {
                    Some(c) => {
                        let c = count(c, "count");
                        parse(
                            quote_spanned!(span=> #rt::mbarriers(#name, #c, #arrivals, #tx, &[#(#roles),*], #released)),
                        )
                    }
                    None if released => parse(
                        quote_spanned!(span=> #rt::mbarrier_released(#name, #arrivals, #tx, &[#(#roles),*])),
                    ),
                    None => parse(
                        quote_spanned!(span=> #rt::mbarrier(#name, #arrivals, #tx, &[#(#roles),*])),
                    ),
                }
            }
            Node::Shared(s) => {
                let name = s.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
                let elem = elem_path(&s.elem.name, s.elem.span);
                let dims = s.dims.iter().map(|d| count(d, "extent"));
                let align = s
                    .align
                    .as_ref()
                    .map_or_else(|| quote!(16u32), |a| count(a, "align"));
                let roles = s
                    .roles
                    .iter()
                    .flatten()
                    .map(|r| quote_spanned!(r.span()=> &#r));
                let guard = match (&s.guard, &s.guard_index) {
                    (Some(g), None) => {
                        quote_spanned!(g.span()=> ::core::option::Option::Some(#rt::guard(&#g)))
                    }
                    (Some(g), Some(i)) => quote_spanned!(g.span()=>
                        ::core::option::Option::Some(#rt::guard(&#rt::bar_at(&#g, #i)))),
                    (None, _) => quote!(::core::option::Option::None),
                };
                match &s.swizzle {
                    Some(sw) => {
                        let sw = count(sw, "swizzle");
                        parse(
                            quote_spanned!(span=> #rt::shared_tile::<#elem>(#name, &[#(#dims),*], #sw, &[#(#roles),*], #guard)),
                        )
                    }
                    None => parse(
                        quote_spanned!(span=> #rt::shared::<#elem>(#name, &[#(#dims),*], #align, &[#(#roles),*], #guard)),
                    ),
                }
            }
            Node::Regs(r) => {
                for d in &mut r.dims {
                    self.visit_expr_mut(d);
                }
                let ty = &r.ty;
                let dims = r.dims.iter().map(|d| count(d, "extent"));
                match &mut r.fill {
                    Some(f) => {
                        self.visit_expr_mut(f);
                        parse(quote_spanned!(span=> #rt::regs_filled::<#ty>(&[#(#dims),*], #f)))
                    }
                    None => parse(quote_spanned!(span=> #rt::regs::<#ty>(&[#(#dims),*]))),
                }
            }
            Node::InRole(ir) => {
                self.visit_block_mut(&mut ir.body);
                let (role, body) = (&ir.role, &ir.body);
                parse(quote_spanned!(span=> #rt::in_role(&#role, || #body)))
            }
            Node::Send(s) => {
                self.visit_expr_mut(&mut s.index);
                let idx = self.index(&s.index);
                let to = match &mut s.to {
                    Dest::Rank(r) => {
                        self.visit_expr_mut(r);
                        quote_spanned!(span=> #rt::Dest::one(#r))
                    }
                    Dest::All => quote_spanned!(span=> #rt::Dest::All),
                };
                self.place(&mut s.completes);
                let (base, done) = (&s.base, &s.completes);
                match &mut s.value {
                    SendValue::One(v) => {
                        self.visit_expr_mut(v);
                        parse(quote_spanned!(span=> #rt::send(&#base, #idx, #v, #to, &#done)))
                    }
                    SendValue::Lanes(vs) => {
                        for v in vs.iter_mut() {
                            self.visit_expr_mut(v);
                        }
                        let lanes = vs.iter().map(|v| {
                            let s = v.span();
                            let rt = crate::expand::rt(s);
                            quote_spanned!(s=> #rt::operand(#v))
                        });
                        parse(
                            quote_spanned!(span=> #rt::send_lanes(&#base, #idx, [#(#lanes),*], #to, &#done)),
                        )
                    }
                }
            }
            Node::BulkCopy(c) | Node::CpAsync(c) => {
                self.visit_expr_mut(&mut c.dst_index);
                self.visit_expr_mut(&mut c.src_index);
                if let Some(done) = &mut c.completes {
                    self.place(done);
                }
                let di = self.index(&c.dst_index);
                let si = self.index(&c.src_index);
                let (dst, src) = (&c.dst, &c.src);
                match (&c.bytes, &c.completes) {
                    (Some(bytes), Some(done)) => {
                        let bytes = count(bytes, "bytes");
                        let evict = c
                            .evict_first
                            .clone()
                            .unwrap_or_else(|| syn::parse_quote!(false));
                        parse(
                            quote_spanned!(span=> #rt::bulk_copy(&#dst, #di, &#src, #si, #bytes, &#done, #evict)),
                        )
                    }
                    _ => parse(quote_spanned!(span=> #rt::cp_async(&#dst, #di, &#src, #si))),
                }
            }
            Node::BulkStore(c) => {
                self.visit_expr_mut(&mut c.dst_index);
                self.visit_expr_mut(&mut c.src_index);
                let ti = self.index(&c.dst_index);
                let si = self.index(&c.src_index);
                let (dst, src) = (&c.dst, &c.src);
                let bytes = count(c.bytes.as_ref().expect("parsed with bytes"), "bytes");
                let evict = c
                    .evict_first
                    .clone()
                    .unwrap_or_else(|| syn::parse_quote!(false));
                parse(
                    quote_spanned!(span=> #rt::bulk_store(&#dst, #ti, &#src, #si, #bytes, #evict)),
                )
            }
            Node::Taken => parse(quote!(())),
        }
    }
}

impl VisitMut for Rewrite<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let new = match e {
            Expr::Macro(m) => crate::ast::node_index(&m.mac).map(|n| self.node(n)),
            Expr::If(i) if flow::is_marked(&i.attrs) => {
                take_mark(&mut i.attrs);
                Some(self.dispatch_if(i))
            }
            Expr::ForLoop(f) if flow::is_marked(&f.attrs) => {
                take_mark(&mut f.attrs);
                Some(self.dispatch_for(f))
            }
            Expr::While(w) if flow::is_marked(&w.attrs) => {
                take_mark(&mut w.attrs);
                Some(self.dispatch_while(w))
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Assign(a) if matches!(*a.left, Expr::Index(_)) => {
                self.visit_expr_mut(&mut a.right);
                let Expr::Index(ix) = &mut *a.left else {
                    unreachable!()
                };
                self.place(&mut ix.expr);
                self.visit_expr_mut(&mut ix.index);
                let span = ix.expr.span();
                let idx = self.index(&ix.index);
                let base = paren(&ix.expr);
                let v = &a.right;
                // Rust evaluates the assigned value before the place.
                Some(parse(quote_spanned!(span=> {
                    let __kda_v = #v;
                    #base.__kda_store(#idx, __kda_v)
                })))
            }
            Expr::Index(ix) if self.is_barrier_array(&ix.expr) => {
                self.visit_expr_mut(&mut ix.index);
                let span = ix.expr.span();
                let rt = rt(span);
                let (base, idx) = (&ix.expr, &ix.index);
                Some(parse(quote_spanned!(span=> #rt::bar_at(&#base, #idx))))
            }
            Expr::Index(ix) if !matches!(*ix.index, Expr::Range(_)) => {
                self.place(&mut ix.expr);
                self.visit_expr_mut(&mut ix.index);
                let span = ix.expr.span();
                let idx = self.index(&ix.index);
                let base = paren(&ix.expr);
                Some(parse(quote_spanned!(span=> #base.__kda_load(#idx))))
            }
            Expr::Reference(r) => {
                self.place(&mut r.expr);
                None
            }
            Expr::Field(f) => {
                self.place(&mut f.base);
                None
            }
            Expr::MethodCall(m) => {
                if matches!(&*m.receiver, Expr::Index(i) if self.is_handle(&i.expr)) {
                    self.visit_expr_mut(&mut m.receiver);
                } else {
                    self.place(&mut m.receiver);
                }
                for a in m.args.iter_mut() {
                    self.visit_expr_mut(a);
                }
                let method = m.method.to_string();
                if (LOADS.contains(&method.as_str()) || STORES.contains(&method.as_str()))
                    && let Some(first) = m.args.first_mut()
                    && matches!(first, Expr::Array(_))
                {
                    *first = parse(self.index(first));
                }
                None
            }
            _ => {
                visit_mut::visit_expr_mut(self, e);
                None
            }
        };
        if let Some(n) = new {
            *e = n;
        }
    }
}

/// Collects the locals a region assigns that it does not declare itself.
struct Assigned<'a> {
    nodes: &'a [Node],
    scopes: Vec<HashSet<String>>,
    out: Vec<Ident>,
}

impl Assigned<'_> {
    fn declared(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn declare(&mut self, pat: &Pat) {
        let mut names = Vec::new();
        pat_idents(pat, &mut names);
        let scope = self.scopes.last_mut().expect("a scope");
        for n in names {
            scope.insert(n.to_string());
        }
    }

    fn target(&mut self, e: &Expr) {
        match e {
            Expr::Tuple(t) => t.elems.iter().for_each(|x| self.target(x)),
            Expr::Paren(p) => self.target(&p.expr),
            _ => {
                if let Some(r) = flow::root(e)
                    && !self.declared(&r.to_string())
                    && !self.out.iter().any(|o| o == r)
                {
                    self.out.push(r.clone());
                }
            }
        }
    }

    fn scoped(&mut self, f: impl FnOnce(&mut Self)) {
        self.scopes.push(HashSet::new());
        f(self);
        self.scopes.pop();
    }
}

fn pat_idents(pat: &Pat, out: &mut Vec<Ident>) {
    match pat {
        Pat::Ident(pi) => {
            out.push(pi.ident.clone());
            if let Some((_, p)) = &pi.subpat {
                pat_idents(p, out);
            }
        }
        Pat::Type(pt) => pat_idents(&pt.pat, out),
        Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| pat_idents(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::Reference(r) => pat_idents(&r.pat, out),
        Pat::Or(o) => o.cases.iter().take(1).for_each(|p| pat_idents(p, out)),
        Pat::Paren(p) => pat_idents(&p.pat, out),
        _ => {}
    }
}

impl<'ast> Visit<'ast> for Assigned<'_> {
    fn visit_block(&mut self, b: &'ast Block) {
        self.scoped(|s| visit::visit_block(s, b));
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, e)) = &init.diverge {
                self.visit_expr(e);
            }
        }
        self.declare(&l.pat);
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        self.scoped(|s| {
            for p in &c.inputs {
                s.declare(p);
            }
            s.visit_expr(&c.body);
        });
    }

    fn visit_expr_for_loop(&mut self, f: &'ast ExprForLoop) {
        self.visit_expr(&f.expr);
        self.scoped(|s| {
            s.declare(&f.pat);
            s.visit_block(&f.body);
        });
    }

    fn visit_expr_if(&mut self, i: &'ast ExprIf) {
        self.scoped(|s| {
            s.visit_expr(&i.cond);
            s.visit_block(&i.then_branch);
        });
        if let Some((_, e)) = &i.else_branch {
            self.visit_expr(e);
        }
    }

    fn visit_expr_let(&mut self, l: &'ast syn::ExprLet) {
        self.visit_expr(&l.expr);
        self.declare(&l.pat);
    }

    fn visit_arm(&mut self, a: &'ast syn::Arm) {
        self.scoped(|s| {
            s.declare(&a.pat);
            if let Some((_, g)) = &a.guard {
                s.visit_expr(g);
            }
            s.visit_expr(&a.body);
        });
    }

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        self.target(&a.left);
        self.visit_expr(&a.left);
        self.visit_expr(&a.right);
    }

    fn visit_expr_binary(&mut self, b: &'ast ExprBinary) {
        if matches!(
            b.op,
            BinOp::AddAssign(_)
                | BinOp::SubAssign(_)
                | BinOp::MulAssign(_)
                | BinOp::DivAssign(_)
                | BinOp::RemAssign(_)
                | BinOp::BitXorAssign(_)
                | BinOp::BitAndAssign(_)
                | BinOp::BitOrAssign(_)
                | BinOp::ShlAssign(_)
                | BinOp::ShrAssign(_)
        ) {
            self.target(&b.left);
        }
        visit::visit_expr_binary(self, b);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(n) = crate::ast::node_index(m)
            && let Some(Node::InRole(ir)) = self.nodes.get(n)
        {
            self.visit_block(&ir.body);
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

//! The typed view of a kernel: its launch shape, comptime parameters, tensor
//! and scalar parameters, and the body with every DSL macro (`role!`,
//! `mbarrier!`, `shared!`, `regs!`, `in_role!`, `send!`, `bulk_copy!`,
//! `cp_async!`) parsed into a [`Node`]. Each node keeps the user's tokens, so
//! errors and the emitted builder calls carry the user's spans. In the body a
//! node is replaced by a placeholder `__kda_node!(n)` that later phases look
//! up in [`Kernel::nodes`].

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{
    Attribute, Block, Expr, ExprLit, FnArg, GenericArgument, Generics, Ident, ItemFn, Lit, Macro,
    Pat, PatType, PathArguments, ReturnType, Stmt, Token, Type, Visibility,
};

use crate::attr::{self, Launch};
use crate::ctxt::Ctxt;
use crate::symbol::*;

pub struct Kernel {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub ident: Ident,
    pub generics: Generics,
    pub launch: Launch,
    /// `#[comptime]` parameters, with that attribute removed: the generated
    /// builder function's parameters.
    pub comptime: Vec<PatType>,
    pub params: Vec<Param>,
    pub body: Block,
    pub nodes: Vec<Node>,
    /// Every declared name: parameters and `let x = role!/mbarrier!/shared!/regs!(..)`.
    pub decls: HashMap<String, Decl>,
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Decl {
    Tensor(usize),
    Scalar(usize),
    Role(usize),
    Barrier(usize),
    Buffer(usize),
    Regs(usize),
}

pub struct Param {
    pub ident: Ident,
    pub kind: ParamKind,
}

impl Param {
    /// The name in the kernel's ABI: `#[name = ".."]` where given, else
    /// the identifier.
    pub fn abi_name(&self) -> String {
        match &self.kind {
            ParamKind::Tensor(TensorParam { name: Some(n), .. }) => n.value(),
            _ => self.ident.to_string(),
        }
    }
}

// Nodes live for one expansion; their sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum ParamKind {
    Tensor(TensorParam),
    /// A scalar and its `#[when]` condition (declared only when it holds:
    /// `Option<Val<T>>` in the body).
    Scalar(ElemTy, Option<Expr>),
}

pub struct TensorParam {
    pub elem: ElemTy,
    pub dims: Vec<DimSpec>,
    pub strides: Option<Vec<DimSpec>>,
    pub produced: bool,
    pub align: Option<Expr>,
    /// Declared only when this comptime condition holds (`Option<Tensor>` in the body).
    pub when: Option<Expr>,
    /// `#[name = ".."]`: its name in the kernel's ABI, where it differs
    /// from the Rust identifier.
    pub name: Option<syn::LitStr>,
    /// Scheduler hints with their comptime conditions: `#[evict_first(c)]`
    /// (every global access of the tensor is L2 evict-first when `c` holds),
    /// `#[stage_through_shared(c)]` (its ready data goes through shared
    /// memory when `c` holds), `#[store_through_shared(c)]` (its stored tiles
    /// go through shared memory when `c` holds).
    pub hints: Vec<(Symbol, Expr)>,
}

/// One extent or stride of a tensor parameter.
// Nodes live for one expansion; their sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum DimSpec {
    /// A bare lowercase name: a symbol bound at launch.
    Sym(Ident),
    /// `_` (strides only): a symbol bound at launch, named `<tensor>.stride<d>`.
    Anon(Span),
    /// A number or `{expr}`: known when the kernel is traced.
    Const(Expr),
}

#[derive(Clone)]
pub struct ElemTy {
    /// `f32`, `bf16`, ..., or a type parameter of the kernel.
    pub name: String,
    /// Size; unknown for a type parameter.
    pub bytes: Option<u64>,
    pub span: Span,
}

pub enum Node {
    Role(RoleNode),
    Mbarrier(MbarrierNode),
    Shared(SharedNode),
    Regs(RegsNode),
    InRole(InRoleNode),
    Send(SendNode),
    BulkCopy(CopyNode),
    CpAsync(CopyNode),
    /// `bulk_store!(tensor[[..]] = buffer[i], bytes = .., evict_first)`:
    /// `dst` is the tensor, `src` the buffer.
    BulkStore(CopyNode),
    /// A node taken out of the list while a phase works on it.
    Taken,
}

pub struct RoleNode {
    pub span: Span,
    pub name: Option<Ident>,
    pub range: Expr,
    pub lo: Expr,
    pub hi: Expr,
    /// `regs = n`: the role's per-thread register budget (`setmaxnreg`).
    pub regs: Option<Expr>,
}

pub struct MbarrierNode {
    pub span: Span,
    pub name: Option<Ident>,
    pub arrivals: Expr,
    pub tx: Option<Expr>,
    pub roles: Option<Vec<Ident>>,
    pub count: Option<Expr>,
    /// `released`: every element's first wait passes at once (a ring's
    /// empty barriers, which the producer's first lap does not wait for).
    pub released: bool,
}

pub struct SharedNode {
    pub span: Span,
    pub name: Option<Ident>,
    pub elem: ElemTy,
    pub dims: Vec<Expr>,
    pub align: Option<Expr>,
    /// The guarding barrier (or ring): `guard = full`, or `guard = bars[t]`.
    pub guard: Option<Ident>,
    /// `t` of `guard = bars[t]`: one element of a ring guards the buffer.
    pub guard_index: Option<Expr>,
    pub roles: Option<Vec<Ident>>,
    /// `swizzle = 0 | 32 | 64 | 128`: a K-major wgmma operand tile.
    pub swizzle: Option<Expr>,
}

pub struct RegsNode {
    pub span: Span,
    pub ty: Type,
    pub dims: Vec<Expr>,
    pub fill: Option<Expr>,
}

pub struct InRoleNode {
    pub span: Span,
    pub role: Expr,
    pub body: Block,
}

pub struct SendNode {
    pub span: Span,
    /// The destination buffer (`inbox` in `inbox[lane]`).
    pub base: Expr,
    pub index: Expr,
    pub value: SendValue,
    pub to: Dest,
    pub completes: Expr,
}

// Nodes live for one expansion; their sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum SendValue {
    One(Expr),
    /// `[a, b, c, d]`: one vector store of consecutive elements.
    Lanes(Vec<Expr>),
}

// Nodes live for one expansion; their sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Dest {
    Rank(Expr),
    /// `to = all`: every CTA of the cluster.
    All,
}

/// `bulk_copy!(dst[i] = src[[..]], bytes = .., completes = .., evict_first)`
/// and `cp_async!(dst[i] = src[[..]])`.
pub struct CopyNode {
    pub span: Span,
    pub dst: Expr,
    pub dst_index: Expr,
    pub src: Expr,
    pub src_index: Expr,
    pub bytes: Option<Expr>,
    pub completes: Option<Expr>,
    /// `evict_first` (true) or `evict_first = <comptime bool>`.
    pub evict_first: Option<Expr>,
}

impl Node {
    pub fn span(&self) -> Span {
        match self {
            Node::Role(n) => n.span,
            Node::Mbarrier(n) => n.span,
            Node::Shared(n) => n.span,
            Node::Regs(n) => n.span,
            Node::InRole(n) => n.span,
            Node::Send(n) => n.span,
            Node::BulkCopy(n) | Node::CpAsync(n) | Node::BulkStore(n) => n.span,
            Node::Taken => Span::call_site(),
        }
    }
}

impl Kernel {
    pub fn from_syn(cx: &Ctxt, args: TokenStream, item: ItemFn) -> Kernel {
        let launch = attr::launch(cx, args);
        let sig = &item.sig;
        if let Some(t) = &sig.constness {
            cx.error_spanned_by(t, "a cluster kernel cannot be `const`");
        }
        if let Some(t) = &sig.asyncness {
            cx.error_spanned_by(t, "a cluster kernel cannot be `async`");
        }
        if let Some(t) = &sig.unsafety {
            cx.error_spanned_by(t, "a cluster kernel cannot be `unsafe`");
        }
        if let Some(abi) = &sig.abi {
            cx.error_spanned_by(abi, "a cluster kernel has no ABI of its own");
        }
        if let Some(v) = &sig.variadic {
            cx.error_spanned_by(v, "a cluster kernel cannot be variadic");
        }
        if let ReturnType::Type(_, ty) = &sig.output
            && !matches!(&**ty, Type::Tuple(t) if t.elems.is_empty())
        {
            cx.error_spanned_by(
                ty,
                "a cluster kernel returns nothing: its results are the tensors it stores to \
                     (the generated builder function returns the traced `kda::ir::Kernel`)",
            );
        }
        let generics: Vec<String> = sig
            .generics
            .type_params()
            .map(|t| t.ident.to_string())
            .collect();
        let mut comptime = Vec::new();
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(r) => {
                    cx.error_spanned_by(r, "a cluster kernel is a free function, not a method")
                }
                FnArg::Typed(pt) => {
                    let attrs = attr::param(cx, &pt.attrs);
                    if attrs.comptime.is_some() {
                        for (span, what) in
                            [(attrs.produced, "#[produced]"), (attrs.ready, "#[ready]")]
                        {
                            if let Some(s) = span {
                                cx.error_at(
                                    s,
                                    format!(
                                        "`{what}` marks a tensor parameter, not a comptime one"
                                    ),
                                );
                            }
                        }
                        for (hint, s, _) in &attrs.hints {
                            cx.error_at(
                                *s,
                                format!(
                                    "`#[{}]` applies to tensors ({}), not a comptime parameter",
                                    hint.name.name(),
                                    hint.does
                                ),
                            );
                        }
                        // A comptime parameter is Rust configuration, always
                        // present, never a launch parameter: these would be
                        // silently ignored.
                        if let Some(w) = &attrs.when {
                            cx.error_spanned_by(
                                w,
                                "`#[when]` declares a tensor or scalar parameter only where its condition holds; \
                                 a comptime parameter is always there (branch on it in the body instead)",
                            );
                        }
                        if let Some(a) = &attrs.align {
                            cx.error_spanned_by(
                                a,
                                "`#[align]` applies to tensors, not a comptime parameter",
                            );
                        }
                        if let Some(n) = &attrs.name {
                            cx.error_spanned_by(
                                n,
                                "`#[name]` applies to tensors, not a comptime parameter",
                            );
                        }
                        if let Some((s, _)) = &attrs.strides {
                            cx.error_at(
                                *s,
                                "`#[strides]` applies to tensors, not a comptime parameter",
                            );
                        }
                        let mut pt = pt.clone();
                        pt.attrs = attrs.other;
                        comptime.push(pt);
                    } else if let Some(p) = parse_param(cx, pt, attrs, &generics) {
                        params.push(p);
                    }
                }
            }
        }
        let mut decls = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            let d = match p.kind {
                ParamKind::Tensor(_) => Decl::Tensor(i),
                ParamKind::Scalar(..) => Decl::Scalar(i),
            };
            decls.insert(p.ident.to_string(), d);
        }
        let mut body = (*item.block).clone();
        let mut collect = Collect {
            cx,
            nodes: Vec::new(),
            decls: &mut decls,
            lets: Vec::new(),
            generics,
        };
        collect.visit_block_mut(&mut body);
        let nodes = collect.nodes;
        Kernel {
            attrs: item.attrs,
            vis: item.vis,
            ident: item.sig.ident,
            generics: item.sig.generics,
            launch,
            comptime,
            params,
            body,
            nodes,
            decls,
        }
    }

    pub fn decl(&self, name: &Ident) -> Option<Decl> {
        self.decls.get(&name.to_string()).copied()
    }
}

/// The index in a placeholder `__kda_node!(n)`.
pub fn node_index(mac: &Macro) -> Option<usize> {
    if mac.path != NODE {
        return None;
    }
    syn::parse2::<syn::LitInt>(mac.tokens.clone())
        .ok()?
        .base10_parse()
        .ok()
}

fn elem_ty(cx: &Ctxt, ty: &Type, what: &str, generics: &[String]) -> Option<ElemTy> {
    let found = match ty {
        Type::Path(p) if p.qself.is_none() => p.path.get_ident().and_then(|id| {
            let known = ELEMS.iter().find(|(n, _)| id == n);
            let span = id.span();
            match known {
                Some(&(name, bytes)) => Some(ElemTy {
                    name: name.to_string(),
                    bytes: Some(bytes),
                    span,
                }),
                None if generics.contains(&id.to_string()) => Some(ElemTy {
                    name: id.to_string(),
                    bytes: None,
                    span,
                }),
                None => None,
            }
        }),
        _ => None,
    };
    if found.is_none() {
        let names: Vec<&str> = ELEMS.iter().map(|(n, _)| *n).collect();
        cx.error_spanned_by(
            ty,
            format!(
                "unknown {what} element type `{}`; expected one of {} (or a type parameter of the kernel)",
                quote::ToTokens::to_token_stream(ty).to_string().replace(' ', ""),
                names.join(", ")
            ),
        );
    }
    found
}

fn dim_spec(cx: &Ctxt, e: &Expr) -> Option<DimSpec> {
    match e {
        Expr::Infer(i) => Some(DimSpec::Anon(i.underscore_token.span)),
        Expr::Lit(ExprLit {
            lit: Lit::Int(_), ..
        })
        | Expr::Block(_) => Some(DimSpec::Const(e.clone())),
        Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            let id = p.path.get_ident().unwrap();
            dim_ident(cx, id)
        }
        _ => {
            cx.error_spanned_by(
                e,
                "expected an extent: a number, `{expr}` (comptime) or a lowercase name (symbolic, bound at launch)",
            );
            None
        }
    }
}

fn dim_ident(cx: &Ctxt, id: &Ident) -> Option<DimSpec> {
    let s = id.to_string();
    if s.chars().any(|c| c.is_ascii_lowercase()) {
        Some(DimSpec::Sym(id.clone()))
    } else {
        cx.error_spanned_by(
            id,
            format!(
                "`{s}` looks like a constant: write `{{{s}}}` for an extent known when the kernel is traced; \
                 a bare lowercase name (`rows`) is a symbolic extent bound at launch"
            ),
        );
        None
    }
}

fn parse_param(
    cx: &Ctxt,
    pt: &PatType,
    attrs: attr::ParamAttrs,
    generics: &[String],
) -> Option<Param> {
    let ident = match &*pt.pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.mutability.is_none() && pi.subpat.is_none() => {
            pi.ident.clone()
        }
        other => {
            cx.error_spanned_by(other, "a kernel parameter is a plain name");
            return None;
        }
    };
    let ty = &*pt.ty;
    let tensor = match ty {
        Type::Path(p)
            if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == TENSOR) =>
        {
            Some(&p.path.segments.last().unwrap().arguments)
        }
        _ => None,
    };
    if let Some(args) = tensor {
        let PathArguments::AngleBracketed(args) = args else {
            cx.error_spanned_by(
                ty,
                "expected `Tensor<elem, extents..>`, e.g. `Tensor<f32, rows, 128>`",
            );
            return None;
        };
        let mut it = args.args.iter();
        let elem = match it.next() {
            Some(GenericArgument::Type(t)) => elem_ty(cx, t, "tensor", generics),
            _ => {
                cx.error_spanned_by(
                    args,
                    "expected `Tensor<elem, extents..>`, e.g. `Tensor<f32, rows, 128>`",
                );
                None
            }
        };
        let mut dims = Vec::new();
        for a in it {
            let d = match a {
                GenericArgument::Type(Type::Path(p))
                    if p.qself.is_none() && p.path.get_ident().is_some() =>
                {
                    dim_ident(cx, p.path.get_ident().unwrap())
                }
                GenericArgument::Const(e) => dim_spec(cx, e),
                other => {
                    cx.error_spanned_by(
                        other,
                        "expected an extent: a number, `{expr}` (comptime) or a lowercase name (symbolic, bound at launch)",
                    );
                    None
                }
            };
            dims.extend(d);
        }
        if args.args.len() < 2 {
            cx.error_spanned_by(
                args,
                "a tensor has at least one extent: `Tensor<f32, rows, 128>`",
            );
        }
        let strides = attrs.strides.map(|(span, ss)| {
            if ss.len() + 1 != args.args.len() {
                cx.error_at(
                    span,
                    format!(
                        "{} strides for a tensor with {} dimensions",
                        ss.len(),
                        args.args.len() - 1
                    ),
                );
            }
            ss.iter().filter_map(|e| dim_spec(cx, e)).collect()
        });
        if let (Some(p), Some(_)) = (attrs.produced, attrs.ready) {
            cx.error_at(p, "a tensor is either `#[produced]` (by the preceding launch) or `#[ready]` (at launch), not both");
        }
        return Some(Param {
            ident,
            kind: ParamKind::Tensor(TensorParam {
                elem: elem?,
                dims,
                strides,
                produced: attrs.produced.is_some(),
                align: attrs.align,
                when: attrs.when,
                name: attrs.name,
                hints: attrs
                    .hints
                    .into_iter()
                    .map(|(h, _, c)| (h.name, c))
                    .collect(),
            }),
        });
    }
    let scalar = match ty {
        Type::Path(p) if p.qself.is_none() => p.path.get_ident().and_then(|id| {
            SCALARS.iter().find(|n| id == *n).map(|&name| ElemTy {
                name: name.to_string(),
                bytes: ELEMS.iter().find(|(n, _)| *n == name).map(|e| e.1),
                span: id.span(),
            })
        }),
        _ => None,
    };
    let Some(scalar) = scalar else {
        cx.error_spanned_by(
            ty,
            format!(
                "`{}` is not a kernel parameter type: kernel parameters are tensors (`Tensor<f32, rows, 128>`) \
                 or scalars ({}); if `{ident}` is comptime configuration, mark it `#[comptime]`",
                quote::ToTokens::to_token_stream(ty).to_string().replace(' ', ""),
                SCALARS.join(", ")
            ),
        );
        return None;
    };
    for (span, what) in [(attrs.produced, "#[produced]"), (attrs.ready, "#[ready]")] {
        if let Some(s) = span {
            cx.error_at(
                s,
                format!("`{what}` applies to tensors; a scalar is passed by value at launch"),
            );
        }
    }
    if let Some(a) = &attrs.align {
        cx.error_spanned_by(a, "`#[align]` applies to tensors");
    }
    if let Some(n) = &attrs.name {
        cx.error_spanned_by(
            n,
            "`#[name]` applies to tensors (a scalar's name is its identifier)",
        );
    }
    if let Some((s, _)) = &attrs.strides {
        cx.error_at(*s, "`#[strides]` applies to tensors");
    }
    for (hint, s, _) in &attrs.hints {
        cx.error_at(
            *s,
            format!(
                "`#[{}]` applies to tensors ({}); `{ident}` is a scalar, passed by value at launch",
                hint.name.name(),
                hint.does
            ),
        );
    }
    Some(Param {
        ident,
        kind: ParamKind::Scalar(scalar, attrs.when),
    })
}

/// Replaces each DSL macro in the body with a placeholder and records its node.
struct Collect<'a> {
    cx: &'a Ctxt,
    nodes: Vec<Node>,
    decls: &'a mut HashMap<String, Decl>,
    /// Names of the enclosing `let` bindings (a declaration takes the innermost).
    lets: Vec<Option<Ident>>,
    /// Type parameters of the kernel (usable as element types).
    generics: Vec<String>,
}

fn let_name(pat: &Pat) -> Option<Ident> {
    match pat {
        Pat::Ident(pi) => Some(pi.ident.clone()),
        Pat::Type(pt) => let_name(&pt.pat),
        _ => None,
    }
}

fn is_dsl(mac: &Macro) -> bool {
    [
        ROLE, MBARRIER, SHARED, REGS, IN_ROLE, SEND, BULK_COPY, CP_ASYNC, BULK_STORE,
    ]
    .iter()
    .any(|s| mac.path == *s)
}

fn placeholder(n: usize, span: Span) -> Expr {
    let lit = syn::LitInt::new(&n.to_string(), span);
    let node = Ident::new(NODE.name(), span);
    syn::parse_quote_spanned!(span=> #node!(#lit))
}

impl VisitMut for Collect<'_> {
    fn visit_local_mut(&mut self, local: &mut syn::Local) {
        self.visit_pat_mut(&mut local.pat);
        // `let (q, k) = (shared!(..), shared!(..));` names each element.
        if let (Pat::Tuple(pt), Some(init)) = (&local.pat, &mut local.init)
            && let Expr::Tuple(te) = &mut *init.expr
            && pt.elems.len() == te.elems.len()
        {
            for (p, e) in pt.elems.iter().zip(te.elems.iter_mut()) {
                self.lets.push(let_name(p));
                self.visit_expr_mut(e);
                self.lets.pop();
            }
            return;
        }
        self.lets.push(let_name(&local.pat));
        if let Some(init) = &mut local.init {
            self.visit_expr_mut(&mut init.expr);
            if let Some((_, e)) = &mut init.diverge {
                self.visit_expr_mut(e);
            }
        }
        self.lets.pop();
    }

    fn visit_stmt_mut(&mut self, stmt: &mut Stmt) {
        if let Stmt::Macro(m) = stmt
            && is_dsl(&m.mac)
        {
            let expr = Expr::Macro(syn::ExprMacro {
                attrs: m.attrs.clone(),
                mac: m.mac.clone(),
            });
            let semi = m.semi_token.or_else(|| Some(Token![;](m.mac.span())));
            *stmt = Stmt::Expr(expr, semi);
        }
        visit_mut::visit_stmt_mut(self, stmt);
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Macro(m) = e
            && is_dsl(&m.mac)
        {
            let span = m.mac.path.span();
            if let Some(node) = self.node(&m.mac) {
                let n = self.nodes.len();
                self.nodes.push(node);
                *e = placeholder(n, span);
            } else {
                // Parse error (reported): a stub of no particular type.
                *e = syn::parse_quote_spanned!(span=> ::core::unreachable!());
            }
            return;
        }
        visit_mut::visit_expr_mut(self, e);
    }
}

type Args = Punctuated<Expr, Token![,]>;

/// A `key = value` argument or a bare `flag`.
enum Arg {
    Key(Ident, Expr),
    Flag(Ident),
    Other(Expr),
}

fn classify(e: Expr) -> Arg {
    match e {
        Expr::Assign(a) => match &*a.left {
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                Arg::Key(p.path.get_ident().unwrap().clone(), *a.right)
            }
            _ => Arg::Other(Expr::Assign(a)),
        },
        Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            Arg::Flag(p.path.get_ident().unwrap().clone())
        }
        other => Arg::Other(other),
    }
}

fn ident_list(cx: &Ctxt, e: &Expr, what: &str) -> Option<Vec<Ident>> {
    let Expr::Array(a) = e else {
        cx.error_spanned_by(e, format!("expected `{what} = [name, ..]`"));
        return None;
    };
    let mut out = Vec::new();
    for el in &a.elems {
        match el {
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                out.push(p.path.get_ident().unwrap().clone())
            }
            other => cx.error_spanned_by(other, format!("expected a name in `{what} = [..]`")),
        }
    }
    Some(out)
}

/// An integer-valued argument: reject literals of the wrong kind now.
fn count_arg(cx: &Ctxt, e: Expr, what: &str) -> Expr {
    if let Expr::Lit(ExprLit { lit, .. }) = &e {
        let kind = match lit {
            Lit::Int(_) => None,
            Lit::Str(_) => Some("a string"),
            Lit::Float(_) => Some("a float"),
            Lit::Bool(_) => Some("a bool"),
            _ => Some("a literal of another kind"),
        };
        if let Some(kind) = kind {
            cx.error_spanned_by(&e, format!("`{what}` is an integer count, found {kind}"));
        }
    }
    e
}

fn single_ident(e: &Expr) -> Option<Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
        _ => None,
    }
}

/// `[elem; d0, d1, ..]` then `, key = value`s.
fn parse_shape(input: ParseStream) -> syn::Result<(Type, Vec<Expr>, Args)> {
    let content;
    syn::bracketed!(content in input);
    let ty: Type = content.parse()?;
    content.parse::<Token![;]>()?;
    let dims = Punctuated::<Expr, Token![,]>::parse_separated_nonempty(&content)?;
    if !content.is_empty() {
        return Err(content.error("expected `,` or `]`"));
    }
    let rest = if input.is_empty() {
        Punctuated::new()
    } else {
        input.parse::<Token![,]>()?;
        Args::parse_terminated(input)?
    };
    Ok((ty, dims.into_iter().collect(), rest))
}

impl Collect<'_> {
    fn declare(&mut self, name: &Option<Ident>, decl: Decl) {
        if let Some(n) = name {
            self.decls.entry(n.to_string()).or_insert(decl);
        }
    }

    fn unknown_key(&self, key: &Ident, mac: &str, expected: &str) {
        self.cx.error_spanned_by(
            key,
            format!("unknown `{mac}!` argument `{key}`; expected {expected}"),
        );
    }

    fn node(&mut self, mac: &Macro) -> Option<Node> {
        let span = mac.path.span();
        let name = self.lets.last().cloned().flatten();
        let n = self.nodes.len();
        let what = mac.path.get_ident().unwrap().to_string();
        if mac.path == SHARED || mac.path == REGS {
            let (ty, dims, rest) = match parse_shape.parse2(mac.tokens.clone()) {
                Ok(x) => x,
                Err(e) => {
                    self.cx.error_at(
                        e.span(),
                        format!(
                            "expected `{what}!([elem; extents..], ..)`, e.g. `{what}!([f32; 128])`"
                        ),
                    );
                    return None;
                }
            };
            let dims: Vec<Expr> = dims
                .into_iter()
                .map(|d| count_arg(self.cx, d, "extent"))
                .collect();
            if mac.path == SHARED {
                let elem = elem_ty(self.cx, &ty, "shared buffer", &self.generics);
                let (mut align, mut guard, mut guard_index, mut roles) = (None, None, None, None);
                let mut swizzle = None;
                for a in rest {
                    match classify(a) {
                        Arg::Key(k, v) if k == ALIGN => {
                            align = Some(count_arg(self.cx, v, "align"))
                        }
                        Arg::Key(k, v) if k == GUARD => match (&v, single_ident(&v)) {
                            (_, Some(g)) => guard = Some(g),
                            (Expr::Index(ix), None) if single_ident(&ix.expr).is_some() => {
                                guard = single_ident(&ix.expr);
                                guard_index = Some((*ix.index).clone());
                            }
                            _ => self.cx.error_spanned_by(
                                v,
                                "expected `guard = <mbarrier name>` or `guard = <ring>[<element>]`",
                            ),
                        },
                        Arg::Key(k, v) if k == ROLES => roles = ident_list(self.cx, &v, "roles"),
                        Arg::Key(k, v) if k == SWIZZLE => {
                            swizzle = Some(count_arg(self.cx, v, "swizzle"))
                        }
                        Arg::Key(k, _) | Arg::Flag(k) => {
                            self.unknown_key(&k, "shared", "`align`, `guard`, `roles` or `swizzle`")
                        }
                        Arg::Other(e) => self.cx.error_spanned_by(e, "expected `key = value`"),
                    }
                }
                self.declare(&name, Decl::Buffer(n));
                return Some(Node::Shared(SharedNode {
                    span,
                    name,
                    elem: elem?,
                    dims,
                    align,
                    guard,
                    guard_index,
                    roles,
                    swizzle,
                }));
            }
            let mut fill = None;
            for a in rest {
                match classify(a) {
                    Arg::Key(k, v) if k == FILL => fill = Some(v),
                    Arg::Key(k, _) | Arg::Flag(k) => self.unknown_key(&k, "regs", "`fill`"),
                    Arg::Other(e) => self.cx.error_spanned_by(e, "expected `fill = <value>`"),
                }
            }
            self.declare(&name, Decl::Regs(n));
            return Some(Node::Regs(RegsNode {
                span,
                ty,
                dims,
                fill,
            }));
        }
        if mac.path == IN_ROLE {
            let parsed = (|input: ParseStream| {
                let role: Expr = input.parse()?;
                input.parse::<Token![,]>()?;
                let body: Block = input.parse()?;
                input.parse::<Option<Token![,]>>()?;
                Ok((role, body))
            })
            .parse2(mac.tokens.clone());
            return match parsed {
                Ok((role, mut body)) => {
                    self.lets.push(None);
                    self.visit_block_mut(&mut body);
                    self.lets.pop();
                    Some(Node::InRole(InRoleNode { span, role, body }))
                }
                Err(e) => {
                    self.cx
                        .error_at(e.span(), "expected `in_role!(role, { .. })`");
                    None
                }
            };
        }
        let args = match Args::parse_terminated.parse2(mac.tokens.clone()) {
            Ok(a) => a,
            Err(e) => {
                self.cx
                    .error_at(e.span(), format!("cannot parse the arguments of `{what}!`"));
                return None;
            }
        };
        let mut args = args.into_iter();
        if mac.path == ROLE {
            let first = args.next();
            let mut regs = None;
            for a in args {
                match classify(a) {
                    Arg::Key(k, v) if k == REGS && regs.is_none() => {
                        regs = Some(count_arg(self.cx, v, "regs"))
                    }
                    Arg::Key(k, _) if k == REGS => {
                        self.cx.error_spanned_by(&k, "duplicate `regs`")
                    }
                    Arg::Key(k, _) | Arg::Flag(k) => self.unknown_key(&k, "role", "`regs`"),
                    Arg::Other(e) => self.cx.error_spanned_by(
                        e,
                        "`role!` takes one thread range and optionally a register budget: `role!(0..128)`, `role!(128..384, regs = 232)`",
                    ),
                }
            }
            return match first {
                Some(Expr::Range(r))
                    if matches!(r.limits, syn::RangeLimits::HalfOpen(_))
                        && r.start.is_some()
                        && r.end.is_some() =>
                {
                    let lo = count_arg(
                        self.cx,
                        (**r.start.as_ref().unwrap()).clone(),
                        "first thread",
                    );
                    let hi = count_arg(self.cx, (**r.end.as_ref().unwrap()).clone(), "end thread");
                    self.declare(&name, Decl::Role(n));
                    Some(Node::Role(RoleNode {
                        span,
                        name,
                        range: Expr::Range(r),
                        lo,
                        hi,
                        regs,
                    }))
                }
                Some(other) => {
                    self.cx.error_spanned_by(other, "expected a half-open thread range: `role!(first..end)`, e.g. `role!(0..128)`");
                    None
                }
                None => {
                    self.cx.error_at(span, "expected a half-open thread range: `role!(first..end)`, e.g. `role!(0..128)`");
                    None
                }
            };
        }
        if mac.path == MBARRIER {
            let (mut arrivals, mut tx, mut roles, mut count) = (None, None, None, None);
            let mut released = false;
            for a in args {
                match classify(a) {
                    Arg::Key(k, v) if k == ARRIVALS => {
                        arrivals = Some(count_arg(self.cx, v, "arrivals"))
                    }
                    Arg::Key(k, v) if k == TX => tx = Some(count_arg(self.cx, v, "tx")),
                    Arg::Key(k, v) if k == ROLES => roles = ident_list(self.cx, &v, "roles"),
                    Arg::Key(k, v) if k == COUNT => count = Some(count_arg(self.cx, v, "count")),
                    Arg::Flag(k) if k == RELEASED => released = true,
                    Arg::Key(k, _) | Arg::Flag(k) => self.unknown_key(
                        &k,
                        "mbarrier",
                        "`arrivals`, `tx`, `roles`, `count` or `released`",
                    ),
                    Arg::Other(e) => self.cx.error_spanned_by(e, "expected `key = value`"),
                }
            }
            let Some(arrivals) = arrivals else {
                self.cx.error_at(
                    span,
                    "missing `arrivals = <count>`: an mbarrier declares how many arrivals complete a phase",
                );
                return None;
            };
            self.declare(&name, Decl::Barrier(n));
            return Some(Node::Mbarrier(MbarrierNode {
                span,
                name,
                arrivals,
                tx,
                roles,
                count,
                released,
            }));
        }
        if mac.path == SEND {
            let Some(Expr::Assign(first)) = args.next() else {
                self.cx.error_at(span, "expected `send!(buffer[index] = value, to = <rank | all>, completes = <mbarrier>)`");
                return None;
            };
            let Expr::Index(target) = *first.left else {
                self.cx
                    .error_spanned_by(first.left, "expected the destination `buffer[index]`");
                return None;
            };
            let value = match *first.right {
                Expr::Array(a) => {
                    let lanes: Vec<Expr> = a.elems.into_iter().collect();
                    if ![2, 4, 8].contains(&lanes.len()) {
                        self.cx.error_at(
                            span,
                            format!("a vector send has 2, 4 or 8 lanes, found {}", lanes.len()),
                        );
                    }
                    SendValue::Lanes(lanes)
                }
                v => SendValue::One(v),
            };
            let (mut to, mut completes) = (None, None);
            for a in args {
                match classify(a) {
                    Arg::Key(k, v) if k == TO => {
                        to = Some(match single_ident(&v) {
                            Some(id) if id == ALL => Dest::All,
                            _ => Dest::Rank(v),
                        })
                    }
                    Arg::Key(k, v) if k == COMPLETES => completes = Some(v),
                    Arg::Key(k, _) | Arg::Flag(k) => {
                        self.unknown_key(&k, "send", "`to` or `completes`")
                    }
                    Arg::Other(e) => self.cx.error_spanned_by(e, "expected `key = value`"),
                }
            }
            let (Some(to), Some(completes)) = (to, completes) else {
                self.cx.error_at(
                    span,
                    "a DSMEM send names its destination CTA(s) and the mbarrier it completes: \
                     `send!(buffer[index] = value, to = <rank | all>, completes = <mbarrier>)`",
                );
                return None;
            };
            return Some(Node::Send(SendNode {
                span,
                base: *target.expr,
                index: *target.index,
                value,
                to,
                completes,
            }));
        }
        // bulk_copy!, bulk_store! and cp_async!
        let store = mac.path == BULK_STORE;
        let bulk = mac.path == BULK_COPY;
        let usage = if store {
            "`bulk_store!(tensor[[..]] = buffer[index], bytes = <n>)`"
        } else if bulk {
            "`bulk_copy!(buffer[index] = tensor[[..]], bytes = <n>, completes = <mbarrier>)`"
        } else {
            "`cp_async!(buffer[index] = tensor[[..]])`"
        };
        let Some(Expr::Assign(first)) = args.next() else {
            self.cx.error_at(span, format!("expected {usage}"));
            return None;
        };
        let (Expr::Index(dst), Expr::Index(src)) = (*first.left, *first.right) else {
            self.cx.error_at(span, format!("expected {usage}"));
            return None;
        };
        let (mut bytes, mut completes, mut evict_first) = (None, None, None);
        for a in args {
            match classify(a) {
                Arg::Key(k, v) if (bulk || store) && k == BYTES => {
                    bytes = Some(count_arg(self.cx, v, "bytes"))
                }
                Arg::Key(k, v) if bulk && k == COMPLETES => completes = Some(v),
                Arg::Flag(k) if (bulk || store) && k == EVICT_FIRST => {
                    evict_first = Some(syn::parse_quote_spanned!(k.span()=> true))
                }
                Arg::Key(k, v) if (bulk || store) && k == EVICT_FIRST => evict_first = Some(v),
                Arg::Key(k, _) | Arg::Flag(k) => {
                    if store {
                        self.unknown_key(&k, "bulk_store", "`bytes` or `evict_first`")
                    } else if bulk {
                        self.unknown_key(&k, "bulk_copy", "`bytes`, `completes` or `evict_first`")
                    } else {
                        self.unknown_key(&k, "cp_async", "no arguments after the copy")
                    }
                }
                Arg::Other(e) => self.cx.error_spanned_by(e, "expected `key = value`"),
            }
        }
        if store && bytes.is_none() {
            self.cx
                .error_at(span, format!("a bulk store names its size: {usage}"));
            return None;
        }
        if bulk && (bytes.is_none() || completes.is_none()) {
            self.cx.error_at(
                span,
                format!("a bulk copy names its size and the mbarrier it completes: {usage}"),
            );
            return None;
        }
        let node = CopyNode {
            span,
            dst: *dst.expr,
            dst_index: *dst.index,
            src: *src.expr,
            src_index: *src.index,
            bytes,
            completes,
            evict_first,
        };
        Some(if store {
            Node::BulkStore(node)
        } else if bulk {
            Node::BulkCopy(node)
        } else {
            Node::CpAsync(node)
        })
    }
}

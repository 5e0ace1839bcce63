//! Token generation for the typed launch: beside the builder function
//! `name(..)`, a module `name` with `Args`, one field per kernel parameter
//! (device tensors typed by element and rank, scalars by type, `Option` for
//! `#[when]` tensors), whose `launch` binds them *by name* to the kernel the
//! module was loaded from (`kda::runtime::typed`). The parameter list is
//! written once, in the signature.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{GenericParam, Generics, Ident, PatType, Visibility};

use crate::ast::{DimSpec, Param, ParamKind};

fn dims_text(dims: &[DimSpec]) -> Vec<String> {
    dims.iter()
        .map(|d| match d {
            DimSpec::Sym(s) => s.to_string(),
            DimSpec::Anon(_) => "_".to_string(),
            DimSpec::Const(e) => quote!(#e).to_string().replace(' ', ""),
        })
        .collect()
}

/// The `Args` module of kernel `ident`; nothing for a kernel without
/// tensor parameters (its `Args` would borrow nothing).
pub fn module(
    vis: &Visibility,
    ident: &Ident,
    generics: &Generics,
    params: &[Param],
    comptime: &[PatType],
) -> TokenStream {
    if !params
        .iter()
        .any(|p| matches!(p.kind, ParamKind::Tensor(_)))
    {
        return TokenStream::new();
    }
    let call = Span::call_site();
    let rt = quote_spanned!(call=> ::kda::runtime);
    // Type parameters that are tensor element types become parameters of
    // `Args`, bound by `TensorType` (a concrete element or `AnyElem`).
    let type_params: Vec<Ident> = generics
        .params
        .iter()
        .filter_map(|g| match g {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .filter(|t| {
            params.iter().any(|p| match &p.kind {
                ParamKind::Tensor(tp) => *t == tp.elem.name,
                ParamKind::Scalar(..) => false,
            })
        })
        .collect();
    // The device parameter, renamed where the kernel has a type `D` of its own.
    let d = if type_params.iter().any(|t| t == "D") {
        format_ident!("__KdaDevice")
    } else {
        format_ident!("D")
    };
    let mut fields = Vec::new();
    let mut tensors = Vec::new();
    let mut scalars = Vec::new();
    // The owning `Tensors` struct: its fields, and how `args` fills `Args`.
    let mut owned = Vec::new();
    let mut borrow = Vec::new();
    let mut scalar_params = Vec::new();
    for p in params {
        let id = Ident::new(&p.ident.to_string(), call);
        let name = p.abi_name();
        match &p.kind {
            ParamKind::Tensor(t) => {
                let elem = match t.elem.name.as_str() {
                    "bf16" => quote!(::kda::dsl::bf16),
                    other => {
                        let e = format_ident!("{}", other);
                        quote!(#e)
                    }
                };
                let rank = t.dims.len();
                let mut doc = format!(
                    "`Tensor<{}, {}>`",
                    t.elem.name,
                    dims_text(&t.dims).join(", ")
                );
                if let Some(s) = &t.strides {
                    doc.push_str(&format!(", strides `[{}]`", dims_text(s).join(", ")));
                }
                if t.produced {
                    doc.push_str("; produced by the preceding launch");
                }
                if let Some(a) = &t.align {
                    doc.push_str(&format!(", aligned to {}", quote!(#a)));
                }
                let ty = quote!(#rt::TensorArg<'a, #d, #elem, #rank>);
                let owned_ty = quote!(#rt::DeviceTensor<#d, #elem, #rank>);
                if t.when.is_some() {
                    owned.push(quote! {
                        #[doc = #doc]
                        pub #id: ::core::option::Option<#owned_ty>,
                    });
                    borrow.push(quote!(#id: self.#id.as_ref().map(|t| t.arg()),));
                } else {
                    owned.push(quote! {
                        #[doc = #doc]
                        pub #id: #owned_ty,
                    });
                    borrow.push(quote!(#id: self.#id.arg(),));
                }
                if t.when.is_some() {
                    doc.push_str("; `Some` only where the kernel's `#[when]` condition holds");
                    fields.push(quote! {
                        #[doc = #doc]
                        pub #id: ::core::option::Option<#ty>,
                    });
                    tensors.push(quote!((#name, self.#id.as_ref().map(|t| t.erase()))));
                } else {
                    fields.push(quote! {
                        #[doc = #doc]
                        pub #id: #ty,
                    });
                    tensors.push(quote!((#name, ::core::option::Option::Some(self.#id.erase()))));
                }
            }
            ParamKind::Scalar(s, _) => {
                let ty = format_ident!("{}", s.name);
                let doc = format!(
                    "Scalar `{}` (a `#[when]` scalar binds by name only where the kernel declares it).",
                    s.name
                );
                fields.push(quote! {
                    #[doc = #doc]
                    pub #id: #ty,
                });
                scalars.push(quote!((#name, #rt::typed::IntoScalarArg::into_scalar_arg(self.#id))));
                borrow.push(quote!(#id,));
                scalar_params.push(quote!(#id: #ty));
            }
        }
    }
    let descriptor = descriptor(generics, params, comptime);
    let doc = format!(
        "Typed launch of the kernel built by [`{ident}`](fn@{ident}): its parameters as named, typed fields."
    );
    let args_doc = format!(
        "The arguments of one `{ident}` launch, checked against the loaded kernel's declarations by name."
    );
    let tensors_doc = format!(
        "The device tensors of a `{ident}` launch, owned (uploaded with `DeviceTensor::upload`, `zeros`, ..)."
    );
    quote! {
        #[doc = #doc]
        #[allow(non_snake_case, dead_code)]
        #vis mod #ident {
            #descriptor

            #[doc = #args_doc]
            pub struct Args<'a, #d: #rt::Device, #(#type_params: #rt::TensorType),*> {
                #(#fields)*
            }

            impl<'a, #d: #rt::Device, #(#type_params: #rt::TensorType),*> ::core::clone::Clone for Args<'a, #d, #(#type_params),*> {
                fn clone(&self) -> Self {
                    *self
                }
            }

            impl<'a, #d: #rt::Device, #(#type_params: #rt::TensorType),*> ::core::marker::Copy for Args<'a, #d, #(#type_params),*> {}

            #[doc = #tensors_doc]
            pub struct Tensors<#d: #rt::Device, #(#type_params: #rt::TensorType),*> {
                #(#owned)*
            }

            impl<#d: #rt::Device, #(#type_params: #rt::TensorType),*> Tensors<#d, #(#type_params),*> {
                /// The launch arguments: every tensor whole, with these scalars
                /// (struct update syntax replaces some: `Args { x: view, ..t.args() }`).
                pub fn args(&self, #(#scalar_params),*) -> Args<'_, #d, #(#type_params),*> {
                    Args { #(#borrow)* }
                }
            }

            impl<'a, #d: #rt::Device, #(#type_params: #rt::TensorType),*> Args<'a, #d, #(#type_params),*> {
                /// The tensor arguments by parameter name (`None`: an absent `#[when]` tensor).
                pub fn tensors(&self) -> ::std::vec::Vec<(&'static str, ::core::option::Option<#rt::ErasedArg<'a, #d>>)> {
                    ::std::vec![#(#tensors),*]
                }

                /// The scalar arguments by parameter name.
                pub fn scalars(&self) -> ::std::vec::Vec<(&'static str, #rt::ScalarArg)> {
                    ::std::vec![#(#scalars),*]
                }

                /// Match the arguments to `kernel` (shapes, strides, alignment,
                /// element types): buffers, symbol values and scalars in its order.
                pub fn bind(&self, kernel: &::kda::ir::Kernel) -> ::core::result::Result<#rt::typed::Bound<'a, #d>, #rt::RuntimeError> {
                    #rt::typed::bind::<#d>(kernel, &self.tensors(), &self.scalars())
                }

                /// Launch `module` (loaded on `dev`) with these arguments.
                pub fn launch(&self, dev: &#d, module: &<#d as #rt::Device>::Module, launch: #rt::Launch) -> ::core::result::Result<(), #rt::RuntimeError> {
                    #rt::typed::launch(dev, module, launch, &self.tensors(), &self.scalars())
                }
            }
        }
    }
}

/// The element or scalar type `name` as a descriptor (`ElemDesc`).
fn elem_desc(name: &str) -> TokenStream {
    let d = quote!(::kda::ir::desc);
    match kda_scalar(name) {
        Some(v) => {
            let v = format_ident!("{}", v);
            quote!(#d::ElemDesc::Fixed(::kda::ir::Scalar::#v))
        }
        None => quote!(#d::ElemDesc::Generic(#name)),
    }
}

fn kda_scalar(name: &str) -> Option<&'static str> {
    Some(match name {
        "f32" => "F32",
        "bf16" => "BF16",
        "i32" => "I32",
        "u32" => "U32",
        "i64" => "I64",
        "u64" => "U64",
        _ => return None,
    })
}

/// `PARAMS` (the signature's parameters, in order) and `params(..)` (one
/// configuration's, `#[when]` conditions evaluated on the comptime
/// arguments): the kernel's descriptor, which host code, validators and
/// bindings read instead of restating the parameter list.
fn descriptor(generics: &Generics, params: &[Param], comptime: &[PatType]) -> TokenStream {
    let d = quote!(::kda::ir::desc);
    let mut entries = Vec::new();
    let mut pushes = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let name = p.abi_name();
        let (kind, when) = match &p.kind {
            ParamKind::Tensor(t) => {
                let elem = elem_desc(&t.elem.name);
                let dims = dims_text(&t.dims);
                let strides = match &t.strides {
                    Some(s) => {
                        let s = dims_text(s);
                        quote!(::core::option::Option::Some(&[#(#s),*]))
                    }
                    None => quote!(::core::option::Option::None),
                };
                let produced = t.produced;
                let align = match &t.align {
                    Some(a) => {
                        let a = quote!(#a).to_string().replace(' ', "");
                        quote!(::core::option::Option::Some(#a))
                    }
                    None => quote!(::core::option::Option::None),
                };
                (
                    quote!(#d::ParamKind::Tensor(#d::TensorDesc {
                        elem: #elem,
                        dims: &[#(#dims),*],
                        strides: #strides,
                        produced: #produced,
                        align: #align,
                    })),
                    t.when.as_ref(),
                )
            }
            ParamKind::Scalar(s, when) => {
                let elem = elem_desc(&s.name);
                (quote!(#d::ParamKind::Scalar(#elem)), when.as_ref())
            }
        };
        let conditional = when.is_some();
        entries.push(quote!(#d::ParamDesc { name: #name, kind: #kind, conditional: #conditional }));
        pushes.push(match when {
            Some(cond) => quote!(if #cond { v.push(PARAMS[#i]); }),
            None => quote!(v.push(PARAMS[#i]);),
        });
    }
    // `params(..)` takes the builder's comptime arguments; where their types
    // name the kernel's type parameters it cannot be written outside the
    // builder, and only `PARAMS` is emitted.
    let generic_names: Vec<String> = generics
        .params
        .iter()
        .filter_map(|g| match g {
            GenericParam::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    let mentions_generic = comptime.iter().any(|pt| {
        let ty = &pt.ty;
        quote!(#ty)
            .into_iter()
            .any(|tt| generic_names.iter().any(|g| tt.to_string() == *g))
    });
    let params_fn = if mentions_generic {
        TokenStream::new()
    } else {
        quote! {
            /// This configuration's parameters in signature order: [`PARAMS`]
            /// without the `#[when]` parameters whose condition is false.
            #[allow(unused_variables, clippy::needless_borrow)]
            pub fn params(#(#comptime),*) -> ::std::vec::Vec<#d::ParamDesc> {
                let mut v = ::std::vec::Vec::new();
                #(#pushes)*
                v
            }
        }
    };
    quote! {
        #[allow(unused_imports)]
        use super::*;

        /// The kernel's parameters in signature order: its descriptor
        /// (names, element types, extents and strides as written, `#[when]`).
        pub const PARAMS: &[#d::ParamDesc] = &[#(#entries),*];

        #params_fn
    }
}

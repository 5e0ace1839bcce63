//! On any error: every error as `compile_error!`, plus a stub of the builder
//! function with the same signature, so code calling the kernel compiles and
//! the user sees the kernel's errors, not a cascade.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, ItemFn};

use crate::symbol::{COMPTIME, SCALARS, TENSOR};

/// A parameter the builder function keeps: `#[comptime]`, or one whose type
/// is neither a tensor nor a primitive (most likely comptime configuration
/// missing its attribute, which was reported).
fn kept(pt: &syn::PatType) -> bool {
    const PRIMITIVES: &[&str] = &[
        "bool", "char", "usize", "isize", "u8", "u16", "i8", "i16", "u128", "i128", "f64", "f16",
        "bf16",
    ];
    if pt.attrs.iter().any(|at| at.path() == COMPTIME) {
        return true;
    }
    match &*pt.ty {
        syn::Type::Path(p) => {
            let tensor = p.path.segments.last().is_some_and(|s| s.ident == TENSOR);
            let primitive = p
                .path
                .get_ident()
                .is_some_and(|i| SCALARS.iter().chain(PRIMITIVES).any(|s| i == s));
            !tensor && !primitive
        }
        _ => true,
    }
}

pub fn stub(item: &ItemFn, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let (attrs, vis, sig) = (&item.attrs, &item.vis, &item.sig);
    let ident = &sig.ident;
    let generics = &sig.generics;
    let where_clause = &generics.where_clause;
    let params = sig.inputs.iter().filter_map(|a| match a {
        FnArg::Typed(pt) if kept(pt) => {
            let mut pt = pt.clone();
            pt.attrs.clear();
            Some(pt)
        }
        _ => None,
    });
    quote! {
        #errors
        #(#attrs)*
        #[allow(unused_variables)]
        #vis fn #ident #generics (#(#params),*) -> ::kda::ir::Kernel #where_clause {
            ::core::panic!("this kernel did not compile: see the errors of #[cluster_kernel]")
        }
    }
}

//! The `#[__kda_runtime]` marker. The walk puts it on each `if`, `for`,
//! `while` and comparison that is not provably comptime; the expansion
//! takes it off and emits a dispatch on the value's type, decided when the
//! kernel is traced, in place of the plain Rust construct.

use proc_macro2::Span;
use syn::Attribute;

use crate::symbol::*;

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

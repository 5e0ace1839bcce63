//! `#[cluster_kernel]`: a Rust function describing a cluster kernel becomes a
//! builder function that traces it into a `kda::ir::Kernel`.
//!
//! Phases, one per file: `attr` and `ast` parse, `valid` checks
//! well-formedness, `flow` analyses the body, `check` runs the static misuse
//! checks, `expand` generates the builder, `launch` its typed-launch module, `fallback` stands in on error.
//! The language is documented in `docs/language.md`.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod flow;
mod launch;
mod symbol;
mod valid;

use proc_macro::TokenStream;

/// Turn a kernel function into its builder function; see `docs/language.md`.
#[proc_macro_attribute]
pub fn cluster_kernel(args: TokenStream, input: TokenStream) -> TokenStream {
    match syn::parse::<syn::ItemFn>(input) {
        Ok(item) => expand::cluster_kernel(args.into(), item).into(),
        Err(e) => syn::Error::new(
            e.span(),
            "#[cluster_kernel] applies to a function: `fn name(..) { .. }`",
        )
        .to_compile_error()
        .into(),
    }
}

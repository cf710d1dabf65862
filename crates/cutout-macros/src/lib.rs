//! `#[cutout::resilient]`: on a trait, generates `<Trait>Resilient<D>`, the trait's wrapper
//! whose `#[breaker(...)]` methods run through circuit breakers shared by a registry.
//!
//! Use it through `cutout` (feature `macros`): the generated code names `::cutout`, and
//! `cutout::declarative` documents the attributes, ids, sharing and policies.

use proc_macro::TokenStream;

mod attr;
mod body;
mod expand;
mod id;
mod method;
mod value;

/// Generates `<Trait>Resilient<D: Trait>`: see `cutout::declarative` for the attributes.
#[proc_macro_attribute]
pub fn resilient(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = proc_macro2::TokenStream::from(args);
    let item = syn::parse_macro_input!(item as syn::ItemTrait);
    match expand::resilient(args, item) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

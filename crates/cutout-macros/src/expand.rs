//! The expansion: the trait as written (without its `#[breaker]` attributes), the wrapper
//! struct, its `new`, and the trait's impl for it.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{GenericParam, ItemTrait, TraitItem};

use crate::attr;
use crate::body::{self, Planned};
use crate::id::default_id;
use crate::method::Method;

pub(crate) fn resilient(args: TokenStream, mut item: ItemTrait) -> syn::Result<TokenStream> {
    if !args.is_empty() {
        return Err(syn::Error::new(
            args.span(),
            "#[cutout::resilient] takes no arguments; put #[breaker(...)] on the methods",
        ));
    }
    // Above `#[async_trait]`: that attribute rewrites the trait's `async fn`s first and this
    // one wraps what it wrote (the methods returning `Pin<Box<dyn Future>>`), so that the
    // attributes in either order give one expansion, with the trait's own signatures.
    if let Some(at) = item.attrs.iter().position(is_async_trait) {
        let async_trait = item.attrs.remove(at);
        return Ok(quote!(#async_trait #[::cutout::resilient] #item));
    }
    let trait_name = item.ident.unraw().to_string();
    let trait_ident = item.ident.clone();
    let wrapper = format_ident!("{}Resilient", item.ident);
    let vis = item.vis.clone();

    // Generics: the trait's lifetimes, then the delegate, then its types and consts.
    let lifetimes: Vec<&GenericParam> = item
        .generics
        .params
        .iter()
        .filter(|p| matches!(p, GenericParam::Lifetime(_)))
        .collect();
    let others: Vec<&GenericParam> = item
        .generics
        .params
        .iter()
        .filter(|p| !matches!(p, GenericParam::Lifetime(_)))
        .collect();
    let lifetime_names: Vec<TokenStream> = lifetimes
        .iter()
        .map(|p| match p {
            GenericParam::Lifetime(l) => {
                let l = &l.lifetime;
                quote!(#l)
            }
            _ => quote!(),
        })
        .collect();
    let other_names: Vec<TokenStream> = others
        .iter()
        .map(|p| match p {
            GenericParam::Type(t) => {
                let i = &t.ident;
                quote!(#i)
            }
            GenericParam::Const(c) => {
                let i = &c.ident;
                quote!(#i)
            }
            GenericParam::Lifetime(_) => quote!(),
        })
        .collect();
    let type_names: Vec<TokenStream> = others
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => {
                let i = &t.ident;
                Some(quote!(#i))
            }
            _ => None,
        })
        .collect();
    let where_clause = item.generics.where_clause.clone();
    // The delegate's type parameter: `D`, unless the trait already names a `D` (a generic of
    // its own, a user type in a signature), which the parameter would then hide.
    let d = delegate_param(&item);
    let mut clone_where = where_clause
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(where));
    clone_where
        .predicates
        .push(syn::parse_quote!(#d: ::core::clone::Clone));
    // An unsafe trait's contract binds each implementor, and the wrapper answers for itself
    // (it refuses, retries, falls back): the macro cannot make that promise for the user.
    if let Some(unsafety) = item.unsafety {
        return Err(syn::Error::new(
            unsafety.span,
            "#[cutout::resilient] cannot wrap an `unsafe trait`: its safety contract binds each \
             implementor, and the generated wrapper (which may refuse, retry or fall back) \
             cannot promise it for you",
        ));
    }
    let trait_args = if item.generics.params.is_empty() {
        quote!()
    } else {
        let names = lifetime_names.iter().chain(other_names.iter());
        quote!(<#(#names),*>)
    };
    let strip = |p: &GenericParam| -> TokenStream {
        match p {
            GenericParam::Type(t) => {
                let mut t = t.clone();
                t.eq_token = None;
                t.default = None;
                quote!(#t)
            }
            GenericParam::Const(c) => {
                let mut c = c.clone();
                c.eq_token = None;
                c.default = None;
                quote!(#c)
            }
            GenericParam::Lifetime(l) => quote!(#l),
        }
    };
    let impl_lifetimes: Vec<TokenStream> = lifetimes.iter().map(|p| strip(p)).collect();
    let impl_others: Vec<TokenStream> = others.iter().map(|p| strip(p)).collect();
    let delegate_trait = quote!(#trait_ident #trait_args);
    let self_ty = quote!(#wrapper<#(#lifetime_names,)* #d, #(#other_names,)*>);
    let impl_generics = quote!(<#(#impl_lifetimes,)* #d: #delegate_trait, #(#impl_others,)*>);

    // The methods, read; their attributes taken off the trait.
    let mut planned = Vec::new();
    let mut items = Vec::new();
    for trait_item in &mut item.items {
        match trait_item {
            TraitItem::Fn(f) => {
                let mut breakers = Vec::new();
                let mut kept = Vec::new();
                for a in f.attrs.drain(..) {
                    if attr::is_breaker(&a) {
                        breakers.push(a);
                    } else {
                        kept.push(a);
                    }
                }
                f.attrs = kept;
                if breakers.len() > 1 {
                    return Err(syn::Error::new(
                        breakers[1].span(),
                        "one #[breaker] per method: share a breaker between methods with `name`",
                    ));
                }
                let breaker = breakers.first().map(attr::parse).transpose()?;
                planned.push((f.clone(), breaker));
            }
            TraitItem::Type(t) => {
                if !t.generics.params.is_empty() {
                    return Err(syn::Error::new(
                        t.span(),
                        "#[cutout::resilient] does not delegate generic associated types",
                    ));
                }
                let name = &t.ident;
                items.push(quote!(type #name = <#d as #delegate_trait>::#name;));
            }
            TraitItem::Const(c) => {
                let name = &c.ident;
                let ty = &c.ty;
                items.push(quote!(const #name: #ty = <#d as #delegate_trait>::#name;));
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "#[cutout::resilient] delegates methods, associated types and consts only",
                ));
            }
        }
    }

    let mut fields = Vec::new();
    let mut clones = Vec::new();
    let mut inits = Vec::new();
    let mut methods = Vec::new();
    for (f, breaker) in &planned {
        let method = Method::read(f)?;
        // `r#match` is the method `match`, as its id names it.
        let name = f.sig.ident.unraw().to_string();
        // A method compiled out of the trait is compiled out of the wrapper too: its `cfg`s
        // go on everything generated for it.
        let cfgs: Vec<&syn::Attribute> = f
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .collect();
        let Some(breaker) = breaker else {
            let generated = body::pass_through(&method, &delegate_trait, &d)?;
            methods.push(quote!(#(#cfgs)* #generated));
            continue;
        };
        // Apart from the marker's name (`__cutout_marker`), whatever the method is called.
        let field = format_ident!("__cutout_breaker_{}", f.sig.ident.unraw());
        let declared_by = default_id(&trait_name, &name, &method.params, method.async_trait);
        let id = breaker.name.clone().unwrap_or_else(|| declared_by.clone());
        let keys = breaker.settings.iter().map(|(k, v)| {
            let v = v.tokens();
            quote!((#k, #v))
        });
        fields.push(quote!(#(#cfgs)* #field: ::cutout::Breaker));
        clones.push(quote!(#(#cfgs)* #field: ::core::clone::Clone::clone(&self.#field)));
        inits.push(quote! {
            #(#cfgs)*
            #field: ::cutout::declarative::__private::breaker(
                registry,
                #id,
                #declared_by,
                &[#(#keys),*],
            )?
        });
        let generated = body::breaker_method(&Planned {
            method: &method,
            breaker,
            field: &field,
            delegate_trait: &delegate_trait,
            delegate: &d,
        })?;
        methods.push(quote!(#(#cfgs)* #generated));
    }

    let doc_struct = format!(
        "`{trait_name}` through circuit breakers: generated by `#[cutout::resilient]`. \
         Build it with [`{wrapper}::new`] from a delegate and a registry."
    );
    let doc_new = "Wraps `delegate`, taking each `#[breaker]` method's breaker from `registry` \
         (created with the attribute's settings, overridden by the registry's \
         `instances.<id>`). Fails with the registry's `CUT-REG-001` when a shared name is \
         already taken with other settings, naming both methods, or with the configuration's \
         code when the merged settings are invalid.";
    Ok(quote! {
        #item

        #[doc = #doc_struct]
        #vis struct #wrapper<#(#impl_lifetimes,)* #d, #(#impl_others,)*> #where_clause {
            delegate: #d,
            #(#fields,)*
            __cutout_marker: ::core::marker::PhantomData<fn() -> (#(&#lifetime_names (),)* #(#type_names,)*)>,
        }

        impl #impl_generics #self_ty #where_clause {
            #[doc = #doc_new]
            #vis fn new(
                delegate: #d,
                registry: &::cutout::Registry,
            ) -> ::core::result::Result<Self, ::cutout::declarative::DeclareError> {
                ::core::result::Result::Ok(Self {
                    delegate,
                    #(#inits,)*
                    __cutout_marker: ::core::marker::PhantomData,
                })
            }

            /// The wrapped delegate. An associated function, called as
            /// `Wrapper::delegate(&wrapper)`, so that it never hides a trait method of the
            /// same name (as `Arc::strong_count` does not).
            #vis fn delegate(this: &Self) -> &#d {
                &this.delegate
            }

            /// The delegate, unwrapped (`Wrapper::into_inner(wrapper)`).
            #vis fn into_inner(this: Self) -> #d {
                this.delegate
            }
        }

        impl #impl_generics #delegate_trait for #self_ty #where_clause {
            #(#items)*
            #(#methods)*
        }

        // A clone shares its breakers (handles to one state) and clones the delegate.
        impl #impl_generics ::core::clone::Clone for #self_ty #clone_where {
            fn clone(&self) -> Self {
                Self {
                    delegate: ::core::clone::Clone::clone(&self.delegate),
                    #(#clones,)*
                    __cutout_marker: ::core::marker::PhantomData,
                }
            }
        }
    })
}

/// Whether `attr` is `#[async_trait]` (`#[async_trait::async_trait(?Send)]`, …).
fn is_async_trait(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "async_trait")
}

/// The first of `D`, `Delegate`, `CutoutDelegate` that no identifier in `item` is.
fn delegate_param(item: &syn::ItemTrait) -> syn::Ident {
    fn idents(tokens: proc_macro2::TokenStream, seen: &mut std::collections::HashSet<String>) {
        for tree in tokens {
            match tree {
                proc_macro2::TokenTree::Ident(ident) => {
                    seen.insert(ident.to_string());
                }
                proc_macro2::TokenTree::Group(group) => idents(group.stream(), seen),
                _ => {}
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    idents(quote::ToTokens::to_token_stream(item), &mut seen);
    let name = ["D", "Delegate", "CutoutDelegate"]
        .into_iter()
        .find(|name| !seen.contains(*name))
        .unwrap_or("__CutoutDelegate");
    format_ident!("{name}")
}

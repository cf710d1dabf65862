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
    // The delegate's type parameter: `D`, unless the trait already names a `D` (a generic of
    // its own, a user type in a signature), which the parameter would then hide.
    let d = delegate_param(&item);
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
    // The trait's where clause: on the wrapper struct without the predicates that name `Self`
    // (the trait's own, `Self::Reply: Debug`), which there would be the wrapper; on the
    // impls with `Self` read as the delegate (`<D as Trait>::Reply: Debug`), which the trait
    // impl must prove and the delegate's bound does not imply.
    let (struct_where, impl_where) =
        wheres(item.generics.where_clause.as_ref(), &d, &delegate_trait)?;
    let mut clone_where = impl_where.clone();
    clone_where
        .predicates
        .push(syn::parse_quote!(#d: ::core::clone::Clone));
    let mut trait_where = impl_where.clone();
    let mut sync_delegate = false;
    // The predicates of `cfg_attr` breakers that need a `Sync` delegate: the bound is asked in
    // the builds where one of them holds.
    let mut sync_conditions: Vec<syn::Meta> = Vec::new();
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
                        breakers.push((None, a));
                    } else if let Some((predicate, breaker, rest)) = attr::cfg_attr_breaker(&a)? {
                        breakers.push((Some(predicate), breaker));
                        kept.extend(rest);
                    } else {
                        kept.push(a);
                    }
                }
                f.attrs = kept;
                if breakers.len() > 1 {
                    return Err(syn::Error::new(
                        breakers[1].1.span(),
                        "one #[breaker] per method: share a breaker between methods with `name`",
                    ));
                }
                let breaker = breakers.first().map(|(_, a)| attr::parse(a)).transpose()?;
                let condition = breakers.into_iter().next().and_then(|(p, _)| p);
                if needs_sync_delegate(f, breaker.as_ref()) {
                    match &condition {
                        None => sync_delegate = true,
                        Some(predicate) => sync_conditions.push(predicate.clone()),
                    }
                }
                planned.push((f.clone(), breaker, condition));
            }
            TraitItem::Type(t) => {
                if !t.generics.params.is_empty() {
                    return Err(syn::Error::new(
                        t.span(),
                        "#[cutout::resilient] does not delegate generic associated types",
                    ));
                }
                let name = &t.ident;
                let cfgs = cfgs_of(&t.attrs);
                items.push(quote!(#(#cfgs)* type #name = <#d as #delegate_trait>::#name;));
            }
            TraitItem::Const(c) => {
                let name = &c.ident;
                let ty = &c.ty;
                let cfgs = cfgs_of(&c.attrs);
                items.push(quote!(#(#cfgs)* const #name: #ty = <#d as #delegate_trait>::#name;));
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "#[cutout::resilient] delegates methods, associated types and consts only",
                ));
            }
        }
    }

    let mut sync_where = trait_where.clone();
    sync_where
        .predicates
        .push(syn::parse_quote!(#d: ::core::marker::Sync));
    if sync_delegate {
        trait_where = sync_where.clone();
        sync_conditions.clear();
    }

    let mut fields = Vec::new();
    let mut clones = Vec::new();
    let mut inits = Vec::new();
    let mut methods = Vec::new();
    for (f, breaker, condition) in &planned {
        let method = Method::read(f)?;
        // `r#match` is the method `match`, as its id names it.
        let name = f.sig.ident.unraw().to_string();
        // A method compiled out of the trait is compiled out of the wrapper too: its `cfg`s
        // go on everything generated for it.
        let mut cfgs: Vec<TokenStream> = cfgs_of(&f.attrs).iter().map(|a| quote!(#a)).collect();
        let Some(breaker) = breaker else {
            let generated = body::pass_through(&method, &delegate_trait, &d)?;
            methods.push(quote!(#(#cfgs)* #generated));
            continue;
        };
        // `#[cfg_attr(pred, breaker(...))]`: the breaker where `pred` holds, the delegate's
        // method as it is where it does not.
        if let Some(predicate) = condition {
            let generated = body::pass_through(&method, &delegate_trait, &d)?;
            methods.push(quote!(#(#cfgs)* #[cfg(not(#predicate))] #generated));
            cfgs.push(quote!(#[cfg(#predicate)]));
        }
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
    let trait_body = quote! {
        #(#items)*
        #(#methods)*
    };
    // The delegate's deprecated methods are the user's to be warned of, where they call them:
    // the wrapper only forwards.
    let trait_impls = if sync_conditions.is_empty() {
        quote! {
            #[allow(deprecated)]
            impl #impl_generics #delegate_trait for #self_ty #trait_where { #trait_body }
        }
    } else {
        quote! {
            #[cfg(any(#(#sync_conditions),*))]
            #[allow(deprecated)]
            impl #impl_generics #delegate_trait for #self_ty #sync_where { #trait_body }
            #[cfg(not(any(#(#sync_conditions),*)))]
            #[allow(deprecated)]
            impl #impl_generics #delegate_trait for #self_ty #trait_where { #trait_body }
        }
    };
    Ok(quote! {
        #item

        #[doc = #doc_struct]
        #vis struct #wrapper<#(#impl_lifetimes,)* #d, #(#impl_others,)*> #struct_where {
            delegate: #d,
            #(#fields,)*
            // Raw pointers, so that a `?Sized` parameter fits in the tuple; behind `fn() ->`,
            // so that the wrapper is `Send` and `Sync` whatever they are.
            __cutout_marker: ::core::marker::PhantomData<fn() -> (#(&#lifetime_names (),)* #(*const #type_names,)*)>,
        }

        impl #impl_generics #self_ty #impl_where {
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

        #trait_impls

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

/// The trait's where clause for the wrapper struct (its predicates that name `Self` left
/// out) and for the impls (`Self` read as the delegate: `Self::X` as `<D as Trait>::X`).
fn wheres(
    where_clause: Option<&syn::WhereClause>,
    d: &syn::Ident,
    delegate_trait: &TokenStream,
) -> syn::Result<(syn::WhereClause, syn::WhereClause)> {
    let mut on_struct: syn::WhereClause = syn::parse_quote!(where);
    let mut on_impls: syn::WhereClause = syn::parse_quote!(where);
    for predicate in where_clause.into_iter().flat_map(|w| w.predicates.iter()) {
        let tokens = quote!(#predicate);
        // `Self` as the type bounded (`Self: Sized`) or in a path (`Self::X`, `<Self as T>`)
        // reads as the delegate; as a type elsewhere (`Id: From<&'a Self>`) it would be a
        // requirement on the wrapper itself, which no delegate can meet for it.
        // What must not use `Self` as a type: the bounds of `Self: ...`, else the whole.
        let rest = match predicate {
            syn::WherePredicate::Type(t)
                if matches!(&t.bounded_ty, syn::Type::Path(p)
                    if p.qself.is_none() && p.path.is_ident("Self")) =>
            {
                let bounds = &t.bounds;
                quote!(#bounds)
            }
            _ => tokens.clone(),
        };
        if crate::body::names_self(rest) {
            return Err(syn::Error::new(
                predicate.span(),
                "#[cutout::resilient] reads `Self` in the trait's where clause as the delegate \
                 where it is the bounded type or starts a path (`Self: Sized`, `Self::X: Debug`); \
                 here it is a type argument, a requirement on the wrapper itself that no \
                 delegate can meet for it",
            ));
        }
        if crate::body::names_self_anywhere(tokens.clone()) {
            let read = as_delegate(tokens, d, delegate_trait);
            on_impls.predicates.push(syn::parse2(read)?);
        } else {
            on_struct.predicates.push(predicate.clone());
            on_impls.predicates.push(predicate.clone());
        }
    }
    Ok((on_struct, on_impls))
}

/// `tokens` with `Self::` read as `<D as Trait>::` and any other `Self` as `D`.
fn as_delegate(tokens: TokenStream, d: &syn::Ident, delegate_trait: &TokenStream) -> TokenStream {
    let trees: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream::new();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            proc_macro2::TokenTree::Ident(ident) if ident == "Self" => {
                let path_next = crate::body::path_follows(&trees, i);
                if path_next {
                    out.extend(quote!(<#d as #delegate_trait>));
                } else {
                    out.extend(quote!(#d));
                }
            }
            proc_macro2::TokenTree::Group(group) => {
                let mut inner = proc_macro2::Group::new(
                    group.delimiter(),
                    as_delegate(group.stream(), d, delegate_trait),
                );
                inner.set_span(group.span());
                out.extend(std::iter::once(proc_macro2::TokenTree::Group(inner)));
            }
            tree => out.extend(std::iter::once(tree.clone())),
        }
    }
    out
}

/// Whether the wrapper can implement `f` only for a `Sync` delegate: its future must be
/// `Send` and holds `&self` (a `#[breaker]` with a retry or a fallback, whose future returns
/// to the wrapper), or `#[async_trait]` asked `Self: Sync` of it (a default body), which of
/// the wrapper holds only when the delegate is `Sync`. The trait impl then asks `D: Sync`
/// (a method cannot ask more than the trait does; an impl can).
fn needs_sync_delegate(f: &syn::TraitItemFn, breaker: Option<&attr::Breaker>) -> bool {
    let self_sync = f.sig.generics.where_clause.as_ref().is_some_and(|w| {
        w.predicates.iter().any(|p| {
            matches!(p, syn::WherePredicate::Type(t)
                if matches!(&t.bounded_ty, syn::Type::Path(path) if path.path.is_ident("Self"))
                    && t.bounds.iter().any(|b| matches!(b, syn::TypeParamBound::Trait(bound)
                        if bound.path.segments.last().is_some_and(|s| s.ident == "Sync"))))
        })
    });
    let holds_self = breaker.is_some_and(|b| b.retry.is_some() || b.fallback.is_some())
        && f.sig.asyncness.is_none()
        && match &f.sig.output {
            syn::ReturnType::Type(_, ty) => crate::method::future_is_send(ty),
            syn::ReturnType::Default => false,
        };
    self_sync || holds_self
}

/// The `#[cfg]`s of an item: a trait item compiled out is compiled out of the wrapper too.
fn cfgs_of(attrs: &[syn::Attribute]) -> Vec<&syn::Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("cfg")).collect()
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

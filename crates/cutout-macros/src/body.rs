//! A method's body in the wrapper: passed through to the delegate, or run through its breaker
//! (with its classifier, retry, timeout and fallback) by the core's own calls
//! (`Breaker::call_with`, `call_async_with`, `call_async_timeout_with`).

use proc_macro2::{TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, PatIdent, ReturnType, Signature, Type};

use crate::attr::{Breaker, FallbackOn};
use crate::method::{Method, Receiver, Shape};

/// A `#[breaker]` method to expand.
pub(crate) struct Planned<'a> {
    pub(crate) method: &'a Method<'a>,
    pub(crate) breaker: &'a Breaker,
    pub(crate) field: &'a Ident,
    pub(crate) delegate_trait: &'a TokenStream,
    /// The delegate's type parameter (`D`, unless the trait names one).
    pub(crate) delegate: &'a Ident,
}

/// The signature with its parameters named `__cutout_arg0`, `__cutout_arg1`, … and those names.
fn signature(sig: &Signature) -> (Signature, Vec<Ident>) {
    let mut sig = sig.clone();
    let mut names = Vec::new();
    for arg in sig.inputs.iter_mut() {
        if let FnArg::Typed(typed) = arg {
            let name = format_ident!("__cutout_arg{}", names.len());
            *typed.pat = Pat::Ident(PatIdent {
                attrs: Vec::new(),
                by_ref: None,
                mutability: None,
                ident: name.clone(),
                subpat: None,
            });
            typed.attrs.clear();
            names.push(name);
        }
    }
    (sig, names)
}

/// What the wrapper passes its delegate for the parameter `arg` of type `ty`: the argument as
/// it is, or, where its type is `Self` (the wrapper), the delegate inside it (`Self`, `&Self`
/// and `&mut Self`). Any other type naming `Self` (an `Option<Self>`, a `Vec<&Self>`) is a
/// compile error: the wrapper cannot reach the delegates inside it.
fn passed(arg: &Ident, ty: &Type) -> syn::Result<TokenStream> {
    let ty = crate::method::ungrouped(ty);
    let is_self =
        |ty: &Type| matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"));
    match ty {
        ty if is_self(ty) => Ok(quote!(#arg.delegate)),
        Type::Reference(r) if is_self(crate::method::ungrouped(&r.elem)) => {
            Ok(match r.mutability {
                Some(_) => quote!(&mut #arg.delegate),
                None => quote!(&#arg.delegate),
            })
        }
        Type::Paren(p) => passed(arg, &p.elem),
        ty if names_self(quote!(#ty)) => Err(syn::Error::new(
            ty.span(),
            "#[cutout::resilient] passes a `Self`, `&Self` or `&mut Self` parameter as the \
             delegate inside the wrapper; it cannot reach one inside another type",
        )),
        _ => Ok(quote!(#arg)),
    }
}

/// Whether `tokens` name `Self` itself (not an associated item, `Self::Item` or
/// `<Self as Trait>::Item`, which the wrapper forwards).
pub(crate) fn names_self(tokens: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().any(|(i, token)| match token {
        TokenTree::Ident(ident) => {
            ident == "Self"
                && !path_follows(&tokens, i)
                && !matches!(tokens.get(i + 1), Some(TokenTree::Ident(next)) if next == "as")
        }
        TokenTree::Group(group) => names_self(group.stream()),
        _ => false,
    })
}

/// Whether `::` follows the token at `i` of `tokens`.
pub(crate) fn path_follows(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i + 1), tokens.get(i + 2)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':'
    )
}

/// Whether `tokens` name `Self` at all (`Self`, `Self::X`, `<Self as T>::X`).
pub(crate) fn names_self_anywhere(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "Self",
        TokenTree::Group(group) => names_self_anywhere(group.stream()),
        _ => false,
    })
}

/// The delegate's arguments for `sig`'s parameters named `args`, and an error for a return
/// type naming `Self`: the delegate returns its own type, not the wrapper.
fn delegate_args(sig: &Signature, args: &[Ident]) -> syn::Result<Vec<TokenStream>> {
    if let ReturnType::Type(_, ty) = &sig.output
        && names_self(quote!(#ty))
    {
        return Err(syn::Error::new(
            ty.span(),
            "#[cutout::resilient] cannot wrap a method that returns `Self`: the delegate \
             returns itself, not the wrapper",
        ));
    }
    let types = sig.inputs.iter().filter_map(|input| match input {
        FnArg::Typed(typed) => Some(&*typed.ty),
        FnArg::Receiver(_) => None,
    });
    args.iter()
        .zip(types)
        .map(|(arg, ty)| passed(arg, ty))
        .collect()
}

/// A method without `#[breaker]`: the delegate's, as it is.
pub(crate) fn pass_through(
    method: &Method<'_>,
    delegate_trait: &TokenStream,
    d: &Ident,
) -> syn::Result<TokenStream> {
    let (sig, names) = signature(&method.item.sig);
    let args = delegate_args(&method.item.sig, &names)?;
    let name = &sig.ident;
    let receiver = match method.receiver {
        Receiver::Ref => Some(quote!(&self.delegate)),
        Receiver::Mut => Some(quote!(&mut self.delegate)),
        Receiver::Value => Some(quote!(self.delegate)),
        Receiver::None => None,
    };
    let receiver = receiver.iter();
    let call = quote!(<#d as #delegate_trait>::#name(#(#receiver,)* #(#args),*));
    let body = match method.shape {
        Shape::Async => quote!(#call.await),
        Shape::Sync | Shape::ImplFuture | Shape::BoxedFuture => call,
    };
    Ok(quote! {
        #[inline]
        #sig {
            #body
        }
    })
}

/// A `#[breaker]` method.
pub(crate) fn breaker_method(p: &Planned<'_>) -> syn::Result<TokenStream> {
    let method = p.method;
    let b = p.breaker;
    let sig_span = method.item.sig.span();
    if method.receiver != Receiver::Ref {
        return Err(syn::Error::new(
            sig_span,
            "a #[breaker] method takes `&self`: the breaker is shared, and so is the delegate",
        ));
    }
    let Some((_, e)) = method.result() else {
        let span = match &method.item.sig.output {
            syn::ReturnType::Type(_, ty) => ty.span(),
            syn::ReturnType::Default => method.item.sig.ident.span(),
        };
        return Err(syn::Error::new(
            span,
            "a #[breaker] method returns `Result<T, E>` (written out, not an alias): a refusal \
             is returned as an `E` built from `cutout::Rejected`",
        ));
    };
    let is_async = method.shape != Shape::Sync;
    if let (false, Some((_, span))) = (is_async, b.timeout) {
        return Err(syn::Error::new(
            span,
            "timeout needs an async method: a sync call cannot be stopped when its time runs \
             out (time it inside the delegate, or make the method async)",
        ));
    }

    let (sig, args) = signature(&method.item.sig);
    let passed = delegate_args(&method.item.sig, &args)?;
    let name = &sig.ident;
    let field = p.field;
    let delegate_trait = p.delegate_trait;
    let breaker = quote!(self.#field);
    let private = quote!(::cutout::declarative::__private);

    let classifier = match (&b.classifier, &b.ignore, &b.record) {
        (Some(path), _, _) => quote!(#path),
        (None, None, None) => quote!(::cutout::classify::DefaultClassifier),
        (None, ignore, record) => {
            let ignored = ignore
                .as_ref()
                .map_or_else(|| quote!(false), |p| quote!(#p(__cutout_e)));
            let recorded = record
                .as_ref()
                .map_or_else(|| quote!(true), |p| quote!(#p(__cutout_e)));
            quote! {
                // `_` for the value: it may be an `impl Trait`, which a closure's parameter
                // cannot name; the call's type fixes it.
                |__cutout_r: &::core::result::Result<_, #e>| match __cutout_r {
                    ::core::result::Result::Ok(_) => ::cutout::Outcome::Success,
                    ::core::result::Result::Err(__cutout_e) if #ignored => ::cutout::Outcome::Ignored,
                    ::core::result::Result::Err(__cutout_e) if #recorded => ::cutout::Outcome::Failure,
                    ::core::result::Result::Err(_) => ::cutout::Outcome::Success,
                }
            }
        }
    };

    let d = p.delegate;
    let call = quote!(<#d as #delegate_trait>::#name(&self.delegate, #(#passed),*));
    // Each attempt's arguments: a clone, or for a sync method's `&mut` parameter a reborrow
    // (one attempt runs at a time; an async attempt's future would outlive it).
    let clones: Vec<TokenStream> = args
        .iter()
        .zip(&method.params)
        .map(|(a, ty)| match crate::method::ungrouped(ty) {
            Type::Reference(r) if r.mutability.is_some() && !is_async => quote!(let #a = &mut *#a;),
            _ => quote!(let #a = ::core::clone::Clone::clone(&#a);),
        })
        .collect();
    let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    // A method returning `impl Future` (or a boxed one, as `#[async_trait]` writes an `async
    // fn`) without a retry asks its breaker for an owned permit when it is
    // called, and calls the delegate then only if the permit was granted; the returned future
    // awaits the delegate's inside the breaker. It holds the permit and the delegate's
    // future, not `&self`, so it is `Send` whenever the delegate's is (the trait's `+ Send`),
    // whether or not the delegate is `Sync`, and a refused call never reaches the delegate.
    let returns_future = matches!(method.shape, Shape::ImplFuture | Shape::BoxedFuture);
    let eager = returns_future && b.retry.is_none();
    let future = quote!(async move { #call.await });
    // One call through the breaker: the core's own calls.
    let once = match (is_async, b.timeout, eager) {
        (false, _, _) => quote!(#breaker.call_with(__cutout_classifier, || #call)),
        (true, None, true) => quote! {
            #private::admitted(__cutout_admitted, __cutout_classifier).await
        },
        (true, None, false) => quote! {
            #breaker.call_async_with(__cutout_classifier, #future).await
        },
        // A timeout is judged by the classifier as the `E` it becomes (`ignore` may name it).
        (true, Some((timeout, _)), eager) => {
            let timeout = nanos(timeout);
            let timeout = quote!(::core::time::Duration::from_nanos(#timeout));
            let admitted = if eager {
                quote!(__cutout_admitted)
            } else {
                quote!(#breaker.try_acquire_owned().map(|__cutout_p| (__cutout_p, #future)))
            };
            quote! {
                #private::admitted_timeout(#admitted, __cutout_classifier, #timeout).await
            }
        }
    };
    let result = match (is_async, b.retry) {
        (_, None) => once,
        (false, Some(retry)) => {
            let (attempts, backoff) = (retry.attempts, nanos(retry.backoff));
            quote! {
                #private::retry(
                    &#breaker,
                    #attempts,
                    ::core::time::Duration::from_nanos(#backoff),
                    || { #(#clones)* #once },
                )
            }
        }
        (true, Some(retry)) => {
            let (attempts, backoff) = (retry.attempts, nanos(retry.backoff));
            quote! {
                #private::retry_async(
                    &#breaker,
                    #attempts,
                    ::core::time::Duration::from_nanos(#backoff),
                    || { #(#clones)* async move { #once } },
                ).await
            }
        }
    };

    let fallback_failed = matches!(b.fallback_on, FallbackOn::Both | FallbackOn::Failed);
    let fallback_refused = matches!(b.fallback_on, FallbackOn::Both | FallbackOn::Refused);
    let failed = match &b.fallback {
        Some(fb) if fallback_failed => {
            quote!(self.#fb(::cutout::declarative::Cause::Failed(__cutout_e)))
        }
        _ => quote!(::core::result::Result::Err(__cutout_e)),
    };
    let refused = match (&b.fallback, &b.rejected) {
        (Some(fb), _) if fallback_refused => {
            quote!(self.#fb(::cutout::declarative::Cause::Refused(__cutout_r)))
        }
        (_, Some(rejected)) => quote!(::core::result::Result::Err(#rejected(__cutout_r))),
        // The function spanned at the error type, so that a missing `From<Rejected>` points
        // at it; the binding keeps the macro's own span (spanned at a `macro_rules!`
        // fragment, it would be another hygiene context's name, unbound).
        _ => {
            let refused = quote_spanned! {e.span()=> #private::refused::<#e>};
            quote!(::core::result::Result::Err(#refused(__cutout_r)))
        }
    };
    let body = quote! {
        // Borrowed, not moved: a classifier may be a `static` (or a `const`, a function).
        let __cutout_classifier = &#classifier;
        match #result {
            ::core::result::Result::Ok(__cutout_v) => ::core::result::Result::Ok(__cutout_v),
            ::core::result::Result::Err(::cutout::Error::Inner(__cutout_e)) => #failed,
            ::core::result::Result::Err(::cutout::Error::Rejected(__cutout_r)) => #refused,
        }
    };
    Ok(match method.shape {
        // A plain sync call is `#[inline(always)]`, as `Breaker::call_with` is: out of line,
        // the wrapper's body holds the core's slow paths too and its frame alone (registers
        // saved, a stack frame) costs the healthy call about a nanosecond.
        Shape::Sync if b.retry.is_none() => quote! {
            #[inline(always)]
            #sig {
                #body
            }
        },
        Shape::Sync | Shape::Async => quote! {
            #[inline]
            #sig {
                #body
            }
        },
        Shape::ImplFuture | Shape::BoxedFuture => {
            let future = quote!(async move { #body });
            let future = match method.shape {
                Shape::BoxedFuture => quote!(::std::boxed::Box::pin(#future)),
                _ => future,
            };
            let admitted = eager.then(|| {
                quote! {
                    let __cutout_admitted = self.#field.try_acquire_owned().map(|__cutout_p| (__cutout_p, #call));
                }
            });
            quote! {
                #sig {
                    #admitted
                    #future
                }
            }
        }
    })
}

//! A trait method as the wrapper sees it: how it is called (sync, `async fn`, `impl Future`),
//! its receiver, its parameters and, for a `#[breaker]` method, its `Result<T, E>`.

use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, PathArguments, ReturnType, TraitItemFn, Type, TypeParamBound};

/// How a method returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Sync,
    Async,
    /// `-> impl Future<Output = ...> + ...`
    ImplFuture,
}

/// The receiver, for a method passed through as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    Ref,
    Mut,
    Value,
}

/// One trait method, read.
pub(crate) struct Method<'a> {
    pub(crate) item: &'a TraitItemFn,
    pub(crate) shape: Shape,
    pub(crate) receiver: Receiver,
    pub(crate) params: Vec<&'a Type>,
    /// What the call yields: the declared return type, or `impl Future`'s `Output`.
    pub(crate) output: Option<Type>,
}

impl<'a> Method<'a> {
    pub(crate) fn read(item: &'a TraitItemFn) -> syn::Result<Method<'a>> {
        let sig = &item.sig;
        let mut inputs = sig.inputs.iter();
        let receiver = match inputs.next() {
            Some(FnArg::Receiver(r)) if r.colon_token.is_some() => {
                return Err(syn::Error::new(
                    r.span(),
                    "#[cutout::resilient] delegates `&self`, `&mut self` and `self` receivers, not typed ones",
                ));
            }
            Some(FnArg::Receiver(r)) => match (&r.reference, &r.mutability) {
                (Some(_), None) => Receiver::Ref,
                (Some(_), Some(_)) => Receiver::Mut,
                (None, _) => Receiver::Value,
            },
            _ => {
                return Err(syn::Error::new(
                    sig.ident.span(),
                    "#[cutout::resilient] needs a receiver on every method: a function without `self` cannot be delegated",
                ));
            }
        };
        let params = inputs
            .map(|arg| match arg {
                FnArg::Typed(t) => Ok(&*t.ty),
                FnArg::Receiver(r) => Err(syn::Error::new(r.span(), "a second receiver")),
            })
            .collect::<syn::Result<Vec<_>>>()?;
        let declared = match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some((**ty).clone()),
        };
        let (shape, output) = if sig.asyncness.is_some() {
            (Shape::Async, declared)
        } else if let Some(output) = declared.as_ref().and_then(future_output) {
            (Shape::ImplFuture, Some(output))
        } else {
            (Shape::Sync, declared)
        };
        Ok(Method {
            item,
            shape,
            receiver,
            params,
            output,
        })
    }

    /// `(T, E)` of a `Result<T, E>` output.
    pub(crate) fn result(&self) -> Option<(Type, Type)> {
        let Some(Type::Path(path)) = &self.output else {
            return None;
        };
        let last = path.path.segments.last()?;
        if last.ident != "Result" {
            return None;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        let mut types = args.args.iter().filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t.clone()),
            _ => None,
        });
        match (types.next(), types.next(), types.next()) {
            (Some(t), Some(e), None) => Some((t, e)),
            _ => None,
        }
    }
}

/// `Output` of `impl Future<Output = X> + ...`.
fn future_output(ty: &Type) -> Option<Type> {
    let Type::ImplTrait(imp) = ty else {
        return None;
    };
    imp.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(t) = bound else {
            return None;
        };
        let last = t.path.segments.last()?;
        if last.ident != "Future" {
            return None;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        args.args.iter().find_map(|a| match a {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(assoc.ty.clone()),
            _ => None,
        })
    })
}

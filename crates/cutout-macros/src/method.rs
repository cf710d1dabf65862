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
    /// `-> Pin<Box<dyn Future<Output = ...> + ...>>`: an `async fn` as `#[async_trait]`
    /// rewrites it (or a boxed future written out).
    BoxedFuture,
}

/// The receiver, for a method passed through as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    Ref,
    Mut,
    Value,
    /// An associated function: passed through, never a `#[breaker]` method.
    None,
}

/// One trait method, read.
pub(crate) struct Method<'a> {
    pub(crate) item: &'a TraitItemFn,
    pub(crate) shape: Shape,
    pub(crate) receiver: Receiver,
    pub(crate) params: Vec<&'a Type>,
    /// What the call yields: the declared return type, or `impl Future`'s `Output`.
    pub(crate) output: Option<Type>,
    /// Whether `#[async_trait]` rewrote the method (it has the lifetime `'async_trait`).
    pub(crate) async_trait: bool,
}

impl<'a> Method<'a> {
    pub(crate) fn read(item: &'a TraitItemFn) -> syn::Result<Method<'a>> {
        let sig = &item.sig;
        let mut inputs = sig.inputs.iter().peekable();
        let receiver = match inputs.peek().copied() {
            Some(FnArg::Receiver(r)) if r.colon_token.is_some() => {
                return Err(syn::Error::new(
                    r.span(),
                    "#[cutout::resilient] delegates `&self`, `&mut self` and `self` receivers, not typed ones",
                ));
            }
            Some(FnArg::Receiver(r)) => {
                inputs.next();
                match (&r.reference, &r.mutability) {
                    (Some(_), None) => Receiver::Ref,
                    (Some(_), Some(_)) => Receiver::Mut,
                    (None, _) => Receiver::Value,
                }
            }
            _ => Receiver::None,
        };
        let params = inputs
            .map(|arg| match arg {
                FnArg::Typed(t) => Ok(ungrouped(&t.ty)),
                FnArg::Receiver(r) => Err(syn::Error::new(r.span(), "a second receiver")),
            })
            .collect::<syn::Result<Vec<_>>>()?;
        let declared = match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some(ungrouped(ty).clone()),
        };
        let (shape, output) = if sig.asyncness.is_some() {
            (Shape::Async, declared)
        } else if let Some(output) = declared.as_ref().and_then(future_output) {
            (Shape::ImplFuture, Some(output))
        } else if let Some(output) = declared.as_ref().and_then(boxed_future_output) {
            (Shape::BoxedFuture, Some(output))
        } else {
            (Shape::Sync, declared)
        };
        let async_trait = sig
            .generics
            .lifetimes()
            .any(|l| l.lifetime.ident == "async_trait");
        Ok(Method {
            item,
            shape,
            receiver,
            params,
            output,
            async_trait,
        })
    }

    /// `(T, E)` of a `Result<T, E>` output.
    pub(crate) fn result(&self) -> Option<(Type, Type)> {
        let Some(Type::Path(path)) = self.output.as_ref().map(ungrouped) else {
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

/// `ty` out of the invisible groups a `macro_rules!` fragment (`$ret:ty`) puts around it.
pub(crate) fn ungrouped(mut ty: &Type) -> &Type {
    while let Type::Group(group) = ty {
        ty = &group.elem;
    }
    ty
}

/// `Output` of `impl Future<Output = X> + ...`.
fn future_output(ty: &Type) -> Option<Type> {
    let Type::ImplTrait(imp) = ungrouped(ty) else {
        return None;
    };
    bounds_output(&imp.bounds)
}

/// Whether a method returning `ty` returns a future that must be `Send`: `impl Future<..> +
/// Send`, or `Pin<Box<dyn Future<..> + Send>>` (a `Send` in the output's own type, such as
/// `Box<dyn Error + Send>`, is not the future's).
pub(crate) fn future_is_send(ty: &Type) -> bool {
    let send = |bounds: &syn::punctuated::Punctuated<TypeParamBound, syn::Token![+]>| {
        bounds.iter().any(|bound| {
            matches!(bound, TypeParamBound::Trait(t)
                if t.path.segments.last().is_some_and(|s| s.ident == "Send"))
        })
    };
    match ungrouped(ty) {
        Type::ImplTrait(imp) => bounds_output(&imp.bounds).is_some() && send(&imp.bounds),
        ty => boxed_future(ty).is_some_and(|object| send(&object.bounds)),
    }
}

/// The `dyn Future<..> + ...` of `Pin<Box<dyn Future<..> + ...>>`.
fn boxed_future(ty: &Type) -> Option<syn::TypeTraitObject> {
    let inner = |ty: &Type, name: &str| -> Option<Type> {
        let Type::Path(path) = ungrouped(ty) else {
            return None;
        };
        let last = path.path.segments.last()?;
        if last.ident != name {
            return None;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        match args.args.iter().collect::<Vec<_>>().as_slice() {
            [GenericArgument::Type(t)] => Some(t.clone()),
            _ => None,
        }
    };
    let boxed = inner(ty, "Pin")?;
    match inner(&boxed, "Box").map(|t| ungrouped(&t).clone())? {
        Type::TraitObject(object) if bounds_output(&object.bounds).is_some() => Some(object),
        _ => None,
    }
}

/// `Output` of `Pin<Box<dyn Future<Output = X> + ...>>`, the return type `#[async_trait]`
/// gives an `async fn`.
fn boxed_future_output(ty: &Type) -> Option<Type> {
    bounds_output(&boxed_future(ty)?.bounds)
}

/// `Output` of the `Future<Output = X>` among `bounds`.
fn bounds_output(
    bounds: &syn::punctuated::Punctuated<TypeParamBound, syn::Token![+]>,
) -> Option<Type> {
    bounds.iter().find_map(|bound| {
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

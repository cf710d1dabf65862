//! An attribute's value as written (`10`, `"30s"`, `-3`, `true`), read out of syn's literal.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Expr, ExprLit, ExprUnary, Lit, UnOp};

/// A literal value of a settings key.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl Value {
    /// Reads a literal (or a negated number); `None` for anything else (a path, a call).
    pub(crate) fn read(expr: &Expr) -> syn::Result<Option<Value>> {
        match expr {
            Expr::Lit(ExprLit { lit, .. }) => Value::lit(lit, false),
            Expr::Unary(ExprUnary {
                op: UnOp::Neg(_),
                expr,
                ..
            }) => match &**expr {
                Expr::Lit(ExprLit { lit, .. }) => Value::lit(lit, true),
                _ => Ok(None),
            },
            _ => Ok(None),
        }
    }

    fn lit(lit: &Lit, negative: bool) -> syn::Result<Option<Value>> {
        let sign = if negative { -1 } else { 1 };
        Ok(Some(match lit {
            Lit::Int(i) => Value::Int(sign * i.base10_parse::<i128>()?),
            Lit::Float(f) => {
                Value::Float(if negative { -1.0 } else { 1.0 } * f.base10_parse::<f64>()?)
            }
            Lit::Str(s) if !negative => Value::Str(s.value()),
            Lit::Bool(b) if !negative => Value::Bool(b.value),
            _ => return Ok(None),
        }))
    }

    /// The shared crate's view of it, to check.
    pub(crate) fn as_key_value(&self) -> cutout_keys::Value<'_> {
        match self {
            Value::Int(i) => cutout_keys::Value::Int(*i),
            Value::Float(f) => cutout_keys::Value::Float(*f),
            Value::Str(s) => cutout_keys::Value::Str(s),
            Value::Bool(b) => cutout_keys::Value::Bool(*b),
        }
    }

    /// As a configuration file would show it: strings quoted.
    pub(crate) fn written(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Str(s) => format!("{s:?}"),
            Value::Bool(b) => b.to_string(),
        }
    }

    /// The runtime value handed to the configuration's reader.
    pub(crate) fn tokens(&self) -> TokenStream {
        let value = quote!(::cutout::declarative::__private::Value);
        match self {
            Value::Int(i) => quote!(#value::Int(#i)),
            Value::Float(f) => quote!(#value::Float(#f)),
            Value::Str(s) => quote!(#value::Str(#s)),
            Value::Bool(b) => quote!(#value::Bool(#b)),
        }
    }
}

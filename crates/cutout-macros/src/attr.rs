//! `#[breaker(...)]`: its keys read and checked at compile time, with the configuration
//! file's codes and did-you-mean (through cutout-keys), each error spanning the key at fault.

use std::time::Duration;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Meta, MetaNameValue, Token};

use crate::value::Value;

/// The keys of the attribute's own, next to the settings keys.
const OWN_KEYS: &[&str] = &[
    "name",
    "classifier",
    "ignore",
    "record",
    "fallback",
    "fallback_on",
    "timeout",
    "retry",
    "rejected",
];

const RETRY_KEYS: &[&str] = &["attempts", "backoff"];

/// Which answers a fallback gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FallbackOn {
    Both,
    Refused,
    Failed,
}

/// A retry outside the breaker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    pub(crate) attempts: u32,
    pub(crate) backoff: Duration,
}

/// One `#[breaker(...)]`, read.
pub(crate) struct Breaker {
    pub(crate) name: Option<String>,
    /// Settings keys in kebab-case, as the configuration reads them.
    pub(crate) settings: Vec<(String, Value)>,
    pub(crate) classifier: Option<syn::Path>,
    pub(crate) ignore: Option<syn::Path>,
    pub(crate) record: Option<syn::Path>,
    pub(crate) fallback: Option<syn::Ident>,
    pub(crate) fallback_on: FallbackOn,
    pub(crate) timeout: Option<(Duration, Span)>,
    pub(crate) retry: Option<Retry>,
    pub(crate) rejected: Option<syn::Path>,
}

/// Whether `attr` is a `#[breaker(...)]`.
pub(crate) fn is_breaker(attr: &Attribute) -> bool {
    attr.path().is_ident("breaker")
}

/// `#[cfg_attr(pred, breaker(...), others...)]`: the predicate, the breaker as an attribute of
/// its own, and the attribute left for the others (none when there are none). `None` for any
/// other attribute. (An attribute macro sees `cfg_attr` unexpanded: left on the method, it
/// would become a `#[breaker]` no macro reads.)
pub(crate) fn cfg_attr_breaker(
    attr: &Attribute,
) -> syn::Result<Option<(Meta, Attribute, Option<Attribute>)>> {
    if !attr.path().is_ident("cfg_attr") {
        return Ok(None);
    }
    let Meta::List(list) = &attr.meta else {
        return Ok(None);
    };
    let metas = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
    let mut metas = metas.into_iter();
    let Some(predicate) = metas.next() else {
        return Ok(None);
    };
    let mut found: Option<(Meta, Attribute)> = None;
    let mut others = Vec::new();
    for meta in metas {
        // `breaker(...)`, or a nested `cfg_attr(inner, breaker(...), ...)`: the breaker under
        // both predicates, the nested one's other attributes under its own.
        let inner = if meta.path().is_ident("breaker") {
            Some((predicate.clone(), syn::parse_quote!(#[#meta]), None))
        } else if meta.path().is_ident("cfg_attr") {
            cfg_attr_breaker(&syn::parse_quote!(#[#meta]))?.map(|(inner, breaker, rest)| {
                (syn::parse_quote!(all(#predicate, #inner)), breaker, rest)
            })
        } else {
            None
        };
        match inner {
            Some((_, breaker, _)) if found.is_some() => {
                return Err(error(
                    breaker.span(),
                    "one #[breaker] per method: share a breaker between methods with `name`",
                ));
            }
            Some((condition, breaker, rest)) => {
                found = Some((condition, breaker));
                if let Some(rest) = rest {
                    // The nested one's others, under this predicate too.
                    others.push(rest.meta);
                }
            }
            None => others.push(meta),
        }
    }
    let Some((condition, breaker)) = found else {
        return Ok(None);
    };
    let rest =
        (!others.is_empty()).then(|| syn::parse_quote!(#[cfg_attr(#predicate, #(#others),*)]));
    Ok(Some((condition, breaker, rest)))
}

fn error(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, message)
}

/// `CUT-CFG-008: unknown key window_sise = 10 in #[breaker]: did you mean window_size?`
fn unknown_key(span: Span, name: &str, value: Option<&Expr>, candidates: &[&str]) -> syn::Error {
    let suggestion = cutout_keys::suggest::nearest(name, candidates.iter().copied());
    let value = value
        .map(|v| format!(" = {}", quote::ToTokens::to_token_stream(v)))
        .unwrap_or_default();
    let tail = match suggestion {
        Some(s) => format!("did you mean {s}?"),
        None => format!("allowed one of {}", candidates.join(", ")),
    };
    error(
        span,
        format!(
            "{}: unknown key {name}{value} in #[breaker]: {tail}",
            cutout_keys::code::UNKNOWN_KEY
        ),
    )
}

/// A key written as a config file spells it (`failure-ratio`), which is no Rust path: the
/// unknown-key error with its did-you-mean (`failure_ratio`), rather than the parser's.
fn kebab_key(tokens: TokenStream, candidates: &[&str]) -> Option<syn::Error> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut at_key = true;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(p) if p.as_char() == ',' => at_key = true,
            TokenTree::Ident(first) if at_key => {
                at_key = false;
                let mut name = first.to_string();
                let mut end = i;
                while let (Some(TokenTree::Punct(dash)), Some(TokenTree::Ident(next))) =
                    (tokens.get(end + 1), tokens.get(end + 2))
                {
                    if dash.as_char() != '-' {
                        break;
                    }
                    name.push('-');
                    name.push_str(&next.to_string());
                    end += 2;
                }
                if end > i {
                    let span = first
                        .span()
                        .join(tokens[end].span())
                        .unwrap_or_else(|| first.span());
                    return Some(unknown_key(span, &name, None, candidates));
                }
            }
            _ => at_key = false,
        }
        i += 1;
    }
    None
}

fn all_keys() -> Vec<String> {
    cutout_keys::SETTINGS_KEYS
        .iter()
        .map(|k| k.replace('-', "_"))
        .chain(OWN_KEYS.iter().map(|k| (*k).to_owned()))
        .collect()
}

fn string(expr: &Expr, key: &str) -> syn::Result<String> {
    match Value::read(expr)? {
        Some(Value::Str(s)) => Ok(s),
        _ => Err(error(
            expr.span(),
            format!(
                "{}: wrong type for {key} in #[breaker]: allowed a string",
                cutout_keys::code::WRONG_TYPE
            ),
        )),
    }
}

fn path(expr: &Expr, key: &str, what: &str) -> syn::Result<syn::Path> {
    match expr {
        Expr::Path(p) => Ok(p.path.clone()),
        _ => Err(error(expr.span(), format!("{key} takes {what}"))),
    }
}

/// A duration of the attribute's own (`timeout`, `backoff`), in the settings' syntax.
fn duration(expr: &Expr, key: &str) -> syn::Result<Duration> {
    let text = match Value::read(expr)? {
        Some(Value::Str(s)) => s,
        _ => {
            return Err(error(
                expr.span(),
                format!(
                    "{}: wrong type for {key} in #[breaker]: allowed {}",
                    cutout_keys::code::WRONG_TYPE,
                    cutout_keys::duration::ALLOWED
                ),
            ));
        }
    };
    cutout_keys::duration::parse(&text).map_err(|detail| {
        error(
            expr.span(),
            format!(
                "{}: invalid {key} = {text:?} in #[breaker]: {detail}; allowed {}",
                cutout_keys::code::INVALID_VALUE,
                cutout_keys::duration::ALLOWED
            ),
        )
    })
}

/// Reads one `#[breaker(...)]`.
pub(crate) fn parse(attr: &Attribute) -> syn::Result<Breaker> {
    let mut out = Breaker {
        name: None,
        settings: Vec::new(),
        classifier: None,
        ignore: None,
        record: None,
        fallback: None,
        fallback_on: FallbackOn::Both,
        timeout: None,
        retry: None,
        rejected: None,
    };
    let keys = all_keys();
    let candidates: Vec<&str> = keys.iter().map(String::as_str).collect();
    if let Meta::List(list) = &attr.meta
        && let Some(error) = kebab_key(list.tokens.clone(), &candidates)
    {
        return Err(error);
    }
    let metas = match &attr.meta {
        Meta::Path(_) => Punctuated::new(),
        _ => attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?,
    };
    let mut seen: Vec<String> = Vec::new();
    for meta in metas {
        let key_path = meta.path().clone();
        let Some(ident) = key_path.get_ident() else {
            return Err(error(
                key_path.span(),
                "a key is one word, such as window_size",
            ));
        };
        let key = ident.to_string();
        // Given twice, one would silently win: the config file's reader refuses a duplicate
        // key too.
        if seen.contains(&key) {
            return Err(error(
                ident.span(),
                format!("{key} is given twice in #[breaker]: keep one"),
            ));
        }
        seen.push(key.clone());
        if key == "retry" {
            out.retry = Some(retry(&meta)?);
            continue;
        }
        let Meta::NameValue(MetaNameValue { value, .. }) = &meta else {
            if !candidates.contains(&key.as_str()) {
                return Err(unknown_key(ident.span(), &key, None, &candidates));
            }
            return Err(error(
                meta.span(),
                format!("{key} takes a value: {key} = ..."),
            ));
        };
        match key.as_str() {
            "name" => out.name = Some(string(value, "name")?),
            "classifier" => {
                out.classifier = Some(path(value, "classifier", "a path to a classifier")?)
            }
            "ignore" => out.ignore = Some(path(value, "ignore", "a path to a fn(&E) -> bool")?),
            "record" => out.record = Some(path(value, "record", "a path to a fn(&E) -> bool")?),
            "rejected" => {
                out.rejected = Some(path(
                    value,
                    "rejected",
                    "a path to a fn(cutout::Rejected) -> E",
                )?);
            }
            "fallback" => {
                match path(value, "fallback", "the name of a method of the wrapper")?.get_ident() {
                    Some(method) => out.fallback = Some(method.clone()),
                    None => {
                        return Err(error(
                            value.span(),
                            "fallback takes a method name of the wrapper's own",
                        ));
                    }
                }
            }
            "fallback_on" => {
                let text = string(value, "fallback_on")?;
                out.fallback_on = match text.as_str() {
                    "both" => FallbackOn::Both,
                    "refused" => FallbackOn::Refused,
                    "failed" => FallbackOn::Failed,
                    _ => {
                        let s = cutout_keys::suggest::nearest(&text, ["both", "refused", "failed"]);
                        let tail = s
                            .map(|s| format!("; did you mean {s:?}?"))
                            .unwrap_or_default();
                        return Err(error(
                            value.span(),
                            format!(
                                "{}: invalid fallback_on = {text:?} in #[breaker]: allowed \"both\", \"refused\" or \"failed\"{tail}",
                                cutout_keys::code::INVALID_VALUE
                            ),
                        ));
                    }
                };
            }
            "timeout" => out.timeout = Some((duration(value, "timeout")?, meta.span())),
            _ => out.settings.push(setting(ident, &key, value, &candidates)?),
        }
    }
    if out.classifier.is_some() && (out.ignore.is_some() || out.record.is_some()) {
        return Err(syn::Error::new_spanned(
            attr,
            format!(
                "{}: #[breaker] takes a classifier or ignore / record, not both: the classifier decides everything",
                cutout_keys::code::CONTRADICTION
            ),
        ));
    }
    Ok(out)
}

/// A settings key: known (in snake_case), and its value read and range-checked as the
/// configuration would.
fn setting(
    ident: &syn::Ident,
    key: &str,
    value: &Expr,
    candidates: &[&str],
) -> syn::Result<(String, Value)> {
    let kebab = key.replace('_', "-");
    if key.contains('-') || cutout_keys::kind(&kebab).is_none() {
        return Err(unknown_key(ident.span(), key, Some(value), candidates));
    }
    // The whole `key = value`, from the key's first character to the value's last.
    let spanned = quote::quote!(#ident = #value);
    let Some(read) = Value::read(value)? else {
        return Err(syn::Error::new_spanned(
            &spanned,
            format!(
                "{}: wrong type for {key} in #[breaker]: a literal is needed (a number, a string or a boolean)",
                cutout_keys::code::WRONG_TYPE
            ),
        ));
    };
    if let Err(problem) = cutout_keys::check(&kebab, read.as_key_value()) {
        let headline = if problem.code == cutout_keys::code::WRONG_TYPE {
            "wrong type for"
        } else {
            "invalid"
        };
        let mut message = format!(
            "{}: {headline} {key} = {} in #[breaker]",
            problem.code,
            read.written()
        );
        let mut sep = ": ";
        if let Some(detail) = &problem.detail {
            message.push_str(&format!("{sep}{detail}"));
            sep = "; ";
        }
        message.push_str(&format!("{sep}allowed {}", problem.allowed));
        if let Some(suggestion) = problem.suggestion {
            message.push_str(&format!("; did you mean {suggestion:?}?"));
        }
        return Err(syn::Error::new_spanned(&spanned, message));
    }
    Ok((kebab, read))
}

fn retry(meta: &Meta) -> syn::Result<Retry> {
    let Meta::List(list) = meta else {
        return Err(error(
            meta.span(),
            "retry takes its keys in parentheses: retry(attempts = 3, backoff = \"100ms\")",
        ));
    };
    let metas = list.parse_args_with(Punctuated::<MetaNameValue, Token![,]>::parse_terminated)?;
    let mut out = Retry {
        attempts: 3,
        backoff: Duration::ZERO,
    };
    let mut seen = Vec::new();
    for nv in metas {
        let key = nv
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        // As for the breaker's own keys: given twice, one would silently win.
        if RETRY_KEYS.contains(&key.as_str()) {
            if seen.contains(&key) {
                return Err(error(
                    nv.path.span(),
                    format!("{key} is given twice in #[breaker(retry(...))]: keep one"),
                ));
            }
            seen.push(key.clone());
        }
        match key.as_str() {
            "attempts" => match Value::read(&nv.value)? {
                Some(Value::Int(n)) if (1..=i128::from(u32::MAX)).contains(&n) => {
                    out.attempts = u32::try_from(n).unwrap_or(u32::MAX);
                }
                _ => {
                    return Err(error(
                        nv.span(),
                        format!(
                            "{}: invalid attempts in #[breaker(retry(...))]: allowed {} (the first call included)",
                            cutout_keys::code::COUNT_TOO_SMALL,
                            cutout_keys::range::COUNT
                        ),
                    ));
                }
            },
            "backoff" => out.backoff = duration(&nv.value, "backoff")?,
            _ => {
                let suggestion = cutout_keys::suggest::nearest(&key, RETRY_KEYS.iter().copied());
                let tail = match suggestion {
                    Some(s) => format!("did you mean {s}?"),
                    None => "allowed attempts, backoff".to_owned(),
                };
                return Err(error(
                    nv.path.span(),
                    format!(
                        "{}: unknown key {key} in #[breaker(retry(...))]: {tail}",
                        cutout_keys::code::UNKNOWN_KEY
                    ),
                ));
            }
        }
    }
    Ok(out)
}

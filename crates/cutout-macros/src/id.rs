//! The default breaker id, `<Trait>#<method>(<parameter types>)`, with types written as in
//! source (`&str`, `Vec<u8>`), without the token spacing `quote` would print, and without
//! the lifetimes `#[async_trait]` adds.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;

/// `PaymentGateway#charge(&str, u64)`. With `async_trait` (the method is one `#[async_trait]`
/// rewrote), its lifetimes are taken out again, so that the id is the one the method has
/// with the attributes in either order: `&'life1 str` is `&str`, `Cow<'life1, str>` is
/// `Cow<'_, str>`, `impl 'async_trait + Display` is `impl Display` (and the parentheses it
/// puts around `&(impl Display)` go). A reference's `'_` is written as nothing in every id
/// (`&'_ str` is `&str`, the same type), since the rewrite cannot tell the two apart.
pub(crate) fn default_id(
    trait_name: &str,
    method: &str,
    types: &[&syn::Type],
    async_trait: bool,
) -> String {
    let types: Vec<String> = types
        .iter()
        .map(|t| {
            let tokens = t.to_token_stream();
            let tokens = if async_trait {
                as_written(tokens)
            } else {
                tokens
            };
            compact(&no_elided_reference_lifetime(tokens).to_string())
        })
        .collect();
    format!("{trait_name}#{method}({})", types.join(", "))
}

/// `tokens` without `#[async_trait]`'s lifetimes: `'lifeN` after `&` dropped, elsewhere
/// `'_`; `+ 'async_trait` dropped.
fn as_written(tokens: TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let lifetime_at = |i: usize| -> Option<String> {
        match (trees.get(i), trees.get(i + 1)) {
            (Some(TokenTree::Punct(p)), Some(TokenTree::Ident(name))) if p.as_char() == '\'' => {
                Some(name.to_string())
            }
            _ => None,
        }
    };
    let added = |name: &str| {
        name == "async_trait"
            || name
                .strip_prefix("life")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut out: Vec<TokenTree> = Vec::with_capacity(trees.len());
    let mut i = 0;
    while i < trees.len() {
        if let Some(name) = lifetime_at(i).filter(|name| added(name)) {
            let after_ref = matches!(out.last(), Some(TokenTree::Punct(p)) if p.as_char() == '&');
            if name == "async_trait" {
                // `X + 'async_trait`, or `impl 'async_trait + X`: one `+` goes with it.
                if matches!(out.last(), Some(TokenTree::Punct(p)) if p.as_char() == '+') {
                    out.pop();
                } else if matches!(trees.get(i + 2), Some(TokenTree::Punct(p)) if p.as_char() == '+')
                {
                    i += 1;
                }
            } else if after_ref {
                // `&'life1 T` is `&T`.
            } else {
                out.extend(quote::quote!('_));
            }
            i += 2;
            continue;
        }
        match &trees[i] {
            // `&'life1 (impl 'async_trait + X)`: parentheses the rewrite puts around an `impl`
            // under a reference or pointer (`&`, `&mut`, `&'a`, `*const`). Those around more
            // than one bound are the user's too (`&(impl A + B)` needs them): kept.
            TokenTree::Group(group)
                if group.delimiter() == proc_macro2::Delimiter::Parenthesis
                    && after_pointer(&out)
                    && matches!(group.stream().into_iter().next(), Some(TokenTree::Ident(i)) if i == "impl")
                    && group.stream().to_string().contains("async_trait")
                    && !top_level_plus(&as_written(group.stream())) =>
            {
                out.extend(as_written(group.stream()));
            }
            TokenTree::Group(group) => {
                let mut inner =
                    proc_macro2::Group::new(group.delimiter(), as_written(group.stream()));
                inner.set_span(group.span());
                out.push(TokenTree::Group(inner));
            }
            tree => out.push(tree.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// Whether `out` ends in a reference or pointer's prefix: `&`, `&mut`, `&'a`, `*const`.
fn after_pointer(out: &[TokenTree]) -> bool {
    match out {
        [.., TokenTree::Punct(p)] => p.as_char() == '&',
        [.., TokenTree::Punct(p), TokenTree::Ident(i)] if (i == "mut" || i == "const") => {
            p.as_char() == '&' || p.as_char() == '*' || p.as_char() == '\''
        }
        [
            ..,
            TokenTree::Punct(amp),
            TokenTree::Punct(tick),
            TokenTree::Ident(_),
        ] => amp.as_char() == '&' && tick.as_char() == '\'',
        _ => false,
    }
}

/// Whether `tokens` hold a `+` outside any group.
fn top_level_plus(tokens: &TokenStream) -> bool {
    tokens
        .clone()
        .into_iter()
        .any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '+'))
}

/// `tokens` with `&'_ T` written `&T`.
fn no_elided_reference_lifetime(tokens: TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::with_capacity(trees.len());
    let mut i = 0;
    while i < trees.len() {
        let after_ref = matches!(out.last(), Some(TokenTree::Punct(p)) if p.as_char() == '&');
        if after_ref
            && let (Some(TokenTree::Punct(p)), Some(TokenTree::Ident(name))) =
                (trees.get(i), trees.get(i + 1))
            && p.as_char() == '\''
            && name == "_"
        {
            i += 2;
            continue;
        }
        match &trees[i] {
            TokenTree::Group(group) => {
                let mut inner = proc_macro2::Group::new(
                    group.delimiter(),
                    no_elided_reference_lifetime(group.stream()),
                );
                inner.set_span(group.span());
                out.push(TokenTree::Group(inner));
            }
            tree => out.push(tree.clone()),
        }
        i += 1;
    }
    out.into_iter().collect()
}

/// Drops every space that does not separate two words (`& 'a str` → `&'a str`,
/// `Vec < u8 >` → `Vec<u8>`, `& mut T` → `&mut T`), and puts one after each comma and
/// semicolon and a higher-ranked binder, and around each arrow, `+` and `=`, as rustfmt
/// writes them (`[u8; 4]`, `fn(u8) -> u8`, `dyn Debug + Sync`, `Iterator<Item = u8>`,
/// `for<'a> fn(&'a u8)`).
fn compact(tokens: &str) -> String {
    let chars: Vec<char> = tokens.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(tokens.len());
    for (i, &c) in chars.iter().enumerate() {
        if c != ' ' {
            out.push(c);
            continue;
        }
        let before = out.chars().last().unwrap_or(' ');
        let after = chars.get(i + 1).copied().unwrap_or(' ');
        let arrow_next = after == '-' && chars.get(i + 2) == Some(&'>');
        // `for<'a> fn(..)`: a higher-ranked binder ends in a space.
        let binder_end = before == '>'
            && out.rfind("for<").is_some_and(|at| {
                !out[at + 4..].contains('<') && !out[..at].chars().last().is_some_and(word)
            });
        // `&mut [u8]`, `*const [u8]`, `&'a [u8]`, `&'a (dyn A + B)`: a word before a bracket
        // or parenthesis keeps its space where it is a qualifier or a lifetime, not a name
        // (`fn(u8)`, `Fn(u8)`).
        let last_word: String = out
            .chars()
            .rev()
            .take_while(|c| word(*c))
            .collect::<Vec<char>>()
            .into_iter()
            .rev()
            .collect();
        let lifetime_before = out
            .len()
            .checked_sub(last_word.len() + 1)
            .is_some_and(|at| out.get(at..).is_some_and(|rest| rest.starts_with('\'')));
        let qualifier_before = matches!(last_word.as_str(), "mut" | "const" | "dyn" | "impl")
            || (lifetime_before && !last_word.is_empty());
        // A binary minus in a length (`[u8; N - 1]`), not an arrow.
        let minus = (after == '-' && !arrow_next) || (before == '-' && !out.ends_with("->"));
        if before == ','
            || before == ';'
            || arrow_next
            || minus
            || (qualifier_before && matches!(after, '[' | '('))
            || out.ends_with("->")
            || binder_end
            || matches!(before, '+' | '=')
            || matches!(after, '+' | '=')
            || (word(before) && (word(after) || after == '\'' || after == '&'))
        {
            out.push(' ');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(types: &[&str]) -> String {
        let parsed: Vec<syn::Type> = types.iter().map(|t| syn::parse_str(t).unwrap()).collect();
        let refs: Vec<&syn::Type> = parsed.iter().collect();
        default_id("PaymentGateway", "charge", &refs, false)
    }

    fn async_trait_id(types: &[&str]) -> String {
        let parsed: Vec<syn::Type> = types.iter().map(|t| syn::parse_str(t).unwrap()).collect();
        let refs: Vec<&syn::Type> = parsed.iter().collect();
        default_id("PaymentGateway", "charge", &refs, true)
    }

    #[test]
    fn async_trait_lifetimes_are_taken_out() {
        assert_eq!(
            async_trait_id(&["&'life1 str", "u64"]),
            "PaymentGateway#charge(&str, u64)"
        );
        assert_eq!(
            async_trait_id(&["&'life1 mut Vec<&'life2 str>"]),
            "PaymentGateway#charge(&mut Vec<&str>)"
        );
        assert_eq!(
            async_trait_id(&["Cow<'life1, str>"]),
            "PaymentGateway#charge(Cow<'_, str>)"
        );
        assert_eq!(
            async_trait_id(&["impl Display + 'async_trait"]),
            "PaymentGateway#charge(impl Display)"
        );
        assert_eq!(
            async_trait_id(&[
                "impl 'async_trait + Display",
                "&'life1 (impl 'async_trait + Debug)"
            ]),
            "PaymentGateway#charge(impl Display, &impl Debug)"
        );
        // A lifetime the user named stays, and so does one that only looks added elsewhere.
        assert_eq!(
            async_trait_id(&["&'a str", "&'lifetime str"]),
            "PaymentGateway#charge(&'a str, &'lifetime str)"
        );
        assert_eq!(id(&["&'life1 str"]), "PaymentGateway#charge(&'life1 str)");
    }

    #[test]
    fn ids_read_as_source() {
        assert_eq!(id(&["&str"]), "PaymentGateway#charge(&str)");
        assert_eq!(
            id(&["&'a str", "u64"]),
            "PaymentGateway#charge(&'a str, u64)"
        );
        assert_eq!(
            id(&["Vec<u8>", "&mut T"]),
            "PaymentGateway#charge(Vec<u8>, &mut T)"
        );
        assert_eq!(
            id(&["HashMap<String, u32>"]),
            "PaymentGateway#charge(HashMap<String, u32>)"
        );
        assert_eq!(
            id(&["&dyn Fn(u8) -> u8"]),
            "PaymentGateway#charge(&dyn Fn(u8) -> u8)"
        );
        assert_eq!(id(&["[u8; 4]"]), "PaymentGateway#charge([u8; 4])");
        assert_eq!(id(&["fn(u8) -> u8"]), "PaymentGateway#charge(fn(u8) -> u8)");
        assert_eq!(id(&["&'_ str"]), "PaymentGateway#charge(&str)");
        assert_eq!(
            id(&[
                "&(dyn Debug+Sync)",
                "impl Iterator<Item=u8>",
                "for<'a> fn(&'a u8)"
            ]),
            "PaymentGateway#charge(&(dyn Debug + Sync), impl Iterator<Item = u8>, for<'a> fn(&'a u8))"
        );
        assert_eq!(id(&[]), "PaymentGateway#charge()");
    }
}

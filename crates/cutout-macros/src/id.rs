//! The default breaker id, `<Trait>#<method>(<parameter types>)`, with types written as in
//! source (`&str`, `Vec<u8>`), without the token spacing `quote` would print.

use quote::ToTokens;

/// `PaymentGateway#charge(&str, u64)`.
pub(crate) fn default_id(trait_name: &str, method: &str, types: &[&syn::Type]) -> String {
    let types: Vec<String> = types
        .iter()
        .map(|t| compact(&t.to_token_stream().to_string()))
        .collect();
    format!("{trait_name}#{method}({})", types.join(", "))
}

/// Drops every space that does not separate two words (`& 'a str` → `&'a str`,
/// `Vec < u8 >` → `Vec<u8>`, `& mut T` → `&mut T`), and puts one after each comma and
/// semicolon and around each arrow, as rustfmt writes them (`[u8; 4]`, `fn(u8) -> u8`).
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
        if before == ','
            || before == ';'
            || arrow_next
            || out.ends_with("->")
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
        default_id("PaymentGateway", "charge", &refs)
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
        assert_eq!(id(&[]), "PaymentGateway#charge()");
    }
}

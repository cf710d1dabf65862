//! A route's header rules: `set-request-headers`, `remove-request-headers`,
//! `set-response-headers`, `remove-response-headers`.
//!
//! Removals apply first, then settings (a set header replaces every value it had). Request
//! rules apply before the gateway adds its own headers (`X-Forwarded-*`, `X-Request-Id`),
//! which therefore always win; response rules apply to the upstream's answers (not to the
//! gateway's own 4xx/5xx). The headers that frame or route a message, or that the gateway
//! writes itself, cannot be named: hop-by-hop headers, `Host`, `Content-Length`,
//! `X-Forwarded-For`/`-Proto`/`-Host`, `X-Request-Id` (`GW-CFG-004`).

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::error::ConfigError;

/// Headers no rule may name, besides the hop-by-hop ones ([`crate::proxy::HOP_BY_HOP`]).
const RESERVED: [&str; 6] = [
    "host",
    "content-length",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-request-id",
];

/// One direction's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Removed, in this order.
    pub remove: Vec<HeaderName>,
    /// Set (replacing any value), in this order.
    pub set: Vec<(HeaderName, HeaderValue)>,
}

impl Rules {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty()
    }

    /// Applies the rules to `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for name in &self.remove {
            headers.remove(name);
        }
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
    }
}

/// A route's rules, both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderRules {
    /// On the request forwarded.
    pub request: Rules,
    /// On the upstream's response.
    pub response: Rules,
}

fn name(path: &str, text: &str) -> Result<HeaderName, ConfigError> {
    let name = HeaderName::from_bytes(text.as_bytes()).map_err(|_| {
        ConfigError::new(
            "GW-CFG-004",
            path,
            text,
            "allowed a header name (letters, digits and -)",
        )
    })?;
    if RESERVED.contains(&name.as_str()) || crate::proxy::HOP_BY_HOP.contains(&name.as_str()) {
        return Err(ConfigError::new(
            "GW-CFG-004",
            path,
            text,
            "a header the gateway frames, routes or writes itself; allowed any other name",
        ));
    }
    Ok(name)
}

/// `remove-*-headers = ["x-debug", ...]`.
pub fn parse_remove(path: &str, value: &toml::Value) -> Result<Vec<HeaderName>, ConfigError> {
    let list = value.as_array().ok_or_else(|| {
        ConfigError::new(
            "GW-CFG-003",
            path,
            &crate::config::show(value),
            "allowed an array of header names",
        )
    })?;
    list.iter()
        .map(|item| {
            let text = item.as_str().ok_or_else(|| {
                ConfigError::new(
                    "GW-CFG-003",
                    path,
                    &crate::config::show(item),
                    "allowed an array of header names",
                )
            })?;
            name(path, text)
        })
        .collect()
}

/// `set-*-headers = { "x-env" = "prod", ... }`.
pub fn parse_set(
    path: &str,
    value: &toml::Value,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let table = value.as_table().ok_or_else(|| {
        ConfigError::new(
            "GW-CFG-003",
            path,
            &crate::config::show(value),
            "allowed a table of header names to values",
        )
    })?;
    table
        .iter()
        .map(|(key, item)| {
            let header = name(path, key)?;
            let text = item.as_str().ok_or_else(|| {
                ConfigError::new(
                    "GW-CFG-003",
                    path,
                    &crate::config::show(item),
                    "allowed a string value",
                )
            })?;
            let value = HeaderValue::from_str(text).map_err(|_| {
                ConfigError::new(
                    "GW-CFG-004",
                    path,
                    text,
                    "allowed a header value (visible characters, spaces and tabs)",
                )
            })?;
            Ok((header, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_apply_before_settings() {
        let rules = Rules {
            remove: vec![
                HeaderName::from_static("x-debug"),
                HeaderName::from_static("x-env"),
            ],
            set: vec![(
                HeaderName::from_static("x-env"),
                HeaderValue::from_static("prod"),
            )],
        };
        let mut h = HeaderMap::new();
        h.insert("x-debug", HeaderValue::from_static("1"));
        h.append("x-env", HeaderValue::from_static("a"));
        h.append("x-env", HeaderValue::from_static("b"));
        rules.apply(&mut h);
        assert!(!h.contains_key("x-debug"));
        assert_eq!(h.get_all("x-env").iter().count(), 1);
        assert_eq!(h["x-env"], "prod");
    }

    #[test]
    fn reserved_and_malformed_names_are_refused_with_codes() {
        let remove = |text: &str| {
            let table: toml::Table = toml::from_str(&format!("v = {text}")).unwrap();
            parse_remove("routes[0].remove-request-headers", &table["v"])
        };
        assert_eq!(remove("[\"host\"]").unwrap_err().code(), "GW-CFG-004");
        assert_eq!(
            remove("[\"X-Request-Id\"]").unwrap_err().code(),
            "GW-CFG-004"
        );
        assert_eq!(remove("[\"bad name\"]").unwrap_err().code(), "GW-CFG-004");
        assert_eq!(remove("[1]").unwrap_err().code(), "GW-CFG-003");
        assert_eq!(
            remove("[\"x-debug\"]").unwrap(),
            [HeaderName::from_static("x-debug")]
        );
    }
}

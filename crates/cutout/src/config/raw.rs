//! The value tree: a document of any serde format, read whole into [`Raw`].
//!
//! Every format (TOML through [`toml::Value`], JSON, YAML through serde) is first read into
//! one tree, so the keys are checked by one piece of code whatever the format, an unknown key
//! is seen instead of skipped, and every error can quote the value as it was written
//! ([`Raw::written`]). What the tree no longer sees: the format's own positions (a TOML error
//! after parsing names its section and key, not its line).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A value of any serde format, kept whole so every key can be checked and every error can
/// quote the value as written.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Raw {
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Datetime(String),
    Array(Vec<Raw>),
    Table(BTreeMap<String, Raw>),
    /// null, bytes, units: nothing a key accepts.
    Other(&'static str),
}

impl From<toml::Value> for Raw {
    fn from(value: toml::Value) -> Raw {
        match value {
            toml::Value::String(s) => Raw::Str(s),
            toml::Value::Integer(i) => Raw::Int(i128::from(i)),
            toml::Value::Float(f) => Raw::Float(f),
            toml::Value::Boolean(b) => Raw::Bool(b),
            toml::Value::Datetime(d) => Raw::Datetime(d.to_string()),
            toml::Value::Array(items) => Raw::Array(items.into_iter().map(Raw::from).collect()),
            toml::Value::Table(table) => {
                Raw::Table(table.into_iter().map(|(k, v)| (k, Raw::from(v))).collect())
            }
        }
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Raw, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a configuration value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(v)))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Raw, E> {
        Ok(Raw::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Raw, E> {
        Ok(Raw::Other("bytes"))
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Other("null"))
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Other("null"))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut table = BTreeMap::new();
        while let Some((key, value)) = map.next_entry::<String, Raw>()? {
            table.insert(key, value);
        }
        Ok(Raw::Table(table))
    }
}

impl Raw {
    /// What kind of value this is, for "found …" in messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Raw::Bool(_) => "a boolean",
            Raw::Int(_) => "an integer",
            Raw::Float(_) => "a float",
            Raw::Str(_) => "a string",
            Raw::Datetime(_) => "a date-time",
            Raw::Array(_) => "an array",
            Raw::Table(_) => "a table",
            Raw::Other(what) => what,
        }
    }

    /// The value as written (TOML-like), shortened for messages.
    pub(super) fn written(&self) -> String {
        const MAX: usize = 60;
        let text = match self {
            Raw::Bool(b) => b.to_string(),
            Raw::Int(i) => i.to_string(),
            Raw::Float(f) => f.to_string(),
            Raw::Str(s) => format!("{s:?}"),
            Raw::Datetime(d) => d.clone(),
            Raw::Array(items) => {
                let items: Vec<String> = items.iter().take(4).map(Raw::written).collect();
                format!("[{}]", items.join(", "))
            }
            Raw::Table(_) => "a table".to_owned(),
            Raw::Other(what) => (*what).to_owned(),
        };
        if text.chars().count() > MAX {
            let mut short: String = text.chars().take(MAX).collect();
            short.push('…');
            short
        } else {
            text
        }
    }
}

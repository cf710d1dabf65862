//! A declared breaker's settings (`#[breaker(...)]`, feature `macros`): the attribute's keys
//! read as one more section, by the same readers, and merged under the registry's
//! configuration: built-in defaults ← `[defaults]` ← the attribute ← the instance's
//! `base-config` ← `[instances.<id>]`, later winning key by key.

use std::collections::BTreeMap;

use super::Config;
use super::error::LoadError;
use super::raw::Raw;
use super::resolve::resolve;
use super::section::{Patch, read_section, section_name};
use crate::declarative::__private::Value;
use crate::settings::Settings;

/// The settings of breaker `id`, declared by `declared_by` with `keys` (kebab-case, checked at
/// compile time one by one; checked here again, with the checks across keys).
pub(crate) fn declared_settings(
    config: Option<&Config>,
    id: &str,
    declared_by: &str,
    keys: &[(&str, Value)],
) -> Result<Settings, LoadError> {
    let table: BTreeMap<String, Raw> = keys
        .iter()
        .map(|(key, value)| ((*key).to_owned(), raw(value)))
        .collect();
    let section = format!("#[breaker] of {declared_by}");
    let attribute = read_section(&section, &Raw::Table(table), false)?;
    let empty = Patch::default();
    let Some(config) = config else {
        return resolve(&section, &[&attribute]);
    };
    let layers = &config.layers;
    let Some(instance) = layers.instances.get(id) else {
        return resolve(&section, &[&layers.defaults, &attribute]);
    };
    let base = config
        .base_config(id)
        .and_then(|name| layers.configs.get(name))
        .unwrap_or(&empty);
    resolve(
        &section_name("instances", id),
        &[&layers.defaults, &attribute, base, instance],
    )
}

fn raw(value: &Value) -> Raw {
    match *value {
        Value::Int(i) => Raw::Int(i),
        Value::Float(f) => Raw::Float(f),
        Value::Str(s) => Raw::Str(s.to_owned()),
        Value::Bool(b) => Raw::Bool(b),
    }
}

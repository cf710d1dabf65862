//! Breakers' [`Settings`] from configuration files: TOML, or any format serde reads (feature `serde`).
//!
//! ```
//! use cutout::Registry;
//! use cutout::config::Config;
//!
//! let config = Config::from_toml(r#"
//!     [defaults]
//!     break-duration = "30s"
//!
//!     [configs.strict]
//!     failure-ratio = "50%"
//!     window-size = 10            # a count window of the last 10 calls
//!     minimum-calls = 10
//!
//!     [instances.payments]
//!     base-config = "strict"
//!     half-open-probes = 2
//! "#)?;
//!
//! let payments = config.instance("payments").unwrap();
//! assert_eq!(payments.failure_ratio(), Some(0.5));
//! assert_eq!(payments.break_duration().as_secs(), 30);
//!
//! let registry = Registry::new();
//! config.register(&registry)?;
//! assert!(registry.contains("payments"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The document
//!
//! - `[defaults]`: keys applied to every instance (and returned by [`Config::settings_for`] for
//!   an id the document does not list).
//! - `[configs.<name>]`: a named set of keys.
//! - `[instances.<id>]`: one breaker. `base-config = "<name>"` starts it from a named config.
//!
//! Each instance's settings are merged key by key, later winning: the built-in defaults
//! ([`Settings::default`]) ← `[defaults]` ← its base config ← its own keys. `[defaults]` and
//! every `[configs.<name>]` must also be valid on their own (built-in defaults ← `[defaults]` ←
//! the config), since [`Config::defaults`] and [`Config::config`] hand them out as settings.
//! Validation is [`SettingsBuilder::build`](crate::SettingsBuilder::build)'s, so a bad value
//! fails with the same `CUT-CFG-001`…`006` or `012`…`015` code it would in code.
//!
//! | key | value | built-in default | can be switched off |
//! |---|---|---|---|
//! | `consecutive-failures` | a whole number ≥ 1 | 5 | yes |
//! | `failure-ratio` | a ratio | off | yes |
//! | `minimum-calls` | a whole number ≥ 1 | 20 | |
//! | `window-type` | `"count"` or `"time"` | `"time"` | |
//! | `window-size` | calls in a count window, 1 to 1,000,000 | none: needed with `"count"` | |
//! | `window-duration` | a duration | `"30s"` | |
//! | `slow-call-threshold` | a duration | off | yes |
//! | `slow-call-ratio` | a ratio | 0.5 | |
//! | `break-duration` | a duration | `"15s"` | |
//! | `max-break-duration` | a duration ≥ `break-duration`: the cap on every break | `"2m"` | |
//! | `break-multiplier` | a number ≥ 1: each consecutive open multiplies the break by it (1: constant) | 2 | |
//! | `jitter` | `"equal"`, `"full"` or `"none"` | `"equal"` | |
//! | `half-open-probes` | a whole number, 1 to 65,535 | 1 | |
//! | `probe-successes` | a whole number ≥ 1 | 2 | |
//! | `half-open-rule` | `"consecutive"` or `"rates"` | `"consecutive"` | |
//! | `max-wait-in-half-open` | a duration | `"60s"` | yes |
//! | `half-open-timeout` | `"open"` or `"close"`: what running out of `max-wait-in-half-open` does | `"open"` | |
//! | `shadow` | `true` or `false` | `false` | |
//! | `enabled` | `true` or `false`: `false` is `initial-state = "disabled"` | `true` | |
//! | `initial-state` | `"closed"`, `"disabled"` or `"isolated"`: the state it starts in and `reset()` returns to | `"closed"` | |
//! | `adaptive` | `true` or `false`: whether the relative rules below are in force | `true` | |
//! | `slow-calls` | only `false` or `"off"`: switches the relative slow-call rule off | on | yes |
//! | `slow-calls-multiple` | a number above 1: slow above this multiple of normal latency | 3 | |
//! | `slow-calls-quantile` | a ratio up to 0.5: the quantile of successful durations that is normal | 0.5 | |
//! | `slow-calls-floor` | a duration: no call is slow below it, whatever the baseline (`"0s"` turns the floor off) | `"1ms"` | |
//! | `slow-calls-margin` | a duration: a slow call must also take this much longer than normal (what a caller adds by itself; `"0s"` judges by the multiple alone) | `"50ms"` | |
//! | `latency-baseline-window` | a duration above the trip window / `slow-calls-quantile` | 10 × the trip window, widened to 2 × trip window / quantile | |
//! | `failures` | only `false` or `"off"`: switches the relative failure rule off | on | yes |
//! | `failures-multiple` | a number above 1: trips above this multiple of the normal failure rate | 5 | |
//! | `failures-floor` | a ratio: the failure rate below which it never trips | 0.05 | |
//! | `failure-baseline-window` | a duration of at least `failures-multiple` × the trip window | 10 × the trip window, widened to `failures-multiple` × it | |
//! | `recovery` | only `false` or `"off"`: switches the recovery ramp off | off | yes |
//! | `recovery-fraction` | a number in (0, 10] or a percentage: the ramp lasts this fraction of the break just served | none: needed once the ramp is on | |
//! | `recovery-initial-fraction` | a ratio below 1: the share of calls admitted when the ramp starts | 0.1 | |
//! | `recovery-min-duration` | a duration: the shortest ramp | `"1s"` | |
//! | `recovery-max-duration` | a duration ≥ `recovery-min-duration`: the longest ramp | `"2m"` | |
//! | `throttle` | a number ≥ 1: adaptive throttling's multiple K instead of opening (needs a time window) | off | yes |
//! | `base-config` | the name of a `[configs.<name>]` (instances only) | none | |
//!
//! - Durations are [humantime](https://docs.rs/humantime) strings: `"30s"`, `"2m"`,
//!   `"1m 30s"`, `"250ms"` (`m` is minutes, `M` months). A bare number is rejected: its unit
//!   would be a guess. Negative durations (`"-5s"`) are rejected with `CUT-CFG-010`; zero is
//!   read and then rejected by validation where a key needs a positive duration (`CUT-CFG-003`).
//! - Ratios are numbers in (0, 1] (`0.5`) or percentage strings (`"50%"`). A plain number is
//!   never read as a percentage: `failure-ratio = 50` fails with `CUT-CFG-001`.
//! - A rule that can be switched off takes `false` or `"off"` for off. `true` is rejected:
//!   it would not say which threshold to use.
//! - The window: `window-size` alone makes a count window and `window-duration` alone a time
//!   window, within the section that sets it; `window-type` says so explicitly and may not sit
//!   next to the other kind's key in one section. A later section can switch the kind:
//!   `[defaults] window-size = 100` with `[instances.x] window-duration = "1m"` gives `x` a
//!   one-minute time window. A count window needs a `window-size` from some section.
//! - The relative rules ([`SlowCalls`], [`Failures`]) are only in force with
//!   `adaptive = true` (the default). Their keys merge one by one like every other key:
//!   `[defaults] slow-calls-multiple = 4` and an instance's `latency-baseline-window = "10m"`
//!   make one rule. `slow-calls = "off"` (`failures = "off"`) switches a rule off; any of its
//!   other keys in a later section switches it back on, with the values the earlier sections
//!   gave the keys it does not set. A section may not switch a rule off and set one of its
//!   keys (`CUT-CFG-006`). `true` is rejected like for other rules: set one of the rule's keys
//!   instead. The trip window counts as 30 s for the baseline bounds when it is a count
//!   window.
//! - The recovery ramp ([`Recovery`]) is off by default. Setting any `recovery-*` key switches
//!   it on; its keys merge one by one like the relative rules', `recovery = "off"` switches it
//!   off (a later section's `recovery-*` key switches it back on with the values earlier
//!   sections gave), a section may not switch it off and set one of its keys (`CUT-CFG-006`),
//!   and `recovery = true` is rejected. `recovery-fraction` has no default, since the ramp's
//!   length is the one thing [`Recovery::over`] cannot guess: once the ramp is on, some
//!   section must give it, else `CUT-CFG-006` names `recovery-fraction` as not set. The other
//!   keys default as [`Recovery::over`] does: `recovery-initial-fraction = 0.1`,
//!   `recovery-min-duration = "1s"`, `recovery-max-duration = "2m"`. `recovery-fraction`
//!   may exceed 1 (`2` or `"200%"`: twice the break); `recovery-initial-fraction` must stay
//!   below 1.
//! - Multiples are plain numbers (`4`, `2.5`), and so is `break-multiplier` (`1.5`; `1` keeps
//!   the break constant; below 1, or not a finite number, fails with `CUT-CFG-015`). A break
//!   schedule function ([`BreakSchedule`](crate::BreakSchedule)) cannot be written in a file:
//!   add one to loaded settings with [`Settings::to_builder`].
//! - `enabled` and `initial-state` set one thing, the initial state: `enabled = false` is
//!   `initial-state = "disabled"`, and `enabled = true` is any other (it turns an earlier
//!   section's `"disabled"` back to `"closed"` and keeps `"isolated"`). A later section
//!   overrides an earlier one key by key; one section that gives both must have them agree
//!   (`enabled = false` with `initial-state = "isolated"` is `CUT-CFG-006`).
//! - Choices (`jitter`, `half-open-rule`, `half-open-timeout`, `initial-state`,
//!   `window-type`) ignore ASCII case; an unknown choice is `CUT-CFG-010`, with the nearest
//!   choice as a suggestion when one is close.
//! - Keys are kebab-case. An unknown key or section is an error (`CUT-CFG-008`) with the
//!   nearest known key as a suggestion (`failure_ratio` → `failure-ratio`), never ignored.
//! - Errors are reported one at a time, in a fixed order: unknown top-level sections, then
//!   `[defaults]`, then configs and instances each sorted by name; within a section by key.
//!
//! # Error codes
//!
//! Every error names the code, the key with its value as written, the section it was written
//! in, and what the key accepts (or the nearest known name). See [`ErrorCode`] for the full
//! list.
//!
//! | code | meaning | example message |
//! |---|---|---|
//! | `CUT-CFG-001` | a ratio is outside (0, 1] (`recovery-fraction`: (0, 10]; `recovery-initial-fraction`: [0.001, 1)) | `CUT-CFG-001: invalid failure-ratio = "150%" in [instances.payments]: allowed a ratio in (0, 1]` |
//! | `CUT-CFG-002` | a count is below 1 | `CUT-CFG-002: invalid minimum-calls = -3 in [defaults]: allowed a whole number of at least 1` |
//! | `CUT-CFG-003` | a duration that must be positive is zero | `CUT-CFG-003: invalid break-duration = "0s" in [configs.fast]: allowed a duration above zero` |
//! | `CUT-CFG-004` | the maximum break is shorter than the first break | `CUT-CFG-004: invalid max-break-duration = "10s" in [instances.ledger]: break-duration = "30s"; allowed a duration at least break-duration` |
//! | `CUT-CFG-005` | a count window is too large | `CUT-CFG-005: invalid window-size = 2000000 in [defaults]: allowed 1 to 1000000 calls` |
//! | `CUT-CFG-006` | keys contradict each other (window kind, probes, a rule or the ramp both switched off and set, `enabled` against `initial-state`) or one needs a key no section gives (`window-size`, `recovery-fraction`) | `CUT-CFG-006: invalid window-duration = "1m" in [defaults]: window-type = "count" takes a window-size, not a window-duration; allowed window keys of one kind per section` |
//! | `CUT-CFG-007` | the document cannot be parsed | `CUT-CFG-007: malformed document at line 2, column 5: …` |
//! | `CUT-CFG-008` | unknown key or section | `CUT-CFG-008: unknown key failure_ratio = 0.5 in [defaults]: did you mean failure-ratio?` |
//! | `CUT-CFG-009` | a value of the wrong type | `CUT-CFG-009: wrong type for minimum-calls = "ten" in [defaults]: found a string; allowed a whole number of at least 1` |
//! | `CUT-CFG-010` | a value that cannot be read | `CUT-CFG-010: invalid break-duration = "-5s" in [defaults]: a duration cannot be negative; allowed a duration such as "30s" or "2m"` |
//! | `CUT-CFG-011` | `base-config` names no config | `CUT-CFG-011: unknown base-config = "stric" in [instances.payments]: there is no [configs.stric]; did you mean "strict"?` |
//! | `CUT-CFG-012` | a baseline window is too short for the trip window | `CUT-CFG-012: invalid latency-baseline-window = "1m" in [defaults]: needs more than 60s: window-duration = 30s (built-in default) / slow-calls-quantile = 0.5 (built-in default); allowed a duration above trip window / slow-calls-quantile` |
//! | `CUT-CFG-013` | a baseline multiple is not above 1 | `CUT-CFG-013: invalid failures-multiple = 1 in [instances.payments]: allowed a finite number above 1` |
//! | `CUT-CFG-014` | the longest recovery ramp is shorter than the shortest | `CUT-CFG-014: invalid recovery-max-duration = "5s" in [defaults]: recovery-min-duration = "10s"; allowed a duration at least recovery-min-duration` |
//! | `CUT-CFG-015` | the break multiplier is below 1 or not a finite number | `CUT-CFG-015: invalid break-multiplier = 0.5 in [defaults]: allowed a finite number of at least 1 (1 keeps the break constant)` |
//! | `CUT-CFG-017` | adaptive throttling's multiple is below 1 or not a finite number | `CUT-CFG-017: invalid throttle = 0.5 in [defaults]: allowed a finite number of at least 1 (2 is the usual choice)` |
//!
//! Where a value came from another section than the one being resolved (a bad `[defaults]`
//! key that only fails once merged into an instance), the message adds
//! `(merged into [instances.<id>])`; a built-in default at fault says `(built-in default)`.
//!
//! # A breaker table in your own configuration
//!
//! [`Settings`] is [`Deserialize`]: a field of your own configuration struct reads a table of
//! the keys above (those of `[defaults]`; `base-config` has no named configs to start from),
//! merged over the built-in defaults and validated exactly as a document's `[defaults]` is,
//! by the same code. Errors have the same codes and words, without the section: the format's
//! error carries the message (through [`serde::de::Error::custom`]) and says where.
//! [`duration`](mod@duration) reads `"30s"`-style fields of your own the same way.
//!
//! ```
//! use std::time::Duration;
//! use cutout::{Settings, TripWindow};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! #[serde(rename_all = "kebab-case")]
//! struct Upstream {
//!     url: String,
//!     #[serde(with = "cutout::config::duration")]
//!     timeout: Duration,
//!     breaker: Settings,
//! }
//!
//! let upstream: Upstream = toml::from_str(r#"
//!     url = "http://inventory:8080"
//!     timeout = "2s"
//!
//!     [breaker]
//!     failure-ratio = "50%"
//!     window-size = 20
//!     break-duration = "30s"
//! "#)?;
//! assert_eq!(upstream.timeout, Duration::from_secs(2));
//! assert_eq!(upstream.breaker.failure_ratio(), Some(0.5));
//! assert_eq!(upstream.breaker.window(), TripWindow::Count(20));
//! assert_eq!(upstream.breaker.break_duration(), Duration::from_secs(30));
//!
//! // The code, the key as written and the nearest known key, as in a configuration file.
//! let typo = toml::from_str::<Upstream>(r#"
//!     url = "http://inventory:8080"
//!     timeout = "2s"
//!     breaker = { failure_ratio = 0.5 }
//! "#).err().unwrap();
//! assert!(typo.to_string().contains(
//!     "CUT-CFG-008: unknown key failure_ratio = 0.5: did you mean failure-ratio?"
//! ));
//! # Ok::<(), toml::de::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{ConfigError, ErrorCode};
use crate::machine::ramp::Recovery;
use crate::relative::{Failures, SlowCalls};
use crate::settings::{
    HalfOpenRule, HalfOpenTimeout, InitialState, Jitter, MAX_COUNT_WINDOW, Settings, TripWindow,
};
use crate::{Breaker, Registry, RegistryError};

pub mod duration;

/// Every key a settings table (`defaults`, `configs.<name>`, `instances.<id>`) accepts, in the
/// order of the docs' table; an instance also takes `base-config`. For tools that check or
/// complete configuration files.
///
/// ```
/// assert!(cutout::config::SETTINGS_KEYS.contains(&"break-duration"));
/// ```
pub const SETTINGS_KEYS: &[&str] = &[
    "consecutive-failures",
    "failure-ratio",
    "minimum-calls",
    "window-type",
    "window-size",
    "window-duration",
    "slow-call-threshold",
    "slow-call-ratio",
    "break-duration",
    "max-break-duration",
    "break-multiplier",
    "jitter",
    "half-open-probes",
    "probe-successes",
    "half-open-rule",
    "max-wait-in-half-open",
    "half-open-timeout",
    "shadow",
    "enabled",
    "initial-state",
    "adaptive",
    "slow-calls",
    "slow-calls-multiple",
    "slow-calls-quantile",
    "slow-calls-floor",
    "slow-calls-margin",
    "latency-baseline-window",
    "failures",
    "failures-multiple",
    "failures-floor",
    "failure-baseline-window",
    "recovery",
    "recovery-fraction",
    "recovery-initial-fraction",
    "recovery-min-duration",
    "recovery-max-duration",
    "throttle",
];

const BASE_CONFIG: &str = "base-config";
const SECTIONS: &[&str] = &["defaults", "configs", "instances"];

const COUNT: &str = "a whole number of at least 1";
const RATIO: &str = "a number in (0, 1] or a percentage such as \"50%\"";
const DURATION: &str = "a duration such as \"30s\" or \"2m\"";
const OFF: &str = ", or false / \"off\" to switch it off";
const MULTIPLE: &str = "a number above 1";
const SWITCH_OFF: &str = "false or \"off\" to switch the rule off";
const SWITCH_RAMP_OFF: &str = "false or \"off\" to switch the ramp off";
const RECOVERY_FRACTION: &str = "a number in (0, 10] or a percentage such as \"25%\"";
const RECOVERY_KEYS: &str =
    "recovery-fraction, recovery-initial-fraction, recovery-min-duration, recovery-max-duration";

/// Settings loaded from a configuration document: the defaults, each named config and each
/// instance, all merged and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    defaults: Settings,
    configs: BTreeMap<String, Settings>,
    instances: BTreeMap<String, Instance>,
}

#[derive(Debug, Clone, PartialEq)]
struct Instance {
    settings: Settings,
    base: Option<String>,
}

impl Config {
    /// Reads a TOML document.
    pub fn from_toml(text: &str) -> Result<Config, LoadError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| syntax_toml(text, &e))?;
        load(Raw::from(toml::Value::Table(table)))
    }

    /// Reads a document from any serde format (JSON, YAML, …). The format's own errors
    /// (malformed input) become `CUT-CFG-007`; everything after is checked here.
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Config, LoadError> {
        let raw = Raw::deserialize(deserializer).map_err(|e| {
            LoadError::new(ErrorCode::Syntax, "", "", None)
                .detail(e.to_string())
                .allowed("a well-formed document")
        })?;
        load(raw)
    }

    /// The settings of `[defaults]` (the built-in defaults when the document has none).
    pub fn defaults(&self) -> &Settings {
        &self.defaults
    }

    /// The settings of `[configs.<name>]`, merged over the defaults.
    pub fn config(&self, name: &str) -> Option<&Settings> {
        self.configs.get(name)
    }

    /// The names of the configs, sorted.
    pub fn config_names(&self) -> impl Iterator<Item = &str> {
        self.configs.keys().map(String::as_str)
    }

    /// The merged settings of `[instances.<id>]`.
    pub fn instance(&self, id: &str) -> Option<&Settings> {
        self.instances.get(id).map(|i| &i.settings)
    }

    /// The `base-config` an instance named, if any.
    pub fn base_config(&self, id: &str) -> Option<&str> {
        self.instances.get(id).and_then(|i| i.base.as_deref())
    }

    /// Every instance with its merged settings, sorted by id.
    pub fn instances(&self) -> impl Iterator<Item = (&str, &Settings)> {
        self.instances
            .iter()
            .map(|(id, i)| (id.as_str(), &i.settings))
    }

    /// The settings for breaker `id`: its instance's, or the defaults for an id the document
    /// does not list (a per-host breaker created on demand).
    pub fn settings_for(&self, id: &str) -> &Settings {
        self.instance(id).unwrap_or(&self.defaults)
    }

    /// Creates (or finds) a breaker in `registry` for every instance, in id order. Fails with
    /// `CUT-REG-001` if the registry already holds one of the ids with other settings; the
    /// breakers created before the failing id stay in the registry.
    pub fn register(&self, registry: &Registry) -> Result<Vec<Breaker>, RegistryError> {
        self.instances()
            .map(|(id, settings)| registry.breaker(id, settings.clone()))
            .collect()
    }
}

impl FromStr for Config {
    type Err = LoadError;

    /// Reads a TOML document, as [`Config::from_toml`].
    fn from_str(text: &str) -> Result<Config, LoadError> {
        Config::from_toml(text)
    }
}

impl<'de> Deserialize<'de> for Config {
    /// Reads a `Config` embedded in a larger document. The error is the format's, carrying
    /// [`LoadError`]'s message (code included); use [`Config::from_deserializer`] to keep the
    /// structured error.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Config, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        load(raw).map_err(de::Error::custom)
    }
}

/// A breaker's settings from a table of the keys a `[defaults]` section takes, inside a
/// configuration of your own (see [the module docs](self#a-breaker-table-in-your-own-configuration)).
/// Keys, merging over the built-in defaults, validation and every error's code and words are
/// those of a document's `[defaults]`; the error is the format's, carrying that message (code
/// included) without a section, since the format says where. `base-config` is not read (there
/// are no named configs to start from). Needs a self-describing format (TOML, JSON, YAML).
impl<'de> Deserialize<'de> for Settings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Settings, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        read_table("", &raw)
            .map(|(_, settings)| settings)
            .map_err(|error| de::Error::custom(error.alone(Alone::Table)))
    }
}

// ---------------------------------------------------------------------------------------------
// The value tree.

/// A value of any serde format, kept whole so every key can be checked and every error can
/// quote the value as written.
#[derive(Debug, Clone, PartialEq)]
enum Raw {
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
    fn kind(&self) -> &'static str {
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
    fn written(&self) -> String {
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

// ---------------------------------------------------------------------------------------------
// Errors.

/// A configuration document could not be loaded: the stable code, where, the key, its value
/// as written and what the key accepts. See the [module docs](self) for the table of codes.
pub struct LoadError(Box<LoadInner>);

struct LoadInner {
    code: ErrorCode,
    section: String,
    key: String,
    value: Option<String>,
    detail: Option<String>,
    allowed: Option<String>,
    suggestion: Option<String>,
    /// How to show the suggestion: keys bare, values quoted.
    quote_suggestion: bool,
    note: Option<String>,
    settings: Option<ConfigError>,
    /// Read outside a document (`section` is then empty and not shown): the format that
    /// carries the error says where.
    alone: Option<Alone>,
}

/// What was read outside a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alone {
    /// A settings table: [`Settings`]'s `Deserialize`.
    Table,
    /// One value: the [`duration`](mod@duration) helpers. The key is then the kind of value (`"duration"`).
    Value,
}

impl LoadError {
    fn new(code: ErrorCode, section: &str, key: &str, value: Option<String>) -> LoadError {
        LoadError(Box::new(LoadInner {
            code,
            section: section.to_owned(),
            key: key.to_owned(),
            value,
            detail: None,
            allowed: None,
            suggestion: None,
            quote_suggestion: true,
            note: None,
            settings: None,
            alone: None,
        }))
    }

    /// Marks an error found outside a document.
    fn alone(mut self, alone: Alone) -> Self {
        self.0.alone = Some(alone);
        self
    }

    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.0.detail = Some(detail.into());
        self
    }

    fn allowed(mut self, allowed: impl Into<String>) -> Self {
        self.0.allowed = Some(allowed.into());
        self
    }

    fn suggest(mut self, suggestion: Option<&str>, quoted: bool) -> Self {
        self.0.suggestion = suggestion.map(str::to_owned);
        self.0.quote_suggestion = quoted;
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The section the value was written in, as a dotted path (`"instances.payments"`,
    /// `"defaults"`); empty for the top level and for malformed documents.
    pub fn section(&self) -> &str {
        &self.0.section
    }

    /// The key at fault, in kebab-case as written (`"failure-ratio"`); a top-level section
    /// name for an unknown section; empty for a malformed document.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The value as written in the document (strings quoted), when there is one.
    pub fn value(&self) -> Option<&str> {
        self.0.value.as_deref()
    }

    /// What the key accepts.
    pub fn allowed_values(&self) -> Option<&str> {
        self.0.allowed.as_deref()
    }

    /// The nearest known key, choice, config name or section, when one is close.
    pub fn suggestion(&self) -> Option<&str> {
        self.0.suggestion.as_deref()
    }

    /// The settings error behind a `CUT-CFG-001`…`006` or `012`…`015`, as the builder
    /// reported it.
    pub fn settings_error(&self) -> Option<&ConfigError> {
        self.0.settings.as_ref()
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &*self.0;
        write!(f, "{}: ", e.code)?;
        if e.code == ErrorCode::Syntax {
            // "malformed document at line 2, column 5: …", or "malformed document: …" when
            // the format gave no position.
            f.write_str("malformed document")?;
            return match e.detail.as_deref() {
                Some(detail) if detail.starts_with("at ") => write!(f, " {detail}"),
                Some(detail) => write!(f, ": {detail}"),
                None => Ok(()),
            };
        } else {
            let headline = match e.code {
                ErrorCode::UnknownKey => "unknown key",
                ErrorCode::WrongType => "wrong type for",
                ErrorCode::UnknownBaseConfig => "unknown",
                _ => "invalid",
            };
            // A settings table that is not a table has no key at fault: the table is.
            let subject = match (e.alone, e.key.is_empty()) {
                (Some(Alone::Table), true) => "settings",
                _ => e.key.as_str(),
            };
            write!(f, "{headline} {subject}")?;
            match (&e.value, e.alone) {
                (Some(value), Some(Alone::Value)) => write!(f, " {value}")?,
                (Some(value), _) => write!(f, " = {value}")?,
                (None, _) => f.write_str(" (not set)")?,
            }
            match e.alone {
                Some(_) => {}
                None if e.section.is_empty() => f.write_str(" at the top level")?,
                None => write!(f, " in [{}]", e.section)?,
            }
            if let Some(note) = &e.note {
                write!(f, " ({note})")?;
            }
        }
        let mut sep = ": ";
        if let Some(detail) = &e.detail {
            write!(f, "{sep}{detail}")?;
            sep = "; ";
        }
        // An unknown key with a close match only needs the match, not the whole key list.
        let show_allowed = !(e.code == ErrorCode::UnknownKey && e.suggestion.is_some());
        if let (true, Some(allowed)) = (show_allowed, &e.allowed) {
            write!(f, "{sep}allowed {allowed}")?;
            sep = "; ";
        }
        if let Some(suggestion) = &e.suggestion {
            if e.quote_suggestion {
                write!(f, "{sep}did you mean {suggestion:?}?")?;
            } else {
                write!(f, "{sep}did you mean {suggestion}?")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadError")
            .field("code", &self.0.code)
            .field("message", &self.to_string())
            .finish()
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .settings
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

fn syntax_toml(text: &str, error: &toml::de::Error) -> LoadError {
    let message = error.message().trim().to_owned();
    let detail = match error.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            format!("at line {line}, column {column}: {message}")
        }
        None => message,
    };
    LoadError::new(ErrorCode::Syntax, "", "", None)
        .detail(detail)
        .allowed("a TOML document")
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// A key and its value in a section, to build errors from.
#[derive(Clone, Copy)]
struct At<'a> {
    section: &'a str,
    key: &'static str,
    value: &'a Raw,
}

impl At<'_> {
    fn error(&self, code: ErrorCode) -> LoadError {
        LoadError::new(code, self.section, self.key, Some(self.value.written()))
    }

    fn wrong_type(&self, allowed: &str) -> LoadError {
        self.error(ErrorCode::WrongType)
            .detail(format!("found {}", self.value.kind()))
            .allowed(allowed)
    }

    fn invalid(&self, detail: impl Into<String>, allowed: &str) -> LoadError {
        self.error(ErrorCode::InvalidValue)
            .detail(detail)
            .allowed(allowed)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading values.

fn off(value: &Raw) -> bool {
    match value {
        Raw::Bool(false) => true,
        Raw::Str(s) => s.trim().eq_ignore_ascii_case("off"),
        _ => false,
    }
}

fn reject_true(at: At<'_>, allowed: &str) -> Result<(), LoadError> {
    if let Raw::Bool(true) = at.value {
        return Err(at.invalid(
            "true does not say which threshold to use; give one, or false / \"off\"",
            allowed,
        ));
    }
    Ok(())
}

fn count(at: At<'_>) -> Result<u32, LoadError> {
    match at.value {
        Raw::Int(i) if *i < 1 => Err(at.error(ErrorCode::CountTooSmall).allowed(COUNT)),
        Raw::Int(i) => u32::try_from(*i).map_err(|_| {
            if at.key == "window-size" {
                at.error(ErrorCode::WindowTooLarge)
                    .allowed(format!("1 to {MAX_COUNT_WINDOW} calls"))
            } else {
                at.invalid(
                    "too large",
                    "a whole number from 1 to 4294967295 (less where the key says so)",
                )
            }
        }),
        _ => Err(at.wrong_type(COUNT)),
    }
}

fn optional_count(at: At<'_>) -> Result<Option<u32>, LoadError> {
    const ALLOWED: &str = "a whole number of at least 1, or false / \"off\" to switch it off";
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, ALLOWED)?;
    match at.value {
        Raw::Int(_) => count(at).map(Some),
        Raw::Str(s) => Err(at.invalid(format!("{s:?} is not a number"), ALLOWED)),
        _ => Err(at.wrong_type(ALLOWED)),
    }
}

fn ratio(at: At<'_>, allowed: &str) -> Result<f64, LoadError> {
    match at.value {
        // Exact for every integer a ratio could sensibly be; huge ones fail validation anyway.
        Raw::Int(i) => Ok(*i as f64),
        Raw::Float(f) => Ok(*f),
        Raw::Str(s) => {
            let trimmed = s.trim();
            let Some(number) = trimmed.strip_suffix('%') else {
                return Err(at.invalid(
                    "a ratio written as a string must be a percentage ending in %",
                    allowed,
                ));
            };
            match number.trim().parse::<f64>() {
                Ok(percent) => Ok(percent / 100.0),
                Err(_) => Err(at.invalid(format!("{number:?} is not a number"), allowed)),
            }
        }
        _ => Err(at.wrong_type(allowed)),
    }
}

fn optional_ratio(at: At<'_>) -> Result<Option<f64>, LoadError> {
    let allowed = &format!("{RATIO}{OFF}");
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, allowed)?;
    ratio(at, allowed).map(Some)
}

fn duration(at: At<'_>, allowed: &str) -> Result<Duration, LoadError> {
    match at.value {
        Raw::Str(s) => {
            let text = s.trim();
            if text.starts_with('-') {
                return Err(at.invalid("a duration cannot be negative", allowed));
            }
            humantime::parse_duration(text).map_err(|e| at.invalid(e.to_string(), allowed))
        }
        Raw::Int(_) | Raw::Float(_) => Err(at
            .error(ErrorCode::WrongType)
            .detail("a bare number has no unit; write \"30s\", \"500ms\", \"2m\"")
            .allowed(allowed)),
        _ => Err(at.wrong_type(allowed)),
    }
}

fn optional_duration(at: At<'_>) -> Result<Option<Duration>, LoadError> {
    let allowed = &format!("{DURATION}{OFF}");
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, allowed)?;
    duration(at, allowed).map(Some)
}

/// A multiple: any finite number; validation checks it is above 1.
fn multiple(at: At<'_>) -> Result<f64, LoadError> {
    match at.value {
        // Exact for every integer a multiple could sensibly be; huge ones fail validation.
        Raw::Int(i) => Ok(*i as f64),
        Raw::Float(f) => Ok(*f),
        _ => Err(at.wrong_type(MULTIPLE)),
    }
}

/// Adaptive throttling's multiple, or false / "off": any number; validation checks it is
/// finite and at least 1.
fn throttle(at: At<'_>) -> Result<Option<f64>, LoadError> {
    const ALLOWED: &str = "a number of at least 1 (adaptive throttling's K), or false / \"off\"";
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, ALLOWED)?;
    match at.value {
        Raw::Int(i) => Ok(Some(*i as f64)),
        Raw::Float(f) => Ok(Some(*f)),
        _ => Err(at.wrong_type(ALLOWED)),
    }
}

/// The break multiplier: any number; validation checks it is finite and at least 1.
fn break_multiplier(at: At<'_>) -> Result<f64, LoadError> {
    match at.value {
        Raw::Int(i) => Ok(*i as f64),
        Raw::Float(f) => Ok(*f),
        _ => Err(at.wrong_type("a number of at least 1")),
    }
}

/// An off switch (`slow-calls`, `failures`, `recovery`): only false or "off" is read. `what`
/// is "rule" or "ramp", `allowed` the matching `SWITCH_OFF` text.
fn switch_off(at: At<'_>, what: &str, keys: &str, allowed: &str) -> Result<(), LoadError> {
    if off(at.value) {
        return Ok(());
    }
    match at.value {
        Raw::Bool(true) => Err(at.invalid(
            format!("the {what} is switched on by setting one of {keys}"),
            allowed,
        )),
        Raw::Str(_) => Err(at.invalid("not \"off\"", allowed)),
        _ => Err(at.wrong_type(allowed)),
    }
}

fn boolean(at: At<'_>) -> Result<bool, LoadError> {
    match at.value {
        Raw::Bool(b) => Ok(*b),
        _ => Err(at.wrong_type("true or false")),
    }
}

fn choice<T: Copy>(
    at: At<'_>,
    options: &[(&'static str, T)],
    allowed: &str,
) -> Result<T, LoadError> {
    let Raw::Str(s) = at.value else {
        return Err(at.wrong_type(allowed));
    };
    let text = s.trim();
    if let Some((_, value)) = options
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
    {
        return Ok(*value);
    }
    let suggestion = crate::suggest::nearest(text, options.iter().map(|(name, _)| *name));
    Err(at
        .invalid("not one of the choices", allowed)
        .suggest(suggestion, true))
}

// ---------------------------------------------------------------------------------------------
// Sections.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowKind {
    Count,
    Time,
}

/// Where a key's value was written, for errors found after merging.
#[derive(Debug, Clone)]
struct Origin {
    section: String,
    written: String,
}

/// One section's keys, read but not merged.
#[derive(Debug, Clone, Default)]
struct Patch {
    consecutive_failures: Option<Option<u32>>,
    failure_ratio: Option<Option<f64>>,
    minimum_calls: Option<u32>,
    window_kind: Option<WindowKind>,
    window_size: Option<u32>,
    window_duration: Option<Duration>,
    slow_call_threshold: Option<Option<Duration>>,
    slow_call_ratio: Option<f64>,
    break_duration: Option<Duration>,
    max_break_duration: Option<Duration>,
    break_multiplier: Option<f64>,
    jitter: Option<Jitter>,
    half_open_probes: Option<u32>,
    probe_successes: Option<u32>,
    half_open_rule: Option<HalfOpenRule>,
    max_wait_in_half_open: Option<Option<Duration>>,
    half_open_timeout: Option<HalfOpenTimeout>,
    shadow: Option<bool>,
    enabled: Option<bool>,
    initial_state: Option<InitialState>,
    adaptive: Option<bool>,
    slow_calls_off: bool,
    slow_calls_multiple: Option<f64>,
    slow_calls_quantile: Option<f64>,
    slow_calls_floor: Option<Duration>,
    slow_calls_margin: Option<Duration>,
    latency_baseline_window: Option<Duration>,
    failures_off: bool,
    failures_multiple: Option<f64>,
    failures_floor: Option<f64>,
    failure_baseline_window: Option<Duration>,
    recovery_off: bool,
    recovery_fraction: Option<f64>,
    recovery_initial_fraction: Option<f64>,
    recovery_min_duration: Option<Duration>,
    recovery_max_duration: Option<Duration>,
    throttle: Option<Option<f64>>,
    base: Option<String>,
    origins: BTreeMap<&'static str, Origin>,
}

/// `prefix.name`, quoting a name that is not a bare TOML key.
fn section_name(prefix: &str, name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        format!("{prefix}.{name}")
    } else {
        format!("{prefix}.{name:?}")
    }
}

fn read_section(section: &str, value: &Raw, instance: bool) -> Result<Patch, LoadError> {
    let Raw::Table(table) = value else {
        let key = section.rsplit('.').next().unwrap_or(section);
        return Err(LoadError::new(
            ErrorCode::WrongType,
            parent(section),
            key,
            Some(value.written()),
        )
        .detail(format!("found {}", value.kind()))
        .allowed("a table of settings keys"));
    };
    let mut patch = Patch::default();
    for (name, value) in table {
        let Some(key) = SETTINGS_KEYS
            .iter()
            .chain(std::iter::once(&BASE_CONFIG))
            .copied()
            .find(|k| *k == name.as_str())
        else {
            let candidates = SETTINGS_KEYS
                .iter()
                .copied()
                .chain(instance.then_some(BASE_CONFIG));
            let suggestion = crate::suggest::nearest(name, candidates);
            let allowed = if instance {
                format!("one of {}, base-config", SETTINGS_KEYS.join(", "))
            } else {
                format!("one of {}", SETTINGS_KEYS.join(", "))
            };
            return Err(LoadError::new(
                ErrorCode::UnknownKey,
                section,
                name,
                Some(value.written()),
            )
            .allowed(allowed)
            .suggest(suggestion, false));
        };
        let at = At {
            section,
            key,
            value,
        };
        read_key(&mut patch, at, instance)?;
        patch.origins.insert(
            key,
            Origin {
                section: section.to_owned(),
                written: value.written(),
            },
        );
    }
    window_kind(&mut patch, section, table)?;
    switched_off_alone(&patch, section, table)?;
    initial_state_agrees(&patch, section, table)?;
    Ok(patch)
}

fn parent(section: &str) -> &str {
    section.rsplit_once('.').map_or("", |(parent, _)| parent)
}

fn read_key(patch: &mut Patch, at: At<'_>, instance: bool) -> Result<(), LoadError> {
    let duration_allowed = DURATION;
    match at.key {
        "consecutive-failures" => patch.consecutive_failures = Some(optional_count(at)?),
        "failure-ratio" => patch.failure_ratio = Some(optional_ratio(at)?),
        "minimum-calls" => patch.minimum_calls = Some(count(at)?),
        "window-type" => {
            patch.window_kind = Some(choice(
                at,
                &[("count", WindowKind::Count), ("time", WindowKind::Time)],
                "\"count\" or \"time\"",
            )?);
        }
        "window-size" => patch.window_size = Some(count(at)?),
        "window-duration" => patch.window_duration = Some(duration(at, duration_allowed)?),
        "slow-call-threshold" => patch.slow_call_threshold = Some(optional_duration(at)?),
        "slow-call-ratio" => patch.slow_call_ratio = Some(ratio(at, RATIO)?),
        "break-duration" => patch.break_duration = Some(duration(at, duration_allowed)?),
        "max-break-duration" => patch.max_break_duration = Some(duration(at, duration_allowed)?),
        "break-multiplier" => patch.break_multiplier = Some(break_multiplier(at)?),
        "jitter" => {
            patch.jitter = Some(choice(
                at,
                &[
                    ("equal", Jitter::Equal),
                    ("full", Jitter::Full),
                    ("none", Jitter::None),
                ],
                "\"equal\", \"full\" or \"none\"",
            )?);
        }
        "half-open-probes" => patch.half_open_probes = Some(count(at)?),
        "probe-successes" => patch.probe_successes = Some(count(at)?),
        "half-open-rule" => {
            patch.half_open_rule = Some(choice(
                at,
                &[
                    ("consecutive", HalfOpenRule::Consecutive),
                    ("rates", HalfOpenRule::Rates),
                ],
                "\"consecutive\" or \"rates\"",
            )?);
        }
        "max-wait-in-half-open" => patch.max_wait_in_half_open = Some(optional_duration(at)?),
        "half-open-timeout" => {
            patch.half_open_timeout = Some(choice(
                at,
                &[
                    ("open", HalfOpenTimeout::Open),
                    ("close", HalfOpenTimeout::Close),
                ],
                "\"open\" or \"close\"",
            )?);
        }
        "shadow" => patch.shadow = Some(boolean(at)?),
        "enabled" => patch.enabled = Some(boolean(at)?),
        "initial-state" => {
            patch.initial_state = Some(choice(
                at,
                &[
                    ("closed", InitialState::Closed),
                    ("disabled", InitialState::Disabled),
                    ("isolated", InitialState::Isolated),
                ],
                "\"closed\", \"disabled\" or \"isolated\"",
            )?);
        }
        "adaptive" => patch.adaptive = Some(boolean(at)?),
        "slow-calls" => {
            switch_off(
                at,
                "rule",
                "slow-calls-multiple, slow-calls-quantile, slow-calls-floor, slow-calls-margin, \
                 latency-baseline-window",
                SWITCH_OFF,
            )?;
            patch.slow_calls_off = true;
        }
        "slow-calls-multiple" => patch.slow_calls_multiple = Some(multiple(at)?),
        "slow-calls-quantile" => {
            patch.slow_calls_quantile = Some(ratio(
                at,
                "a number in (0, 0.5] or a percentage such as \"25%\"",
            )?);
        }
        "slow-calls-floor" => patch.slow_calls_floor = Some(duration(at, duration_allowed)?),
        "slow-calls-margin" => patch.slow_calls_margin = Some(duration(at, duration_allowed)?),
        "latency-baseline-window" => {
            patch.latency_baseline_window = Some(duration(at, duration_allowed)?);
        }
        "failures" => {
            switch_off(
                at,
                "rule",
                "failures-multiple, failures-floor, failure-baseline-window",
                SWITCH_OFF,
            )?;
            patch.failures_off = true;
        }
        "failures-multiple" => patch.failures_multiple = Some(multiple(at)?),
        "failures-floor" => patch.failures_floor = Some(ratio(at, RATIO)?),
        "failure-baseline-window" => {
            patch.failure_baseline_window = Some(duration(at, duration_allowed)?);
        }
        "recovery" => {
            switch_off(at, "ramp", RECOVERY_KEYS, SWITCH_RAMP_OFF)?;
            patch.recovery_off = true;
        }
        "recovery-fraction" => patch.recovery_fraction = Some(ratio(at, RECOVERY_FRACTION)?),
        "recovery-initial-fraction" => {
            patch.recovery_initial_fraction = Some(ratio(
                at,
                "a number in (0, 1) or a percentage such as \"10%\"",
            )?);
        }
        "recovery-min-duration" => {
            patch.recovery_min_duration = Some(duration(at, duration_allowed)?);
        }
        "recovery-max-duration" => {
            patch.recovery_max_duration = Some(duration(at, duration_allowed)?);
        }
        "throttle" => patch.throttle = Some(throttle(at)?),
        BASE_CONFIG => {
            if !instance {
                return Err(at
                    .error(ErrorCode::UnknownKey)
                    .detail("base-config is only read in [instances.<id>]")
                    .allowed(format!("one of {}", SETTINGS_KEYS.join(", "))));
            }
            match at.value {
                Raw::Str(name) => patch.base = Some(name.clone()),
                _ => return Err(at.wrong_type("the name of a [configs.<name>] section")),
            }
        }
        // `read_section` only passes keys from `SETTINGS_KEYS` and `BASE_CONFIG`; a key added to the
        // table without a reader here still fails cleanly instead of panicking.
        _ => {
            return Err(at
                .error(ErrorCode::UnknownKey)
                .detail("this key is not read yet"));
        }
    }
    Ok(())
}

/// Decides the window kind a section sets, rejecting keys of both kinds in one section.
fn window_kind(
    patch: &mut Patch,
    section: &str,
    table: &BTreeMap<String, Raw>,
) -> Result<(), LoadError> {
    let contradiction = |key: &'static str, detail: &str| {
        let value = table.get(key).map(Raw::written);
        LoadError::new(ErrorCode::Contradiction, section, key, value)
            .detail(detail)
            .allowed("window keys of one kind per section")
    };
    match (patch.window_kind, patch.window_size, patch.window_duration) {
        (Some(WindowKind::Count), _, Some(_)) => Err(contradiction(
            "window-duration",
            "window-type = \"count\" takes a window-size, not a window-duration",
        )),
        (Some(WindowKind::Time), Some(_), _) => Err(contradiction(
            "window-size",
            "window-type = \"time\" takes a window-duration, not a window-size",
        )),
        (None, Some(_), Some(_)) => Err(contradiction(
            "window-duration",
            "both window-size and window-duration are set; say which with window-type",
        )),
        (None, Some(_), None) => {
            patch.window_kind = Some(WindowKind::Count);
            Ok(())
        }
        (None, None, Some(_)) => {
            patch.window_kind = Some(WindowKind::Time);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Rejects a section whose `enabled` and `initial-state` disagree (they set one thing).
fn initial_state_agrees(
    patch: &Patch,
    section: &str,
    table: &BTreeMap<String, Raw>,
) -> Result<(), LoadError> {
    let (Some(enabled), Some(state)) = (patch.enabled, patch.initial_state) else {
        return Ok(());
    };
    if enabled == (state != InitialState::Disabled) {
        return Ok(());
    }
    let value = table.get("initial-state").map(Raw::written);
    let detail = if enabled {
        "enabled = true starts the breaker closed or isolated, not disabled"
    } else {
        "enabled = false starts the breaker disabled"
    };
    Err(
        LoadError::new(ErrorCode::Contradiction, section, "initial-state", value)
            .detail(detail)
            .allowed("enabled or initial-state in one section, or both saying the same"),
    )
}

/// Rejects a section that switches a relative rule (or the recovery ramp) off and sets one of
/// its keys.
fn switched_off_alone(
    patch: &Patch,
    section: &str,
    table: &BTreeMap<String, Raw>,
) -> Result<(), LoadError> {
    let rules: [(bool, &str, &str, &[&'static str]); 3] = [
        (
            patch.slow_calls_off,
            "slow-calls",
            "rule",
            // Sorted, so the first one set is the first in the section's key order.
            &[
                "latency-baseline-window",
                "slow-calls-floor",
                "slow-calls-margin",
                "slow-calls-multiple",
                "slow-calls-quantile",
            ],
        ),
        (
            patch.failures_off,
            "failures",
            "rule",
            &[
                "failure-baseline-window",
                "failures-floor",
                "failures-multiple",
            ],
        ),
        (
            patch.recovery_off,
            "recovery",
            "ramp",
            &[
                "recovery-fraction",
                "recovery-initial-fraction",
                "recovery-max-duration",
                "recovery-min-duration",
            ],
        ),
    ];
    for (switched_off, switch, what, keys) in rules {
        if !switched_off {
            continue;
        }
        if let Some((key, value)) = keys
            .iter()
            .find_map(|key| table.get(*key).map(|value| (*key, value)))
        {
            let written = table.get(switch).map(Raw::written).unwrap_or_default();
            return Err(LoadError::new(
                ErrorCode::Contradiction,
                section,
                key,
                Some(value.written()),
            )
            .detail(format!(
                "{switch} = {written} switches the {what} off, so {key} would not apply"
            ))
            .allowed(format!(
                "either {switch} = \"off\" or the {what}'s keys in one section"
            )));
        }
    }
    Ok(())
}

/// One settings table on its own: its keys read, then merged over the built-in defaults and
/// validated. A document's `[defaults]`, and [`Settings`]'s `Deserialize` (with `section`
/// empty), so both read and check every key the same way.
fn read_table(section: &str, value: &Raw) -> Result<(Patch, Settings), LoadError> {
    let patch = read_section(section, value, false)?;
    let settings = resolve(section, &[&patch])?;
    Ok((patch, settings))
}

/// Merges `layers` over the built-in defaults and validates: the settings of `section`.
fn resolve(section: &str, layers: &[&Patch]) -> Result<Settings, LoadError> {
    let defaults = Settings::default();
    let mut b = defaults.to_builder();
    let (mut kind, mut size, mut window_duration) = match defaults.window() {
        TripWindow::Count(n) => (WindowKind::Count, Some(n), Duration::from_secs(30)),
        TripWindow::Time(d) => (WindowKind::Time, None, d),
    };
    // The relative rules merge key by key: the latest value of each key, and on unless the
    // latest section to mention the rule switched it off.
    let mut slow_calls = defaults.slow_calls();
    let mut slow_keys = slow_calls.unwrap_or(SlowCalls::above(3.0));
    let mut failures = defaults.failures();
    let mut failure_keys = failures.unwrap_or(Failures::above(5.0));
    // The recovery ramp merges the same way, but its fraction has no default: `None` until a
    // section gives one. `ramp_switched_on` is the other key that last switched it on.
    let mut ramp_on = defaults.recovery().is_some();
    let mut ramp_fraction = defaults.recovery().map(|r| r.fraction());
    let mut ramp_keys = defaults.recovery().unwrap_or(Recovery::over(1.0));
    let mut ramp_switched_on: Option<&'static str> = None;
    // `enabled` and `initial-state` merge into one value, the initial state.
    let mut initial_state = defaults.initial_state();
    let mut origins: BTreeMap<&'static str, &Origin> = BTreeMap::new();
    for layer in layers {
        if let Some(v) = layer.consecutive_failures {
            b = b.consecutive_failures(v);
        }
        if let Some(v) = layer.failure_ratio {
            b = b.failure_ratio(v);
        }
        if let Some(v) = layer.minimum_calls {
            b = b.minimum_calls(v);
        }
        if let Some(v) = layer.window_kind {
            kind = v;
        }
        if let Some(v) = layer.window_size {
            size = Some(v);
        }
        if let Some(v) = layer.window_duration {
            window_duration = v;
        }
        if let Some(v) = layer.slow_call_threshold {
            b = b.slow_call_threshold(v);
        }
        if let Some(v) = layer.slow_call_ratio {
            b = b.slow_call_ratio(v);
        }
        if let Some(v) = layer.break_duration {
            b = b.break_duration(v);
        }
        if let Some(v) = layer.max_break_duration {
            b = b.max_break_duration(v);
        }
        if let Some(v) = layer.throttle {
            b = b.throttle(v);
        }
        if let Some(v) = layer.break_multiplier {
            b = b.break_multiplier(v);
        }
        if let Some(v) = layer.jitter {
            b = b.jitter(v);
        }
        if let Some(v) = layer.half_open_probes {
            b = b.half_open_probes(v);
        }
        if let Some(v) = layer.probe_successes {
            b = b.probe_successes(v);
        }
        if let Some(v) = layer.half_open_rule {
            b = b.half_open_rule(v);
        }
        if let Some(v) = layer.max_wait_in_half_open {
            b = b.max_wait_in_half_open(v);
        }
        if let Some(v) = layer.half_open_timeout {
            b = b.half_open_timeout(v);
        }
        if let Some(v) = layer.shadow {
            b = b.shadow(v);
        }
        match layer.enabled {
            Some(false) => initial_state = InitialState::Disabled,
            Some(true) if initial_state == InitialState::Disabled => {
                initial_state = InitialState::Closed;
            }
            _ => {}
        }
        if let Some(v) = layer.initial_state {
            initial_state = v;
        }
        if let Some(v) = layer.adaptive {
            b = b.adaptive(v);
        }
        if layer.slow_calls_off {
            slow_calls = None;
        }
        if let Some(v) = layer.slow_calls_multiple {
            slow_keys.multiple = v;
            slow_calls = Some(slow_keys);
        }
        if let Some(v) = layer.slow_calls_quantile {
            slow_keys.quantile = v;
            slow_calls = Some(slow_keys);
        }
        if let Some(v) = layer.slow_calls_floor {
            slow_keys = slow_keys.floor(v);
            slow_calls = Some(slow_keys);
        }
        if let Some(v) = layer.slow_calls_margin {
            slow_keys = slow_keys.margin(v);
            slow_calls = Some(slow_keys);
        }
        if let Some(v) = layer.latency_baseline_window {
            slow_keys.window = Some(v);
            slow_calls = Some(slow_keys);
        }
        if layer.failures_off {
            failures = None;
        }
        if let Some(v) = layer.failures_multiple {
            failure_keys.multiple = v;
            failures = Some(failure_keys);
        }
        if let Some(v) = layer.failures_floor {
            failure_keys.floor = v;
            failures = Some(failure_keys);
        }
        if let Some(v) = layer.failure_baseline_window {
            failure_keys.window = Some(v);
            failures = Some(failure_keys);
        }
        if layer.recovery_off {
            ramp_on = false;
        }
        if let Some(v) = layer.recovery_fraction {
            ramp_fraction = Some(v);
            ramp_on = true;
        }
        // The first key in the section's (sorted) order is the one an error names.
        let mut switched_on = None;
        if let Some(v) = layer.recovery_initial_fraction {
            ramp_keys.initial = v;
            switched_on.get_or_insert("recovery-initial-fraction");
        }
        if let Some(v) = layer.recovery_max_duration {
            ramp_keys.max = v;
            switched_on.get_or_insert("recovery-max-duration");
        }
        if let Some(v) = layer.recovery_min_duration {
            ramp_keys.min = v;
            switched_on.get_or_insert("recovery-min-duration");
        }
        if switched_on.is_some() {
            ramp_on = true;
            ramp_switched_on = switched_on;
        }
        origins.extend(layer.origins.iter().map(|(k, o)| (*k, o)));
    }
    let window = match (kind, size) {
        (WindowKind::Time, _) => TripWindow::Time(window_duration),
        (WindowKind::Count, Some(n)) => TripWindow::Count(n),
        (WindowKind::Count, None) => {
            let from = origins.get("window-type").map_or(section, |o| &o.section);
            let detail = if from == section {
                "window-type = \"count\" needs a window-size".to_owned()
            } else {
                format!("window-type = \"count\" (from [{from}]) needs a window-size")
            };
            return Err(
                LoadError::new(ErrorCode::Contradiction, section, "window-size", None)
                    .detail(detail)
                    .allowed(format!("1 to {MAX_COUNT_WINDOW} calls")),
            );
        }
    };
    let recovery = match (ramp_on, ramp_fraction) {
        (false, _) => None,
        (true, Some(fraction)) => Some(Recovery {
            fraction,
            ..ramp_keys
        }),
        (true, None) => {
            // Only a key other than recovery-fraction can have switched the ramp on here.
            let key = ramp_switched_on.unwrap_or("recovery");
            let switch = match origins.get(key) {
                Some(o) if o.section == section => format!("{key} = {}", o.written),
                Some(o) => format!("{key} = {} (from [{}])", o.written, o.section),
                None => key.to_owned(),
            };
            return Err(LoadError::new(
                ErrorCode::Contradiction,
                section,
                "recovery-fraction",
                None,
            )
            .detail(format!(
                "{switch} switches the recovery ramp on, which needs a recovery-fraction"
            ))
            .allowed(RECOVERY_FRACTION));
        }
    };
    b = b
        .slow_calls(slow_calls)
        .failures(failures)
        .recovery(recovery)
        .initial_state(initial_state);
    b.window(window).build().map_err(|error| {
        let origin = origins.get(error.key());
        let (at_section, value, note) = match origin {
            Some(o) if o.section == section => (section, o.written.clone(), None),
            Some(o) => (
                o.section.as_str(),
                o.written.clone(),
                Some(format!("merged into [{section}]")),
            ),
            None => (
                section,
                error.value().to_owned(),
                Some("built-in default".to_owned()),
            ),
        };
        let mut load = LoadError::new(error.code(), at_section, error.key(), Some(value))
            .allowed(error.allowed());
        if error.code() == ErrorCode::MaxBreakBelowBreak {
            // Name the other half of the comparison too.
            // Say where break-duration came from when the message points elsewhere.
            let detail = match origins.get("break-duration") {
                Some(o) if o.section == at_section => format!("break-duration = {}", o.written),
                Some(o) => format!("break-duration = {} (from [{}])", o.written, o.section),
                None => "break-duration is the built-in default".to_owned(),
            };
            load = load.detail(detail);
        }
        if error.code() == ErrorCode::MaxBelowMin {
            // The recovery ramp's bounds: name the minimum it is compared with.
            let min = recovery.map_or(Duration::from_secs(1), |r| r.min());
            let detail = match origins.get("recovery-min-duration") {
                Some(o) if o.section == at_section => {
                    format!("recovery-min-duration = {}", o.written)
                }
                Some(o) => format!(
                    "recovery-min-duration = {} (from [{}])",
                    o.written, o.section
                ),
                None => format!("recovery-min-duration = {min:?} (built-in default)"),
            };
            load = load.detail(detail);
        }
        if error.code() == ErrorCode::BaselineTooShort {
            // Name the keys the bound comes from, and where each was written.
            let named = |key: &str, built_in: String| match origins.get(key) {
                Some(o) if o.section == at_section => format!("{key} = {}", o.written),
                Some(o) => format!("{key} = {} (from [{}])", o.written, o.section),
                None => format!("{key} = {built_in} (built-in default)"),
            };
            let (trip, span) = match window {
                TripWindow::Time(d) => (named("window-duration", format!("{d:?}")), d),
                TripWindow::Count(n) => (
                    format!(
                        "{} (a count window counts as 30s)",
                        named("window-size", n.to_string())
                    ),
                    Duration::from_secs(30),
                ),
            };
            let detail = if error.key() == "latency-baseline-window" {
                let quantile = slow_calls.map_or(0.5, |s| s.quantile);
                format!(
                    "needs more than {}: {trip} / {}",
                    bound(span.as_secs_f64() / quantile),
                    named("slow-calls-quantile", quantile.to_string())
                )
            } else {
                let multiple = failures.map_or(5.0, |f| f.multiple);
                format!(
                    "needs at least {}: {} × {trip}",
                    bound(span.as_secs_f64() * multiple),
                    named("failures-multiple", multiple.to_string())
                )
            };
            load = load.detail(detail);
        }
        load.0.note = note;
        load.0.settings = Some(error);
        load
    })
}

/// A bound in seconds, shown as a duration (or in seconds when no duration holds it).
fn bound(secs: f64) -> String {
    Duration::try_from_secs_f64(secs).map_or_else(|_| format!("{secs}s"), |d| format!("{d:?}"))
}

fn table_of_tables<'a>(name: &str, value: &'a Raw) -> Result<&'a BTreeMap<String, Raw>, LoadError> {
    match value {
        Raw::Table(table) => Ok(table),
        _ => Err(
            LoadError::new(ErrorCode::WrongType, "", name, Some(value.written()))
                .detail(format!("found {}", value.kind()))
                .allowed(format!("a table of [{name}.<name>] sections")),
        ),
    }
}

fn load(root: Raw) -> Result<Config, LoadError> {
    let Raw::Table(root) = root else {
        return Err(
            LoadError::new(ErrorCode::WrongType, "", "", Some(root.written()))
                .detail(format!("found {} at the top level", root.kind()))
                .allowed("a table with [defaults], [configs.<name>] and [instances.<id>]"),
        );
    };
    if let Some((name, value)) = root.iter().find(|(k, _)| !SECTIONS.contains(&k.as_str())) {
        let suggestion = crate::suggest::nearest(name, SECTIONS.iter().copied());
        return Err(
            LoadError::new(ErrorCode::UnknownKey, "", name, Some(value.written()))
                .allowed("the sections defaults, configs and instances")
                .suggest(suggestion, false),
        );
    }

    let (default_patch, defaults) = match root.get("defaults") {
        Some(value) => read_table("defaults", value)?,
        None => (Patch::default(), Settings::default()),
    };

    let mut config_patches = BTreeMap::new();
    let mut configs = BTreeMap::new();
    if let Some(value) = root.get("configs") {
        for (name, value) in table_of_tables("configs", value)? {
            let section = section_name("configs", name);
            let patch = read_section(&section, value, false)?;
            configs.insert(name.clone(), resolve(&section, &[&default_patch, &patch])?);
            config_patches.insert(name.clone(), patch);
        }
    }

    let mut instances = BTreeMap::new();
    if let Some(value) = root.get("instances") {
        for (id, value) in table_of_tables("instances", value)? {
            let section = section_name("instances", id);
            let patch = read_section(&section, value, true)?;
            let settings = match &patch.base {
                Some(base) => {
                    let Some(base_patch) = config_patches.get(base) else {
                        let suggestion = crate::suggest::nearest(
                            base,
                            config_patches.keys().map(String::as_str),
                        );
                        let detail = format!("there is no [{}]", section_name("configs", base));
                        let allowed = if config_patches.is_empty() {
                            "the name of a [configs.<name>] section (the document has none)"
                                .to_owned()
                        } else {
                            let names: Vec<&str> =
                                config_patches.keys().map(String::as_str).collect();
                            format!("one of {}", names.join(", "))
                        };
                        let written = Raw::Str(base.clone()).written();
                        let mut error = LoadError::new(
                            ErrorCode::UnknownBaseConfig,
                            &section,
                            BASE_CONFIG,
                            Some(written),
                        )
                        .detail(detail)
                        .suggest(suggestion, true);
                        if suggestion.is_none() {
                            error = error.allowed(allowed);
                        }
                        return Err(error);
                    };
                    resolve(&section, &[&default_patch, base_patch, &patch])?
                }
                None => resolve(&section, &[&default_patch, &patch])?,
            };
            instances.insert(
                id.clone(),
                Instance {
                    settings,
                    base: patch.base.clone(),
                },
            );
        }
    }

    Ok(Config {
        defaults,
        configs,
        instances,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_error_is_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<LoadError>();
        assert_send_sync::<Config>();
        assert_eq!(
            std::mem::size_of::<LoadError>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn empty_document_is_the_built_in_defaults() {
        let config = Config::from_toml("").unwrap();
        assert_eq!(config.defaults(), &Settings::default());
        assert_eq!(config.instances().count(), 0);
        assert_eq!(config.settings_for("anything"), &Settings::default());
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é=", 2), (1, 2));
    }

    #[test]
    fn section_names_quote_what_is_not_bare() {
        assert_eq!(section_name("instances", "payments"), "instances.payments");
        assert_eq!(
            section_name("instances", "https://a:1"),
            "instances.\"https://a:1\""
        );
        assert_eq!(section_name("configs", ""), "configs.\"\"");
    }
}

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
//! - The relative rules ([`SlowCalls`](crate::SlowCalls), [`Failures`](crate::Failures)) are only in force with
//!   `adaptive = true` (the default). Their keys merge one by one like every other key:
//!   `[defaults] slow-calls-multiple = 4` and an instance's `latency-baseline-window = "10m"`
//!   make one rule. `slow-calls = "off"` (`failures = "off"`) switches a rule off; any of its
//!   other keys in a later section switches it back on, with the values the earlier sections
//!   gave the keys it does not set. A section may not switch a rule off and set one of its
//!   keys (`CUT-CFG-006`). `true` is rejected like for other rules: set one of the rule's keys
//!   instead. The trip window counts as 30 s for the baseline bounds when it is a count
//!   window.
//! - The recovery ramp ([`Recovery`](crate::Recovery)) is off by default. Setting any `recovery-*` key switches
//!   it on; its keys merge one by one like the relative rules', `recovery = "off"` switches it
//!   off (a later section's `recovery-*` key switches it back on with the values earlier
//!   sections gave), a section may not switch it off and set one of its keys (`CUT-CFG-006`),
//!   and `recovery = true` is rejected. `recovery-fraction` has no default, since the ramp's
//!   length is the one thing [`Recovery::over`](crate::Recovery::over) cannot guess: once the ramp is on, some
//!   section must give it, else `CUT-CFG-006` names `recovery-fraction` as not set. The other
//!   keys default as [`Recovery::over`](crate::Recovery::over) does: `recovery-initial-fraction = 0.1`,
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
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer};

use crate::error::ErrorCode;
use crate::settings::Settings;

// A document goes through the files in this order: `raw` (any format to one value tree),
// `section` (each table's keys to a `Patch`, one value at a time through `value`), `resolve`
// (the layers merged and validated, the document walked into a `Config`). `error` is the one
// error they all return, `registry` the glue to a `Registry`, `duration` the public
// `"30s"`-field helpers.
#[cfg(feature = "macros")]
pub(crate) mod declared;
pub mod duration;
mod error;
mod raw;
mod registry;
mod resolve;
mod section;
mod value;

pub use error::LoadError;

use error::{Alone, syntax_toml};
use raw::Raw;
use resolve::{load, read_table};

/// Every key a settings table (`defaults`, `configs.<name>`, `instances.<id>`) accepts, in the
/// order of the docs' table; an instance also takes `base-config`. For tools that check or
/// complete configuration files. (Kept in cutout-keys, which the attribute macros read too.)
///
/// ```
/// assert!(cutout::config::SETTINGS_KEYS.contains(&"break-duration"));
/// ```
pub use cutout_keys::SETTINGS_KEYS;

/// Settings loaded from a configuration document: the defaults, each named config and each
/// instance, all merged and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    defaults: Settings,
    configs: BTreeMap<String, Settings>,
    instances: BTreeMap<String, Instance>,
    layers: Layers,
}

/// The sections' keys as written, unmerged: what a declared breaker's attribute is merged
/// between (`declared.rs`, feature `macros`; kept without it, read by nothing else).
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "macros"), allow(dead_code))]
struct Layers {
    defaults: section::Patch,
    configs: BTreeMap<String, section::Patch>,
    instances: BTreeMap<String, section::Patch>,
}

/// Equal settings make equal configs: the layers are only how they were written.
impl PartialEq for Layers {
    fn eq(&self, _: &Layers) -> bool {
        true
    }
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
}

//! Resolving: each section's layers merged key by key and validated into [`Settings`].
//!
//! The layers are the built-in defaults, `[defaults]`, an instance's base config and its own
//! keys, later winning ([`resolve`]); [`load`] walks the document in its fixed order
//! (unknown sections, `[defaults]`, configs, instances, each sorted by name) so the first
//! error is always the same one. Validation is the builder's; its error is turned back into
//! the section and value as written, with where a merged value came from.

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::LoadError;
use super::raw::Raw;
use super::section::{BASE_CONFIG, Origin, Patch, WindowKind, read_section, section_name};
use super::value::RECOVERY_FRACTION;
use super::{Config, Instance, Layers};
use crate::error::ErrorCode;
use crate::machine::ramp::Recovery;
use crate::relative::{Failures, SlowCalls};
use crate::settings::{InitialState, MAX_COUNT_WINDOW, Settings, TripWindow};

const SECTIONS: &[&str] = &["defaults", "configs", "instances"];

/// One settings table on its own: its keys read, then merged over the built-in defaults and
/// validated. A document's `[defaults]`, and [`Settings`]'s `Deserialize` (with `section`
/// empty), so both read and check every key the same way.
pub(super) fn read_table(section: &str, value: &Raw) -> Result<(Patch, Settings), LoadError> {
    let patch = read_section(section, value, false)?;
    let settings = resolve(section, &[&patch])?;
    Ok((patch, settings))
}

/// Merges `layers` over the built-in defaults and validates: the settings of `section`.
pub(super) fn resolve(section: &str, layers: &[&Patch]) -> Result<Settings, LoadError> {
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
        load.behind(error, note)
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

pub(super) fn load(root: Raw) -> Result<Config, LoadError> {
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
    let mut instance_patches = BTreeMap::new();
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
            instance_patches.insert(id.clone(), patch);
        }
    }

    Ok(Config {
        defaults,
        configs,
        instances,
        layers: Layers {
            defaults: default_patch,
            configs: config_patches,
            instances: instance_patches,
        },
    })
}

//! Reading one section: a settings table to a [`Patch`] of the keys it sets, not yet merged.
//!
//! A section's keys are read one by one ([`read_key`]), each remembered with where it was
//! written ([`Origin`]) for errors found after merging. The checks that need the whole
//! section run here, before any merge: the window's kind, `enabled` against
//! `initial-state`, and a rule switched off while one of its keys is set. They are per section
//! because a later section may override an earlier one; after the merge that contradiction
//! could no longer be told from an override.

use std::collections::BTreeMap;
use std::time::Duration;

use super::SETTINGS_KEYS;
use super::error::LoadError;
use super::raw::Raw;
use super::value::{
    At, DURATION, RATIO, RECOVERY_FRACTION, RECOVERY_KEYS, SWITCH_OFF, SWITCH_RAMP_OFF, boolean,
    break_multiplier, choice, count, duration, multiple, optional_count, optional_duration,
    optional_ratio, ratio, switch_off, throttle,
};
use crate::error::ErrorCode;
use crate::settings::{HalfOpenRule, HalfOpenTimeout, InitialState, Jitter};

pub(super) const BASE_CONFIG: &str = "base-config";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowKind {
    Count,
    Time,
}

/// Where a key's value was written, for errors found after merging.
#[derive(Debug, Clone)]
pub(super) struct Origin {
    pub(super) section: String,
    pub(super) written: String,
}

/// One section's keys, read but not merged.
#[derive(Debug, Clone, Default)]
pub(super) struct Patch {
    pub(super) consecutive_failures: Option<Option<u32>>,
    pub(super) failure_ratio: Option<Option<f64>>,
    pub(super) minimum_calls: Option<u32>,
    pub(super) window_kind: Option<WindowKind>,
    pub(super) window_size: Option<u32>,
    pub(super) window_duration: Option<Duration>,
    pub(super) slow_call_threshold: Option<Option<Duration>>,
    pub(super) slow_call_ratio: Option<f64>,
    pub(super) break_duration: Option<Duration>,
    pub(super) max_break_duration: Option<Duration>,
    pub(super) break_multiplier: Option<f64>,
    pub(super) jitter: Option<Jitter>,
    pub(super) half_open_probes: Option<u32>,
    pub(super) probe_successes: Option<u32>,
    pub(super) half_open_rule: Option<HalfOpenRule>,
    pub(super) max_wait_in_half_open: Option<Option<Duration>>,
    pub(super) half_open_timeout: Option<HalfOpenTimeout>,
    pub(super) shadow: Option<bool>,
    pub(super) enabled: Option<bool>,
    pub(super) initial_state: Option<InitialState>,
    pub(super) adaptive: Option<bool>,
    pub(super) slow_calls_off: bool,
    pub(super) slow_calls_multiple: Option<f64>,
    pub(super) slow_calls_quantile: Option<f64>,
    pub(super) slow_calls_floor: Option<Duration>,
    pub(super) slow_calls_margin: Option<Duration>,
    pub(super) latency_baseline_window: Option<Duration>,
    pub(super) failures_off: bool,
    pub(super) failures_multiple: Option<f64>,
    pub(super) failures_floor: Option<f64>,
    pub(super) failure_baseline_window: Option<Duration>,
    pub(super) recovery_off: bool,
    pub(super) recovery_fraction: Option<f64>,
    pub(super) recovery_initial_fraction: Option<f64>,
    pub(super) recovery_min_duration: Option<Duration>,
    pub(super) recovery_max_duration: Option<Duration>,
    pub(super) throttle: Option<Option<f64>>,
    pub(super) base: Option<String>,
    pub(super) origins: BTreeMap<&'static str, Origin>,
}

/// `prefix.name`, quoting a name that is not a bare TOML key.
pub(super) fn section_name(prefix: &str, name: &str) -> String {
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

pub(super) fn read_section(section: &str, value: &Raw, instance: bool) -> Result<Patch, LoadError> {
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
            cutout_keys::SLOW_CALL_RULE_KEYS,
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

#[cfg(test)]
mod tests {
    use super::*;

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

//! The settings keys, the kind of value each takes, and [`check`]: one value read and range-
//! checked on its own, with the code a configuration file would report.

use crate::{code, duration, range};

/// Every key a settings table (`defaults`, `configs.<name>`, `instances.<id>`) accepts, in the
/// order of the docs' table; an instance also takes `base-config`. For tools that check or
/// complete configuration files.
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

/// The relative slow-call rule's switch, `slow-calls` (first), and the keys that tune the
/// rule (sorted, so the first one a section sets is the first in its key order). A section
/// that sets one of the rule's keys has the rule on there: it may not also say
/// `slow-calls = "off"`, and it switches the rule back on over an earlier section's "off".
/// `cutout::config` rejects the contradiction with these names; the gateway's base and the
/// lab's replay merge sections by them.
pub const SLOW_CALL_KEYS: [&str; 6] = [
    "slow-calls",
    "latency-baseline-window",
    "slow-calls-floor",
    "slow-calls-margin",
    "slow-calls-multiple",
    "slow-calls-quantile",
];

/// The keys that tune the relative slow-call rule: [`SLOW_CALL_KEYS`] without its switch.
pub const SLOW_CALL_RULE_KEYS: &[&str] = SLOW_CALL_KEYS.split_at(1).1;

/// A value as written, before it is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A whole number.
    Int(i128),
    /// A number with a fraction.
    Float(f64),
    /// A string.
    Str(&'a str),
    /// `true` or `false`.
    Bool(bool),
}

/// A ratio's, count's, number's range: the test, the code when it fails, and what it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// Whether a value is in range.
    pub ok: fn(f64) -> bool,
    /// The code of a value out of range.
    pub code: &'static str,
    /// What the key accepts.
    pub allowed: &'static str,
}

/// The kind of value a key takes. `off`: `false` or `"off"` also switches it off.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A whole number in `range`.
    Count {
        /// The range and its code.
        range: Range,
        /// Whether it can be switched off.
        off: bool,
        /// Whether the file reads it as a 64-bit number and checks its range (so a value past
        /// 32 bits gets the range's code), rather than as a 32-bit count (`CUT-CFG-010`).
        wide: bool,
    },
    /// A number or a percentage string (`"50%"`) in `range`.
    Ratio {
        /// The range and its code.
        range: Range,
        /// Whether it can be switched off.
        off: bool,
    },
    /// A plain number in `range`.
    Number {
        /// The range and its code.
        range: Range,
        /// Whether it can be switched off.
        off: bool,
    },
    /// A duration string.
    Duration {
        /// Whether zero is refused (`CUT-CFG-003`).
        positive: bool,
        /// Whether it can be switched off.
        off: bool,
    },
    /// One of these strings, ignoring ASCII case.
    Choice(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// Only `false` or `"off"`: a rule or the ramp switched off.
    SwitchOff,
}

const COUNT: Range = Range {
    ok: |n| range::count(n as u64) && n >= 1.0,
    code: code::COUNT_TOO_SMALL,
    allowed: range::COUNT,
};
const WINDOW_SIZE: Range = Range {
    ok: |n| range::window_size(n as u64),
    code: code::WINDOW_TOO_LARGE,
    allowed: range::WINDOW_SIZE,
};
const PROBES: Range = Range {
    ok: |n| range::probes(n as u64),
    code: code::CONTRADICTION,
    allowed: range::PROBES,
};
const RATIO: Range = Range {
    ok: range::ratio,
    code: code::RATIO_OUT_OF_RANGE,
    allowed: range::RATIO,
};

/// The kind of value `key` (kebab-case) takes, or `None` for a key that is not a settings key.
pub fn kind(key: &str) -> Option<Kind> {
    let duration = |positive, off| Kind::Duration { positive, off };
    let ratio = |range, off| Kind::Ratio { range, off };
    let number = |ok, code, allowed| Kind::Number {
        range: Range { ok, code, allowed },
        off: false,
    };
    Some(match key {
        "consecutive-failures" => Kind::Count {
            range: COUNT,
            off: true,
            wide: false,
        },
        "failure-ratio" => ratio(RATIO, true),
        "minimum-calls" | "probe-successes" => Kind::Count {
            range: COUNT,
            off: false,
            wide: false,
        },
        "window-type" => Kind::Choice(&["count", "time"]),
        "window-size" => Kind::Count {
            range: WINDOW_SIZE,
            off: false,
            wide: true,
        },
        "half-open-probes" => Kind::Count {
            range: PROBES,
            off: false,
            wide: false,
        },
        "window-duration"
        | "break-duration"
        | "latency-baseline-window"
        | "failure-baseline-window"
        | "recovery-min-duration" => duration(true, false),
        "max-break-duration"
        | "recovery-max-duration"
        | "slow-calls-floor"
        | "slow-calls-margin" => duration(false, false),
        "slow-call-threshold" | "max-wait-in-half-open" => duration(true, true),
        "slow-call-ratio" | "failures-floor" => ratio(RATIO, false),
        "break-multiplier" => number(
            range::break_multiplier,
            code::BREAK_MULTIPLIER_OUT_OF_RANGE,
            range::BREAK_MULTIPLIER,
        ),
        "jitter" => Kind::Choice(&["equal", "full", "none"]),
        "half-open-rule" => Kind::Choice(&["consecutive", "rates"]),
        "half-open-timeout" => Kind::Choice(&["open", "close"]),
        "initial-state" => Kind::Choice(&["closed", "disabled", "isolated"]),
        "shadow" | "enabled" | "adaptive" => Kind::Bool,
        "slow-calls" | "failures" | "recovery" => Kind::SwitchOff,
        "slow-calls-multiple" | "failures-multiple" => {
            number(range::multiple, code::MULTIPLE_TOO_SMALL, range::MULTIPLE)
        }
        "slow-calls-quantile" => ratio(
            Range {
                ok: range::quantile,
                code: code::RATIO_OUT_OF_RANGE,
                allowed: range::QUANTILE,
            },
            false,
        ),
        "recovery-fraction" => ratio(
            Range {
                ok: range::recovery_fraction,
                code: code::RATIO_OUT_OF_RANGE,
                allowed: range::RECOVERY_FRACTION,
            },
            false,
        ),
        "recovery-initial-fraction" => ratio(
            Range {
                ok: range::recovery_initial,
                code: code::RATIO_OUT_OF_RANGE,
                allowed: range::RECOVERY_INITIAL,
            },
            false,
        ),
        "throttle" => Kind::Number {
            range: Range {
                ok: range::throttle,
                code: code::THROTTLE_MULTIPLE_OUT_OF_RANGE,
                allowed: range::THROTTLE,
            },
            off: true,
        },
        _ => return None,
    })
}

/// Why a value was refused: the code, what was wrong (when more than the code says) and what
/// the key accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The stable code (`"CUT-CFG-001"`).
    pub code: &'static str,
    /// What was wrong, when the code alone does not say.
    pub detail: Option<String>,
    /// What the key accepts.
    pub allowed: String,
    /// For an unknown choice, the nearest choice.
    pub suggestion: Option<&'static str>,
}

/// The result of [`check`].
pub type Check = Result<(), Problem>;

fn problem(code: &'static str, detail: Option<String>, allowed: impl Into<String>) -> Problem {
    Problem {
        code,
        detail,
        allowed: allowed.into(),
        suggestion: None,
    }
}

fn is_off(value: Value<'_>) -> bool {
    match value {
        Value::Bool(false) => true,
        Value::Str(s) => s.trim().eq_ignore_ascii_case("off"),
        _ => false,
    }
}

fn found(value: Value<'_>) -> Option<String> {
    Some(
        match value {
            Value::Int(_) => "found a whole number",
            Value::Float(_) => "found a number",
            Value::Str(_) => "found a string",
            Value::Bool(_) => "found a boolean",
        }
        .to_owned(),
    )
}

/// Reads `value` as `key` (kebab-case) would be read in a configuration file and checks its
/// range on its own: the codes and words of `cutout::config` and `SettingsBuilder::build` for
/// one key. Checks that need other keys are not made here. An unknown key is `CUT-CFG-008`.
pub fn check(key: &str, value: Value<'_>) -> Check {
    let Some(kind) = kind(key) else {
        return Err(problem(
            code::UNKNOWN_KEY,
            None,
            format!("one of {}", SETTINGS_KEYS.join(", ")),
        ));
    };
    let switchable = matches!(
        kind,
        Kind::Count { off: true, .. }
            | Kind::Ratio { off: true, .. }
            | Kind::Number { off: true, .. }
            | Kind::Duration { off: true, .. }
    );
    if switchable && is_off(value) {
        return Ok(());
    }
    if switchable && value == Value::Bool(true) {
        return Err(problem(
            code::INVALID_VALUE,
            Some("true does not say which threshold to use; give one, or false / \"off\"".into()),
            "a value, or false / \"off\" to switch it off",
        ));
    }
    let in_range = |range: Range, x: f64| {
        if (range.ok)(x) {
            Ok(())
        } else {
            Err(problem(range.code, None, range.allowed))
        }
    };
    match kind {
        Kind::Count { range, off, wide } => match value {
            Value::Int(n) if n < 1 => Err(problem(code::COUNT_TOO_SMALL, None, range::COUNT)),
            Value::Str(s) if off => Err(problem(
                code::INVALID_VALUE,
                Some(format!("{s:?} is not a number")),
                range.allowed,
            )),
            Value::Int(n) if n > i128::from(u32::MAX) && wide => in_range(range, f64::INFINITY),
            // The file's reader cannot take it as a count at all (a count is 32 bits).
            Value::Int(n) if n > i128::from(u32::MAX) => Err(problem(
                code::INVALID_VALUE,
                Some(format!("{n} is more than a count holds ({})", u32::MAX)),
                range.allowed,
            )),
            Value::Int(n) => in_range(range, n as f64),
            _ => Err(problem(code::WRONG_TYPE, found(value), range.allowed)),
        },
        Kind::Ratio { range, .. } => match value {
            Value::Int(n) => in_range(range, n as f64),
            Value::Float(f) => in_range(range, f),
            Value::Str(s) => match s.trim().strip_suffix('%') {
                Some(number) => match number.trim().parse::<f64>() {
                    Ok(percent) => in_range(range, percent / 100.0),
                    Err(_) => Err(problem(
                        code::INVALID_VALUE,
                        Some(format!("{number:?} is not a number")),
                        range.allowed,
                    )),
                },
                None => Err(problem(
                    code::INVALID_VALUE,
                    Some("a ratio written as a string must be a percentage ending in %".into()),
                    range.allowed,
                )),
            },
            Value::Bool(_) => Err(problem(code::WRONG_TYPE, found(value), range.allowed)),
        },
        Kind::Number { range, .. } => match value {
            Value::Int(n) => in_range(range, n as f64),
            Value::Float(f) => in_range(range, f),
            _ => Err(problem(code::WRONG_TYPE, found(value), range.allowed)),
        },
        Kind::Duration { positive, .. } => match value {
            Value::Str(s) => match duration::parse(s) {
                Ok(d) if positive && d.is_zero() => {
                    Err(problem(code::ZERO_DURATION, None, range::POSITIVE))
                }
                Ok(_) => Ok(()),
                Err(detail) => Err(problem(
                    code::INVALID_VALUE,
                    Some(detail),
                    duration::ALLOWED,
                )),
            },
            Value::Int(_) | Value::Float(_) => Err(problem(
                code::WRONG_TYPE,
                Some("a bare number has no unit; write \"30s\", \"500ms\", \"2m\"".into()),
                duration::ALLOWED,
            )),
            Value::Bool(_) => Err(problem(code::WRONG_TYPE, found(value), duration::ALLOWED)),
        },
        Kind::Choice(choices) => {
            let allowed = choices
                .iter()
                .map(|c| format!("{c:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            match value {
                Value::Str(s) if choices.iter().any(|c| c.eq_ignore_ascii_case(s.trim())) => Ok(()),
                Value::Str(s) => Err(Problem {
                    suggestion: crate::suggest::nearest(s.trim(), choices.iter().copied()),
                    ..problem(
                        code::INVALID_VALUE,
                        Some("not one of the choices".into()),
                        format!("one of {allowed}"),
                    )
                }),
                _ => Err(problem(
                    code::WRONG_TYPE,
                    found(value),
                    format!("one of {allowed}"),
                )),
            }
        }
        Kind::Bool => match value {
            Value::Bool(_) => Ok(()),
            _ => Err(problem(code::WRONG_TYPE, found(value), "true or false")),
        },
        Kind::SwitchOff => match value {
            v if is_off(v) => Ok(()),
            Value::Bool(true) => Err(problem(
                code::INVALID_VALUE,
                Some("it is switched on by setting one of its keys".into()),
                "false or \"off\" to switch it off",
            )),
            Value::Str(_) => Err(problem(
                code::INVALID_VALUE,
                Some("not \"off\"".into()),
                "false or \"off\" to switch it off",
            )),
            _ => Err(problem(
                code::WRONG_TYPE,
                found(value),
                "false or \"off\" to switch it off",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_kind() {
        for key in SETTINGS_KEYS {
            assert!(kind(key).is_some(), "{key} has no kind");
        }
        assert!(kind("window_size").is_none(), "keys are kebab-case");
    }

    #[test]
    fn values_get_the_config_codes() {
        assert_eq!(check("window-size", Value::Int(10)), Ok(()));
        assert_eq!(
            check("window-size", Value::Int(0)).unwrap_err().code,
            "CUT-CFG-002"
        );
        assert_eq!(
            check("window-size", Value::Int(2_000_000))
                .unwrap_err()
                .code,
            "CUT-CFG-005"
        );
        assert_eq!(check("failure-ratio", Value::Str("50%")), Ok(()));
        assert_eq!(check("failure-ratio", Value::Str("off")), Ok(()));
        assert_eq!(
            check("failure-ratio", Value::Str("150%")).unwrap_err().code,
            "CUT-CFG-001"
        );
        assert_eq!(check("break-duration", Value::Str("30s")), Ok(()));
        assert_eq!(
            check("break-duration", Value::Str("soon"))
                .unwrap_err()
                .code,
            "CUT-CFG-010"
        );
        assert_eq!(
            check("break-duration", Value::Str("0s")).unwrap_err().code,
            "CUT-CFG-003"
        );
        assert_eq!(
            check("break-duration", Value::Int(30)).unwrap_err().code,
            "CUT-CFG-009"
        );
        assert_eq!(
            check("break-multiplier", Value::Float(0.5))
                .unwrap_err()
                .code,
            "CUT-CFG-015"
        );
        let jitter = check("jitter", Value::Str("ful")).unwrap_err();
        assert_eq!(
            (jitter.code, jitter.suggestion),
            ("CUT-CFG-010", Some("full"))
        );
        assert_eq!(
            check("windw-size", Value::Int(1)).unwrap_err().code,
            "CUT-CFG-008"
        );
    }
}

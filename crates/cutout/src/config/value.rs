//! Reading one value: a key's [`Raw`] value to the count, ratio, duration or choice it must be.
//!
//! Each reader takes an [`At`] (section, key, value) so its error names all three. Readers
//! check what the value *is* (a duration string, a number, one of the choices); whether it
//! is in range is left to [`SettingsBuilder::build`](crate::SettingsBuilder::build), so a file
//! and code reject a bad value with the same code. The exceptions are what the builder's
//! types cannot hold or a file alone can write: a count below 1, a negative duration, a bare
//! number for a duration (its unit would be a guess), a ratio string without `%`, and `true`
//! for a rule that needs a threshold.

use std::time::Duration;

use super::error::LoadError;
use super::raw::Raw;
use crate::error::ErrorCode;
use crate::settings::MAX_COUNT_WINDOW;

const COUNT: &str = "a whole number of at least 1";
pub(super) const RATIO: &str = "a number in (0, 1] or a percentage such as \"50%\"";
pub(super) const DURATION: &str = "a duration such as \"30s\" or \"2m\"";
const OFF: &str = ", or false / \"off\" to switch it off";
const MULTIPLE: &str = "a number above 1";
pub(super) const SWITCH_OFF: &str = "false or \"off\" to switch the rule off";
pub(super) const SWITCH_RAMP_OFF: &str = "false or \"off\" to switch the ramp off";
pub(super) const RECOVERY_FRACTION: &str = "a number in (0, 10] or a percentage such as \"25%\"";
pub(super) const RECOVERY_KEYS: &str =
    "recovery-fraction, recovery-initial-fraction, recovery-min-duration, recovery-max-duration";

/// A key and its value in a section, to build errors from.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) section: &'a str,
    pub(super) key: &'static str,
    pub(super) value: &'a Raw,
}

impl At<'_> {
    pub(super) fn error(&self, code: ErrorCode) -> LoadError {
        LoadError::new(code, self.section, self.key, Some(self.value.written()))
    }

    pub(super) fn wrong_type(&self, allowed: &str) -> LoadError {
        self.error(ErrorCode::WrongType)
            .detail(format!("found {}", self.value.kind()))
            .allowed(allowed)
    }

    pub(super) fn invalid(&self, detail: impl Into<String>, allowed: &str) -> LoadError {
        self.error(ErrorCode::InvalidValue)
            .detail(detail)
            .allowed(allowed)
    }
}

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

pub(super) fn count(at: At<'_>) -> Result<u32, LoadError> {
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

pub(super) fn optional_count(at: At<'_>) -> Result<Option<u32>, LoadError> {
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

pub(super) fn ratio(at: At<'_>, allowed: &str) -> Result<f64, LoadError> {
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

pub(super) fn optional_ratio(at: At<'_>) -> Result<Option<f64>, LoadError> {
    let allowed = &format!("{RATIO}{OFF}");
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, allowed)?;
    ratio(at, allowed).map(Some)
}

pub(super) fn duration(at: At<'_>, allowed: &str) -> Result<Duration, LoadError> {
    match at.value {
        Raw::Str(s) => {
            // The syntax is cutout-keys', which the attribute macros check at compile time.
            cutout_keys::duration::parse(s).map_err(|detail| at.invalid(detail, allowed))
        }
        Raw::Int(_) | Raw::Float(_) => Err(at
            .error(ErrorCode::WrongType)
            .detail("a bare number has no unit; write \"30s\", \"500ms\", \"2m\"")
            .allowed(allowed)),
        _ => Err(at.wrong_type(allowed)),
    }
}

pub(super) fn optional_duration(at: At<'_>) -> Result<Option<Duration>, LoadError> {
    let allowed = &format!("{DURATION}{OFF}");
    if off(at.value) {
        return Ok(None);
    }
    reject_true(at, allowed)?;
    duration(at, allowed).map(Some)
}

/// A multiple: any finite number; validation checks it is above 1.
pub(super) fn multiple(at: At<'_>) -> Result<f64, LoadError> {
    match at.value {
        // Exact for every integer a multiple could sensibly be; huge ones fail validation.
        Raw::Int(i) => Ok(*i as f64),
        Raw::Float(f) => Ok(*f),
        _ => Err(at.wrong_type(MULTIPLE)),
    }
}

/// Adaptive throttling's multiple, or false / "off": any number; validation checks it is
/// finite and at least 1.
pub(super) fn throttle(at: At<'_>) -> Result<Option<f64>, LoadError> {
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
pub(super) fn break_multiplier(at: At<'_>) -> Result<f64, LoadError> {
    match at.value {
        Raw::Int(i) => Ok(*i as f64),
        Raw::Float(f) => Ok(*f),
        _ => Err(at.wrong_type("a number of at least 1")),
    }
}

/// An off switch (`slow-calls`, `failures`, `recovery`): only false or "off" is read. `what`
/// is "rule" or "ramp", `allowed` the matching `SWITCH_OFF` text.
pub(super) fn switch_off(
    at: At<'_>,
    what: &str,
    keys: &str,
    allowed: &str,
) -> Result<(), LoadError> {
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

pub(super) fn boolean(at: At<'_>) -> Result<bool, LoadError> {
    match at.value {
        Raw::Bool(b) => Ok(*b),
        _ => Err(at.wrong_type("true or false")),
    }
}

pub(super) fn choice<T: Copy>(
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

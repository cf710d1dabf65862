//! Errors: a refused call ([`Rejected`]), a call's result ([`Error`]) and bad settings
//! ([`ConfigError`]).

use std::fmt;
use std::time::Duration;

use crate::BreakerId;
use crate::clock::{Clock, SystemClock};

/// Why a call was refused. The names from [`RejectReason::as_str`] are stable.
///
/// New reasons may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm,
/// or use [`as_str`](RejectReason::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The breaker is open and its break has not elapsed (`"open"`).
    Open,
    /// The breaker is half-open and every probe slot is taken (`"half_open_full"`). Carries a
    /// retry-after (see [`Rejected::retry_after`]).
    HalfOpenFull,
    /// The breaker is recovering and this call falls outside the admitted fraction (`"ramp"`).
    Ramp,
    /// The breaker was isolated by an operator (`"isolated"`).
    Isolated,
    /// Adaptive throttling refused this call (`"throttled"`; see
    /// [`SettingsBuilder::throttle`](crate::SettingsBuilder::throttle)). No retry-after: the
    /// next call is another draw.
    Throttled,
}

impl RejectReason {
    /// The stable name of the reason.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::HalfOpenFull => "half_open_full",
            RejectReason::Ramp => "ramp",
            RejectReason::Isolated => "isolated",
            RejectReason::Throttled => "throttled",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call the breaker refused. A value, not a panic; creating it allocates nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct Rejected {
    reason: RejectReason,
    /// The retry-after as [`RetryAfter`] encodes it: converted to a `Duration` only when asked
    /// for, so a refusal costs no division.
    retry_after: RetryAfter,
    breaker: BreakerId,
}

/// An optional retry-after in one word: 0 for none; with the top bit clear, nanoseconds plus
/// one (saturating); with it set, the break's end on the [`SystemClock`]'s scale in the low 63
/// bits, read against that clock only when asked for (a refusal decided on the kernel's coarse
/// clock takes no precise reading of its own; see `clock/kernel.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryAfter(pub(crate) u64);

/// The bit that marks a [`RetryAfter`] holding an end on the system clock.
const AT: u64 = 1 << 63;

impl RetryAfter {
    #[inline]
    pub(crate) fn from_nanos(nanos: Option<u64>) -> RetryAfter {
        RetryAfter(nanos.map_or(0, |n| n.saturating_add(1).min(AT - 1)))
    }

    #[inline]
    pub(crate) fn new(after: Option<Duration>) -> RetryAfter {
        RetryAfter::from_nanos(after.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }

    /// Until `end`, a reading of the [`SystemClock`]. An end 2^63 ns (292 years) or more
    /// after the clock's anchor does not fit beside the bit: it reads as the longest wait,
    /// as any wait that long does (an end that far is a break that never ends in practice,
    /// `open_for(Duration::MAX)`).
    #[inline]
    pub(crate) fn until_system(end: u64) -> RetryAfter {
        if end < AT {
            RetryAfter(AT | end)
        } else {
            RetryAfter(AT - 1)
        }
    }

    pub(crate) fn get(self) -> Option<Duration> {
        if self.0 & AT != 0 {
            let end = self.0 & (AT - 1);
            return Some(Duration::from_nanos(end.saturating_sub(SystemClock.now())));
        }
        self.0.checked_sub(1).map(Duration::from_nanos)
    }
}

impl Rejected {
    #[inline]
    pub(crate) fn new(reason: RejectReason, retry_after: RetryAfter, breaker: BreakerId) -> Self {
        Rejected {
            reason,
            retry_after,
            breaker,
        }
    }

    /// Why the call was refused.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// How long until the breaker may admit a call. Every refusal but an isolated breaker's
    /// carries one (an isolated breaker admits nothing until someone resets it):
    /// - [`RejectReason::Open`]: what is left of the break actually being served (after
    ///   jitter). On the default [`SystemClock`] it is what is left when you ask, to the
    ///   nanosecond of that clock: asked again later, the same refusal says less, and zero once
    ///   the break is over. On another clock, what was left when the call was refused;
    /// - [`RejectReason::HalfOpenFull`]: the sooner of the breaker's
    ///   [normal latency](crate::Breaker::normal_latency) once measured (about when a probe in
    ///   flight finishes) and what is left of `max_wait_in_half_open` when it is set (by then a
    ///   slot is free or the wait has run out); with neither, the break last served (or
    ///   `break_duration`, when that break was zero);
    /// - [`RejectReason::Ramp`]: a short wait, until the ramp admits another call.
    ///
    /// A wait of 292 years or more (2^63 ns, as after `open_for(Duration::MAX)`) reads as
    /// 2^63 ns less 2.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Jitter, RejectReason, Settings, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("search")
    ///     .settings(Settings::builder().consecutive_failures(Some(1)).jitter(Jitter::None).build()?)
    ///     .clock(clock.clone())
    ///     .build();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.elapse_break(&breaker);
    /// let _probe = breaker.try_acquire().unwrap();
    /// clock.advance(Duration::from_secs(15));
    /// let refused = breaker.try_acquire().unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
    /// // No normal latency measured yet (one call so far): 60 s of maximum wait in half-open
    /// // by default, 15 s of it gone.
    /// assert_eq!(refused.retry_after(), Some(Duration::from_secs(45)));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after.get()
    }

    /// The id of the breaker that refused.
    pub fn breaker(&self) -> &BreakerId {
        &self.breaker
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after())
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call refused by breaker '{}' ({})",
            self.breaker, self.reason
        )?;
        if let Some(after) = self.retry_after() {
            write!(f, ", retry after {}", crate::HumanDuration(after))?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejected {}

/// The error of a call made through a breaker: refused, or the call's own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error<E> {
    /// The breaker refused the call; the dependency was not called.
    Rejected(Rejected),
    /// The call ran and returned this error.
    Inner(E),
}

impl<E> Error<E> {
    /// Whether the breaker refused the call.
    pub fn is_rejected(&self) -> bool {
        matches!(self, Error::Rejected(_))
    }

    /// The refusal, if the breaker refused the call.
    pub fn rejection(&self) -> Option<&Rejected> {
        match self {
            Error::Rejected(rejected) => Some(rejected),
            Error::Inner(_) => None,
        }
    }

    /// The call's own error, if it ran.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Rejected(_) => None,
            Error::Inner(inner) => Some(inner),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected(rejected) => fmt::Display::fmt(rejected, f),
            Error::Inner(inner) => fmt::Display::fmt(inner, f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Rejected(_) => None,
            Error::Inner(inner) => Some(inner),
        }
    }
}

impl<E> From<Rejected> for Error<E> {
    fn from(rejected: Rejected) -> Self {
        Error::Rejected(rejected)
    }
}

/// The stable code of a configuration error (`CUT-CFG-*`) or a registry error (`CUT-REG-*`).
/// Codes never change meaning; new ones are added.
///
/// | code | meaning |
/// |---|---|
/// | `CUT-CFG-001` | a ratio is outside (0, 1] |
/// | `CUT-CFG-002` | a count (window size, minimum calls, probes, probe successes, consecutive failures) is below 1 |
/// | `CUT-CFG-003` | a duration that must be positive is zero |
/// | `CUT-CFG-004` | the maximum break is shorter than the first break |
/// | `CUT-CFG-005` | a count window is larger than the supported maximum (1,000,000 calls) |
/// | `CUT-CFG-006` | a half-open rule or probe setting contradicts another setting (in a file: also contradicting window keys) |
/// | `CUT-CFG-007` | a configuration document cannot be parsed (malformed TOML) |
/// | `CUT-CFG-008` | a configuration document has an unknown key or section |
/// | `CUT-CFG-009` | a configuration value has the wrong type (a string where a number goes) |
/// | `CUT-CFG-010` | a configuration value cannot be read: bad or negative duration, bad percentage, unknown choice, number out of range |
/// | `CUT-CFG-011` | an instance's `base-config` names no configuration |
/// | `CUT-CFG-012` | a configured baseline window is too short for the trip window (failures: below multiple × trip window; latency: at most trip window / quantile) |
/// | `CUT-CFG-013` | a baseline multiple is not above 1 |
/// | `CUT-CFG-014` | a maximum is below its minimum (recovery ramp durations) |
/// | `CUT-CFG-015` | the break multiplier is below 1 or not a finite number (a schedule that does not grow) |
/// | `CUT-CFG-016` | a break schedule function gives a shorter break for an open than for the one before |
/// | `CUT-CFG-017` | adaptive throttling's multiple (`throttle`) is below 1 or not a finite number |
/// | `CUT-REG-001` | a registry already holds a breaker with this id and different settings |
/// | `CUT-REG-002` | a registry holds no breaker with this id |
///
/// The configuration file codes are described with example messages in `cutout::config`
/// (feature `serde`), the registry codes in [`Registry`](crate::Registry).
///
/// The enum is `#[non_exhaustive]`: match with a wildcard arm, or compare
/// [`as_str`](ErrorCode::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `CUT-CFG-001`: a ratio is outside (0, 1].
    RatioOutOfRange,
    /// `CUT-CFG-002`: a count is below 1.
    CountTooSmall,
    /// `CUT-CFG-003`: a duration that must be positive is zero.
    ZeroDuration,
    /// `CUT-CFG-004`: the maximum break is shorter than the first break.
    MaxBreakBelowBreak,
    /// `CUT-CFG-005`: a count window is larger than the supported maximum.
    WindowTooLarge,
    /// `CUT-CFG-006`: settings contradict each other.
    Contradiction,
    /// `CUT-CFG-007`: a configuration document cannot be parsed.
    Syntax,
    /// `CUT-CFG-008`: a configuration document has an unknown key or section.
    UnknownKey,
    /// `CUT-CFG-009`: a configuration value has the wrong type.
    WrongType,
    /// `CUT-CFG-010`: a configuration value of the right type cannot be read.
    InvalidValue,
    /// `CUT-CFG-011`: an instance's `base-config` names no configuration.
    UnknownBaseConfig,
    /// `CUT-REG-001`: the id is taken by a breaker with different settings.
    SettingsConflict,
    /// `CUT-REG-002`: no breaker has this id.
    UnknownId,
    /// `CUT-CFG-012`: a configured baseline window is so short that an outage would move the
    /// baseline before the trip window fills.
    BaselineTooShort,
    /// `CUT-CFG-013`: a multiple of a baseline is not above 1.
    MultipleTooSmall,
    /// `CUT-CFG-014`: a maximum is below its minimum (the recovery ramp's durations).
    MaxBelowMin,
    /// `CUT-CFG-015`: the break multiplier is below 1, or NaN or infinite: a break schedule
    /// that does not grow.
    BreakMultiplierOutOfRange,
    /// `CUT-CFG-016`: a [`BreakSchedule`](crate::BreakSchedule) shrinks: its break for some
    /// consecutive open (of the first 16) is shorter than for the one before.
    BreakScheduleShrinks,
    /// `CUT-CFG-017`: adaptive throttling's multiple is below 1, or NaN or infinite.
    ThrottleMultipleOutOfRange,
}

impl ErrorCode {
    /// The stable code, e.g. `"CUT-CFG-001"`.
    pub const fn as_str(self) -> &'static str {
        // Spelled once, in cutout-keys, which the attribute macros read too.
        use cutout_keys::code;
        match self {
            ErrorCode::RatioOutOfRange => code::RATIO_OUT_OF_RANGE,
            ErrorCode::CountTooSmall => code::COUNT_TOO_SMALL,
            ErrorCode::ZeroDuration => code::ZERO_DURATION,
            ErrorCode::MaxBreakBelowBreak => code::MAX_BREAK_BELOW_BREAK,
            ErrorCode::WindowTooLarge => code::WINDOW_TOO_LARGE,
            ErrorCode::Contradiction => code::CONTRADICTION,
            ErrorCode::Syntax => code::SYNTAX,
            ErrorCode::UnknownKey => code::UNKNOWN_KEY,
            ErrorCode::WrongType => code::WRONG_TYPE,
            ErrorCode::InvalidValue => code::INVALID_VALUE,
            ErrorCode::UnknownBaseConfig => code::UNKNOWN_BASE_CONFIG,
            ErrorCode::SettingsConflict => code::SETTINGS_CONFLICT,
            ErrorCode::UnknownId => code::UNKNOWN_ID,
            ErrorCode::BaselineTooShort => code::BASELINE_TOO_SHORT,
            ErrorCode::MultipleTooSmall => code::MULTIPLE_TOO_SMALL,
            ErrorCode::MaxBelowMin => code::MAX_BELOW_MIN,
            ErrorCode::BreakMultiplierOutOfRange => code::BREAK_MULTIPLIER_OUT_OF_RANGE,
            ErrorCode::BreakScheduleShrinks => code::BREAK_SCHEDULE_SHRINKS,
            ErrorCode::ThrottleMultipleOutOfRange => code::THROTTLE_MULTIPLE_OUT_OF_RANGE,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Invalid settings: the code, the key, the value given and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    code: ErrorCode,
    key: &'static str,
    value: String,
    allowed: &'static str,
}

impl ConfigError {
    pub(crate) fn new(
        code: ErrorCode,
        key: &'static str,
        value: impl fmt::Debug,
        allowed: &'static str,
    ) -> Self {
        ConfigError {
            code,
            key,
            value: format!("{value:?}"),
            allowed,
        }
    }

    /// The stable error code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The configuration key at fault, in kebab-case (`"failure-ratio"`).
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// The value given, as written by `Debug`.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What the key accepts.
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: invalid {} = {}: allowed {}",
            self.code, self.key, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

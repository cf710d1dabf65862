//! The stable error codes as strings, the one place they are spelled (`cutout::ErrorCode`
//! answers them from its `as_str`).

/// A ratio is outside its range.
pub const RATIO_OUT_OF_RANGE: &str = "CUT-CFG-001";
/// A count is below 1.
pub const COUNT_TOO_SMALL: &str = "CUT-CFG-002";
/// A duration that must be positive is zero.
pub const ZERO_DURATION: &str = "CUT-CFG-003";
/// The maximum break is shorter than the first break.
pub const MAX_BREAK_BELOW_BREAK: &str = "CUT-CFG-004";
/// A count window is too large.
pub const WINDOW_TOO_LARGE: &str = "CUT-CFG-005";
/// Keys contradict each other.
pub const CONTRADICTION: &str = "CUT-CFG-006";
/// A document cannot be parsed.
pub const SYNTAX: &str = "CUT-CFG-007";
/// An unknown key or section.
pub const UNKNOWN_KEY: &str = "CUT-CFG-008";
/// A value of the wrong type.
pub const WRONG_TYPE: &str = "CUT-CFG-009";
/// A value of the right type that cannot be read.
pub const INVALID_VALUE: &str = "CUT-CFG-010";
/// `base-config` names no config.
pub const UNKNOWN_BASE_CONFIG: &str = "CUT-CFG-011";
/// A baseline window is too short for the trip window.
pub const BASELINE_TOO_SHORT: &str = "CUT-CFG-012";
/// A baseline multiple is not above 1.
pub const MULTIPLE_TOO_SMALL: &str = "CUT-CFG-013";
/// A maximum is below its minimum.
pub const MAX_BELOW_MIN: &str = "CUT-CFG-014";
/// The break multiplier is below 1 or not finite.
pub const BREAK_MULTIPLIER_OUT_OF_RANGE: &str = "CUT-CFG-015";
/// A break schedule shrinks.
pub const BREAK_SCHEDULE_SHRINKS: &str = "CUT-CFG-016";
/// Adaptive throttling's multiple is below 1 or not finite.
pub const THROTTLE_MULTIPLE_OUT_OF_RANGE: &str = "CUT-CFG-017";
/// The id is taken by a breaker with different settings.
pub const SETTINGS_CONFLICT: &str = "CUT-REG-001";
/// No breaker has this id.
pub const UNKNOWN_ID: &str = "CUT-REG-002";

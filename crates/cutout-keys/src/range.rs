//! The ranges a single key's value must fall in, with the words errors use for them.
//! `cutout`'s `Settings::validate` tests these same functions; the macros test them at
//! compile time.

/// The largest count window, in calls.
pub const MAX_COUNT_WINDOW: u32 = 1_000_000;
/// The most half-open probes.
pub const MAX_PROBES: u32 = u16::MAX as u32;

/// What a count accepts.
pub const COUNT: &str = "a whole number of at least 1";
/// What a ratio accepts.
pub const RATIO: &str = "a ratio in (0, 1]";
/// What a baseline multiple accepts.
pub const MULTIPLE: &str = "a finite number above 1";
/// What the break multiplier accepts.
pub const BREAK_MULTIPLIER: &str = "a finite number of at least 1 (1 keeps the break constant)";
/// What adaptive throttling's multiple accepts.
pub const THROTTLE: &str = "a finite number of at least 1 (2 is the usual choice)";
/// What `slow-calls-quantile` accepts.
pub const QUANTILE: &str = "a quantile in (0, 0.5]";
/// What `recovery-fraction` accepts.
pub const RECOVERY_FRACTION: &str = "a fraction of the break in (0, 10]";
/// What `recovery-initial-fraction` accepts.
pub const RECOVERY_INITIAL: &str = "a fraction in [0.001, 1)";
/// What a positive duration accepts.
pub const POSITIVE: &str = "a duration above zero";
/// What `window-size` accepts.
pub const WINDOW_SIZE: &str = "1 to 1000000 calls";
/// What `half-open-probes` accepts.
pub const PROBES: &str = "1 to 65535 probes";

/// A count: at least 1.
pub fn count(n: u64) -> bool {
    n >= 1
}

/// A ratio: in (0, 1]. NaN fails both comparisons.
pub fn ratio(r: f64) -> bool {
    r > 0.0 && r <= 1.0
}

/// A baseline multiple: finite and above 1.
pub fn multiple(m: f64) -> bool {
    m > 1.0 && m.is_finite()
}

/// The break multiplier: finite and at least 1 (below 1 the break would shrink).
pub fn break_multiplier(m: f64) -> bool {
    m >= 1.0 && m.is_finite()
}

/// Adaptive throttling's multiple K: finite and at least 1.
pub fn throttle(k: f64) -> bool {
    k >= 1.0 && k.is_finite()
}

/// The quantile of normal latency: in (0, 0.5].
pub fn quantile(q: f64) -> bool {
    q > 0.0 && q <= 0.5
}

/// The recovery ramp's length as a fraction of the break: in (0, 10].
pub fn recovery_fraction(f: f64) -> bool {
    f > 0.0 && f <= 10.0
}

/// The share admitted when the ramp starts: in [0.001, 1). At least a thousandth: a ramp
/// admitting one call in a million would hold a healthy dependency at nothing for hours.
pub fn recovery_initial(f: f64) -> bool {
    (0.001..1.0).contains(&f)
}

/// A count window's size: 1 to [`MAX_COUNT_WINDOW`].
pub fn window_size(n: u64) -> bool {
    (1..=u64::from(MAX_COUNT_WINDOW)).contains(&n)
}

/// Half-open probes: 1 to [`MAX_PROBES`].
pub fn probes(n: u64) -> bool {
    (1..=u64::from(MAX_PROBES)).contains(&n)
}

//! Break growth and jitter: how long the breaker stays open after its n-th consecutive open.

use std::time::Duration;

use crate::settings::{BreakContext, Jitter, Settings};

/// The computed break before jitter for the `opens`-th consecutive open (1-based): the
/// settings' [`BreakSchedule`](crate::BreakSchedule) if they have one, asked with the
/// opening's context (`counts`: the calls and failures that decided it, read only when a
/// schedule is set), else the first break multiplied by the break multiplier per earlier
/// consecutive open; capped at the maximum break either way.
///
/// The schedule is user code run under the breaker's lock: a panic in it is caught and the
/// multiplier's break served instead, so it can never poison the lock.
pub(crate) fn computed_break(
    settings: &Settings,
    opens: u32,
    counts: impl FnOnce() -> (u64, u64),
) -> Duration {
    let max = settings.max_break_duration;
    let grown = || {
        grown_break(
            settings.break_duration,
            max,
            settings.break_multiplier,
            opens,
        )
    };
    match &settings.break_schedule {
        Some(schedule) => {
            let (calls, failures) = counts();
            let context = BreakContext::new(opens, calls, failures);
            crate::contained::contained(|| schedule.break_at(&context))
                .map_or_else(grown, |scheduled| scheduled.min(max))
        }
        None => grown(),
    }
}

/// The first break multiplied by `multiplier` per earlier consecutive open (the `opens`-th,
/// 1-based), capped at `max`. Never panics: a product beyond `max` (or beyond any `f64`) is
/// `max`.
///
/// A multiplier of 2 (the default) doubles exactly, in integers, as the breaker always has;
/// others are computed in `f64` nanoseconds, exact to well under a nanosecond per second of
/// break (1.5 from 5 s gives 5 s, 7.5 s, 11.25 s exactly).
pub(crate) fn grown_break(first: Duration, max: Duration, multiplier: f64, opens: u32) -> Duration {
    let steps = opens.saturating_sub(1);
    let grown = if multiplier == 2.0 {
        first.as_nanos().saturating_mul(1u128 << steps.min(63))
    } else {
        let exponent = i32::try_from(steps).unwrap_or(i32::MAX);
        let product = first.as_nanos() as f64 * multiplier.powi(exponent);
        // NaN (a multiplier settings validation rejects) lands on the cap with the rest.
        if product < max.as_nanos() as f64 {
            product as u128
        } else {
            max.as_nanos()
        }
    };
    let capped = grown.min(max.as_nanos());
    Duration::from_nanos(u64::try_from(capped).unwrap_or(u64::MAX))
}

/// Applies `jitter` to a computed break, drawing from `rng`.
pub(crate) fn jittered(computed: Duration, jitter: Jitter, rng: &mut fastrand::Rng) -> Duration {
    let nanos = u64::try_from(computed.as_nanos()).unwrap_or(u64::MAX);
    let served = match jitter {
        Jitter::None => nanos,
        Jitter::Full => rng.u64(0..=nanos),
        Jitter::Equal => {
            let floor = nanos / 2;
            floor + rng.u64(0..=nanos - floor)
        }
    };
    Duration::from_nanos(served)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn doubles_per_consecutive_open_up_to_the_cap() {
        let grown: Vec<_> = (1..=6)
            .map(|n| grown_break(S(15), S(120), 2.0, n))
            .collect();
        assert_eq!(grown, [S(15), S(30), S(60), S(120), S(120), S(120)]);
        assert_eq!(grown_break(S(15), S(120), 2.0, u32::MAX), S(120));
    }

    #[test]
    fn other_multipliers_grow_by_their_factor_up_to_the_cap() {
        let ms = Duration::from_millis;
        let grown: Vec<_> = (1..=4).map(|n| grown_break(S(5), S(20), 1.5, n)).collect();
        assert_eq!(grown, [ms(5_000), ms(7_500), ms(11_250), ms(16_875)]);
        assert_eq!(grown_break(S(5), S(20), 1.5, 5), S(20));
        let constant: Vec<_> = (1..=3).map(|n| grown_break(S(5), S(20), 1.0, n)).collect();
        assert_eq!(constant, [S(5); 3]);
        // Overflowing products saturate at the cap.
        assert_eq!(grown_break(S(5), S(20), 1.5, u32::MAX), S(20));
        assert_eq!(grown_break(S(5), S(20), f64::MAX, 2), S(20));
        assert_eq!(grown_break(S(5), S(20), f64::NAN, 2), S(20));
        let huge = Duration::MAX;
        assert_eq!(
            grown_break(huge, huge, 3.0, 9),
            Duration::from_nanos(u64::MAX)
        );
        assert_eq!(
            grown_break(huge, huge, 2.0, 9),
            Duration::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn a_multiplier_of_two_is_the_doubling_of_old() {
        // The integer doubling the breaker always had, for every open count and odd breaks.
        for first in [1, 7, 999_999_999, 15_000_000_000, u64::MAX / 3] {
            let first = Duration::from_nanos(first);
            for opens in [1, 2, 3, 10, 40, 64, 65, u32::MAX] {
                let old = {
                    let doublings = opens.saturating_sub(1).min(63);
                    let grown = first.as_nanos().saturating_mul(1u128 << doublings);
                    let capped = grown.min(Duration::MAX.as_nanos());
                    Duration::from_nanos(u64::try_from(capped).unwrap_or(u64::MAX))
                };
                assert_eq!(grown_break(first, Duration::MAX, 2.0, opens), old);
            }
        }
    }

    #[test]
    fn a_schedule_is_capped_and_a_panicking_one_falls_back_to_the_multiplier() {
        let settings = |schedule: crate::BreakSchedule| {
            Settings::builder()
                .break_duration(S(10))
                .max_break_duration(S(60))
                .break_schedule(Some(schedule))
                .build()
                .unwrap()
        };
        let steps = settings(crate::BreakSchedule::new(|n| S(u64::from(n) * 25)));
        let none = || (0, 0);
        let breaks: Vec<_> = (1..=4).map(|n| computed_break(&steps, n, none)).collect();
        assert_eq!(breaks, [S(25), S(50), S(60), S(60)]);
        let panicking = settings(crate::BreakSchedule::new(|n| {
            assert!(n < 2, "no schedule for {n}");
            S(1)
        }));
        assert_eq!(computed_break(&panicking, 1, none), S(1));
        assert_eq!(
            computed_break(&panicking, 3, none),
            S(40),
            "10 s doubled twice"
        );
    }

    #[test]
    fn jitter_stays_within_its_bounds() {
        let mut rng = fastrand::Rng::with_seed(7);
        let d = S(10);
        let mut equal_below_three_quarters = false;
        for _ in 0..10_000 {
            let equal = jittered(d, Jitter::Equal, &mut rng);
            assert!(equal >= S(5) && equal <= d, "{equal:?}");
            equal_below_three_quarters |= equal < Duration::from_millis(7_500);
            let full = jittered(d, Jitter::Full, &mut rng);
            assert!(full <= d);
            assert_eq!(jittered(d, Jitter::None, &mut rng), d);
        }
        assert!(equal_below_three_quarters, "the draw must actually vary");
    }
}

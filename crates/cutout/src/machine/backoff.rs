//! Break growth and jitter: how long the breaker stays open after its n-th consecutive open.

use std::time::Duration;

use crate::settings::Jitter;

/// The computed break before jitter for the `opens`-th consecutive open (1-based): the first
/// break doubled per earlier consecutive open, capped at `max`.
pub(crate) fn grown_break(first: Duration, max: Duration, opens: u32) -> Duration {
    let doublings = opens.saturating_sub(1).min(63);
    let grown = first.as_nanos().saturating_mul(1u128 << doublings);
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
        let grown: Vec<_> = (1..=6).map(|n| grown_break(S(15), S(120), n)).collect();
        assert_eq!(grown, [S(15), S(30), S(60), S(120), S(120), S(120)]);
        assert_eq!(grown_break(S(15), S(120), u32::MAX), S(120));
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

//! [`WarnPace`] (one warning per key per minute) and [`Backoff`] (between connect attempts).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Remembers when each key was last logged.
#[derive(Debug)]
pub(crate) struct WarnPace {
    period: Duration,
    last: HashMap<String, Instant>,
}

impl WarnPace {
    pub(crate) fn new(period: Duration) -> WarnPace {
        WarnPace {
            period,
            last: HashMap::new(),
        }
    }

    /// Whether to log for `key` now (and if so, notes that it was).
    pub(crate) fn allow(&mut self, key: &str, now: Instant) -> bool {
        match self.last.get_mut(key) {
            Some(last) if now.duration_since(*last) < self.period => false,
            Some(last) => {
                *last = now;
                true
            }
            None => {
                self.last.insert(key.to_owned(), now);
                true
            }
        }
    }

    /// Keeps only the keys `keep` answers true for (the watched breakers' keys and the
    /// connection's), so the map stays bounded.
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.last.retain(|key, _| keep(key));
    }
}

/// Exponential backoff with equal jitter: after the n-th failure in a row, wait half of
/// `min(max, base × 2^(n−1))` plus a uniform draw up to the other half.
#[derive(Debug)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub(crate) fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max,
            failures: 0,
        }
    }

    /// One more failure: how long to wait before the next attempt.
    pub(crate) fn fail(&mut self, rng: &mut fastrand::Rng) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let exponent = self.failures.saturating_sub(1).min(20);
        let full = self.base.saturating_mul(1 << exponent).min(self.max);
        let half = full / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.u64(0..=nanos))
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_once_per_period_per_key() {
        let mut throttle = WarnPace::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(throttle.allow("a", t0));
        assert!(!throttle.allow("a", t0 + Duration::from_secs(59)));
        assert!(throttle.allow("b", t0 + Duration::from_secs(1)));
        assert!(throttle.allow("a", t0 + Duration::from_secs(60)));
        throttle.retain(|key| key == "b");
        assert!(
            throttle.allow("a", t0 + Duration::from_secs(61)),
            "forgotten"
        );
    }

    #[test]
    fn backoff_grows_to_its_cap_with_jitter() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
        let waits: Vec<Duration> = (0..10).map(|_| backoff.fail(&mut rng)).collect();
        assert!(waits[0] >= Duration::from_millis(125) && waits[0] <= Duration::from_millis(250));
        assert!(waits[2] >= Duration::from_millis(500) && waits[2] <= Duration::from_secs(1));
        for wait in &waits[5..] {
            assert!(*wait >= Duration::from_millis(2500) && *wait <= Duration::from_secs(5));
        }
        backoff.reset();
        assert!(backoff.fail(&mut rng) <= Duration::from_millis(250));
    }
}

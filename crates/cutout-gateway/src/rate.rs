//! The per-source request rate (`rate-limit-per-source`, `rate-limit-burst`): a token bucket per
//! source (governor's GCRA), a request past it answered 429 with `Retry-After` and never
//! counted by a breaker (the client asked too often; the upstream did nothing).
//!
//! Off by default: a gateway behind a load balancer sees most of its traffic come from a few
//! addresses, and no default rate fits every deployment. A source is the connection's peer as
//! [`crate::share::Source`] names it (an IPv4 address, an IPv6 /64).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::share::Source;

/// The most requests a second a rate may allow (a period of a microsecond per request).
pub const MAX_PER_SECOND: u64 = 1_000_000;

/// How often, in checks, the limiter forgets the sources whose bucket is full again, so that
/// many sources passing through leave no state behind.
const PRUNE_EVERY: u64 = 4096;

/// A configured rate: `requests` per `per`, with bursts of up to `burst` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per `per`, on average.
    pub requests: u32,
    /// The period `requests` are counted over (a second, a minute or an hour).
    pub per: Duration,
    /// The most requests allowed at once, from a full bucket.
    pub burst: u32,
}

impl RateLimit {
    /// Reads `"100/s"`, `"6000/m"`, `"10000/h"` (requests per second, minute, hour). The burst
    /// defaults to the rate's count: a full bucket holds `requests`, so `"3/m"` allows three
    /// requests at once, then one every 20 s. What is wrong: the config's code (`GW-CFG-004`
    /// unreadable, `GW-CFG-009` out of range) and its words.
    pub fn parse(text: &str) -> Result<RateLimit, (&'static str, String)> {
        let unreadable = || {
            (
                "GW-CFG-004",
                "allowed \"<requests>/s\", \"/m\" or \"/h\", such as \"100/s\"".to_owned(),
            )
        };
        let (count, unit) = text.trim().split_once('/').ok_or_else(unreadable)?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(unreadable()),
        };
        let requests: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(unreadable)?;
        let per_second = f64::from(requests) / per.as_secs_f64();
        if per_second > MAX_PER_SECOND as f64 {
            return Err((
                "GW-CFG-009",
                format!("more than {MAX_PER_SECOND} requests a second; allowed at most that"),
            ));
        }
        Ok(RateLimit {
            requests,
            per,
            burst: requests,
        })
    }

    /// The time one request's token takes to come back.
    fn period(&self) -> Duration {
        self.per / self.requests
    }
}

/// The limiter of one gateway: a bucket per source.
#[derive(Debug)]
pub struct SourceRate {
    limiter: DefaultKeyedRateLimiter<Source>,
    /// Checks made, for the pruning.
    ///
    /// # Orderings
    /// A counter that only decides when to prune: `Relaxed`, it publishes nothing.
    checks: AtomicU64,
}

impl SourceRate {
    /// A limiter for `limit`.
    pub fn new(limit: RateLimit) -> SourceRate {
        let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(limit.period())
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        SourceRate {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            checks: AtomicU64::new(0),
        }
    }

    /// Takes a token of `source`'s bucket: `Err` with how long until one is back when the
    /// bucket is empty.
    pub fn check(&self, source: Source) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter
            .check_key(&source)
            .map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
    }

    /// How many sources the limiter holds a bucket for.
    pub fn sources(&self) -> usize {
        self.limiter.len()
    }
}

/// `Retry-After` for a wait of `wait`: whole seconds, rounded up, at least one.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    fn source(last: u8) -> Source {
        Source::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn rates_are_read_with_their_unit_and_a_burst_of_their_count() {
        let r = RateLimit::parse("100/s").unwrap();
        assert_eq!(
            (r.requests, r.per, r.burst),
            (100, Duration::from_secs(1), 100)
        );
        let r = RateLimit::parse("6000 / m").unwrap();
        assert_eq!(
            (r.requests, r.per, r.burst),
            (6000, Duration::from_secs(60), 6000)
        );
        assert_eq!(RateLimit::parse("10/h").unwrap().burst, 10);
        for bad in [
            "",
            "100",
            "0/s",
            "-1/s",
            "1.5/s",
            "100/d",
            "x/s",
            "2000000/s",
        ] {
            assert!(RateLimit::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_source_has_its_own_bucket() {
        let rate = SourceRate::new(RateLimit {
            requests: 1,
            per: Duration::from_secs(60),
            burst: 3,
        });
        for _ in 0..3 {
            assert!(rate.check(source(1)).is_ok());
        }
        let wait = rate.check(source(1)).unwrap_err();
        assert!(
            wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        assert!(
            rate.check(source(2)).is_ok(),
            "another source is not slowed"
        );
        assert_eq!(rate.sources(), 2);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
    }
}

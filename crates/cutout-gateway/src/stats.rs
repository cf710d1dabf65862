//! Rolling statistics of a cluster or a host: requests, upstream errors, refusals, slow requests and a latency histogram per second over the last minute.
//!
//! The status page reads them (rates over the last [`RECENT`] seconds, p50 / p99 and a
//! minute of history for its sparklines); the slow mark of each request ([`SlowLimit`]) reads
//! the normal latency of successful responses ([`Stats::normal_latency`]).
//!
//! **Errors are the upstream's only** ([`Ended`]): a 5xx, a connection error, an attempt
//! timeout, a broken or stalled body (of a detached attempt too: its own outcome). The
//! gateway's own refusals (the cluster breaker open, every host ejected) are counted apart, as
//! refused: they are answers the upstream never saw, and counting them as errors made a
//! cluster whose breaker refused show "errors 96 %" while its live hosts had none. The error
//! and slow shares are of the requests forwarded (not refused); the refused share is of all
//! requests; the latency quantiles are those of the forwarded requests (a refusal takes
//! microseconds and says nothing about the upstream). A client's fault, a client leaving
//! whose attempt was dropped, and the gateway's `request-timeout` are neither errors nor
//! successes.
//!
//! Each second has its slot in a ring of
//! [`SLOTS`]; a slot is cleared when its second comes round again. Latencies fall into 64
//! buckets growing by 25 % from 50 µs (so up to about 80 s), and quantiles are read as a
//! bucket's upper bound: within 25 % of the truth.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cutout::Breaker;
use serde_json::{Value, json};
use tokio::time::Instant;

/// Seconds of history kept.
pub const SLOTS: usize = 60;
/// The seconds the current rates and quantiles are taken over (complete seconds).
pub const RECENT: u64 = 10;
/// Successful responses needed before [`Stats::normal_latency`] answers.
pub const NORMAL_SAMPLES: u64 = 20;

const BUCKETS: usize = 64;
const BASE_NANOS: f64 = 50_000.0;
const GROWTH: f64 = 1.25;

/// How a request ended, as the statistics count it (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The upstream's answer ended whole, not a 5xx: its latency is a normal one.
    Success,
    /// The upstream failed (a 5xx, unreachable, a timeout, a broken or stalled body, a give-up
    /// counted against it).
    UpstreamError,
    /// Refused by the gateway (the cluster's breaker, or every host ejected): the upstream
    /// never saw it.
    Refused,
    /// Forwarded, and neither: the client's fault, an early give-up, `request-timeout`.
    Other,
}

#[derive(Debug, Clone)]
struct Slot {
    second: u64,
    requests: u32,
    errors: u32,
    refused: u32,
    slow: u32,
    all: [u32; BUCKETS],
    ok: [u32; BUCKETS],
}

impl Slot {
    fn empty(second: u64) -> Slot {
        Slot {
            second,
            requests: 0,
            errors: 0,
            refused: 0,
            slow: 0,
            all: [0; BUCKETS],
            ok: [0; BUCKETS],
        }
    }
}

/// The statistics of one cluster or host (see the [module docs](self)). Recording takes a
/// mutex for a few increments.
#[derive(Debug)]
pub struct Stats {
    epoch: Instant,
    slots: Mutex<Vec<Slot>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

fn bucket_of(duration: Duration) -> usize {
    let nanos = duration.as_nanos() as f64;
    if nanos < BASE_NANOS {
        return 0;
    }
    let n = ((nanos / BASE_NANOS).ln() / GROWTH.ln()).floor() as usize + 1;
    n.min(BUCKETS - 1)
}

/// The upper bound of bucket `n`.
fn upper(n: usize) -> Duration {
    Duration::from_nanos((BASE_NANOS * GROWTH.powi(n as i32)) as u64)
}

fn quantile(hist: &[u32; BUCKETS], q: f64) -> Option<Duration> {
    let total: u64 = hist.iter().map(|n| u64::from(*n)).sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (n, count) in hist.iter().enumerate() {
        seen += u64::from(*count);
        if seen >= rank {
            return Some(upper(n));
        }
    }
    Some(upper(BUCKETS - 1))
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs_f64() * 1000.0))
}

impl Stats {
    /// Empty statistics, seconds counted from now.
    pub fn new() -> Stats {
        Stats {
            epoch: Instant::now(),
            slots: Mutex::new((0..SLOTS).map(|_| Slot::empty(u64::MAX)).collect()),
        }
    }

    fn second(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        // Each update is a few increments: a poisoned ring is still consistent enough for
        // statistics.
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records one request that took `duration` and ended as `ended`; `slow`: over the
    /// cluster's slow limit (never for a refusal). A refusal's latency is not recorded, a
    /// success's is a normal one.
    pub fn record(&self, duration: Duration, ended: Ended, slow: bool) {
        let second = self.second();
        let bucket = bucket_of(duration);
        let mut slots = self.lock();
        let slot = &mut slots[(second % SLOTS as u64) as usize];
        if slot.second != second {
            *slot = Slot::empty(second);
        }
        slot.requests += 1;
        if ended == Ended::Refused {
            slot.refused += 1;
            return;
        }
        slot.errors += u32::from(ended == Ended::UpstreamError);
        slot.slow += u32::from(slow);
        slot.all[bucket] += 1;
        if ended == Ended::Success {
            slot.ok[bucket] += 1;
        }
    }

    /// The median latency of the successful responses of the last minute, once there were
    /// [`NORMAL_SAMPLES`] of them.
    pub fn normal_latency(&self) -> Option<Duration> {
        let second = self.second();
        let slots = self.lock();
        let mut hist = [0u32; BUCKETS];
        for slot in slots.iter().filter(|s| fresh(s, second, SLOTS as u64)) {
            for (sum, n) in hist.iter_mut().zip(slot.ok.iter()) {
                *sum += n;
            }
        }
        let total: u64 = hist.iter().map(|n| u64::from(*n)).sum();
        (total >= NORMAL_SAMPLES)
            .then(|| quantile(&hist, 0.5))
            .flatten()
    }

    /// The statistics as the status page reads them, over the last [`RECENT`] complete
    /// seconds: `rps` (every request), `error_rate` and `slow_rate` (upstream errors and slow
    /// requests, of the requests forwarded: `null` when none was), `refused_rate` (of every
    /// request), `p50_ms`, `p99_ms` (of the requests forwarded); and `history`: for each of the
    /// last [`SLOTS`] complete seconds, oldest first, `[requests, errors, slow, p50_ms,
    /// p99_ms, refused]` (the latencies `null` in a second without forwarded requests).
    pub fn json(&self) -> Value {
        let second = self.second();
        let slots = self.lock();
        let (mut requests, mut errors, mut slow, mut refused) = (0u64, 0u64, 0u64, 0u64);
        let mut hist = [0u32; BUCKETS];
        for slot in slots
            .iter()
            .filter(|s| s.second < second && fresh(s, second, RECENT + 1))
        {
            requests += u64::from(slot.requests);
            errors += u64::from(slot.errors);
            slow += u64::from(slot.slow);
            refused += u64::from(slot.refused);
            for (sum, n) in hist.iter_mut().zip(slot.all.iter()) {
                *sum += n;
            }
        }
        let seconds = RECENT.min(second).max(1);
        let forwarded = requests - refused;
        let rate = |n: u64| (forwarded > 0).then(|| n as f64 / forwarded as f64);
        let history: Vec<Value> = (1..=SLOTS as u64)
            .rev()
            .filter_map(|back| second.checked_sub(back))
            .map(|s| {
                let slot = &slots[(s % SLOTS as u64) as usize];
                if slot.second == s {
                    json!([
                        slot.requests,
                        slot.errors,
                        slot.slow,
                        ms(quantile(&slot.all, 0.5)),
                        ms(quantile(&slot.all, 0.99)),
                        slot.refused,
                    ])
                } else {
                    json!([0, 0, 0, null, null, 0])
                }
            })
            .collect();
        json!({
            "rps": requests as f64 / seconds as f64,
            "error_rate": rate(errors),
            "slow_rate": rate(slow),
            "refused_rate": (requests > 0).then(|| refused as f64 / requests as f64),
            "p50_ms": ms(quantile(&hist, 0.5)),
            "p99_ms": ms(quantile(&hist, 0.99)),
            "history": history,
        })
    }
}

/// Whether `slot` is one of the last `span` seconds before (and including) `second`.
fn fresh(slot: &Slot, second: u64, span: u64) -> bool {
    slot.second <= second && second - slot.second < span
}

/// The slow mark of a cluster's statistics (`slow_rate`, the status page's "slow limit"): a
/// request is marked slow when it took longer than the cluster's normal latency × the
/// breaker's slow multiple (cutout's `slow-calls` multiple, default 3), or the breaker's
/// absolute `slow-call-threshold` when that is lower, never below [`SlowLimit::FLOOR`] and
/// never above the attempt timeout. The normal latency is the cluster breaker's measure
/// (adaptive breakers), else the gateway's own ([`Stats::normal_latency`]); until one is known,
/// the limit is half the attempt timeout.
///
/// It is a statistic for people and decides nothing: no breaker and no give-up reads it (a
/// client's give-up is judged by the upstream's own outcome, see [`crate::attempt`]).
#[derive(Debug)]
pub struct SlowLimit {
    breaker: Breaker,
    stats: std::sync::Arc<Stats>,
    attempt_timeout: Duration,
    multiple: f64,
    threshold: Option<Duration>,
    /// The limit in nanoseconds and when it was worked out (milliseconds since `epoch`, plus
    /// one; 0: never). Statistics: `Relaxed`, a stale value is `REFRESH` old at most.
    cached: AtomicU64,
    cached_at: AtomicU64,
    epoch: Instant,
}

impl SlowLimit {
    /// The lowest limit: below it no request is marked slow, however quick the cluster
    /// normally is (a fraction of a millisecond is scheduling noise, not slowness).
    pub const FLOOR: Duration = Duration::from_millis(100);

    /// How long [`SlowLimit::limit`] keeps a limit it worked out.
    pub const REFRESH: Duration = Duration::from_millis(100);

    /// The slow mark of a cluster guarded by `breaker` (its settings give the multiple and the
    /// absolute threshold), whose successful responses `stats` measures.
    pub fn new(
        breaker: Breaker,
        stats: std::sync::Arc<Stats>,
        attempt_timeout: Duration,
    ) -> SlowLimit {
        let settings = breaker.settings();
        let multiple = settings.slow_calls().map_or(3.0, |s| s.multiple());
        let threshold = settings.slow_call_threshold();
        SlowLimit {
            breaker,
            stats,
            attempt_timeout,
            multiple,
            threshold,
            cached: AtomicU64::new(0),
            cached_at: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The limit, as worked out at most [`SlowLimit::REFRESH`] ago.
    pub fn limit(&self) -> Duration {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let at = self.cached_at.load(Ordering::Relaxed);
        if at != 0 && now.saturating_sub(at) < Self::REFRESH.as_millis() as u64 {
            return Duration::from_nanos(self.cached.load(Ordering::Relaxed));
        }
        let limit = self.compute();
        self.cached.store(
            u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.cached_at.store(now, Ordering::Relaxed);
        limit
    }

    /// The normal latency the limit starts from: the breaker's, else the gateway's.
    pub fn normal_latency(&self) -> Option<Duration> {
        self.breaker
            .normal_latency()
            .or_else(|| self.stats.normal_latency())
    }

    /// The limit now.
    pub fn compute(&self) -> Duration {
        let relative = self
            .normal_latency()
            .map(|normal| normal.mul_f64(self.multiple));
        let limit = match (self.threshold, relative) {
            (Some(absolute), Some(relative)) => absolute.min(relative),
            (Some(absolute), None) => absolute,
            (None, Some(relative)) => relative,
            (None, None) => self.attempt_timeout / 2,
        };
        limit.max(Self::FLOOR).min(self.attempt_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_normal_latency_the_slow_mark_is_half_the_attempt_timeout() {
        let breaker = Breaker::new("c", cutout::Settings::default());
        let limit = |timeout| {
            SlowLimit::new(breaker.clone(), std::sync::Arc::new(Stats::new()), timeout).limit()
        };
        assert_eq!(limit(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(
            limit(Duration::from_millis(150)),
            Duration::from_millis(100),
            "never below the floor"
        );
        assert_eq!(
            limit(Duration::from_millis(50)),
            Duration::from_millis(50),
            "nor above the attempt timeout"
        );
    }

    #[test]
    fn buckets_grow_by_a_quarter_and_quantiles_stay_within_it() {
        assert_eq!(bucket_of(Duration::from_micros(10)), 0);
        for ms in [1u64, 5, 20, 300, 2_000] {
            let d = Duration::from_millis(ms);
            let up = upper(bucket_of(d));
            assert!(up >= d && up <= d.mul_f64(1.26), "{d:?} -> {up:?}");
        }
        assert_eq!(bucket_of(Duration::from_secs(3600)), BUCKETS - 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rates_history_and_the_normal_latency() {
        let stats = Stats::new();
        assert_eq!(stats.normal_latency(), None);
        for n in 0..40 {
            let ended = if n % 4 == 0 {
                Ended::UpstreamError
            } else {
                Ended::Success
            };
            stats.record(Duration::from_millis(2), ended, n % 10 == 0);
        }
        assert_eq!(
            stats.normal_latency(),
            Some(upper(bucket_of(Duration::from_millis(2))))
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let view = stats.json();
        assert_eq!(view["rps"], 40.0);
        assert_eq!(view["error_rate"], 0.25);
        assert_eq!(view["slow_rate"], 0.1);
        let history = view["history"].as_array().unwrap();
        assert_eq!(history.len(), 1, "one complete second so far");
        assert_eq!(history[0][0], 40);
        // A minute later the ring has forgotten them.
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(stats.normal_latency(), None);
        let view = stats.json();
        assert_eq!(view["rps"], 0.0);
        assert_eq!(view["history"].as_array().unwrap().len(), SLOTS);
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_are_neither_errors_nor_latencies() {
        let stats = Stats::new();
        for _ in 0..5 {
            stats.record(Duration::from_millis(4), Ended::Success, false);
            stats.record(Duration::from_millis(4), Ended::UpstreamError, false);
        }
        for _ in 0..90 {
            stats.record(Duration::from_micros(20), Ended::Refused, false);
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        let view = stats.json();
        assert_eq!(view["rps"], 100.0);
        assert_eq!(view["error_rate"], 0.5, "5 of the 10 forwarded");
        assert_eq!(view["refused_rate"], 0.9);
        assert_eq!(
            view["p50_ms"],
            upper(bucket_of(Duration::from_millis(4))).as_secs_f64() * 1000.0
        );
        assert_eq!(view["history"][0][5], 90);
        // Only refusals: no forwarded share to give.
        let refused = Stats::new();
        refused.record(Duration::from_micros(20), Ended::Refused, false);
        tokio::time::advance(Duration::from_secs(1)).await;
        let view = refused.json();
        assert_eq!(view["error_rate"], Value::Null);
        assert_eq!(view["refused_rate"], 1.0);
    }
}

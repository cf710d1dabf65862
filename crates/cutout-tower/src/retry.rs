//! [`BreakerRetry`]: a tower retry policy that respects the breaker, a budget and deadlines.
//!
//! Put the retry outside the breaker and the attempt timeout inside it:
//! retry → breaker → timeout. Every attempt then passes the breaker and is recorded (a timed-out
//! attempt is a failure), and the policy sees the breaker's refusal as an error it never
//! retries.
//!
//! For each failed attempt (the classifier says [`Outcome::Failure`]) the policy decides, in
//! this order, and stops at the first rule that says no (the reason is stamped on the returned
//! [`Error`], see [`Error::retry_stop`], and counted in [`RetryStats`]):
//! 1. a refusal is never retried ([`RetryStop::Refused`]);
//! 2. a request that may not be sent twice is not retried ([`RetryStop::NotIdempotent`]): for
//!    `http::Request`, a method that is not idempotent (POST, PATCH, CONNECT, and any
//!    extension method: RFC 9110 §9.2.2) unless the caller put [`RetrySafe`] in its
//!    extensions (a POST with an idempotency key, say). Its first failure is returned: a POST
//!    whose answer was a 502 may still have been carried out;
//! 3. the breaker is open or isolated now (this attempt may have opened it): stop
//!    ([`RetryStop::BreakerOpen`]);
//! 4. the maximum number of retries is reached ([`RetryStop::Attempts`]);
//! 5. the request has a [`Deadline`] and what will be left of it after the backoff is shorter
//!    than the breaker's [`normal_latency`](cutout::Breaker::normal_latency) (or is nothing,
//!    while the breaker has no baseline yet): the attempt could not finish, so it is not started
//!    ([`RetryStop::Deadline`]);
//! 6. the retry budget has nothing to withdraw ([`RetryStop::BudgetExhausted`], which says the
//!    budget stopped it, not the breaker).
//!
//! Then it waits a backoff (exponential from `base` up to `max`, jittered) and retries.
//! Successes and ignored outcomes (a 429, a 404) are not retried. Every request deposits once
//! into the budget (on its first result), so the budget lets a share of all requests be
//! retried.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cutout::classify::{Classify, DefaultClassifier, Outcome};
use cutout::{Breaker, Jitter, State};
use tokio::time::{Instant, Sleep};
use tower::retry::Policy;
use tower::retry::budget::{Budget, TpsBudget};

use crate::error::{Error, RetryStop};
use crate::keyed::{KeyFn, KeyedBreakers, KeyedLayer};

/// A request's deadline: the instant by which its caller needs an answer. Put it in an
/// `http::Request`'s extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(pub Instant);

impl Deadline {
    /// A deadline `after` from now.
    pub fn after(after: Duration) -> Deadline {
        Deadline(Instant::now() + after)
    }
}

/// A mark in an `http::Request`'s extensions: this request may be sent again even though its
/// method is not idempotent (the server deduplicates it, e.g. by an idempotency key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetrySafe;

/// What the retry policy reads of a request: its [`Deadline`], and whether it may be sent
/// twice.
pub trait RequestDeadline {
    /// The request's deadline, if it has one.
    fn deadline(&self) -> Option<Instant>;

    /// Whether a failed attempt of this request may be sent again. Default: yes (a request
    /// type that is not HTTP says itself whether it is).
    fn retry_safe(&self) -> bool {
        true
    }
}

impl<B> RequestDeadline for http::Request<B> {
    fn deadline(&self) -> Option<Instant> {
        self.extensions().get::<Deadline>().map(|d| d.0)
    }

    /// GET, HEAD, OPTIONS, TRACE, PUT and DELETE (RFC 9110 §9.2.2), or any request marked
    /// [`RetrySafe`].
    fn retry_safe(&self) -> bool {
        self.method().is_idempotent() || self.extensions().get::<RetrySafe>().is_some()
    }
}

/// Finds the breaker a request goes through, so the retry policy can ask its state and normal
/// latency.
pub trait BreakerLookup<Req> {
    /// The breaker `request` goes through, if known.
    fn breaker_for(&self, request: &Req) -> Option<Breaker>;
}

impl<Req> BreakerLookup<Req> for Breaker {
    fn breaker_for(&self, _: &Req) -> Option<Breaker> {
        Some(self.clone())
    }
}

impl<Req, K, F, C> BreakerLookup<Req> for KeyedLayer<K, F, C>
where
    F: KeyFn<Req, Key = K>,
    K: std::hash::Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    fn breaker_for(&self, request: &Req) -> Option<Breaker> {
        lookup_keyed(self.breakers(), &self.key_fn().key(request))
    }
}

fn lookup_keyed<K>(breakers: &KeyedBreakers<K>, key: &K) -> Option<Breaker>
where
    K: std::hash::Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    breakers.get(key)
}

/// Why retries stopped, counted since the policy was built (clones share the counters).
#[derive(Debug, Default)]
pub struct RetryStats {
    retries: AtomicU64,
    refused: AtomicU64,
    breaker_open: AtomicU64,
    budget_exhausted: AtomicU64,
    deadline: AtomicU64,
    attempts: AtomicU64,
    not_idempotent: AtomicU64,
}

impl RetryStats {
    /// Retries started.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// How many times a retry was not made for `reason`.
    pub fn stopped(&self, reason: RetryStop) -> u64 {
        let counter = match reason {
            RetryStop::Refused => &self.refused,
            RetryStop::BreakerOpen => &self.breaker_open,
            RetryStop::BudgetExhausted => &self.budget_exhausted,
            RetryStop::Deadline => &self.deadline,
            RetryStop::Attempts => &self.attempts,
            RetryStop::NotIdempotent => &self.not_idempotent,
        };
        counter.load(Ordering::Relaxed)
    }

    fn stop(&self, reason: RetryStop) {
        let counter = match reason {
            RetryStop::Refused => &self.refused,
            RetryStop::BreakerOpen => &self.breaker_open,
            RetryStop::BudgetExhausted => &self.budget_exhausted,
            RetryStop::Deadline => &self.deadline,
            RetryStop::Attempts => &self.attempts,
            RetryStop::NotIdempotent => &self.not_idempotent,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A retry policy that never retries a refusal, stops once the breaker is open, draws on a
/// retry budget, backs off with jitter and respects deadlines (see the [module docs](self)).
///
/// `L` finds the breaker of a request ([`Breaker`] for one breaker, a [`KeyedLayer`] for
/// keyed ones); `C` decides which results are failures worth retrying (default: every `Err`;
/// for HTTP use [`HttpClassifier`](crate::HttpClassifier) so that 5xx responses are retried).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use cutout::{Breaker, Settings};
/// use cutout_tower::retry::BreakerRetry;
/// use tower::retry::budget::TpsBudget;
///
/// let breaker = Breaker::new("rates", Settings::default());
/// let policy = BreakerRetry::new(breaker, Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)))
///     .max_retries(3)
///     .backoff(Duration::from_millis(50), Duration::from_secs(1));
/// # let _ = policy;
/// ```
pub struct BreakerRetry<L, C = DefaultClassifier> {
    lookup: L,
    classifier: C,
    budget: Arc<dyn Budget + Send + Sync>,
    base: Duration,
    max: Duration,
    jitter: Jitter,
    max_retries: u32,
    stats: Arc<RetryStats>,
    /// Results seen in this request session (0 on the service's own copy).
    attempts: u32,
}

impl<L> BreakerRetry<L> {
    /// A policy for the breakers `lookup` finds, drawing on `budget` (shared: every clone and
    /// every request draws on it). Defaults: 3 retries, backoff 100 ms doubling to 2 s with
    /// equal jitter.
    pub fn new(lookup: L, budget: Arc<TpsBudget>) -> Self {
        BreakerRetry::with_budget(lookup, budget)
    }

    /// Like [`BreakerRetry::new`], with any tower [`Budget`].
    pub fn with_budget(lookup: L, budget: Arc<dyn Budget + Send + Sync>) -> Self {
        BreakerRetry {
            lookup,
            classifier: DefaultClassifier,
            budget,
            base: Duration::from_millis(100),
            max: Duration::from_secs(2),
            jitter: Jitter::Equal,
            max_retries: 3,
            stats: Arc::default(),
            attempts: 0,
        }
    }
}

impl<L, C> BreakerRetry<L, C> {
    /// Decides which results are failures to retry.
    pub fn classifier<C2>(self, classifier: C2) -> BreakerRetry<L, C2> {
        BreakerRetry {
            lookup: self.lookup,
            classifier,
            budget: self.budget,
            base: self.base,
            max: self.max,
            jitter: self.jitter,
            max_retries: self.max_retries,
            stats: self.stats,
            attempts: self.attempts,
        }
    }

    /// The most retries per request (default 3).
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// The backoff before retry `n` (from 1) is `base × 2^(n-1)`, at most `max`, before jitter.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base = base;
        self.max = max.max(base);
        self
    }

    /// The jitter applied to the backoff: [`Jitter::Equal`] (default: half fixed, half
    /// random), [`Jitter::Full`] or [`Jitter::None`].
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The counters of retries and of reasons to stop (shared by clones).
    pub fn stats(&self) -> Arc<RetryStats> {
        Arc::clone(&self.stats)
    }

    /// The backoff before retry number `retry` (from 1).
    fn delay(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(31));
        let computed = self.base.saturating_mul(factor).min(self.max);
        let nanos = u64::try_from(computed.as_nanos()).unwrap_or(u64::MAX);
        match self.jitter {
            Jitter::None => computed,
            Jitter::Full => Duration::from_nanos(fastrand::u64(0..=nanos)),
            // `Jitter::Equal`, and any kind a later cutout adds (`Jitter` is non-exhaustive):
            // the default's draw, which keeps half the backoff as a floor.
            _ => {
                let half = nanos / 2;
                Duration::from_nanos(half + fastrand::u64(0..=nanos - half))
            }
        }
    }
}

/// Clones share the budget, the lookup's breakers and the statistics; the count of attempts
/// is per request session (tower clones the policy for each request).
impl<L: Clone, C: Clone> Clone for BreakerRetry<L, C> {
    fn clone(&self) -> Self {
        BreakerRetry {
            lookup: self.lookup.clone(),
            classifier: self.classifier.clone(),
            budget: Arc::clone(&self.budget),
            base: self.base,
            max: self.max,
            jitter: self.jitter,
            max_retries: self.max_retries,
            stats: Arc::clone(&self.stats),
            attempts: self.attempts,
        }
    }
}

impl<L, C> fmt::Debug for BreakerRetry<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerRetry")
            .field("max_retries", &self.max_retries)
            .field("base", &self.base)
            .field("max", &self.max)
            .field("jitter", &self.jitter)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl<L, C, Req, Res> Policy<Req, Res, Error> for BreakerRetry<L, C>
where
    L: BreakerLookup<Req>,
    C: Classify<Res, Error>,
    Req: Clone + RequestDeadline,
{
    type Future = Sleep;

    fn retry(&mut self, request: &mut Req, result: &mut Result<Res, Error>) -> Option<Sleep> {
        if self.attempts == 0 {
            self.budget.deposit();
        }
        self.attempts = self.attempts.saturating_add(1);
        if let Err(error) = result
            && error.is_rejected()
        {
            return self.stop(result, RetryStop::Refused);
        }
        if self.classifier.classify(result) != Outcome::Failure {
            return None;
        }
        if !request.retry_safe() {
            return self.stop(result, RetryStop::NotIdempotent);
        }
        let breaker = self.lookup.breaker_for(request);
        if let Some(breaker) = &breaker
            && matches!(breaker.state(), State::Open | State::Isolated)
        {
            return self.stop(result, RetryStop::BreakerOpen);
        }
        if self.attempts > self.max_retries {
            return self.stop(result, RetryStop::Attempts);
        }
        let delay = self.delay(self.attempts);
        if let Some(deadline) = request.deadline() {
            let left = deadline.saturating_duration_since(Instant::now() + delay);
            let needed = breaker.as_ref().and_then(Breaker::normal_latency);
            let too_short = match needed {
                Some(normal) => left < normal,
                None => left.is_zero(),
            };
            if too_short {
                return self.stop(result, RetryStop::Deadline);
            }
        }
        if !self.budget.withdraw() {
            return self.stop(result, RetryStop::BudgetExhausted);
        }
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        Some(tokio::time::sleep(delay))
    }

    fn clone_request(&mut self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}

impl<L, C> BreakerRetry<L, C> {
    fn stop<Res>(&self, result: &mut Result<Res, Error>, reason: RetryStop) -> Option<Sleep> {
        self.stats.stop(reason);
        if let Err(error) = result {
            error.set_retry_stop(reason);
        }
        #[cfg(feature = "tracing")]
        tracing::debug!(
            reason = reason.as_str(),
            attempts = self.attempts,
            "not retrying"
        );
        None
    }
}

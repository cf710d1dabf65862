//! Active health checks for keyed breakers: a check that passes ends an open key's break early.
//!
//! A key's breaker learns that its host is back from its own probe, after its break, and the
//! break grows while the host is down (to 2 min by default). An active check learns sooner:
//! [`KeyedBreakers::check_open_keys`] runs your check (an async function of the key, such as
//! a `GET /healthz` to the host) for every key whose breaker is open, and a check that passes
//! ends that key's break with
//! [`Breaker::end_break_on_signal`](cutout::Breaker::end_break_on_signal): the key becomes
//! half-open and its own probes, real calls, still decide. [`KeyedBreakers::health_checks`]
//! runs such a round every interval, with jitter, until dropped.
//!
//! What the checks do and do not do (DESIGN §2 "Giving traffic back", §8):
//! - Only open keys are checked, those whose break a pass could end: a closed host gets no
//!   extra load (its calls are its checks), a half-open one is being probed by its calls
//!   already, and a host serving a break it asked for (`Retry-After`) or one an operator
//!   forced is left alone. A round's checks run at once, so it lasts one timeout.
//! - A check that fails, or takes longer than the timeout, changes nothing: passive judgement
//!   stays the only way a key opens, so a health endpoint that is down while the real calls
//!   succeed cannot eject a host.
//! - A check counts in no window: its outcome is evidence for ending a break, not a call.
//! - A check that began before the key's breaker opened proves nothing about what opened it:
//!   its age (from its start) is passed along and the breaker ignores it as stale.
//! - A forced break ([`isolate`](KeyedBreakers::isolate), `open_for`) or one the host asked
//!   for (`Retry-After`) is served whole.
//! - A check that panics (in the call that makes its future, or while it runs) is a failed
//!   check of that key, and the round and the loop go on with the other keys: one key's bug
//!   must not stop every host from being checked, silently (the breaker contains its
//!   listeners and gates the same way). The check function is called again for the next key
//!   and round after such a panic, so it must not rely on state a panic may leave half-made.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::{BreakEndReason, Breaker};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::KeyedBreakers;

/// How often and how long [`KeyedBreakers::health_checks`] checks the open keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthChecks {
    /// The time between rounds, before jitter (default 5 s).
    pub interval: Duration,
    /// How long one check may take; a slower one counts as failed (default 1 s).
    pub timeout: Duration,
    /// Each round waits `interval` plus a uniform draw up to this (default 1 s), so that the
    /// checks of many clients do not reach a host that came back all at once.
    pub jitter: Duration,
}

impl Default for HealthChecks {
    fn default() -> Self {
        HealthChecks {
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            jitter: Duration::from_secs(1),
        }
    }
}

/// What one round of [`KeyedBreakers::check_open_keys`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckRound {
    /// Keys whose breaker was open when the round began, each checked once.
    pub checked: usize,
    /// Checks that passed within the timeout.
    pub passed: usize,
    /// Breaks those passes ended (a key may have left open meanwhile, or opened anew after its
    /// check began: then its pass ends nothing).
    pub ended: usize,
}

impl<K> KeyedBreakers<K>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    /// Checks every key whose break a pass could end ([`Breaker::break_may_end`]: open on a
    /// break of its own) with `check` (true: the key's dependency is healthy), all at once,
    /// each within `timeout`; a pass ends that key's break early (module docs). Other keys
    /// are not checked: closed, half-open, isolated, and open on a break an operator forced
    /// or the host asked for (`Retry-After`: it asked not to be called).
    ///
    /// All at once: a round lasts at most one timeout, however many hosts are down; the
    /// price is a burst of as many checks as there are open keys (at most the map's
    /// `max_open`, when set, else `max_keys`), spread across rounds and clients by the
    /// loop's jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Settings, State};
    /// use cutout_tower::keyed::KeyedBreakers;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let hosts: KeyedBreakers<String> = KeyedBreakers::builder(Settings::default()).build();
    /// let breaker = hosts.breaker(&"inventory:8080".to_string()).unwrap();
    /// breaker.trip_on_signal();
    /// let round = hosts
    ///     .check_open_keys(Duration::from_secs(1), |_key| async { true })
    ///     .await;
    /// assert_eq!((round.checked, round.passed, round.ended), (1, 1, 1));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// # }
    /// ```
    pub async fn check_open_keys<F, Fut>(&self, timeout: Duration, mut check: F) -> CheckRound
    where
        F: FnMut(&K) -> Fut,
        Fut: Future<Output = bool>,
    {
        let open: Vec<(K, Breaker)> = self
            .read()
            .iter()
            .map(|(key, entry)| (key.clone(), entry.breaker.clone()))
            .collect();
        // Outside the map's lock: each breaker's own lock is taken to ask.
        let open: Vec<(K, Breaker)> = open
            .into_iter()
            .filter(|(_, breaker)| breaker.break_may_end())
            .collect();
        let mut round = CheckRound {
            checked: open.len(),
            ..CheckRound::default()
        };
        // Every check of the round at once, each within the timeout, so that a round lasts
        // one timeout however many hosts are down (one after another, 1,000 hung hosts took
        // 1,000 timeouts).
        let mut checks: FuturesUnordered<_> = open
            .into_iter()
            .map(|(key, breaker)| {
                let started = tokio::time::Instant::now();
                // A panic making the check or running it fails this key's check only.
                let future = catch_unwind(AssertUnwindSafe(|| check(&key))).ok();
                async move {
                    let passed = match future {
                        Some(future) => {
                            tokio::time::timeout(timeout, Contained { future }).await
                                == Ok(Some(true))
                        }
                        None => false,
                    };
                    (breaker, started, passed)
                }
            })
            .collect();
        while let Some((breaker, started, passed)) = checks.next().await {
            if passed {
                round.passed += 1;
                if breaker.end_break_on_signal(BreakEndReason::HealthCheck, started.elapsed()) {
                    round.ended += 1;
                }
            }
        }
        round
    }

    /// Runs [`check_open_keys`](Self::check_open_keys) every `every.interval` plus jitter,
    /// for as long as the returned future is polled: spawn it, and abort or drop it to stop.
    ///
    /// ```no_run
    /// use cutout::Settings;
    /// use cutout_tower::keyed::{HealthChecks, HostKey, KeyedBreakers};
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// let hosts: KeyedBreakers<HostKey> = KeyedBreakers::builder(Settings::default()).build();
    /// let checks = hosts.health_checks(HealthChecks::default(), |host: &HostKey| {
    ///     let url = format!("{host}/healthz");
    ///     async move { ping(&url).await }
    /// });
    /// let task = tokio::spawn(checks);
    /// // ... serve traffic through a KeyedLayer over `hosts` ...
    /// task.abort();
    /// # }
    /// # async fn ping(_url: &str) -> bool { true }
    /// ```
    pub fn health_checks<F, Fut>(
        &self,
        every: HealthChecks,
        mut check: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        F: FnMut(&K) -> Fut + Send + 'static,
        Fut: Future<Output = bool> + Send,
    {
        let breakers = self.clone();
        async move {
            let mut rng = fastrand::Rng::new();
            loop {
                let jitter = Duration::from_nanos(
                    rng.u64(0..=u64::try_from(every.jitter.as_nanos()).unwrap_or(u64::MAX)),
                );
                tokio::time::sleep(every.interval.saturating_add(jitter)).await;
                breakers.check_open_keys(every.timeout, &mut check).await;
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A check's future whose panic is caught: it then ends with `None` and is never polled
    /// again (the future is dropped with the round's step).
    struct Contained<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Contained<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self.project().future;
        // Unwind safety: after a panic the future is never touched again (it is dropped), and
        // the only other state is the caller's check function (see the module docs).
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Some(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    }
}

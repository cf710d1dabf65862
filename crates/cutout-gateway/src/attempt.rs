//! One attempt at an upstream: the attempt timeout over the response head and its whole body, and what a client's give-up counts for.
//!
//! # The whole-response rule
//! The attempt timeout bounds the time the gateway spends **waiting for the upstream**: for the
//! response head, then for each next piece of the body, summed over the attempt. A body that
//! stalls is cut when the sum reaches the attempt timeout ([`BodyTimeout`]): the client's
//! connection is closed (the response was already under way, so no status can be changed) and
//! the breakers count a failure. Time spent waiting for a slow *client* to read is not counted:
//! the gateway is not waiting for the upstream then (that time is bounded by `idle-timeout`).
//! A body the upstream cuts short (a connection closed before its `Content-Length`, a broken
//! chunked encoding) is a failure too. The breakers record the attempt's outcome at the end of
//! the body (cutout-tower's [`BreakerBody`](cutout_tower::body::BreakerBody)).
//!
//! # The give-up rule
//! A client that goes away while its forward runs gives the forward up: the gateway cancels it
//! (the upstream's connection is closed, its handler sees the request cancelled). The attempt
//! then ends with [`GaveUp`], which counts against the upstream as a **failure** when the
//! gateway had been waiting for the upstream longer than the cluster's *slow limit*
//! ([`SlowLimit`]) — the hang a patient client would have seen as a timeout — and as nothing
//! otherwise (an impatient client is no evidence about the upstream). So a hung upstream whose
//! clients all give up before the attempt timeout still opens its breaker.
//!
//! - Counted (`slow`): the gateway had waited for the upstream longer than the slow limit when
//!   the client left: during the head, or during the body with the upstream's next bytes
//!   overdue.
//! - Not counted: the client left sooner; or it left while the upstream was waiting for the
//!   client's upload (the client's fault, see [`crate::client_body`]); or while the gateway was
//!   waiting for the client to read.
//!
//! The slow limit is the cluster's normal latency × the breaker's slow multiple (cutout's
//! `slow-calls` multiple, default 3), or the breaker's absolute `slow-call-threshold` when that
//! is lower, never below `give-up-floor` (default 100 ms) and never above the attempt timeout.
//! The normal latency is the cluster breaker's measure (adaptive breakers), else the gateway's
//! own: the median of the cluster's successful responses over the last minute, once 20 are
//! known. Until a normal latency is known, the limit is half the attempt timeout.
//!
//! The breaker has no outcome "slow, result unknown"; a failure is what the attempt timeout
//! would have recorded had the client waited, so that is what is recorded.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use cutout::{Breaker, HumanDuration};
use cutout_tower::BoxError;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::stats::Stats;

/// What a request's client side and its attempt share: whether the client gave up, which host
/// served it, and what the give-up counted for.
///
/// # Orderings
/// `gone` is set by the task that drops the client's side (the proxy's handler or response
/// body) just before it polls the attempt one last time on the same thread, so the attempt
/// reads it in program order; `Release` / `Acquire` keep that true if another thread polls.
/// `host` and `gave_up` are statistics for the log, read after the attempt ended; `Relaxed`.
#[derive(Debug)]
pub struct Exchange {
    gone: AtomicU8,
    host: AtomicUsize,
    gave_up: AtomicU8,
    slow: Arc<SlowLimit>,
}

const NO_HOST: usize = usize::MAX;
const RUNNING: u8 = 0;
const CLIENT_GONE: u8 = 1;
const DEADLINE: u8 = 2;

/// What a give-up counted for, as the access log and metrics tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpCount {
    /// Against the upstream, as a failure (it ran past the slow limit).
    Slow,
    /// For nothing: before the slow limit.
    Early,
    /// For nothing: the gateway was waiting for the client (its upload, or its reading).
    Client,
    /// For nothing: the gateway's own `request-timeout` passed (the gateway gave up, not the
    /// upstream and not the client).
    Deadline,
}

impl GiveUpCount {
    /// `slow`, `early`, `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            GiveUpCount::Slow => "slow",
            GiveUpCount::Early => "early",
            GiveUpCount::Client => "client",
            GiveUpCount::Deadline => "deadline",
        }
    }
}

impl Exchange {
    /// The exchange of one request to a cluster whose slow limit is `slow`.
    pub fn new(slow: Arc<SlowLimit>) -> Arc<Exchange> {
        Arc::new(Exchange {
            gone: AtomicU8::new(RUNNING),
            host: AtomicUsize::new(NO_HOST),
            gave_up: AtomicU8::new(0),
            slow,
        })
    }

    /// The client is gone: the attempt ends with [`GaveUp`] at its next poll.
    pub fn give_up(&self) {
        let _ =
            self.gone
                .compare_exchange(RUNNING, CLIENT_GONE, Ordering::Release, Ordering::Relaxed);
    }

    /// The gateway's `request-timeout` passed: the attempt ends with [`GaveUp`] (counted as
    /// [`GiveUpCount::Deadline`], for nothing) at its next poll.
    pub fn deadline_passed(&self) {
        let _ = self
            .gone
            .compare_exchange(RUNNING, DEADLINE, Ordering::Release, Ordering::Relaxed);
    }

    /// Whether the attempt is given up (the client left, or the deadline passed).
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire) != RUNNING
    }

    /// Records the upstream host (its index in the cluster) an attempt went to.
    pub fn set_host(&self, host: usize) {
        self.host.store(host, Ordering::Relaxed);
    }

    /// The host the last attempt went to.
    pub fn host(&self) -> Option<usize> {
        Some(self.host.load(Ordering::Relaxed)).filter(|h| *h != NO_HOST)
    }

    /// What the give-up counted for (`None` while the client has not given up, or when no
    /// attempt was running).
    pub fn gave_up(&self) -> Option<GiveUpCount> {
        match self.gave_up.load(Ordering::Relaxed) {
            1 => Some(GiveUpCount::Slow),
            2 => Some(GiveUpCount::Early),
            3 => Some(GiveUpCount::Client),
            4 => Some(GiveUpCount::Deadline),
            _ => None,
        }
    }

    pub(crate) fn set_gave_up(&self, count: GiveUpCount) {
        let n = match count {
            GiveUpCount::Slow => 1,
            GiveUpCount::Early => 2,
            GiveUpCount::Client => 3,
            GiveUpCount::Deadline => 4,
        };
        self.gave_up.store(n, Ordering::Relaxed);
    }

    /// The give-up of an attempt that had waited `waited` for the upstream (`None`: it was not
    /// waiting for the upstream when the client left).
    fn decide(&self, waited: Option<Duration>) -> GaveUp {
        // Worked out afresh: a give-up is rare, and the cached limit may be a moment old.
        let limit = self.slow.compute();
        let deadline = self.gone.load(Ordering::Acquire) == DEADLINE;
        let count = match waited {
            _ if deadline => GiveUpCount::Deadline,
            Some(waited) if waited > limit => GiveUpCount::Slow,
            Some(_) => GiveUpCount::Early,
            None => GiveUpCount::Client,
        };
        self.set_gave_up(count);
        GaveUp {
            waited,
            limit,
            count,
        }
    }
}

/// A cluster's slow limit for the give-up rule (see the [module docs](self)). A give-up works
/// it out afresh; [`SlowLimit::limit`] (the statistics' "slow" mark of every request) keeps it
/// for [`SlowLimit::REFRESH`].
#[derive(Debug)]
pub struct SlowLimit {
    breaker: Breaker,
    stats: Arc<Stats>,
    attempt_timeout: Duration,
    floor: Duration,
    multiple: f64,
    threshold: Option<Duration>,
    /// The limit in nanoseconds and when it was worked out (milliseconds since `epoch`, plus
    /// one; 0: never). Statistics: `Relaxed`, a stale value is `REFRESH` old at most.
    cached: AtomicU64,
    cached_at: AtomicU64,
    epoch: Instant,
}

impl SlowLimit {
    /// The slow limit of a cluster guarded by `breaker` (its settings give the multiple and
    /// the absolute threshold), whose successful responses `stats` measures.
    pub fn new(
        breaker: Breaker,
        stats: Arc<Stats>,
        attempt_timeout: Duration,
        floor: Duration,
    ) -> SlowLimit {
        let settings = breaker.settings();
        let multiple = settings.slow_calls().map_or(3.0, |s| s.multiple());
        let threshold = settings.slow_call_threshold();
        SlowLimit {
            breaker,
            stats,
            attempt_timeout,
            floor,
            multiple,
            threshold,
            cached: AtomicU64::new(0),
            cached_at: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// How long [`SlowLimit::limit`] keeps a limit it worked out.
    pub const REFRESH: Duration = Duration::from_millis(100);

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
        limit.max(self.floor).min(self.attempt_timeout)
    }
}

/// The client gave up while its attempt ran (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GaveUp {
    /// How long the gateway had waited for the upstream (`None`: it was waiting for the client).
    pub waited: Option<Duration>,
    /// The slow limit then.
    pub limit: Duration,
    /// What it counts for.
    pub count: GiveUpCount,
}

impl GaveUp {
    /// Whether it counts against the upstream (as a failure).
    pub fn counts(&self) -> bool {
        self.count == GiveUpCount::Slow
    }
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.count, self.waited) {
            (GiveUpCount::Deadline, _) => f.write_str("the gateway's request-timeout passed"),
            (_, Some(waited)) => write!(
                f,
                "the client gave up after {} waiting for the upstream ({} the slow limit of {})",
                HumanDuration(waited),
                if self.counts() { "past" } else { "within" },
                HumanDuration(self.limit)
            ),
            (_, None) => f.write_str("the client gave up while the gateway was waiting for it"),
        }
    }
}

impl StdError for GaveUp {}

/// The upstream's body stalled until the attempt timeout ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout {
    /// The attempt timeout.
    pub timeout: Duration,
}

impl fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the upstream's response body stalled: the attempt timeout ({}) ran out",
            HumanDuration(self.timeout)
        )
    }
}

impl StdError for BodyTimeout {}

/// The first `T` in `error`'s chain (itself, then its sources).
pub fn find<'a, T: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        next = error.source();
    }
    None
}

pin_project! {
    /// An attempt's response future: the forward, raced against the attempt timeout and the
    /// client's give-up. Its response's body is an [`AttemptBody`] that keeps the deadline.
    pub struct AttemptFuture<F> {
        #[pin]
        future: F,
        sleep: Option<Pin<Box<Sleep>>>,
        started: Instant,
        timeout: Duration,
        exchange: Option<Arc<Exchange>>,
    }
}

impl<F> AttemptFuture<F> {
    /// `future` bounded by `timeout` from now, ended early by `exchange`'s give-up.
    pub fn new(future: F, timeout: Duration, exchange: Option<Arc<Exchange>>) -> Self {
        let started = Instant::now();
        AttemptFuture {
            future,
            sleep: Some(Box::pin(tokio::time::sleep_until(started + timeout))),
            started,
            timeout,
            exchange,
        }
    }
}

impl<F, B, E> Future for AttemptFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<AttemptBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(exchange) = this.exchange.as_ref().filter(|e| e.is_gone()) {
            let gave_up = exchange.decide(Some(this.started.elapsed()));
            return Poll::Ready(Err(Box::new(gave_up)));
        }
        if let Poll::Ready(result) = this.future.poll(cx) {
            let response = result.map_err(Into::into)?;
            let waited = this.started.elapsed();
            let sleep = this
                .sleep
                .take()
                .unwrap_or_else(|| Box::pin(tokio::time::sleep(Duration::ZERO)));
            let timeout = *this.timeout;
            let exchange = this.exchange.take();
            return Poll::Ready(Ok(response.map(|inner| AttemptBody {
                inner,
                sleep,
                timeout,
                waited,
                pending_since: None,
                exchange,
                done: false,
            })));
        }
        let Some(sleep) = this.sleep.as_mut() else {
            return Poll::Pending;
        };
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(Box::new(tower::timeout::error::Elapsed::new())))
    }
}

pin_project! {
    /// An upstream's response body under the attempt timeout (see the [module docs](self)):
    /// it fails with [`BodyTimeout`] once the gateway has waited for the upstream for the
    /// attempt timeout in all, and with [`GaveUp`] when polled after the client gave up.
    pub struct AttemptBody<B> {
        #[pin]
        inner: B,
        sleep: Pin<Box<Sleep>>,
        timeout: Duration,
        // Time waited for the upstream before the current wait.
        waited: Duration,
        // When the current wait for the upstream began (the last poll found no data).
        pending_since: Option<Instant>,
        exchange: Option<Arc<Exchange>>,
        done: bool,
    }
}

impl<B> Body for AttemptBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        if let Some(exchange) = this.exchange.as_ref().filter(|e| e.is_gone()) {
            *this.done = true;
            let waited = this
                .pending_since
                .map(|since| *this.waited + since.elapsed());
            return Poll::Ready(Some(Err(Box::new(exchange.decide(waited)))));
        }
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(since) = this.pending_since.take() {
                    *this.waited += since.elapsed();
                }
                match frame {
                    None => {
                        *this.done = true;
                        Poll::Ready(None)
                    }
                    Some(Err(error)) => {
                        *this.done = true;
                        Poll::Ready(Some(Err(error.into())))
                    }
                    Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
                }
            }
            Poll::Pending => {
                let since = *this.pending_since.get_or_insert_with(Instant::now);
                let deadline = since + this.timeout.saturating_sub(*this.waited);
                if this.sleep.deadline() != deadline {
                    this.sleep.as_mut().reset(deadline);
                }
                ready!(this.sleep.as_mut().poll(cx));
                *this.done = true;
                Poll::Ready(Some(Err(Box::new(BodyTimeout {
                    timeout: *this.timeout,
                }))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutout::Settings;
    use http_body_util::BodyExt;

    fn exchange(floor: Duration) -> Arc<Exchange> {
        let breaker = Breaker::new("c", Settings::default());
        let slow = SlowLimit::new(
            breaker,
            Arc::new(Stats::new()),
            Duration::from_secs(2),
            floor,
        );
        Exchange::new(Arc::new(slow))
    }

    #[test]
    fn without_a_normal_latency_the_limit_is_half_the_attempt_timeout() {
        let e = exchange(Duration::from_millis(100));
        assert_eq!(e.slow.limit(), Duration::from_secs(1));
        let e = exchange(Duration::from_secs(5));
        assert_eq!(
            e.slow.limit(),
            Duration::from_secs(2),
            "capped by the timeout"
        );
    }

    #[test]
    fn a_give_up_counts_past_the_limit_only_while_waiting_for_the_upstream() {
        let e = exchange(Duration::from_millis(100));
        let g = e.decide(Some(Duration::from_millis(1500)));
        assert!(g.counts());
        assert_eq!(e.gave_up(), Some(GiveUpCount::Slow));
        assert!(g.to_string().contains("1.5s"), "{g}");
        assert!(!e.decide(Some(Duration::from_millis(900))).counts());
        assert_eq!(e.decide(None).count, GiveUpCount::Client);
    }

    /// A body fed through a channel.
    struct Fed(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Fed {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_fails_once_the_upstream_waits_add_up_to_the_timeout() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let response = http::Response::new(Fed(rx));
        let future = AttemptFuture::new(
            async move { Ok::<_, std::io::Error>(response) },
            Duration::from_millis(300),
            None,
        );
        let mut body = future.await.unwrap().into_body();
        let feeder = tokio::spawn(async move {
            for _ in 0..5 {
                // 120 ms of waiting each: the third wait runs out the 300 ms.
                tokio::time::sleep(Duration::from_millis(120)).await;
                if tx.send(Bytes::from_static(b"x")).await.is_err() {
                    return;
                }
            }
        });
        let mut frames = 0;
        let error = loop {
            match body.frame().await {
                Some(Ok(_)) => frames += 1,
                Some(Err(error)) => break error,
                None => panic!("ended"),
            }
        };
        assert!(error.is::<BodyTimeout>(), "{error}");
        assert_eq!(frames, 2);
        feeder.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn time_spent_waiting_for_the_reader_is_not_counted() {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        for _ in 0..3 {
            tx.send(Bytes::from_static(b"x")).await.unwrap();
        }
        drop(tx);
        let response = http::Response::new(Fed(rx));
        let future = AttemptFuture::new(
            async move { Ok::<_, std::io::Error>(response) },
            Duration::from_millis(300),
            None,
        );
        let mut body = future.await.unwrap().into_body();
        for _ in 0..3 {
            // A slow reader: a second between frames the upstream had ready.
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(body.frame().await.unwrap().is_ok());
        }
        assert!(body.frame().await.is_none(), "ends whole");
    }

    #[tokio::test]
    async fn a_give_up_ends_the_attempt_at_its_next_poll() {
        let e = exchange(Duration::from_millis(100));
        let mut future = Box::pin(AttemptFuture::new(
            std::future::pending::<Result<http::Response<Fed>, std::io::Error>>(),
            Duration::from_secs(2),
            Some(Arc::clone(&e)),
        ));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_pending());
        e.give_up();
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(Err(error)) => {
                let gave_up = error.downcast_ref::<GaveUp>().expect("a give-up");
                assert_eq!(gave_up.count, GiveUpCount::Early);
            }
            other => panic!("{:?}", other.map(|r| r.map(|_| ()))),
        }
    }
}

//! One attempt at an upstream: the attempt timeout over the response head and its whole body, and what an attempt whose client left counts for.
//!
//! # The whole-response rule
//! The attempt timeout bounds the time the gateway spends **waiting for the upstream**: for the
//! response head, then for each next piece of the body, summed over the attempt. A body that
//! stalls is cut when the sum reaches the attempt timeout ([`BodyTimeout`]): the client's
//! connection is closed (the response was already under way, so no status can be changed) and
//! the breakers count a failure. Time spent waiting for a slow *client* to read is not counted:
//! the gateway is not waiting for the upstream then (that time is bounded by `idle-timeout`).
//! Nor is the time a client takes to send its request body: the wait for the head counts from
//! the client's last upload data when that came after the attempt started, so a slow but
//! steady upload to a healthy endpoint is answered, not cut at the attempt timeout and counted
//! against the upstream (a review: five 1.4 s uploads to a 700 ms endpoint opened its cluster
//! at the 2 s timeout). A slow upload is bounded by `request-timeout`, a stalled one by the
//! attempt timeout as before ([`crate::client_body`]: the client's fault, never counted).
//! A body the upstream cuts short (a connection closed before its `Content-Length`, a broken
//! chunked encoding) is a failure too. The breakers record the attempt's outcome at the end of
//! the body (cutout-tower's [`BreakerBody`](cutout_tower::body::BreakerBody)).
//!
//! # The give-up rule
//! A client that leaves is never the upstream's failure: what the breakers count is the
//! **upstream's own outcome**, the one a client that stayed would have seen. When the gateway
//! finds a client gone before its answer ended, the attempt is not cancelled: it runs on
//! **detached** (as nginx's `proxy_ignore_client_abort`), to its own attempt timeout, and its
//! response, head and body, is read to the end and thrown away ([`drain`]). The breakers judge
//! it exactly as if the client had stayed: an answer that ends whole is a success, a 5xx or a
//! broken body a failure, the attempt timeout a failure. So five clients that leave a healthy
//! endpoint answering in 400 ms after 200 ms count five successes, and a hung upstream whose
//! clients all leave still opens its breaker, at the attempt timeout.
//!
//! Detached attempts are bounded, because a client that leaves frees its connection slot and
//! could otherwise start any number of them:
//! - at most `max-detached-attempts` per cluster at once ([`Detached`]; default 64). Past the
//!   bound, or with the bound 0, the attempt is **cancelled and counts nothing** (the
//!   upstream's connection is closed, its handler sees the request cancelled): the breakers
//!   judge the dependency from the other calls. A warning says so, at most once a second
//!   (`limit = max_detached_attempts`).
//! - the drain reads at most `max-detached-body` bytes (default 1 MiB) after the client left;
//!   past it the attempt is cancelled and counts nothing (it was delivering, whether it would
//!   have ended whole is unknown), `limit = max_detached_body`.
//! - the drain waits for the upstream no longer than the attempt timeout allows (the
//!   whole-response rule above: the waits of the head and of the body add up to it), and a
//!   detached attempt is dropped, counting nothing, if it still runs a second after a whole
//!   attempt timeout from when it was detached (a backstop the timers above always beat).
//!
//! Why the upstream's own outcome, rather than a guess: a give-up says how patient the client
//! was, not how the upstream is. The rule it replaces counted a give-up as a failure once the
//! gateway had waited longer than a *slow limit* (a multiple of the normal latency, at least
//! `give-up-floor`); a healthy endpoint slower than the limit was then opened by any five
//! impatient clients. Waiting for the answer needs no limit and cannot blame a healthy
//! upstream; what the rule can no longer see is the outcome of attempts cancelled past the
//! bounds (counted as nothing, never as a success).
//!
//! When the gateway finds a client gone: HTTP/1 clients may shut their write side down once
//! their request is sent and still wait for the answer (a *half-close*), so the listener
//! answers them ([`crate::server`]). A client that closed its connection is told apart from one
//! that half-closed only when the gateway writes to it, so until its answer is written such a
//! request runs in its connection as a patient client's would (holding its connection slot:
//! `max-connections` bounds those) and is judged the same way. The gateway finds a client gone,
//! and detaches its attempt, when writing its answer fails (it left, or reset its connection,
//! mid-answer), or when the gateway closes the connection itself (`idle-timeout`, the end of
//! `shutdown-timeout`; detached attempts still running when the process exits are dropped with
//! it, counting nothing). A client that leaves mid-upload breaks its own request: that is its
//! fault, answered and counted as such ([`crate::client_body`]).
//!
//! The gateway's own `request-timeout` is not a client leaving: when it passes before the
//! answer's head, the attempt is cancelled and counts nothing ([`DeadlinePassed`]), as before.
//!
//! The access log says what happened (`outcome=gave_up`, `counted=detached` with `upstream=`
//! the attempt's own outcome, or `counted=dropped`), and so does
//! `cutout_gateway_give_ups_total{counted}`; `cutout_gateway_detached_attempts` counts the
//! detached attempts running.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use cutout::HumanDuration;
use cutout_tower::BoxError;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use metrics::Gauge;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::client_body::BodyWatch;
use crate::slots::Slots;

/// What a request's client side and its attempt share: which host served it, whether the
/// gateway's deadline passed, the client's body as it went, and what became of the attempt
/// when the client left.
///
/// # Orderings
/// `deadline` is set by the task that polls the request (the proxy's handler) just before it
/// polls the attempt one last time on the same thread, so the attempt reads it in program
/// order; `Release` / `Acquire` keep that true if another thread polls. `host`, `retried` and
/// `gave_up` are statistics for the log, read after the attempt ended; `Relaxed`.
#[derive(Debug, Default)]
pub struct Exchange {
    deadline: AtomicBool,
    host: AtomicUsize,
    retried: AtomicUsize,
    gave_up: AtomicU8,
    body: OnceLock<Arc<BodyWatch>>,
}

const NO_HOST: usize = 0;

/// What became of an attempt whose client left, as the access log and metrics tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpCount {
    /// It ran on detached: the breakers judge its own outcome.
    Detached,
    /// It was cancelled and counts nothing: past `max-detached-attempts` (or with it 0), on a
    /// cluster without breakers, or outside the runtime.
    Dropped,
    /// The gateway's own `request-timeout` passed (the gateway gave up, not the client): it was
    /// cancelled and counts nothing.
    Deadline,
}

impl GiveUpCount {
    /// All of them, in the order of [`GiveUpCount::index`].
    pub const ALL: [GiveUpCount; 3] = [
        GiveUpCount::Detached,
        GiveUpCount::Dropped,
        GiveUpCount::Deadline,
    ];

    /// `detached`, `dropped`, `deadline`.
    pub fn as_str(self) -> &'static str {
        match self {
            GiveUpCount::Detached => "detached",
            GiveUpCount::Dropped => "dropped",
            GiveUpCount::Deadline => "deadline",
        }
    }

    /// Its place in [`GiveUpCount::ALL`].
    pub fn index(self) -> usize {
        match self {
            GiveUpCount::Detached => 0,
            GiveUpCount::Dropped => 1,
            GiveUpCount::Deadline => 2,
        }
    }
}

impl Exchange {
    /// The exchange of one request.
    pub fn new() -> Arc<Exchange> {
        Arc::new(Exchange::default())
    }

    /// The request's body on its way to the upstream: a body of the response that breaks
    /// because the client's upload failed is the client's fault, not the upstream's (it
    /// matters for a detached attempt, whose client left mid-upload). Set once.
    pub fn watch_client_body(&self, watch: Arc<BodyWatch>) {
        let _ = self.body.set(watch);
    }

    /// The gateway's `request-timeout` passed: the attempt ends with [`DeadlinePassed`]
    /// (counted for nothing) at its next poll.
    pub fn pass_deadline(&self) {
        self.deadline.store(true, Ordering::Release);
    }

    /// Whether the gateway's `request-timeout` passed.
    pub fn deadline_passed(&self) -> bool {
        self.deadline.load(Ordering::Acquire)
    }

    /// Records the upstream host (its index in the cluster) an attempt went to.
    pub fn set_host(&self, host: usize) {
        self.host.store(host.wrapping_add(1), Ordering::Relaxed);
    }

    /// The host the last attempt went to.
    pub fn host(&self) -> Option<usize> {
        match self.host.load(Ordering::Relaxed) {
            NO_HOST => None,
            n => Some(n - 1),
        }
    }

    /// Records that the attempt at `host` failed and the request was retried on another
    /// ([`crate::hosts`]).
    pub fn set_retried(&self, host: usize) {
        self.retried.store(host.wrapping_add(1), Ordering::Relaxed);
    }

    /// The host whose failed attempt was retried on another, if one was.
    pub fn retried_from(&self) -> Option<usize> {
        match self.retried.load(Ordering::Relaxed) {
            NO_HOST => None,
            n => Some(n - 1),
        }
    }

    /// What became of the attempt when its client left (`None` while the client has not
    /// left, or when no attempt was running).
    pub fn gave_up(&self) -> Option<GiveUpCount> {
        match self.gave_up.load(Ordering::Relaxed) {
            0 => None,
            n => GiveUpCount::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    pub(crate) fn set_gave_up(&self, count: GiveUpCount) {
        // At most 3: fits.
        self.gave_up
            .store(count.index() as u8 + 1, Ordering::Relaxed);
    }

    /// `error`, or the client's fault when the client's upload failed (see
    /// [`Exchange::watch_client_body`]).
    fn blame(&self, error: BoxError) -> BoxError {
        match self.body.get() {
            Some(watch) if watch.failed() => watch.blame(error),
            _ => error,
        }
    }
}

/// A cluster's budget of detached attempts (see the [module docs](self)): how many run now,
/// at most how many, and how many bytes each may drain.
///
/// # Orderings
/// `running` is [`Slots`]: exact against `max` (see its note). It
/// publishes nothing else (a detached task owns all it touches).
#[derive(Debug)]
pub struct Detached {
    max: usize,
    max_body: usize,
    running: Slots,
    gauge: Gauge,
}

impl Detached {
    /// At most `max` detached attempts at once (0: none), each draining at most `max_body`
    /// bytes; `gauge` follows how many run.
    pub fn new(max: usize, max_body: usize, gauge: Gauge) -> Arc<Detached> {
        Arc::new(Detached {
            max,
            max_body,
            running: Slots::default(),
            gauge,
        })
    }

    /// A slot for one more detached attempt, held until it is dropped; `None` at the bound.
    pub fn try_start(self: &Arc<Self>) -> Option<DetachedSlot> {
        if !self.running.try_take(self.max) {
            return None;
        }
        self.gauge.increment(1.0);
        Some(DetachedSlot(Arc::clone(self)))
    }

    /// Detached attempts running now.
    pub fn running(&self) -> usize {
        self.running.taken()
    }

    /// `max-detached-attempts`.
    pub fn max(&self) -> usize {
        self.max
    }

    /// `max-detached-body`, in bytes.
    pub fn max_body(&self) -> usize {
        self.max_body
    }
}

/// One running detached attempt's place in its cluster's [`Detached`] budget (given back when
/// dropped).
#[derive(Debug)]
pub struct DetachedSlot(Arc<Detached>);

impl Drop for DetachedSlot {
    fn drop(&mut self) {
        self.0.running.give_back();
        self.0.gauge.decrement(1.0);
    }
}

/// How a [`drain`] ended.
#[derive(Debug)]
pub enum Drained {
    /// The body ended whole.
    Whole,
    /// The body failed (the breakers counted what its error says).
    Broke(BoxError),
    /// More than the byte cap came: the body was dropped, and nothing counted.
    Capped,
}

/// Reads `body` to its end and throws it away (a detached attempt's response), dropping it
/// once more than `max_bytes` came. A breaker body inside records its verdict as it ends or
/// breaks; dropped at the cap it records nothing.
pub async fn drain<B>(body: B, max_bytes: usize) -> Drained
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    let mut read = 0usize;
    loop {
        if body.is_end_stream() {
            return Drained::Whole;
        }
        match body.frame().await {
            None => return Drained::Whole,
            Some(Err(error)) => return Drained::Broke(error.into()),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    read = read.saturating_add(bytes::Buf::remaining(data));
                    if read > max_bytes {
                        return Drained::Capped;
                    }
                }
            }
        }
    }
}

/// The gateway's `request-timeout` passed while the attempt waited for its head: the gateway
/// gave the attempt up (not the client, not the upstream); no breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlinePassed;

impl fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the gateway's request-timeout passed")
    }
}

impl StdError for DeadlinePassed {}

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
    /// gateway's deadline. Its response's body is an [`AttemptBody`] that keeps the deadline.
    pub struct AttemptFuture<F> {
        #[pin]
        future: F,
        sleep: Option<Pin<Box<Sleep>>>,
        started: Instant,
        timeout: Duration,
        exchange: Option<Arc<Exchange>>,
        upload: Option<Arc<BodyWatch>>,
    }
}

impl<F> AttemptFuture<F> {
    /// `future` bounded by `timeout` from now, or from the client's last upload data when
    /// `upload` watches a body that gave some later (the gateway waits for the upstream only
    /// once the client has sent what it had: a slow upload is not the upstream's time), ended
    /// early when `exchange`'s deadline passed.
    pub fn new(
        future: F,
        timeout: Duration,
        exchange: Option<Arc<Exchange>>,
        upload: Option<Arc<BodyWatch>>,
    ) -> Self {
        let started = Instant::now();
        AttemptFuture {
            future,
            sleep: Some(Box::pin(tokio::time::sleep_until(started + timeout))),
            started,
            timeout,
            exchange,
            upload,
        }
    }
}

/// When the gateway began waiting for the upstream alone: the attempt's start, or the
/// client's last upload data when later.
fn waiting_since(started: Instant, upload: Option<&BodyWatch>) -> Instant {
    upload
        .and_then(BodyWatch::last_data)
        .map_or(started, |last| last.max(started))
}

impl<F, B, E> Future for AttemptFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<AttemptBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(exchange) = this.exchange.as_ref().filter(|e| e.deadline_passed()) {
            exchange.set_gave_up(GiveUpCount::Deadline);
            return Poll::Ready(Err(Box::new(DeadlinePassed)));
        }
        if let Poll::Ready(result) = this.future.poll(cx) {
            let response = result.map_err(Into::into)?;
            let waited = waiting_since(*this.started, this.upload.as_deref()).elapsed();
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
        loop {
            ready!(sleep.as_mut().poll(cx));
            // Time the client spent sending its body is not the upstream's: the timeout
            // counts from its last data.
            let due = waiting_since(*this.started, this.upload.as_deref()) + *this.timeout;
            if due <= Instant::now() {
                break;
            }
            sleep.as_mut().reset(due);
        }
        Poll::Ready(Err(Box::new(tower::timeout::error::Elapsed::new())))
    }
}

pin_project! {
    /// An upstream's response body under the attempt timeout (see the [module docs](self)):
    /// it fails with [`BodyTimeout`] once the gateway has waited for the upstream for the
    /// attempt timeout in all. A break caused by the client's failed upload is the client's
    /// ([`ClientFault`](crate::error::ClientFault)).
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
                        let error = error.into();
                        Poll::Ready(Some(Err(match this.exchange.as_ref() {
                            Some(exchange) => exchange.blame(error),
                            None => error,
                        })))
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

    #[test]
    fn the_detached_budget_holds_its_bound_and_gives_slots_back() {
        let budget = Detached::new(2, 1024, Gauge::noop());
        let a = budget.try_start().expect("a first slot");
        let b = budget.try_start().expect("a second slot");
        assert!(budget.try_start().is_none(), "past the bound");
        assert_eq!(budget.running(), 2);
        drop(a);
        let c = budget.try_start().expect("a slot given back is free again");
        drop((b, c));
        assert_eq!(budget.running(), 0);
        let none = Detached::new(0, 1024, Gauge::noop());
        assert!(none.try_start().is_none(), "0: no detached attempt at all");
    }

    #[test]
    fn an_exchange_tells_what_became_of_its_attempt() {
        let e = Exchange::new();
        assert_eq!(
            (e.gave_up(), e.host(), e.retried_from()),
            (None, None, None)
        );
        e.set_host(0);
        e.set_retried(2);
        assert_eq!((e.host(), e.retried_from()), (Some(0), Some(2)));
        for count in GiveUpCount::ALL {
            e.set_gave_up(count);
            assert_eq!(e.gave_up(), Some(count));
        }
        assert_eq!(
            GiveUpCount::ALL.map(GiveUpCount::as_str),
            ["detached", "dropped", "deadline"]
        );
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

    /// A body that sends `left` frames of `size` bytes, then breaks (or ends, when `breaks`
    /// is false); counts whether it was dropped before its end.
    struct Counted {
        left: usize,
        size: usize,
        breaks: bool,
        dropped_early: Arc<AtomicBool>,
    }

    impl Body for Counted {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.left == 0 {
                return Poll::Ready(if self.breaks {
                    Some(Err(std::io::Error::other("cut")))
                } else {
                    None
                });
            }
            self.left -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; self.size])))))
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            if self.left > 0 {
                self.dropped_early.store(true, Ordering::Relaxed);
            }
        }
    }

    fn counted(left: usize, size: usize, breaks: bool) -> (Counted, Arc<AtomicBool>) {
        let dropped_early = Arc::new(AtomicBool::new(false));
        let body = Counted {
            left,
            size,
            breaks,
            dropped_early: Arc::clone(&dropped_early),
        };
        (body, dropped_early)
    }

    #[tokio::test]
    async fn a_drain_reads_to_the_end_and_stops_past_its_cap() {
        let (body, early) = counted(10, 100, false);
        assert!(matches!(drain(body, 1000).await, Drained::Whole));
        assert!(!early.load(Ordering::Relaxed));
        let (body, early) = counted(10, 100, false);
        assert!(matches!(drain(body, 450).await, Drained::Capped));
        assert!(early.load(Ordering::Relaxed), "dropped at the cap");
        let (body, _) = counted(2, 100, true);
        match drain(body, 1000).await {
            Drained::Broke(error) => assert_eq!(error.to_string(), "cut"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_body_broken_by_the_client_s_failed_upload_is_the_client_s() {
        use crate::client_body::WatchedBody;
        use crate::error::ClientFault;

        let (broken, _) = counted(0, 0, true);
        let (mut upload, watch, _guard) = WatchedBody::new(axum::body::Body::new(broken));
        assert!(upload.frame().await.unwrap().is_err(), "the upload failed");
        assert!(watch.failed());
        let exchange = Exchange::new();
        exchange.watch_client_body(watch);
        let (body, _) = counted(1, 10, true);
        let response = http::Response::new(body);
        let future = AttemptFuture::new(
            async move { Ok::<_, std::io::Error>(response) },
            Duration::from_secs(1),
            Some(exchange),
            None,
        );
        let mut body = future.await.unwrap().into_body();
        assert!(body.frame().await.unwrap().is_ok());
        let error = body.frame().await.unwrap().unwrap_err();
        assert_eq!(
            ClientFault::find(&*error),
            Some(ClientFault::Body),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_fails_once_the_upstream_waits_add_up_to_the_timeout() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let response = http::Response::new(Fed(rx));
        let future = AttemptFuture::new(
            async move { Ok::<_, std::io::Error>(response) },
            Duration::from_millis(300),
            None,
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
    async fn the_deadline_ends_the_attempt_at_its_next_poll_and_counts_nothing() {
        let e = Exchange::new();
        let mut future = Box::pin(AttemptFuture::new(
            std::future::pending::<Result<http::Response<Fed>, std::io::Error>>(),
            Duration::from_secs(2),
            Some(Arc::clone(&e)),
            None,
        ));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_pending());
        e.pass_deadline();
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(Err(error)) => assert!(error.is::<DeadlinePassed>(), "{error}"),
            other => panic!("{:?}", other.map(|r| r.map(|_| ()))),
        }
        assert_eq!(e.gave_up(), Some(GiveUpCount::Deadline));
    }
}

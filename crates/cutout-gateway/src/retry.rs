//! Retries to another host of the cluster: which failed attempts may be retried, the request kept for it (its body replayable while no attempt has sent any of it), and the retry budget.
//!
//! The rule itself (once, on another host, never after a refusal, within the budget, and what
//! the breakers count) is [`crate::hosts`]'s; this module answers its three questions:
//!
//! - **Which failures** ([`cause`]): a *connect failure* (the host refused the connection, or
//!   it could not be made in time: no byte of the request reached it), or a *reset*: the
//!   connection was closed or reset before any byte of the answer (the host may have received
//!   the request). A timeout is not retried (the host may still be working on it, and a second
//!   host would double the work of a cluster that is slow everywhere), nor an answer of any
//!   status (a 5xx is the host's answer, a 503 its refusal), nor the client's fault, nor the
//!   gateway's own deadline.
//! - **Which requests** ([`Again`]): after a connect failure, any request whose body is still
//!   whole: the gateway streams bodies and keeps no copy, but an attempt takes the body only
//!   when it starts sending it, so a request whose connection failed still holds all of it.
//!   After a reset, only an idempotent method (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT,
//!   DELETE) whose body is empty or was never sent: the host may have acted on it, and a POST
//!   must not be done twice.
//! - **How many** ([`RetryBudget`]): Envoy's retry budget: at most `retry-budget-percent` (20)
//!   of the cluster's active requests may be retries in flight, or `min-concurrent-retries`
//!   (3), whichever is more, so that a cluster under light load can retry at all and a
//!   cluster under heavy load cannot double its traffic onto its surviving hosts. A request is
//!   active while it is in flight at the cluster (routed, its answer not ended: the count
//!   behind `cutout_gateway_in_flight_requests`, so the budget adds no counter of its own to
//!   the healthy path); a retry is in flight until its answer's head (or its failure). A retry the budget refuses is not made: the client gets
//!   the first attempt's error, and `cutout_gateway_retries_total{decision="over_budget"}`
//!   counts it.

use std::error::Error as StdError;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri, Version};
use http_body::{Frame, SizeHint};

use crate::attempt::{DeadlinePassed, Exchange, find};
use crate::client_body::BodyWatch;
use crate::error::ClientFault;
use crate::slots::Slots;

/// Why a failed attempt may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The connection could not be made: no byte of the request reached the host.
    Connect,
    /// The connection was closed or reset before any byte of the answer.
    Reset,
}

/// Whether `error`, an attempt's failure, is one a retry is for (see the [module docs](self)).
pub fn cause(error: &(dyn StdError + 'static)) -> Option<Cause> {
    if find::<ClientFault>(error).is_some()
        || find::<DeadlinePassed>(error).is_some()
        || find::<tower::timeout::error::Elapsed>(error).is_some()
        || crate::exhaustion::is_exhausted(error)
    {
        return None;
    }
    if find::<hyper_util::client::legacy::Error>(error).is_some_and(|e| e.is_connect()) {
        return Some(Cause::Connect);
    }
    if let Some(hyper) = find::<hyper::Error>(error)
        && (hyper.is_incomplete_message() || hyper.is_canceled() || hyper.is_body_write_aborted())
    {
        return Some(Cause::Reset);
    }
    let reset = find::<std::io::Error>(error).is_some_and(|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        )
    });
    reset.then_some(Cause::Reset)
}

/// Whether `method` is idempotent (RFC 9110 §9.2.2).
pub fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// What a request needs to be sent again: its head (without the extensions the attempts do
/// not read) and its body, replayable while no attempt has sent any of it (an empty body is
/// left as it is, and a retry gets a new empty one).
#[derive(Debug)]
pub struct Again {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    exchange: Option<Arc<Exchange>>,
    watch: Option<Arc<BodyWatch>>,
    /// `None`: the body is empty.
    body: Option<Arc<Replay>>,
}

impl Again {
    /// `request` made replayable: the request to send first, and what sends it again.
    pub fn of(request: Request<Body>) -> (Request<Body>, Again) {
        let mut again = Again {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
            exchange: request.extensions().get::<Arc<Exchange>>().cloned(),
            watch: request.extensions().get::<Arc<BodyWatch>>().cloned(),
            body: None,
        };
        if http_body::Body::is_end_stream(request.body()) {
            return (request, again);
        }
        let (parts, body) = request.into_parts();
        let body = Replay::new(body);
        again.body = Some(Arc::clone(&body));
        (Request::from_parts(parts, ReplayBody::first(body)), again)
    }

    /// The request again, for a retry after an attempt that failed for `cause`; `None` when
    /// it may not be sent again (a reset of a method that is not idempotent, or a body an
    /// attempt has sent some of). There is one retry: its head is moved out.
    pub fn retry(&mut self, cause: Cause) -> Option<Request<Body>> {
        if cause == Cause::Reset && !idempotent(&self.method) {
            return None;
        }
        let body = match &self.body {
            None => Body::empty(),
            Some(replay) => replay.again()?,
        };
        let mut request = Request::new(body);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = std::mem::take(&mut self.headers);
        if let Some(exchange) = &self.exchange {
            request.extensions_mut().insert(Arc::clone(exchange));
        }
        if let Some(watch) = &self.watch {
            request.extensions_mut().insert(Arc::clone(watch));
        }
        Some(request)
    }

    /// The request's exchange (for the access log's `retried_from`).
    pub fn exchange(&self) -> Option<&Arc<Exchange>> {
        self.exchange.as_ref()
    }
}

/// A request body (not empty) kept until an attempt starts sending it.
#[derive(Debug)]
struct Replay {
    slot: Mutex<Option<Body>>,
    hint: SizeHint,
}

impl Replay {
    fn new(body: Body) -> Arc<Replay> {
        let hint = http_body::Body::size_hint(&body);
        Arc::new(Replay {
            slot: Mutex::new(Some(body)),
            hint,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Body>> {
        // A take or a put: a poisoned slot is still consistent.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The body for another attempt: the original while no attempt has taken it (the retry
    /// owns it then: there is no third attempt).
    fn again(&self) -> Option<Body> {
        self.lock().take()
    }
}

/// An attempt's view of a [`Replay`]: it takes the body out when first polled, so that a
/// failed attempt that never polled it leaves it whole for the next.
#[derive(Debug)]
struct ReplayBody {
    replay: Arc<Replay>,
    body: Option<Body>,
    taken: bool,
}

/// The body was taken by a later attempt: this attempt is over (never seen by a client).
#[derive(Debug)]
struct Taken;

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body went to another attempt")
    }
}

impl StdError for Taken {}

impl ReplayBody {
    fn first(replay: Arc<Replay>) -> Body {
        Body::new(ReplayBody {
            replay,
            body: None,
            taken: false,
        })
    }
}

impl http_body::Body for ReplayBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if !self.taken {
            self.taken = true;
            let body = self.replay.lock().take();
            match body {
                Some(body) => self.body = Some(body),
                None => return Poll::Ready(Some(Err(axum::Error::new(Taken)))),
            }
        }
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_some_and(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) => body.size_hint(),
            None => self.replay.hint,
        }
    }
}

/// A cluster's retry budget (see the [module docs](self)).
///
/// # Orderings
/// `retrying` is [`Slots`] (exact against the limit each retry computed: see its note). The
/// limit reads the active count with `Relaxed`: it may be a few requests behind (requests entering or leaving on
/// another core), which moves the limit by at most their share; it publishes nothing else.
#[derive(Debug)]
pub struct RetryBudget {
    percent: usize,
    min: usize,
    active: Arc<AtomicUsize>,
    retrying: Slots,
}

impl RetryBudget {
    /// Retries in flight at most `percent` % of `active` (the cluster's requests in flight,
    /// which the access record counts: [`ClusterMetrics::in_flight`]), or `min`, whichever is
    /// more.
    ///
    /// [`ClusterMetrics::in_flight`]: crate::metrics::ClusterMetrics::in_flight
    pub fn new(percent: u8, min: usize, active: Arc<AtomicUsize>) -> Arc<RetryBudget> {
        Arc::new(RetryBudget {
            percent: usize::from(percent.min(100)),
            min,
            active,
            retrying: Slots::default(),
        })
    }

    /// The most retries in flight now.
    pub fn limit(&self) -> usize {
        let active = self.active.load(Ordering::Relaxed);
        (active.saturating_mul(self.percent) / 100).max(self.min)
    }

    /// A retry's place in the budget, held until dropped; `None` when the budget is spent.
    pub fn try_retry(self: &Arc<Self>) -> Option<RetrySlot> {
        self.retrying
            .try_take(self.limit())
            .then(|| RetrySlot(Arc::clone(self)))
    }

    /// Active requests now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Retries in flight now.
    pub fn retrying(&self) -> usize {
        self.retrying.taken()
    }
}

/// A retry in flight in a [`RetryBudget`] (given back when dropped).
#[derive(Debug)]
pub struct RetrySlot(Arc<RetryBudget>);

impl Drop for RetrySlot {
    fn drop(&mut self) {
        self.0.retrying.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn the_budget_is_a_share_of_active_requests_with_a_floor() {
        let active = Arc::new(AtomicUsize::new(4));
        let budget = RetryBudget::new(20, 3, Arc::clone(&active));
        assert_eq!(budget.limit(), 3, "20 % of 4 is below the floor of 3");
        let slots: Vec<_> = (0..3).map(|_| budget.try_retry().unwrap()).collect();
        assert!(budget.try_retry().is_none(), "spent");
        drop(slots);
        active.store(50, Ordering::Relaxed);
        assert_eq!(budget.limit(), 10, "20 % of 50");
        active.store(0, Ordering::Relaxed);
        assert_eq!((budget.active(), budget.limit()), (0, 3));
        let none = RetryBudget::new(0, 0, Arc::new(AtomicUsize::new(1)));
        assert!(none.try_retry().is_none(), "0 and 0: no retry at all");
    }

    #[test]
    fn only_connect_failures_and_resets_are_retried() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            cause(&refused),
            None,
            "a refused connect outside the client's error"
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(cause(&reset), Some(Cause::Reset));
        assert_eq!(cause(&tower::timeout::error::Elapsed::new()), None);
        assert_eq!(cause(&ClientFault::Body), None);
        assert_eq!(cause(&DeadlinePassed), None);
        assert!(idempotent(&Method::GET) && idempotent(&Method::DELETE));
        assert!(!idempotent(&Method::POST) && !idempotent(&Method::PATCH));
    }

    #[tokio::test]
    async fn a_body_no_attempt_sent_is_replayed_whole_and_one_sent_is_not() {
        let request = Request::post("/x").body(Body::from("payload")).unwrap();
        let (first, mut again) = Again::of(request);
        // The first attempt failed before sending anything: the body is whole for the next.
        drop(first);
        let second = again.retry(Cause::Connect).expect("replayable");
        assert_eq!(second.method(), Method::POST);
        let bytes = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"payload");
        // An attempt that sent (polled) the body leaves nothing to send again.
        let (first, mut again) = Again::of(Request::put("/x").body(Body::from("p")).unwrap());
        let sent = first.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&sent[..], b"p");
        assert!(again.retry(Cause::Connect).is_none());
        // A reset of a POST is never retried, even with its body whole.
        let (first, mut again) = Again::of(Request::post("/y").body(Body::from("p")).unwrap());
        drop(first);
        assert!(again.retry(Cause::Reset).is_none());
        // An empty GET is retried after a reset, with an empty body.
        let (first, mut again) = Again::of(Request::get("/z").body(Body::empty()).unwrap());
        let _ = first.into_body().collect().await.unwrap();
        let retry = again.retry(Cause::Reset).expect("an empty GET");
        assert!(http_body::Body::is_end_stream(retry.body()));
    }
}

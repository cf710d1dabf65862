//! The client's request body on its way to the upstream, watched so that the gateway can tell a client's fault from an upstream's.
//!
//! [`WatchedBody`] wraps the body the proxy forwards and records into a shared [`BodyWatch`]
//! what it saw: the body ended, the client's side failed (bad chunked framing, a body shorter
//! than its `Content-Length`, the client's connection closed, larger than
//! `max-request-body`), or the upstream is waiting for bytes the client has not sent. The
//! cluster's stack reads it when the forward fails ([`BodyWatch::blame`]): a failure caused by
//! the client's body becomes a [`ClientFault`], which the breaker ignores.
//!
//! A watched body also ends with an error as soon as its [`Abandon`] guard is dropped: the
//! proxy keeps the guard in the response it returns, so when the client goes away (its
//! connection closes and hyper drops the handler or the response), the body still on its way
//! to the upstream fails and hyper's client closes that upstream connection instead of leaving
//! the upstream waiting for the rest. (The guard also goes once the response has been sent
//! whole: an upstream that answered before reading all of the upload does not get the rest.)

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use cutout_tower::BoxError;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::ClientFault;

const ENDED: u8 = 1;
const WAITING: u8 = 2;
const FAILED: u8 = 4;
const TOO_LARGE: u8 = 8;

/// What a [`WatchedBody`] saw (shared with the stack through the request's extensions).
///
/// # Orderings
/// The flags are set by whichever task polls the body (hyper's client connection task) and
/// read by the forward's task after the forward failed. When the failure is the body's own
/// error, hyper's channel between the two tasks orders the write before the read; for a
/// timeout there is no such channel, so writes are `Release` and reads `Acquire`: a reader
/// that sees the timeout sees every flag set before the last poll it synchronised with. A
/// flag read a poll late can only make a timeout at the very edge count as the upstream's,
/// which is the state before this guard existed.
///
/// `last_data` (when the client's body last gave data, or ended) is written by the same task
/// with `Release` and read by the attempt's with `Acquire`, for the same reason: a reading a
/// poll late only lets the attempt timeout fire a little sooner, as it did before it existed.
#[derive(Debug)]
pub struct BodyWatch {
    flags: AtomicU8,
    /// The moment the watch was made, which `last_data` counts from.
    base: Instant,
    /// Nanoseconds from `base` to the client's last data, plus one (0: none yet).
    last_data: AtomicU64,
}

impl Default for BodyWatch {
    fn default() -> Self {
        BodyWatch {
            flags: AtomicU8::new(0),
            base: Instant::now(),
            last_data: AtomicU64::new(0),
        }
    }
}

impl BodyWatch {
    /// When the client's body last gave the gateway data or ended (`None`: never): until
    /// then the gateway was waiting for the client, not for the upstream, and the attempt
    /// timeout counts from there ([`crate::attempt`]).
    pub fn last_data(&self) -> Option<Instant> {
        match self.last_data.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.base + Duration::from_nanos(n - 1)),
        }
    }

    fn data_now(&self) {
        let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.last_data.store(nanos + 1, Ordering::Release);
    }

    fn set(&self, set: u8, clear: u8) {
        // One read-modify-write keeps concurrent readers from seeing a half update.
        let _ = self
            .flags
            .fetch_update(Ordering::Release, Ordering::Relaxed, |f| {
                Some((f | set) & !clear)
            });
    }

    fn flags(&self) -> u8 {
        self.flags.load(Ordering::Acquire)
    }

    /// Whether the client's side of the body failed.
    pub fn failed(&self) -> bool {
        self.flags() & FAILED != 0
    }

    /// Whether the body was complete when last polled.
    pub fn ended(&self) -> bool {
        self.flags() & ENDED != 0
    }

    /// Whether the last poll of the body found no data from the client (the upstream side was
    /// ready for more, the client had not sent it).
    pub fn waiting_on_client(&self) -> bool {
        let f = self.flags();
        f & WAITING != 0 && f & (ENDED | FAILED) == 0
    }

    /// The client's share of a failed forward: `error` is replaced by a [`ClientFault`] when
    /// the client's body failed ([`ClientFault::TooLarge`] or [`ClientFault::Body`]), or when
    /// the forward timed out while waiting for the client's body ([`ClientFault::Stalled`]).
    /// Any other failure stays the upstream's.
    pub fn blame(&self, error: BoxError) -> BoxError {
        let f = self.flags();
        if f & FAILED != 0 {
            let fault = if f & TOO_LARGE != 0 {
                ClientFault::TooLarge
            } else {
                ClientFault::Body
            };
            return Box::new(fault);
        }
        if self.waiting_on_client() && is_elapsed(&*error) {
            return Box::new(ClientFault::Stalled);
        }
        error
    }
}

fn is_elapsed(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<tower::timeout::error::Elapsed>() {
            return true;
        }
        next = e.source();
    }
    false
}

fn is_too_large(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// Ends a [`WatchedBody`] with an error when dropped (see the module docs).
#[derive(Debug)]
pub struct Abandon(#[allow(dead_code)] oneshot::Sender<()>);

/// The client's body, watched (see the module docs).
#[derive(Debug)]
pub struct WatchedBody {
    inner: Body,
    watch: Arc<BodyWatch>,
    abandoned: oneshot::Receiver<()>,
}

impl WatchedBody {
    /// Watches `inner`; returns the body to forward, what it sees, and the guard whose drop
    /// fails it.
    pub fn new(inner: Body) -> (WatchedBody, Arc<BodyWatch>, Abandon) {
        let watch = Arc::new(BodyWatch::default());
        let (tx, rx) = oneshot::channel();
        let body = WatchedBody {
            inner,
            watch: Arc::clone(&watch),
            abandoned: rx,
        };
        (body, watch, Abandon(tx))
    }
}

impl HttpBody for WatchedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.watch.flags() & (ENDED | FAILED) != 0 {
            return Poll::Ready(None);
        }
        // The guard's sender is never used to send: any completion means it was dropped.
        if Pin::new(&mut this.abandoned).poll(cx).is_ready() {
            this.watch.set(FAILED, WAITING);
            return Poll::Ready(Some(Err(Box::new(ClientFault::Body))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                this.watch.set(WAITING, 0);
                Poll::Pending
            }
            Poll::Ready(None) => {
                this.watch.data_now();
                this.watch.set(ENDED, WAITING);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.watch.data_now();
                this.watch.set(0, WAITING);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                let error: BoxError = error.into();
                let too_large = if is_too_large(&*error) { TOO_LARGE } else { 0 };
                this.watch.set(FAILED | too_large, WAITING);
                Poll::Ready(Some(Err(error)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use http_body_util::BodyExt;

    type Step = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

    /// A body that answers each poll with the next step (then ends).
    struct Scripted(VecDeque<Step>);

    impl HttpBody for Scripted {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Step {
            self.0.pop_front().unwrap_or(Poll::Ready(None))
        }
    }

    fn scripted(steps: Vec<Step>) -> Body {
        Body::new(Scripted(steps.into()))
    }

    fn data(text: &'static str) -> Step {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(text.as_bytes())))))
    }

    fn elapsed() -> BoxError {
        Box::new(tower::timeout::error::Elapsed::new())
    }

    #[tokio::test]
    async fn a_complete_body_ends_and_keeps_the_upstream_s_blame() {
        let (body, watch, _guard) = WatchedBody::new(Body::from("hello"));
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"hello");
        assert!(watch.ended() && !watch.failed() && !watch.waiting_on_client());
        assert!(
            watch
                .blame(elapsed())
                .is::<tower::timeout::error::Elapsed>()
        );
    }

    #[tokio::test]
    async fn a_failing_body_is_the_client_s_fault() {
        let failing = scripted(vec![
            data("part"),
            Poll::Ready(Some(Err("the chunk size is not a number".into()))),
        ]);
        let (body, watch, _guard) = WatchedBody::new(failing);
        assert!(body.collect().await.is_err());
        assert!(watch.failed());
        let blamed = watch.blame("connection refused".into());
        assert_eq!(blamed.downcast_ref(), Some(&ClientFault::Body));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_too_large() {
        let limited = Body::new(http_body_util::Limited::new(Body::from("0123456789"), 4));
        let (body, watch, _guard) = WatchedBody::new(limited);
        assert!(body.collect().await.is_err());
        let blamed = watch.blame("broken pipe".into());
        assert_eq!(blamed.downcast_ref(), Some(&ClientFault::TooLarge));
    }

    #[test]
    fn a_pending_body_blames_a_timeout_on_the_client_and_fails_when_abandoned() {
        let pending = scripted(vec![data("part"), Poll::Pending, Poll::Pending]);
        let (mut body, watch, guard) = WatchedBody::new(pending);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_ready());
        assert!(!watch.waiting_on_client(), "the client's data was there");
        assert!(
            watch
                .blame(elapsed())
                .is::<tower::timeout::error::Elapsed>()
        );
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
        assert!(watch.waiting_on_client());
        assert_eq!(
            watch.blame(elapsed()).downcast_ref(),
            Some(&ClientFault::Stalled)
        );
        let reset = watch.blame("reset by the upstream".into());
        assert!(
            reset.downcast_ref::<ClientFault>().is_none(),
            "not a timeout: the upstream's"
        );
        drop(guard);
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.downcast_ref(), Some(&ClientFault::Body)),
            other => panic!("{other:?}"),
        }
        assert!(watch.failed());
        assert!(
            Pin::new(&mut body).poll_frame(&mut cx).is_ready(),
            "ends after failing"
        );
    }
}

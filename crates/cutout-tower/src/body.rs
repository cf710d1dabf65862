//! Whole-response classification: the permit is kept until the response body ends, so that the
//! trailers (gRPC's `grpc-status`) or a broken body decide the call's outcome.
//!
//! [`BreakerService`](crate::BreakerService) records a call's outcome when its response future
//! finishes, that is when the response *headers* arrive. That is right for most HTTP calls and
//! wrong for two kinds of response:
//! - gRPC, whose status usually arrives in the trailers after the body: an `UNAVAILABLE` there
//!   comes with `200 OK` headers, which a classifier of headers counts as a success;
//! - a body that breaks after good headers (a connection reset halfway, a truncated transfer):
//!   the call failed, but its headers said 200.
//!
//! A [`WholeResponseService`] (added by a
//! [`WholeResponseLayer`]) asks a [`ClassifyResponse`] classifier
//! about the headers, which answers either a verdict at once ([`Classified::Now`]: a 5xx, a gRPC
//! trailers-only response, a transport error) or "at the body's end" ([`Classified::AtEnd`]).
//! In the second case the response's body is wrapped in a [`BreakerBody`] that holds the
//! breaker's permit, and the verdict is recorded when the body ends:
//!
//! | the body | verdict recorded |
//! |---|---|
//! | yields its trailers | [`ClassifyEnd::end`] with the trailers |
//! | ends without trailers, or reports [`is_end_stream`](http_body::Body::is_end_stream) | [`ClassifyEnd::end`] with `None`: a success for HTTP, a failure for gRPC (a gRPC response must carry a status) |
//! | yields an error | [`ClassifyEnd::body_error`] (by default a failure) |
//! | is dropped before its end | nothing: the permit is dropped unrecorded, a half-open probe slot is given back |
//!
//! Two classifiers are provided: [`HttpClassifier`] (a success waits for the body, whose error
//! is then a failure; every other verdict is decided on the headers) and, with the feature
//! `grpc`, `grpc::GrpcClassifier`.
//!
//! # What waiting for the body means
//! - **The call lasts until its verdict.** The duration the breaker measures (slow calls, the
//!   latency baseline) runs from the permit to the body's end when the verdict waits for it.
//!   A long server stream is a long call: keep `slow_call_threshold` off (or above the longest
//!   stream) for breakers of streaming calls, or give them their own breaker.
//! - **A waiting probe holds its slot.** A half-open probe whose verdict waits for its body
//!   holds its probe slot until the body ends or is dropped; `max_wait_in_half_open` bounds it.
//! - **Read bodies to their end.** A client that stops reading a body without dropping it
//!   keeps the permit as long as it keeps the body. One that drops it early records nothing:
//!   a caller that gave up is no evidence about the dependency. (tonic reads a unary response
//!   to its trailers; a streaming response is read to its end when the caller reads every
//!   message, until `None`.)
//! - **Header-time behaviour is unchanged** for [`BreakerService`](crate::BreakerService) and
//!   [`keyed`](crate::keyed) services: this is a separate service, chosen per stack.
//!
//! ```
//! use bytes::Bytes;
//! use cutout::{Breaker, Settings};
//! use cutout_tower::WholeResponseLayer;
//! use http_body::Frame;
//! use http_body_util::{BodyExt, StreamBody};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let breaker = Breaker::new("downloads", Settings::default());
//! let service = ServiceBuilder::new()
//!     .layer(WholeResponseLayer::new(breaker.clone())) // HttpClassifier by default
//!     .service_fn(|_: http::Request<()>| async {
//!         // 200 OK, then the connection breaks halfway through the body.
//!         let frames = tokio_stream::iter(vec![
//!             Ok(Frame::data(Bytes::from_static(b"half of it"))),
//!             Err(std::io::Error::other("connection reset")),
//!         ]);
//!         Ok::<_, std::io::Error>(http::Response::new(StreamBody::new(frames)))
//!     });
//!
//! let response = service.oneshot(http::Request::new(())).await?;
//! assert_eq!(response.status(), 200);
//! assert!(response.body().awaits_end());
//! assert_eq!(breaker.snapshot().calls, 0, "nothing is decided before the body ends");
//!
//! assert!(response.into_body().collect().await.is_err());
//! let snapshot = breaker.snapshot();
//! assert_eq!((snapshot.calls, snapshot.failures), (1, 1), "the broken body is the failure");
//! # Ok(())
//! # }
//! ```

mod breaker_body;
mod future;
mod layer;
mod service;

pub use breaker_body::BreakerBody;
pub use future::WholeResponseFuture;
pub use layer::WholeResponseLayer;
pub use service::WholeResponseService;

use cutout::classify::{Classify, Verdict};
use http::HeaderMap;
use http_body::Body;

use crate::HttpClassifier;

/// What a [`ClassifyResponse`] classifier makes of a response's headers (or of an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classified<A> {
    /// The verdict is known now: the permit records it when the headers arrive, and the body
    /// passes through untouched.
    Now(Verdict),
    /// The verdict waits for the body's end, where `A` decides it (see [`ClassifyEnd`]).
    AtEnd(A),
}

/// Classifies a response whose verdict may wait for the end of its body: the classifier of a
/// [`WholeResponseService`].
///
/// `classify_response` sees the result of the inner service: an error (no response at all) or
/// the response's headers. It answers a verdict at once, or an [`AtEnd`](Self::AtEnd) value
/// that decides the verdict when the body ends (see the [module docs](self) for every way a
/// body ends). An [`Classified::AtEnd`] for an `Err` (which has no body) is decided at once, as
/// an end without trailers.
///
/// ```
/// use cutout::classify::Verdict;
/// use cutout_tower::body::{Classified, ClassifyEnd, ClassifyResponse};
/// use http::HeaderMap;
/// use http_body::Body;
///
/// /// A server that reports failures in an `x-outcome` trailer, after the body.
/// #[derive(Clone)]
/// struct OutcomeTrailer;
///
/// struct AtEnd;
///
/// impl<E> ClassifyEnd<E> for AtEnd {
///     fn end(self, trailers: Option<&HeaderMap>) -> Verdict {
///         match trailers.and_then(|t| t.get("x-outcome")) {
///             Some(value) if value == "failed" => Verdict::Failure,
///             _ => Verdict::Success,
///         }
///     }
/// }
///
/// impl<B: Body, E> ClassifyResponse<B, E> for OutcomeTrailer {
///     type AtEnd = AtEnd;
///     fn classify_response(&self, result: &Result<http::Response<B>, E>) -> Classified<AtEnd> {
///         match result {
///             Ok(response) if response.status().is_server_error() => {
///                 Classified::Now(Verdict::Failure)
///             }
///             Ok(_) => Classified::AtEnd(AtEnd),
///             Err(_) => Classified::Now(Verdict::Failure),
///         }
///     }
/// }
///
/// let mut trailers = HeaderMap::new();
/// trailers.insert("x-outcome", "failed".parse().unwrap());
/// assert_eq!(ClassifyEnd::<()>::end(AtEnd, Some(&trailers)), Verdict::Failure);
/// assert_eq!(ClassifyEnd::<()>::body_error(AtEnd, &()), Verdict::Failure, "the default");
/// ```
pub trait ClassifyResponse<B: Body, E> {
    /// What decides the verdict at the body's end, made from the headers.
    type AtEnd: ClassifyEnd<B::Error>;

    /// The verdict on `result` now, or what will decide it at the body's end.
    fn classify_response(&self, result: &Result<http::Response<B>, E>) -> Classified<Self::AtEnd>;
}

/// Decides a call's verdict when its response body ends; `E` is the body's error type.
pub trait ClassifyEnd<E>: Sized {
    /// The verdict on a body that ended: with its trailers, or `None` when it ended without
    /// any.
    fn end(self, trailers: Option<&HeaderMap>) -> Verdict;

    /// The verdict on a body that failed with `error` before its end. Default: a failure (the
    /// response was cut short: the dependency or the way to it broke).
    fn body_error(self, error: &E) -> Verdict {
        let _ = error;
        Verdict::Failure
    }

    /// The verdict on a body dropped unread, before its first poll (its consumer never read
    /// it), asked when the body starts waiting. Default: `None`, nothing is recorded (a
    /// client that leaves is not the dependency's failure, and its permit gives a probe slot
    /// back). A client library whose callers often drop bodies unread may answer the headers'
    /// verdict. A body dropped after it was polled (read in part, or waited on) never records
    /// this: its upstream may be hanging mid-body, so nothing is recorded.
    fn dropped(&self) -> Option<Verdict> {
        None
    }
}

/// What [`HttpClassifier`] decides at the body's end: the end is a success, a body error is
/// classed as [`HttpClassifier::errors`] (a failure by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpBodyEnd {
    body_error: Verdict,
}

impl<E> ClassifyEnd<E> for HttpBodyEnd {
    fn end(self, _trailers: Option<&HeaderMap>) -> Verdict {
        Verdict::Success
    }

    fn body_error(self, _error: &E) -> Verdict {
        self.body_error
    }
}

/// Whole-response HTTP classification: the headers' verdict as [`Classify`] gives it when that
/// is not a success (a 5xx fails at once, a 4xx is ignored at once, a `Retry-After` honoured at
/// once); a success waits for the body, whose error is then classed as
/// [`errors`](HttpClassifier::errors) are (a failure by default) and whose end is the success.
///
/// ```
/// use cutout::classify::Verdict;
/// use cutout_tower::HttpClassifier;
/// use cutout_tower::body::{Classified, ClassifyEnd, ClassifyResponse};
/// use http_body_util::Empty;
///
/// let of = |status: u16| {
///     let response = http::Response::builder().status(status).body(Empty::<bytes::Bytes>::new());
///     let result = Ok::<_, std::io::Error>(response.unwrap());
///     ClassifyResponse::classify_response(&HttpClassifier::new(), &result)
/// };
/// assert_eq!(of(503), Classified::Now(Verdict::Failure));
/// assert_eq!(of(404), Classified::Now(Verdict::Ignored));
/// let Classified::AtEnd(at_end) = of(200) else { panic!("a 200 waits for its body") };
/// assert_eq!(ClassifyEnd::<std::io::Error>::end(at_end, None), Verdict::Success);
/// let truncated = std::io::Error::other("unexpected end of file");
/// assert_eq!(at_end.body_error(&truncated), Verdict::Failure);
/// ```
impl<B: Body, E> ClassifyResponse<B, E> for HttpClassifier {
    type AtEnd = HttpBodyEnd;

    fn classify_response(&self, result: &Result<http::Response<B>, E>) -> Classified<HttpBodyEnd> {
        match self.verdict(result) {
            Verdict::Success => {
                // A body error is an error of the call: the class of errors, as configured.
                let body_error = Classify::<http::Response<()>, ()>::verdict(self, &Err(()));
                Classified::AtEnd(HttpBodyEnd { body_error })
            }
            verdict => Classified::Now(verdict),
        }
    }
}

#[cfg(test)]
mod tests;

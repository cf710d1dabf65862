//! [`WholeResponseService`]: a breaker service whose verdict may wait for the response body.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::Breaker;
use http_body::Body;
use tower_service::Service;

use super::{BreakerBody, ClassifyResponse, WholeResponseFuture};
use crate::error::{BoxError, Error};
use crate::service::Admission;
use crate::{HttpClassifier, Readiness};

/// A service of HTTP responses guarded by a [`Breaker`], whose verdict may wait for the end of
/// the response body (see the [module docs](crate::body)).
///
/// Admission is [`BreakerService`](crate::BreakerService)'s: `poll_ready` asks the breaker
/// first, an open breaker answers `Ready` and the call's future fails with the refusal without
/// calling the inner service, a permit is not held while the inner service is not ready, and
/// errors of the inner `poll_ready` are passed on and recorded as nothing. What differs is when
/// the permit records: the classifier `C` (default [`HttpClassifier`]) decides on the headers
/// or hands the permit to the response's [`BreakerBody`], which records at the body's end.
///
/// ```
/// use cutout::{Breaker, Settings};
/// use cutout_tower::WholeResponseService;
/// use http_body_util::{BodyExt, Full};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let breaker = Breaker::new("catalog", Settings::default());
/// let inner = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::new(Full::new(bytes::Bytes::from("items"))))
/// });
/// let service = WholeResponseService::new(inner, breaker.clone());
/// let response = service.oneshot(http::Request::new(())).await?;
/// assert!(response.body().awaits_end(), "a 200 is decided at its body's end");
/// let body = response.into_body().collect().await?.to_bytes();
/// assert_eq!(body, "items");
/// assert_eq!(breaker.snapshot().calls, 1, "recorded: a success");
/// # Ok(())
/// # }
/// ```
pub struct WholeResponseService<S, C = HttpClassifier> {
    inner: S,
    classifier: C,
    admission: Admission,
}

impl<S> WholeResponseService<S> {
    /// Guards `inner` with `breaker`, classifying responses with [`HttpClassifier::new`]: a
    /// success waits for its body's end, and a body error is a failure.
    pub fn new(inner: S, breaker: Breaker) -> Self {
        WholeResponseService::with_classifier(inner, breaker, HttpClassifier::new())
    }
}

impl<S, C> WholeResponseService<S, C> {
    /// Guards `inner` with `breaker`, with `classifier` deciding each verdict, on the headers
    /// or at the body's end.
    pub fn with_classifier(inner: S, breaker: Breaker, classifier: C) -> Self {
        WholeResponseService {
            inner,
            classifier,
            admission: Admission::new(breaker),
        }
    }

    /// Waits `pause` (at most the refusal's retry-after) before a refused call's future fails,
    /// so that a caller polling in a tight loop does not spin. Default: no pause. Needs a tokio
    /// timer.
    pub fn refusal_pause(mut self, pause: Duration) -> Self {
        self.admission.set_pause(pause);
        self
    }

    /// What `poll_ready` answers while the breaker refuses (default
    /// [`Readiness::FailInCall`]); see [`Readiness`].
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.admission.set_readiness(readiness);
        self
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        self.admission.breaker()
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Takes the inner service out.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Clones share the breaker (one state for all of them); each clone has its own readiness, so
/// a permit taken by one clone's `poll_ready` is never used by another.
impl<S: Clone, C: Clone> Clone for WholeResponseService<S, C> {
    fn clone(&self) -> Self {
        WholeResponseService {
            inner: self.inner.clone(),
            classifier: self.classifier.clone(),
            admission: self.admission.clone(),
        }
    }
}

impl<S, C, Req, B> Service<Req> for WholeResponseService<S, C>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: Body,
    C: ClassifyResponse<B, S::Error> + Clone,
{
    type Response = http::Response<BreakerBody<B, C::AtEnd>>;
    type Error = Error;
    type Future = WholeResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.admission.poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let classifier = self.classifier.clone();
        match self.admission.take() {
            Ok(permit) => WholeResponseFuture::called(
                self.inner.call(request),
                classifier,
                Some(permit),
                None,
            ),
            Err(rejected) => {
                WholeResponseFuture::refused(rejected, self.admission.pause(), None, classifier)
            }
        }
    }
}

/// As [`BreakerService`](crate::BreakerService)'s: whether the next call would be refused,
/// before the inner service's load, so that tower's p2c `Balance` avoids an open endpoint.
impl<S: tower::load::Load, C> tower::load::Load for WholeResponseService<S, C> {
    type Metric = crate::BreakerLoad<S::Metric>;

    fn load(&self) -> Self::Metric {
        crate::BreakerLoad {
            refusing: self.admission.refusing(),
            inner: self.inner.load(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for WholeResponseService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WholeResponseService")
            .field("inner", &self.inner)
            .field("breaker", self.admission.breaker())
            .field("refusal_pause", &self.admission.pause())
            .finish_non_exhaustive()
    }
}

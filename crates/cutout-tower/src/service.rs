//! [`BreakerService`]: calls the inner service only when the breaker admits the call.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::classify::{Classify, DefaultClassifier};
use cutout::{Breaker, OwnedPermit, Rejected};
use tower_service::Service;

use crate::error::{BoxError, Error};
use crate::future::ResponseFuture;

/// A service guarded by a [`Breaker`].
///
/// `poll_ready` asks the breaker first. When it refuses, `poll_ready` answers `Ready` without
/// polling the inner service (which may be stuck behind the very outage the breaker saw), and
/// the next `call` returns a future that fails with the refusal; the inner service is not
/// called. When it admits, the permit is kept and the inner service is polled; if the inner
/// service is not ready the permit is dropped unrecorded (a probe slot is given back) and asked
/// for again on the next poll. The call's duration is measured from the moment the permit was
/// taken.
///
/// Errors of the inner service's `poll_ready` are passed on and recorded as nothing: they say
/// the service is unusable, not how a call went. Errors and responses of calls are recorded
/// through the classifier `C` (default: `Ok` success, `Err` failure).
pub struct BreakerService<S, C = DefaultClassifier> {
    inner: S,
    breaker: Breaker,
    classifier: C,
    pause: Option<Duration>,
    ready: Ready,
}

#[derive(Default)]
enum Ready {
    #[default]
    Unpolled,
    Admitted(OwnedPermit),
    Refused(Rejected),
}

impl<S> BreakerService<S> {
    /// Guards `inner` with `breaker`, classifying `Ok` as success and `Err` as failure.
    pub fn new(inner: S, breaker: Breaker) -> Self {
        BreakerService::with_classifier(inner, breaker, DefaultClassifier)
    }
}

impl<S, C> BreakerService<S, C> {
    /// Guards `inner` with `breaker`, with `classifier` deciding what each result means.
    pub fn with_classifier(inner: S, breaker: Breaker, classifier: C) -> Self {
        BreakerService {
            inner,
            breaker,
            classifier,
            pause: None,
            ready: Ready::Unpolled,
        }
    }

    /// Waits `pause` (at most the refusal's retry-after) before a refused call's future fails,
    /// so that a caller polling in a tight loop does not spin. Default: no pause. Needs a tokio
    /// timer.
    pub fn refusal_pause(mut self, pause: Duration) -> Self {
        self.pause = Some(pause);
        self
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
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
impl<S: Clone, C: Clone> Clone for BreakerService<S, C> {
    fn clone(&self) -> Self {
        BreakerService {
            inner: self.inner.clone(),
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            pause: self.pause,
            ready: Ready::Unpolled,
        }
    }
}

impl<S, C, Req> Service<Req> for BreakerService<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error;
    type Future = ResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if !matches!(self.ready, Ready::Admitted(_)) {
            // A refusal kept from an earlier poll may be stale: ask again.
            match self.breaker.try_acquire_owned() {
                Ok(permit) => self.ready = Ready::Admitted(permit),
                Err(rejected) => {
                    self.ready = Ready::Refused(rejected);
                    return Poll::Ready(Ok(()));
                }
            }
        }
        match self.inner.poll_ready(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(error)) => {
                self.ready = Ready::Unpolled;
                Poll::Ready(Err(Error::inner(error)))
            }
            Poll::Pending => {
                // Do not sit on a probe slot while the inner service is busy.
                self.ready = Ready::Unpolled;
                Poll::Pending
            }
        }
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let classifier = self.classifier.clone();
        let permit = match std::mem::take(&mut self.ready) {
            Ready::Admitted(permit) => permit,
            Ready::Refused(rejected) => {
                return ResponseFuture::refused(rejected, self.pause, classifier);
            }
            // Called without `poll_ready` (a contract breach tower allows services to punish):
            // ask the breaker now and leave readiness to the inner service's own contract.
            Ready::Unpolled => match self.breaker.try_acquire_owned() {
                Ok(permit) => permit,
                Err(rejected) => return ResponseFuture::refused(rejected, self.pause, classifier),
            },
        };
        ResponseFuture::called(self.inner.call(request), classifier, Some(permit), None)
    }
}

impl<S: fmt::Debug, C> fmt::Debug for BreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .field("refusal_pause", &self.pause)
            .finish_non_exhaustive()
    }
}

//! [`BreakerService`]: calls the inner service only when the breaker admits the call.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::classify::{Classify, DefaultClassifier};
use cutout::{Breaker, OwnedPermit, Rejected, State};
use tower_service::Service;

use crate::error::{BoxError, Error};
use crate::future::ResponseFuture;

/// A service guarded by a [`Breaker`].
///
/// `poll_ready` asks the breaker and the inner service once per request, in the order the
/// breaker's published state calls for:
/// - **Closed** (or recovering, or disabled): the inner service first, then, once it is
///   ready, the breaker. A request that waits on backpressure (a full pool, a
///   `ConcurrencyLimit`, a `Buffer`) draws one admission however often it is polled: with
///   throttling on, one draw, not one per poll (each refused draw raises the next one's odds,
///   so drawing per poll refused almost every request under backpressure and never
///   recovered); with a ramp, one admission. The call's duration runs from the permit, taken
///   when the request can be sent: the wait for readiness is the caller's, not the
///   dependency's, and is not timed.
/// - **Open, half-open or isolated**: the breaker first. When it refuses, `poll_ready` does
///   not poll the inner service (which may be stuck behind the very outage the breaker saw);
///   it answers `Ready`,
///   and the next `call` returns a future that fails with the refusal without calling the
///   inner service. When it admits (a probe), the permit is kept and the inner service is
///   polled; if the inner service is not ready the permit is dropped unrecorded (the probe
///   slot is given back) and asked for again on the next poll.
///
/// Errors of the inner service's `poll_ready` are passed on and recorded as nothing: they say
/// the service is unusable, not how a call went. Errors and responses of calls are recorded
/// through the classifier `C` (default: `Ok` success, `Err` failure).
pub struct BreakerService<S, C = DefaultClassifier> {
    inner: S,
    classifier: C,
    admission: Admission,
}

/// What a breaker service's `poll_ready` decided for the next `call`: the breaker's answer,
/// kept between the two. Shared by [`BreakerService`] and
/// [`WholeResponseService`](crate::WholeResponseService), which differ only in when the permit
/// records.
pub(crate) struct Admission {
    breaker: Breaker,
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

impl Admission {
    pub(crate) fn new(breaker: Breaker) -> Self {
        Admission {
            breaker,
            pause: None,
            ready: Ready::Unpolled,
        }
    }

    pub(crate) fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    pub(crate) fn pause(&self) -> Option<Duration> {
        self.pause
    }

    pub(crate) fn set_pause(&mut self, pause: Duration) {
        self.pause = Some(pause);
    }

    /// The breaker and `inner`, each asked once per request (see [`BreakerService`]'s docs
    /// for the contract).
    pub(crate) fn poll_ready<S, Req>(
        &mut self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Error>>
    where
        S: Service<Req>,
        S::Error: Into<BoxError>,
    {
        if matches!(self.ready, Ready::Admitted(_)) || !admits_freely(self.breaker.peek().0) {
            return self.poll_breaker_first(inner, cx);
        }
        // Closed (or recovering, or disabled): the inner service first, and the breaker once
        // it is ready, so that a request waiting on backpressure draws one admission (one
        // throttling draw, one ramp admission) however often it is polled, and its duration
        // runs from the moment it can be sent, not from the start of the wait.
        match inner.poll_ready(cx) {
            Poll::Pending => {
                self.ready = Ready::Unpolled;
                Poll::Pending
            }
            Poll::Ready(Err(error)) => {
                self.ready = Ready::Unpolled;
                Poll::Ready(Err(Error::inner(error)))
            }
            Poll::Ready(Ok(())) => {
                self.ready = match self.breaker.try_acquire_owned() {
                    Ok(permit) => Ready::Admitted(permit),
                    Err(rejected) => Ready::Refused(rejected),
                };
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Open, half-open or isolated (or a permit held from an earlier poll): the breaker first,
    /// so that a refusal never waits on an inner service that may be stuck behind the very
    /// outage the breaker saw, and a probe is taken only when the inner service can send it.
    fn poll_breaker_first<S, Req>(
        &mut self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Error>>
    where
        S: Service<Req>,
        S::Error: Into<BoxError>,
    {
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
        match inner.poll_ready(cx) {
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

    /// The permit for the call being made, or the refusal to fail it with.
    pub(crate) fn take(&mut self) -> Result<OwnedPermit, Rejected> {
        match std::mem::take(&mut self.ready) {
            Ready::Admitted(permit) => Ok(permit),
            Ready::Refused(rejected) => Err(rejected),
            // Called without `poll_ready` (a contract breach tower allows services to punish):
            // ask the breaker now and leave readiness to the inner service's own contract.
            Ready::Unpolled => self.breaker.try_acquire_owned(),
        }
    }
}

/// Whether a breaker in `state` (as last published) lets calls through without a probe slot,
/// so that its admission can wait until the inner service is ready.
fn admits_freely(state: State) -> bool {
    matches!(state, State::Closed | State::Recovering | State::Disabled)
}

/// A clone shares the breaker and starts unpolled: a permit is never used by two services.
impl Clone for Admission {
    fn clone(&self) -> Self {
        Admission {
            breaker: self.breaker.clone(),
            pause: self.pause,
            ready: Ready::Unpolled,
        }
    }
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
impl<S: Clone, C: Clone> Clone for BreakerService<S, C> {
    fn clone(&self) -> Self {
        BreakerService {
            inner: self.inner.clone(),
            classifier: self.classifier.clone(),
            admission: self.admission.clone(),
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
        self.admission.poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let classifier = self.classifier.clone();
        match self.admission.take() {
            Ok(permit) => {
                ResponseFuture::called(self.inner.call(request), classifier, Some(permit), None)
            }
            Err(rejected) => ResponseFuture::refused(rejected, self.admission.pause(), classifier),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for BreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", self.admission.breaker())
            .field("refusal_pause", &self.admission.pause())
            .finish_non_exhaustive()
    }
}

//! [`ResponseFuture`]: holds the permit while the inner call runs and records its outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use cutout::classify::Classify;
use cutout::{OwnedPermit, Rejected};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::error::{BoxError, Error};
use crate::keyed::CallGuard;

pin_project! {
    /// The response future of [`BreakerService`](crate::BreakerService) and
    /// [`KeyedService`](crate::keyed::KeyedService).
    ///
    /// While the inner call runs it holds the breaker's [`OwnedPermit`]; when the call finishes
    /// the classifier decides its [verdict](Classify::verdict) (an outcome, or "open for a
    /// while") and the permit records it. Dropping the future before
    /// it finishes (a timeout outside, a `select!`, a client that went away) drops the permit
    /// unrecorded: nothing is counted and a half-open probe slot is given back.
    ///
    /// A refused call's future fails at once (after the optional refusal pause) without the
    /// inner service ever being called.
    pub struct ResponseFuture<F, C> {
        #[pin]
        state: State<F>,
        classifier: C,
        permit: Option<OwnedPermit>,
        guard: Option<CallGuard>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(crate) enum State<F> {
        Called { #[pin] future: F },
        Refused { refusal: Refusal },
    }
}

/// A refused call's future: fails with the refusal, after the optional pause. Shared by
/// [`ResponseFuture`] and [`WholeResponseFuture`](crate::body::WholeResponseFuture).
pub(crate) struct Refusal {
    rejection: Option<Rejected>,
    pause: Option<Pin<Box<Sleep>>>,
    /// The public label of a keyed service's refusal ([`Error::rejected_as`]).
    label: Option<Arc<str>>,
}

impl Refusal {
    /// The refusal, with its pause: `pause`, but never past the moment the breaker could
    /// admit the call again (its retry-after); no timer for no time.
    pub(crate) fn new(
        rejection: Rejected,
        pause: Option<Duration>,
        label: Option<Arc<str>>,
    ) -> Refusal {
        let pause = pause
            .map(|pause| {
                rejection
                    .retry_after()
                    .map_or(pause, |after| pause.min(after))
            })
            .filter(|pause| !pause.is_zero())
            .map(|pause| Box::pin(tokio::time::sleep(pause)));
        Refusal {
            rejection: Some(rejection),
            pause,
            label,
        }
    }

    /// Ready with the refusal once the pause is over. Polling again after that panics, as any
    /// future polled after it completed may.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Error> {
        if let Some(pause) = &mut self.pause {
            ready!(pause.as_mut().poll(cx));
        }
        let rejection = self
            .rejection
            .take()
            .expect("a refused call's future polled after it completed");
        Poll::Ready(match self.label.take() {
            Some(label) => Error::rejected_as(rejection, label),
            None => Error::rejected(rejection),
        })
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(crate) fn called(
        future: F,
        classifier: C,
        permit: Option<OwnedPermit>,
        guard: Option<CallGuard>,
    ) -> Self {
        ResponseFuture {
            state: State::Called { future },
            classifier,
            permit,
            guard,
        }
    }

    pub(crate) fn refused(
        rejection: Rejected,
        pause: Option<Duration>,
        label: Option<Arc<str>>,
        classifier: C,
    ) -> Self {
        ResponseFuture {
            state: State::Refused {
                refusal: Refusal::new(rejection, pause, label),
            },
            classifier,
            permit: None,
            guard: None,
        }
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    C: Classify<T, E>,
    E: Into<BoxError>,
{
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Called { future } => {
                let result = ready!(future.poll(cx));
                if let Some(permit) = this.permit.take() {
                    // The verdict: an outcome, or "open for a while" (a `Retry-After` honoured
                    // by the classifier).
                    let verdict = this.classifier.verdict(&result);
                    crate::keyed::record_verdict(permit, verdict, this.guard.as_ref());
                }
                // The call is over: the key may be evicted from now on.
                drop(this.guard.take());
                Poll::Ready(result.map_err(Error::inner))
            }
            StateProj::Refused { refusal } => refusal.poll(cx).map(Err),
        }
    }
}

impl<F, C> std::fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

//! [`WholeResponseFuture`]: holds the permit until the headers, then records or hands it on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use cutout::{OwnedPermit, Rejected};
use http_body::Body;
use pin_project_lite::pin_project;

use super::{BreakerBody, Classified, ClassifyEnd, ClassifyResponse};
use crate::error::{BoxError, Error};
use crate::future::{Refusal, State, StateProj};
use crate::keyed::CallGuard;

pin_project! {
    /// The response future of [`WholeResponseService`](crate::WholeResponseService).
    ///
    /// While the inner call runs it holds the breaker's [`OwnedPermit`]. When the inner service
    /// answers, the classifier looks at the result: a verdict decided now is recorded at once;
    /// a verdict that waits for the body moves the permit into the response's [`BreakerBody`].
    /// Dropping the future before the inner service answers drops the permit unrecorded
    /// (nothing is counted and a half-open probe slot is given back).
    ///
    /// A refused call's future fails at once (after the optional refusal pause) without the
    /// inner service ever being called.
    pub struct WholeResponseFuture<F, C> {
        #[pin]
        state: State<F>,
        classifier: C,
        permit: Option<OwnedPermit>,
        guard: Option<CallGuard>,
    }
}

impl<F, C> WholeResponseFuture<F, C> {
    /// An admitted call (`permit`), or one let through unguarded (`None`).
    pub(crate) fn called(
        future: F,
        classifier: C,
        permit: Option<OwnedPermit>,
        guard: Option<CallGuard>,
    ) -> Self {
        WholeResponseFuture {
            state: State::Called { future },
            classifier,
            permit,
            guard,
        }
    }

    pub(crate) fn refused(
        rejection: Rejected,
        pause: Option<Duration>,
        label: Option<std::sync::Arc<str>>,
        classifier: C,
    ) -> Self {
        WholeResponseFuture {
            state: State::Refused {
                refusal: Refusal::new(rejection, pause, label),
            },
            classifier,
            permit: None,
            guard: None,
        }
    }
}

impl<F, C, B, E> Future for WholeResponseFuture<F, C>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Body,
    C: ClassifyResponse<B, E>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<BreakerBody<B, C::AtEnd>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Called { future } => {
                let result = ready!(future.poll(cx));
                let guard = this.guard.take();
                let Some(permit) = this.permit.take() else {
                    // Unguarded: nothing to record.
                    return Poll::Ready(decided(result));
                };
                match this.classifier.classify_response(&result) {
                    Classified::Now(verdict) => {
                        crate::keyed::record_verdict(permit, verdict, guard.as_ref());
                        drop(guard);
                        Poll::Ready(decided(result))
                    }
                    Classified::AtEnd(at_end) => {
                        match result {
                            Ok(response) => Poll::Ready(Ok(response
                                .map(|body| BreakerBody::watching(body, permit, at_end, guard)))),
                            Err(error) => {
                                // An error has no body to wait for: it ended without trailers.
                                let verdict = at_end.end(None);
                                crate::keyed::record_verdict(permit, verdict, guard.as_ref());
                                drop(guard);
                                Poll::Ready(Err(Error::inner(error)))
                            }
                        }
                    }
                }
            }
            StateProj::Refused { refusal } => refusal.poll(cx).map(Err),
        }
    }
}

/// The result with a body that passes through (the call is decided, or unguarded).
fn decided<B, A, E: Into<BoxError>>(
    result: Result<http::Response<B>, E>,
) -> Result<http::Response<BreakerBody<B, A>>, Error> {
    result
        .map(|response| response.map(BreakerBody::decided))
        .map_err(Error::inner)
}

impl<F, C> std::fmt::Debug for WholeResponseFuture<F, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeResponseFuture")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

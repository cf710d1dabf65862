//! [`BreakerBody`]: a response body that holds its call's permit until the body ends.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use cutout::OwnedPermit;
use cutout::classify::Verdict;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::ClassifyEnd;
use crate::keyed::CallGuard;

pin_project! {
    /// The body of a response from a [`WholeResponseService`](crate::WholeResponseService).
    ///
    /// When the classifier decided the call on its headers, the body passes every frame through
    /// and holds nothing. When the verdict waits for the body's end, it holds the breaker's
    /// [`OwnedPermit`] and the classifier's [`ClassifyEnd`], passes every frame through
    /// unchanged, and records the verdict when:
    /// - a trailers frame passes: [`ClassifyEnd::end`] with the trailers;
    /// - the inner body ends (`None`), or reports [`is_end_stream`](Body::is_end_stream) after a
    ///   frame or when the response arrives (a consumer such as hyper may then never poll it
    ///   again): [`ClassifyEnd::end`] with `None`;
    /// - the inner body yields an error: [`ClassifyEnd::body_error`].
    ///
    /// Dropping it before any of these drops the permit unrecorded (nothing is counted and a
    /// half-open probe slot is given back), except a body dropped unread, before its first
    /// poll, which records the classifier's [`ClassifyEnd::dropped`] verdict if it has one.
    /// A body its consumer started reading and then abandoned (read part of it, or gave up
    /// waiting for the next frame) is no evidence either way: the upstream may be hanging
    /// mid-body, so it must not count as the success its headers promised (a hung probe would
    /// close a half-open breaker). [`awaits_end`](Self::awaits_end) tells whether the
    /// verdict is still to come.
    pub struct BreakerBody<B, A> {
        #[pin]
        inner: B,
        watch: Option<Watch<A>>,
    }
}

/// What a body waiting for its verdict holds.
struct Watch<A> {
    /// Taken when the verdict is recorded.
    permit: Option<OwnedPermit>,
    /// Taken with the permit.
    at_end: Option<A>,
    /// What a drop before the first poll records ([`ClassifyEnd::dropped`]).
    on_drop: Option<Verdict>,
    /// Whether the body was polled: a drop after that records nothing.
    polled: bool,
    /// A keyed call's hold on its key (no eviction while the call runs).
    guard: Option<CallGuard>,
}

/// A body dropped before its end: unread, its classifier's [`ClassifyEnd::dropped`] verdict,
/// if any; else (or once polled) the permit is dropped unrecorded.
impl<A> Drop for Watch<A> {
    fn drop(&mut self) {
        let on_drop = if self.polled { None } else { self.on_drop };
        if let (Some(permit), Some(verdict)) = (self.permit.take(), on_drop) {
            crate::keyed::record_verdict(permit, verdict, self.guard.as_ref());
        }
    }
}

impl<B, A> BreakerBody<B, A> {
    /// A body whose call was decided already (or is not guarded).
    pub(crate) fn decided(inner: B) -> Self {
        BreakerBody { inner, watch: None }
    }

    /// A body whose verdict `at_end` decides; decided at once if `inner` has ended already.
    pub(crate) fn watching(
        inner: B,
        permit: OwnedPermit,
        at_end: A,
        guard: Option<CallGuard>,
    ) -> Self
    where
        B: Body,
        A: ClassifyEnd<B::Error>,
    {
        let on_drop = at_end.dropped();
        let mut watch = Some(Watch {
            permit: Some(permit),
            at_end: Some(at_end),
            on_drop,
            polled: false,
            guard,
        });
        if inner.is_end_stream() {
            finish(&mut watch, |at_end| at_end.end(None));
        }
        BreakerBody { inner, watch }
    }

    /// Whether the call's verdict is still to come: the body holds the permit and records it
    /// at its end. `false` once recorded, and for a call decided on its headers.
    pub fn awaits_end(&self) -> bool {
        self.watch.is_some()
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

/// Records the verdict `decide` gives, if it has not been recorded yet.
fn finish<A>(watch: &mut Option<Watch<A>>, decide: impl FnOnce(A) -> Verdict) {
    if let Some(mut watch) = watch.take() {
        // `Watch` has a drop of its own: its fields are taken, not moved out.
        let guard = watch.guard.take();
        if let (Some(permit), Some(at_end)) = (watch.permit.take(), watch.at_end.take()) {
            crate::keyed::record_verdict(permit, decide(at_end), guard.as_ref());
        }
        // The call is over: its key may be evicted from now on.
        drop(guard);
    }
}

impl<B, A> Body for BreakerBody<B, A>
where
    B: Body,
    A: ClassifyEnd<B::Error>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        if let Some(watch) = this.watch.as_mut() {
            // Read (or waited on) from now on: a drop records nothing.
            watch.polled = true;
        }
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        if this.watch.is_some() {
            match &frame {
                Some(Ok(frame)) => {
                    if let Some(trailers) = frame.trailers_ref() {
                        finish(this.watch, |at_end| at_end.end(Some(trailers)));
                    } else if this.inner.is_end_stream() {
                        // Nothing follows, trailers included: a consumer may stop polling here.
                        finish(this.watch, |at_end| at_end.end(None));
                    }
                }
                Some(Err(error)) => finish(this.watch, |at_end| at_end.body_error(error)),
                None => finish(this.watch, |at_end| at_end.end(None)),
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B, A> fmt::Debug for BreakerBody<B, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerBody")
            .field("awaits_end", &self.awaits_end())
            .finish_non_exhaustive()
    }
}

//! [`BreakerService`]: calls the inner service only when the breaker admits the call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::classify::{Classify, DefaultClassifier};
use cutout::{Breaker, OwnedPermit, RejectReason, Rejected, State};
use tokio::time::Sleep;
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
///   recovered); with a ramp, one admission. The call's duration runs from the call: a
///   permit held since `poll_ready` (a balancer such as p2c keeps a ready service unpicked
///   for as long as traffic is quiet) is swapped for a fresh one at `call`, and if that fresh
///   draw is refused the admission already drawn stands; the wait for readiness and for
///   being picked is the caller's, not the dependency's, and is not timed.
/// - **Open, half-open or isolated**: the breaker first. When it refuses, `poll_ready` does
///   not poll the inner service (which may be stuck behind the very outage the breaker saw);
///   what it answers is the service's [readiness mode](Readiness): by default `Ready`,
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
    readiness: Readiness,
    /// [`Readiness::WaitForBreak`]'s timer: wakes the task that saw a refusal when the
    /// breaker may admit again.
    wake: Option<Pin<Box<Sleep>>>,
    ready: Ready,
}

/// What a breaker service's `poll_ready` answers while its breaker refuses, chosen per layer
/// or service ([`BreakerLayer::readiness`](crate::BreakerLayer::readiness),
/// [`BreakerService::readiness`]). Either way, a refusal never polls the inner service and no
/// permit is held while the service waits.
///
/// | | `FailInCall` (default) | `WaitForBreak` |
/// |---|---|---|
/// | `poll_ready` while refusing | `Ready` | `Pending`, woken when the refusal's retry-after runs out |
/// | the caller | fails fast: its `call` returns the refusal | waits for the break's end, then is a probe or a call |
/// | tower's p2c `Balance` | picks it, unless its [`Load`](tower::load::Load) (below) makes it avoid it | only ever picks ready endpoints: routes around it until its break ends |
/// | `Buffer` in front | drains its queue as refusals, at once | its worker waits; callers queue up to the buffer's bound, then wait in `poll_ready` |
/// | `ConcurrencyLimit` in front | a refusal costs its permit for an instant | each waiting request holds a permit until the break ends |
///
/// **Default: `FailInCall`.** A breaker's first duty to its caller is to fail fast: a client
/// with one dependency would rather have the refusal now (and its retry-after, to put the work
/// back) than a request that hangs for the rest of a break of up to two minutes, and any
/// timeout outside would turn that wait into an error anyway. `WaitForBreak` is for a breaker
/// per endpoint inside a load balancer (p2c), where a waiting endpoint is simply not chosen
/// and the requests go to the healthy ones: see `examples/p2c.rs`.
///
/// `WaitForBreak`'s details:
/// - The wake is a tokio timer (`tokio::time::sleep`) for the refusal's retry-after, on
///   tokio's clock (paused time drives it); a breaker on another clock (the default
///   `SystemClock`) counts its break in real time too, so the two agree outside tests.
/// - No lost wake-ups: every `Pending` has registered the polling task's waker with the timer
///   it returns on. A break that ends sooner (a health check, another clone's probe closing
///   the breaker, a `reset`) is noticed at the next re-check: an open or isolated breaker is
///   asked again every 500 ms at most (what it can no longer see: an early end is up to
///   500 ms late; the cost is one breaker read per waiting service per interval). A recovering
///   breaker's ramp refusal is waited out too, asked again every 50 ms (a new draw each time,
///   the admitted fraction growing), so a `WaitForBreak` call is never a ramp refusal. A
///   half-open breaker whose
///   probe slots are taken every 100 ms at most (the probe in flight decides within its
///   latency; the refusal's own retry-after can be the rest of the whole half-open wait).
/// - A throttled refusal (adaptive throttling) is not waited on: it is a draw per request, not
///   a break, and fails in the call as in `FailInCall`.
/// - A cancelled caller (its `ready()` future or its task dropped) leaves nothing behind: no
///   permit is held while waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// `Ready` while refusing; the next `call`'s future fails with the refusal.
    #[default]
    FailInCall,
    /// `Pending` while refusing, woken when the refusal's retry-after runs out (a second when
    /// it has none); a throttled refusal fails in the call.
    WaitForBreak,
}

/// How often a [`Readiness::WaitForBreak`] service asks again a breaker whose refusal says
/// nothing of when it ends (an isolated breaker).
const RECHECK: Duration = Duration::from_secs(1);

/// How often at most a [`Readiness::WaitForBreak`] service asks again a half-open breaker whose
/// probe slots are taken: the probe in flight decides within its latency, while the refusal's
/// own retry-after may be what is left of the whole half-open wait (a minute by default).
const PROBE_RECHECK: Duration = Duration::from_millis(100);

/// How often at most a [`Readiness::WaitForBreak`] service asks again an open breaker: a
/// break can end before its timer (a health check that passes, an operator's reset), and the
/// waiting caller should get its traffic back within this, not at the break's planned end.
/// The cost is one breaker read per waiting service per interval.
const BREAK_RECHECK: Duration = Duration::from_millis(500);

/// How often a [`Readiness::WaitForBreak`] service asks a recovering breaker again after a
/// ramp refusal: each ask is a new draw against a fraction that grows with time.
const RAMP_RECHECK: Duration = Duration::from_millis(50);

/// The [`Load`](tower::load::Load) of a breaker service: whether it would refuse the next
/// call, before the inner service's load. A refusing service compares above any that would
/// send the call, so tower's p2c `Balance` picks it only when both of its draws refuse (every
/// endpoint of the pair is open), and among those that would send, the inner load decides.
///
/// A service reads as refusing when its last `poll_ready` kept a refusal that still stands at
/// the `load()` read (its breaker open or isolated now, or half-open with its probe slots
/// taken; a kept refusal whose break has run out reads as sending, so p2c picks the endpoint,
/// re-polls it and probes it: p2c re-polls only the endpoint it picks, and a refusal read as
/// standing for ever kept a recovered endpoint out of traffic for ever), or, not polled yet,
/// when its breaker is open, half-open or isolated as last published. One that holds a probe's
/// permit reads as sending: p2c may pick it, and its probe is how the breaker learns that
/// the endpoint is back.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct BreakerLoad<M> {
    /// Whether the next call would be refused.
    pub refusing: bool,
    /// The inner service's load.
    pub inner: M,
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
            readiness: Readiness::FailInCall,
            wake: None,
            ready: Ready::Unpolled,
        }
    }

    pub(crate) fn set_readiness(&mut self, readiness: Readiness) {
        self.readiness = readiness;
    }

    pub(crate) fn readiness(&self) -> Readiness {
        self.readiness
    }

    /// Whether the next call would be refused (see [`BreakerLoad`]).
    pub(crate) fn refusing(&self) -> bool {
        match self.ready {
            Ready::Admitted(_) => false,
            // A kept refusal is read against the breaker's state now (which advances with its
            // clock): p2c re-polls only the endpoint it picks, so a refusal read as refusing
            // for ever would keep a recovered endpoint unpicked, never probed, never closed.
            Ready::Refused(ref rejected) => match self.breaker.state() {
                State::Open | State::Isolated => true,
                // The break ran out: a probe slot may be free, unless the refusal said the
                // slots were taken.
                State::HalfOpen => rejected.reason() == RejectReason::HalfOpenFull,
                // A throttling or ramp refusal is one draw; the next is another.
                _ => false,
            },
            Ready::Unpolled => !admits_freely(self.breaker.peek().0),
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
                    Ok(permit) => {
                        self.wake = None;
                        Ready::Admitted(permit)
                    }
                    Err(rejected)
                        if self.readiness == Readiness::WaitForBreak
                            && rejected.reason() == RejectReason::Ramp =>
                    {
                        // WaitForBreak promises a call that is not refused: a ramp refusal
                        // is waited out like a break, asking again shortly (a new draw).
                        self.ready = Ready::Unpolled;
                        let after = rejected
                            .retry_after()
                            .unwrap_or(RAMP_RECHECK)
                            .clamp(Duration::from_millis(1), RAMP_RECHECK);
                        return self.sleep(after, cx);
                    }
                    Err(rejected) => Ready::Refused(rejected),
                };
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Sleeps `after` on this service's timer, registering the task's waker; wakes the task
    /// at once if the timer has run out already.
    fn sleep(&mut self, after: Duration, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let deadline = tokio::time::Instant::now() + after;
        let wake = match &mut self.wake {
            Some(wake) => {
                wake.as_mut().reset(deadline);
                wake
            }
            None => self
                .wake
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        if wake.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
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
        // A refusal kept from an earlier poll may be stale: ask again. (At most twice: a
        // timer that has already run out is asked again at once.)
        for _ in 0..2 {
            if matches!(self.ready, Ready::Admitted(_)) {
                break;
            }
            match self.breaker.try_acquire_owned() {
                Ok(permit) => {
                    self.wake = None;
                    self.ready = Ready::Admitted(permit);
                }
                Err(rejected) => {
                    let wait = self.readiness == Readiness::WaitForBreak
                        && rejected.reason() != RejectReason::Throttled;
                    if !wait {
                        self.ready = Ready::Refused(rejected);
                        return Poll::Ready(Ok(()));
                    }
                    self.ready = Ready::Unpolled;
                    let mut after = rejected.retry_after().unwrap_or(RECHECK);
                    match rejected.reason() {
                        RejectReason::HalfOpenFull => after = after.min(PROBE_RECHECK),
                        // A break may end early (a health check, a reset): ask again often
                        // enough to see it.
                        RejectReason::Open | RejectReason::Isolated => {
                            after = after.min(BREAK_RECHECK)
                        }
                        _ => {}
                    }
                    let after = after.max(Duration::from_millis(1));
                    let deadline = tokio::time::Instant::now() + after;
                    let wake = match &mut self.wake {
                        Some(wake) => {
                            wake.as_mut().reset(deadline);
                            wake
                        }
                        None => self
                            .wake
                            .insert(Box::pin(tokio::time::sleep_until(deadline))),
                    };
                    // Registers this task's waker with the timer: no lost wake-up.
                    if wake.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
        }
        if !matches!(self.ready, Ready::Admitted(_)) {
            // The timer ran out twice at once (a retry-after of zero): come back soon.
            cx.waker().wake_by_ref();
            return Poll::Pending;
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
            Ready::Admitted(permit) if admits_freely(self.breaker.peek().0) => {
                // The permit may be old: a balancer (p2c) keeps a ready service's readiness
                // until it picks it, seconds later when traffic is quiet, and a call timed
                // from it would count that wait as the dependency's slowness. A closed
                // breaker's call is timed from the call: a fresh permit, taken before the
                // old one is given back. If the fresh one is refused (a throttling or ramp
                // draw), the admission already drawn stands: one request never loses two
                // draws.
                match self.breaker.try_acquire_owned() {
                    Ok(fresh) => {
                        drop(permit);
                        Ok(fresh)
                    }
                    Err(_) => Ok(permit),
                }
            }
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
            readiness: self.readiness,
            wake: None,
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

    /// What `poll_ready` answers while the breaker refuses (default
    /// [`Readiness::FailInCall`]: `Ready`, and the call fails; see [`Readiness`] for
    /// [`Readiness::WaitForBreak`] and how each composes with tower's `Balance`, `Buffer` and
    /// `ConcurrencyLimit`).
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
            Err(rejected) => {
                ResponseFuture::refused(rejected, self.admission.pause(), None, classifier)
            }
        }
    }
}

/// The inner service's load behind whether this one would refuse (see [`BreakerLoad`]), so
/// that tower's p2c `Balance` avoids an endpoint whose breaker is open. Put the breaker
/// outside the load measure: `BreakerService<PendingRequests<Endpoint>>`.
impl<S: tower::load::Load, C> tower::load::Load for BreakerService<S, C> {
    type Metric = BreakerLoad<S::Metric>;

    fn load(&self) -> Self::Metric {
        BreakerLoad {
            refusing: self.admission.refusing(),
            inner: self.inner.load(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for BreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", self.admission.breaker())
            .field("refusal_pause", &self.admission.pause())
            .field("readiness", &self.admission.readiness())
            .finish_non_exhaustive()
    }
}

//! What a finished call means to the breaker: [`Outcome`], [`ErrorClass`], [`Verdict`] and
//! classifiers.
//!
//! ```
//! use cutout::classify::{self, ErrorClass, Outcome, Classify};
//!
//! #[derive(Debug)]
//! enum ApiError { Timeout, TooManyRequests, BadRequest }
//!
//! // Errors decide by class; an `Ok` is a success.
//! let by_class = classify::by_error(|e: &ApiError| match e {
//!     ApiError::Timeout => ErrorClass::Transient,
//!     ApiError::TooManyRequests => ErrorClass::Throttled,
//!     ApiError::BadRequest => ErrorClass::Permanent,
//! });
//! assert_eq!(by_class.classify(&Err::<(), _>(ApiError::Timeout)), Outcome::Failure);
//! assert_eq!(by_class.classify(&Err::<(), _>(ApiError::BadRequest)), Outcome::Ignored);
//!
//! // A classifier that also sees `Ok` values: an HTTP 500 inside `Ok` is a failure.
//! let by_status = |r: &Result<u16, ApiError>| match r {
//!     Ok(status) if *status >= 500 => Outcome::Failure,
//!     Ok(_) => Outcome::Success,
//!     Err(_) => Outcome::Failure,
//! };
//! assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
//!
//! // A classifier whose verdict may also be "open for a while": a throttled answer that
//! // says when to come back (an HTTP 429 with `Retry-After`).
//! use std::time::Duration;
//! use cutout::classify::Verdict;
//! let by_verdict = classify::by_verdict(|r: &Result<(u16, u64), ApiError>| match r {
//!     Ok((429, after)) => Verdict::OpenFor(Duration::from_secs(*after)),
//!     Ok(_) => Verdict::Success,
//!     Err(_) => Verdict::Failure,
//! });
//! assert_eq!(by_verdict.verdict(&Ok((429, 7))), Verdict::OpenFor(Duration::from_secs(7)));
//! // What it counts as for the trip window: nothing.
//! assert_eq!(by_verdict.classify(&Ok((429, 7))), Outcome::Ignored);
//! ```
//!
//! # Why a separate verdict
//! [`Outcome`] stays a one-byte value that every consumer of outcomes (the trip window, the
//! permit, the metrics) handles in full, and the healthy path finishes a call by comparing it
//! with [`Outcome::Success`], as before. The rarer answer "open for a while" carries a
//! [`Duration`], which would make every `Outcome` sixteen bytes; it travels as a [`Verdict`]
//! instead, which classifiers produce through [`Classify::verdict`] (by default their
//! outcome) and the breaker's calls and permits take
//! ([`Permit::record_verdict`](crate::Permit::record_verdict)).

use std::time::Duration;

/// What a finished call counts as.
///
/// New outcomes may be added (the enum is `#[non_exhaustive]`): a match outside this crate
/// needs a wildcard arm. That costs a common match little: outcomes are mostly produced (by
/// classifiers) rather than matched, and a match that must place an outcome it does not know
/// says what it means to it (most read it as [`Outcome::Ignored`], evidence of nothing). Inside
/// this crate every match stays exhaustive, so a new outcome is handled wherever the breaker
/// consumes one.
///
/// ```compile_fail,E0004
/// use cutout::Outcome;
///
/// // Refused: a downstream match without a wildcard arm does not compile.
/// fn counts(outcome: Outcome) -> bool {
///     match outcome {
///         Outcome::Success | Outcome::Failure => true,
///         Outcome::Ignored => false,
///     }
/// }
/// ```
///
/// ```
/// use cutout::Outcome;
///
/// fn counts(outcome: Outcome) -> bool {
///     match outcome {
///         Outcome::Success | Outcome::Failure => true,
///         Outcome::Ignored => false,
///         _ => false,
///     }
/// }
/// assert!(counts(Outcome::Failure));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The dependency served the call.
    Success,
    /// Evidence that the dependency is failing.
    Failure,
    /// Evidence of nothing: touches no count, and in half-open gives the probe slot back.
    Ignored,
}

/// The class of an error, for classifiers that sort errors rather than decide outcomes.
///
/// New classes may be added (the enum is `#[non_exhaustive]`): a match outside this crate
/// needs a wildcard arm; [`Outcome::from`] says what any class counts as.
///
/// ```compile_fail,E0004
/// use cutout::ErrorClass;
///
/// // Refused: a downstream match without a wildcard arm does not compile.
/// fn retry(class: ErrorClass) -> bool {
///     match class {
///         ErrorClass::Transient | ErrorClass::Throttled => true,
///         ErrorClass::Permanent => false,
///     }
/// }
/// ```
///
/// ```
/// use cutout::ErrorClass;
///
/// fn retry(class: ErrorClass) -> bool {
///     match class {
///         ErrorClass::Transient | ErrorClass::Throttled => true,
///         ErrorClass::Permanent => false,
///         _ => false,
///     }
/// }
/// assert!(!retry(ErrorClass::Permanent));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The dependency failed and may recover: a [`Outcome::Failure`].
    Transient,
    /// The dependency is up and defending itself (429, 503 with Retry-After):
    /// [`Outcome::Ignored`].
    Throttled,
    /// The caller's fault (a bad request): [`Outcome::Ignored`].
    Permanent,
}

impl From<ErrorClass> for Outcome {
    fn from(class: ErrorClass) -> Self {
        match class {
            ErrorClass::Transient => Outcome::Failure,
            ErrorClass::Throttled | ErrorClass::Permanent => Outcome::Ignored,
        }
    }
}

/// What a classifier decides about a finished call: one of the three [`Outcome`]s, or that
/// the dependency asked to be left alone for a while ([`Verdict::OpenFor`]).
///
/// The breaker's calls ([`Breaker::call_with`](crate::Breaker::call_with) and
/// [`Breaker::call_async_with`](crate::Breaker::call_async_with)) and integrations such as
/// cutout-tower's record the verdict of their classifier; a permit takes one with
/// [`Permit::record_verdict`](crate::Permit::record_verdict).
///
/// ```
/// use std::time::Duration;
/// use cutout::classify::{ErrorClass, Outcome, Verdict};
///
/// assert_eq!(Verdict::from(Outcome::Failure), Verdict::Failure);
/// assert_eq!(Verdict::from(ErrorClass::Throttled), Verdict::Ignored);
/// let back_off = Verdict::OpenFor(Duration::from_secs(7));
/// assert_eq!(back_off.outcome(), Outcome::Ignored, "not counted in the trip window");
/// assert_eq!(back_off.open_for(), Some(Duration::from_secs(7)));
/// assert_eq!(Verdict::OpenFor(Duration::ZERO).open_for(), None, "no time: ignored");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// [`Outcome::Success`].
    Success,
    /// [`Outcome::Failure`].
    Failure,
    /// [`Outcome::Ignored`].
    Ignored,
    /// The dependency is up and asked not to be called for this long (an HTTP 429 or 503 with
    /// `Retry-After`, a gRPC `RESOURCE_EXHAUSTED` with a retry delay): Polly's "the dependency
    /// is defending itself", with a time to come back.
    ///
    /// - Counted as nothing ([`Outcome::Ignored`]): no trip window, consecutive-failure count
    ///   or baseline sees it, as for any [throttled](ErrorClass::Throttled) error.
    /// - It opens the breaker for `min(duration, max_break_duration)` from the call's end,
    ///   without jitter (the dependency named the time; coming back sooner would defy it),
    ///   then the breaker half-opens as after any break. The opening is caused by a call, so
    ///   it raises [`Transition::Opened`](crate::Transition::Opened) with
    ///   [`OpenReason::RetryAfter`](crate::OpenReason::RetryAfter) and the break it serves,
    ///   and the snapshot shows it as any opening (opened-at, current break). It does not grow
    ///   the break: the consecutive opens stay as they were, so a probe that fails afterwards
    ///   re-opens with the break the breaker's own openings have reached (the first break,
    ///   from closed).
    /// - From closed it passes the [open gate](crate::BreakerBuilder::open_gate), like a trip
    ///   (a gate that refuses keeps the breaker closed and the call counts as ignored). A
    ///   half-open probe or a recovering ramp call told to back off re-opens the breaker for
    ///   the duration asked. A call from before the last transition (an older generation),
    ///   and any call of a disabled breaker or let through by a shadow-mode one, changes
    ///   nothing, as every outcome of such calls.
    /// - [`Duration::ZERO`] is [`Verdict::Ignored`]. Any duration is accepted: beyond the
    ///   maximum break it is the maximum break.
    OpenFor(Duration),
}

impl Verdict {
    /// What the verdict counts as in the trip window and the counts: [`Verdict::OpenFor`] as
    /// [`Outcome::Ignored`], the others as their outcome.
    #[inline]
    pub const fn outcome(self) -> Outcome {
        match self {
            Verdict::Success => Outcome::Success,
            Verdict::Failure => Outcome::Failure,
            Verdict::Ignored | Verdict::OpenFor(_) => Outcome::Ignored,
        }
    }

    /// How long the verdict asks the breaker to stay open (before the cap of the maximum
    /// break): `Some` for a [`Verdict::OpenFor`] of more than no time, `None` otherwise.
    #[inline]
    pub const fn open_for(self) -> Option<Duration> {
        match self {
            Verdict::OpenFor(duration) if !duration.is_zero() => Some(duration),
            _ => None,
        }
    }
}

impl From<Outcome> for Verdict {
    #[inline]
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Success => Verdict::Success,
            Outcome::Failure => Verdict::Failure,
            Outcome::Ignored => Verdict::Ignored,
        }
    }
}

impl From<ErrorClass> for Verdict {
    #[inline]
    fn from(class: ErrorClass) -> Self {
        Outcome::from(class).into()
    }
}

/// Decides the [`Outcome`] of a call's result, and its [`Verdict`].
///
/// Any `Fn(&Result<T, E>) -> Outcome` is a classifier; for one that answers verdicts, see
/// [`by_verdict`].
pub trait Classify<T, E> {
    /// The outcome of `result`: what it counts as.
    fn classify(&self, result: &Result<T, E>) -> Outcome;

    /// The verdict on `result`, which the breaker records: by default its
    /// [outcome](Classify::classify). A classifier that may answer [`Verdict::OpenFor`]
    /// overrides it, and keeps [`classify`](Classify::classify) answering what the verdict
    /// counts as ([`Verdict::outcome`]), which is what readers of outcomes alone (a retry
    /// policy, say) see.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::classify::{Classify, Outcome, Verdict};
    ///
    /// /// `Err(Some(d))`: the server asked to come back after `d`.
    /// struct Throttling;
    ///
    /// impl<T> Classify<T, Option<Duration>> for Throttling {
    ///     fn classify(&self, result: &Result<T, Option<Duration>>) -> Outcome {
    ///         self.verdict(result).outcome()
    ///     }
    ///     fn verdict(&self, result: &Result<T, Option<Duration>>) -> Verdict {
    ///         match result {
    ///             Ok(_) => Verdict::Success,
    ///             Err(Some(after)) => Verdict::OpenFor(*after),
    ///             Err(None) => Verdict::Failure,
    ///         }
    ///     }
    /// }
    ///
    /// let asked = Err::<(), _>(Some(Duration::from_secs(3)));
    /// assert_eq!(Throttling.verdict(&asked), Verdict::OpenFor(Duration::from_secs(3)));
    /// assert_eq!(Throttling.classify(&asked), Outcome::Ignored);
    /// // Any classifier of outcomes has the verdict of its outcome.
    /// let by_outcome = |r: &Result<(), ()>| if r.is_ok() { Outcome::Success } else { Outcome::Failure };
    /// assert_eq!(by_outcome.verdict(&Err(())), Verdict::Failure);
    /// ```
    #[inline]
    fn verdict(&self, result: &Result<T, E>) -> Verdict {
        self.classify(result).into()
    }
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

/// A classifier from an error-class function: `Ok` is a success, `Err(e)` is `class(e)`.
pub fn by_error<E, F>(class: F) -> ByError<F>
where
    F: Fn(&E) -> ErrorClass,
{
    ByError(class)
}

/// See [`by_error`].
#[derive(Debug, Clone, Copy)]
pub struct ByError<F>(F);

impl<T, E, F> Classify<T, E> for ByError<F>
where
    F: Fn(&E) -> ErrorClass,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(error) => (self.0)(error).into(),
        }
    }
}

/// A classifier from a predicate: `Ok` is a success, an error matching `counts` a failure,
/// any other error ignored (resilience4j's `recordOn` / `ignoreOn`).
pub fn failure_when<E, F>(counts: F) -> FailureWhen<F>
where
    F: Fn(&E) -> bool,
{
    FailureWhen(counts)
}

/// See [`failure_when`].
#[derive(Debug, Clone, Copy)]
pub struct FailureWhen<F>(F);

impl<T, E, F> Classify<T, E> for FailureWhen<F>
where
    F: Fn(&E) -> bool,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(error) if (self.0)(error) => Outcome::Failure,
            Err(_) => Outcome::Ignored,
        }
    }
}

/// A classifier from a verdict function: `verdict(result)`, which may answer
/// [`Verdict::OpenFor`]; as a [classification](Classify::classify), what that verdict counts as.
///
/// ```
/// use std::time::Duration;
/// use cutout::classify::{self, Verdict};
/// use cutout::{Breaker, RejectReason, clock::ManualClock};
///
/// #[derive(Debug)]
/// enum Reply { Ok, Busy { retry_in: Duration } }
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder("quotes").clock(clock.clone()).build();
/// let classifier = classify::by_verdict(|r: &Result<Reply, ()>| match r {
///     Ok(Reply::Ok) => Verdict::Success,
///     Ok(Reply::Busy { retry_in }) => Verdict::OpenFor(*retry_in),
///     Err(()) => Verdict::Failure,
/// });
/// let busy = Reply::Busy { retry_in: Duration::from_secs(4) };
/// assert!(breaker.call_with(&classifier, || Ok(busy)).is_ok());
///
/// let refused = breaker.call_with(&classifier, || Ok(Reply::Ok)).unwrap_err();
/// let refused = refused.rejection().unwrap();
/// assert_eq!(refused.reason(), RejectReason::Open);
/// assert_eq!(refused.retry_after(), Some(Duration::from_secs(4)));
/// clock.advance(Duration::from_secs(4));
/// assert!(breaker.try_acquire().unwrap().is_probe());
/// ```
pub fn by_verdict<T, E, F>(verdict: F) -> ByVerdict<F>
where
    F: Fn(&Result<T, E>) -> Verdict,
{
    ByVerdict(verdict)
}

/// See [`by_verdict`].
#[derive(Debug, Clone, Copy)]
pub struct ByVerdict<F>(F);

impl<T, E, F> Classify<T, E> for ByVerdict<F>
where
    F: Fn(&Result<T, E>) -> Verdict,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        (self.0)(result).outcome()
    }

    fn verdict(&self, result: &Result<T, E>) -> Verdict {
        (self.0)(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_outcomes() {
        assert_eq!(Outcome::from(ErrorClass::Transient), Outcome::Failure);
        assert_eq!(Outcome::from(ErrorClass::Throttled), Outcome::Ignored);
        assert_eq!(Outcome::from(ErrorClass::Permanent), Outcome::Ignored);
    }

    #[test]
    fn verdicts_count_as_their_outcome_and_only_open_for_asks_for_time() {
        let second = Duration::from_secs(1);
        for outcome in [Outcome::Success, Outcome::Failure, Outcome::Ignored] {
            let verdict = Verdict::from(outcome);
            assert_eq!(verdict.outcome(), outcome);
            assert_eq!(verdict.open_for(), None);
            assert_eq!(
                DefaultClassifier.verdict(&Ok::<(), ()>(())),
                Verdict::Success
            );
        }
        assert_eq!(Verdict::OpenFor(second).outcome(), Outcome::Ignored);
        assert_eq!(Verdict::OpenFor(second).open_for(), Some(second));
        assert_eq!(Verdict::OpenFor(Duration::ZERO).open_for(), None);
        assert_eq!(
            Verdict::OpenFor(Duration::MAX).open_for(),
            Some(Duration::MAX)
        );
        assert_eq!(Verdict::from(ErrorClass::Transient), Verdict::Failure);
        let by = by_verdict(|r: &Result<u64, ()>| match r {
            Ok(0) => Verdict::Success,
            Ok(s) => Verdict::OpenFor(Duration::from_secs(*s)),
            Err(()) => Verdict::Failure,
        });
        assert_eq!(by.verdict(&Ok(3)), Verdict::OpenFor(3 * second));
        assert_eq!(by.classify(&Ok(3)), Outcome::Ignored);
        assert_eq!(by.classify(&Err(())), Outcome::Failure);
        // A classifier of errors has the verdict of its outcome.
        let by_class = by_error(|_: &()| ErrorClass::Throttled);
        assert_eq!(by_class.verdict(&Err::<(), _>(())), Verdict::Ignored);
    }

    #[test]
    fn predicate_records_only_matching_errors() {
        let classifier = failure_when(|e: &i32| *e >= 500);
        assert_eq!(classifier.classify(&Ok::<(), i32>(())), Outcome::Success);
        assert_eq!(classifier.classify(&Err::<(), i32>(503)), Outcome::Failure);
        assert_eq!(classifier.classify(&Err::<(), i32>(404)), Outcome::Ignored);
        assert_eq!(
            DefaultClassifier.classify(&Err::<(), i32>(404)),
            Outcome::Failure
        );
    }
}

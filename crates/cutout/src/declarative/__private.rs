//! What the generated code calls: not public API (hidden from the docs, may change with the
//! macro). Each call goes through the core's own (`Registry::breaker`, `Breaker::call_with`,
//! `call_async_with`, `call_async_timeout_with`); nothing here re-implements a breaker's step.

use std::time::Duration;

use super::DeclareError;
#[cfg(feature = "tokio")]
use super::TimedOut;
use crate::classify::Classify;
use crate::{Breaker, Error, OwnedPermit, Registry, Rejected, State};

/// A settings key's value as the attribute wrote it (checked at compile time).
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// A whole number.
    Int(i128),
    /// A number with a fraction.
    Float(f64),
    /// A string.
    Str(&'static str),
    /// `true` or `false`.
    Bool(bool),
}

/// The breaker of one `#[breaker]` method: its settings read from `keys` by the
/// configuration's readers, merged under the registry's configuration, then asked of the
/// registry (shared by id).
pub fn breaker(
    registry: &Registry,
    id: &str,
    declared_by: &str,
    keys: &[(&str, Value)],
) -> Result<Breaker, DeclareError> {
    let settings =
        crate::config::declared::declared_settings(registry.config(), id, declared_by, keys)
            .map_err(DeclareError::settings)?;
    registry
        .declare(id, settings, declared_by)
        .map_err(|(error, existing)| DeclareError::conflict(error, existing, declared_by))
}

/// How a refusal becomes the method's error: `From<cutout::Rejected>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry a refusal: a #[breaker] method returning `Result<T, {Self}>` needs `impl From<cutout::Rejected> for {Self}`",
    label = "no `From<cutout::Rejected>` for `{Self}`",
    note = "or give the attribute `rejected = path::to::fn(cutout::Rejected) -> {Self}`, or a `fallback` that answers refusals"
)]
pub trait RefusalInto {
    /// The refusal as this error.
    fn from_rejected(rejected: Rejected) -> Self;
}

impl<E: From<Rejected>> RefusalInto for E {
    #[inline]
    fn from_rejected(rejected: Rejected) -> Self {
        E::from(rejected)
    }
}

/// A refusal as the method's error.
#[inline]
pub fn refused<E: RefusalInto>(rejected: Rejected) -> E {
    E::from_rejected(rejected)
}

/// Whether the breaker refuses calls now: a retry does not wait its backoff for a refusal.
/// A breaker in shadow mode refuses nothing whatever its state (it only counts what it would
/// have refused), so its retries keep their backoff.
fn refusing(breaker: &Breaker) -> bool {
    matches!(breaker.state(), State::Open | State::Isolated) && !breaker.is_shadow()
}

/// A sync retry outside the breaker: up to `attempts` calls of `attempt` (each one call
/// through the breaker, recorded); a refusal is returned at once and never retried; after a
/// failure that opened the breaker the next attempt is made without waiting, and is refused.
/// The backoff waits on the breaker's clock ([`Clock::sleep`](crate::clock::Clock::sleep)).
pub fn retry<T, E>(
    breaker: &Breaker,
    attempts: u32,
    backoff: Duration,
    mut attempt: impl FnMut() -> Result<T, Error<E>>,
) -> Result<T, Error<E>> {
    let mut made = 1;
    loop {
        match attempt() {
            Err(Error::Inner(_)) if made < attempts => {
                if !backoff.is_zero() && !refusing(breaker) {
                    // On the breaker's clock: a ManualClock's test waits no real time.
                    breaker.shared.hot.clock.sleep(backoff);
                }
                made += 1;
            }
            other => return other,
        }
    }
}

/// An async retry outside the breaker, as [`retry`] (feature `tokio`: the backoff waits on
/// tokio's timer).
#[cfg(feature = "tokio")]
pub async fn retry_async<T, E, F>(
    breaker: &Breaker,
    attempts: u32,
    backoff: Duration,
    mut attempt: impl FnMut() -> F,
) -> Result<T, Error<E>>
where
    F: Future<Output = Result<T, Error<E>>>,
{
    let mut made = 1;
    loop {
        match attempt().await {
            Err(Error::Inner(_)) if made < attempts => {
                if !backoff.is_zero() && !refusing(breaker) {
                    tokio::time::sleep(backoff).await;
                }
                made += 1;
            }
            other => return other,
        }
    }
}

/// An `impl Future` method's call once its breaker has answered: the permit was asked for
/// when the method was called, and the delegate's method ran (giving its future) only when it
/// was granted, so that a refused call never reaches the delegate and the call is timed from
/// its start. The permit is owned: the returned future borrows nothing of the wrapper.
pub async fn admitted<T, E, C, F>(
    admitted: Result<(OwnedPermit, F), Rejected>,
    classifier: &C,
) -> Result<T, Error<E>>
where
    C: Classify<T, E> + ?Sized,
    F: Future<Output = Result<T, E>>,
{
    let (permit, future) = admitted?;
    let result = future.await;
    permit.record_verdict(classifier.verdict(&result));
    result.map_err(Error::Inner)
}

/// [`admitted`] with a timeout inside the breaker (feature `tokio`): a call that runs out of
/// time is cancelled and its error, `E::from(TimedOut)`, is judged by the classifier like
/// any other (a failure by default; an `ignore` that names it makes it ignored, as seed 001's
/// `ignoreOn` does for timeouts).
#[cfg(feature = "tokio")]
pub async fn admitted_timeout<T, E, C, F>(
    admitted: Result<(OwnedPermit, F), Rejected>,
    classifier: &C,
    timeout: Duration,
) -> Result<T, Error<E>>
where
    E: From<TimedOut>,
    C: Classify<T, E> + ?Sized,
    F: Future<Output = Result<T, E>>,
{
    let (permit, future) = admitted?;
    let result = tokio::time::timeout(timeout, future)
        .await
        .unwrap_or_else(|_| Err(E::from(TimedOut::new(timeout))));
    permit.record_verdict(classifier.verdict(&result));
    result.map_err(Error::Inner)
}

//! An attempt timeout the breaker counts (feature `tokio`): [`Breaker::call_async_timeout`].
//!
//! A timeout wrapped around a breaker's call from outside (`tokio::time::timeout(d,
//! breaker.call_async(f))`) cancels the call's future: its permit is dropped with no outcome,
//! so a dependency that hangs is never counted and the breaker stays closed however many calls
//! hang. The timeout here runs inside: a call still running at its deadline is cancelled and
//! recorded as a failure (timed at the deadline, so slow too where calls are timed), and the
//! caller gets [`AttemptError::Elapsed`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::classify::{Classify, DefaultClassifier};
use crate::{Breaker, Error};

/// The error of a call run under an attempt timeout: it ran out of time, or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError<E> {
    /// The call was still running when the attempt timeout (this long) ran out: cancelled,
    /// and counted as a failure.
    Elapsed(Duration),
    /// The call returned this error.
    Failed(E),
}

impl<E> AttemptError<E> {
    /// Whether the attempt ran out of time.
    pub fn is_elapsed(&self) -> bool {
        matches!(self, AttemptError::Elapsed(_))
    }

    /// The call's own error, if it returned one.
    pub fn into_failed(self) -> Option<E> {
        match self {
            AttemptError::Failed(e) => Some(e),
            AttemptError::Elapsed(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for AttemptError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptError::Elapsed(after) => {
                write!(
                    f,
                    "attempt timed out after {}",
                    crate::HumanDuration(*after)
                )
            }
            AttemptError::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for AttemptError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttemptError::Failed(e) => Some(e),
            AttemptError::Elapsed(_) => None,
        }
    }
}

impl Breaker {
    /// Awaits `future` through the breaker with an attempt timeout of `timeout`, on tokio's
    /// timer: a call still running then is cancelled and **counted as a failure** (the
    /// difference from wrapping [`Breaker::call_async`] in `tokio::time::timeout`, which
    /// cancels the call unrecorded). `Ok` is a success and `Err` a failure, as for
    /// [`Breaker::call_async`]; a refused call drops `future` unpolled. Must run inside a tokio
    /// runtime with the time driver enabled.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::timeout::AttemptError;
    /// use cutout::{Breaker, Error, Settings, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), cutout::ConfigError> {
    /// let breaker = Breaker::new("search", Settings::builder().consecutive_failures(Some(5)).build()?);
    /// for _ in 0..5 {
    ///     let hung = std::future::pending::<Result<(), std::io::Error>>();
    ///     let result = breaker.call_async_timeout(Duration::from_secs(2), hung).await;
    ///     assert!(matches!(result, Err(Error::Inner(AttemptError::Elapsed(_)))));
    /// }
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async_timeout<T, E, F>(
        &self,
        timeout: Duration,
        future: F,
    ) -> Result<T, Error<AttemptError<E>>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_async_timeout_with(&DefaultClassifier, timeout, future)
            .await
    }

    /// Like [`Breaker::call_async_timeout`], with `classifier` deciding what a result that
    /// came in time means (its [verdict](Classify::verdict)); a call that ran out of time is a
    /// failure whatever the classifier would say.
    pub async fn call_async_timeout_with<T, E, C, F>(
        &self,
        classifier: &C,
        timeout: Duration,
        future: F,
    ) -> Result<T, Error<AttemptError<E>>>
    where
        C: Classify<T, E> + ?Sized,
        F: Future<Output = Result<T, E>>,
    {
        let permit = self.try_acquire()?;
        match tokio::time::timeout(timeout, future).await {
            Ok(result) => {
                permit.record_verdict(classifier.verdict(&result));
                result.map_err(|e| Error::Inner(AttemptError::Failed(e)))
            }
            Err(_) => {
                permit.failure();
                Err(Error::Inner(AttemptError::Elapsed(timeout)))
            }
        }
    }
}

//! [`Error`]: the error of a call through a breaker service, refused or failed.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use cutout::Rejected;

/// A boxed error, tower's common currency between layers.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why a [`BreakerRetry`](crate::retry::BreakerRetry) did not retry a failed call. The names
/// from [`RetryStop::as_str`] are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryStop {
    /// The breaker refused the attempt; a refusal is never retried (`"refused"`).
    Refused,
    /// The attempt left the breaker open (or isolated): retrying would only be refused
    /// (`"breaker_open"`).
    BreakerOpen,
    /// The retry budget had nothing left (`"budget_exhausted"`). The breaker did not refuse.
    BudgetExhausted,
    /// What is left before the request's deadline is shorter than the breaker's normal latency
    /// (or nothing is left): the attempt could not finish in time (`"deadline"`).
    Deadline,
    /// The policy's maximum number of retries was reached (`"attempts"`).
    Attempts,
    /// The request may not be sent twice: its method is not idempotent (RFC 9110 §9.2.2) and
    /// the caller did not mark it [`RetrySafe`](crate::retry::RetrySafe)
    /// (`"not_idempotent"`).
    NotIdempotent,
}

impl RetryStop {
    /// The stable name of the reason.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryStop::Refused => "refused",
            RetryStop::BreakerOpen => "breaker_open",
            RetryStop::BudgetExhausted => "budget_exhausted",
            RetryStop::Deadline => "deadline",
            RetryStop::Attempts => "attempts",
            RetryStop::NotIdempotent => "not_idempotent",
        }
    }
}

impl fmt::Display for RetryStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of a call through a breaker service: the breaker refused it, or the inner service
/// failed.
///
/// An opaque type in hyper's style: ask with [`Error::is_rejected`], [`Error::rejection`],
/// [`Error::is_timeout`], take the inner error with [`Error::into_inner`]. It is
/// `Send + Sync + 'static` and implements [`std::error::Error`], so it boxes into a
/// [`BoxError`] for outer tower layers; [`Error::find`] digs it back out of a chain.
///
/// Chosen over an enum so that variants (a retry stop reason, more kinds) can be added without
/// breaking callers, and so that every breaker service in a stack has one error type whatever
/// the inner service's error is. A refusal is stored inline: making one allocates nothing. An
/// inner error is boxed (tower's layers box theirs anyway).
pub struct Error {
    kind: Kind,
    retry_stop: Option<RetryStop>,
    /// What a refusal is called before people outside (a refusal body), when the breaker's id
    /// is not for them: a keyed service's label.
    public: Option<Arc<str>>,
}

enum Kind {
    Rejected(Rejected),
    Inner(BoxError),
}

impl Error {
    /// A refusal.
    pub fn rejected(rejected: Rejected) -> Error {
        Error {
            kind: Kind::Rejected(rejected),
            retry_stop: None,
            public: None,
        }
    }

    /// A refusal whose breaker is called `label` before people outside: a refusal body
    /// ([`respond::error_response`](crate::respond::error_response)) names the label, never
    /// the breaker's id. Keyed services refuse so (a per-host key's id is the upstream's
    /// internal URL); the `Display` for logs still names the id.
    pub fn rejected_as(rejected: Rejected, label: Arc<str>) -> Error {
        Error {
            public: Some(label),
            ..Error::rejected(rejected)
        }
    }

    /// The inner service's error.
    pub fn inner(error: impl Into<BoxError>) -> Error {
        Error {
            kind: Kind::Inner(error.into()),
            retry_stop: None,
            public: None,
        }
    }

    /// The label a refusal is shown under to people outside, when it has one (a keyed
    /// service's: see [`Error::rejected_as`]).
    pub fn public_label(&self) -> Option<&str> {
        self.public.as_deref()
    }

    /// Whether the breaker refused the call (the inner service was not called).
    pub fn is_rejected(&self) -> bool {
        matches!(self.kind, Kind::Rejected(_))
    }

    /// The refusal: reason, retry-after and the breaker's id.
    pub fn rejection(&self) -> Option<&Rejected> {
        match &self.kind {
            Kind::Rejected(rejected) => Some(rejected),
            Kind::Inner(_) => None,
        }
    }

    /// Whether the inner service failed with tower's timeout error
    /// ([`tower::timeout::error::Elapsed`]), anywhere in its source chain.
    pub fn is_timeout(&self) -> bool {
        match &self.kind {
            Kind::Inner(inner) => is_elapsed(&**inner),
            Kind::Rejected(_) => false,
        }
    }

    /// The inner service's error, if it ran and failed.
    pub fn get_inner(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.kind {
            Kind::Inner(inner) => Some(&**inner),
            Kind::Rejected(_) => None,
        }
    }

    /// Takes the inner service's error; `None` for a refusal.
    pub fn into_inner(self) -> Option<BoxError> {
        match self.kind {
            Kind::Inner(inner) => Some(inner),
            Kind::Rejected(_) => None,
        }
    }

    /// Why a retry policy stopped retrying this call, when it was the last attempt of a
    /// [`BreakerRetry`](crate::retry::BreakerRetry).
    pub fn retry_stop(&self) -> Option<RetryStop> {
        self.retry_stop
    }

    /// Whether a retry policy gave up because its budget was exhausted (not the breaker).
    pub fn is_budget_exhausted(&self) -> bool {
        self.retry_stop == Some(RetryStop::BudgetExhausted)
    }

    pub(crate) fn set_retry_stop(&mut self, stop: RetryStop) {
        self.retry_stop = Some(stop);
    }

    /// Finds an [`Error`] in `error` or its source chain (an outer layer may have boxed it).
    pub fn find<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Error> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(found) = error.downcast_ref::<Error>() {
                return Some(found);
            }
            next = error.source();
        }
        None
    }
}

/// Whether `error` or a source of it is tower's timeout error.
pub(crate) fn is_elapsed(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<tower::timeout::error::Elapsed>() {
            return true;
        }
        next = error.source();
    }
    false
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        match &self.kind {
            Kind::Rejected(rejected) => d.field("rejected", rejected),
            Kind::Inner(inner) => d.field("inner", inner),
        };
        if let Some(stop) = self.retry_stop {
            d.field("retry_stop", &stop);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Rejected(rejected) => {
                f.write_str(&crate::respond::refusal_message(rejected, None))
            }
            Kind::Inner(inner) => fmt::Display::fmt(inner, f),
        }?;
        if let Some(stop) = self.retry_stop {
            write!(f, " (not retried: {stop})")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.kind {
            Kind::Rejected(rejected) => Some(rejected),
            Kind::Inner(inner) => Some(&**inner),
        }
    }
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::rejected(rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_and_small() {
        assert_send_sync::<Error>();
        // A refusal is stored inline (no allocation); the inline breaker id dominates.
        assert!(
            std::mem::size_of::<Error>() <= 96,
            "{}",
            std::mem::size_of::<Error>()
        );
    }

    #[test]
    fn inner_errors_are_found_through_boxes() {
        let error = Error::inner(tower::timeout::error::Elapsed::new());
        assert!(error.is_timeout());
        assert!(!error.is_rejected());
        let boxed: BoxError = Box::new(error);
        let found = Error::find(&*boxed).expect("found in the box");
        assert!(found.is_timeout());
        assert!(found.rejection().is_none());
        let inner = Error::inner("plain").into_inner().unwrap();
        assert_eq!(inner.to_string(), "plain");
        assert!(!Error::inner("plain").is_timeout());
    }
}

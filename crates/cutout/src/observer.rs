//! Call observers: code of the user's that sees every call a breaker counts or refuses.
//!
//! An observer is registered when the breaker is built
//! ([`BreakerBuilder::observer`](crate::BreakerBuilder::observer)) and is told of each call as
//! it finishes or is refused: a success, a failure, an ignored outcome, a verdict asking to
//! open for a while, or a refusal with its reason, with whether it was slow and how long it
//! took when the breaker timed it. Transitions are not calls: they reach listeners
//! ([`Breaker::subscribe`](crate::Breaker::subscribe)).
//!
//! # What it costs
//! With no observer registered, nothing: the list is fixed when the breaker is built, so the
//! breaker knows it has none and its healthy path is the one it would be without this module
//! (the harness's healthy and default rows, BENCHMARKS.md). With one, every call it sees is a
//! call of the observer, on the caller's thread, and the healthy call of a count window full
//! of successes can no longer be the two loads that skip all counting: an observer is one more
//! consumer of a success, so the breaker never publishes its *still* word, and each success
//! goes through the path that counts it off the lock.
//!
//! # What it sees
//! Every call admitted while closed, half-open or recovering, once its outcome is recorded
//! (a permit dropped without an outcome is no call), and every refusal. A disabled breaker
//! counts nothing, and its observers see nothing of it. A shadow-mode breaker refuses
//! nothing, so its observers see no refusals (its snapshot counts what it would have refused).
//! An observer must be quick and must not block: it runs on the caller's thread, inside the
//! call. A panic in it is caught and does not reach the caller or the breaker.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use cutout::observer::{Call, CallKind};
//! use cutout::{Breaker, Settings};
//!
//! let failures = Arc::new(AtomicU64::new(0));
//! let seen = Arc::clone(&failures);
//! let breaker = Breaker::builder("ledger")
//!     .settings(Settings::builder().consecutive_failures(Some(2)).build()?)
//!     .observer(move |call: &Call<'_>| {
//!         if call.kind == CallKind::Failure {
//!             seen.fetch_add(1, Ordering::Relaxed);
//!         }
//!     })
//!     .build();
//! let _ = breaker.call(|| Err::<(), _>("timeout"));
//! let _ = breaker.call(|| Err::<(), _>("timeout"));
//! let _ = breaker.call(|| Ok::<_, &str>(()));  // refused: the breaker is open
//! assert_eq!(failures.load(Ordering::Relaxed), 2);
//! # Ok::<(), cutout::ConfigError>(())
//! ```

use std::time::Duration;

use crate::BreakerId;
use crate::error::RejectReason;

/// What happened to one call. New kinds may be added (the enum is `#[non_exhaustive]`):
/// match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallKind {
    /// A success.
    Success,
    /// A failure.
    Failure,
    /// An outcome the breaker does not count (a caller's error, a throttled answer).
    Ignored,
    /// A verdict asking the breaker to open for this long
    /// ([`Verdict::OpenFor`](crate::classify::Verdict::OpenFor), before the breaker's cap).
    OpenFor(Duration),
    /// Refused, without being run.
    Refused(RejectReason),
}

impl CallKind {
    /// A stable lower-case name: `"success"`, `"failure"`, `"ignored"`, `"open_for"`,
    /// `"refused"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            CallKind::Success => "success",
            CallKind::Failure => "failure",
            CallKind::Ignored => "ignored",
            CallKind::OpenFor(_) => "open_for",
            CallKind::Refused(_) => "refused",
        }
    }
}

/// One call, as an observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Call<'a> {
    /// The breaker's id.
    pub breaker: &'a BreakerId,
    /// What happened.
    pub kind: CallKind,
    /// How long it ran, when the breaker timed it: every call when an absolute slow-call
    /// threshold is set, probes and ramp calls always, and on an adaptive breaker every call
    /// at low traffic and one in eight above it. `None` for untimed calls and refusals.
    pub duration: Option<Duration>,
    /// Whether it was slow (timed, and over the slow threshold in force).
    pub slow: bool,
}

/// Sees every call a breaker counts or refuses (see the [module docs](self)). Implemented for
/// every `Fn(&Call<'_>) + Send + Sync + 'static`.
pub trait CallObserver: Send + Sync + 'static {
    /// Told of one call, on the caller's thread, as it finishes or is refused.
    fn on_call(&self, call: &Call<'_>);
}

impl<F> CallObserver for F
where
    F: Fn(&Call<'_>) + Send + Sync + 'static,
{
    fn on_call(&self, call: &Call<'_>) {
        self(call);
    }
}

/// A breaker's observers, fixed when it is built.
pub(crate) struct Observers(Box<[std::sync::Arc<dyn CallObserver>]>);

impl Observers {
    /// The list, or `None` when it is empty (so that the breaker knows it has none).
    pub(crate) fn of(
        list: Vec<std::sync::Arc<dyn CallObserver>>,
    ) -> Option<std::sync::Arc<Observers>> {
        (!list.is_empty()).then(|| std::sync::Arc::new(Observers(list.into_boxed_slice())))
    }

    /// Tells every observer, each contained (see `contained.rs`).
    pub(crate) fn tell(&self, call: &Call<'_>) {
        for observer in self.0.iter() {
            crate::contained::contained(|| observer.on_call(call));
        }
    }
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} observers", self.0.len())
    }
}

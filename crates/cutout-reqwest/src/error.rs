//! [`Refused`]: the error of a request the breaker refused, and [`rejected`] to find it.

use std::error::Error as StdError;
use std::fmt;

use cutout::Rejected;

/// The error of a request that a breaker refused: the request was not sent.
///
/// The middleware returns it as `reqwest_middleware::Error::Middleware(anyhow::Error)`; get
/// the [`Rejected`] back with [`rejected`] (or downcast the `anyhow::Error` to `Refused`).
/// It carries the refusal's reason, its retry-after where known, and the id of the breaker
/// that refused (for per-host breakers, `scheme://host:port`).
///
/// Its `Display` is the whole story (`request not sent: breaker 'http://127.0.0.1:8080' is
/// refusing calls (open); retry after 15s`: the wording of every refusal of cutout-tower and
/// this crate, with the time in humantime style), so it has no
/// [`source`](StdError::source): printing the `reqwest_middleware::Error` with `{}` shows the
/// reason, and `{:#}` does not repeat it.
///
/// ```
/// use std::time::Duration;
/// use cutout::{Breaker, RejectReason, Settings};
/// use cutout_reqwest::{Refused, rejected};
///
/// let breaker = Breaker::new("api", Settings::default());
/// breaker.open_for(Duration::from_secs(30));
/// let refusal = breaker.try_acquire().unwrap_err();
///
/// // What the middleware returns for it:
/// let error: reqwest_middleware::Error = Refused::new(refusal).into();
/// let found = rejected(&error).expect("a refusal");
/// assert_eq!(found.reason(), RejectReason::Open);
/// assert_eq!(found.breaker().as_str(), "api");
/// assert!(error.to_string().starts_with("request not sent: breaker 'api' is refusing calls (open)"));
///
/// let refused = match error {
///     reqwest_middleware::Error::Middleware(error) => error.downcast::<Refused>().unwrap(),
///     reqwest_middleware::Error::Reqwest(_) => unreachable!(),
/// };
/// assert_eq!(refused.into_rejected().reason(), RejectReason::Open);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Refused {
    rejected: Rejected,
}

impl Refused {
    /// The error of a request `rejected` refused.
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::Refused;
    ///
    /// let breaker = Breaker::new("api", Settings::default());
    /// breaker.isolate();
    /// let refused = Refused::new(breaker.try_acquire().unwrap_err());
    /// assert_eq!(refused.to_string(), "request not sent: breaker 'api' is refusing calls (isolated)");
    /// ```
    pub fn new(rejected: Rejected) -> Refused {
        Refused { rejected }
    }

    /// The refusal: its reason, retry-after and breaker id.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Jitter, RejectReason, Settings, clock::ManualClock};
    /// use cutout_reqwest::Refused;
    ///
    /// let breaker = Breaker::builder("api")
    ///     .settings(Settings::builder().jitter(Jitter::None).build()?)
    ///     .clock(ManualClock::new())
    ///     .build();
    /// breaker.open_for(Duration::from_secs(30));
    /// let refused = Refused::new(breaker.try_acquire().unwrap_err());
    /// assert_eq!(refused.rejected().reason(), RejectReason::Open);
    /// assert_eq!(refused.rejected().retry_after(), Some(Duration::from_secs(30)));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn rejected(&self) -> &Rejected {
        &self.rejected
    }

    /// Takes the refusal out.
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::Refused;
    ///
    /// let breaker = Breaker::new("api", Settings::default());
    /// breaker.isolate();
    /// let rejected = Refused::new(breaker.try_acquire().unwrap_err()).into_rejected();
    /// assert_eq!(rejected.breaker().as_str(), "api");
    /// ```
    pub fn into_rejected(self) -> Rejected {
        self.rejected
    }
}

impl fmt::Debug for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Refused").field(&self.rejected).finish()
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The one wording of refusals (cutout-tower's `respond::refusal_message`).
        write!(
            f,
            "request not sent: {}",
            cutout_tower::respond::refusal_message(&self.rejected, None)
        )
    }
}

impl StdError for Refused {}

impl From<Rejected> for Refused {
    fn from(rejected: Rejected) -> Self {
        Refused::new(rejected)
    }
}

/// A refusal as the middleware returns it: `reqwest_middleware::Error::Middleware`.
impl From<Refused> for reqwest_middleware::Error {
    fn from(refused: Refused) -> Self {
        reqwest_middleware::Error::Middleware(anyhow::Error::new(refused))
    }
}

/// The refusal in `error`, if a breaker refused the request (it was then not sent).
///
/// It looks through the error and its sources (an `anyhow` context added by another
/// middleware included) for a [`Refused`], a bare [`Rejected`], or a
/// [`cutout_tower::Error`] that is a refusal; `None` when the request was sent, or failed
/// for another reason.
///
/// ```
/// use cutout::Settings;
/// use cutout_reqwest::{BreakerMiddleware, KeyedBreakers, rejected};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let hosts = KeyedBreakers::builder(Settings::default()).build();
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(BreakerMiddleware::per_host(hosts.clone()))
///     .build();
///
/// let key = cutout_reqwest::host_key(&"http://127.0.0.1:9/".parse().unwrap());
/// hosts.isolate(&key); // an operator takes the host out
/// let error = client.get("http://127.0.0.1:9/").send().await.unwrap_err();
/// let refusal = rejected(&error).expect("refused, not sent");
/// assert_eq!(refusal.reason().as_str(), "isolated");
/// assert_eq!(refusal.breaker().as_str(), "http://127.0.0.1:9");
/// # }
/// ```
pub fn rejected(error: &reqwest_middleware::Error) -> Option<&Rejected> {
    match error {
        reqwest_middleware::Error::Middleware(error) => error.chain().find_map(rejection_of),
        reqwest_middleware::Error::Reqwest(error) => {
            let mut next: Option<&(dyn StdError + 'static)> = Some(error);
            while let Some(error) = next {
                if let Some(rejected) = rejection_of(error) {
                    return Some(rejected);
                }
                next = error.source();
            }
            None
        }
    }
}

/// The refusal `error` itself is, if any.
fn rejection_of<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Rejected> {
    if let Some(refused) = error.downcast_ref::<Refused>() {
        return Some(refused.rejected());
    }
    if let Some(rejected) = error.downcast_ref::<Rejected>() {
        return Some(rejected);
    }
    error
        .downcast_ref::<cutout_tower::Error>()
        .and_then(cutout_tower::Error::rejection)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cutout::{Breaker, RejectReason, Settings};

    use super::*;

    fn refusal() -> Rejected {
        let breaker = Breaker::new("api", Settings::default());
        breaker.isolate();
        breaker.try_acquire().unwrap_err()
    }

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn refused_is_send_sync_and_no_larger_than_its_rejection() {
        assert_send_sync::<Refused>();
        assert_send_sync::<reqwest_middleware::Error>();
        assert_eq!(
            std::mem::size_of::<Refused>(),
            std::mem::size_of::<Rejected>()
        );
    }

    #[test]
    fn rejected_is_found_through_contexts_and_other_error_types() {
        let plain: reqwest_middleware::Error = Refused::new(refusal()).into();
        assert_eq!(rejected(&plain).unwrap().reason(), RejectReason::Isolated);

        let with_context = reqwest_middleware::Error::Middleware(
            anyhow::Error::new(Refused::new(refusal())).context("calling the api"),
        );
        assert_eq!(rejected(&with_context).unwrap().breaker().as_str(), "api");

        let bare = reqwest_middleware::Error::middleware(refusal());
        assert!(rejected(&bare).is_some());

        let from_tower =
            reqwest_middleware::Error::middleware(cutout_tower::Error::rejected(refusal()));
        assert!(rejected(&from_tower).is_some());

        let not_a_refusal = reqwest_middleware::Error::middleware(cutout_tower::Error::inner(
            std::io::Error::other("reset"),
        ));
        assert!(rejected(&not_a_refusal).is_none());
        let other = reqwest_middleware::Error::Middleware(anyhow::anyhow!("something else"));
        assert!(rejected(&other).is_none());
    }

    #[test]
    fn display_says_the_request_was_not_sent_and_why() {
        let breaker = Breaker::new("api", Settings::default());
        breaker.open_for(Duration::from_secs(30));
        let refused = Refused::new(breaker.try_acquire().unwrap_err());
        let text = refused.to_string();
        assert!(
            text.starts_with(
                "request not sent: breaker 'api' is refusing calls (open); retry after"
            ),
            "{text}"
        );
        assert!(refused.source().is_none());
        let error: reqwest_middleware::Error = refused.into();
        assert_eq!(
            error.to_string(),
            text,
            "transparent through reqwest-middleware"
        );
    }
}

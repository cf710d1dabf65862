//! Server-side mapping: a refusal becomes 503 with `Retry-After`, a timeout 504.
//!
//! # Wording
//! A refusal reads the same everywhere in this crate and in cutout-reqwest, in a body, an
//! error's `Display` and a log: `<who> is refusing calls (<reason>); retry after <time>`, the
//! time in humantime style as DESIGN §7 asks of durations shown to people (`2.5s`, `1m 30s`),
//! the same text the gateway writes; the `Retry-After` header beside it is the same time in
//! whole seconds, rounded up. `<who>` is `breaker '<id>'`, or before people outside a keyed
//! breaker's public label (see [`refusal_message`]).
//!
//! The functions return `http::Response<String>`, which axum accepts as a response
//! (`IntoResponse`) and hyper can serve, so this crate needs no axum dependency. In axum, use
//! [`handle_error`] with `HandleErrorLayer` for a stack around a route, or
//! [`error_response`] in a handler that calls a dependency through a stack.

use std::error::Error as StdError;
use std::time::Duration;

use cutout::Rejected;
use http::{HeaderValue, Response, StatusCode, header};

use crate::error::{BoxError, Error, is_elapsed};

/// `duration` in whole seconds, rounded up (`Retry-After` has no fractions; rounding down would
/// send clients back before the break ends).
/// Saturates at `u64::MAX` seconds.
pub fn retry_after_secs(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0))
}

fn text(status: StatusCode, body: String) -> Response<String> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// What a refusal says, in this crate's one wording (see [Wording](self#wording)):
/// `<who> is refusing calls (<reason>); retry after <time>`, without the retry-after when the
/// breaker cannot know (isolated). `<who>` is `label` when given (a keyed breaker's public
/// name: its id is an internal URL), else `breaker '<id>'`.
///
/// ```
/// use std::time::Duration;
/// use cutout::Breaker;
///
/// let breaker = Breaker::new("ledger", Default::default());
/// breaker.open_for(Duration::from_millis(2500));
/// let refused = breaker.try_acquire().unwrap_err();
/// let text = cutout_tower::respond::refusal_message(&refused, None);
/// assert!(text.starts_with("breaker 'ledger' is refusing calls (open); retry after 2."), "{text}");
/// let text = cutout_tower::respond::refusal_message(&refused, Some("inventory"));
/// assert!(text.starts_with("inventory is refusing calls (open)"));
/// ```
pub fn refusal_message(rejected: &Rejected, label: Option<&str>) -> String {
    let mut text = match label {
        Some(label) => format!("{label} is refusing calls ({})", rejected.reason()),
        None => format!(
            "breaker '{}' is refusing calls ({})",
            rejected.breaker(),
            rejected.reason()
        ),
    };
    if let Some(after) = rejected.retry_after() {
        text.push_str(&format!("; retry after {}", cutout::HumanDuration(after)));
    }
    text
}

/// 503 Service Unavailable for a refusal: `Retry-After` in whole seconds (rounded up; absent
/// when the breaker cannot know, e.g. isolated), and a one-line body naming the breaker and the
/// reason ([`refusal_message`]). For a keyed breaker, whose id is an upstream's address, use
/// [`refusal_response_as`] or [`error_response`] (which names its public label).
///
/// ```
/// # use std::time::Duration;
/// # use cutout::{Breaker, Jitter, Settings};
/// let breaker = Breaker::new("ledger", Settings::builder()
///     .consecutive_failures(Some(1)).jitter(Jitter::None)
///     .break_duration(Duration::from_millis(2500)).build()?);
/// let _ = breaker.call(|| Err::<(), _>("down"));
/// let refused = breaker.try_acquire().unwrap_err();
/// let response = cutout_tower::respond::refusal_response(&refused);
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "3");
/// assert!(response.body().contains("ledger"));
/// # Ok::<(), cutout::ConfigError>(())
/// ```
pub fn refusal_response(rejected: &Rejected) -> Response<String> {
    refusal_response_with(rejected, None)
}

/// [`refusal_response`] naming `label` instead of the breaker's id (see [`refusal_message`]).
pub fn refusal_response_as(rejected: &Rejected, label: &str) -> Response<String> {
    refusal_response_with(rejected, Some(label))
}

fn refusal_response_with(rejected: &Rejected, label: Option<&str>) -> Response<String> {
    let mut body = refusal_message(rejected, label);
    let after = rejected.retry_after().map(retry_after_secs);
    body.push('\n');
    let mut response = text(StatusCode::SERVICE_UNAVAILABLE, body);
    if let Some(after) = after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(after));
    }
    response
}

/// 504 Gateway Timeout: the attempt timed out.
pub fn timeout_response() -> Response<String> {
    text(
        StatusCode::GATEWAY_TIMEOUT,
        "the dependency did not answer in time\n".to_owned(),
    )
}

/// The response for any error of a stack: a refusal ([`Error`] or a bare [`Rejected`] anywhere
/// in the chain) → [`refusal_response`], naming the [`Error`]'s public label when it has one (a
/// keyed service's refusal: never the upstream's address); tower's timeout (`Elapsed`, anywhere
/// in the chain) →
/// [`timeout_response`]; anything else → 500 Internal Server Error with a generic body (the
/// error's text is not sent to clients).
pub fn error_response(error: &(dyn StdError + 'static)) -> Response<String> {
    let found = Error::find(error);
    if let Some(rejected) = found.and_then(Error::rejection) {
        return refusal_response_with(rejected, found.and_then(Error::public_label));
    }
    if let Some(rejected) = find::<Rejected>(error) {
        return refusal_response(rejected);
    }
    if is_elapsed(error) {
        return timeout_response();
    }
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error\n".to_owned(),
    )
}

fn find<'a, T: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// [`error_response`] for axum's `HandleErrorLayer`:
/// `HandleErrorLayer::new(cutout_tower::respond::handle_error)`. Takes the breaker service's
/// [`Error`] or any error that boxes (an outer layer's `BoxError`).
pub async fn handle_error<E: Into<BoxError>>(error: E) -> Response<String> {
    let error: BoxError = error.into();
    error_response(&*error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 0);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
        assert_eq!(retry_after_secs(Duration::from_millis(3001)), 4);
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
    }

    #[test]
    fn timeouts_and_other_errors() {
        let boxed: BoxError = Box::new(tower::timeout::error::Elapsed::new());
        assert_eq!(error_response(&*boxed).status(), 504);
        let wrapped = Error::inner(tower::timeout::error::Elapsed::new());
        assert_eq!(error_response(&wrapped).status(), 504);
        let other = Error::inner("boom");
        let response = error_response(&other);
        assert_eq!(response.status(), 500);
        assert!(!response.body().contains("boom"));
    }
}

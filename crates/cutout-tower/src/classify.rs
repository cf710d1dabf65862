//! [`HttpClassifier`]: what an HTTP response or error means to a breaker.

use std::sync::Arc;

use cutout::classify::{Classify, ErrorClass, Outcome};
use http::{HeaderMap, StatusCode, header::RETRY_AFTER};

/// Classifies `Result<http::Response<B>, E>` for a breaker.
///
/// | result | class | outcome |
/// |---|---|---|
/// | `Err(_)`: connection error, timeout, any error | Transient | Failure |
/// | 5xx (except below) | Transient | Failure |
/// | 503 with `Retry-After` | Throttled | Ignored |
/// | 429 | Throttled | Ignored |
/// | other 4xx | Permanent | Ignored |
/// | anything else (1xx, 2xx, 3xx) | — | Success |
///
/// Every row can be changed; an override for one status wins over the rows.
///
/// ```
/// use cutout::classify::{Classify, ErrorClass, Outcome};
/// use cutout_tower::HttpClassifier;
/// use http::{Response, StatusCode};
///
/// let classifier = HttpClassifier::new()
///     .status(StatusCode::NOT_IMPLEMENTED, None) // 501 is the caller's problem here
///     .status(StatusCode::CONFLICT, Some(ErrorClass::Transient));
/// let of = |status: u16| {
///     let response = Response::builder().status(status).body(()).unwrap();
///     classifier.classify(&Ok::<_, std::io::Error>(response))
/// };
/// assert_eq!(of(200), Outcome::Success);
/// assert_eq!(of(500), Outcome::Failure);
/// assert_eq!(of(501), Outcome::Success);
/// assert_eq!(of(409), Outcome::Failure);
/// assert_eq!(of(429), Outcome::Ignored);
/// assert_eq!(of(404), Outcome::Ignored);
/// ```
#[derive(Debug, Clone)]
pub struct HttpClassifier {
    errors: ErrorClass,
    server_errors: ErrorClass,
    throttled: ErrorClass,
    client_errors: ErrorClass,
    /// `None` while empty, so cloning the default classifier per call costs no reference
    /// count.
    overrides: Option<Arc<[Override]>>,
}

/// A status classed by hand (`None`: a success).
type Override = (StatusCode, Option<ErrorClass>);

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier {
            errors: ErrorClass::Transient,
            server_errors: ErrorClass::Transient,
            throttled: ErrorClass::Throttled,
            client_errors: ErrorClass::Permanent,
            overrides: None,
        }
    }
}

impl HttpClassifier {
    /// The default classification (see the table).
    pub fn new() -> Self {
        HttpClassifier::default()
    }

    /// The class of errors (the request did not produce a response: connection refused or
    /// reset, a timeout from tower's `Timeout`, ...). Default Transient.
    pub fn errors(mut self, class: ErrorClass) -> Self {
        self.errors = class;
        self
    }

    /// The class of 5xx responses. Default Transient.
    pub fn server_errors(mut self, class: ErrorClass) -> Self {
        self.server_errors = class;
        self
    }

    /// The class of 429 and of 503 with `Retry-After`. Default Throttled.
    pub fn throttled(mut self, class: ErrorClass) -> Self {
        self.throttled = class;
        self
    }

    /// The class of other 4xx responses. Default Permanent.
    pub fn client_errors(mut self, class: ErrorClass) -> Self {
        self.client_errors = class;
        self
    }

    /// Classes `status` as `class` (`None`: a success), whatever the rows say.
    pub fn status(mut self, status: StatusCode, class: Option<ErrorClass>) -> Self {
        let mut overrides: Vec<_> = self
            .overrides
            .as_deref()
            .unwrap_or_default()
            .iter()
            .filter(|(s, _)| *s != status)
            .copied()
            .collect();
        overrides.push((status, class));
        self.overrides = Some(overrides.into());
        self
    }

    /// The class of a response with `status` and `headers`; `None` for a success.
    pub fn class_of(&self, status: StatusCode, headers: &HeaderMap) -> Option<ErrorClass> {
        if let Some((_, class)) = self
            .overrides
            .as_deref()
            .and_then(|o| o.iter().find(|(s, _)| *s == status))
        {
            return *class;
        }
        match status.as_u16() {
            429 => Some(self.throttled),
            503 if headers.contains_key(RETRY_AFTER) => Some(self.throttled),
            500..=599 => Some(self.server_errors),
            400..=499 => Some(self.client_errors),
            _ => None,
        }
    }
}

impl<B, E> Classify<http::Response<B>, E> for HttpClassifier {
    fn classify(&self, result: &Result<http::Response<B>, E>) -> Outcome {
        match result {
            Ok(response) => self
                .class_of(response.status(), response.headers())
                .map_or(Outcome::Success, Outcome::from),
            Err(_) => self.errors.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(classifier: &HttpClassifier, status: u16, retry_after: bool) -> Outcome {
        let mut builder = http::Response::builder().status(status);
        if retry_after {
            builder = builder.header(RETRY_AFTER, "5");
        }
        classifier.classify(&Ok::<_, ()>(builder.body(()).unwrap()))
    }

    #[test]
    fn default_table() {
        let c = HttpClassifier::new();
        assert_eq!(outcome(&c, 200, false), Outcome::Success);
        assert_eq!(outcome(&c, 304, false), Outcome::Success);
        assert_eq!(outcome(&c, 500, false), Outcome::Failure);
        assert_eq!(outcome(&c, 502, false), Outcome::Failure);
        assert_eq!(outcome(&c, 503, false), Outcome::Failure);
        assert_eq!(outcome(&c, 503, true), Outcome::Ignored);
        assert_eq!(outcome(&c, 429, false), Outcome::Ignored);
        assert_eq!(outcome(&c, 400, false), Outcome::Ignored);
        assert_eq!(
            c.classify(&Err::<http::Response<()>, _>("refused")),
            Outcome::Failure
        );
        let headers = HeaderMap::new();
        assert_eq!(
            c.class_of(StatusCode::TOO_MANY_REQUESTS, &headers),
            Some(ErrorClass::Throttled)
        );
        assert_eq!(
            c.class_of(StatusCode::NOT_FOUND, &headers),
            Some(ErrorClass::Permanent)
        );
    }

    #[test]
    fn rows_and_overrides_are_configurable() {
        let c = HttpClassifier::new()
            .throttled(ErrorClass::Transient)
            .client_errors(ErrorClass::Transient)
            .errors(ErrorClass::Permanent)
            .status(StatusCode::BAD_GATEWAY, None)
            .status(StatusCode::BAD_GATEWAY, Some(ErrorClass::Permanent));
        assert_eq!(outcome(&c, 429, false), Outcome::Failure);
        assert_eq!(outcome(&c, 404, false), Outcome::Failure);
        assert_eq!(outcome(&c, 502, false), Outcome::Ignored);
        assert_eq!(
            c.classify(&Err::<http::Response<()>, _>("refused")),
            Outcome::Ignored
        );
        let c = c.server_errors(ErrorClass::Permanent);
        assert_eq!(outcome(&c, 500, false), Outcome::Ignored);
    }
}

//! [`HttpClassifier`]: what an HTTP response or error means to a breaker.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cutout::classify::{Classify, ErrorClass, Outcome, Verdict};
use http::{HeaderMap, StatusCode, header::RETRY_AFTER};

/// Classifies `Result<http::Response<B>, E>` for a breaker.
///
/// | result | class | outcome |
/// |---|---|---|
/// | `Err(_)`: connection error, timeout, any error | Transient | Failure |
/// | 5xx (except below) | Transient | Failure |
/// | 503 with a readable `Retry-After` (delta-seconds or an HTTP-date) | Throttled | Ignored |
/// | 429 | Throttled | Ignored |
/// | other 4xx | Permanent | Ignored |
/// | anything else (1xx, 2xx, 3xx) | — | Success |
///
/// Every row can be changed; an override for one status wins over the rows.
///
/// A 503 whose `Retry-After` cannot be read (`soon`, `1.5`) is a 5xx like any other: an outage
/// page with a garbage `Retry-After` must still trip by failures, and a server that means
/// "come back later" writes a delay or a date. A 429 is throttling whatever its header says
/// (the caller's rate limit, never an outage).
///
/// With [`honor_retry_after`](HttpClassifier::honor_retry_after), a response classed
/// Throttled that carries a `Retry-After` asking for a positive wait has the
/// [verdict](Classify::verdict) [`Verdict::OpenFor`] that long: the breaker opens for it
/// (capped by its `max_break_duration`) and refuses calls until then, with that retry-after,
/// then lets a probe through. It counts as nothing in the trip window, as any throttled
/// response. Off by default: the table above is then the whole story.
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
    honor_retry_after: bool,
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
            honor_retry_after: false,
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

    /// Whether a throttled response's `Retry-After` opens the breaker for that long (default
    /// `false`: a throttled response is only ignored).
    ///
    /// - It applies to responses classed [`ErrorClass::Throttled`]: by default a 429, and a
    ///   503 with a readable `Retry-After`; any status classed Throttled with
    ///   [`status`](Self::status) too. A 429 classed otherwise (with
    ///   [`throttled`](Self::throttled), or an override) is left to its class.
    /// - `Retry-After` is read as delta-seconds or an HTTP-date, the date counted from the
    ///   system's wall clock ([`HttpClassifier::retry_after`]); a malformed value, `0` or a date
    ///   already past leaves the response to its class (ignored). What a date can no longer
    ///   say exactly: a server and client whose clocks disagree shift the wait by their skew
    ///   (still capped by the maximum break).
    /// - The breaker caps the time by its `max_break_duration` (a server asking for an hour
    ///   gets the breaker's longest break), serves it without jitter, raises an
    ///   [`OpenReason::RetryAfter`](cutout::OpenReason::RetryAfter) event and does not grow
    ///   its break; a half-open probe told to back off re-opens it for the time asked. See
    ///   [`Verdict::OpenFor`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::classify::{Classify, Outcome, Verdict};
    /// use cutout_tower::HttpClassifier;
    /// use http::Response;
    ///
    /// let honoring = HttpClassifier::new().honor_retry_after(true);
    /// let of = |status: u16, retry_after: &str| {
    ///     let response = Response::builder()
    ///         .status(status)
    ///         .header("retry-after", retry_after)
    ///         .body(())
    ///         .unwrap();
    ///     Ok::<_, std::io::Error>(response)
    /// };
    /// let seven = Verdict::OpenFor(Duration::from_secs(7));
    /// assert_eq!(honoring.verdict(&of(429, "7")), seven);
    /// assert_eq!(honoring.verdict(&of(503, "7")), seven);
    /// assert_eq!(honoring.classify(&of(429, "7")), Outcome::Ignored, "counted as nothing");
    /// assert_eq!(honoring.verdict(&of(429, "Wed, 21 Oct 2015 07:28:00 GMT")), Verdict::Ignored);
    /// assert_eq!(honoring.verdict(&of(500, "7")), Verdict::Failure, "a 500 is not throttling");
    /// assert_eq!(HttpClassifier::new().verdict(&of(429, "7")), Verdict::Ignored, "off by default");
    /// ```
    pub fn honor_retry_after(mut self, honor: bool) -> Self {
        self.honor_retry_after = honor;
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
            // Only a `Retry-After` that can be read says "defending itself, come back then": an
            // outage page with a garbage one is an outage.
            503 if retry_after_readable(headers) => Some(self.throttled),
            500..=599 => Some(self.server_errors),
            400..=499 => Some(self.client_errors),
            _ => None,
        }
    }

    /// The verdict on a response with `status` and `headers`: its class as an outcome
    /// ([`class_of`](Self::class_of)), or with
    /// [`honor_retry_after`](Self::honor_retry_after) [`Verdict::OpenFor`] the time a
    /// throttled one asks for.
    pub fn verdict_of(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        let class = self.class_of(status, headers);
        if self.honor_retry_after && class == Some(ErrorClass::Throttled) {
            let asked = HttpClassifier::retry_after(headers).filter(|after| !after.is_zero());
            if let Some(after) = asked {
                return Verdict::OpenFor(after);
            }
        }
        class.map_or(Verdict::Success, Verdict::from)
    }

    /// The delay a `Retry-After` header asks for (the first one, if several), as RFC 9110
    /// §10.2.3 allows it: delta-seconds (ASCII digits, optionally surrounded by spaces or tabs;
    /// beyond `u64` seconds saturates) or an HTTP-date (IMF-fixdate, and the obsolete RFC 850
    /// and asctime forms a recipient must accept), counted from the system's wall clock now
    /// (a date already past asks for no wait: zero). Anything else (`1.5`, `-1`, `soon`, an
    /// empty value, an impossible date) is `None`. Never panics.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout_tower::HttpClassifier;
    /// use http::{HeaderMap, HeaderValue, header::RETRY_AFTER};
    ///
    /// let mut headers = HeaderMap::new();
    /// assert_eq!(HttpClassifier::retry_after(&headers), None);
    /// headers.insert(RETRY_AFTER, HeaderValue::from_static(" 120 "));
    /// assert_eq!(HttpClassifier::retry_after(&headers), Some(Duration::from_secs(120)));
    /// headers.insert(RETRY_AFTER, HeaderValue::from_static("Fri, 31 Dec 1999 23:59:59 GMT"));
    /// assert_eq!(HttpClassifier::retry_after(&headers), Some(Duration::ZERO), "long past");
    /// headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
    /// assert_eq!(HttpClassifier::retry_after(&headers), None);
    /// ```
    pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
        HttpClassifier::retry_after_at(headers, SystemTime::now())
    }

    /// [`HttpClassifier::retry_after`] with an HTTP-date counted from `now` (for tests, or a
    /// caller with its own notion of the time).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use cutout_tower::HttpClassifier;
    /// use http::{HeaderMap, HeaderValue, header::RETRY_AFTER};
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2015 07:30:00 GMT"));
    /// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 07:28:00
    /// assert_eq!(HttpClassifier::retry_after_at(&headers, now), Some(Duration::from_secs(120)));
    /// ```
    pub fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
        match parse_retry_after(headers.get(RETRY_AFTER)?.as_bytes())? {
            RetryAfter::Delay(delay) => Some(delay),
            RetryAfter::Date(date) => Some(date.duration_since(now).unwrap_or(Duration::ZERO)),
        }
    }
}

/// A `Retry-After` value: a delay, or a date.
enum RetryAfter {
    Delay(Duration),
    Date(SystemTime),
}

/// `value` as delta-seconds or an HTTP-date; `None` when it is neither.
fn parse_retry_after(value: &[u8]) -> Option<RetryAfter> {
    let trimmed = value.trim_ascii_start().trim_ascii_end();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.iter().all(u8::is_ascii_digit) {
        let seconds = trimmed.iter().fold(0u64, |n, digit| {
            n.saturating_mul(10).saturating_add(u64::from(digit - b'0'))
        });
        return Some(RetryAfter::Delay(Duration::from_secs(seconds)));
    }
    let text = std::str::from_utf8(trimmed).ok()?;
    httpdate::parse_http_date(text).ok().map(RetryAfter::Date)
}

/// Whether the response's `Retry-After` can be read (a delay or a date), whatever it asks.
fn retry_after_readable(headers: &HeaderMap) -> bool {
    headers
        .get(RETRY_AFTER)
        .is_some_and(|value| parse_retry_after(value.as_bytes()).is_some())
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

    fn verdict(&self, result: &Result<http::Response<B>, E>) -> Verdict {
        match result {
            Ok(response) => self.verdict_of(response.status(), response.headers()),
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

    fn verdict(classifier: &HttpClassifier, status: u16, retry_after: &[u8]) -> Verdict {
        let value = http::HeaderValue::from_bytes(retry_after).unwrap();
        let response = http::Response::builder()
            .status(status)
            .header(RETRY_AFTER, value)
            .body(())
            .unwrap();
        classifier.verdict(&Ok::<_, ()>(response))
    }

    #[test]
    fn without_the_option_verdicts_are_the_outcomes() {
        let c = HttpClassifier::new();
        for status in [200, 429, 500, 503, 404] {
            let plain = http::Response::builder().status(status).body(()).unwrap();
            let plain = Ok::<_, ()>(plain);
            assert_eq!(c.verdict(&plain), c.classify(&plain).into(), "{status}");
            assert_eq!(
                verdict(&c, status, b"7"),
                outcome(&c, status, true).into(),
                "{status} with Retry-After"
            );
        }
        assert_eq!(
            c.verdict(&Err::<http::Response<()>, _>(())),
            Verdict::Failure
        );
    }

    #[test]
    fn honoring_opens_for_a_throttled_response_s_delta_seconds() {
        let c = HttpClassifier::new().honor_retry_after(true);
        let secs = |n| Verdict::OpenFor(Duration::from_secs(n));
        assert_eq!(verdict(&c, 429, b"7"), secs(7));
        assert_eq!(verdict(&c, 503, b"120"), secs(120));
        assert_eq!(verdict(&c, 429, b" \t007 "), secs(7));
        assert_eq!(
            verdict(&c, 429, b"99999999999999999999999999"),
            secs(u64::MAX),
            "saturates; the breaker caps it"
        );
        // Not delta-seconds nor a date, or no time (a date long past): the response's class.
        for bad in [
            &b"0"[..],
            b"",
            b"  ",
            b"1.5",
            b"-1",
            b"+5",
            b"7s",
            b"7 7",
            b"Wed, 21 Oct 2015 07:28:00 GMT",
            b"\xff\xfe",
        ] {
            assert_eq!(verdict(&c, 429, bad), Verdict::Ignored, "{bad:?}");
        }
        // A 503 with a Retry-After it cannot read is a server error, as one without (issue
        // 29: an outage page with a garbage Retry-After must still trip).
        assert_eq!(verdict(&c, 503, b"soon"), Verdict::Failure);
        let plain = http::Response::builder().status(503).body(()).unwrap();
        assert_eq!(c.verdict(&Ok::<_, ()>(plain)), Verdict::Failure);
        // Other statuses are not throttling, whatever they carry.
        assert_eq!(verdict(&c, 500, b"7"), Verdict::Failure);
        assert_eq!(verdict(&c, 200, b"7"), Verdict::Success);
        assert_eq!(verdict(&c, 404, b"7"), Verdict::Ignored);
        // What it counts as: nothing.
        let busy = http::Response::builder()
            .status(429)
            .header(RETRY_AFTER, "7")
            .body(())
            .unwrap();
        assert_eq!(c.classify(&Ok::<_, ()>(busy)), Outcome::Ignored);
        // The first of several headers.
        let mut headers = HeaderMap::new();
        headers.append(RETRY_AFTER, http::HeaderValue::from_static("3"));
        headers.append(RETRY_AFTER, http::HeaderValue::from_static("9"));
        assert_eq!(
            c.verdict_of(StatusCode::TOO_MANY_REQUESTS, &headers),
            secs(3)
        );
    }

    #[test]
    fn honoring_follows_the_class_rows_and_overrides_decide() {
        let secs = |n| Verdict::OpenFor(Duration::from_secs(n));
        // 429 counted as a failure here: a failure, Retry-After or not.
        let c = HttpClassifier::new()
            .throttled(ErrorClass::Transient)
            .honor_retry_after(true);
        assert_eq!(verdict(&c, 429, b"7"), Verdict::Failure);
        // An override to success, or to throttling for another status.
        let c = HttpClassifier::new()
            .status(StatusCode::TOO_MANY_REQUESTS, None)
            .status(StatusCode::BAD_GATEWAY, Some(ErrorClass::Throttled))
            .honor_retry_after(true);
        assert_eq!(verdict(&c, 429, b"7"), Verdict::Success);
        assert_eq!(verdict(&c, 502, b"4"), secs(4));
        // Turned off again.
        let c = c.honor_retry_after(false);
        assert_eq!(verdict(&c, 502, b"4"), Verdict::Ignored);
    }
}

//! What a reqwest response or error means to a breaker: [`HttpClassifier`]'s table, or a
//! function of the caller's in front of it, and the response body's end.

use std::fmt;
use std::sync::Arc;

use cutout::classify::{Classify, Verdict};
use cutout_tower::HttpClassifier;
use cutout_tower::body::{Classified, ClassifyEnd, ClassifyResponse};

/// A response as a [function classifier](crate::BreakerMiddleware::classifier) sees it: its
/// status, headers and extensions (the body is not read yet), as an `http::Response`.
pub type ResponseHead = http::Response<reqwest::Body>;

/// What [`BreakerMiddleware::classifier`](crate::BreakerMiddleware::classifier) takes: an
/// [`HttpClassifier`] (its status rows, overrides, error class and `honor_retry_after`), or a
/// function of the response, `Fn(&ResponseHead) -> Option<Verdict>`, whose `None` leaves the
/// response to the middleware's `HttpClassifier` (the default table unless one was set).
pub trait IntoClassifier {
    /// Puts `self` into `classifier`.
    #[doc(hidden)]
    fn into_classifier(self, classifier: ReqwestClassifier) -> ReqwestClassifier;
}

impl IntoClassifier for HttpClassifier {
    fn into_classifier(self, classifier: ReqwestClassifier) -> ReqwestClassifier {
        ReqwestClassifier {
            http: self,
            ..classifier
        }
    }
}

impl<F> IntoClassifier for F
where
    F: Fn(&ResponseHead) -> Option<Verdict> + Send + Sync + 'static,
{
    fn into_classifier(self, classifier: ReqwestClassifier) -> ReqwestClassifier {
        ReqwestClassifier {
            function: Some(Arc::new(self)),
            ..classifier
        }
    }
}

type Function = Arc<dyn Fn(&ResponseHead) -> Option<Verdict> + Send + Sync>;

/// [`HttpClassifier`] (and the caller's function, if any) over what reqwest-middleware's next
/// step returns, with the verdict on a good response waiting for its body's end.
///
/// - A response: the function's verdict if it gives one, else [`HttpClassifier::verdict_of`]
///   its status and headers (5xx fail, 429 and 503 with a readable `Retry-After` are
///   throttling, other 4xx the caller's fault, the rest success; with `honor_retry_after`, a
///   throttled response's `Retry-After` opens the breaker for that long). Anything but a
///   success is recorded at once; so is a redirect (3xx), which the middleware follows or
///   hands back without its body. A success waits for the body: its end is the success, an
///   error while it is read (the connection cut, reqwest's total timeout running out during
///   the body) is classed as [`errors`](HttpClassifier::errors) are (a failure by default),
///   and a body dropped unread records the success its headers promised (callers often read
///   the status alone; recording nothing would count their failures and none of their
///   successes).
/// - An error the caller caused or the server never saw — a request reqwest would not send
///   (`is_builder`: a URL scheme it does not speak), the caller's own request body failing
///   while it was sent (a streamed upload whose source went away: a body error in the error's
///   chain, which at this point can only be the request's, since the response body is not
///   read yet), a refusal by another breaker further down the chain, or a redirect the client
///   followed below the middleware (no breaker judged that hop) — is ignored: it says nothing
///   about the server.
/// - Any other error (cannot connect, timed out, connection reset, an error from a middleware
///   further down) has the classifier's [error class](HttpClassifier::errors): a failure by
///   default.
#[derive(Clone, Default)]
pub struct ReqwestClassifier {
    pub(crate) http: HttpClassifier,
    function: Option<Function>,
}

impl fmt::Debug for ReqwestClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqwestClassifier")
            .field("http", &self.http)
            .field("function", &self.function.as_ref().map(|_| ".."))
            .finish()
    }
}

/// What [`ReqwestClassifier`] decides at a good response's body end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub struct BodyEnd {
    body_error: Verdict,
}

impl<E> ClassifyEnd<E> for BodyEnd {
    fn end(self, _trailers: Option<&http::HeaderMap>) -> Verdict {
        Verdict::Success
    }

    fn body_error(self, _error: &E) -> Verdict {
        self.body_error
    }

    fn dropped(&self) -> Option<Verdict> {
        Some(Verdict::Success)
    }
}

impl ReqwestClassifier {
    /// The verdict on a response's head: the function's, else the table's.
    pub(crate) fn head_verdict(&self, response: &ResponseHead) -> Verdict {
        self.function
            .as_ref()
            .and_then(|function| function(response))
            .unwrap_or_else(|| self.http.verdict_of(response.status(), response.headers()))
    }

    /// The verdict on an error (no response).
    pub(crate) fn error_verdict(&self, error: &reqwest_middleware::Error) -> Verdict {
        if error.is_builder()
            || crate::rejected(error).is_some()
            || caller_body_failed(error)
            || crate::middleware::followed_below(error)
        {
            return Verdict::Ignored;
        }
        // The configured class of errors, as HttpClassifier decides it for any error.
        Classify::<http::Response<()>, ()>::verdict(&self.http, &Err(()))
    }
}

impl ClassifyResponse<reqwest::Body, reqwest_middleware::Error> for ReqwestClassifier {
    type AtEnd = BodyEnd;

    fn classify_response(
        &self,
        result: &Result<ResponseHead, reqwest_middleware::Error>,
    ) -> Classified<BodyEnd> {
        match result {
            Ok(response) => match self.head_verdict(response) {
                Verdict::Success if !response.status().is_redirection() => {
                    let body_error =
                        Classify::<http::Response<()>, ()>::verdict(&self.http, &Err(()));
                    Classified::AtEnd(BodyEnd { body_error })
                }
                verdict => Classified::Now(verdict),
            },
            Err(error) => Classified::Now(self.error_verdict(error)),
        }
    }
}

/// Whether `error` is the caller's request body failing: reqwest reports a body stream's error
/// as a body error, which hyper wraps as the request's, so it is found down the source chain.
fn caller_body_failed(error: &reqwest_middleware::Error) -> bool {
    let reqwest_middleware::Error::Reqwest(error) = error else {
        return false;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_body)
        {
            return true;
        }
        source = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use cutout::ErrorClass;

    use super::*;
    use crate::Refused;

    fn error_verdict(classifier: &ReqwestClassifier, error: reqwest_middleware::Error) -> Verdict {
        classifier.error_verdict(&error)
    }

    fn response_verdict(classifier: &ReqwestClassifier, status: u16, retry_after: &str) -> Verdict {
        let mut response = http::Response::builder().status(status);
        if !retry_after.is_empty() {
            response = response.header(http::header::RETRY_AFTER, retry_after);
        }
        let response = response.body(reqwest::Body::from("")).unwrap();
        match classifier.classify_response(&Ok(response)) {
            Classified::Now(verdict) => verdict,
            Classified::AtEnd(at_end) => ClassifyEnd::<()>::end(at_end, None),
        }
    }

    #[test]
    fn responses_follow_the_http_classifier_s_table() {
        let default = ReqwestClassifier::default();
        for (status, retry_after, verdict) in [
            (200, "", Verdict::Success),
            (204, "", Verdict::Success),
            (302, "", Verdict::Success),
            (500, "", Verdict::Failure),
            (502, "", Verdict::Failure),
            (503, "", Verdict::Failure),
            (503, "7", Verdict::Ignored),
            (429, "", Verdict::Ignored),
            (429, "7", Verdict::Ignored),
            (404, "", Verdict::Ignored),
            (400, "", Verdict::Ignored),
        ] {
            assert_eq!(
                response_verdict(&default, status, retry_after),
                verdict,
                "{status} {retry_after:?}"
            );
        }
        let honoring = HttpClassifier::new()
            .honor_retry_after(true)
            .into_classifier(ReqwestClassifier::default());
        let seven = Verdict::OpenFor(std::time::Duration::from_secs(7));
        assert_eq!(response_verdict(&honoring, 429, "7"), seven);
        assert_eq!(response_verdict(&honoring, 503, "7"), seven);
        assert_eq!(response_verdict(&honoring, 500, "7"), Verdict::Failure);
        assert_eq!(
            response_verdict(&honoring, 429, "Wed, 21 Oct 2015 07:28:00 GMT"),
            Verdict::Ignored
        );
    }

    #[test]
    fn errors_follow_the_http_classifier_s_error_class_except_refusals() {
        let default = ReqwestClassifier::default();
        let other = || reqwest_middleware::Error::Middleware(anyhow::anyhow!("downstream"));
        assert_eq!(error_verdict(&default, other()), Verdict::Failure);

        let lenient = HttpClassifier::new()
            .errors(ErrorClass::Permanent)
            .into_classifier(ReqwestClassifier::default());
        assert_eq!(error_verdict(&lenient, other()), Verdict::Ignored);

        let breaker = cutout::Breaker::new("inner", cutout::Settings::default());
        breaker.isolate();
        let refused: reqwest_middleware::Error =
            Refused::new(breaker.try_acquire().unwrap_err()).into();
        assert_eq!(error_verdict(&default, refused), Verdict::Ignored);
    }
}

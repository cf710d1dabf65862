//! What a reqwest response or error means to a breaker: [`HttpClassifier`]'s table.

use cutout::classify::{Classify, Outcome, Verdict};
use cutout_tower::HttpClassifier;
use reqwest::Response;

/// [`HttpClassifier`] over what reqwest-middleware's next step returns.
///
/// - A response: [`HttpClassifier::verdict_of`] its status and headers (5xx fail, 429 and 503
///   with `Retry-After` are throttling, other 4xx the caller's fault, the rest success; with
///   `honor_retry_after`, a throttled response's delta-seconds open the breaker for that long).
///   The body is not read: an error while reading it later is not seen by the breaker.
/// - An error the caller caused or the server never saw — a request reqwest would not send
///   (`is_builder`: a URL scheme it does not speak), the caller's own request body failing
///   while it was sent (a streamed upload whose source went away: a body error in the error's
///   chain, which at this point can only be the request's, since the response body is not
///   read yet), or a refusal by another breaker further down the chain — is ignored: it says
///   nothing about the server.
/// - Any other error (cannot connect, timed out, connection reset, too many redirects, an
///   error from a middleware further down) has the classifier's
///   [error class](HttpClassifier::errors): a failure by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReqwestClassifier {
    pub(crate) http: HttpClassifier,
}

impl Classify<Response, reqwest_middleware::Error> for ReqwestClassifier {
    fn classify(&self, result: &Result<Response, reqwest_middleware::Error>) -> Outcome {
        self.verdict(result).outcome()
    }

    fn verdict(&self, result: &Result<Response, reqwest_middleware::Error>) -> Verdict {
        match result {
            Ok(response) => self.http.verdict_of(response.status(), response.headers()),
            Err(error)
                if error.is_builder()
                    || crate::rejected(error).is_some()
                    || caller_body_failed(error) =>
            {
                Verdict::Ignored
            }
            // The configured class of errors, as HttpClassifier decides it for any error.
            Err(_) => Classify::<http::Response<()>, ()>::verdict(&self.http, &Err(())),
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
        classifier.verdict(&Err(error))
    }

    fn response_verdict(classifier: &ReqwestClassifier, status: u16, retry_after: &str) -> Verdict {
        let mut response = http::Response::builder().status(status);
        if !retry_after.is_empty() {
            response = response.header(http::header::RETRY_AFTER, retry_after);
        }
        let response = Response::from(response.body("").unwrap());
        classifier.verdict(&Ok(response))
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
        let honoring = ReqwestClassifier {
            http: HttpClassifier::new().honor_retry_after(true),
        };
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

        let lenient = ReqwestClassifier {
            http: HttpClassifier::new().errors(ErrorClass::Permanent),
        };
        assert_eq!(error_verdict(&lenient, other()), Verdict::Ignored);

        let breaker = cutout::Breaker::new("inner", cutout::Settings::default());
        breaker.isolate();
        let refused: reqwest_middleware::Error =
            Refused::new(breaker.try_acquire().unwrap_err()).into();
        assert_eq!(error_verdict(&default, refused), Verdict::Ignored);
    }
}

//! [`BreakerMiddleware`]: guards the requests of a `reqwest_middleware` client with breakers.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::Breaker;
use cutout_tower::keyed::{HostKey, KeyedBreakers, KeyedService};
use cutout_tower::{BreakerService, HttpClassifier};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tower_service::Service;

use crate::classify::ReqwestClassifier;
use crate::error::Refused;

/// A `reqwest_middleware` middleware that sends a request only when its breaker admits it,
/// and records how it went.
///
/// It guards with one [`Breaker`] ([`BreakerMiddleware::new`]) or with one breaker per
/// destination ([`BreakerMiddleware::per_host`]: cutout-tower's [`KeyedBreakers`] keyed by
/// [`HostKey`], `scheme://host:port`, see [`host_key`](crate::host_key)).
///
/// - **Refused**: the request is not sent (nothing further down the chain runs) and the
///   result is `Err(reqwest_middleware::Error::Middleware(..))` holding a [`Refused`]; get the
///   [`cutout::Rejected`] with [`rejected`](crate::rejected).
/// - **Admitted**: the request goes down the chain holding the breaker's permit. The response
///   (its status and headers: the body is not read) or the error is classified by an
///   [`HttpClassifier`] (5xx, connection errors and timeouts fail; 429 and 503 with
///   `Retry-After` are throttling, other 4xx the caller's fault, both ignored; the rest
///   succeed; a request reqwest would not send, or one refused by another breaker further
///   down, is ignored) and the outcome recorded. The response or error is passed back as it
///   came: a 500 is still an `Ok` response to the caller. The call's duration (for slow-call
///   trips and the latency baseline) runs from the permit to the response's headers.
/// - **Dropped**: a request future dropped before it finishes (`tokio::time::timeout` around
///   `send()`, a `select!`, an aborted task) drops the permit unrecorded: nothing is counted,
///   a half-open probe slot is given back, and a per-host key is no longer busy.
///
/// # Order
/// Give the client its timeout (`reqwest::ClientBuilder::timeout`, or
/// `RequestBuilder::timeout`): it runs inside the middleware, so a hung server becomes a
/// timeout error the breaker counts. A timeout around `send()` cancels the request instead,
/// and the breaker never learns that the server hangs. Put a retry middleware before this
/// one (`.with(retry).with(breaker)`), so that every attempt passes the breaker and a refusal
/// ends the retries.
///
/// ```
/// use std::time::Duration;
/// use cutout::{Breaker, Settings};
/// use cutout_reqwest::BreakerMiddleware;
/// use reqwest_middleware::ClientBuilder;
///
/// let breaker = Breaker::new("payments", Settings::default());
/// let client = ClientBuilder::new(
///     reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?,
/// )
/// .with(BreakerMiddleware::new(breaker.clone()).honor_retry_after(true))
/// .build();
/// # let _ = client;
/// # Ok::<(), reqwest::Error>(())
/// ```
///
/// Clones share the breaker or the map of breakers.
#[derive(Clone)]
pub struct BreakerMiddleware {
    guard: Guard,
    classifier: ReqwestClassifier,
    pause: Option<Duration>,
}

#[derive(Debug, Clone)]
enum Guard {
    One(Breaker),
    PerHost(KeyedBreakers<HostKey>),
}

impl BreakerMiddleware {
    /// Guards every request of the client with `breaker`, classified by the default
    /// [`HttpClassifier`].
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    ///
    /// let breaker = Breaker::new("search", Settings::default());
    /// let middleware = BreakerMiddleware::new(breaker.clone());
    /// assert_eq!(middleware.breaker().map(|b| b.id().as_str()), Some("search"));
    /// assert!(middleware.breakers().is_none());
    /// ```
    pub fn new(breaker: Breaker) -> Self {
        BreakerMiddleware::with_guard(Guard::One(breaker))
    }

    /// Guards each request with the breaker of its destination in `breakers`
    /// (`scheme://host:port`, created on the host's first request), classified by the default
    /// [`HttpClassifier`]. One failing host opens only its own breaker.
    ///
    /// The map's bounds hold (see [`cutout_tower::keyed`]): a request in flight keeps its key
    /// from eviction until it finishes or is dropped, and when the map is full of keys that
    /// cannot be evicted a new host still gets its breaker, beyond `max_keys` (counted in
    /// [`KeyedStats::over_capacity`](cutout_tower::keyed::KeyedStats::over_capacity)).
    ///
    /// ```
    /// use cutout::Settings;
    /// use cutout_reqwest::{BreakerMiddleware, KeyedBreakers};
    ///
    /// let hosts = KeyedBreakers::builder(Settings::default()).max_keys(256).max_open(8).build();
    /// let middleware = BreakerMiddleware::per_host(hosts.clone());
    /// assert!(middleware.breakers().is_some());
    /// ```
    pub fn per_host(breakers: KeyedBreakers<HostKey>) -> Self {
        BreakerMiddleware::with_guard(Guard::PerHost(breakers))
    }

    fn with_guard(guard: Guard) -> Self {
        BreakerMiddleware {
            guard,
            classifier: ReqwestClassifier::default(),
            pause: None,
        }
    }

    /// Classifies responses and errors with `classifier` (its status rows, overrides and
    /// `honor_retry_after`). Errors reqwest raises before sending (`is_builder`) and
    /// refusals of other breakers further down are ignored whatever it says.
    ///
    /// ```
    /// use cutout::{Breaker, ErrorClass, Settings};
    /// use cutout_reqwest::{BreakerMiddleware, HttpClassifier};
    /// use reqwest::StatusCode;
    ///
    /// let classifier = HttpClassifier::new()
    ///     .status(StatusCode::NOT_IMPLEMENTED, None) // a 501 is no outage here
    ///     .status(StatusCode::CONFLICT, Some(ErrorClass::Transient));
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()))
    ///     .classifier(classifier);
    /// # let _ = middleware;
    /// ```
    pub fn classifier(mut self, classifier: HttpClassifier) -> Self {
        self.classifier = ReqwestClassifier { http: classifier };
        self
    }

    /// Whether a throttled response's `Retry-After` (delta-seconds) opens the breaker for
    /// that long ([`HttpClassifier::honor_retry_after`]; default `false`). The breaker caps
    /// it by its `max_break_duration`, serves it without jitter, and refuses until then with
    /// that retry-after; the throttled response itself is still returned to the caller.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Settings, Verdict};
    /// use cutout_reqwest::BreakerMiddleware;
    /// use reqwest::StatusCode;
    /// use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
    ///
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()))
    ///     .honor_retry_after(true);
    /// let mut headers = HeaderMap::new();
    /// headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
    /// let verdict = middleware
    ///     .http_classifier()
    ///     .verdict_of(StatusCode::TOO_MANY_REQUESTS, &headers);
    /// assert_eq!(verdict, Verdict::OpenFor(Duration::from_secs(7)));
    /// ```
    pub fn honor_retry_after(mut self, honor: bool) -> Self {
        self.classifier.http = self.classifier.http.honor_retry_after(honor);
        self
    }

    /// Waits `pause` (at most the refusal's retry-after) before a refused request fails, so
    /// that a caller retrying in a tight loop does not spin. Default: no pause. Needs a tokio
    /// runtime with its timer enabled, as reqwest's own timeouts do.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    ///
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()))
    ///     .refusal_pause(Duration::from_millis(100));
    /// # let _ = middleware;
    /// ```
    pub fn refusal_pause(mut self, pause: Duration) -> Self {
        self.pause = Some(pause);
        self
    }

    /// The breaker, when guarding with one ([`BreakerMiddleware::new`]).
    ///
    /// ```
    /// use cutout::{Breaker, Settings, State};
    /// use cutout_reqwest::BreakerMiddleware;
    ///
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()));
    /// assert_eq!(middleware.breaker().unwrap().state(), State::Closed);
    /// ```
    pub fn breaker(&self) -> Option<&Breaker> {
        match &self.guard {
            Guard::One(breaker) => Some(breaker),
            Guard::PerHost(_) => None,
        }
    }

    /// The map of breakers, when guarding per host ([`BreakerMiddleware::per_host`]), to
    /// observe and control hosts.
    ///
    /// ```
    /// use cutout::Settings;
    /// use cutout_reqwest::{BreakerMiddleware, KeyedBreakers};
    ///
    /// let middleware = BreakerMiddleware::per_host(KeyedBreakers::builder(Settings::default()).build());
    /// assert_eq!(middleware.breakers().unwrap().len(), 0, "no host called yet");
    /// ```
    pub fn breakers(&self) -> Option<&KeyedBreakers<HostKey>> {
        match &self.guard {
            Guard::One(_) => None,
            Guard::PerHost(breakers) => Some(breakers),
        }
    }

    /// The classifier in use.
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    /// use reqwest::StatusCode;
    /// use reqwest::header::HeaderMap;
    ///
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()));
    /// let class = middleware.http_classifier().class_of(StatusCode::BAD_GATEWAY, &HeaderMap::new());
    /// assert_eq!(class, Some(cutout::ErrorClass::Transient));
    /// ```
    pub fn http_classifier(&self) -> &HttpClassifier {
        &self.classifier.http
    }
}

impl fmt::Debug for BreakerMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("BreakerMiddleware");
        match &self.guard {
            Guard::One(breaker) => d.field("breaker", breaker),
            Guard::PerHost(breakers) => d.field("per_host", breakers),
        };
        d.field("classifier", &self.classifier.http)
            .field("refusal_pause", &self.pause)
            .finish()
    }
}

#[async_trait::async_trait]
impl Middleware for BreakerMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let downstream = Downstream {
            rest: Some((next, extensions)),
        };
        let classifier = self.classifier.clone();
        // cutout-tower's services take the permit (and, per host, keep the key busy) and
        // record the verdict when the response future finishes; dropping it records nothing.
        let result = match &self.guard {
            Guard::One(breaker) => {
                let mut service =
                    BreakerService::with_classifier(downstream, breaker.clone(), classifier);
                if let Some(pause) = self.pause {
                    service = service.refusal_pause(pause);
                }
                oneshot(service, request).await
            }
            Guard::PerHost(breakers) => {
                let service = KeyedService::new(
                    downstream,
                    breakers.clone(),
                    |request: &Request| crate::host_key(request.url()),
                    classifier,
                    self.pause,
                );
                oneshot(service, request).await
            }
        };
        result.map_err(from_tower)
    }
}

/// Waits for `service` to be ready, then calls it with `request`.
async fn oneshot<S>(mut service: S, request: Request) -> Result<S::Response, S::Error>
where
    S: Service<Request>,
{
    poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

/// The rest of the middleware chain (and the client) as a one-shot tower service.
struct Downstream<'a> {
    /// Taken by the one call.
    rest: Option<(Next<'a>, &'a mut Extensions)>,
}

impl<'a> Service<Request> for Downstream<'a> {
    type Response = Response;
    type Error = reqwest_middleware::Error;
    type Future = Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.rest.take() {
            Some((next, extensions)) => next.run(request, extensions),
            // `oneshot` calls it once; a second call is answered, not panicked on.
            None => Box::pin(async {
                Err(reqwest_middleware::Error::Middleware(anyhow::anyhow!(
                    "cutout-reqwest: the rest of the chain was already called for this request"
                )))
            }),
        }
    }
}

/// The error of a breaker service as reqwest-middleware's: a refusal as [`Refused`], an
/// inner error as it came.
fn from_tower(error: cutout_tower::Error) -> reqwest_middleware::Error {
    if let Some(rejected) = error.rejection() {
        return Refused::new(rejected.clone()).into();
    }
    match error.into_inner() {
        // The service boxed the chain's own error: unbox it.
        Some(inner) => match inner.downcast::<reqwest_middleware::Error>() {
            Ok(error) => *error,
            Err(other) => reqwest_middleware::Error::Middleware(anyhow::anyhow!(other)),
        },
        // Neither a refusal nor an inner error: not made by cutout-tower's services.
        None => reqwest_middleware::Error::Middleware(anyhow::anyhow!(
            "cutout-reqwest: a breaker error without a cause"
        )),
    }
}

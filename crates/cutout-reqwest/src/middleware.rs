//! [`BreakerMiddleware`]: guards the requests of a `reqwest_middleware` client with breakers.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::Breaker;
use cutout_tower::body::BreakerBody;
use cutout_tower::keyed::{HostKey, KeyedBreakers, KeyedService};
use cutout_tower::{HttpClassifier, WholeResponseService};
use http::Extensions;
use reqwest::{Method, Request, Response, ResponseBuilderExt, StatusCode, Url};
use reqwest_middleware::{Middleware, Next};
use tower_service::Service;

use crate::classify::{BodyEnd, IntoClassifier, ReqwestClassifier, ResponseHead};
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
///   or the error is classified by a [`ReqwestClassifier`]: an
///   [`HttpClassifier`]'s table (5xx, connection errors and timeouts fail; 429 and 503 with a
///   readable `Retry-After` are throttling, other 4xx the caller's fault, both ignored; the
///   rest succeed), or a function of yours first ([`classifier`](Self::classifier)); a
///   request reqwest would not send, the caller's own upload failing, or one refused by
///   another breaker further down, is ignored. Anything but a success is recorded on the
///   headers; a success waits for the body's end (a body error, reqwest's total timeout
///   during the body: a failure; dropped unread: the success; dropped after reading began:
///   nothing). The response or error is
///   passed back as it came: a 500 is still an `Ok` response to the caller. The call's
///   duration (for slow-call trips and the latency baseline) runs from the permit to the
///   verdict: to the headers, or for a success to the body's end, so a caller that leaves a
///   good response unread for a while makes that call look slow (read or drop the body when
///   done with the response).
/// - **Redirected**: the middleware follows redirects, each hop through its own host's
///   breaker ([`max_redirects`](Self::max_redirects)); the client must not follow them itself.
/// - **Dropped**: a request future dropped before it finishes (`tokio::time::timeout` around
///   `send()`, a `select!`, an aborted task) drops the permit unrecorded: nothing is counted,
///   a half-open probe slot is given back, and a per-host key is no longer busy.
///
/// # Order
/// Give the client its timeout (`reqwest::ClientBuilder::timeout`, or
/// `RequestBuilder::timeout`): it runs inside the middleware, so a hung server becomes a
/// timeout error the breaker counts. Give the client's total to the middleware as well
/// ([`total_timeout`](Self::total_timeout)): the middleware follows redirects itself, each
/// hop an execution of the client with the whole client timeout, and it cannot read that
/// timeout from the client; with it, the chain of hops is bounded by the total, as reqwest's
/// own following is. A timeout around `send()` cancels the request instead,
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
/// let total = Duration::from_secs(2);
/// let client = ClientBuilder::new(
///     reqwest::Client::builder()
///         .timeout(total)
///         .redirect(reqwest::redirect::Policy::none())
///         .build()?,
/// )
/// .with(
///     BreakerMiddleware::new(breaker.clone())
///         .honor_retry_after(true)
///         .total_timeout(total),
/// )
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
    max_redirects: usize,
    cross_origin: bool,
    total_timeout: Option<Duration>,
}

/// How many redirects the middleware follows by default (as reqwest's own default policy).
const MAX_REDIRECTS: usize = 10;

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
            max_redirects: MAX_REDIRECTS,
            cross_origin: false,
            total_timeout: None,
        }
    }

    /// Classifies responses and errors with `classifier`: an [`HttpClassifier`] (its status
    /// rows, overrides, error class and `honor_retry_after`), or a function of the response's
    /// head, `|response: &ResponseHead| -> Option<Verdict>`, whose `None` leaves the response
    /// to the `HttpClassifier` in use (the default table unless one was set before). Errors
    /// reqwest raises before sending (`is_builder`), the caller's own body failing and
    /// refusals of other breakers further down are ignored whatever it says; a success still
    /// waits for the body's end (see [`ReqwestClassifier`]).
    ///
    /// ```
    /// use cutout::{Breaker, Settings, Verdict};
    /// use cutout_reqwest::{BreakerMiddleware, ResponseHead};
    ///
    /// // This API answers 200 with `{"error": "unavailable"}` flagged in a header.
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()))
    ///     .classifier(|response: &ResponseHead| {
    ///         response.headers().contains_key("x-backend-down").then_some(Verdict::Failure)
    ///     });
    /// # let _ = middleware;
    /// ```
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
    pub fn classifier(mut self, classifier: impl IntoClassifier) -> Self {
        self.classifier = classifier.into_classifier(self.classifier);
        self
    }

    /// How many redirects the middleware follows for one request (default 10; 0 hands every
    /// redirect back to the caller). A request's own timeout (`RequestBuilder::timeout`), or
    /// else the middleware's [`total_timeout`](Self::total_timeout), bounds the whole chain:
    /// each hop is sent with what is left of it. The client's timeout
    /// (`ClientBuilder::timeout`) cannot be read from a middleware, so without either each hop
    /// gets all of it: give the middleware the client's total as well. Each hop goes through
    /// the breaker of its own host (per host) as a request of its own: a redirect is a
    /// success of the host that answered it, the target's answer counts against the target,
    /// and a target whose breaker refuses is never reached (the request fails with that
    /// refusal). Past the limit the request fails with an error naming it.
    ///
    /// The client below must not follow redirects itself, or the hops it follows are judged by
    /// nobody: build it with `redirect(reqwest::redirect::Policy::none())` (reqwest's default
    /// follows up to 10). A per-host middleware that finds a response from another host than
    /// the one it sent to (the client followed a redirect below it) fails that request with
    /// an error saying so, counted against nobody; the hop was made by then.
    ///
    /// Following, the middleware does what reqwest's own policy does: 301, 302 and 303 turn a
    /// request other than `GET` or `HEAD` into a `GET` without a body, 307 and 308 resend the
    /// same method and body; a body that cannot be cloned (a
    /// stream) is not resent, and the redirect is handed back; only `http` and `https`
    /// targets are followed. A redirect to another origin (scheme, host or port) is handed
    /// back to the caller unless [`follow_cross_origin`](Self::follow_cross_origin) is on.
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    /// use reqwest_middleware::ClientBuilder;
    ///
    /// let client = reqwest::Client::builder()
    ///     .redirect(reqwest::redirect::Policy::none()) // the middleware follows
    ///     .build()?;
    /// let client = ClientBuilder::new(client)
    ///     .with(BreakerMiddleware::new(Breaker::new("api", Settings::default())).max_redirects(5))
    ///     .build();
    /// # let _ = client;
    /// # Ok::<(), reqwest::Error>(())
    /// ```
    pub fn max_redirects(mut self, max: usize) -> Self {
        self.max_redirects = max;
        self
    }

    /// Whether the middleware follows a redirect to another origin (another scheme, host or
    /// port; default `false`: such a redirect is handed back to the caller as it came, as
    /// `reqwest::redirect::Policy::none()` would).
    ///
    /// Why off by default: each hop the middleware follows is a new execution by the client,
    /// and reqwest adds the client's default headers (`ClientBuilder::default_headers`) to
    /// every request it executes. reqwest's own redirect policy strips `Authorization`,
    /// `Cookie`, `Cookie2`, `Proxy-Authorization` and `WWW-Authenticate` on a hop to another
    /// origin *after* that merge; the middleware sits above the client, cannot see its default
    /// headers and cannot keep them off the next request (the request's own headers of those
    /// names it does drop on such a hop). Following another origin would send a client's
    /// default bearer token or session cookie to whatever host a `Location` names.
    ///
    /// Turn it on only for a client without credentials in its default headers (credentials
    /// set per request are dropped on the hop, as reqwest's policy drops them).
    ///
    /// ```
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    ///
    /// // This client sets its credentials per request, never as default headers.
    /// let middleware = BreakerMiddleware::new(Breaker::new("api", Settings::default()))
    ///     .follow_cross_origin(true);
    /// # let _ = middleware;
    /// ```
    pub fn follow_cross_origin(mut self, follow: bool) -> Self {
        self.cross_origin = follow;
        self
    }

    /// The total time one request may take, redirects the middleware follows included (default:
    /// none). Give it the client's total timeout (`reqwest::ClientBuilder::timeout`) here as
    /// well: a middleware cannot read the client's (reqwest 0.13's `Client` has no getter
    /// for it, and applies it inside each execution), and each hop the middleware follows is
    /// an execution of its own, which would get all of the client's timeout again.
    ///
    /// What the middleware can and cannot see:
    /// - it sees a request's own timeout (`RequestBuilder::timeout`, `Request::timeout`) and
    ///   this one. The bound of a request's chain is its own timeout if it has one (it
    ///   replaces the client's timeout in reqwest, and this one here), else this one. Each
    ///   hop is sent with what is left of that bound, from when the middleware started the
    ///   request, as its own timeout (so for the first hop it replaces the client's too: give
    ///   both the same value); a hop sent once the bound has passed fails at once with
    ///   reqwest's timeout error, which counts against that hop's host like any timeout. The
    ///   bound also covers the last response's body, as reqwest's own timeouts do.
    /// - it cannot see the client's `timeout`, `connect_timeout` or `read_timeout`. Without
    ///   a bound here or on the request, a chain of `n` followed hops may take up to
    ///   `n + 1` times the client's timeout (each hop still bounded by it). The connect and
    ///   read timeouts apply per connection and per read, so per hop, in reqwest too.
    /// - a middleware before this one that retries (`.with(retry).with(breaker)`) runs each
    ///   attempt through this one, so each attempt has its own total, as each attempt
    ///   executed by reqwest has its own client timeout.
    ///
    /// `Duration::ZERO` times every request out at once, as reqwest's own timeout does; a
    /// total beyond the clock's range is sent to each hop as it is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Settings};
    /// use cutout_reqwest::BreakerMiddleware;
    /// use reqwest_middleware::ClientBuilder;
    ///
    /// let total = Duration::from_secs(2);
    /// let client = reqwest::Client::builder()
    ///     .timeout(total) // for each execution (one hop)
    ///     .redirect(reqwest::redirect::Policy::none())
    ///     .build()?;
    /// let breaker = Breaker::new("api", Settings::default());
    /// let client = ClientBuilder::new(client)
    ///     // for the whole chain of hops the middleware follows
    ///     .with(BreakerMiddleware::new(breaker).total_timeout(total))
    ///     .build();
    /// # let _ = client;
    /// # Ok::<(), reqwest::Error>(())
    /// ```
    pub fn total_timeout(mut self, total: Duration) -> Self {
        self.total_timeout = Some(total);
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
        d.field("classifier", &self.classifier)
            .field("refusal_pause", &self.pause)
            .field("max_redirects", &self.max_redirects)
            .field("follow_cross_origin", &self.cross_origin)
            .field("total_timeout", &self.total_timeout)
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
        let mut request = request;
        let mut hops = 0;
        // The request's own timeout, else the middleware's total, bounds the whole chain, as
        // reqwest's bounds its own redirects: each hop gets what is left of it (zero once it
        // has passed, which reqwest answers with its timeout error). The client's own timeout
        // cannot be read from here (see `total_timeout`).
        let started = std::time::Instant::now();
        let bound = request.timeout().copied().or(self.total_timeout);
        let deadline = bound.and_then(|bound| started.checked_add(bound));
        loop {
            match (deadline, bound) {
                (Some(deadline), _) => {
                    *request.timeout_mut() =
                        Some(deadline.saturating_duration_since(std::time::Instant::now()));
                }
                // Beyond the clock's range: as good as no bound, sent as it is.
                (None, Some(bound)) => *request.timeout_mut() = Some(bound),
                (None, None) => {}
            }
            let resend = (self.max_redirects > 0)
                .then(|| request.try_clone())
                .flatten();
            let response = self.send(request, extensions, next.clone()).await?;
            let Some(next_request) = redirected(&response, resend, self.cross_origin) else {
                return Ok(response);
            };
            if hops == self.max_redirects {
                return Err(reqwest_middleware::Error::Middleware(anyhow::anyhow!(
                    "cutout-reqwest: too many redirects: {hops} followed, the next to {}",
                    next_request.url()
                )));
            }
            hops += 1;
            // The redirect's body is not read: its verdict was recorded on its headers.
            drop(response);
            request = next_request;
        }
    }
}

impl BreakerMiddleware {
    /// One hop: through its breaker (one, or its host's), the verdict on the headers or at the
    /// body's end.
    async fn send(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let per_host = matches!(self.guard, Guard::PerHost(_));
        let downstream = Downstream {
            rest: Some((next, extensions)),
            per_host,
        };
        let classifier = self.classifier.clone();
        // cutout-tower's services take the permit (and, per host, keep the key busy) and
        // record the verdict when the headers or the body's end decide it; dropping the
        // future or the body before then records nothing (a body dropped unread: the success its
        // headers promised).
        let result = match &self.guard {
            Guard::One(breaker) => {
                let mut service =
                    WholeResponseService::with_classifier(downstream, breaker.clone(), classifier);
                if let Some(pause) = self.pause {
                    service = service.refusal_pause(pause);
                }
                oneshot(service, request).await
            }
            Guard::PerHost(breakers) => {
                let mut service = KeyedService::new(
                    downstream,
                    breakers.clone(),
                    |request: &Request| crate::host_key(request.url()),
                    classifier,
                    self.pause,
                );
                // `Downstream` is always ready: no readiness to drive first.
                service.call_whole_response(request).await
            }
        };
        result.map(into_reqwest).map_err(from_tower)
    }
}

/// The next request when `response` is a redirect the middleware follows (see
/// [`BreakerMiddleware::max_redirects`]), made from `resend`, a copy of the request sent; a
/// redirect to another origin only when `cross_origin` (see
/// [`BreakerMiddleware::follow_cross_origin`]).
fn redirected(response: &Response, resend: Option<Request>, cross_origin: bool) -> Option<Request> {
    let status = response.status();
    if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = response
        .headers()
        .get(http::header::LOCATION)?
        .to_str()
        .ok()?;
    let target = response.url().join(location).ok()?;
    if !matches!(target.scheme(), "http" | "https") {
        return None;
    }
    // The origin as reqwest's policy compares it: scheme, host and port (default ports
    // filled in).
    let other_origin = crate::host_key(&target) != crate::host_key(response.url());
    if other_origin && !cross_origin {
        return None;
    }
    let mut request = resend?;
    let keeps_method = matches!(
        status,
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
    );
    // As reqwest's policy: a GET or HEAD stays what it is; any other method becomes a GET
    // without a body, unless the status keeps it (307, 308).
    let to_get = !keeps_method && !matches!(*request.method(), Method::GET | Method::HEAD);
    if to_get {
        *request.method_mut() = Method::GET;
        *request.body_mut() = None;
        let headers = request.headers_mut();
        for name in [
            http::header::CONTENT_TYPE,
            http::header::CONTENT_LENGTH,
            http::header::CONTENT_ENCODING,
            http::header::TRANSFER_ENCODING,
        ] {
            headers.remove(name);
        }
    }
    if other_origin || crate::host_key(&target) != crate::host_key(request.url()) {
        // As reqwest's `remove_sensitive_headers`.
        let headers = request.headers_mut();
        for name in [
            http::header::AUTHORIZATION,
            http::header::COOKIE,
            http::header::HeaderName::from_static("cookie2"),
            http::header::PROXY_AUTHORIZATION,
            http::header::WWW_AUTHENTICATE,
        ] {
            headers.remove(name);
        }
    }
    *request.url_mut() = target;
    Some(request)
}

/// A response with its body watched by a [`BreakerBody`], back as reqwest's, its URL kept.
fn into_reqwest(response: http::Response<BreakerBody<reqwest::Body, BodyEnd>>) -> Response {
    Response::from(response.map(reqwest::Body::wrap))
}

/// Waits for `service` to be ready, then calls it with `request`.
async fn oneshot<S>(mut service: S, request: Request) -> Result<S::Response, S::Error>
where
    S: Service<Request>,
{
    poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

/// The rest of the middleware chain (and the client) as a one-shot tower service, answering
/// `http::Response`s (their URL in their extensions, as reqwest keeps it).
struct Downstream<'a> {
    /// Taken by the one call.
    rest: Option<(Next<'a>, &'a mut Extensions)>,
    /// Whether a response from another host than the request's is an error (per host: the
    /// client followed a redirect below the middleware, and no breaker judged that hop).
    per_host: bool,
}

/// A redirect the client followed below a per-host middleware, to another host.
#[derive(Debug)]
struct FollowedBelow {
    from: Url,
    to: Url,
}

impl std::fmt::Display for FollowedBelow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cutout-reqwest: the client followed a redirect from {} to {} below the breaker \
             middleware, so no breaker judged that hop; build the client with \
             `redirect(reqwest::redirect::Policy::none())` and the middleware follows \
             redirects, each through its own host's breaker",
            self.from, self.to
        )
    }
}

impl std::error::Error for FollowedBelow {}

/// Whether `error` is a redirect the client followed below a per-host middleware.
pub(crate) fn followed_below(error: &reqwest_middleware::Error) -> bool {
    match error {
        reqwest_middleware::Error::Middleware(error) => {
            error.downcast_ref::<FollowedBelow>().is_some()
        }
        reqwest_middleware::Error::Reqwest(_) => false,
    }
}

impl<'a> Service<Request> for Downstream<'a> {
    type Response = ResponseHead;
    type Error = reqwest_middleware::Error;
    type Future =
        Pin<Box<dyn Future<Output = reqwest_middleware::Result<ResponseHead>> + Send + 'a>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let per_host = self.per_host;
        match self.rest.take() {
            Some((next, extensions)) => Box::pin(async move {
                let sent = request.url().clone();
                let response = next.run(request, extensions).await?;
                if per_host && crate::host_key(response.url()) != crate::host_key(&sent) {
                    return Err(reqwest_middleware::Error::Middleware(anyhow::Error::new(
                        FollowedBelow {
                            from: sent,
                            to: response.url().clone(),
                        },
                    )));
                }
                Ok(into_http(response))
            }),
            // `oneshot` calls it once; a second call is answered, not panicked on.
            None => Box::pin(async {
                Err(reqwest_middleware::Error::Middleware(anyhow::anyhow!(
                    "cutout-reqwest: the rest of the chain was already called for this request"
                )))
            }),
        }
    }
}

/// reqwest's response as an `http::Response`, its URL kept where reqwest's own conversion
/// back reads it.
fn into_http(response: Response) -> ResponseHead {
    let url = response.url().clone();
    let (mut parts, body) = http::Response::<reqwest::Body>::from(response).into_parts();
    if let Ok(with_url) = http::Response::builder().url(url).body(()) {
        parts.extensions.extend(with_url.into_parts().0.extensions);
    }
    http::Response::from_parts(parts, body)
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

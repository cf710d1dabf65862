//! The proxy listener's router: strict input, route by path prefix, prepare headers, forward through the cluster's stack.
//!
//! Before routing, a request must have exactly one valid `Host` (an authority without
//! user info, its port in 1–65535), an absolute-form target only if its authority is that
//! `Host`, and a path that stays inside the root once its dot segments (`.`, `..`, and their
//! percent-encoded forms `%2e`) are removed; `CONNECT` is never forwarded (405). Routing and
//! forwarding use the normalised path: `/accounts/../transfers/7` goes to the `/transfers`
//! route as `/transfers/7`, and `/../x` is a 400. Anything else is a 400 whose body is the
//! gateway's own words.
//!
//! Headers: hop-by-hop headers (`Connection` and the headers it names, `Keep-Alive`,
//! `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`) are removed in both directions.
//! `X-Forwarded-For` gets the client's address appended, `X-Forwarded-Proto` is `http` (`https`
//! on a TLS listener) and `X-Forwarded-Host` the client's `Host` (on HTTP/2, the request's
//! `:authority`); `TE: trailers` is kept (gRPC needs it); the upstream request's `Host` is the upstream's own
//! authority (set by the client from the URI). Bodies stream both ways.
//!
//! Limits (`[gateway]`, see [`Limits`](crate::config::Limits)): a body larger than
//! `max-request-body` is a 413 (at once from `Content-Length`, or when the streamed body
//! crosses it, through `http_body_util::Limited`), and `request-timeout` bounds the whole
//! request until its response head (504; the attempt is given up and counted by no breaker).
//! The client's body is watched ([`crate::client_body`]) so that its failures are answered as
//! the client's (400, 408, 413) and never counted against the cluster.
//!
//! Every request gets a request id (`x-request-id`, forwarded and returned) and, when its
//! answer ends, one access log line ([`crate::access`]). A client found gone before its answer
//! ended is never the upstream's failure ([`crate::attempt`]): when the handler's future or the
//! response body is dropped early, the attempt runs on in a task of its own (its head awaited,
//! its body drained), within the cluster's [`Detached`](crate::attempt::Detached) budget, so
//! that the breakers judge the upstream's own outcome; past the budget it is dropped, which
//! cancels it and records nothing.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::runtime::Handle;
use tokio::time::Sleep;
use tower::ServiceBuilder;

use crate::access::{Access, Decision, Outcome, REQUEST_ID};
use crate::attempt::{
    BodyTimeout, DeadlinePassed, DetachedSlot, Drained, Exchange, GiveUpCount, drain, find,
};
use crate::client_body::{Abandon, WatchedBody};
use crate::cluster::{BoxFuture, ClusterShared};
use crate::error::{ClientFault, ProxyError};
use crate::gateway::Gateway;
use crate::hosts::AllEjected;
use crate::refusal::{Refusal, note};
use crate::routing::Routing;
use crate::share::Source;

/// Marks a response that came from an upstream (as opposed to one the gateway made), so that
/// the limit log does not mistake an upstream's own 413 for the gateway's.
#[derive(Debug, Clone, Copy)]
struct Relayed;

/// The proxy: every path goes to the cluster of its longest matching route (404 when none).
///
/// Serve it with [`crate::server::serve_with`] (or axum's
/// `into_make_service_with_connect_info::<SocketAddr>()`) so that `X-Forwarded-For` carries
/// the client's address (without it the header is left as received).
pub fn app(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(gateway)
        .layer(ServiceBuilder::new().map_response(log_gateway_413))
}

/// One log line (rate-limited) per body-limit refusal, whichever part found it.
fn log_gateway_413(response: Response) -> Response {
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE
        && response.extensions().get::<Relayed>().is_none()
    {
        note(
            Refusal::BodyTooLarge,
            "proxy",
            "a request body was larger than max-request-body; answered 413",
        );
    }
    response
}

fn handle(State(gateway): State<Arc<Gateway>>, request: Request) -> HandleFuture {
    let routing = gateway.routing();
    let config = Arc::clone(routing.config());
    let mut access = Access::start(
        config.access_log,
        config.access_log_refused,
        request.method(),
        request.uri().path(),
        request.headers(),
    );
    let grpc = crate::grpc_answer::is_grpc_content(request.headers());
    match prepare(routing, request, &mut access) {
        Ok(running) => HandleFuture(Some(Phase::Running(Box::new(Running {
            access: Some(access),
            deadline: Box::pin(tokio::time::sleep(config.limits.request_timeout)),
            ..running
        })))),
        Err(error) => {
            let response = refuse(error, &mut access, grpc);
            HandleFuture(Some(Phase::Done(response)))
        }
    }
}

/// The answer to a request refused before it reached a cluster's stack, logged.
fn refuse(error: ProxyError, access: &mut Access, grpc: bool) -> Response {
    let outcome = match &error {
        ProxyError::BadRequest(why) => {
            note(Refusal::BadRequest, "proxy", format_args!("400: {why}"));
            Outcome::BadRequest
        }
        ProxyError::MethodNotAllowed => {
            note(Refusal::BadRequest, "proxy", "405: CONNECT");
            Outcome::BadRequest
        }
        ProxyError::MethodNotAllowedOnRoute(_) => {
            note(
                Refusal::BadRequest,
                "proxy",
                "405: a method the route does not forward",
            );
            Outcome::BadRequest
        }
        ProxyError::NoRoute => Outcome::NoRoute,
        ProxyError::RateLimited(_) => {
            note(
                Refusal::RateLimit,
                "proxy",
                "429: a client address passed rate-limit-per-source",
            );
            Outcome::RateLimited
        }
        ProxyError::Client(_) => Outcome::ClientFault,
        _ => Outcome::BadRequest,
    };
    answer(error, outcome, access, grpc)
}

/// `error` as the client's answer, with its request id, and the request's access log line;
/// in gRPC's shape for a gRPC request ([`crate::grpc_answer`]).
fn answer(error: ProxyError, outcome: Outcome, access: &mut Access, grpc: bool) -> Response {
    let mut response = if grpc {
        crate::grpc_answer::shaped(error.response())
    } else {
        error.into_response()
    };
    access.status(response.status().as_u16());
    response
        .headers_mut()
        .insert(REQUEST_ID, access.id().clone());
    access.finish(outcome);
    response
}

/// How long a detached attempt may still run once a whole attempt timeout passed since it was
/// detached, before it is dropped (counting nothing). A backstop: the attempt's own timers,
/// which started before it was detached, always end it first.
const DETACHED_BACKSTOP: Duration = Duration::from_secs(1);

/// The handler's future: the request on its way through its cluster's stack, under
/// `request-timeout`. Dropped before it answers (the client left), it detaches the call (see
/// [`detach_call`]).
struct HandleFuture(Option<Phase>);

enum Phase {
    Done(Response),
    Running(Box<Running>),
}

struct Running {
    call: BoxFuture<Result<http::Response<Body>, cutout_tower::Error>>,
    exchange: Arc<Exchange>,
    abandon: Option<Abandon>,
    access: Option<Access>,
    cluster: Arc<ClusterShared>,
    /// The route's header rules (its response rules apply to the upstream's answer).
    headers: Arc<crate::header_rules::HeaderRules>,
    deadline: Pin<Box<Sleep>>,
    /// The routing table the request was routed on, held to its end: a reload meanwhile
    /// changes nothing under it.
    _routing: Arc<Routing>,
    /// Whether the request is a gRPC call (the gateway's own answers in gRPC's shape).
    grpc: bool,
    /// The client's side of a WebSocket upgrade it asked for ([`crate::tunnel`]).
    upgrade: Option<crate::tunnel::ClientUpgrade>,
}

impl Future for HandleFuture {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let Some(state) = self.0.as_mut() else {
            // Polled after it answered: answer again rather than panic.
            return Poll::Ready(
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response(),
            );
        };
        let running = match state {
            Phase::Done(_) => {
                let Some(Phase::Done(response)) = self.0.take() else {
                    unreachable!("matched above")
                };
                return Poll::Ready(response);
            }
            Phase::Running(running) => running,
        };
        if let Poll::Ready(result) = running.call.as_mut().poll(cx) {
            let Some(Phase::Running(running)) = self.0.take() else {
                unreachable!("matched above")
            };
            return Poll::Ready(running.respond(result, false));
        }
        if running.deadline.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        // request-timeout: give the attempt up (counted for nothing) and answer 504.
        running.exchange.pass_deadline();
        let Some(Phase::Running(mut running)) = self.0.take() else {
            unreachable!("matched above")
        };
        let result = match running
            .call
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(result) => result,
            Poll::Pending => {
                running.exchange.set_gave_up(GiveUpCount::Deadline);
                Err(cutout_tower::Error::inner(DeadlinePassed))
            }
        };
        Poll::Ready(running.respond(result, true))
    }
}

impl Drop for HandleFuture {
    fn drop(&mut self) {
        if let Some(Phase::Running(running)) = self.0.take() {
            detach_call(running);
        }
    }
}

/// A detached slot of `cluster` and the runtime to run the attempt on, for an attempt whose
/// client left; `None` when it is to be cancelled instead (the budget is spent or 0, no
/// breaker guards the cluster, or there is no runtime). Records which in `exchange`.
fn detach(cluster: &ClusterShared, exchange: &Exchange) -> Option<(DetachedSlot, Handle)> {
    let runtime = Handle::try_current().ok();
    let slot = if cluster.guarded {
        cluster.detached.try_start()
    } else {
        None
    };
    match (slot, runtime) {
        (Some(slot), Some(runtime)) => {
            exchange.set_gave_up(GiveUpCount::Detached);
            Some((slot, runtime))
        }
        (slot, _) => {
            exchange.set_gave_up(GiveUpCount::Dropped);
            if cluster.guarded && slot.is_none() {
                note(
                    Refusal::MaxDetachedAttempts,
                    "proxy",
                    format_args!(
                        "a client of cluster {} left while {} of its attempts ran detached \
                         (max-detached-attempts = {}); its attempt was cancelled and counted \
                         nothing",
                        cluster.name,
                        cluster.detached.running(),
                        cluster.detached.max()
                    ),
                );
            }
            None
        }
    }
}

/// The client left before its answer's head: the call runs on detached, its response drained,
/// and its access line is written when it ends; or, without a slot, it is dropped here
/// (cancelled, nothing recorded).
fn detach_call(mut running: Box<Running>) {
    let Some(mut access) = running.access.take() else {
        return;
    };
    let Some((slot, runtime)) = detach(&running.cluster, &running.exchange) else {
        access.finish(Outcome::GaveUp);
        return;
    };
    let cluster = Arc::clone(&running.cluster);
    runtime.spawn(async move {
        let _slot = slot;
        let run = async {
            match running.call.as_mut().await {
                Ok(response) => {
                    let status = response.status();
                    let drained = drain(response.into_body(), cluster.detached.max_body()).await;
                    (
                        Decision::Admitted,
                        detached_outcome(drained, status, &cluster),
                        Some(status.as_u16()),
                    )
                }
                Err(error) => {
                    let (decision, outcome) = judge(&error, false);
                    (decision, outcome, None)
                }
            }
        };
        let (decision, outcome, status) =
            tokio::time::timeout(cluster.attempt_timeout + DETACHED_BACKSTOP, run)
                .await
                .unwrap_or((Decision::Admitted, Outcome::Timeout, None));
        if decision != Decision::Admitted {
            access.decide(decision);
        }
        access.detached_end(outcome, status);
        access.finish(Outcome::GaveUp);
        // The upload guard goes last: an upload still on its way fails only now.
        drop(running);
    });
}

/// The client left mid-answer: the rest of the body is drained detached, and the request's
/// access line is written when it ends; or, without a slot, it is dropped with `body`
/// (cancelled, nothing recorded).
fn detach_body(
    cluster: Arc<ClusterShared>,
    exchange: &Exchange,
    body: Body,
    status: StatusCode,
    abandon: Option<Abandon>,
    mut access: Access,
) {
    let Some((slot, runtime)) = detach(&cluster, exchange) else {
        access.finish(Outcome::GaveUp);
        return;
    };
    runtime.spawn(async move {
        let _slot = slot;
        let drained = tokio::time::timeout(
            cluster.attempt_timeout + DETACHED_BACKSTOP,
            drain(body, cluster.detached.max_body()),
        )
        .await;
        let outcome = match drained {
            Ok(drained) => detached_outcome(drained, status, &cluster),
            Err(_) => Outcome::Timeout,
        };
        drop(abandon);
        access.detached_end(outcome, None);
        access.finish(Outcome::GaveUp);
    });
}

/// What a detached attempt's drained response says, as the access log's `upstream` tells it.
fn detached_outcome(drained: Drained, status: StatusCode, cluster: &ClusterShared) -> Outcome {
    match drained {
        Drained::Whole if status.is_server_error() => Outcome::UpstreamError,
        Drained::Whole => Outcome::Ok,
        Drained::Broke(error) => body_outcome(&*error),
        Drained::Capped => {
            note(
                Refusal::MaxDetachedBody,
                "proxy",
                format_args!(
                    "a detached attempt of cluster {} passed max-detached-body ({} bytes); it \
                     was cancelled and counted nothing",
                    cluster.name,
                    cluster.detached.max_body()
                ),
            );
            Outcome::Capped
        }
    }
}

impl Running {
    fn respond(
        mut self: Box<Self>,
        result: Result<http::Response<Body>, cutout_tower::Error>,
        deadline: bool,
    ) -> Response {
        let Some(mut access) = self.access.take() else {
            return (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response();
        };
        match result {
            Ok(mut response) => {
                let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
                let upgrade = response.headers().get(header::UPGRADE).cloned();
                match (switched, self.upgrade.take()) {
                    (true, Some(client)) => client.splice(hyper::upgrade::on(&mut response)),
                    (true, None) => {
                        // Switched without being asked (the upgrade headers were removed):
                        // nothing to join it to.
                        let unasked: cutout_tower::BoxError =
                            "the upstream switched protocols unasked".into();
                        let error = ProxyError::Cluster {
                            cluster: self.cluster.name.clone(),
                            attempt_timeout: self.cluster.attempt_timeout,
                            error: Box::new(cutout_tower::Error::inner(unasked)),
                        };
                        return answer(error, Outcome::UpstreamError, &mut access, self.grpc);
                    }
                    (false, _) => {}
                }
                strip_hop_by_hop(response.headers_mut());
                if let (true, Some(upgrade)) = (switched, upgrade) {
                    let headers = response.headers_mut();
                    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                    headers.insert(header::UPGRADE, upgrade);
                }
                self.headers.response.apply(response.headers_mut());
                response.extensions_mut().insert(Relayed);
                response
                    .headers_mut()
                    .insert(REQUEST_ID, access.id().clone());
                let status = response.status();
                access.status(status.as_u16());
                // The upload guard lives as long as the response: if the client goes away
                // mid-way, it goes when the detached rest of the answer ends (or at once when the
                // attempt is dropped), and the request body still on its way to the upstream
                // fails (see client_body).
                let (abandon, exchange) = (self.abandon.take(), Arc::clone(&self.exchange));
                let cluster = Arc::clone(&self.cluster);
                response.map(|body| {
                    Body::new(Guarded {
                        body,
                        abandon,
                        exchange,
                        cluster,
                        access: Some(access),
                        status,
                    })
                })
            }
            Err(error) => {
                let (decision, outcome) = judge(&error, deadline);
                if decision != Decision::Admitted {
                    access.decide(decision);
                }
                if outcome == Outcome::Exhausted
                    && let Some(errno) = crate::exhaustion::exhausted(&error)
                {
                    note(
                        Refusal::Exhausted,
                        "proxy",
                        format_args!(
                            "{}: cannot reach an upstream: {}: the gateway's own limit (raise \
                             ulimit -n?), not counted against the cluster or its hosts; \
                             answered 503",
                            self.cluster.name,
                            crate::exhaustion::reason(errno)
                        ),
                    );
                }
                let error = if outcome == Outcome::Deadline {
                    note(
                        Refusal::RequestTimeout,
                        "proxy",
                        "a request passed request-timeout; answered 504",
                    );
                    ProxyError::Deadline
                } else {
                    ProxyError::Cluster {
                        cluster: self.cluster.name.clone(),
                        attempt_timeout: self.cluster.attempt_timeout,
                        error: Box::new(error),
                    }
                };
                if let ProxyError::Cluster { error, .. } = &error
                    && let Some(fault) = ClientFault::find(error)
                    && fault != ClientFault::TooLarge
                {
                    note(
                        Refusal::ClientBody,
                        "proxy",
                        format_args!("{}: {fault}", fault.status().as_u16()),
                    );
                }
                answer(error, outcome, &mut access, self.grpc)
            }
        }
    }
}

/// The breaker's decision and the outcome of a failed call through a cluster's stack.
fn judge(error: &cutout_tower::Error, deadline: bool) -> (Decision, Outcome) {
    if let Some(rejected) = error.rejection() {
        return (
            Decision::Refused(rejected.reason().as_str()),
            Outcome::Refused,
        );
    }
    if find::<AllEjected>(error).is_some() {
        return (Decision::Ejected, Outcome::Ejected);
    }
    if deadline || find::<DeadlinePassed>(error).is_some() {
        return (Decision::Admitted, Outcome::Deadline);
    }
    if ClientFault::find(error).is_some() {
        return (Decision::Admitted, Outcome::ClientFault);
    }
    if error.is_timeout() {
        return (Decision::Admitted, Outcome::Timeout);
    }
    if crate::exhaustion::is_exhausted(error) {
        return (Decision::Admitted, Outcome::Exhausted);
    }
    (Decision::Admitted, Outcome::Unreachable)
}

/// The one `Host` of a request, checked: present once, an authority without user info, a
/// port (if any) in 1–65535.
fn single_host(headers: &HeaderMap) -> Result<&str, ProxyError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Err(ProxyError::BadRequest(
            "exactly one Host header is required",
        ));
    };
    let host = host
        .to_str()
        .ok()
        .filter(|h| !h.is_empty() && !h.contains('@'))
        .filter(|h| h.parse::<http::uri::Authority>().is_ok())
        .filter(|h| crate::config::authority_port(h).is_ok())
        .ok_or(ProxyError::BadRequest(
            "the Host header is not a valid host",
        ))?;
    Ok(host)
}

/// `path` without dot segments (RFC 3986 §5.2.4, `%2e` read as `.`), or `None` when a `..`
/// would climb above the root or the path does not start with `/`.
pub fn normalise_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix('/')?;
    let mut kept: Vec<&str> = Vec::new();
    let mut trailing_slash = false;
    for segment in rest.split('/') {
        trailing_slash = false;
        match dot_segment(segment) {
            Some(1) => trailing_slash = true,
            Some(_) => {
                kept.pop()?;
                trailing_slash = true;
            }
            None => kept.push(segment),
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in &kept {
        out.push('/');
        out.push_str(segment);
    }
    if trailing_slash || out.is_empty() {
        out.push('/');
    }
    Some(out)
}

/// `Some(1)` for `.`, `Some(2)` for `..` (either may be written `%2e` / `%2E`).
fn dot_segment(segment: &str) -> Option<usize> {
    let mut rest = segment.as_bytes();
    let mut dots = 0;
    while !rest.is_empty() {
        if rest[0] == b'.' {
            rest = &rest[1..];
        } else if rest.len() >= 3 && rest[0] == b'%' && rest[1] == b'2' && rest[2] | 0x20 == b'e' {
            rest = &rest[3..];
        } else {
            return None;
        }
        dots += 1;
        if dots > 2 {
            return None;
        }
    }
    (dots > 0).then_some(dots)
}

/// Whether `method`'s name has no lowercase letter (`GET`, `PURGE`, `M-SEARCH`).
pub fn uppercase_method(method: &Method) -> bool {
    !method.as_str().bytes().any(|b| b.is_ascii_lowercase())
}

/// The `Allow` header of a route: its methods, or the common ones a route without `methods`
/// forwards ([`crate::error::ALLOWED_BY_DEFAULT`]).
fn allow_header(route: &crate::config::Route) -> http::HeaderValue {
    match &route.methods {
        Some(methods) => {
            let names: Vec<&str> = methods.iter().map(Method::as_str).collect();
            http::HeaderValue::from_str(&names.join(", "))
                .unwrap_or_else(|_| http::HeaderValue::from_static("GET"))
        }
        None => http::HeaderValue::from_static(crate::error::ALLOWED_BY_DEFAULT),
    }
}

/// Checks `request`, routes it and prepares its upstream request; returns the call under way
/// (its `access` and `deadline` filled in by the caller).
fn prepare(
    routing: Arc<Routing>,
    mut request: Request,
    access: &mut Access,
) -> Result<Running, ProxyError> {
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed);
    }
    // Method names are case-sensitive and every registered one is uppercase: a `get` is not
    // a GET, and forwarding it would let it past an upstream's method checks.
    if !uppercase_method(request.method()) {
        return Err(ProxyError::BadRequest(
            "a method name is uppercase (GET, not get)",
        ));
    }
    // Before routing: a client past its rate is answered at once, and no breaker sees it.
    // The client as `trusted-hops` says (the peer at the edge).
    if let (Some(rate), Some(ConnectInfo(peer))) = (
        routing.rate(),
        request.extensions().get::<ConnectInfo<SocketAddr>>(),
    ) {
        let hops = routing.config().trusted_hops;
        let client = crate::forwarded::client(request.headers(), peer.ip(), hops);
        rate.check(Source::of(client))
            .map_err(ProxyError::RateLimited)?;
    }
    // HTTP/2 says the authority in `:authority` (the target's), not in `Host`: it stands for
    // the Host header from here on.
    if request.version() == http::Version::HTTP_2
        && !request.headers().contains_key(header::HOST)
        && let Some(authority) = request.uri().authority()
        && let Ok(value) = HeaderValue::from_str(authority.as_str())
    {
        request.headers_mut().insert(header::HOST, value);
    }
    let host = single_host(request.headers())?;
    if let Some(authority) = request.uri().authority()
        && !authority.as_str().eq_ignore_ascii_case(host)
    {
        return Err(ProxyError::BadRequest(
            "the request target's authority is not the Host header",
        ));
    }
    let path = normalise_path(request.uri().path()).ok_or(ProxyError::BadRequest(
        "the path climbs above the root or is not a path",
    ))?;
    let (route, cluster) = routing.route(&path).ok_or(ProxyError::NoRoute)?;
    if !route.allows(request.method()) {
        return Err(ProxyError::MethodNotAllowedOnRoute(allow_header(route)));
    }
    let limit = routing.config().limits.max_request_body;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ProxyError::Client(ClientFault::TooLarge));
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let grpc = crate::grpc_answer::is_grpc_content(request.headers());
    let upgrade = crate::tunnel::ClientUpgrade::take(&mut request);
    let over_tls = request
        .extensions()
        .get::<crate::server::OverTls>()
        .is_some();
    let (mut parts, body) = request.into_parts();

    let forwarded_path = if route.strip_prefix {
        let prefix = route.prefix.trim_end_matches('/');
        let rest = path.strip_prefix(prefix).unwrap_or(&path);
        if rest.starts_with('/') {
            rest.to_owned()
        } else {
            format!("/{rest}")
        }
    } else {
        path
    };
    let path_and_query = match parts.uri.query() {
        Some(query) => format!("{forwarded_path}?{query}"),
        None => forwarded_path,
    };
    parts.uri = path_and_query
        .parse::<Uri>()
        .map_err(|_| ProxyError::BadRequest("the request target cannot be forwarded"))?;
    // hyper's client speaks HTTP/1.1 to upstreams whatever the client spoke.
    parts.version = http::Version::HTTP_11;

    let host = parts.headers.get(header::HOST).cloned();
    // `TE: trailers` says the client takes trailers (gRPC needs it said to its server); any
    // other TE is hop-by-hop and goes.
    let trailers = parts
        .headers
        .get(header::TE)
        .is_some_and(|te| te.as_bytes().eq_ignore_ascii_case(b"trailers"));
    let asked = parts.headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(&mut parts.headers);
    if let (Some(_), Some(asked)) = (&upgrade, asked) {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(header::UPGRADE, asked);
    }
    if trailers {
        parts
            .headers
            .insert(header::TE, HeaderValue::from_static("trailers"));
    }
    // The route's rules, before the gateway's own headers (which they cannot name).
    route.headers.request.apply(&mut parts.headers);
    parts.headers.remove(header::HOST);
    if let Some(addr) = client {
        crate::forwarded::rewrite(&mut parts.headers, addr.ip(), routing.config().trusted_hops);
    }
    parts.headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static(if over_tls { "https" } else { "http" }),
    );
    if let Some(host) = host {
        parts
            .headers
            .insert(HeaderName::from_static("x-forwarded-host"), host);
    }
    parts.headers.insert(REQUEST_ID, access.id().clone());

    let limited = Body::new(http_body_util::Limited::new(body, limit));
    let (body, watch, abandon) = WatchedBody::new(limited);
    let mut request = http::Request::from_parts(parts, Body::new(body));
    let exchange = cluster.exchange();
    exchange.watch_client_body(Arc::clone(&watch));
    request.extensions_mut().insert(watch);
    request.extensions_mut().insert(Arc::clone(&exchange));
    access.routed(Arc::clone(cluster.shared()), Arc::clone(&exchange));
    Ok(Running {
        call: cluster.call(request),
        exchange,
        abandon: Some(abandon),
        access: None,
        cluster: Arc::clone(cluster.shared()),
        headers: Arc::clone(&route.headers),
        deadline: Box::pin(tokio::time::sleep(Duration::ZERO)),
        _routing: Arc::clone(&routing),
        grpc,
        upgrade,
    })
}

/// A response body that keeps an [`Abandon`] guard alive, and finishes the request's
/// [`Access`] record when it ends. Dropped before its end (the client went away), it detaches
/// the rest of the body (see [`detach_body`]).
struct Guarded {
    body: Body,
    abandon: Option<Abandon>,
    exchange: Arc<Exchange>,
    cluster: Arc<ClusterShared>,
    access: Option<Access>,
    status: StatusCode,
}

impl Guarded {
    fn finish(&mut self, outcome: Outcome) {
        if let Some(mut access) = self.access.take() {
            access.finish(outcome);
        }
    }

    fn ended(&mut self) {
        let outcome = if self.status.is_server_error() {
            Outcome::UpstreamError
        } else {
            Outcome::Ok
        };
        self.finish(outcome);
    }
}

/// What a response body's error says about how the request ended.
fn body_outcome(error: &(dyn std::error::Error + 'static)) -> Outcome {
    if find::<BodyTimeout>(error).is_some() {
        Outcome::BodyTimeout
    } else if ClientFault::find(error).is_some() {
        Outcome::ClientFault
    } else {
        Outcome::BodyError
    }
}

impl HttpBody for Guarded {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.ended(),
            Poll::Ready(Some(Err(error))) => {
                let outcome = body_outcome(error);
                self.finish(outcome);
            }
            Poll::Ready(Some(Ok(_))) if self.body.is_end_stream() => self.ended(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if self.access.is_none() {
            return;
        }
        if self.body.is_end_stream() {
            self.ended();
            return;
        }
        let Some(access) = self.access.take() else {
            return;
        };
        // The client left mid-answer.
        detach_body(
            Arc::clone(&self.cluster),
            &self.exchange,
            std::mem::replace(&mut self.body, Body::empty()),
            self.status,
            self.abandon.take(),
            access,
        );
    }
}

/// Headers that apply to one connection only and are never forwarded.
pub(crate) const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes the hop-by-hop headers, including those named in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn dot_segments_are_removed_and_escapes_refused() {
        for (path, want) in [
            ("/", Some("/")),
            ("/a/b", Some("/a/b")),
            ("/a/./b", Some("/a/b")),
            ("/a/../b", Some("/b")),
            ("/a/b/..", Some("/a/")),
            ("/a/b/.", Some("/a/b/")),
            ("/a/%2e%2E/b", Some("/b")),
            ("/a/.%2e/b", Some("/b")),
            ("/a/...", Some("/a/...")),
            ("/a/%2e%2e%2e", Some("/a/%2e%2e%2e")),
            ("/a//b", Some("/a//b")),
            ("/a/%2f../b", Some("/a/%2f../b")),
            ("/..", None),
            ("/../a", None),
            ("/a/../../b", None),
            ("/%2e%2e/etc", None),
            ("", None),
            ("*", None),
        ] {
            assert_eq!(normalise_path(path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn host_must_be_single_and_valid() {
        let of = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::HOST, HeaderValue::from_str(v).unwrap());
            }
            single_host(&h).map(str::to_owned).ok()
        };
        assert_eq!(of(&["a.example"]).as_deref(), Some("a.example"));
        assert_eq!(of(&["a.example:8080"]).as_deref(), Some("a.example:8080"));
        assert_eq!(of(&["[::1]:8080"]).as_deref(), Some("[::1]:8080"));
        for bad in [
            &[][..],
            &["a", "b"],
            &[""],
            &["u@a"],
            &["a:0"],
            &["a:99999"],
            &["a b"],
            &["a/b"],
        ] {
            assert_eq!(of(bad), None, "{bad:?}");
        }
    }
}

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
//! `X-Forwarded-For` gets the client's address appended, `X-Forwarded-Proto` is `http` and
//! `X-Forwarded-Host` the client's `Host`; the upstream request's `Host` is the upstream's own
//! authority (set by the client from the URI). Bodies stream both ways.
//!
//! Limits (`[gateway]`, see [`Limits`](crate::config::Limits)): a body larger than
//! `max-request-body` is a 413 (tower-http's `RequestBodyLimitLayer`: at once from
//! `Content-Length`, or when the streamed body crosses it), and `request-timeout` bounds the
//! whole request until its response head (tower's `TimeoutLayer`: 504, counted by no breaker).
//! The client's body is watched ([`crate::client_body`]) so that its failures are answered as
//! the client's (400, 408, 413) and never counted against the cluster.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use cutout_tower::BoxError;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;

use crate::client_body::{Abandon, WatchedBody};
use crate::error::{ClientFault, ProxyError};
use crate::gateway::Gateway;
use crate::refusal::{Refusal, note};

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
    let limits = gateway.config().limits;
    Router::new().fallback(handle).with_state(gateway).layer(
        ServiceBuilder::new()
            .map_response(log_gateway_413)
            .layer(HandleErrorLayer::new(deadline_passed))
            .timeout(limits.request_timeout)
            .layer(RequestBodyLimitLayer::new(limits.max_request_body)),
    )
}

async fn deadline_passed(error: BoxError) -> Response {
    if error.is::<tower::timeout::error::Elapsed>() {
        note(
            Refusal::RequestTimeout,
            "proxy",
            "a request passed request-timeout; answered 504",
        );
        ProxyError::Deadline.into_response()
    } else {
        // The router itself never fails; a layer's error is an internal one.
        (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
    }
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

async fn handle(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    match proxy(&gateway, request).await {
        Ok(response) => response,
        Err(error) => {
            match &error {
                ProxyError::BadRequest(why) => {
                    note(Refusal::BadRequest, "proxy", format_args!("400: {why}"));
                }
                ProxyError::MethodNotAllowed => {
                    note(Refusal::BadRequest, "proxy", "405: CONNECT");
                }
                ProxyError::Stack(e) => {
                    if let Some(fault) = ClientFault::find(e)
                        && fault != ClientFault::TooLarge
                    {
                        note(
                            Refusal::ClientBody,
                            "proxy",
                            format_args!("{}: {fault}", fault.status().as_u16()),
                        );
                    }
                }
                _ => {}
            }
            error.into_response()
        }
    }
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

async fn proxy(gateway: &Gateway, request: Request) -> Result<Response, ProxyError> {
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed);
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
    let (route, cluster) = gateway.route(&path).ok_or(ProxyError::NoRoute)?;
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
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
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(header::HOST);
    if let Some(addr) = client {
        append_forwarded_for(&mut parts.headers, addr);
    }
    parts.headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static("http"),
    );
    if let Some(host) = host {
        parts
            .headers
            .insert(HeaderName::from_static("x-forwarded-host"), host);
    }

    let (body, watch, abandon) = WatchedBody::new(body);
    let mut request = http::Request::from_parts(parts, Body::new(body));
    request.extensions_mut().insert(watch);
    let mut response = cluster.call(request).await.map_err(ProxyError::Stack)?;
    strip_hop_by_hop(response.headers_mut());
    response.extensions_mut().insert(Relayed);
    // The guard lives as long as the response: if the client goes away mid-way, hyper drops
    // it and the request body still on its way to the upstream fails (see client_body).
    Ok(response.map(|body| {
        Body::new(Guarded {
            body,
            _abandon: abandon,
        })
    }))
}

/// A response body that keeps an [`Abandon`] guard alive.
struct Guarded {
    body: Body,
    _abandon: Abandon,
}

impl HttpBody for Guarded {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<bytes::Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Headers that apply to one connection only and are never forwarded.
const HOP_BY_HOP: [&str; 8] = [
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

fn append_forwarded_for(headers: &mut HeaderMap, addr: SocketAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let ip = addr.ip().to_string();
    let value = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(prior) if !prior.trim().is_empty() => format!("{prior}, {ip}"),
        _ => ip,
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
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

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        let addr: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "127.0.0.1");
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "127.0.0.1, 127.0.0.1");
    }
}

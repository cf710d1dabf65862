//! The proxy listener's router: route by path prefix, prepare headers, forward through the cluster's stack.
//!
//! Headers: hop-by-hop headers (`Connection` and the headers it names, `Keep-Alive`,
//! `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`) are removed in both directions.
//! `X-Forwarded-For` gets the client's address appended, `X-Forwarded-Proto` is `http` and
//! `X-Forwarded-Host` the client's `Host`; the upstream request's `Host` is the upstream's own
//! authority (set by the client from the URI). Bodies stream both ways.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;

use crate::error::ProxyError;
use crate::gateway::Gateway;

/// The proxy: every path goes to the cluster of its longest matching route (404 when none).
///
/// Serve it with `into_make_service_with_connect_info::<SocketAddr>()` so that
/// `X-Forwarded-For` carries the client's address (without it the header is left as received).
pub fn app(gateway: Arc<Gateway>) -> Router {
    Router::new().fallback(handle).with_state(gateway)
}

async fn handle(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    match proxy(&gateway, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn proxy(gateway: &Gateway, request: Request) -> Result<Response, ProxyError> {
    let (route, cluster) = gateway
        .route(request.uri().path())
        .ok_or(ProxyError::NoRoute)?;
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let (mut parts, body) = request.into_parts();

    let path_and_query = if route.strip_prefix {
        let prefix = route.prefix.trim_end_matches('/');
        let pq = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        let rest = pq.strip_prefix(prefix).unwrap_or(pq);
        if rest.starts_with('/') {
            rest.to_owned()
        } else {
            format!("/{rest}")
        }
    } else {
        parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned())
    };
    parts.uri = path_and_query
        .parse()
        .map_err(|e| ProxyError::BadRequest(format!("{e}")))?;
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

    let request = http::Request::from_parts(parts, body);
    let mut response = cluster.call(request).await.map_err(ProxyError::Stack)?;
    strip_hop_by_hop(response.headers_mut());
    Ok(response.map(Body::new))
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
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        let addr: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "127.0.0.1");
        append_forwarded_for(&mut h, addr);
        assert_eq!(h["x-forwarded-for"], "127.0.0.1, 127.0.0.1");
    }
}

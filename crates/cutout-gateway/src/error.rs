//! Errors: configuration and startup errors (with stable codes), and the proxy's error → HTTP status mapping.
//!
//! | code | meaning |
//! |---|---|
//! | `GW-CFG-001` | the file is not valid TOML |
//! | `GW-CFG-002` | unknown key or section |
//! | `GW-CFG-003` | a value of the wrong type |
//! | `GW-CFG-004` | a value that cannot be read (address, duration, URL, prefix, token, a health check's path) |
//! | `GW-CFG-005` | a required key or section is missing (at least one cluster, its upstreams, a route's prefix and cluster, a health check's path) |
//! | `GW-CFG-006` | a duplicate route prefix |
//! | `GW-CFG-007` | a name that refers to no cluster |
//! | `GW-CFG-008` | the admin and proxy listeners are the same address |
//! | `GW-CFG-009` | a number out of its allowed range: a port (listeners 0–65535, upstreams 1–65535), a connection count, a size, a percentage (`max-ejection-percent`, `panic-threshold`, `retry-budget-percent`: 0–100), a count (`min-concurrent-retries`, `max-detached-attempts`: 0–1048576), a health check's threshold (1–1000) |
//! | `GW-CFG-010` | two values that contradict each other (`idle-timeout` shorter than `request-timeout`; a health check's `timeout` or `jitter` longer than its `interval`; `h2c` with `tls-cert`; `protocol = "h2c"` with an `https://` upstream) |
//! | `GW-CFG-011` | a duplicate upstream in a cluster (each host has its own breaker) |
//! | `GW-CFG-012` | a file a key names cannot be read (`tls-cert`, `tls-key`, `tls-roots`, `tls-client-cert`, `tls-client-key`) |
//! | `GW-CFG-013` | a file holds no usable PEM for its key: no certificate, no private key, roots without a CA certificate, a key that is not its certificate's |
//! | `CUT-CFG-…` | cutout's breaker settings codes, inside `[breakers]` (see `cutout::config`) |
//! | `FLEET-URL-…`, `FLEET-CFG-…` | cutout-fleet's codes, inside `[fleet]`: the Redis URL (no scheme, another scheme, the port, malformed), the pod's id or the prefix, the TLS CA file (see cutout-fleet's README) |
//! | `GW-RUN-001` | the configuration file cannot be read |
//! | `GW-RUN-002` | a listener cannot bind its address (in use, not permitted) |
//! | `GW-RUN-003` | a reload was asked of a gateway started without a configuration file |
//! | `GW-WARN-001` | (a warning) the admin listener is off loopback and has no `admin-token` |
//! | `GW-WARN-002` | (a warning) the connection limits (and the detached attempts) can need more file descriptors than `ulimit -n` allows |
//! | `GW-WARN-003` | (a warning) the file sets `give-up-floor`, which is deprecated and ignored (a client's give-up no longer counts against the upstream) |
//! | `GW-WARN-004` | (a warning) a reload changed a key that takes effect only at a restart (named); the running value stays, the rest of the file is applied |
//!
//! Proxy responses for errors ([`ProxyError::into_response`]). None of them names an upstream
//! address: a refusal names the cluster.
//!
//! | error | status | counted by the breaker |
//! |---|---|---|
//! | no route for the path | 404 Not Found | no |
//! | bad request target or `Host` (missing, duplicate, invalid; an absolute-form target whose authority is not `Host`; a path escaping the root with `..`) | 400 Bad Request | no |
//! | `CONNECT` | 405 Method Not Allowed | no |
//! | a method the route does not forward (`TRACE`, `TRACK` unless its `methods` name them; any outside its `methods`) | 405 Method Not Allowed with `Allow` | no |
//! | a method name with a lowercase letter (`get`) | 400 Bad Request | no |
//! | the client's address passed `rate-limit-per-source` | 429 Too Many Requests with `Retry-After` | no |
//! | the client's body is broken: bad chunked framing, cut short, the client vanished ([`ClientFault::Body`]) | 400 Bad Request (or nothing, when the client is gone) | no |
//! | the upstream was waiting for the client's body when the attempt timed out ([`ClientFault::Stalled`]) | 408 Request Timeout | no |
//! | the body is larger than `max-request-body` ([`ClientFault::TooLarge`]) | 413 Content Too Large | no |
//! | the cluster's breaker refuses | 503 Service Unavailable with `Retry-After` | (a refusal) |
//! | every host of the cluster is ejected or isolated | 503 Service Unavailable with `Retry-After` (the soonest host) | no (the hosts' refusals) |
//! | the attempt timed out before the response head | 504 Gateway Timeout | yes, a failure (the host's and, unless ejection absorbs it, the cluster's) |
//! | the whole-request deadline (`request-timeout`) passed | 504 Gateway Timeout | no (the gateway gave up) |
//! | the upstream cannot be reached / the connection failed | 502 Bad Gateway (after a retry on another host that failed too, or when none could be made) | yes, a failure (the host's; the cluster's only when no other host is serving, see [`crate::hosts`]) |
//! | the body broke or stalled past the attempt timeout, after the head was sent | (the connection is closed mid-body) | yes, a failure |
//! | the client went away | (nothing: nobody to answer) | never as such: its attempt runs on detached and counts its own outcome (a success, a 5xx, a timeout…), or, past `max-detached-attempts`, is cancelled and counts nothing |
//!
//! Durations in these answers are written as people write them (`retry after 30s`, `300ms`).

use std::fmt;
use std::net::SocketAddr;

use axum::response::{IntoResponse, Response};
use cutout::HumanDuration;
use cutout_tower::respond;
use http::StatusCode;

use crate::hosts::AllEjected;

/// A configuration error: a stable code, the key (dotted path), the value as written and what
/// is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    code: String,
    key: String,
    value: String,
    detail: String,
}

impl ConfigError {
    /// An error with `code` at `key` for `value`.
    pub fn new(code: &str, key: &str, value: &str, detail: &str) -> ConfigError {
        ConfigError {
            code: code.to_owned(),
            key: key.to_owned(),
            value: value.to_owned(),
            detail: detail.to_owned(),
        }
    }

    /// The stable code (`GW-CFG-004`, `CUT-CFG-001`, …).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The key, as a dotted path (`gateway.listen`, `clusters.a.upstreams`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value as written (empty when missing).
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.code.starts_with("CUT-") {
            // cutout's message already names the code, key, value and section.
            return write!(f, "in [breakers]: {}", self.detail);
        }
        write!(f, "{}: ", self.code)?;
        match (self.key.is_empty(), self.value.is_empty()) {
            (true, _) => write!(f, "{}", self.detail),
            (false, true) => write!(f, "{}: {}", self.key, self.detail),
            (false, false) => write!(f, "{} = {}: {}", self.key, self.value, self.detail),
        }
    }
}

impl std::error::Error for ConfigError {}

/// An error that stops the gateway from starting.
#[derive(Debug)]
pub enum StartError {
    /// The configuration is invalid.
    Config(ConfigError),
    /// The configuration file cannot be read (`GW-RUN-001`).
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A listener cannot bind (`GW-RUN-002`).
    Bind {
        /// Which listener (`proxy`, `admin`, `demo upstream`).
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "invalid configuration: {e}"),
            StartError::Read { path, source } => {
                write!(f, "GW-RUN-001: cannot read configuration {path}: {source}")
            }
            StartError::Bind { what, addr, source } => write!(
                f,
                "GW-RUN-002: cannot listen on {addr} ({what}): {source}{}",
                if source.kind() == std::io::ErrorKind::AddrInUse {
                    "; another process uses this port: choose another in the configuration"
                } else {
                    ""
                }
            ),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Config(e) => Some(e),
            StartError::Read { source, .. } | StartError::Bind { source, .. } => Some(source),
        }
    }
}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

/// What went wrong on the client's side of a forwarded request. The breaker never counts it:
/// the upstream was healthy as far as this request could tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientFault {
    /// The client's body could not be read: bad chunked framing, shorter than its
    /// `Content-Length`, or the client went away while sending it. Answered 400.
    Body,
    /// The attempt timed out while the upstream was waiting for the client's body. Answered
    /// 408.
    Stalled,
    /// The body is larger than `max-request-body`. Answered 413.
    TooLarge,
}

impl ClientFault {
    /// The status the fault is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            ClientFault::Body => StatusCode::BAD_REQUEST,
            ClientFault::Stalled => StatusCode::REQUEST_TIMEOUT,
            ClientFault::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// Finds a client fault in `error` or its source chain.
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<ClientFault> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(fault) = error.downcast_ref::<ClientFault>() {
                return Some(*fault);
            }
            next = error.source();
        }
        None
    }
}

impl fmt::Display for ClientFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientFault::Body => "the request body could not be read",
            ClientFault::Stalled => "the request body stopped arriving",
            ClientFault::TooLarge => "the request body is larger than the gateway accepts",
        })
    }
}

impl std::error::Error for ClientFault {}

/// Why the proxy could not return an upstream's response.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProxyError {
    /// No route matches the path.
    NoRoute,
    /// The request could not be turned into an upstream request: its target or `Host`. The
    /// text is sent to the client, so it never holds anything but the gateway's own words.
    BadRequest(&'static str),
    /// A method the gateway never forwards (`CONNECT`).
    MethodNotAllowed,
    /// A method the route does not forward (`TRACE` and `TRACK` by default, or one outside its
    /// `methods`): 405 with this `Allow`.
    MethodNotAllowedOnRoute(http::HeaderValue),
    /// The client's side of the request failed.
    Client(ClientFault),
    /// The client's address passed `rate-limit-per-source`; a token is back after this long.
    RateLimited(std::time::Duration),
    /// The whole-request deadline passed.
    Deadline,
    /// The breaker stack failed: a refusal, a timeout or a forwarding error (or, inside it, a
    /// [`ClientFault`] found while forwarding).
    Stack(cutout_tower::Error),
    /// A cluster's stack failed (as [`ProxyError::Stack`], with the cluster named in the
    /// answer).
    Cluster {
        /// The cluster.
        cluster: String,
        /// Its attempt timeout.
        attempt_timeout: std::time::Duration,
        /// What failed (boxed: the error is large, and this is the cold path).
        error: Box<cutout_tower::Error>,
    },
}

impl ProxyError {
    /// The HTTP status this error is answered with (see the module's table).
    pub fn status(&self) -> StatusCode {
        self.response().status()
    }

    /// The answer, its body the gateway's words (what [`IntoResponse`] sends).
    pub fn response(&self) -> http::Response<String> {
        match self {
            ProxyError::NoRoute => text(StatusCode::NOT_FOUND, "no route for this path\n"),
            ProxyError::BadRequest(why) => {
                text(StatusCode::BAD_REQUEST, &format!("bad request: {why}\n"))
            }
            ProxyError::MethodNotAllowed => {
                let mut response = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the gateway does not forward CONNECT\n",
                );
                response.headers_mut().insert(
                    http::header::ALLOW,
                    http::HeaderValue::from_static(ALLOWED_BY_DEFAULT),
                );
                // A client that asked for a tunnel has nothing else to say on this connection.
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
                response
            }
            ProxyError::MethodNotAllowedOnRoute(allow) => {
                let mut response = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "this route does not forward this method\n",
                );
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, allow.clone());
                response
            }
            ProxyError::Client(fault) => client_fault(*fault),
            ProxyError::RateLimited(wait) => {
                let mut response = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many requests from this address (rate-limit-per-source)\n",
                );
                response.headers_mut().insert(
                    http::header::RETRY_AFTER,
                    http::HeaderValue::from(crate::rate::retry_after_secs(*wait)),
                );
                response
            }
            ProxyError::Deadline => text(
                StatusCode::GATEWAY_TIMEOUT,
                "the gateway's deadline for this request passed\n",
            ),
            ProxyError::Stack(error) => {
                if let Some(fault) = ClientFault::find(error) {
                    client_fault(fault)
                } else if error.is_rejected() || error.is_timeout() {
                    respond::error_response(error)
                } else {
                    text(
                        StatusCode::BAD_GATEWAY,
                        "the upstream could not be reached\n",
                    )
                }
            }
            ProxyError::Cluster {
                cluster,
                attempt_timeout,
                error,
            } => {
                if let Some(fault) = ClientFault::find(error) {
                    client_fault(fault)
                } else if let Some(rejected) = error.rejection() {
                    refused(
                        &format!("{cluster} is refusing calls ({})", rejected.reason()),
                        rejected.retry_after(),
                    )
                } else if let Some(all) = crate::attempt::find::<AllEjected>(error) {
                    refused(
                        &format!("every upstream host of {cluster} is ejected"),
                        all.retry_after,
                    )
                } else if let Some(errno) = crate::exhaustion::exhausted(error) {
                    refused(
                        &format!(
                            "the gateway is out of resources reaching {cluster} ({}), not the \
                             upstream's failure",
                            crate::exhaustion::reason(errno)
                        ),
                        Some(EXHAUSTED_RETRY_AFTER),
                    )
                } else if error.is_timeout() {
                    text(
                        StatusCode::GATEWAY_TIMEOUT,
                        &format!(
                            "{cluster}: the upstream did not answer within the attempt timeout \
                             ({})\n",
                            HumanDuration(*attempt_timeout)
                        ),
                    )
                } else {
                    text(
                        StatusCode::BAD_GATEWAY,
                        &format!("{cluster}: the upstream could not be reached\n"),
                    )
                }
            }
        }
    }
}

/// The `Allow` of a refusal by a route without `methods` (or of `CONNECT`): the common methods
/// such a route forwards.
pub const ALLOWED_BY_DEFAULT: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// The `Retry-After` of the gateway's own exhaustion ([`crate::exhaustion`]): a descriptor
/// frees as soon as a request in flight ends.
const EXHAUSTED_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A 503 saying `what`, with `Retry-After` (whole seconds, rounded up) when the end is known.
pub(crate) fn refused(
    what: &str,
    retry_after: Option<std::time::Duration>,
) -> http::Response<String> {
    let body = match retry_after {
        Some(after) => format!("{what}; retry after {}\n", HumanDuration(after)),
        None => format!("{what}\n"),
    };
    let mut response = text(StatusCode::SERVICE_UNAVAILABLE, &body);
    if let Some(after) = retry_after {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from(respond::retry_after_secs(after)),
        );
    }
    response
}

fn client_fault(fault: ClientFault) -> http::Response<String> {
    let mut response = text(fault.status(), &format!("{fault}\n"));
    // The rest of the body is unread: the connection cannot carry another request.
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

fn text(status: StatusCode, body: &str) -> http::Response<String> {
    let mut response = http::Response::new(body.to_owned());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        self.response().into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(ProxyError::NoRoute.status(), 404);
        assert_eq!(ProxyError::BadRequest("x").status(), 400);
        assert_eq!(ProxyError::MethodNotAllowed.status(), 405);
        assert_eq!(ProxyError::Deadline.status(), 504);
        assert_eq!(ProxyError::Client(ClientFault::Body).status(), 400);
        assert_eq!(ProxyError::Client(ClientFault::Stalled).status(), 408);
        assert_eq!(ProxyError::Client(ClientFault::TooLarge).status(), 413);
        // A client fault inside the stack's error wins over the timeout it caused.
        let inside = cutout_tower::Error::inner(ClientFault::Stalled);
        assert_eq!(ProxyError::Stack(inside).status(), 408);
        let timeout = cutout_tower::Error::inner(tower::timeout::error::Elapsed::new());
        assert_eq!(ProxyError::Stack(timeout).status(), 504);
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            ProxyError::Stack(cutout_tower::Error::inner(io)).status(),
            502
        );
    }

    #[test]
    fn config_error_display() {
        let e = ConfigError::new("GW-CFG-004", "gateway.listen", "x", "allowed an address");
        assert_eq!(
            e.to_string(),
            "GW-CFG-004: gateway.listen = x: allowed an address"
        );
    }
}

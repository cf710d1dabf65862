//! Errors: configuration and startup errors (with stable codes), and the proxy's error → HTTP status mapping.
//!
//! | code | meaning |
//! |---|---|
//! | `GW-CFG-001` | the file is not valid TOML |
//! | `GW-CFG-002` | unknown key or section |
//! | `GW-CFG-003` | a value of the wrong type |
//! | `GW-CFG-004` | a value that cannot be read (address, duration, URL, prefix, token) |
//! | `GW-CFG-005` | a required key or section is missing |
//! | `GW-CFG-006` | a duplicate route prefix |
//! | `GW-CFG-007` | a name that refers to no cluster |
//! | `GW-CFG-008` | the admin and proxy listeners are the same address |
//! | `CUT-CFG-…` | cutout's breaker settings codes, inside `[breakers]` (see `cutout::config`) |
//! | `GW-RUN-001` | the configuration file cannot be read |
//! | `GW-RUN-002` | a listener cannot bind its address (in use, not permitted) |
//!
//! Proxy responses for errors ([`ProxyError::into_response`]):
//!
//! | error | status |
//! |---|---|
//! | no route for the path | 404 Not Found |
//! | the cluster's breaker refuses | 503 Service Unavailable with `Retry-After` |
//! | the attempt timed out | 504 Gateway Timeout |
//! | the upstream cannot be reached / the connection failed | 502 Bad Gateway |
//! | the request cannot be forwarded (bad URI) | 400 Bad Request |

use std::fmt;
use std::net::SocketAddr;

use axum::response::{IntoResponse, Response};
use cutout_tower::respond;
use http::StatusCode;

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

/// Why the proxy could not return an upstream's response.
#[derive(Debug)]
pub enum ProxyError {
    /// No route matches the path.
    NoRoute,
    /// The request could not be turned into an upstream request.
    BadRequest(String),
    /// The breaker stack failed: a refusal, a timeout or a forwarding error.
    Stack(cutout_tower::Error),
}

impl ProxyError {
    /// The HTTP status this error is answered with (see the module's table).
    pub fn status(&self) -> StatusCode {
        self.response().status()
    }

    fn response(&self) -> http::Response<String> {
        match self {
            ProxyError::NoRoute => text(StatusCode::NOT_FOUND, "no route for this path\n"),
            ProxyError::BadRequest(why) => {
                text(StatusCode::BAD_REQUEST, &format!("bad request: {why}\n"))
            }
            ProxyError::Stack(error) => {
                if error.is_rejected() || error.is_timeout() {
                    respond::error_response(error)
                } else {
                    text(
                        StatusCode::BAD_GATEWAY,
                        "the upstream could not be reached\n",
                    )
                }
            }
        }
    }
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
        assert_eq!(ProxyError::BadRequest("x".into()).status(), 400);
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

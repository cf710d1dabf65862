//! The gateway's own answers to gRPC requests (a refusal, a timeout, a bad gateway) in gRPC's shape: HTTP 200, `grpc-status` by gRPC's HTTP mapping, `grpc-message` the gateway's words.
//!
//! A gRPC client reads a call's outcome from `grpc-status`, not from the HTTP status: an open
//! breaker's plain-text 503 reaches a tonic client as `INTERNAL` ("protocol error"), where
//! gRPC's own mapping of 503 says `UNAVAILABLE`, the code a client retries or fails over on.
//! So a request whose `content-type` is `application/grpc…` gets the gateway's answers as
//! trailers-only responses: status 200, `content-type: application/grpc`, `grpc-status` from
//! the HTTP status (400 `INTERNAL`, 401 `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 404
//! `UNIMPLEMENTED`, 429, 502, 503 and 504 `UNAVAILABLE`, others `UNKNOWN`: gRPC's
//! "HTTP to gRPC status code mapping"), `grpc-message` the text the gateway would have sent,
//! percent-encoded as gRPC says. The other headers (`Retry-After`, `x-request-id`) stay. The
//! access log and the metrics keep the gateway's HTTP status.

use axum::body::Body;
use axum::response::Response;
use cutout_tower::grpc::Code;
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

/// Whether headers are a gRPC call's or answer's (`content-type` is `application/grpc` or
/// `application/grpc+…`).
pub fn is_grpc_content(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// `answer` (the gateway's own, with a text body) as a trailers-only gRPC response.
pub fn shaped(answer: http::Response<String>) -> Response {
    let (mut parts, text) = answer.into_parts();
    let code = Code::from_http_status(parts.status);
    parts.status = StatusCode::OK;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    parts.headers.insert(
        "grpc-status",
        HeaderValue::from_str(&code.as_i32().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("2")),
    );
    if let Ok(message) = HeaderValue::from_str(&percent_encoded(text.trim())) {
        parts.headers.insert("grpc-message", message);
    }
    Response::from_parts(parts, Body::empty())
}

/// `text` as gRPC's `grpc-message` wants it: bytes outside printable ASCII, and `%`, as
/// `%XX`.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_becomes_unavailable_and_keeps_its_headers() {
        let mut answer = http::Response::new("cluster a is open; retry after 30s\n".to_owned());
        *answer.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        answer
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("30"));
        let shaped = shaped(answer);
        assert_eq!(shaped.status(), 200);
        let h = shaped.headers();
        assert_eq!(h["grpc-status"], "14");
        assert_eq!(h["grpc-message"], "cluster a is open; retry after 30s");
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["retry-after"], "30");
    }

    #[test]
    fn grpc_requests_are_told_by_their_content_type() {
        let mut h = HeaderMap::new();
        assert!(!is_grpc_content(&h));
        for (value, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/GRPC", true),
            ("application/grpc-web", false),
            ("application/json", false),
        ] {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_grpc_content(&h), grpc, "{value}");
        }
        assert_eq!(percent_encoded("50% é"), "50%25 %C3%A9");
    }
}

//! The load check's baseline: a bare axum handler answering every request with 503.

use axum::Router;
use axum::response::IntoResponse;
use http::{StatusCode, header};

/// A router answering 503 with `Retry-After: 30` to every request, doing nothing else.
pub fn app() -> Router {
    Router::new().fallback(|| async {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "30")],
            "unavailable\n",
        )
            .into_response()
    })
}

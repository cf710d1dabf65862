//! The admin listener's router: health, Prometheus metrics, breaker snapshots and controls, the status page.
//!
//! | endpoint | answer |
//! |---|---|
//! | `GET /` | the live status page (HTML; no data in it, so no token needed) |
//! | `GET /healthz` | per-cluster health as JSON; 200 while no breaker is unhealthy (open or isolated), else 503. Half-open / recovering count as degraded: still 200. No token needed (load balancers probe it) |
//! | `GET /metrics` | Prometheus text exposition (503 if another metrics recorder owns the process) |
//! | `GET /breakers` | JSON: every breaker's snapshot and the recent transitions |
//! | `POST /breakers/{id}/isolate`, `POST /breakers/{id}/reset` | 200 with the new snapshot; unknown id → 404 (with a suggestion), unknown action → 404 |
//!
//! With a token configured, every endpoint but `/` and `/healthz` requires
//! `Authorization: Bearer <token>`: missing → 401 with `WWW-Authenticate: Bearer`, wrong → 403.
//! The status page reads the token from its URL fragment (`/#token=…`, never sent to the server)
//! and sends it with each poll.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use cutout::{Breaker, Health};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::gateway::Gateway;

/// The admin API (see the module docs for the endpoints).
pub fn app(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/breakers", get(breakers))
        .route("/breakers/{id}/{action}", post(control))
        .with_state(gateway)
}

async fn page() -> Html<&'static str> {
    Html(crate::status_page::HTML)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json_response(status, &json!({ "error": message }))
}

/// The 401/403 answer when a token is configured and the request lacks it.
fn authorize(gateway: &Gateway, headers: &HeaderMap) -> Option<Response> {
    // No token configured: everything is open (the listener is loopback by default).
    let token = gateway.config().admin_token.as_deref()?;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        None => {
            let mut response = error(StatusCode::UNAUTHORIZED, "a bearer token is required");
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"cutout-gateway\""),
            );
            Some(response)
        }
        Some(given) if constant_time_eq(given.trim().as_bytes(), token.as_bytes()) => None,
        Some(_) => Some(error(StatusCode::FORBIDDEN, "wrong bearer token")),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn healthz(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut clusters = serde_json::Map::new();
    let mut unhealthy = false;
    for (name, cluster) in gateway.clusters() {
        let breaker = cluster.breaker();
        let health = breaker.health();
        unhealthy |= health == Health::Unhealthy;
        clusters.insert(
            name.clone(),
            json!({ "health": health.as_str(), "state": breaker.state().as_str() }),
        );
    }
    let status = if unhealthy {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    json_response(
        status,
        &json!({
            "status": if unhealthy { "unhealthy" } else { "ok" },
            "clusters": clusters,
        }),
    )
}

async fn metrics(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    match gateway.metrics() {
        Some(handle) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            handle.render(),
        )
            .into_response(),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "another metrics recorder is installed in this process",
        ),
    }
}

/// One breaker's snapshot as JSON (durations in milliseconds, rates as fractions).
pub fn breaker_json(breaker: &Breaker, upstreams: &[http::Uri]) -> Value {
    let s = breaker.snapshot();
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    json!({
        "id": breaker.id().as_str(),
        "state": s.state.as_str(),
        "health": s.state.health().as_str(),
        "failure_rate": s.failure_rate,
        "slow_rate": s.slow_rate,
        "calls": s.calls,
        "failures": s.failures,
        "slow": s.slow,
        "consecutive_failures": s.consecutive_failures,
        "consecutive_opens": s.consecutive_opens,
        "current_break_ms": ms(s.current_break),
        "retry_after_ms": ms(breaker.break_remaining()),
        "normal_latency_ms": ms(s.normal_latency),
        "normal_failure_rate": s.normal_failure_rate,
        "upstreams": upstreams.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

async fn breakers(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    let breakers: Vec<Value> = gateway
        .clusters()
        .values()
        .map(|c| breaker_json(c.breaker(), c.upstreams()))
        .collect();
    let transitions: Vec<Value> = gateway
        .transitions()
        .iter()
        .rev()
        .map(|t| {
            json!({
                "at_unix_ms": t.at_unix_ms,
                "breaker": t.breaker,
                "from": t.from,
                "to": t.to,
                "reason": t.reason,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({ "breakers": breakers, "transitions": transitions }),
    )
}

async fn control(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    let result = match action.as_str() {
        "isolate" => gateway.registry().isolate(&id),
        "reset" => gateway.registry().reset(&id),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                &format!("unknown action {action:?}; allowed isolate, reset"),
            );
        }
    };
    match result {
        Ok(()) => {
            let cluster = &gateway.clusters()[&id];
            json_response(
                StatusCode::OK,
                &breaker_json(cluster.breaker(), cluster.upstreams()),
            )
        }
        Err(e) if e.is_unknown_id() => error(StatusCode::NOT_FOUND, &e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

//! The admin listener's router: health, Prometheus metrics, breaker snapshots and controls, the status page.
//!
//! | endpoint | answer |
//! |---|---|
//! | `GET /` | the live status page (HTML; no data in it, so no token needed) |
//! | `GET /livez` | 200 while the process answers (no token) |
//! | `GET /readyz` | 200 once both listeners are bound and serving, 503 before and while draining; upstream state is not readiness (no token) |
//! | `GET /healthz` | per-cluster health as JSON, always 200: `status` is `ok`, or `degraded` while a cluster is not closed. With `healthz-strict = true`, 503 while a cluster is open or isolated (`status` `unhealthy`); half-open / recovering stay 200. With `[fleet]`, a `fleet` field (`status` `connecting`, `connected`, `degraded` or `off`, `connected`, the error while degraded): Redis down changes that field and nothing else. No token (load balancers probe it) |
//! | `GET /metrics` | Prometheus text exposition (503 if another metrics recorder owns the process); every breaker's gauges are first brought to what `/breakers` says (`Breaker::refresh_metrics`) |
//! | `GET /breakers` | JSON: every cluster's breaker, its hosts' breakers and statistics, the recent transitions and manual actions, the last reload, the fleet's health (see [`breakers_json`]) |
//! | `POST /reload` | reloads the configuration file ([`crate::reload`]): 200 with what was rebuilt (`rebuilt`, `added`, `removed`, `changed`, `restart_required`); a file that does not pass changes nothing and is answered 422 with its `code`, `key` and `error`; 409 (`GW-RUN-003`) when the gateway was not started from a file. Token-guarded like the controls. The outcome is also `reload` in `/breakers` |
//! | `POST /breakers/{id}/isolate`, `/reset`, `/open-for?duration=30s` | 200 with the new snapshot; `id` is a cluster, or a host as `<cluster>/<host>:<port>` (write the `/` as `%2F`); unknown id → 404 (with a suggestion), unknown action → 404, a bad duration → 400, open-for on an isolated breaker → 409; other methods → 405. Each is remembered as a manual action (shown on the page) and logged |
//!
//! Every request passes [`guard`] first (403 otherwise):
//! - **Host** (DNS-rebinding defence), when the listener is bound to a loopback address:
//!   exactly one `Host`, naming a loopback host (`localhost`, `127.x.x.x`, `[::1]`) and the
//!   listener's own port. A page on `evil.example` that rebinds its name to 127.0.0.1 sends
//!   `Host: evil.example:…` and is refused. Off loopback the name is not checked (the
//!   operator's names are unknown): set `admin-token` there (`GW-WARN-001` says so).
//! - **Origin** (cross-site defence), on every bind: when present, it must be the same origin
//!   as `Host` (`http://` + the `Host` value); `null` or another origin is refused. When
//!   present, `Sec-Fetch-Site` must be `same-origin` or `none`.
//!
//! With a token configured, every endpoint but `/`, `/livez`, `/readyz` and `/healthz` requires
//! it in a header: `Authorization: Bearer <token>` (the scheme in any case) or `x-cutout-token: <token>`; missing → 401
//! with `WWW-Authenticate: Bearer`, wrong → 403. A token in the query string or a cookie is
//! never read (a browser would attach a cookie to a cross-site request; a URL leaks into logs).
//! The status page reads the token from its URL fragment (`/#token=…`, never sent to the
//! server) and sends it in `Authorization` with each poll.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use cutout::{Breaker, Health, HumanDuration, State as BreakerState};
use cutout_tower::BoxError;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use serde_json::{Value, json};
use tower::ServiceBuilder;

use crate::cluster::Cluster;
use crate::gateway::{Gateway, Readiness};
use crate::refusal::{Refusal, note};
use crate::server::LocalAddr;

/// The admin API (see the module docs for the endpoints and checks).
pub fn app(gateway: Arc<Gateway>) -> Router {
    let request_timeout = gateway.config().limits.request_timeout;
    Router::new()
        .route("/", get(page))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/breakers", get(breakers))
        .route("/breakers/{id}/{action}", post(control))
        .route("/reload", post(reload))
        .layer(
            ServiceBuilder::new()
                .layer(from_fn_with_state(Arc::clone(&gateway), guard))
                .layer(HandleErrorLayer::new(deadline_passed))
                .timeout(request_timeout),
        )
        .with_state(gateway)
}

async fn deadline_passed(_: BoxError) -> Response {
    note(
        Refusal::RequestTimeout,
        "admin",
        "an admin request passed request-timeout; answered 503",
    );
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the request took longer than request-timeout",
    )
}

/// The Host and Origin checks of every admin request (see the module docs).
pub async fn guard(State(gateway): State<Arc<Gateway>>, request: Request, next: Next) -> Response {
    let local = request
        .extensions()
        .get::<LocalAddr>()
        .map_or(gateway.config().admin, |l| l.0);
    if let Err(why) = check_host_and_origin(local, request.headers()) {
        note(Refusal::AdminForbidden, "admin", format_args!("403: {why}"));
        return error(StatusCode::FORBIDDEN, why);
    }
    next.run(request).await
}

/// Whether `host` (an authority) names a loopback host: `localhost`, an address in
/// 127.0.0.0/8 or `[::1]`.
fn is_loopback_name(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    literal.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The checks of [`guard`], for a listener bound at `local`.
fn check_host_and_origin(local: SocketAddr, headers: &HeaderMap) -> Result<(), &'static str> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host.to_str().ok(),
        (None, _) if !local.ip().is_loopback() => None,
        _ => return Err("exactly one Host header is required"),
    };
    if local.ip().is_loopback() {
        let host = host.ok_or("the Host header is not a valid host")?;
        let authority: http::uri::Authority = host
            .parse()
            .map_err(|_| "the Host header is not a valid host")?;
        if !is_loopback_name(authority.host()) {
            return Err("this admin listener answers only to a loopback Host");
        }
        if authority.port_u16().unwrap_or(80) != local.port() || host.contains('@') {
            return Err("the Host header's port is not this admin listener's");
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| o.parse::<Uri>().ok())
            .zip(host)
            .is_some_and(|(origin, host)| {
                origin.scheme_str() == Some("http")
                    && origin.path_and_query().is_none_or(|pq| pq.as_str() == "/")
                    && origin
                        .authority()
                        .is_some_and(|a| a.as_str().eq_ignore_ascii_case(host))
            });
        if !same {
            return Err("cross-origin requests are refused");
        }
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return Err("cross-site requests are refused");
    }
    Ok(())
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

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched without
/// regard to case (RFC 9110 §11.1: `bearer` and `BEARER` are `Bearer`) and may be followed by
/// more than one space; another scheme (`Basic ...`) gives none.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
        .filter(|token| !token.is_empty())
}

/// The 401/403 answer when a token is configured and the request lacks it. The token is read
/// from `Authorization: Bearer` or `x-cutout-token`, never from the query or a cookie.
fn authorize(gateway: &Gateway, headers: &HeaderMap) -> Option<Response> {
    // No token configured: everything is open (the listener is loopback by default, and the
    // guard holds off other origins).
    let config = gateway.config();
    let token = config.admin_token.as_deref()?;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let header = headers.get("x-cutout-token").and_then(|v| v.to_str().ok());
    let given: Vec<&str> = bearer.into_iter().chain(header).collect();
    if given.is_empty() {
        note(Refusal::AdminForbidden, "admin", "401: no token");
        let mut response = error(StatusCode::UNAUTHORIZED, "a token is required");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"cutout-gateway\""),
        );
        return Some(response);
    }
    if given
        .iter()
        .any(|g| constant_time_eq(g.trim().as_bytes(), token.as_bytes()))
    {
        None
    } else {
        note(Refusal::AdminForbidden, "admin", "403: wrong token");
        Some(error(StatusCode::FORBIDDEN, "wrong token"))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn livez() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "alive" }))
}

async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let readiness = gateway.readiness();
    let ready = readiness == Readiness::Ready;
    let listening = gateway.listening();
    json_response(
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        &json!({
            "ready": ready,
            "state": readiness.as_str(),
            "proxy": listening.map(|(p, _)| p.to_string()),
            "admin": listening.map(|(_, a)| a.to_string()),
            "clusters": gateway.clusters().len(),
        }),
    )
}

async fn healthz(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut clusters = serde_json::Map::new();
    let mut unhealthy = false;
    let mut degraded = false;
    for (name, cluster) in gateway.clusters().iter() {
        let breaker = cluster.breaker();
        let health = breaker.health();
        unhealthy |= health == Health::Unhealthy;
        degraded |= health != Health::Healthy;
        let mut entry = json!({ "health": health.as_str(), "state": breaker.state().as_str() });
        if let Some(hosts) = cluster.hosts() {
            entry["ejected_hosts"] = json!(hosts.ejected());
            entry["hosts"] = hosts
                .authorities()
                .iter()
                .zip(hosts.breakers())
                .map(|(host, b)| (host.clone(), json!(b.state().as_str())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        clusters.insert(name.clone(), entry);
    }
    let strict = gateway.config().healthz_strict;
    let (status, word) = match (unhealthy, degraded) {
        (true, _) if strict => (StatusCode::SERVICE_UNAVAILABLE, "unhealthy"),
        (_, true) => (StatusCode::OK, "degraded"),
        _ => (StatusCode::OK, "ok"),
    };
    let mut body = json!({
        "status": word,
        "strict": strict,
        "clusters": clusters,
    });
    // Redis down changes nothing but this field: the status stays what the clusters say.
    if let Some(fleet) = gateway.fleet_json() {
        body["fleet"] = fleet;
    }
    json_response(status, &body)
}

async fn metrics(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    // One state everywhere: the gauges follow what state() reports (a break that ran out
    // with no call since reads half-open), and the ejection gauges are set now.
    for breaker in gateway.breakers() {
        breaker.refresh_metrics();
    }
    for cluster in gateway.clusters().values() {
        cluster.shared().metrics.set_in_flight();
        if let Some(hosts) = cluster.hosts() {
            cluster
                .shared()
                .metrics
                .set_ejected(hosts.ejected(), hosts.max_ejected());
        }
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
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
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
        "ramp_fraction": s.ramp_fraction,
        "recovering_for_ms": ms(s.recovering_for),
        "refused_calls": s.refused_calls,
        "suppressed_opens": s.suppressed_opens,
        "last_action": s.last_manual_action.map(|a| a.as_str()),
        "upstreams": upstreams.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// Why `breaker` is in its state, for people: the reason it last opened while it is open,
/// half-open or recovering, `isolated by an operator`, `opened by an operator`, … `None`
/// while closed.
fn reason(gateway: &Gateway, breaker: &Breaker) -> Option<String> {
    let state = breaker.state();
    let last = breaker.snapshot().last_manual_action;
    match state {
        BreakerState::Closed => None,
        BreakerState::Isolated => Some("isolated by an operator".to_owned()),
        BreakerState::Disabled => Some("disabled by an operator".to_owned()),
        _ if last == Some(cutout::ManualAction::OpenFor) => {
            Some("opened by an operator".to_owned())
        }
        _ => gateway
            .open_reason(breaker.id().as_str())
            .map(|r| r.replace('_', " ")),
    }
}

/// A cluster as `/breakers` shows it: its breaker's snapshot, why it is in its state, its
/// statistics, its slow limit, whether it is in panic, its retries in flight (`null` when it
/// does not retry), its health check (`path`, `interval_ms`, or `null`), and its hosts (each
/// with its breaker, when it ejects hosts, its statistics, and its last health check:
/// `result` `pass` / `fail`, `detail`, `at_unix_ms`, `took_ms`, `in_a_row`, or `null`).
pub fn cluster_json(gateway: &Gateway, cluster: &Cluster) -> Value {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let breaker = cluster.breaker();
    let shared = cluster.shared();
    let mut out = breaker_json(breaker, cluster.upstreams());
    out["kind"] = json!("cluster");
    out["reason"] = json!(reason(gateway, breaker));
    out["guarded"] = json!(gateway.config().breakers_enabled);
    out["attempt_timeout_ms"] = json!(ms(cluster.attempt_timeout()));
    out["slow_limit_ms"] = json!(ms(shared.slow.limit()));
    out["stats"] = shared.stats.json();
    let hosts = cluster.hosts();
    out["ejection"] = json!(hosts.is_some());
    out["max_ejected"] = json!(hosts.map_or(0, |h| h.max_ejected()));
    out["ejected"] = json!(hosts.map_or(0, |h| h.ejected()));
    out["panic"] = json!(hosts.is_some_and(|h| h.panicking()));
    out["retries_in_flight"] = json!(shared.retry.as_ref().map(|b| b.retrying()));
    out["health_check"] = cluster.health_check().map_or(
        Value::Null,
        |c| json!({ "path": c.path.as_str(), "interval_ms": ms(c.interval) }),
    );
    out["hosts"] = shared
        .authorities
        .iter()
        .enumerate()
        .map(|(n, host)| {
            let mut entry = match hosts.and_then(|h| h.breaker(n)) {
                Some(b) => {
                    let mut e = breaker_json(b, &[]);
                    e["reason"] = json!(reason(gateway, b));
                    e
                }
                None => json!({ "id": null, "state": null }),
            };
            entry["host"] = json!(host);
            entry["stats"] = shared.host_stats.get(n).map_or(Value::Null, |s| s.json());
            entry["health_check"] = shared.health.get(n).map_or(Value::Null, |h| h.json());
            if let Some(obj) = entry.as_object_mut() {
                obj.remove("upstreams");
            }
            entry
        })
        .collect::<Vec<_>>()
        .into();
    out
}

/// What `GET /breakers` answers: `breakers` (every cluster, see [`cluster_json`]),
/// `transitions` (newest first, clusters' and hosts'), `actions` (manual actions, newest
/// first), `reload` (the last reload's record, [`ReloadRecord::json`](crate::reload::ReloadRecord::json),
/// or `null`), `token` (whether the admin API needs one), `now_unix_ms`, and `fleet` (with
/// `[fleet]`, the fleet's health as `/healthz` shows it; `null` without).
pub fn breakers_json(gateway: &Gateway) -> Value {
    let clusters = gateway.clusters();
    let breakers: Vec<Value> = clusters
        .values()
        .map(|c| cluster_json(gateway, c))
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
    let actions: Vec<Value> = gateway
        .actions()
        .iter()
        .rev()
        .map(|a| {
            json!({
                "at_unix_ms": a.at_unix_ms,
                "breaker": a.breaker,
                "action": a.action,
                "detail": a.detail,
                "by": a.by,
            })
        })
        .collect();
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    json!({
        "breakers": breakers,
        "transitions": transitions,
        "actions": actions,
        "reload": gateway.last_reload().map(|r| r.json()),
        "token": gateway.config().admin_token.is_some(),
        "now_unix_ms": now_unix_ms,
        "fleet": gateway.fleet_json(),
    })
}

async fn breakers(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    json_response(StatusCode::OK, &breakers_json(&gateway))
}

/// `POST /reload` (see the module docs).
async fn reload(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    let record =
        tokio::task::spawn_blocking(move || crate::reload::reload(&gateway, "POST /reload")).await;
    let Ok(record) = record else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the reload did not finish",
        );
    };
    let status = match record.error.as_ref().map(|e| e.code.as_str()) {
        None => StatusCode::OK,
        Some("GW-RUN-003") => StatusCode::CONFLICT,
        Some(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    json_response(status, &record.json())
}

/// The longest `open-for` accepted.
pub const MAX_OPEN_FOR: Duration = Duration::from_secs(24 * 3600);

/// The `duration` of a control's query string (`?duration=30s`; `+` and `%20` read as spaces).
fn duration_param(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("duration=")?;
        Some(value.replace('+', " ").replace("%20", " "))
    })
}

async fn control(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    request: Request,
) -> Response {
    if let Some(denied) = authorize(&gateway, &headers) {
        return denied;
    }
    let by = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "-".to_owned(), |c| c.0.to_string());
    let Some((cluster, breaker)) = gateway.find_breaker(&id) else {
        let known = match gateway.registry().get(&id) {
            Err(e) if !id.contains('/') => e.to_string(),
            _ => {
                let hosts: Vec<String> = gateway
                    .clusters()
                    .values()
                    .filter_map(|c| c.hosts())
                    .flat_map(|h| h.ids().to_vec())
                    .collect();
                format!(
                    "no breaker with id {id:?}; clusters: {}; hosts: {}",
                    gateway
                        .clusters()
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    if hosts.is_empty() {
                        "none".to_owned()
                    } else {
                        hosts.join(", ")
                    }
                )
            }
        };
        return error(StatusCode::NOT_FOUND, &known);
    };
    let detail = match action.as_str() {
        "isolate" => {
            breaker.isolate();
            String::new()
        }
        "reset" => {
            breaker.reset();
            String::new()
        }
        "open-for" | "open_for" => {
            let duration = duration_param(request.uri().query())
                .and_then(|d| humantime::parse_duration(d.trim()).ok())
                .filter(|d| !d.is_zero() && *d <= MAX_OPEN_FOR);
            let Some(duration) = duration else {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "open-for needs ?duration= a positive duration up to {}, such as 30s or 5m",
                        HumanDuration(MAX_OPEN_FOR)
                    ),
                );
            };
            if !breaker.open_for(duration) {
                return error(
                    StatusCode::CONFLICT,
                    &format!(
                        "{id} is {}: reset it first",
                        breaker.state().as_str().replace('_', "-")
                    ),
                );
            }
            format!("for {}", HumanDuration(duration))
        }
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                &format!("unknown action {action:?}; allowed isolate, reset, open-for"),
            );
        }
    };
    let name = if action == "open_for" {
        "open_for"
    } else {
        match action.as_str() {
            "open-for" => "open_for",
            "isolate" => "isolate",
            _ => "reset",
        }
    };
    gateway.record_action(&id, name, detail, by);
    if id == cluster.name() {
        json_response(StatusCode::OK, &cluster_json(&gateway, &cluster))
    } else {
        let mut body = breaker_json(&breaker, &[]);
        body["reason"] = json!(reason(&gateway, &breaker));
        json_response(StatusCode::OK, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn loopback_listeners_answer_loopback_hosts_on_their_port_only() {
        let local: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let check = |pairs: &[(&str, &str)]| check_host_and_origin(local, &headers(pairs));
        for host in [
            "127.0.0.1:9090",
            "localhost:9090",
            "LOCALHOST:9090",
            "127.9.9.9:9090",
            "[::1]:9090",
        ] {
            assert_eq!(check(&[("host", host)]), Ok(()), "{host}");
        }
        for host in [
            "evil.example:9090",
            "127.0.0.1:9091",
            "127.0.0.1",
            "u@127.0.0.1:9090",
            "localhost.evil:9090",
            "[::2]:9090",
            "",
        ] {
            assert!(check(&[("host", host)]).is_err(), "{host}");
        }
        assert!(check(&[]).is_err(), "no Host");
        assert!(check(&[("host", "127.0.0.1:9090"), ("host", "127.0.0.1:9090")]).is_err());
        // Port 80 may be left out.
        let on_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert_eq!(
            check_host_and_origin(on_80, &headers(&[("host", "localhost")])),
            Ok(())
        );
    }

    #[test]
    fn origins_must_be_the_host_s_own() {
        let local: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let check = |origin: &str| {
            check_host_and_origin(
                local,
                &headers(&[("host", "127.0.0.1:9090"), ("origin", origin)]),
            )
        };
        assert_eq!(check("http://127.0.0.1:9090"), Ok(()));
        for origin in [
            "http://evil.example",
            "null",
            "https://127.0.0.1:9090",
            "http://127.0.0.1:8080",
            "http://localhost:9090",
            "http://127.0.0.1:9090/x",
        ] {
            assert!(check(origin).is_err(), "{origin}");
        }
        let site = |value: &str| {
            check_host_and_origin(
                local,
                &headers(&[("host", "127.0.0.1:9090"), ("sec-fetch-site", value)]),
            )
        };
        assert_eq!(site("same-origin"), Ok(()));
        assert_eq!(site("none"), Ok(()));
        assert!(site("same-site").is_err());
        assert!(site("cross-site").is_err());
        // Off loopback: any name, but still one origin.
        let exposed: SocketAddr = "10.0.0.5:9090".parse().unwrap();
        let h = headers(&[
            ("host", "gw.internal:9090"),
            ("origin", "http://gw.internal:9090"),
        ]);
        assert_eq!(check_host_and_origin(exposed, &h), Ok(()));
        let h = headers(&[
            ("host", "gw.internal:9090"),
            ("origin", "http://evil.example"),
        ]);
        assert!(check_host_and_origin(exposed, &h).is_err());
    }
}

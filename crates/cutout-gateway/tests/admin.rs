//! The admin listener: health, metrics, snapshots, isolate/reset, the status page, the token and error statuses.

mod common;

use common::{get, post, send, start};
use cutout::State;
use cutout_gateway::upstream::Mode;
use http::Method;

/// With `healthz-strict = true` (the behaviour before it was opt-in: see admin_security.rs for
/// the informational default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_is_200_until_a_breaker_is_unhealthy() {
    let h = start("healthz-strict = true").await;
    let url = format!("http://{}/healthz", h.admin);
    let reply = get(&url).await;
    assert_eq!(reply.status, 200);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(json["clusters"]["account-service"]["health"], "healthy");
    h.gateway.registry().isolate("account-service").unwrap();
    let reply = get(&url).await;
    assert_eq!(reply.status, 503);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(json["clusters"]["account-service"]["state"], "isolated");
    assert_eq!(json["clusters"]["transfer-service"]["health"], "healthy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_lists_snapshots_and_transitions() {
    let h = start("").await;
    h.account.set_mode(Mode::Fail);
    for _ in 0..5 {
        get(&format!("http://{}/accounts/1", h.proxy)).await;
    }
    let reply = get(&format!("http://{}/breakers", h.admin)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let account = &json["breakers"][0];
    assert_eq!(account["id"], "account-service");
    assert_eq!(account["state"], "open");
    assert_eq!(account["failure_rate"], 1.0);
    assert_eq!(account["current_break_ms"], 30000.0);
    assert_eq!(json["breakers"][1]["state"], "closed");
    let last = &json["transitions"][0];
    assert_eq!(last["breaker"], "account-service");
    assert_eq!(
        (&last["from"], &last["to"]),
        (&"closed".into(), &"open".into())
    );
    assert_eq!(last["reason"], "failure_ratio");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolate_and_reset_control_the_breaker() {
    let h = start("").await;
    let account = format!("http://{}/accounts/1", h.proxy);
    let reply = post(&format!(
        "http://{}/breakers/account-service/isolate",
        h.admin
    ))
    .await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.contains("\"state\":\"isolated\""),
        "{}",
        reply.body
    );
    let refused = get(&account).await;
    assert_eq!(refused.status, 503);
    assert!(
        refused.headers.get("retry-after").is_none(),
        "isolated: no known end"
    );
    assert_eq!(h.account.started(), 0);
    let reply = post(&format!(
        "http://{}/breakers/account-service/reset",
        h.admin
    ))
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(get(&account).await.status, 200);
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Closed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_errors_map_to_statuses() {
    let h = start("").await;
    let reply = post(&format!("http://{}/breakers/acount-service/reset", h.admin)).await;
    assert_eq!(reply.status, 404);
    assert!(
        reply.body.contains("account-service"),
        "a suggestion: {}",
        reply.body
    );
    let reply = post(&format!(
        "http://{}/breakers/account-service/explode",
        h.admin
    ))
    .await;
    assert_eq!(reply.status, 404);
    assert!(reply.body.contains("isolate"), "{}", reply.body);
    let reply = get(&format!(
        "http://{}/breakers/account-service/reset",
        h.admin
    ))
    .await;
    assert_eq!(reply.status, 405);
    assert_eq!(get(&format!("http://{}/nope", h.admin)).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_render_prometheus_text() {
    let h = start("").await;
    get(&format!("http://{}/accounts/1", h.proxy)).await;
    let reply = get(&format!("http://{}/metrics", h.admin)).await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(
        reply
            .body
            .contains("cutout_calls_total{breaker=\"account-service\",outcome=\"success\"}"),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("# TYPE cutout_state gauge"),
        "{}",
        reply.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_is_html_that_polls_breakers() {
    let h = start("").await;
    let reply = get(&format!("http://{}/", h.admin)).await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(reply.body.contains("fetch(\"/breakers\""));
    assert!(reply.body.contains("setInterval(poll, 1000)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_everything_but_the_page_and_healthz() {
    let h = start("admin-token = \"s3cret\"").await;
    let breakers = format!("http://{}/breakers", h.admin);
    let reply = get(&breakers).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let wrong = send(
        Method::GET,
        &breakers,
        &[("authorization", "Bearer nope")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 403);
    let right = send(
        Method::GET,
        &breakers,
        &[("authorization", "Bearer s3cret")],
        "",
    )
    .await;
    assert_eq!(right.status, 200);
    // The scheme's case is not the client's to get right (RFC 9110 §11.1), nor one space.
    for value in ["bearer s3cret", "BEARER s3cret", "Bearer   s3cret"] {
        let reply = send(Method::GET, &breakers, &[("authorization", value)], "").await;
        assert_eq!(reply.status, 200, "{value:?}");
    }
    // Another scheme carries no bearer token: no token given, 401.
    let basic = send(
        Method::GET,
        &breakers,
        &[("authorization", "Basic s3cret")],
        "",
    )
    .await;
    assert_eq!(basic.status, 401);
    for path in ["/metrics", "/breakers/account-service/isolate"] {
        let method = if path == "/metrics" {
            Method::GET
        } else {
            Method::POST
        };
        let reply = send(method, &format!("http://{}{path}", h.admin), &[], "").await;
        assert_eq!(reply.status, 401, "{path}");
    }
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Closed
    );
    assert_eq!(
        get(&format!("http://{}/healthz", h.admin)).await.status,
        200
    );
    assert_eq!(get(&format!("http://{}/", h.admin)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_for_and_every_manual_action_are_remembered_by_the_server() {
    let h = start("").await;
    let base = format!("http://{}/breakers/account-service", h.admin);
    let reply = post(&format!("{base}/open-for?duration=45s")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(json["state"], "open");
    assert_eq!(json["retry_after_ms"], 45000.0);
    assert_eq!(json["reason"], "opened by an operator");
    let refused = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["retry-after"], "45");
    assert_eq!(post(&format!("{base}/open-for")).await.status, 400);
    assert_eq!(
        post(&format!("{base}/open-for?duration=soon")).await.status,
        400
    );
    assert_eq!(post(&format!("{base}/isolate")).await.status, 200);
    let conflict = post(&format!("{base}/open-for?duration=1m")).await;
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    assert_eq!(post(&format!("{base}/reset")).await.status, 200);
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("http://{}/breakers", h.admin)).await.body).unwrap();
    let actions: Vec<(String, String)> = json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_owned(),
                a["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("reset".to_owned(), String::new()),
            ("isolate".to_owned(), String::new()),
            ("open_for".to_owned(), "for 45s".to_owned()),
        ],
        "newest first, the refused ones left out"
    );
    assert!(
        json["actions"][0]["by"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert_eq!(json["breakers"][0]["state"], "closed");
}

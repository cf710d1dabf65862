//! The admin listener's health endpoints and its defences: `/livez`, `/readyz`, an informational `/healthz`
//! (strict on request), Host and Origin checks against DNS rebinding and cross-site requests, the token in
//! a header only, and a warning for an exposed admin listener without a token.

mod common;

use common::{get, raw, send, start};
use cutout::State;
use http::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_and_readyz_answer_and_need_no_token() {
    let h = start("admin-token = \"s3cret\"").await;
    let live = get(&format!("http://{}/livez", h.admin)).await;
    assert_eq!(live.status, 200, "{}", live.body);
    let ready = get(&format!("http://{}/readyz", h.admin)).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let json: serde_json::Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!(json["ready"], true);
    // Upstream state is not readiness.
    h.gateway.registry().isolate("account-service").unwrap();
    assert_eq!(get(&format!("http://{}/readyz", h.admin)).await.status, 200);
    assert_eq!(get(&format!("http://{}/livez", h.admin)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_informs_per_cluster_and_one_open_cluster_does_not_fail_the_gateway() {
    let h = start("").await;
    let url = format!("http://{}/healthz", h.admin);
    h.gateway.registry().isolate("account-service").unwrap();
    let reply = get(&url).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(json["status"], "degraded");
    assert_eq!(json["clusters"]["account-service"]["state"], "isolated");
    assert_eq!(json["clusters"]["account-service"]["health"], "unhealthy");
    assert_eq!(json["clusters"]["transfer-service"]["health"], "healthy");
    h.gateway.registry().reset("account-service").unwrap();
    let json: serde_json::Value = serde_json::from_str(&get(&url).await.body).unwrap();
    assert_eq!(json["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_headers_are_refused_on_a_loopback_admin() {
    let h = start("").await;
    let port = h.admin.port();
    let breakers = format!("http://{}/breakers", h.admin);
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1).max(1)),
        "127.0.0.1".to_owned(),
        format!("localhost.evil.example:{port}"),
    ] {
        let reply = send(Method::GET, &breakers, &[("host", &host)], "").await;
        assert_eq!(reply.status, 403, "Host: {host}: {}", reply.body);
        assert!(!reply.body.contains("account-service"), "{}", reply.body);
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("127.0.0.2:{port}"),
    ] {
        let reply = send(Method::GET, &breakers, &[("host", &host)], "").await;
        assert_eq!(reply.status, 200, "Host: {host}: {}", reply.body);
    }
    // No Host at all.
    let answer = raw(h.admin, b"GET /breakers HTTP/1.0\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.0 403") || answer.starts_with("HTTP/1.1 403"),
        "{answer:?}"
    );
    // Every endpoint, the page and health included.
    for path in ["/", "/healthz", "/metrics"] {
        let reply = send(
            Method::GET,
            &format!("http://{}{path}", h.admin),
            &[("host", &format!("evil.example:{port}"))],
            "",
        )
        .await;
        assert_eq!(reply.status, 403, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_are_refused() {
    let h = start("").await;
    let isolate = format!("http://{}/breakers/account-service/isolate", h.admin);
    for headers in [
        vec![("origin", "http://evil.example")],
        vec![("origin", "null")],
        vec![("origin", "https://127.0.0.1")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
    ] {
        let reply = send(Method::POST, &isolate, &headers, "").await;
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.body);
    }
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Closed,
        "no cross-site request reached the control"
    );
    let reply = send(
        Method::GET,
        &format!("http://{}/breakers", h.admin),
        &[("origin", "http://evil.example")],
        "",
    )
    .await;
    assert_eq!(reply.status, 403, "a cross-origin read");
    // Same origin (what the status page sends) passes.
    let same = format!("http://{}", h.admin);
    let reply = send(
        Method::POST,
        &isolate,
        &[("origin", &same), ("sec-fetch-site", "same-origin")],
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Isolated
    );
    // Controls are POST only.
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let reply = send(method.clone(), &isolate, &[], "").await;
        assert_eq!(reply.status, 405, "{method}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_read_from_a_header_never_a_query_or_cookie() {
    let h = start("admin-token = \"s3cret\"").await;
    let breakers = format!("http://{}/breakers", h.admin);
    let reply = send(Method::GET, &breakers, &[("x-cutout-token", "s3cret")], "").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = send(Method::GET, &breakers, &[("x-cutout-token", "nope")], "").await;
    assert_eq!(reply.status, 403);
    let reply = send(
        Method::GET,
        &breakers,
        &[("authorization", "Bearer s3cret")],
        "",
    )
    .await;
    assert_eq!(reply.status, 200);
    let reply = get(&format!("{breakers}?token=s3cret")).await;
    assert_eq!(reply.status, 401, "a token in the query string is not read");
    let reply = send(Method::GET, &breakers, &[("cookie", "token=s3cret")], "").await;
    assert_eq!(reply.status, 401, "a token in a cookie is not read");
    let reply = send(
        Method::POST,
        &format!(
            "http://{}/breakers/account-service/isolate?token=s3cret",
            h.admin
        ),
        &[],
        "",
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Closed
    );
}

#[test]
fn an_exposed_admin_without_a_token_is_warned_about() {
    let dir = std::env::temp_dir().join(format!("cutout-gateway-exposed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    let cluster = "[clusters.a]\nupstreams = [\"http://127.0.0.1:7001\"]\n";
    let check = |gateway: &str| {
        std::fs::write(&file, format!("[gateway]\n{gateway}\n{cluster}")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .args(["--check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
    };
    let exposed = check("admin = \"0.0.0.0:9090\"");
    assert!(exposed.contains("GW-WARN-001"), "{exposed}");
    assert!(exposed.contains("0.0.0.0:9090"), "{exposed}");
    let guarded = check("admin = \"0.0.0.0:9090\"\nadmin-token = \"s3cret\"");
    assert!(!guarded.contains("GW-WARN-001"), "{guarded}");
    let loopback = check("admin = \"127.0.0.1:9090\"");
    assert!(!loopback.contains("GW-WARN-001"), "{loopback}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! A route's header rules: removals, then settings, on the request forwarded and on the
//! upstream's answer; the gateway's own headers win; reserved names are refused with a code.
//! A raw upstream on loopback reports the request head it received.

mod common;

use std::sync::{Arc, Mutex};

use common::{raw, serve_router, start_config};
use cutout_gateway::GatewayConfig;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_s_rules_reach_the_upstream_and_the_client() {
    let (stop, _) = watch::channel(false);
    let seen: Arc<Mutex<Vec<http::HeaderMap>>> = Arc::default();
    let record = Arc::clone(&seen);
    let upstream = axum::Router::new().fallback(move |headers: http::HeaderMap| {
        let record = Arc::clone(&record);
        async move {
            record.lock().unwrap().push(headers);
            ([("x-powered-by", "php"), ("x-kept", "1")], "ok")
        }
    });
    let port = serve_router(upstream, &stop).await.port();
    let h = start_config(&format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
[[routes]]
prefix = "/"
cluster = "u"
remove-request-headers = ["x-debug"]
set-request-headers = {{ "x-env" = "prod" }}
remove-response-headers = ["x-powered-by"]
set-response-headers = {{ "strict-transport-security" = "max-age=63072000" }}
[clusters.u]
upstreams = ["http://127.0.0.1:{port}"]
"#
    ))
    .await;
    let answer = raw(
        h.proxy,
        b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Debug: 1\r\nX-Env: dev\r\nX-Env: test\r\n\
          Connection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(!lower.contains("x-powered-by"), "{answer}");
    assert!(lower.contains("x-kept: 1"), "{answer}");
    assert!(
        lower.contains("strict-transport-security: max-age=63072000"),
        "{answer}"
    );
    let seen = seen.lock().unwrap();
    let request = &seen[0];
    assert!(!request.contains_key("x-debug"));
    let env: Vec<_> = request.get_all("x-env").iter().collect();
    assert_eq!(env, ["prod"], "set replaces every value the client sent");
    assert!(
        request.contains_key("x-forwarded-for"),
        "the gateway's own headers stay"
    );
}

#[test]
fn header_rules_are_validated_with_codes_naming_the_key() {
    let base = "[clusters.u]\nupstreams = [\"http://127.0.0.1:9\"]\n[[routes]]\nprefix = \"/\"\ncluster = \"u\"\n";
    for (line, code, key) in [
        (
            "remove-request-headers = [\"host\"]",
            "GW-CFG-004",
            "routes[0].remove-request-headers",
        ),
        (
            "set-request-headers = { \"x-forwarded-for\" = \"1.2.3.4\" }",
            "GW-CFG-004",
            "routes[0].set-request-headers",
        ),
        (
            "set-response-headers = { \"bad name\" = \"1\" }",
            "GW-CFG-004",
            "routes[0].set-response-headers",
        ),
        (
            "set-response-headers = { \"x-a\" = \"line\\nbreak\" }",
            "GW-CFG-004",
            "routes[0].set-response-headers",
        ),
        (
            "set-response-headers = { \"x-a\" = 1 }",
            "GW-CFG-003",
            "routes[0].set-response-headers",
        ),
        (
            "remove-response-headers = \"x-a\"",
            "GW-CFG-003",
            "routes[0].remove-response-headers",
        ),
    ] {
        let error = GatewayConfig::from_toml(&format!("{base}{line}\n")).unwrap_err();
        assert_eq!((error.code(), error.key()), (code, key), "{line}: {error}");
    }
}

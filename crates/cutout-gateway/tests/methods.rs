//! Methods per route: `TRACE` and `TRACK` refused by default (405 with `Allow`), a route's
//! `methods` list forwarding only those, a method name with a lowercase letter refused (400),
//! extension methods (`PURGE`) forwarded where allowed, and the config's codes. None of these
//! refusals reaches the upstream or its breaker. Raw requests on loopback.

mod common;

use common::{raw, serve_upstream, start_config};
use cutout_gateway::GatewayConfig;
use cutout_gateway::upstream::Upstream;
use tokio::sync::watch;

fn request(method: &str, path: &str) -> Vec<u8> {
    format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").into_bytes()
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_is_refused_by_default_and_a_route_forwards_only_its_methods() {
    let (stop, _) = watch::channel(false);
    let upstream = Upstream::new("u");
    let port = serve_upstream(&upstream, &stop).await.port();
    let h = start_config(&format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
[[routes]]
prefix = "/open"
cluster = "u"
[[routes]]
prefix = "/read"
cluster = "u"
methods = ["GET", "HEAD"]
[[routes]]
prefix = "/debug"
cluster = "u"
methods = ["TRACE", "GET"]
[clusters.u]
upstreams = ["http://127.0.0.1:{port}"]
"#
    ))
    .await;

    // A route without `methods`: TRACE and TRACK refused, the rest (PURGE too) forwarded.
    for method in ["TRACE", "TRACK"] {
        let answer = raw(h.proxy, &request(method, "/open/x")).await;
        assert!(answer.starts_with("HTTP/1.1 405"), "{method}: {answer}");
        let allow = header(&answer, "allow").expect("an Allow header");
        assert!(allow.contains("GET") && !allow.contains("TRACE"), "{allow}");
    }
    for method in ["GET", "POST", "DELETE", "PURGE"] {
        let answer = raw(h.proxy, &request(method, "/open/x")).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{method}: {answer}");
    }
    assert_eq!(
        upstream.started(),
        4,
        "only the forwarded methods reached it"
    );

    // A lowercase method is not the uppercase one: refused before routing.
    let answer = raw(h.proxy, &request("get", "/open/x")).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // A route's `methods`: only those, 405 with them in `Allow` otherwise.
    let answer = raw(h.proxy, &request("POST", "/read/x")).await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert_eq!(header(&answer, "allow"), Some("GET, HEAD"));
    let answer = raw(h.proxy, &request("GET", "/read/x")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Named, TRACE is forwarded.
    let answer = raw(h.proxy, &request("TRACE", "/debug/x")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(upstream.started(), 6);

    // None of the refusals was counted by the cluster's breaker.
    let snapshot = h.gateway.registry().get("u").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (6, 0));
}

#[test]
fn a_route_s_methods_are_validated_with_a_code_naming_the_key() {
    let base = "[clusters.u]\nupstreams = [\"http://127.0.0.1:9\"]\n[[routes]]\nprefix = \"/\"\ncluster = \"u\"\n";
    for (line, code) in [
        ("methods = []", "GW-CFG-004"),
        ("methods = [\"CONNECT\"]", "GW-CFG-004"),
        ("methods = [\"get\"]", "GW-CFG-004"),
        ("methods = [\"GET POST\"]", "GW-CFG-004"),
        ("methods = \"GET\"", "GW-CFG-003"),
        ("methods = [1]", "GW-CFG-003"),
    ] {
        let error = GatewayConfig::from_toml(&format!("{base}{line}\n")).unwrap_err();
        assert_eq!(
            (error.code(), error.key()),
            (code, "routes[0].methods"),
            "{line}: {error}"
        );
    }
    let ok = GatewayConfig::from_toml(&format!("{base}methods = [\"GET\", \"PURGE\", \"GET\"]\n"))
        .unwrap();
    let methods = ok.routes[0].methods.as_ref().unwrap();
    assert_eq!(methods.len(), 2, "a repeat is one method");
}

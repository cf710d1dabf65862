//! `trusted-hops`: at the edge (the default) a client's own `X-Forwarded-For` is dropped and
//! the upstream sees the peer; behind one trusted proxy its entry is kept and the per-source
//! rate limit keys on the client it names. The demo upstream echoes the header it received.

mod common;

use common::{raw, start};

fn ask(xff: &str) -> Vec<u8> {
    format!(
        "GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: {xff}\r\n\
         Forwarded: for=6.6.6.6\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn echoed(answer: &str) -> String {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_default();
    json["x-forwarded-for"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_edge_a_client_cannot_say_who_it_is() {
    let h = start("").await;
    let answer = raw(h.proxy, &ask("6.6.6.6")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(echoed(&answer), "127.0.0.1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_its_client_is_kept_and_rate_limited_apart() {
    let h = start("trusted-hops = 1\nrate-limit-per-source = \"2/m\"").await;
    // The proxy in front (this test) says the client is 203.0.113.9; a forged entry before
    // it is dropped.
    let answer = raw(h.proxy, &ask("6.6.6.6, 203.0.113.9")).await;
    assert_eq!(echoed(&answer), "203.0.113.9, 127.0.0.1", "{answer}");
    // Each client named by the proxy has its own bucket, though all come from one peer.
    let second = raw(h.proxy, &ask("203.0.113.9")).await;
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    let third = raw(h.proxy, &ask("203.0.113.9")).await;
    assert!(third.starts_with("HTTP/1.1 429"), "{third}");
    let other = raw(h.proxy, &ask("198.51.100.4")).await;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
}

#[test]
fn trusted_hops_is_validated_with_a_code_naming_the_key() {
    let base = "[clusters.u]\nupstreams = [\"http://127.0.0.1:9\"]\n";
    for (line, code) in [
        ("trusted-hops = -1", "GW-CFG-009"),
        ("trusted-hops = 17", "GW-CFG-009"),
        ("trusted-hops = \"1\"", "GW-CFG-003"),
    ] {
        let error = cutout_gateway::GatewayConfig::from_toml(&format!("[gateway]\n{line}\n{base}"))
            .unwrap_err();
        assert_eq!(
            (error.code(), error.key()),
            (code, "gateway.trusted-hops"),
            "{error}"
        );
    }
}

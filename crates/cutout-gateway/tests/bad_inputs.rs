//! Bad inputs: malformed requests, oversized headers, unknown routes, unreachable upstreams, busy ports, invalid configs.

mod common;

use std::time::Duration;

use common::{get, start};
use cutout_gateway::{GatewayConfig, StartError, server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Writes `raw` to `addr` and reads the answer until the server closes (at most 5 s).
async fn raw(addr: std::net::SocketAddr, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_400() {
    let h = start("").await;
    let answer = raw(h.proxy, b"GARBAGE\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    let answer = raw(
        h.proxy,
        b"GET /accounts/1 HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    assert_eq!(h.account.started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_get_431() {
    let h = start("").await;
    let big = "x".repeat(512 * 1024);
    let request = format!("GET /accounts/1 HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let answer = raw(h.proxy, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "{:?}",
        &answer[..answer.len().min(200)]
    );
    let many: String = (0..200).map(|n| format!("X-H{n}: v\r\n")).collect();
    let request = format!("GET /accounts/1 HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    let answer = raw(h.proxy, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "{:?}",
        &answer[..answer.len().min(200)]
    );
    assert_eq!(h.account.started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_get_404() {
    let h = start("").await;
    let reply = get(&format!("http://{}/nowhere", h.proxy)).await;
    assert_eq!(reply.status, 404);
    assert_eq!(
        get(&format!("http://{}/accountsX", h.proxy)).await.status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_502_and_a_failure() {
    // A port nobody listens on: bind one, then free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let h = start("").await;
    let text = common::CONFIG
        .replace("{gateway_extra}", "")
        .replace("{account}", &free.port().to_string())
        .replace("{transfer}", &free.port().to_string());
    let gateway = cutout_gateway::Gateway::new(GatewayConfig::from_toml(&text).unwrap());
    let listener = server::bind("test", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(server::serve(
        listener,
        cutout_gateway::proxy::app(std::sync::Arc::clone(&gateway)),
        std::future::pending(),
    ));
    let reply = get(&format!("http://{addr}/accounts/1")).await;
    assert_eq!(reply.status, 502);
    assert!(
        reply.body.contains("could not be reached"),
        "{}",
        reply.body
    );
    let snapshot = gateway.registry().snapshot("account-service").unwrap();
    assert_eq!((snapshot.calls, snapshot.failures), (1, 1));
    task.abort();
    drop(h);
}

#[tokio::test]
async fn a_busy_port_is_a_clear_startup_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let error = server::bind("proxy", addr).await.unwrap_err();
    assert!(matches!(error, StartError::Bind { .. }));
    let message = error.to_string();
    assert!(message.starts_with("GW-RUN-002"), "{message}");
    assert!(message.contains(&addr.to_string()), "{message}");
    assert!(message.contains("proxy"), "{message}");
}

#[test]
fn an_invalid_config_file_is_a_clear_startup_error_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("cutout-gateway-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "[clusters.a]\nupstreams = [\"http://127.0.0.1:1\"]\n[breakers.defaults]\nminimum-calls = 0\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_cutout-gateway");
    let out = std::process::Command::new(bin)
        .args(["--check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("CUT-CFG-002"), "{stderr}");
    assert!(stderr.contains("minimum-calls = 0"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    std::fs::write(&file, "[gateway]\nlisten = \"127.0.0.1\"\n").unwrap();
    let out = std::process::Command::new(bin)
        .args(["--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GW-CFG-004: gateway.listen = \"127.0.0.1\""),
        "{stderr}"
    );

    let out = std::process::Command::new(bin)
        .args(["--config"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("GW-RUN-001"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

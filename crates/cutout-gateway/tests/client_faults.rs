//! Blame the right side, and strict input: a client's broken request is the client's (400, 408, 413 or a
//! closed connection) and never counts against a healthy cluster; CONNECT, foreign absolute-form
//! targets, escaping paths and missing or duplicate `Host` are refused before any routing. Raw TCP
//! sockets on loopback, bytes written by hand.

mod common;

use std::time::Duration;

use common::{eventually, get, raw, read_until_closed, start, start_with};
use cutout::State;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The breaker of account-service: (calls, failures) in its window and its state.
fn account_counts(h: &common::Harness) -> (u64, u64, State) {
    let s = h.gateway.registry().snapshot("account-service").unwrap();
    (s.calls, s.failures, s.state)
}

fn status_line(answer: &str) -> &str {
    answer.lines().next().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_chunked_upload_is_the_client_s_400_and_never_opens_the_breaker() {
    let h = start("").await;
    // Five ~300-byte requests opened the cluster in the issue; here ten.
    for n in 0..10 {
        let request = format!(
            "POST /accounts/{n} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\
             Transfer-Encoding: chunked\r\nX-Filler: {}\r\n\r\n5\r\nhello\r\nzz-not-a-size\r\n",
            "f".repeat(150)
        );
        let answer = raw(h.proxy, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "request {n}: {answer:?}"
        );
    }
    assert_eq!(account_counts(&h), (0, 0, State::Closed));
    let ok = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(ok.status, 200, "other clients are still served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_upload_is_never_counted_against_the_upstream() {
    let h = start("").await;
    for n in 0..6u64 {
        let mut stream = TcpStream::connect(h.proxy).await.unwrap();
        stream
            .write_all(
                b"POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n0123456789",
            )
            .await
            .unwrap();
        // Wait until the gateway forwarded it (the upstream reads the body), then vanish.
        assert!(
            eventually(Duration::from_secs(3), || h.account.started() == n + 1).await,
            "forwarded"
        );
        drop(stream);
        assert!(
            eventually(Duration::from_secs(3), || h.account.cancelled() == n + 1).await,
            "the gateway gave the upstream request up"
        );
    }
    let ok = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(ok.status, 200, "the cluster stayed closed");
    assert_eq!(account_counts(&h), (1, 0, State::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upload_is_the_client_s_408_not_an_upstream_timeout() {
    // The attempt timeout is 300 ms; the client sends 10 of 1000 bytes and stops.
    let h = start("").await;
    for n in 0..5 {
        let mut stream = TcpStream::connect(h.proxy).await.unwrap();
        stream
            .write_all(
                b"POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n0123456789",
            )
            .await
            .unwrap();
        let (answer, _, _) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "request {n}: {answer:?}"
        );
    }
    assert_eq!(account_counts(&h), (0, 0, State::Closed));
    assert_eq!(
        get(&format!("http://{}/accounts/1", h.proxy)).await.status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_drops_the_connection_mid_upload_still_counts() {
    // An upstream that reads the head and hangs up while the client is still uploading.
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = upstream.local_addr().unwrap().port();
    tokio::spawn(async move {
        for _ in 0..10 {
            let Ok((mut conn, _)) = upstream.accept().await else {
                return;
            };
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).await;
            drop(conn);
        }
    });
    let h = start_with("", Some(port)).await;
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    stream
        .write_all(
            b"POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n0123456789",
        )
        .await
        .unwrap();
    let (answer, _, _) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer:?}");
    let (calls, failures, _) = account_counts(&h);
    assert_eq!((calls, failures), (1, 1), "the upstream's fault is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused_with_405() {
    let h = start("").await;
    let target = h.account_addr;
    for request in [
        format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        "CONNECT /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
    ] {
        let answer = raw(h.proxy, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 405"),
            "{request:?}: {answer:?}"
        );
    }
    assert_eq!(h.account.started(), 0, "never forwarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_form_target_must_match_host() {
    let h = start("").await;
    let answer = raw(
        h.proxy,
        b"GET http://evil.example/accounts/1 HTTP/1.1\r\nHost: gateway.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
    assert_eq!(h.account.started(), 0);
    let answer = raw(
        h.proxy,
        b"GET http://gateway.example/accounts/1 HTTP/1.1\r\nHost: gateway.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.contains("\"path\":\"/accounts/1\""), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_are_normalised_before_routing_and_escapes_are_400() {
    let h = start("").await;
    let ask = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").into_bytes()
    };
    // Routed by the normalised path: transfers (strip-prefix), which sees /7.
    for path in [
        "/accounts/../transfers/7",
        "/accounts/%2e%2E/transfers/7",
        "/accounts/./../transfers/./7",
    ] {
        let answer = raw(h.proxy, &ask(path)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer:?}");
        assert!(
            answer.contains("\"upstream\":\"transfer-service\""),
            "{path}: {answer:?}"
        );
        assert!(answer.contains("\"path\":\"/7\""), "{path}: {answer:?}");
    }
    let answer = raw(h.proxy, &ask("/accounts/./1?q=a/../b")).await;
    assert!(answer.contains("\"path\":\"/accounts/1\""), "{answer:?}");
    // Escaping the root.
    for path in [
        "/../accounts/1",
        "/accounts/../../x",
        "/accounts/%2e%2e/%2E%2E/etc/passwd",
    ] {
        let answer = raw(h.proxy, &ask(path)).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer:?}");
    }
    assert_eq!(
        h.account.started(),
        1,
        "account-service saw /accounts/./1 only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_valid_host_is_required() {
    let h = start("").await;
    for request in [
        &b"GET /accounts/1 HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET /accounts/1 HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n",
        b"GET /accounts/1 HTTP/1.1\r\nHost: user@a.example\r\nConnection: close\r\n\r\n",
        b"GET /accounts/1 HTTP/1.1\r\nHost: a.example:99999\r\nConnection: close\r\n\r\n",
        b"GET /accounts/1 HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n",
        b"GET /accounts/1 HTTP/1.0\r\n\r\n",
    ] {
        let answer = raw(h.proxy, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.starts_with("HTTP/1.0 400"),
            "{:?}: {answer:?}",
            String::from_utf8_lossy(request)
        );
    }
    assert_eq!(h.account.started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_and_error_bodies_name_the_cluster_never_an_upstream() {
    let h = start("").await;
    let internal = h.account_addr.to_string();
    h.account.set_mode(cutout_gateway::upstream::Mode::Fail);
    for _ in 0..5 {
        get(&format!("http://{}/accounts/1", h.proxy)).await;
    }
    let refused = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(refused.status, 503);
    assert!(refused.body.contains("account-service"), "{}", refused.body);
    assert!(!refused.body.contains(&internal), "{}", refused.body);
    assert!(!refused.body.contains("http://"), "{}", refused.body);
    // A timeout's body neither.
    h.transfer.set_mode(cutout_gateway::upstream::Mode::Hang);
    let timed_out = get(&format!("http://{}/transfers/1", h.proxy)).await;
    assert_eq!(timed_out.status, 504);
    assert!(
        !timed_out.body.contains(&h.transfer_addr.to_string()),
        "{}",
        timed_out.body
    );
    assert!(
        status_line(
            &raw(
                h.proxy,
                b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            )
            .await
        )
        .starts_with("HTTP/1.1 503")
    );
}

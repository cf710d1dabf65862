//! The breaker sees the whole response: a body cut short by the upstream is a failure, a body
//! that stalls is cut at the attempt timeout and is a failure, and a client that reads slowly
//! is not the upstream's failure.

mod common;

use std::time::{Duration, Instant};

use axum::Router;
use common::{RawUpstream, raw_upstream, read_until_closed, serve_router, start_config};
use cutout::State;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

const CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "300ms"

[[routes]]
prefix = "/"
cluster = "files"

[clusters.files]
upstreams = ["http://127.0.0.1:{port}"]

[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
window-duration = "10s"
break-duration = "30s"
max-break-duration = "30s"
jitter = "none"
half-open-probes = 1
probe-successes = 1
consecutive-failures = "off"
adaptive = false
"#;

fn config(port: u16) -> String {
    CONFIG.replace("{port}", &port.to_string())
}

/// An upstream that promises 100 bytes, sends 10, and closes the connection.
async fn truncating() -> RawUpstream {
    raw_upstream(100, |mut conn: TcpStream| async move {
        let _ = conn
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            .await;
        let _ = conn.shutdown().await;
    })
    .await
}

/// An upstream that sends its head and 10 bytes of 100, then says nothing for 20 s.
async fn stalling() -> RawUpstream {
    raw_upstream(100, |mut conn: TcpStream| async move {
        let _ = conn
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            .await;
        tokio::time::sleep(Duration::from_secs(20)).await;
    })
    .await
}

async fn request(addr: std::net::SocketAddr) -> (String, bool, Duration) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    read_until_closed(&mut stream, Duration::from_secs(5)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_body_is_a_failure() {
    let upstream = truncating().await;
    let h = start_config(&config(upstream.addr.port())).await;
    let mut answers = Vec::new();
    for _ in 0..8 {
        let (answer, closed, _) = request(h.proxy).await;
        assert!(closed, "{answer:?}");
        answers.push(answer.lines().next().unwrap_or("").to_owned());
    }
    let s = h.gateway.registry().snapshot("files").unwrap();
    assert_eq!(
        (s.calls, s.failures, s.state),
        (5, 5, State::Open),
        "five truncated bodies are five failures and open the breaker: {answers:?}"
    );
    assert!(
        answers[5..].iter().all(|a| a.starts_with("HTTP/1.1 503")),
        "{answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_cut_at_the_attempt_timeout_and_is_a_failure() {
    let upstream = stalling().await;
    let h = start_config(&config(upstream.addr.port())).await;
    let started = Instant::now();
    let (answer, closed, _) = request(h.proxy).await;
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(
        closed && took < Duration::from_secs(2),
        "the client is let go at the 300 ms attempt timeout, not after the upstream's 20 s \
         stall: closed {closed} after {took:?}"
    );
    let s = h.gateway.registry().snapshot("files").unwrap();
    assert_eq!(
        (s.calls, s.failures),
        (1, 1),
        "the stalled body is a failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_slowly_is_not_the_upstream_s_failure() {
    let (stop, _) = watch::channel(false);
    const SIZE: usize = 8 << 20;
    let big = Router::new().fallback(|| async { vec![b'x'; SIZE] });
    let addr = serve_router(big, &stop).await;
    let h = start_config(&config(addr.port())).await;
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    // Read a little, then stop reading for longer than the attempt timeout.
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    use tokio::io::AsyncReadExt;
    total += stream.read(&mut buf).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("bytes keep coming")
            .unwrap();
        if n == 0 || Instant::now() > deadline {
            break;
        }
        total += n;
    }
    assert!(total > SIZE, "the whole body arrived: {total} bytes");
    let s = h.gateway.registry().snapshot("files").unwrap();
    assert_eq!((s.calls, s.failures), (1, 0), "a success");
}

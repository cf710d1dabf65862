//! WebSocket pass-through: an HTTP/1.1 `Upgrade: websocket` request reaches the upstream with its upgrade headers, the 101 comes back, then bytes are copied both ways; what happens on the tunnel is counted by no breaker, and an idle tunnel is closed after `idle-timeout`. A raw-socket client and a hyper upstream on loopback.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An upstream that switches to WebSocket when asked and then echoes what it reads,
/// uppercased; after `hang_up` bytes it resets the tunnel (drops it without a close).
async fn upgrading_upstream(hang_up: Option<usize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let service =
                hyper::service::service_fn(move |mut request: Request<Incoming>| async move {
                    let asked = request
                        .headers()
                        .get("upgrade")
                        .is_some_and(|v| v == "websocket")
                        && request.headers().contains_key("sec-websocket-key");
                    if !asked {
                        let mut response = Response::new(Empty::<Bytes>::new());
                        *response.status_mut() = StatusCode::BAD_REQUEST;
                        return Ok::<_, std::convert::Infallible>(response);
                    }
                    let on = hyper::upgrade::on(&mut request);
                    tokio::spawn(async move {
                        let Ok(upgraded) = on.await else { return };
                        let mut io = TokioIo::new(upgraded);
                        let mut buf = [0u8; 1024];
                        let mut seen = 0;
                        while let Ok(n) = io.read(&mut buf).await {
                            if n == 0 {
                                return;
                            }
                            seen += n;
                            if hang_up.is_some_and(|limit| seen >= limit) {
                                return;
                            }
                            let upper = buf[..n].to_ascii_uppercase();
                            if io.write_all(&upper).await.is_err() {
                                return;
                            }
                        }
                    });
                    let response = Response::builder()
                        .status(StatusCode::SWITCHING_PROTOCOLS)
                        .header("upgrade", "websocket")
                        .header("connection", "Upgrade")
                        .header("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    Ok(response)
                });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades(),
            );
        }
    });
    addr
}

fn config(upstream: SocketAddr, gateway_extra: &str) -> String {
    format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
{gateway_extra}

[[routes]]
prefix = "/"
cluster = "ws"

[clusters.ws]
upstreams = ["http://{upstream}"]

[breakers.defaults]
consecutive-failures = 1
adaptive = false
"#
    )
}

/// Opens a WebSocket through the gateway at `proxy`; the client's stream and the 101's head.
async fn open(proxy: SocketAddr) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(
            b"GET /chat HTTP/1.1\r\nHost: gateway.test\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .unwrap();
    let head = tokio::time::timeout(Duration::from_secs(5), common::read_head(&mut stream))
        .await
        .expect("the 101 arrives");
    (stream, String::from_utf8_lossy(&head).into_owned())
}

async fn echo(stream: &mut TcpStream, text: &str) -> String {
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; text.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
        .await
        .expect("the echo comes back")
        .unwrap();
    String::from_utf8(buf).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_upgrade_is_switched_and_bytes_flow_both_ways() {
    let upstream = upgrading_upstream(None).await;
    let gateway = common::start_gateway(&config(upstream, ""), None).await;
    let (mut stream, head) = open(gateway.proxy).await;
    let lower = head.to_ascii_lowercase();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(lower.contains("upgrade: websocket"), "{head}");
    assert!(lower.contains("connection: upgrade"), "{head}");
    assert!(lower.contains("sec-websocket-accept:"), "{head}");
    for n in 0..50 {
        assert_eq!(
            echo(&mut stream, &format!("frame {n};")).await,
            format!("FRAME {n};")
        );
    }
    let breaker = gateway.gateway.clusters()["ws"].breaker().snapshot();
    assert_eq!(
        (breaker.calls, breaker.failures),
        (1, 0),
        "the 101 is one success"
    );
    // The gateway still serves ordinary requests (the upstream's 400 for a plain GET).
    let reply = common::get(&format!("http://{}/plain", gateway.proxy)).await;
    assert_eq!(reply.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_that_breaks_after_the_101_is_counted_by_no_breaker() {
    // The upstream resets the tunnel after 20 bytes; the breaker opens on one failure.
    let upstream = upgrading_upstream(Some(20)).await;
    let gateway = common::start_gateway(&config(upstream, ""), None).await;
    for _ in 0..3 {
        let (mut stream, head) = open(gateway.proxy).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert_eq!(echo(&mut stream, "hello").await, "HELLO");
        stream.write_all(&[b'x'; 30]).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
            .await
            .expect("the tunnel is closed when the upstream hangs up");
        assert!(read.is_ok() || rest.is_empty());
    }
    let breaker = gateway.gateway.clusters()["ws"].breaker().clone();
    assert_eq!(breaker.state(), cutout::State::Closed);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (3, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tunnel_is_closed_after_idle_timeout() {
    let upstream = upgrading_upstream(None).await;
    let extra = "request-timeout = \"300ms\"\nidle-timeout = \"500ms\"";
    let gateway = common::start_gateway(&config(upstream, extra), None).await;
    let (mut stream, head) = open(gateway.proxy).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // Bytes keep it open past idle-timeout.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(echo(&mut stream, "ping").await, "PING");
    }
    let quiet = Instant::now();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
        .await
        .expect("the idle tunnel is closed");
    let took = quiet.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "closed after about idle-timeout: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_refuses_the_upgrade() {
    let upstream = upgrading_upstream(None).await;
    let gateway = common::start_gateway(&config(upstream, ""), None).await;
    gateway.gateway.clusters()["ws"].breaker().isolate();
    let (_, head) = open(gateway.proxy).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
}

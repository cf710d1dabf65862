//! Shared test harness: two demo upstreams, a gateway on a manual clock served by `server::run` (the binary's
//! path: both listeners with their configured limits), an HTTP client and raw-socket helpers, all on loopback.
#![allow(dead_code)]

mod limited;
mod logs;
mod processes;
mod shipped;
mod sources;
pub mod tls;
mod unread;

// Not every test binary uses every helper.
#[allow(unused_imports)]
pub use limited::{Limited, fetch};
#[allow(unused_imports)]
pub use logs::{access_lines, access_lines_under, field, five_xx, lines_with, log, log_mark};
#[allow(unused_imports)]
pub use processes::{BusyLoop, Proc, Wrk, WrkReport, served, upstream_process, wrk_or_skip};
#[allow(unused_imports)]
pub use shipped::{
    HttpClient, Running, client, opens, serve_gateway, shipped, skip_breaks_until_grown,
    start_gateway, status,
};
#[allow(unused_imports)]
pub use sources::{connect_from, get_from, wide_upstream};
#[allow(unused_imports)]
pub use unread::UnreadStreams;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cutout::clock::ManualClock;
use cutout_gateway::upstream::Upstream;
use cutout_gateway::{Gateway, GatewayConfig, server};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// What `server::run` returns.
pub type RunResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The config of the tests: seed 002's breaker (5 calls, ratio 0.5, 30 s break, one probe).
pub const CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
attempt-timeout = "300ms"
{gateway_extra}

[[routes]]
prefix = "/accounts"
cluster = "account-service"

[[routes]]
prefix = "/transfers"
cluster = "transfer-service"
strip-prefix = true

[clusters.account-service]
upstreams = ["http://127.0.0.1:{account}"]

[clusters.transfer-service]
upstreams = ["http://127.0.0.1:{transfer}"]

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

pub struct Harness {
    pub gateway: Arc<Gateway>,
    pub clock: ManualClock,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub account: Arc<Upstream>,
    pub account_addr: SocketAddr,
    pub transfer: Arc<Upstream>,
    pub transfer_addr: SocketAddr,
    /// The gateway's `server::run` task (ends after [`Harness::shut_down`]).
    pub run: Option<JoinHandle<RunResult>>,
    /// Stops the gateway only (its upstreams keep running).
    gateway_stop: watch::Sender<bool>,
    stop: watch::Sender<bool>,
}

async fn serve(router: axum::Router, stop: &watch::Sender<bool>) -> SocketAddr {
    let listener = server::bind("test", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = stop.subscribe();
    tokio::spawn(server::serve(listener, router, async move {
        let _ = rx.wait_for(|s| *s).await;
    }));
    addr
}

/// [`CONFIG`] with `gateway_extra` in `[gateway]` (an `attempt-timeout` there replaces the
/// default 300 ms) and the upstreams' ports.
pub fn config_text(gateway_extra: &str, account: u16, transfer: u16) -> String {
    let mut text = CONFIG.to_owned();
    if gateway_extra.contains("attempt-timeout") {
        text = text.replace("attempt-timeout = \"300ms\"\n", "");
    }
    text.replace("{gateway_extra}", gateway_extra)
        .replace("{account}", &account.to_string())
        .replace("{transfer}", &transfer.to_string())
}

/// The gateway of [`CONFIG`] in front of two demo upstreams.
pub async fn start(gateway_extra: &str) -> Harness {
    start_with(gateway_extra, None).await
}

/// As [`start`], with account-service's upstream at `account_port` instead of a demo upstream
/// (the demo upstream still runs, unused).
pub async fn start_with(gateway_extra: &str, account_port: Option<u16>) -> Harness {
    let (stop, _) = watch::channel(false);
    let account = Upstream::new("account-service");
    let transfer = Upstream::new("transfer-service");
    let account_addr = serve(account.app(), &stop).await;
    let transfer_addr = serve(transfer.app(), &stop).await;
    let text = config_text(
        gateway_extra,
        account_port.unwrap_or(account_addr.port()),
        transfer_addr.port(),
    );
    let config = GatewayConfig::from_toml(&text).unwrap();
    let clock = ManualClock::new();
    let gateway = Gateway::with_clock(config, clock.clone());
    let (gateway_stop, mut rx) = watch::channel(false);
    let (tx, bound) = oneshot::channel();
    let run = tokio::spawn(server::run(
        Arc::clone(&gateway),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
        move |proxy, admin| {
            let _ = tx.send((proxy, admin));
        },
    ));
    let (proxy, admin) = bound.await.expect("the gateway binds its listeners");
    Harness {
        gateway,
        clock,
        proxy,
        admin,
        account,
        account_addr,
        transfer,
        transfer_addr,
        run: Some(run),
        gateway_stop,
        stop,
    }
}

impl Harness {
    /// Asks the gateway to shut down (as SIGTERM does) and returns its `server::run` task.
    pub fn shut_down(&mut self) -> JoinHandle<RunResult> {
        let _ = self.gateway_stop.send(true);
        self.run.take().expect("shut down once")
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.gateway_stop.send(true);
        let _ = self.stop.send(true);
    }
}

/// Reads from `stream` until the peer closes it (or resets it) or `limit` passes; returns what
/// was read, whether it was closed, and when.
pub async fn read_until_closed(
    stream: &mut TcpStream,
    limit: Duration,
) -> (String, bool, Duration) {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + limit;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let closed = loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (
        String::from_utf8_lossy(&out).into_owned(),
        closed,
        started.elapsed(),
    )
}

/// Writes `raw` to `addr` and reads the answer until the server closes (at most 5 s).
pub async fn raw(addr: SocketAddr, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    read_until_closed(&mut stream, Duration::from_secs(5))
        .await
        .0
}

/// Reads one HTTP/1.1 response with a `Content-Length` from `stream` (at most 5 s): head and
/// body, nothing more.
pub async fn read_response(stream: &mut TcpStream) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut byte))
            .await
            .expect("a response head within 5 s")
            .unwrap();
        assert!(
            n == 1,
            "closed before the head ended: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&out).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("a content-length");
    let mut body = vec![0u8; length];
    tokio::time::timeout_at(deadline, stream.read_exact(&mut body))
        .await
        .expect("a body within 5 s")
        .unwrap();
    head + &String::from_utf8_lossy(&body)
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// Sends one request (bounded by 10 s) and reads the whole answer.
pub async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut builder = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let request = builder
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .expect("an answer within 10 s")
        .expect("a response");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(url: &str) -> Reply {
    send(Method::GET, url, &[], "").await
}

pub async fn post(url: &str) -> Reply {
    send(Method::POST, url, &[], "").await
}

/// Waits (at most `limit`) until `check` holds.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

/// A gateway of any configuration, served by `server::run` on a manual clock.
pub struct Custom {
    pub gateway: Arc<Gateway>,
    pub clock: ManualClock,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Drop for Custom {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Starts a gateway of `text` (a whole configuration; listeners on port 0).
pub async fn start_config(text: &str) -> Custom {
    let config = GatewayConfig::from_toml(text).unwrap();
    let clock = ManualClock::new();
    let gateway = Gateway::with_clock(config, clock.clone());
    let (proxy, admin, stop) = serve_gateway(&gateway).await;
    Custom {
        gateway,
        clock,
        proxy,
        admin,
        stop,
    }
}

/// A demo upstream served on loopback until `stop` says so; returns its address.
pub async fn serve_upstream(upstream: &Arc<Upstream>, stop: &watch::Sender<bool>) -> SocketAddr {
    serve(upstream.app(), stop).await
}

/// A router served on loopback until `stop` says so.
pub async fn serve_router(router: axum::Router, stop: &watch::Sender<bool>) -> SocketAddr {
    serve(router, stop).await
}

/// A port nobody listens on (bound, then freed).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A raw TCP upstream: reads each request head, then runs `answer` on the connection (at most
/// `limit` connections, then it stops accepting). Aborted when the handle is dropped.
pub struct RawUpstream {
    pub addr: SocketAddr,
    pub accepted: Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn raw_upstream<F, Fut>(limit: usize, answer: F) -> RawUpstream
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let task = tokio::spawn(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..limit {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let head = read_head(&mut conn).await;
            if head.is_empty() {
                continue;
            }
            tasks.spawn(answer(conn));
        }
        while tasks.join_next().await.is_some() {}
    });
    RawUpstream {
        addr,
        accepted,
        task,
    }
}

/// Reads bytes until the end of a request head (at most 5 s); empty if the peer closed first.
pub async fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut byte)).await {
            Ok(Ok(1)) => out.push(byte[0]),
            _ => return Vec::new(),
        }
    }
    out
}

/// Sends `GET path` on a fresh connection, waits `after`, and closes the connection without
/// reading: a client that gave up.
pub async fn give_up_after(addr: SocketAddr, path: &str, after: Duration) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(after).await;
    drop(stream);
}

/// The value of `series` (a full series, labels included, as rendered) in a Prometheus text
/// exposition.
pub fn metric_value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// The breakers' clock for tests that skip a break or a downtime: real (monotonic) time plus
/// the jumps the test makes.
///
/// # Orderings
///
/// `Relaxed`: the offset is one number read on its own; a jump only has to be seen by the
/// calls that start after the test made it, which the test's own request (a socket round trip
/// through other threads' synchronisation) orders.
#[derive(Debug, Clone)]
pub struct Warp {
    start: std::time::Instant,
    offset: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Warp {
    pub fn new() -> Warp {
        Warp {
            start: std::time::Instant::now(),
            offset: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Jumps the breakers' time forward by `by`.
    pub fn skip(&self, by: std::time::Duration) {
        self.offset
            .fetch_add(by.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl cutout::clock::Clock for Warp {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
            + self.offset.load(std::sync::atomic::Ordering::Relaxed)
    }
}

//! A client that leaves is never the upstream's failure: what counts is the upstream's own
//! outcome. A client that leaves a healthy slow endpoint leaves its cluster closed; a hung
//! upstream whose clients all leave still opens it, at the attempt timeout; a client that
//! half-closes its connection after its request gets its answer; the gateway's own deadline
//! counts for nothing. All on loopback against the demo upstream (`cutout-gateway upstream`).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, get, give_up_after, metric_value, serve_upstream, start, start_config};
use cutout::State;
use cutout_gateway::Gateway;
use cutout_gateway::upstream::{Mode, Upstream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A gateway with the shipped breaker defaults (no `[breakers]` section, unless `breakers`
/// gives one) in front of one demo upstream, as cluster `cluster` on `/accounts`. Metrics are
/// process-wide, so each test names its own cluster.
struct Shipped {
    gateway: Arc<Gateway>,
    proxy: SocketAddr,
    admin: SocketAddr,
    up: Arc<Upstream>,
    cluster: &'static str,
    _custom: common::Custom,
    _stop: watch::Sender<bool>,
}

async fn shipped(cluster: &'static str, gateway_extra: &str, breakers: &str) -> Shipped {
    let (stop, _) = watch::channel(false);
    let up = Upstream::new(cluster);
    let addr = serve_upstream(&up, &stop).await;
    let custom = start_config(&format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
{gateway_extra}

[[routes]]
prefix = "/accounts"
cluster = "{cluster}"

[clusters.{cluster}]
upstreams = ["http://127.0.0.1:{port}"]
{breakers}
"#,
        port = addr.port()
    ))
    .await;
    Shipped {
        gateway: Arc::clone(&custom.gateway),
        proxy: custom.proxy,
        admin: custom.admin,
        up,
        cluster,
        _custom: custom,
        _stop: stop,
    }
}

impl Shipped {
    /// Waits until every attempt of the 35 (warm-up and leavers) settled, answered and recorded
    /// or cancelled, and asserts that none counted as a failure and the cluster is closed; the
    /// snapshot then.
    async fn settled_closed(&self, what: &str) -> cutout::Snapshot {
        assert!(
            eventually(Duration::from_secs(3), || self.up.started()
                == self.up.finished() + self.up.cancelled()
                && self.snapshot().calls + self.up.cancelled() >= 35)
            .await
        );
        let s = self.snapshot();
        assert_eq!(
            (s.failures, s.state),
            (0, State::Closed),
            "clients that left a healthy {what} counted against it: {s:?}"
        );
        s
    }

    fn snapshot(&self) -> cutout::Snapshot {
        self.gateway.registry().snapshot(self.cluster).unwrap()
    }

    /// `cutout_gateway_give_ups_total` of this cluster with `counted`, 0 when not exported.
    async fn give_ups(&self, counted: &str) -> f64 {
        let scrape = get(&format!("http://{}/metrics", self.admin)).await;
        metric_value(
            &scrape.body,
            &format!(
                "cutout_gateway_give_ups_total{{cluster=\"{}\",counted=\"{counted}\"}}",
                self.cluster
            ),
        )
        .unwrap_or(0.0)
    }

    /// [`Self::give_ups`] once it reads `want`, or what it reads after 2 s: a give-up is
    /// counted when its request's record ends, not ordered with its attempt's count.
    async fn give_ups_reaching(&self, counted: &str, want: f64) -> f64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let now = self.give_ups(counted).await;
            if now == want || tokio::time::Instant::now() >= deadline {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// 30 quick answers: the cluster's normal latency is a millisecond or so.
    async fn warm_up(&self) {
        let url = format!("http://{}/accounts/1", self.proxy);
        for _ in 0..30 {
            assert_eq!(get(&url).await.status, 200);
        }
    }

    /// `n` clients at once ask `path` and leave after `after` without reading.
    async fn leave(&self, n: usize, path: &'static str, after: Duration) {
        let proxy = self.proxy;
        let clients: Vec<_> = (0..n)
            .map(|_| tokio::spawn(give_up_after(proxy, path, after)))
            .collect();
        for client in clients {
            client.await.unwrap();
        }
    }
}

/// Five clients ask a healthy endpoint that answers in 400 ms and leave after 200 ms: the
/// upstream answered every one of them, so the cluster stays closed and the next client is
/// served.
async fn clients_leave_a_healthy_slow_endpoint(h: &Shipped) {
    h.warm_up().await;
    h.leave(5, "/accounts/1?delay=400ms", Duration::from_millis(200))
        .await;
    // Every attempt settles: answered (and recorded a moment later) or cancelled.
    h.settled_closed("endpoint").await;
    let next = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(next.status, 200, "{}", next.body);
    assert_eq!(
        (h.up.finished(), h.up.cancelled()),
        (36, 0),
        "the upstream answered every one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_leave_a_healthy_slow_endpoint_leave_it_closed_at_the_shipped_defaults() {
    let h = shipped("leave-shipped", "", "").await;
    clients_leave_a_healthy_slow_endpoint(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_leave_a_healthy_slow_endpoint_leave_it_closed_without_adaptive() {
    let h = shipped("leave-fixed", "", "[breakers.defaults]\nadaptive = false").await;
    clients_leave_a_healthy_slow_endpoint(&h).await;
}

/// A hung upstream whose clients all leave after 200 ms: each attempt runs to its attempt
/// timeout (1 s) and fails, so the cluster opens within the attempt timeout plus a second.
async fn impatient_clients_on_a_hung_upstream(h: &Shipped) {
    h.warm_up().await;
    h.up.set_mode(Mode::Hang);
    let started = Instant::now();
    h.leave(5, "/accounts/1", Duration::from_millis(200)).await;
    assert!(
        eventually(Duration::from_secs(3), || h.snapshot().state == State::Open).await,
        "{:?}",
        h.snapshot()
    );
    let opened = started.elapsed();
    println!("{}: opened {opened:?} after the clients came", h.cluster);
    assert!(
        opened <= Duration::from_secs(2),
        "opened {opened:?} after the clients came: later than the attempt timeout + 1 s"
    );
    let s = h.snapshot();
    assert_eq!(s.failures, 5, "{s:?}");
    assert_eq!(h.up.started(), 35);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impatient_clients_cannot_hide_a_hung_upstream_at_the_shipped_defaults() {
    let h = shipped("hung-shipped", "attempt-timeout = \"1s\"", "").await;
    impatient_clients_on_a_hung_upstream(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impatient_clients_cannot_hide_a_hung_upstream_without_adaptive() {
    let h = shipped(
        "hung-fixed",
        "attempt-timeout = \"1s\"",
        "[breakers.defaults]\nadaptive = false",
    )
    .await;
    impatient_clients_on_a_hung_upstream(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_request_gets_its_answer_and_counts_nothing_against_the_upstream() {
    let h = shipped("half-close", "", "").await;
    h.warm_up().await;
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    stream
        .write_all(b"GET /accounts/1?delay=400ms HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    // The client is done sending: it shuts its write side down and waits for the answer.
    stream.shutdown().await.unwrap();
    let (answer, closed, _) = common::read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "a half-closed request was not answered: {answer:?}"
    );
    assert!(answer.contains("\"upstream\":\"half-close\""), "{answer}");
    assert!(closed, "the gateway closes the connection after the answer");
    assert!(eventually(Duration::from_secs(2), || h.snapshot().calls == 31).await);
    let s = h.snapshot();
    assert_eq!((s.failures, s.state), (0, State::Closed), "{s:?}");
    assert_eq!((h.up.finished(), h.up.cancelled()), (31, 0));
    let scrape = get(&format!("http://{}/metrics", h.admin)).await;
    let give_ups: Vec<&str> = scrape
        .body
        .lines()
        .filter(|l| l.starts_with("cutout_gateway_give_ups_total{cluster=\"half-close\""))
        .collect();
    assert!(
        give_ups.iter().all(|l| l.ends_with(" 0")),
        "counted as a give-up: {give_ups:#?}"
    );
}

/// A client that reads the head of a healthy stream (40 chunks, 25 ms apart) and leaves after
/// 200 ms: the gateway finds it gone when its next writes fail, and the rest of the stream is
/// drained detached and judged whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_healthy_stream_counts_the_stream_s_own_outcome() {
    let h = shipped("leave-stream", "", "").await;
    h.warm_up().await;
    let clients: Vec<_> = (0..5)
        .map(|_| {
            let proxy = h.proxy;
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(proxy).await.unwrap();
                stream
                    .write_all(
                        b"GET /accounts/1?chunks=40&every=25ms HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                    )
                    .await
                    .unwrap();
                let mut buf = [0u8; 256];
                let n = stream.read(&mut buf).await.unwrap();
                assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "the head came");
                tokio::time::sleep(Duration::from_millis(200)).await;
                drop(stream);
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let s = h.settled_closed("stream").await;
    assert_eq!(
        (s.calls, h.up.finished(), h.up.cancelled()),
        (35, 35, 0),
        "every stream ran to its end"
    );
    assert_eq!(h.give_ups_reaching("detached", 5.0).await, 5.0);
    assert_eq!(
        get(&format!("http://{}/accounts/1", h.proxy)).await.status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_stalled_body_counts_it_at_the_attempt_timeout() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    // Whole answers for the first 25 connections, then a head and 10 of 100 bytes, then
    // nothing for 20 s.
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    let upstream = common::raw_upstream(100, move |mut conn: tokio::net::TcpStream| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 25 {
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            } else {
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                    .await;
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
        }
    })
    .await;
    let h = common::start_with("attempt-timeout = \"1s\"", Some(upstream.addr.port())).await;
    let url = format!("http://{}/accounts/1", h.proxy);
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    let mut last = Instant::now();
    for _ in 0..5 {
        let mut stream = tokio::net::TcpStream::connect(h.proxy).await.unwrap();
        stream
            .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "the head came");
        last = Instant::now();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(stream);
    }
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert!(
        eventually(Duration::from_secs(3), || breaker.state() == State::Open).await,
        "{:?}",
        breaker.snapshot()
    );
    assert!(
        last.elapsed() <= Duration::from_secs(3),
        "opened later than the last stall's attempt timeout + 1 s"
    );
    let s = breaker.snapshot();
    assert_eq!((s.calls, s.failures), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_s_own_deadline_counts_for_nothing() {
    let h = start("attempt-timeout = \"5s\"\nrequest-timeout = \"400ms\"").await;
    let url = format!("http://{}/accounts/1", h.proxy);
    for _ in 0..25 {
        assert_eq!(get(&url).await.status, 200);
    }
    h.gateway.registry().reset("account-service").unwrap();
    h.account.set_mode(Mode::Hang);
    for _ in 0..5 {
        let reply = get(&url).await;
        assert_eq!(reply.status, 504);
        assert!(reply.body.contains("deadline"), "{}", reply.body);
    }
    let s = h.gateway.registry().snapshot("account-service").unwrap();
    assert_eq!((s.calls, s.failures, s.state), (0, 0, State::Closed));
    assert!(eventually(Duration::from_secs(3), || h.account.cancelled() == 5).await);
}

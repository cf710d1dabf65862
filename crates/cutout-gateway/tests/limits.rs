//! Bounded resources: header-read and idle timeouts, connections per listener, body size, the whole-request
//! deadline, reaping idle pooled upstream connections, the shutdown drain deadline, SIGHUP, and the
//! validation of every limit. Short configured timeouts, raw sockets on loopback, bounded waits.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, get, raw, read_response, read_until_closed, send, start, start_with};
use cutout::State;
use cutout_gateway::GatewayConfig;
use cutout_gateway::upstream::Mode;
use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_head_is_cut_at_the_header_read_timeout() {
    let h = start("header-read-timeout = \"200ms\"").await;
    for addr in [h.proxy, h.admin] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let (_, closed, after) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
        assert!(closed, "{addr}: still open after 3 s");
        assert!(
            after < Duration::from_millis(1500),
            "{addr}: closed after {after:?}"
        );
        // A connection that never sends anything too.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let (_, closed, _) = read_until_closed(&mut silent, Duration::from_secs(3)).await;
        assert!(closed, "{addr}: a silent connection stays open");
    }
    assert_eq!(h.account.started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let h = start(
        "header-read-timeout = \"10s\"\nidle-timeout = \"300ms\"\nrequest-timeout = \"300ms\"",
    )
    .await;
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    stream
        .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answer = read_response(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    let (rest, closed, after) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert!(closed, "the idle connection is still open after 3 s");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        after < Duration::from_millis(1500),
        "closed after {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped_per_listener_and_a_proxy_flood_leaves_admin_reachable() {
    let h = start("max-connections = 2\nadmin-max-connections = 2").await;
    // The proxy's two slots taken by idle connections.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(h.proxy).await.unwrap());
    }
    // Give the accept loop time to count them: a third is refused (closed at once).
    let mut refused_one = false;
    for _ in 0..20 {
        let mut extra = TcpStream::connect(h.proxy).await.unwrap();
        let (_, closed, _) = read_until_closed(&mut extra, Duration::from_millis(500)).await;
        if closed {
            refused_one = true;
            break;
        }
    }
    assert!(refused_one, "a third proxy connection was kept open");
    // The operator still gets in.
    let health = get(&format!("http://{}/healthz", h.admin)).await;
    assert_eq!(health.status, 200);
    // Admin has its own cap.
    let mut admin_held = Vec::new();
    for _ in 0..2 {
        admin_held.push(TcpStream::connect(h.admin).await.unwrap());
    }
    let mut admin_refused = false;
    for _ in 0..20 {
        let mut extra = TcpStream::connect(h.admin).await.unwrap();
        let (_, closed, _) = read_until_closed(&mut extra, Duration::from_millis(500)).await;
        if closed {
            admin_refused = true;
            break;
        }
    }
    assert!(admin_refused, "a third admin connection was kept open");
    // A freed slot is usable again.
    drop(held.pop());
    let mut served = false;
    for _ in 0..50 {
        let answer = raw(
            h.proxy,
            b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        if answer.starts_with("HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "a freed slot is not reused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_413_never_forwarded_and_never_counted() {
    let h = start("max-request-body = 1024").await;
    let big = "x".repeat(2000);
    let request = format!(
        "POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n{big}"
    );
    let answer = raw(h.proxy, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
    assert_eq!(h.account.started(), 0, "refused before forwarding");
    // Chunked: the limit is found while streaming.
    let chunk = "y".repeat(600);
    let request = format!(
        "POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let answer = raw(h.proxy, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
    // Within the limit: forwarded whole.
    let reply = send(
        Method::POST,
        &format!("http://{}/accounts/1", h.proxy),
        &[],
        &"z".repeat(1024),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("\"body_bytes\":1024"), "{}", reply.body);
    let s = h.gateway.registry().snapshot("account-service").unwrap();
    assert_eq!((s.calls, s.failures), (1, 0), "the 413s were not counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_request_deadline_answers_504_in_time() {
    let h = start("attempt-timeout = \"5s\"\nrequest-timeout = \"200ms\"").await;
    h.transfer.set_mode(Mode::Hang);
    let started = Instant::now();
    let reply = get(&format!("http://{}/transfers/1", h.proxy)).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 504);
    assert!(reply.body.contains("deadline"), "{}", reply.body);
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert!(
        eventually(Duration::from_secs(3), || h.transfer.cancelled() == 1).await,
        "the forward was cancelled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_pooled_upstream_connections_are_reaped() {
    // A raw upstream: answers one request per connection with keep-alive, then reports when
    // the gateway closes the connection.
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = upstream.local_addr().unwrap().port();
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for _ in 0..4 {
            let Ok((mut conn, _)) = upstream.accept().await else {
                return;
            };
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await
                    .unwrap();
                let answered = Instant::now();
                let mut rest = [0u8; 64];
                let _ = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut rest)).await;
                let _ = closed_tx.send(answered.elapsed());
            });
        }
    });
    let h = start_with("pool-idle-timeout = \"200ms\"", Some(port)).await;
    let reply = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(reply.status, 200);
    let after = tokio::time::timeout(Duration::from_secs(6), closed_rx.recv())
        .await
        .expect("the upstream task reports")
        .expect("a report");
    assert!(
        after < Duration::from_secs(2),
        "the pooled connection was held {after:?} (pool-idle-timeout 200 ms)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_requests_then_gives_up_at_the_deadline() {
    // Drain: a 1.5 s request finishes within a 3 s shutdown deadline.
    let mut h = start("attempt-timeout = \"5s\"\nshutdown-timeout = \"3s\"").await;
    h.transfer.set_mode(Mode::Slow);
    let url = format!("http://{}/transfers/1", h.proxy);
    let slow = tokio::spawn(async move { get(&url).await });
    assert!(eventually(Duration::from_secs(3), || h.transfer.started() == 1).await);
    let run = h.shut_down();
    let reply = slow.await.unwrap();
    assert_eq!(reply.status, 200, "the in-flight request was drained");
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns after the drain")
        .unwrap()
        .unwrap();

    // Deadline: a hung request is cut when the 300 ms deadline passes.
    let mut h = start("attempt-timeout = \"5s\"\nshutdown-timeout = \"300ms\"").await;
    h.transfer.set_mode(Mode::Hang);
    let proxy = h.proxy;
    let hung = tokio::spawn(async move {
        let mut stream = TcpStream::connect(proxy).await.unwrap();
        stream
            .write_all(b"GET /transfers/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        read_until_closed(&mut stream, Duration::from_secs(10)).await
    });
    assert!(eventually(Duration::from_secs(3), || h.transfer.started() == 1).await);
    let started = Instant::now();
    let run = h.shut_down();
    tokio::time::timeout(Duration::from_secs(3), run)
        .await
        .expect("run gives up draining at the deadline")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    let (_, closed, _) = hung.await.unwrap();
    assert!(closed, "the hung connection was closed");
}

#[test]
fn sighup_does_not_stop_it_and_sigterm_still_does() {
    let dir = std::env::temp_dir().join(format!("cutout-gateway-sighup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    std::fs::write(
        &file,
        "[gateway]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [clusters.a]\nupstreams = [\"http://127.0.0.1:9\"]\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .arg("--config")
        .arg(&file)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let wait_for = |needle: &str, log: &mut Vec<String>| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            let found = line.contains(needle);
            log.push(line);
            if found {
                return true;
            }
        }
        false
    };
    let mut log = Vec::new();
    assert!(wait_for("listening", &mut log), "{log:#?}");
    let signal = |name: &str| {
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success());
    };
    signal("-HUP");
    assert!(wait_for("configuration reloaded", &mut log), "{log:#?}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP stopped it: {log:#?}"
    );
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("SIGTERM did not stop it: {log:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?} {log:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary under `ulimit -n 64`, flooded with 70 idle proxy connections: the proxy's cap
/// keeps descriptors free, so admin still answers, and the refusals are logged (before, the
/// gateway ran out of descriptors and neither listener answered, with nothing logged).
#[test]
fn a_connection_flood_under_a_low_descriptor_limit_leaves_admin_answering_and_is_logged() {
    use std::io::{Read, Write};
    let dir = std::env::temp_dir().join(format!("cutout-gateway-fds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    std::fs::write(
        &file,
        "[gateway]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         max-connections = 8\nadmin-max-connections = 4\n\
         [clusters.a]\nupstreams = [\"http://127.0.0.1:9\"]\n",
    )
    .unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" --config \"$1\"")
        .arg(env!("CARGO_BIN_EXE_cutout-gateway"))
        .arg(&file)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut log = Vec::new();
    let next_line = |log: &mut Vec<String>, limit: Duration| {
        let line = rx.recv_timeout(limit).ok()?;
        log.push(line.clone());
        Some(line)
    };
    let addrs = loop {
        let Some(line) = next_line(&mut log, Duration::from_secs(10)) else {
            let _ = child.kill();
            panic!("no listening line: {log:#?}");
        };
        if line.contains("listening") {
            let field = |name: &str| -> std::net::SocketAddr {
                let start = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
                line[start..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            break (field("proxy"), field("admin"));
        }
    };
    let (proxy, admin) = addrs;
    let flood: Vec<_> = (0..70)
        .filter_map(|_| std::net::TcpStream::connect(proxy).ok())
        .collect();
    assert!(flood.len() >= 60, "{}", flood.len());
    std::thread::sleep(Duration::from_millis(200));
    let mut answer = String::new();
    let asked = std::net::TcpStream::connect(admin).and_then(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        s.write_all(
            format!("GET /livez HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n").as_bytes(),
        )?;
        s.read_to_string(&mut answer)
    });
    let mut logged = false;
    while let Some(line) = next_line(&mut log, Duration::from_millis(500)) {
        logged |= line.contains("max_connections");
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(flood);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(asked.is_ok(), "{asked:?} {log:#?}");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?} {log:#?}");
    assert!(logged, "no refusal was logged: {log:#?}");
    assert!(
        log.iter().any(|l| l.contains("GW-WARN-002")),
        "the descriptor budget warning: {log:#?}"
    );
}

const MINIMAL: &str = "[clusters.a]\nupstreams = [\"http://127.0.0.1:7001\"]\n";

fn error_of(gateway: &str) -> cutout_gateway::ConfigError {
    GatewayConfig::from_toml(&format!("[gateway]\n{gateway}\n{MINIMAL}")).unwrap_err()
}

#[test]
fn every_limit_has_a_default_and_is_validated_with_a_code_naming_the_key() {
    let ok = GatewayConfig::from_toml(&format!(
        "[gateway]\nheader-read-timeout = \"5s\"\nidle-timeout = \"1m\"\nrequest-timeout = \"20s\"\n\
         max-connections = 100\nadmin-max-connections = 8\nmax-request-body = \"64KiB\"\n\
         pool-idle-timeout = \"10s\"\nshutdown-timeout = \"15s\"\nhealthz-strict = true\n{MINIMAL}"
    ));
    assert!(ok.is_ok(), "{ok:?}");
    for (line, code, key) in [
        (
            "max-connections = 0",
            "GW-CFG-009",
            "gateway.max-connections",
        ),
        (
            "admin-max-connections = -1",
            "GW-CFG-009",
            "gateway.admin-max-connections",
        ),
        (
            "max-connections = \"many\"",
            "GW-CFG-003",
            "gateway.max-connections",
        ),
        (
            "max-request-body = 0",
            "GW-CFG-009",
            "gateway.max-request-body",
        ),
        (
            "max-request-body = \"lots\"",
            "GW-CFG-004",
            "gateway.max-request-body",
        ),
        (
            "header-read-timeout = \"0s\"",
            "GW-CFG-004",
            "gateway.header-read-timeout",
        ),
        (
            "idle-timeout = \"soon\"",
            "GW-CFG-004",
            "gateway.idle-timeout",
        ),
        (
            "request-timeout = 5",
            "GW-CFG-003",
            "gateway.request-timeout",
        ),
        (
            "pool-idle-timeout = \"0ms\"",
            "GW-CFG-004",
            "gateway.pool-idle-timeout",
        ),
        (
            "shutdown-timeout = \"x\"",
            "GW-CFG-004",
            "gateway.shutdown-timeout",
        ),
        (
            "healthz-strict = \"yes\"",
            "GW-CFG-003",
            "gateway.healthz-strict",
        ),
        (
            "idle-timeout = \"1s\"\nrequest-timeout = \"2s\"",
            "GW-CFG-010",
            "gateway.idle-timeout",
        ),
        (
            "listen = \"127.0.0.1:99999\"",
            "GW-CFG-009",
            "gateway.listen",
        ),
        ("admin = \"127.0.0.1:70000\"", "GW-CFG-009", "gateway.admin"),
        (
            "rate-limit-per-source = \"lots\"",
            "GW-CFG-004",
            "gateway.rate-limit-per-source",
        ),
        (
            "rate-limit-per-source = \"0/s\"",
            "GW-CFG-004",
            "gateway.rate-limit-per-source",
        ),
        (
            "rate-limit-per-source = \"5000000/s\"",
            "GW-CFG-009",
            "gateway.rate-limit-per-source",
        ),
        (
            "rate-limit-per-source = 100",
            "GW-CFG-003",
            "gateway.rate-limit-per-source",
        ),
        (
            "rate-limit-per-source = \"100/s\"\nrate-limit-burst = 0",
            "GW-CFG-009",
            "gateway.rate-limit-burst",
        ),
        (
            "rate-limit-burst = 10",
            "GW-CFG-005",
            "gateway.rate-limit-burst",
        ),
    ] {
        let e = error_of(line);
        assert_eq!((e.code(), e.key()), (code, key), "{line}: {e}");
        assert!(e.to_string().contains(key), "{e}");
    }
    for (url, code) in [
        ("http://127.0.0.1:99999", "GW-CFG-009"),
        ("http://127.0.0.1:0", "GW-CFG-009"),
        ("http://127.0.0.1:65536", "GW-CFG-009"),
    ] {
        let e = GatewayConfig::from_toml(&format!("[clusters.a]\nupstreams = [\"{url}\"]\n"))
            .unwrap_err();
        assert_eq!(
            (e.code(), e.key()),
            (code, "clusters.a.upstreams"),
            "{url}: {e}"
        );
        assert!(
            e.to_string().contains("1-65535") || e.to_string().contains("1–65535"),
            "{e}"
        );
    }
    assert!(
        GatewayConfig::from_toml("[clusters.a]\nupstreams = [\"http://127.0.0.1:65535\"]\n")
            .is_ok()
    );
}

#[test]
fn check_rejects_an_out_of_range_port_with_a_code() {
    let dir = std::env::temp_dir().join(format!("cutout-gateway-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ports.toml");
    std::fs::write(
        &file,
        "[clusters.a]\nupstreams = [\"http://127.0.0.1:99999\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .args(["--check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("GW-CFG-009"), "{stderr}");
    assert!(stderr.contains("clusters.a.upstreams"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_do_not_disturb_ordinary_traffic() {
    let h = start("max-connections = 1\nmax-request-body = 4096").await;
    // One kept-alive connection, twenty requests.
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    for n in 0..20 {
        let request = format!(
            "POST /accounts/{n} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\nbody"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = read_response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{n}: {answer:?}");
    }
    assert_eq!(
        h.gateway.registry().state("account-service").unwrap(),
        State::Closed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_draining_until_the_drain_is_over_and_drain_delay_serves_on() {
    // drain-delay: for 400 ms after the signal the proxy still serves while /readyz is 503.
    let mut h =
        start("attempt-timeout = \"5s\"\nshutdown-timeout = \"5s\"\ndrain-delay = \"400ms\"").await;
    h.transfer.set_mode(Mode::Slow);
    let url = format!("http://{}/transfers/1", h.proxy);
    let slow = tokio::spawn(async move { get(&url).await });
    assert!(eventually(Duration::from_secs(3), || h.transfer.started() == 1).await);
    let run = h.shut_down();
    assert!(
        eventually(Duration::from_secs(1), || h.gateway.readiness()
            == cutout_gateway::gateway::Readiness::Draining)
        .await
    );
    let ready = get(&format!("http://{}/readyz", h.admin)).await;
    assert_eq!(ready.status, 503, "draining is visible: {}", ready.body);
    h.account.set_mode(Mode::Ok);
    let during = get(&format!("http://{}/accounts/1", h.proxy)).await;
    assert_eq!(during.status, 200, "still serving within drain-delay");
    // Past the delay the proxy stops accepting, but the admin listener still says draining
    // while the slow request finishes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        TcpStream::connect(h.proxy).await.is_err(),
        "the proxy listener is closed"
    );
    let ready = get(&format!("http://{}/readyz", h.admin)).await;
    assert_eq!(ready.status, 503);
    assert_eq!(
        slow.await.unwrap().status,
        200,
        "the in-flight request was drained"
    );
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns after the drain")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(h.admin).await.is_err(),
        "then the admin listener closes"
    );
    assert_eq!(error_of("drain-delay = \"11m\"").code(), "GW-CFG-009");
    assert_eq!(error_of("drain-delay = \"soon\"").code(), "GW-CFG-004");
}

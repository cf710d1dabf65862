//! SRE review 32 of the fair share of a full listener (`cutout_gateway::share`): what breaks
//! it. Each test states a promise of the feature (share.rs, README's `max-connections`) and
//! fails where the gateway does not keep it. Raw sockets on loopback: the second client's
//! connections come from 127.0.0.2.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{read_until_closed, serve_router, start, start_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

const GET: &[u8] = b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// `n` silent connections from 127.0.0.1; those the listener kept.
async fn hog(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(common::connect_from([127, 0, 0, 1], addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut open = Vec::new();
    for mut stream in held {
        let (_, closed, _) = read_until_closed(&mut stream, Duration::from_millis(5)).await;
        if !closed {
            open.push(stream);
        }
    }
    open
}

/// A GET from `source` on a new connection that is kept open afterwards (a browser's or a
/// pool's connection): the status line (empty when the connection was closed) and the time.
async fn get_and_keep(source: [u8; 4], addr: SocketAddr) -> (String, Duration, TcpStream) {
    let started = Instant::now();
    let mut stream = common::connect_from(source, addr).await;
    let _ = stream.write_all(GET).await;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&out);
    let status = head.lines().next().unwrap_or("").to_owned();
    (status, started.elapsed(), stream)
}

/// Finding 1. A browser opens several connections at once (six per host). Against a listener
/// full of another client's silent connections, each newcomer asks `make_room`, which picks the
/// same victim again (the oldest silent connection, still in the book until its task runs)
/// and notifies it again (one stored permit): one slot is freed for the whole burst, the first
/// waiter takes it, and the others are closed after ROOM_WAIT (1 s) unanswered.
/// Measured by hand against the binary (`max-connections = 100`, 150 silent from 127.0.0.1):
/// 10 at once from 127.0.0.2 → 1 × 200 and 9 resets at 1004 ms; 40 at once → 10 × 200, 30
/// resets at ~1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_connections_at_once_from_another_client_are_all_served() {
    let h = start("max-connections = 100").await;
    let held = hog(h.proxy, 150).await;
    assert_eq!(held.len(), 100);
    let burst: Vec<_> = (0..6)
        .map(|_| tokio::spawn(get_and_keep([127, 0, 0, 2], h.proxy)))
        .collect();
    let mut answers = Vec::new();
    for task in burst {
        let (status, took, stream) = task.await.unwrap();
        answers.push((status, took.as_millis(), stream));
    }
    let summary: Vec<(&str, u128)> = answers.iter().map(|(s, t, _)| (s.as_str(), *t)).collect();
    assert!(
        summary.iter().all(|(s, _)| s.starts_with("HTTP/1.1 200")),
        "the other client's burst of six: {summary:?}"
    );
    drop(held);
}

/// Finding 2. "One client holding every connection can no longer keep others out" is undone
/// by a request in flight: a connection whose request body trickles (a byte per 200 ms, under
/// the attempt timeout) is never closed to make room, so a client holding the listener with
/// slow uploads keeps everyone else out, refused at once, until `request-timeout` (30 s) — and
/// then it simply sends another. Slow *heads* are evicted (served = 0): only the body form works,
/// and it costs the attacker a few bytes a second per connection. Measured by hand: 120 such
/// connections from 127.0.0.1 against `max-connections = 100`: 10/10 probes from 127.0.0.2
/// refused (reset / closed in 1–9 ms); with 120 slow-header connections instead, 10/10 × 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known limit, documented in share.rs: a connection with a request in flight is never closed (it would cut the request); request-timeout bounds each"]
async fn a_client_holding_the_listener_with_slow_uploads_cannot_keep_another_out() {
    let h = start("max-connections = 10\nattempt-timeout = \"2s\"").await;
    let (stop, _) = watch::channel(false);
    let mut uploads = Vec::new();
    for _ in 0..10 {
        let mut stream = common::connect_from([127, 0, 0, 1], h.proxy).await;
        stream
            .write_all(
                b"POST /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n",
            )
            .await
            .unwrap();
        let mut rx = stop.subscribe();
        uploads.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = rx.changed() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {
                        if stream.write_all(b"x").await.is_err() {
                            return;
                        }
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, took, _kept) = get_and_keep([127, 0, 0, 2], h.proxy).await;
    let _ = stop.send(true);
    assert!(
        status.starts_with("HTTP/1.1 200"),
        "another client, while the first holds every slot with slow uploads: {status:?} after \
         {took:?}"
    );
}

/// Finding 3. The in-flight guard is dropped with the response *body*, which hyper drops when
/// it takes the body's last frame — not when the bytes reach the client. The tail of a large
/// answer still queued in hyper's write buffer (up to ~400 KiB) and the socket, for a client
/// that reads at its own pace, is "idle", and a newcomer from another source closes the
/// connection under it: the client gets a truncated body (fewer bytes than its Content-Length)
/// for a request that was in flight by any reading of "a connection with a request in flight is
/// never closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_still_being_written_is_not_cut_to_make_room() {
    const SIZE: usize = 4 * 1024 * 1024;
    let (stop, _) = watch::channel(false);
    let big = axum::Router::new().fallback(|| async { vec![b'x'; SIZE] });
    let upstream = serve_router(big, &stop).await;
    let h = start_with(
        "max-connections = 3\nattempt-timeout = \"30s\"",
        Some(upstream.port()),
    )
    .await;
    // Three connections of 127.0.0.1, each downloading the large answer at about 2 MiB/s.
    let mut readers = Vec::new();
    for _ in 0..3 {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let mut stream = socket.connect(h.proxy).await.unwrap();
        stream.write_all(GET).await.unwrap();
        readers.push(tokio::spawn(async move {
            let mut total = 0usize;
            let mut buf = vec![0u8; 16 * 1024];
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => total += n,
                    _ => break,
                }
                if total >= SIZE + 100 {
                    // The head (about 150 bytes) and the body are in.
                    let mut rest = vec![0u8; 4096];
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_millis(50), stream.read(&mut rest))
                            .await
                    {
                        total += n;
                    }
                    if total >= SIZE + 147 {
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(8)).await;
            }
            total
        }));
    }
    // Meanwhile another client connects every 50 ms (one request, then it closes).
    let mut newcomers = std::collections::BTreeMap::<String, usize>::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) && !readers.iter().all(|r| r.is_finished()) {
        let (status, _, stream) = get_and_keep([127, 0, 0, 2], h.proxy).await;
        drop(stream);
        *newcomers.entry(status).or_default() += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut got = Vec::new();
    for reader in readers {
        got.push(reader.await.unwrap());
    }
    // Each should have its head (~100 bytes) and SIZE bytes of body.
    assert!(
        got.iter().all(|n| *n > SIZE),
        "bytes received by the three downloads (each should be over {SIZE}): {got:?}; the \
         other client's answers: {newcomers:?}"
    );
}

/// Finding 4 (a limit of the design, measured). The share only ever takes from the largest
/// source, and only when it holds two more than the newcomer's would: a holder spread over
/// `max-connections / 2` sources of two silent connections each keeps every other client out
/// exactly as before the feature (until `header-read-timeout`). With IPv6 a source is a /64,
/// and one host commonly has a /56 (256 of them) or a /48 (65,536): 512 /64s — a /55 — hold
/// the default 1,024-connection listener. Measured by hand (`max-connections = 100`):
/// 100 sources × 1 and 50 × 2 silent connections → 0/10 probes from 127.0.0.2 served (reset in
/// 1–5 ms); 34 × 3 → 9/10 served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known limit, documented in share.rs: a client spread over many sources holding one or two connections each is never the largest by two"]
async fn a_holder_spread_over_many_sources_cannot_keep_another_out() {
    let h = start("max-connections = 100").await;
    let mut held = Vec::new();
    for i in 1..=50u8 {
        for _ in 0..2 {
            held.push(common::connect_from([127, 0, 1, i], h.proxy).await);
        }
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, took, _kept) = get_and_keep([127, 0, 0, 2], h.proxy).await;
    assert!(
        status.starts_with("HTTP/1.1 200"),
        "another client, with 50 sources holding two silent connections each: {status:?} after \
         {took:?}"
    );
    drop(held);
}

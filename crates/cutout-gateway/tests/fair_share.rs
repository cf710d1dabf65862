//! A full listener's fair share (`cutout_gateway::share`): one client holding every
//! connection cannot keep another out, a client alone can still fill the listener, and a
//! connection with a request in flight is never closed to make room. Raw sockets on loopback:
//! the other client's connections come from 127.0.0.2.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{eventually, read_response, read_until_closed, start};
use cutout_gateway::upstream::Mode;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Opens `n` silent connections from 127.0.0.1 and keeps those the listener kept open.
async fn hog(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(common::connect_from([127, 0, 0, 1], addr).await);
    }
    // Those over the limit are closed at once; keep the rest.
    tokio::time::sleep(Duration::from_millis(100)).await;
    survivors(held).await
}

/// A request from `source` on a new kept-alive connection: the answer, how long it took from
/// the connect, and the connection.
async fn get_from(source: [u8; 4], addr: SocketAddr) -> (String, Duration, TcpStream) {
    let started = Instant::now();
    let mut stream = common::connect_from(source, addr).await;
    let answer = ask(&mut stream).await;
    (answer, started.elapsed(), stream)
}

async fn ask(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), read_response(stream))
        .await
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_holding_150_silent_connections_cannot_keep_another_out() {
    let h = start("max-connections = 100").await;
    let held = hog(h.proxy, 150).await;
    assert_eq!(held.len(), 100, "the one client fills the listener alone");

    // Another client gets its answer at once, not after header-read-timeout (10 s), on each
    // of five connections it keeps open.
    let mut kept = Vec::new();
    for i in 0..5 {
        let (answer, took, stream) = get_from([127, 0, 0, 2], h.proxy).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "request {i}: {answer:?}"
        );
        assert!(
            took < Duration::from_millis(100),
            "request {i} took {took:?}"
        );
        kept.push(stream);
    }
    // The first client lost one idle connection per newcomer, no more.
    let held = survivors(held).await;
    assert_eq!(held.len(), 95, "one closed per newcomer");
    // Its new connections are refused: it holds the most, so nothing makes room for it, and
    // the other client's idle connections stay.
    for _ in 0..5 {
        let mut extra = common::connect_from([127, 0, 0, 1], h.proxy).await;
        let (_, closed, _) = read_until_closed(&mut extra, Duration::from_millis(500)).await;
        assert!(closed, "the client holding the most got another connection");
    }
    for stream in &mut kept {
        let answer = ask(stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    }
    assert_eq!(h.account.started(), 10);
    drop(held);
}

/// Those of `held` still open.
async fn survivors(held: Vec<TcpStream>) -> Vec<TcpStream> {
    let mut open = Vec::new();
    for mut stream in held {
        let (_, closed, _) = read_until_closed(&mut stream, Duration::from_millis(5)).await;
        if !closed {
            open.push(stream);
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_alone_fills_the_listener_and_is_not_made_to_make_room_for_itself() {
    let h = start("max-connections = 4").await;
    let held = hog(h.proxy, 6).await;
    assert_eq!(held.len(), 4, "no cap per source while there is room");
    // Its own next connection is refused, and none of its held ones is closed for it.
    let mut extra = common::connect_from([127, 0, 0, 1], h.proxy).await;
    let (_, closed, _) = read_until_closed(&mut extra, Duration::from_millis(500)).await;
    assert!(closed, "a fifth connection from the same client was kept");
    assert_eq!(survivors(held).await.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_a_request_in_flight_is_never_closed_to_make_room() {
    let h = start("max-connections = 3\nattempt-timeout = \"3s\"").await;
    // Three connections of 127.0.0.1, each with a request the upstream answers in 1.5 s.
    h.account.set_mode(Mode::Slow);
    let mut busy = Vec::new();
    for _ in 0..3 {
        let mut stream = common::connect_from([127, 0, 0, 1], h.proxy).await;
        stream
            .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        busy.push(stream);
    }
    assert!(
        eventually(Duration::from_secs(2), || h.account.started() == 3).await,
        "three requests in flight"
    );
    // A newcomer from another source finds no idle connection to take the place of.
    let mut newcomer = common::connect_from([127, 0, 0, 2], h.proxy).await;
    let (_, closed, _) = read_until_closed(&mut newcomer, Duration::from_millis(1500)).await;
    assert!(closed, "the newcomer was served though every slot was busy");
    // And every busy request still gets its answer.
    for mut stream in busy {
        let answer = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream))
            .await
            .unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    }
}

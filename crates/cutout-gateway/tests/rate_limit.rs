//! The per-source request rate (`rate-limit-per-source`): a client past it is answered 429
//! with `Retry-After`, its requests never reach the upstream nor count in the cluster's
//! breaker, and other clients are not slowed. Off by default. Raw sockets on loopback: the
//! other client's connections come from 127.0.0.2.

mod common;

use std::net::SocketAddr;

use common::{read_response, start};
use cutout::State;
use tokio::io::AsyncWriteExt;

/// `n` requests on one kept-alive connection from `source`: their answers.
async fn ask(source: [u8; 4], addr: SocketAddr, n: usize) -> Vec<String> {
    let mut stream = common::connect_from(source, addr).await;
    let mut answers = Vec::new();
    for _ in 0..n {
        stream
            .write_all(b"GET /accounts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        answers.push(read_response(&mut stream).await);
    }
    answers
}

fn status(answer: &str) -> &str {
    answer.get(9..12).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_its_rate_gets_429_with_retry_after_and_the_breaker_stays_closed() {
    // Three requests a minute, bursts of three: the fourth is refused for about 20 s.
    let h = start("rate-limit-per-source = \"3/m\"").await;
    let answers = ask([127, 0, 0, 1], h.proxy, 20).await;
    let statuses: Vec<&str> = answers.iter().map(|a| status(a)).collect();
    assert_eq!(&statuses[..3], ["200"; 3], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == "429"), "{statuses:?}");
    let refused = &answers[3];
    let retry_after: u64 = refused
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .expect("a Retry-After")
        .trim()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry_after), "{refused}");
    assert!(refused.contains("rate-limit-per-source"), "{refused}");
    // Never forwarded, never judged: the breaker saw three successes and is closed.
    assert_eq!(h.account.started(), 3);
    let breaker = h.gateway.registry().get("account-service").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls, 3);
    // Another client has its own bucket.
    let other = ask([127, 0, 0, 2], h.proxy, 3).await;
    assert!(other.iter().all(|a| status(a) == "200"), "{other:?}");
    // Every 429 is counted, though its log line is throttled.
    let metrics = common::get(&format!("http://{}/metrics", h.admin))
        .await
        .body;
    let counted = common::metric_value(
        &metrics,
        "cutout_gateway_refusals_total{limit=\"rate_limit\",listener=\"proxy\"}",
    )
    .unwrap_or_default();
    assert!(counted >= 17.0, "{counted}: {metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn there_is_no_rate_limit_by_default() {
    let h = start("").await;
    assert!(h.gateway.rate().is_none());
    let answers = ask([127, 0, 0, 1], h.proxy, 50).await;
    assert!(answers.iter().all(|a| status(a) == "200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_can_be_set_apart_from_the_rate() {
    let h = start("rate-limit-per-source = \"1/h\"\nrate-limit-burst = 5").await;
    let statuses: Vec<String> = ask([127, 0, 0, 1], h.proxy, 7)
        .await
        .iter()
        .map(|a| status(a).to_owned())
        .collect();
    assert_eq!(statuses, ["200", "200", "200", "200", "200", "429", "429"]);
}

//! Per-host breakers in a reqwest client: two local servers, one healthy and one failing.
//!
//! The failing host's breaker opens after 5 consecutive 500s and its next requests are
//! refused without being sent; the healthy host is called all along.
//!
//! ```text
//! cargo run -p cutout-reqwest --example per_host
//! ```

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use cutout::{Settings, State};
use cutout_reqwest::{BreakerMiddleware, KeyedBreakers, host_key, rejected};
use reqwest_middleware::ClientBuilder;

/// What happened, for the test that runs this example.
#[derive(Debug)]
pub struct Report {
    /// Requests to the healthy host that got a 200.
    pub healthy_ok: usize,
    /// Responses of the failing host (500s) the caller got.
    pub failing_responses: usize,
    /// Requests to the failing host refused by its breaker (not sent).
    pub refused: usize,
    /// Requests the failing server received.
    pub failing_server_saw: usize,
    /// The healthy host's breaker at the end.
    pub healthy_state: State,
    /// The failing host's breaker at the end.
    pub failing_state: State,
}

/// Starts a server on 127.0.0.1:0 that answers every `GET /` with `status`; returns its
/// address and a count of the requests it received.
async fn serve(status: StatusCode) -> Result<(SocketAddr, Arc<AtomicUsize>), Box<dyn Error>> {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let app = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async move { status }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            eprintln!("server {addr}: {error}");
        }
    });
    Ok((addr, received))
}

/// Runs the example: 8 rounds of one request to each host, printing each result.
pub async fn run() -> Result<Report, Box<dyn Error>> {
    let (healthy, _) = serve(StatusCode::OK).await?;
    let (failing, failing_received) = serve(StatusCode::INTERNAL_SERVER_ERROR).await?;

    // One breaker per scheme://host:port, each opening after 5 consecutive failures.
    let settings = Settings::builder().consecutive_failures(Some(5)).build()?;
    let hosts = KeyedBreakers::builder(settings).max_open(8).build();
    let client = ClientBuilder::new(
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            // The middleware follows redirects, each hop through its own host's breaker.
            .redirect(reqwest::redirect::Policy::none())
            .build()?,
    )
    // The client's total for the chain of redirects the middleware follows.
    .with(BreakerMiddleware::per_host(hosts.clone()).total_timeout(Duration::from_secs(2)))
    .build();

    let mut report = Report {
        healthy_ok: 0,
        failing_responses: 0,
        refused: 0,
        failing_server_saw: 0,
        healthy_state: State::Closed,
        failing_state: State::Closed,
    };
    for round in 1..=8 {
        for (name, addr) in [("healthy", healthy), ("failing", failing)] {
            let url = format!("http://{addr}/");
            match client.get(&url).send().await {
                Ok(response) => {
                    println!("round {round}: {name} {url} -> {}", response.status());
                    if response.status().is_success() {
                        report.healthy_ok += 1;
                    } else {
                        report.failing_responses += 1;
                    }
                }
                Err(error) => match rejected(&error) {
                    Some(refusal) => {
                        let wait = refusal.retry_after().unwrap_or_default().as_secs_f64();
                        println!(
                            "round {round}: {name} {url} -> not sent: breaker {} is {}, retry in {wait:.0}s",
                            refusal.breaker(),
                            refusal.reason(),
                        );
                        report.refused += 1;
                    }
                    None => return Err(error.into()),
                },
            }
        }
    }

    let state_of = |addr: SocketAddr| -> Result<State, Box<dyn Error>> {
        let key = host_key(&format!("http://{addr}/").parse()?);
        Ok(hosts
            .get(&key)
            .map_or(State::Closed, |breaker| breaker.state()))
    };
    report.healthy_state = state_of(healthy)?;
    report.failing_state = state_of(failing)?;
    report.failing_server_saw = failing_received.load(Ordering::Relaxed);
    for (key, snapshot) in hosts.snapshots() {
        println!(
            "breaker {key}: {:?}, {} calls, {} failures in its window",
            snapshot.breaker.state, snapshot.breaker.calls, snapshot.breaker.failures
        );
    }
    println!(
        "the failing server saw {} of the 8 requests sent its way",
        report.failing_server_saw
    );
    Ok(report)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    run().await?;
    Ok(())
}

//! hyper's client (hyper-util's legacy `Client`) with one breaker per host:
//! retry → per-host breakers → attempt timeout → client.
//!
//! `cargo run --example hyper_client -p cutout-tower` starts two upstreams on loopback, one
//! failing, calls both, and prints each host's breaker.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use cutout::{Jitter, Settings};
use cutout_tower::keyed::{KeyedBreakers, KeyedLayer};
use cutout_tower::retry::BreakerRetry;
use cutout_tower::{BoxError, HttpClassifier};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::retry::budget::TpsBudget;
use tower::{ServiceBuilder, ServiceExt};

async fn upstream(status: http::StatusCode) -> Result<std::net::SocketAddr, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().fallback(move || async move { (status, "hello") });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let good = upstream(http::StatusCode::OK).await?;
    let bad = upstream(http::StatusCode::BAD_GATEWAY).await?;

    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(5))
        .jitter(Jitter::None)
        .build()?;
    let hosts = KeyedBreakers::builder(settings)
        .max_keys(64)
        .idle_after(Duration::from_secs(300))
        .max_open(8)
        .build();
    let per_host = KeyedLayer::per_host(hosts.clone()).classifier(HttpClassifier::new());
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 5, 0.2));
    let retry = BreakerRetry::new(per_host.clone(), budget).classifier(HttpClassifier::new());

    let client: Client<_, Empty<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let service = ServiceBuilder::new()
        .retry(retry)
        .layer(per_host)
        .timeout(Duration::from_secs(2))
        .service(client);

    for addr in [good, bad, bad, good] {
        let request = http::Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .expect("a valid request");
        match service.clone().oneshot(request).await {
            Ok(response) => println!("{addr}: {}", response.status()),
            Err(error) => println!("{addr}: {error}"),
        }
    }
    for (key, snapshot) in hosts.snapshots() {
        println!(
            "{key}: {} ({} calls, {} failures)",
            snapshot.breaker.state, snapshot.breaker.calls, snapshot.breaker.failures
        );
    }
    Ok(())
}

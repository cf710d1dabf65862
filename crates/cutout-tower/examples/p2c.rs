//! tower's p2c `Balance` over three endpoints, one failing, each behind its own breaker.
//!
//! `cargo run --example p2c -p cutout-tower` starts three upstreams on loopback (the third
//! answers 500), sends 1,000 requests through a p2c balancer in three set-ups, and prints
//! what each refused:
//! - `WaitForBreak`: an open endpoint's `poll_ready` is `Pending` until its break ends, so
//!   the balancer only ever picks the other two;
//! - `FailInCall` (the default) with the breaker outside the load measure: the open endpoint
//!   is ready, but its [`BreakerLoad`] reads "refusing" and p2c picks the other of its pair;
//! - `FailInCall` with the load measured outside the breaker: p2c cannot tell the open
//!   endpoint from the others and sends it its share, which is refused (the set-up to avoid).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use cutout::{Breaker, Jitter, Settings};
use cutout_tower::{BoxError, BreakerService, HttpClassifier, Readiness};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{Service, ServiceExt};

/// How the breaker meets the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetUp {
    /// `Readiness::WaitForBreak`, breaker outside the load measure.
    WaitForBreak,
    /// `Readiness::FailInCall`, breaker outside the load measure (its `Load` is seen).
    FailInCall,
    /// `Readiness::FailInCall`, load measured outside the breaker (its `Load` is not seen).
    LoadBlind,
}

/// What one run of requests came to.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Requests sent to the balancer.
    pub requests: usize,
    /// Refused by a breaker.
    pub refused: usize,
    /// Answered 500 (the failing endpoint, before its breaker opened, and its probes).
    pub failed: usize,
    /// Answered 200.
    pub ok: usize,
    /// The failing endpoint's breaker state at the end.
    pub failing_state: Option<cutout::State>,
}

/// An upstream on loopback answering `status`.
pub async fn upstream(status: http::StatusCode) -> Result<SocketAddr, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().fallback(move || async move { (status, "hello") });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

type Request = http::Request<Empty<Bytes>>;

/// The client, sending every request to `addr`.
fn endpoint(
    client: Client<HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
) -> impl Service<
    Request,
    Response = http::Response<hyper::body::Incoming>,
    Error = BoxError,
    Future = impl Future<Output = Result<http::Response<hyper::body::Incoming>, BoxError>> + Send,
> + Clone
+ Send {
    tower::service_fn(move |mut request: Request| {
        let client = client.clone();
        async move {
            let path = request.uri().path().to_owned();
            *request.uri_mut() = format!("http://{addr}{path}").parse()?;
            Ok::<_, BoxError>(client.request(request).await?)
        }
    })
}

fn breaker(addr: SocketAddr) -> Result<Breaker, BoxError> {
    let settings = Settings::builder()
        .consecutive_failures(Some(5))
        // Longer than the run: the failing endpoint stays open once it trips.
        .break_duration(Duration::from_secs(60))
        .jitter(Jitter::None)
        .build()?;
    Ok(Breaker::new(format!("http://{addr}"), settings))
}

/// Sends `requests` requests through a p2c balancer over `addrs` set up as `set_up`.
pub async fn run(set_up: SetUp, addrs: &[SocketAddr], requests: usize) -> Result<Report, BoxError> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let breakers: Vec<Breaker> = addrs
        .iter()
        .map(|addr| breaker(*addr))
        .collect::<Result<_, _>>()?;
    let mut report = Report {
        requests,
        ..Report::default()
    };
    let readiness = match set_up {
        SetUp::WaitForBreak => Readiness::WaitForBreak,
        SetUp::FailInCall | SetUp::LoadBlind => Readiness::FailInCall,
    };
    let guarded = |addr: &SocketAddr, breaker: &Breaker| {
        BreakerService::with_classifier(
            PendingRequests::new(
                endpoint(client.clone(), *addr),
                CompleteOnResponse::default(),
            ),
            breaker.clone(),
            HttpClassifier::new(),
        )
        .readiness(readiness)
    };
    if set_up == SetUp::LoadBlind {
        let endpoints = addrs.iter().zip(&breakers).map(|(addr, breaker)| {
            PendingRequests::new(
                BreakerService::with_classifier(
                    endpoint(client.clone(), *addr),
                    breaker.clone(),
                    HttpClassifier::new(),
                ),
                CompleteOnResponse::default(),
            )
        });
        let balance = Balance::new(ServiceList::new(endpoints.collect::<Vec<_>>()));
        send(balance, requests, &mut report).await?;
    } else {
        let endpoints = addrs.iter().zip(&breakers).map(|(a, b)| guarded(a, b));
        let balance = Balance::new(ServiceList::new(endpoints.collect::<Vec<_>>()));
        send(balance, requests, &mut report).await?;
    }
    report.failing_state = breakers.last().map(Breaker::state);
    Ok(report)
}

async fn send<S>(mut balance: S, requests: usize, report: &mut Report) -> Result<(), BoxError>
where
    S: Service<Request, Response = http::Response<hyper::body::Incoming>, Error = BoxError>,
{
    for _ in 0..requests {
        let request = http::Request::get("/").body(Empty::new())?;
        match balance.ready().await?.call(request).await {
            Ok(response) if response.status().is_success() => report.ok += 1,
            Ok(_) => report.failed += 1,
            Err(error)
                if error
                    .downcast_ref::<cutout_tower::Error>()
                    .is_some_and(cutout_tower::Error::is_rejected) =>
            {
                report.refused += 1;
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The three upstreams: two healthy, the last one failing.
pub async fn upstreams() -> Result<Vec<SocketAddr>, BoxError> {
    Ok(vec![
        upstream(http::StatusCode::OK).await?,
        upstream(http::StatusCode::OK).await?,
        upstream(http::StatusCode::INTERNAL_SERVER_ERROR).await?,
    ])
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addrs = upstreams().await?;
    for set_up in [SetUp::WaitForBreak, SetUp::FailInCall, SetUp::LoadBlind] {
        let report = run(set_up, &addrs, 1_000).await?;
        println!(
            "{set_up:?}: {} requests, {} ok, {} failed (500), {} refused; failing endpoint {:?}",
            report.requests, report.ok, report.failed, report.refused, report.failing_state
        );
    }
    Ok(())
}

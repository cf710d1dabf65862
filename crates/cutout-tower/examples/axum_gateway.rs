//! An axum service whose handler calls a dependency through retry → breaker → attempt timeout,
//! answering 503 + `Retry-After` while the breaker is open and 504 when the attempt times out.
//!
//! `cargo run --example axum_gateway -p cutout-tower` starts a failing upstream and the gateway
//! on loopback, sends a few requests with hyper's client and prints the answers.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use cutout::Breaker;
use cutout_tower::retry::BreakerRetry;
use cutout_tower::{BoxError, BreakerService, HttpClassifier, ServiceBuilderExt, respond};
use tower::retry::Retry;
use tower::retry::budget::TpsBudget;
use tower::timeout::Timeout;
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

/// The dependency: any cloneable service from an HTTP request to an HTTP response.
pub type Dependency = BoxCloneSyncService<http::Request<String>, http::Response<String>, BoxError>;

/// The client stack, type-erased: naming the future of a boxed service also keeps rustc from
/// tripping over `Into<BoxError>` bounds when it proves the handler's future `Send`.
type Client =
    BoxCloneSyncService<http::Request<String>, http::Response<String>, cutout_tower::Error>;

/// The stack's concrete type, for reference.
#[allow(dead_code)]
type Stack = Retry<
    BreakerRetry<Breaker, HttpClassifier>,
    BreakerService<Timeout<Dependency>, HttpClassifier>,
>;

#[derive(Clone)]
struct AppState {
    client: Client,
}

/// The application: `GET /rates` calls the dependency through the stack; `GET /local` is a
/// route whose own handler is guarded (breaker → timeout) with errors mapped by
/// `HandleErrorLayer`.
pub fn app(dependency: Dependency, breaker: Breaker, attempt_timeout: Duration) -> Router {
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2));
    let client = ServiceBuilder::new()
        .retry(
            BreakerRetry::new(breaker.clone(), budget)
                .classifier(HttpClassifier::new())
                .max_retries(2)
                .backoff(Duration::from_millis(20), Duration::from_millis(200)),
        )
        .breaker_with(breaker.clone(), HttpClassifier::new())
        .timeout(attempt_timeout)
        .service(dependency);
    let client = BoxCloneSyncService::new(client);
    let local = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(respond::handle_error))
        .breaker(breaker)
        .timeout(attempt_timeout)
        .service_fn(|_request: axum::extract::Request| async {
            Ok::<_, std::convert::Infallible>("served locally".into_response())
        });
    Router::new()
        .route("/rates", get(rates))
        .route_service("/local", local)
        .with_state(AppState { client })
}

async fn rates(State(state): State<AppState>) -> Response {
    let request = http::Request::get("http://rates.internal/eur")
        .body(String::new())
        .expect("a valid request");
    match state.client.oneshot(request).await {
        // The dependency answered (perhaps with its own error status): pass it on.
        Ok(response) => response.into_response(),
        Err(error) => respond::error_response(&error).into_response(),
    }
}

/// The dependency over hyper's client (hyper-util's legacy `Client`), bodies read into strings.
pub fn hyper_dependency(base: http::Uri) -> Dependency {
    use http_body_util::BodyExt;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let client: Client<_, String> = Client::builder(TokioExecutor::new()).build_http();
    let service = client
        .map_request(move |mut request: http::Request<String>| {
            // Send to the configured upstream, keeping the path.
            let path = request.uri().path_and_query().cloned();
            let mut parts = base.clone().into_parts();
            parts.path_and_query = path;
            *request.uri_mut() = http::Uri::from_parts(parts).expect("a valid uri");
            request
        })
        .map_err(BoxError::from)
        .and_then(
            |response: http::Response<hyper::body::Incoming>| async move {
                let (parts, body) = response.into_parts();
                let bytes = body.collect().await.map_err(BoxError::from)?.to_bytes();
                Ok(http::Response::from_parts(
                    parts,
                    String::from_utf8_lossy(&bytes).into_owned(),
                ))
            },
        );
    BoxCloneSyncService::new(service)
}

#[allow(dead_code)] // the tests include this file for `app` and do not call `main`
#[tokio::main]
async fn main() -> Result<(), BoxError> {
    use cutout::{Jitter, Settings};

    // A failing upstream on loopback.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = upstream.local_addr()?;
    let failing = Router::new()
        .fallback(|| async { (http::StatusCode::INTERNAL_SERVER_ERROR, "upstream is down") });
    tokio::spawn(async move { axum::serve(upstream, failing).await });

    // The gateway.
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(5))
        .jitter(Jitter::None)
        .build()?;
    let breaker = Breaker::new("rates", settings);
    let base: http::Uri = format!("http://{upstream_addr}").parse()?;
    let gateway = app(hyper_dependency(base), breaker, Duration::from_secs(1));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, gateway).await });

    // Ask it a few times with hyper's client.
    let dependency = hyper_dependency(format!("http://{addr}").parse()?);
    for n in 1..=3 {
        let request = http::Request::get("/rates").body(String::new())?;
        let response = dependency.clone().oneshot(request).await?;
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap_or_default().to_owned());
        println!(
            "request {n}: {} retry-after={retry_after:?} body={:?}",
            response.status(),
            response.body().trim()
        );
    }
    Ok(())
}

//! A cluster: its upstreams (round-robin), its breaker, and the stack breaker → blame → attempt timeout → forward.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use cutout::Breaker;
use cutout::classify::{Classify, Outcome, Verdict};
use cutout_tower::{BoxError, BreakerService, HttpClassifier};
use http::{Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower::ServiceExt;
use tower::timeout::Timeout;
use tower::util::BoxCloneSyncService;

use crate::client_body::BodyWatch;
use crate::error::ClientFault;

/// The pooled HTTP/1 client every cluster forwards with.
pub type HttpClient = Client<HttpConnector, Body>;

/// A cluster's stack, type-erased (this also keeps rustc's `Send` proof for axum handlers
/// simple; see cutout-tower's `axum_gateway` example).
type Stack = BoxCloneSyncService<Request<Body>, Response<Body>, cutout_tower::Error>;

/// One attempt: attempt timeout → forward.
type Attempt = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// A new pooled client: keep-alive connections per upstream, `TCP_NODELAY`, a connect timeout,
/// and idle pooled connections closed after `pool_idle_timeout` (hyper-util's pool reaps them
/// only with a timer, which is why one is set).
pub fn http_client(connect_timeout: Duration, pool_idle_timeout: Duration) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(pool_idle_timeout)
        .pool_max_idle_per_host(256)
        .build(connector)
}

/// The breaker's classifier: cutout-tower's [`HttpClassifier`] for the upstream's answers and
/// errors, except that a failure the client caused ([`ClientFault`], anywhere in the error's
/// chain) is ignored: it says nothing about the upstream.
#[derive(Debug, Clone)]
pub struct GatewayClassifier(HttpClassifier);

impl GatewayClassifier {
    /// Ignores client faults, classifies everything else with `http`.
    pub fn new(http: HttpClassifier) -> GatewayClassifier {
        GatewayClassifier(http)
    }
}

impl<B> Classify<Response<B>, BoxError> for GatewayClassifier {
    fn classify(&self, result: &Result<Response<B>, BoxError>) -> Outcome {
        self.verdict(result).outcome()
    }

    fn verdict(&self, result: &Result<Response<B>, BoxError>) -> Verdict {
        match result {
            Err(error) if ClientFault::find(&**error).is_some() => Verdict::Ignored,
            _ => self.0.verdict(result),
        }
    }
}

/// A cluster of upstreams behind one breaker.
///
/// The stack is **breaker → blame → attempt timeout → forward**: a refusal never reaches the
/// upstream, a timed-out attempt is a failure the breaker counts (tower's `Timeout` drops the
/// forward's future, and hyper closes the connection of a request whose response future is
/// dropped, so the upstream sees the request cancelled), and the response is classified by
/// [`HttpClassifier`] (5xx and errors fail; 429 and 503 with `Retry-After` are ignored, or
/// with [`honor-retry-after`](crate::config::ClusterConfig::honor_retry_after) open the
/// breaker for the time the upstream asked).
///
/// *Blame* puts the client's faults aside: when a request carries a [`BodyWatch`] in its
/// extensions (the proxy adds one), a forward that failed because the client's body failed,
/// or that timed out while the upstream waited for the client's body, fails with a
/// [`ClientFault`] instead, which [`GatewayClassifier`] ignores. Only upstream-side failures
/// count.
#[derive(Debug)]
pub struct Cluster {
    name: String,
    upstreams: Arc<[Uri]>,
    breaker: Breaker,
    attempt_timeout: Duration,
    stack: Stack,
}

impl Cluster {
    /// A cluster forwarding to `upstreams` with `client`, its breaker judging responses with
    /// `classifier` (see [`ClusterConfig::classifier`](crate::config::ClusterConfig::classifier));
    /// `guarded` false leaves the breaker out of the stack (it is still listed, but sees no
    /// calls).
    pub fn new(
        name: &str,
        upstreams: Vec<Uri>,
        breaker: Breaker,
        attempt_timeout: Duration,
        client: HttpClient,
        classifier: HttpClassifier,
        guarded: bool,
    ) -> Cluster {
        let upstreams: Arc<[Uri]> = upstreams.into();
        let next = Arc::new(AtomicUsize::new(0));
        let targets = Arc::clone(&upstreams);
        let forward = tower::service_fn(move |request: Request<Body>| {
            let n = next.fetch_add(1, Ordering::Relaxed) % targets.len();
            let base = targets[n].clone();
            let client = client.clone();
            async move { forward(client, base, request).await }
        });
        // Boxed, so that the blame step awaits a concrete future (rustc's `Send` proof of a
        // generic tower future inside an async fn trips on its error's lifetime).
        let timed: Attempt = BoxCloneSyncService::new(Timeout::new(
            BoxCloneSyncService::new(forward),
            attempt_timeout,
        ));
        let blamed =
            tower::service_fn(move |request: Request<Body>| blamed_call(timed.clone(), request));
        let stack = if guarded {
            BoxCloneSyncService::new(BreakerService::with_classifier(
                blamed,
                breaker.clone(),
                GatewayClassifier::new(classifier),
            ))
        } else {
            BoxCloneSyncService::new(blamed.map_err(cutout_tower::Error::inner))
        };
        Cluster {
            name: name.to_owned(),
            upstreams,
            breaker,
            attempt_timeout,
            stack,
        }
    }

    /// The cluster's name (also its breaker's id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The upstream base URLs.
    pub fn upstreams(&self) -> &[Uri] {
        &self.upstreams
    }

    /// The cluster's breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The attempt timeout.
    pub fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// Sends `request` (a URI of path and query only, headers already prepared) through the
    /// stack to the next upstream.
    pub async fn call(
        &self,
        request: Request<Body>,
    ) -> Result<Response<Body>, cutout_tower::Error> {
        self.stack.clone().oneshot(request).await
    }
}

/// The attempt, with a failure caused by the client's body turned into a [`ClientFault`]
/// (see [`BodyWatch::blame`]).
async fn blamed_call(timed: Attempt, request: Request<Body>) -> Result<Response<Body>, BoxError> {
    let watch = request.extensions().get::<Arc<BodyWatch>>().cloned();
    match timed.oneshot(request).await {
        Ok(response) => Ok(response),
        Err(error) => Err(match watch {
            Some(watch) => watch.blame(error),
            None => error,
        }),
    }
}

/// Sends `request` to `base` (scheme and authority), keeping its path and query.
async fn forward(
    client: HttpClient,
    base: Uri,
    mut request: Request<Body>,
) -> Result<Response<Body>, BoxError> {
    let mut parts = base.into_parts();
    parts.path_and_query = request.uri().path_and_query().cloned();
    *request.uri_mut() = Uri::from_parts(parts)?;
    let response = client.request(request).await?;
    Ok(response.map(Body::new))
}

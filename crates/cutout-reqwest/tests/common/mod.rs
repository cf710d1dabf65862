//! A real HTTP server on 127.0.0.1:0 for the tests, counting the requests of each route, and
//! the clients that call it.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Response, StatusCode, Uri, header::RETRY_AFTER};
use cutout_reqwest::BreakerMiddleware;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

/// The client timeout of the tests: a hung request is a timeout error after this long.
pub const CLIENT_TIMEOUT: Duration = Duration::from_millis(250);

/// A server answering, by path:
/// - `/ok`: 200; `/fail`: 500; `/down`: 503 without `Retry-After`; `/missing`: 404;
/// - `/busy`: 429 with `Retry-After: 7`; `/unavailable`: 503 with `Retry-After: 7`;
/// - `/hang`: never answers;
/// - `/redirect?to=<url>`: 302 to `<url>`; `/see-other?to=<url>`: 303 to `<url>`;
/// - `/cut`: 200 whose body breaks after its first chunk (the connection is cut);
/// - `/slow-body`: 200 whose body's second chunk comes after 2 s.
///
/// It counts the requests that reached it, by path.
pub struct Server {
    addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start() -> Server {
        let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counted = Arc::clone(&hits);
        let app = Router::new().fallback(move |uri: Uri| {
            *counted
                .lock()
                .unwrap()
                .entry(uri.path().to_owned())
                .or_default() += 1;
            answer(uri)
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { addr, hits, task }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The breaker id of this server's host: `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests for `path` reached the server.
    pub fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// How many requests reached the server.
    pub fn total_hits(&self) -> usize {
        self.hits.lock().unwrap().values().sum()
    }

    /// Waits (at most 5 s, in 10 ms steps) until `n` requests for `path` have reached the
    /// server.
    pub async fn wait_for_hits(&self, path: &str, n: usize) {
        for _ in 0..500 {
            if self.hits(path) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{path} got {} requests, expected {n}", self.hits(path));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(uri: Uri) -> Response<Body> {
    let to = uri
        .query()
        .and_then(|query| query.strip_prefix("to="))
        .unwrap_or("/");
    match uri.path() {
        "/redirect" | "/see-other" => {
            let status = if uri.path() == "/redirect" {
                StatusCode::FOUND
            } else {
                StatusCode::SEE_OTHER
            };
            return Response::builder()
                .status(status)
                .header(axum::http::header::LOCATION, to)
                .body(Body::empty())
                .unwrap();
        }
        "/cut" => {
            let chunks = futures_util::stream::unfold(0, |n| async move {
                match n {
                    0 => Some((Ok::<_, std::io::Error>("the first half, "), 1)),
                    1 => {
                        // Sent first: the headers and the first chunk reach the client.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Some((Err(std::io::Error::other("connection cut")), 2))
                    }
                    _ => None,
                }
            });
            return Response::builder()
                .status(StatusCode::OK)
                .body(Body::from_stream(chunks))
                .unwrap();
        }
        "/slow-body" => {
            let chunks = futures_util::stream::unfold(0, |n| async move {
                match n {
                    0 => Some((Ok::<_, std::io::Error>("first, "), 1)),
                    1 => {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        Some((Ok("second"), 2))
                    }
                    _ => None,
                }
            });
            return Response::builder()
                .status(StatusCode::OK)
                .body(Body::from_stream(chunks))
                .unwrap();
        }
        _ => {}
    }
    let (status, retry_after) = match uri.path() {
        "/ok" => (StatusCode::OK, None),
        "/fail" => (StatusCode::INTERNAL_SERVER_ERROR, None),
        "/down" => (StatusCode::SERVICE_UNAVAILABLE, None),
        "/missing" => (StatusCode::NOT_FOUND, None),
        "/busy" => (StatusCode::TOO_MANY_REQUESTS, Some("7")),
        "/unavailable" => (StatusCode::SERVICE_UNAVAILABLE, Some("7")),
        "/hang" => std::future::pending().await,
        _ => (StatusCode::NOT_FOUND, None),
    };
    let mut response = Response::builder().status(status);
    if let Some(after) = retry_after {
        response = response.header(RETRY_AFTER, after);
    }
    response.body(Body::from(status.to_string())).unwrap()
}

/// A reqwest client with [`CLIENT_TIMEOUT`] (and no proxy: loopback only), guarded by
/// `middleware`.
pub fn client(middleware: BreakerMiddleware) -> ClientWithMiddleware {
    client_with_timeout(middleware, Some(CLIENT_TIMEOUT))
}

/// A guarded reqwest client that follows no redirect itself (the middleware does), with
/// [`CLIENT_TIMEOUT`].
pub fn client_not_following(middleware: BreakerMiddleware) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(CLIENT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    ClientBuilder::new(client).with(middleware).build()
}

/// A guarded reqwest client with the given timeout, or none.
pub fn client_with_timeout(
    middleware: BreakerMiddleware,
    timeout: Option<Duration>,
) -> ClientWithMiddleware {
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    ClientBuilder::new(builder.build().unwrap())
        .with(middleware)
        .build()
}

/// A port on 127.0.0.1 with nothing listening: connecting to it is refused.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

//! Review of `cutout_reqwest::health_check` (issue #28), against real servers on loopback:
//! the defects found, each a test named after the behaviour the check promises ("passing on a
//! 2xx answer" of the host checked), each shown failing on the code before its fix.

use std::net::SocketAddr;

use axum::Router;
use axum::http::{StatusCode, header::LOCATION};
use axum::response::IntoResponse;
use axum::routing::get;
use cutout_reqwest::{HostKey, host_key};
use reqwest::Url;

async fn serve(app: Router) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

fn key(addr: SocketAddr) -> HostKey {
    host_key(&Url::parse(&format!("http://{addr}/")).unwrap())
}

/// A host whose application is down and whose front answers its health path with a redirect
/// to another host (a maintenance page, a failover address) passed its check on that other
/// host's 200: the default reqwest client follows redirects, so the check judged a host by
/// another one's answer and ended the break of a host that is still down (its probe then
/// fails and the break grows). A host is judged by its own answer: a redirect is not a 2xx.
#[tokio::test]
async fn a_host_is_judged_by_its_own_answer_not_by_the_host_it_redirects_to() {
    let (elsewhere, elsewhere_task) =
        serve(Router::new().route("/healthz", get(|| async { StatusCode::OK }))).await;
    let target = format!("http://{elsewhere}/healthz");
    let (down, down_task) = serve(Router::new().route(
        "/healthz",
        get(move || {
            let target = target.clone();
            async move { (StatusCode::FOUND, [(LOCATION, target)]).into_response() }
        }),
    ))
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut check = cutout_reqwest::health_check(client, "/healthz");
    assert!(check(&key(elsewhere)).await, "the other host is healthy");
    assert!(
        !check(&key(down)).await,
        "a redirect to another host's 200 passed the check of {down}"
    );
    down_task.abort();
    elsewhere_task.abort();
}

/// The fix's boundary: a redirect within the host checked (`/healthz` to `/healthz/`) is that
/// host's own answer, and its 2xx passes.
#[tokio::test]
async fn a_redirect_within_the_host_is_its_own_answer() {
    let (host, task) = serve(
        Router::new()
            .route(
                "/healthz",
                get(|| async { (StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/healthz/")]) }),
            )
            .route("/healthz/", get(|| async { StatusCode::OK })),
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut check = cutout_reqwest::health_check(client, "/healthz");
    assert!(check(&key(host)).await);
    task.abort();
}

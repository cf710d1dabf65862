//! gRPC through the gateway: a tonic client to an `h2c` listener, a cluster speaking HTTP/2 to a tonic server (cutout-tower's echo example), and the cluster's breaker judging `grpc-status` from trailers-only responses and from the trailers after the messages. On loopback.

mod common;

use cutout::State;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

#[path = "../../cutout-tower/examples/grpc.rs"]
#[allow(dead_code)] // The example's `main` and the helpers this test does not call.
mod example;

use example::echo::{EchoClient, EchoRequest, Server};

/// A gateway with an `h2c` listener in front of `server`, its breaker opening after five
/// consecutive failures.
fn config(server: &Server) -> String {
    format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
h2c = true

[[routes]]
prefix = "/"
cluster = "echo"

[clusters.echo]
upstreams = ["http://{}"]
protocol = "h2c"

[breakers.defaults]
consecutive-failures = 5
failure-ratio = 1.0
break-duration = "30s"
jitter = "none"
adaptive = false
"#,
        server.addr()
    )
}

async fn client(gateway: &common::Running) -> EchoClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{}", gateway.proxy))
        .unwrap()
        .connect()
        .await
        .unwrap();
    EchoClient::new(channel)
}

/// Calls `Stream` and reads it to its end: the messages, then the status (which came in the
/// trailers: the call itself succeeded).
async fn streamed(client: &mut EchoClient<Channel>, request: EchoRequest) -> (u32, Code) {
    let mut stream = client
        .stream(request)
        .await
        .expect("no status in the headers");
    let mut messages = 0;
    loop {
        match stream.message().await {
            Ok(Some(_)) => messages += 1,
            Ok(None) => return (messages, Code::Ok),
            Err(status) => return (messages, status.code()),
        }
    }
}

fn breaker(gateway: &common::Running) -> cutout::Breaker {
    gateway.gateway.clusters()["echo"].breaker().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_calls_through_the_gateway_keep_the_breaker_closed() {
    let server = Server::start().unwrap();
    let gateway = common::start_gateway(&config(&server), None).await;
    let mut client = client(&gateway).await;
    for n in 0..20 {
        let reply = client.unary(EchoRequest::ok(&format!("call {n}"))).await;
        assert_eq!(reply.unwrap().message, format!("call {n}"));
    }
    for _ in 0..10 {
        assert_eq!(
            streamed(&mut client, EchoRequest::stream(3, 0)).await,
            (3, Code::Ok)
        );
    }
    let breaker = breaker(&gateway);
    assert_eq!(breaker.state(), State::Closed);
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (30, 0), "30 successes");
    assert_eq!(server.calls(), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_in_trailers_only_responses_opens_the_breaker_and_the_next_call_is_refused() {
    let server = Server::start().unwrap();
    let gateway = common::start_gateway(&config(&server), None).await;
    let mut client = client(&gateway).await;
    let breaker = breaker(&gateway);
    for n in 1..=5 {
        assert_eq!(breaker.state(), State::Closed, "before failure {n}");
        let status = client
            .unary(EchoRequest::failing(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(
        breaker.state(),
        State::Open,
        "five UNAVAILABLE (grpc-status 14)"
    );
    assert_eq!(server.calls(), 5);
    // Refused by the gateway (503, which gRPC reads as UNAVAILABLE), never reaching the server.
    let status = client.unary(EchoRequest::ok("refused?")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(
        server.calls(),
        5,
        "the open breaker kept it from the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_in_the_trailers_after_the_messages_opens_the_breaker_too() {
    let server = Server::start().unwrap();
    let gateway = common::start_gateway(&config(&server), None).await;
    let mut client = client(&gateway).await;
    let breaker = breaker(&gateway);
    for n in 1..=5 {
        assert_eq!(breaker.state(), State::Closed, "before failure {n}");
        let request = EchoRequest::stream(2, Code::Unavailable as i32);
        assert_eq!(
            streamed(&mut client, request).await,
            (2, Code::Unavailable),
            "the messages came through, then the status in the trailers"
        );
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(server.calls(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_errors_never_open_the_breaker() {
    let server = Server::start().unwrap();
    let gateway = common::start_gateway(&config(&server), None).await;
    let mut client = client(&gateway).await;
    for _ in 0..10 {
        let status = client
            .unary(EchoRequest::failing(Code::InvalidArgument))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let request = EchoRequest::stream(1, Code::NotFound as i32);
        assert_eq!(streamed(&mut client, request).await, (1, Code::NotFound));
    }
    let breaker = breaker(&gateway);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().failures, 0);
    assert_eq!(server.calls(), 20);
}

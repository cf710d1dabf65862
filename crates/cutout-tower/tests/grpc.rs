//! gRPC through a breaker: a real tonic server and client on loopback, the client's `Channel`
//! under a `WholeResponseLayer` with a `GrpcClassifier`.
//!
//! The server counts the calls that reach it, so "refused without reaching the server" is
//! checked on the server's side. Unary errors come from tonic as trailers-only responses
//! (`grpc-status` in the headers); `Stream` errors come in the trailers, after the messages.

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, RejectReason, Rejected, Settings, State};
use cutout_tower::grpc::GrpcClassifier;
use cutout_tower::{BreakerService, HttpClassifier, WholeResponseLayer, WholeResponseService};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tower::ServiceBuilder;

#[path = "../examples/grpc.rs"]
#[allow(dead_code)] // The example's `main`: `cargo run --example grpc` runs it.
mod example;

use example::echo::{EchoClient, EchoRequest, Server};

/// Opens after `failures` consecutive failures; one probe, one success closes it.
fn breaker(failures: u32) -> Breaker {
    breaker_on(failures, None)
}

fn breaker_on(failures: u32, clock: Option<&ManualClock>) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(failures))
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .adaptive(false)
        .half_open_probes(1)
        .probe_successes(1)
        .build()
        .unwrap();
    let builder = Breaker::builder("echo").settings(settings);
    match clock {
        Some(clock) => builder.clock(clock.clone()).build(),
        None => builder.build(),
    }
}

async fn channel(server: &Server) -> Channel {
    Endpoint::from_shared(format!("http://{}", server.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

type Guarded = EchoClient<WholeResponseService<Channel, GrpcClassifier>>;

/// A client whose channel is under `breaker`, the verdict waiting for the trailers.
async fn guarded(server: &Server, breaker: &Breaker) -> Guarded {
    let service = ServiceBuilder::new()
        .layer(WholeResponseLayer::new(breaker.clone()).classifier(GrpcClassifier::new()))
        .service(channel(server).await);
    EchoClient::new(service)
}

/// (calls, failures) in the breaker's window.
fn counts(breaker: &Breaker) -> (u64, u64) {
    let snapshot = breaker.snapshot();
    (snapshot.calls, snapshot.failures)
}

/// The breaker's refusal inside a client's status, if it was one.
fn refusal(status: &Status) -> Option<&Rejected> {
    cutout_tower::Error::find(status).and_then(|error| error.rejection())
}

/// Calls `Stream` and reads it to its end: the messages, then the status. The call itself
/// succeeds (headers without a status), so the status came in the trailers.
async fn streamed<T>(client: &mut EchoClient<T>, request: EchoRequest) -> (u32, Code)
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<cutout_tower::BoxError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<cutout_tower::BoxError> + Send,
{
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

const UNAVAILABLE: i32 = Code::Unavailable as i32;

#[tokio::test]
async fn ok_calls_never_open_the_breaker() {
    let server = Server::start().unwrap();
    let breaker = breaker(1); // any failure would open it
    let mut client = guarded(&server, &breaker).await;
    for n in 0..20 {
        let reply = client.unary(EchoRequest::ok(&format!("call {n}"))).await;
        assert_eq!(reply.unwrap().message, format!("call {n}"));
    }
    for _ in 0..10 {
        let request = EchoRequest::stream(3, 0);
        assert_eq!(streamed(&mut client, request).await, (3, Code::Ok));
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(counts(&breaker), (30, 0), "30 successes");
    assert_eq!(server.calls(), 30);
}

#[tokio::test]
async fn five_unavailable_in_the_trailers_open_the_breaker_and_the_next_call_never_reaches_the_server()
 {
    let server = Server::start().unwrap();
    let breaker = breaker(5);
    let mut client = guarded(&server, &breaker).await;
    for n in 1..=5 {
        assert_eq!(breaker.state(), State::Closed, "before failure {n}");
        let request = EchoRequest::stream(1, UNAVAILABLE);
        assert_eq!(streamed(&mut client, request).await, (1, Code::Unavailable));
        if n < 5 {
            assert_eq!(breaker.snapshot().consecutive_failures, n);
        }
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(counts(&breaker), (5, 5));
    assert_eq!(server.calls(), 5);

    let status = client.unary(EchoRequest::ok("refused?")).await.unwrap_err();
    let refused = refusal(&status).expect("the breaker refused it");
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(refused.breaker().as_str(), "echo");
    let status = client.stream(EchoRequest::stream(1, 0)).await.unwrap_err();
    assert!(refusal(&status).is_some());
    assert_eq!(server.calls(), 5, "neither call reached the server");
}

#[tokio::test]
async fn unavailable_in_the_headers_of_a_trailers_only_response_opens_it_too() {
    let server = Server::start().unwrap();
    let breaker = breaker(5);
    let mut client = guarded(&server, &breaker).await;
    for _ in 0..5 {
        let status = client
            .unary(EchoRequest::failing(Code::Unavailable))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert!(refusal(&status).is_none());
    }
    assert_eq!(breaker.state(), State::Open);
    let status = client.unary(EchoRequest::ok("refused?")).await.unwrap_err();
    assert!(refusal(&status).is_some());
    assert_eq!(server.calls(), 5);
}

#[tokio::test]
async fn invalid_argument_twenty_times_never_opens_the_breaker() {
    let server = Server::start().unwrap();
    let breaker = breaker(1); // any failure would open it
    let mut client = guarded(&server, &breaker).await;
    for _ in 0..10 {
        let status = client
            .unary(EchoRequest::failing(Code::InvalidArgument))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let request = EchoRequest::stream(2, Code::InvalidArgument as i32);
        assert_eq!(
            streamed(&mut client, request).await,
            (2, Code::InvalidArgument)
        );
    }
    assert_eq!(server.calls(), 20);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(counts(&breaker), (0, 0), "ignored: counted as nothing");
    client.unary(EchoRequest::ok("still here")).await.unwrap();
    assert_eq!(counts(&breaker), (1, 0));
}

#[tokio::test]
async fn resource_exhausted_is_ignored_like_throttling_and_keeps_the_failure_count() {
    let server = Server::start().unwrap();
    let breaker = breaker(5);
    let mut client = guarded(&server, &breaker).await;
    for _ in 0..4 {
        let request = EchoRequest::stream(1, UNAVAILABLE);
        assert_eq!(streamed(&mut client, request).await.1, Code::Unavailable);
    }
    for _ in 0..5 {
        let status = client
            .unary(EchoRequest::failing(Code::ResourceExhausted))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        let request = EchoRequest::stream(1, Code::ResourceExhausted as i32);
        assert_eq!(
            streamed(&mut client, request).await.1,
            Code::ResourceExhausted
        );
    }
    assert_eq!(breaker.state(), State::Closed);
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (4, 4),
        "the 10 throttled: nothing"
    );
    assert_eq!(
        snapshot.consecutive_failures, 4,
        "an ignored outcome does not reset the count"
    );
    let request = EchoRequest::stream(1, UNAVAILABLE);
    assert_eq!(streamed(&mut client, request).await.1, Code::Unavailable);
    assert_eq!(breaker.state(), State::Open, "the fifth failure in a row");
}

#[tokio::test]
async fn the_status_in_the_trailers_after_streamed_messages_is_the_one_that_counts() {
    let server = Server::start().unwrap();
    let slow_unavailable = || EchoRequest::stream(3, UNAVAILABLE).slowly(Duration::from_millis(20));

    let breaker = breaker(1);
    let mut client = guarded(&server, &breaker).await;
    let mut stream = client.stream(slow_unavailable()).await.unwrap();
    assert_eq!(counts(&breaker), (0, 0), "200 OK headers decide nothing");
    for seq in 0..3 {
        assert_eq!(stream.message().await.unwrap().unwrap().seq, seq);
    }
    assert_eq!(
        breaker.state(),
        State::Closed,
        "three good messages decide nothing"
    );
    let status = stream.message().await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(counts(&breaker), (1, 1), "the trailers' UNAVAILABLE");
    assert_eq!(breaker.state(), State::Open);

    // The same stream ending OK is a success.
    let breaker = self::breaker(1);
    let mut client = guarded(&server, &breaker).await;
    let request = EchoRequest::stream(3, 0).slowly(Duration::from_millis(20));
    assert_eq!(streamed(&mut client, request).await, (3, Code::Ok));
    assert_eq!(counts(&breaker), (1, 0));

    // Why it takes the whole response: at the headers, the UNAVAILABLE stream was a 200.
    let at_headers = self::breaker(1);
    let service = BreakerService::with_classifier(
        channel(&server).await,
        at_headers.clone(),
        HttpClassifier::new(),
    );
    let mut client = EchoClient::new(service);
    assert_eq!(
        streamed(&mut client, slow_unavailable()).await,
        (3, Code::Unavailable)
    );
    assert_eq!(
        counts(&at_headers),
        (1, 0),
        "counted a success at the headers"
    );
    assert_eq!(at_headers.state(), State::Closed);
}

#[tokio::test]
async fn a_killed_server_is_a_transport_error_that_fails() {
    let server = Server::start().unwrap();
    let breaker = breaker(5);
    let mut client = guarded(&server, &breaker).await;
    client.unary(EchoRequest::ok("before")).await.unwrap();
    server.kill().await;

    let status = client.unary(EchoRequest::ok("after")).await.unwrap_err();
    let error = cutout_tower::Error::find(&status).expect("the breaker service's error");
    assert!(!error.is_rejected());
    let transport = error.get_inner().expect("the channel's error");
    assert!(
        transport.is::<tonic::transport::Error>(),
        "a transport error: {transport:?}"
    );
    assert_eq!(counts(&breaker), (2, 1), "one success, then the failure");
}

#[tokio::test]
async fn a_server_killed_mid_stream_is_a_body_error_that_fails() {
    let server = Server::start().unwrap();
    let breaker = breaker(5);
    let mut client = guarded(&server, &breaker).await;
    let request = EchoRequest::stream(1000, 0).slowly(Duration::from_millis(10));
    let mut stream = client.stream(request).await.unwrap();
    stream.message().await.unwrap().unwrap();
    server.kill().await;
    let mut status = None;
    for _ in 0..1000 {
        match stream.message().await {
            Ok(Some(_)) => continue, // replies already in flight
            Ok(None) => panic!("the stream ended cleanly"),
            Err(error) => {
                status = Some(error);
                break;
            }
        }
    }
    let status = status.expect("the stream broke");
    assert!(refusal(&status).is_none());
    assert_eq!(counts(&breaker), (1, 1), "the broken body is the failure");
}

#[tokio::test]
async fn a_response_stream_dropped_before_its_end_records_nothing() {
    let server = Server::start().unwrap();
    let clock = ManualClock::new();
    let breaker = breaker_on(1, Some(&clock));
    let mut client = guarded(&server, &breaker).await;
    let endless = || EchoRequest::stream(1000, 0).slowly(Duration::from_millis(10));

    let mut stream = client.stream(endless()).await.unwrap();
    stream.message().await.unwrap().unwrap();
    stream.message().await.unwrap().unwrap();
    drop(stream);
    assert_eq!(counts(&breaker), (0, 0), "nothing recorded");
    assert_eq!(breaker.state(), State::Closed);

    // As a half-open probe: the slot is given back, and the next call is the probe.
    let request = EchoRequest::stream(1, UNAVAILABLE);
    assert_eq!(streamed(&mut client, request).await.1, Code::Unavailable);
    assert_eq!(breaker.state(), State::Open);
    clock.elapse_break(&breaker);
    let mut probe = client.stream(endless()).await.unwrap();
    probe.message().await.unwrap().unwrap();
    let status = client.unary(EchoRequest::ok("second")).await.unwrap_err();
    let refused = refusal(&status).expect("one probe at a time");
    assert_eq!(refused.reason(), RejectReason::HalfOpenFull);
    let calls = server.calls();
    drop(probe);
    client.unary(EchoRequest::ok("next probe")).await.unwrap();
    assert_eq!(server.calls(), calls + 1);
    assert_eq!(
        breaker.state(),
        State::Closed,
        "the next probe's success closed it"
    );
}

#[tokio::test]
async fn the_example_runs() {
    let report = example::run().await.unwrap();
    assert_eq!(report.state, State::Open);
    assert_eq!(report.refused, 1);
    // 1 unary, 1 stream, 3 INVALID_ARGUMENT, 3 UNAVAILABLE streams; the refused call never
    // arrived.
    assert_eq!(report.server_calls, 8);
    assert!(
        report.lines[2].contains("InvalidArgument"),
        "{:?}",
        report.lines
    );
    assert!(report.lines[7].contains("Unavailable in the trailers (breaker Open"));
    assert!(
        report.lines[8].contains("retry after 30s"),
        "{}",
        report.lines[8]
    );
    assert_eq!(report.lines.len(), 10);
}

//! A tonic client behind a breaker that reads `grpc-status` where gRPC puts it: in the trailers.
//!
//! Starts a local `echo.Echo` server on 127.0.0.1 (any free port), puts a
//! `tonic::transport::Channel` under a [`WholeResponseLayer`] with a [`GrpcClassifier`], and
//! calls it: OK calls, a stream whose OK status comes in the trailers, three INVALID_ARGUMENT
//! answers (the caller's fault: ignored), then streams that end with UNAVAILABLE in their
//! trailers after their messages, until the breaker opens and refuses the next call without
//! reaching the server. Prints each step and exits 0.
//!
//! ```text
//! cargo run -p cutout-tower --example grpc --features grpc
//! ```
//!
//! The service's messages and tonic glue are written by hand in [`echo`] (what `tonic-build`
//! would generate from the proto in its docs), so that nothing needs `protoc`. The tests in
//! `tests/grpc.rs` reuse them, and run [`run`].

use std::time::Duration;

use cutout::{Breaker, Jitter, Settings, State};
use cutout_tower::grpc::GrpcClassifier;
use cutout_tower::{BoxError, WholeResponseLayer};
use tower::ServiceBuilder;

use echo::{EchoClient, EchoRequest, Server};

/// What [`run`] did, for a test to check.
#[derive(Debug)]
pub struct Report {
    /// One line per step, as printed.
    pub lines: Vec<String>,
    /// The calls that reached the server.
    pub server_calls: usize,
    /// The calls the breaker refused.
    pub refused: usize,
    /// The breaker's state at the end.
    pub state: State,
}

/// Runs the walk-through against a local server (stopped at the end).
pub async fn run() -> Result<Report, BoxError> {
    let server = Server::start()?;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr()))?
        .connect()
        .await?;
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()?;
    let breaker = Breaker::new("echo", settings);
    let guarded = ServiceBuilder::new()
        .layer(WholeResponseLayer::new(breaker.clone()).classifier(GrpcClassifier::new()))
        .service(channel);
    let mut client = EchoClient::new(guarded);
    let mut lines = Vec::new();
    let mut say = |line: String| {
        println!("{line}");
        lines.push(line);
    };
    let counts = |breaker: &Breaker| {
        let s = breaker.snapshot();
        format!(
            "breaker {:?}, {} counted, {} failed",
            breaker.state(),
            s.calls,
            s.failures
        )
    };

    let reply = client.unary(EchoRequest::ok("hello")).await?;
    say(format!("unary: '{}' ({})", reply.message, counts(&breaker)));

    // A slow stream: its status arrives in the trailers, 3 × 10 ms after the headers.
    let slow = EchoRequest::stream(3, 0).slowly(Duration::from_millis(10));
    let messages = client.stream_to_end(slow).await?;
    say(format!(
        "stream: {messages} messages, OK in the trailers ({})",
        counts(&breaker)
    ));

    for _ in 0..3 {
        let status = client
            .unary(EchoRequest::failing(tonic::Code::InvalidArgument))
            .await
            .unwrap_err();
        say(format!(
            "unary: {:?} in the headers, the caller's fault ({})",
            status.code(),
            counts(&breaker)
        ));
    }

    while breaker.state() == State::Closed {
        let mut stream = client
            .stream(EchoRequest::stream(2, tonic::Code::Unavailable as i32))
            .await?;
        let mut messages = 0;
        let status = loop {
            match stream.message().await {
                Ok(Some(_)) => messages += 1,
                Ok(None) => break tonic::Code::Ok,
                Err(status) => break status.code(),
            }
        };
        say(format!(
            "stream: {messages} messages, then {status:?} in the trailers ({})",
            counts(&breaker)
        ));
    }

    let before = server.calls();
    let mut refused = 0;
    let status = client.unary(EchoRequest::ok("anyone?")).await.unwrap_err();
    if let Some(rejection) = cutout_tower::Error::find(&status).and_then(|e| e.rejection()) {
        refused += 1;
        // Whole seconds, rounded up, in humantime style.
        let after = rejection.retry_after().unwrap_or_default();
        let after = Duration::from_secs(after.as_secs() + u64::from(after.subsec_nanos() > 0));
        say(format!(
            "unary: refused by breaker '{}' ({}), retry after {}; calls that reached the \
             server: {} (none new)",
            rejection.breaker(),
            rejection.reason(),
            humantime::format_duration(after),
            server.calls(),
        ));
        assert_eq!(server.calls(), before);
    }

    let server_calls = server.calls();
    server.kill().await;
    say(format!("server stopped after {server_calls} calls"));
    Ok(Report {
        lines,
        server_calls,
        refused,
        state: breaker.state(),
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let report = run().await?;
    assert_eq!(report.state, State::Open);
    Ok(())
}

pub mod echo {
    //! The `echo.Echo` service by hand: the prost messages and the tonic glue that
    //! `tonic-build` would generate from this proto (no `protoc`, no build script):
    //!
    //! ```proto
    //! syntax = "proto3";
    //! package echo;
    //!
    //! service Echo {
    //!   rpc Unary(EchoRequest) returns (EchoReply);          // `code` != 0: that status
    //!   rpc Stream(EchoRequest) returns (stream EchoReply);  // `count` replies, then `code`
    //! }
    //! message EchoRequest {
    //!   string message = 1;
    //!   int32 code = 2;       // the status to end with (0: OK)
    //!   uint32 count = 3;     // Stream: how many replies before the status
    //!   uint32 delay_ms = 4;  // before each reply
    //! }
    //! message EchoReply { string message = 1; uint32 seq = 2; }
    //! ```

    use std::convert::Infallible;
    use std::future::Future;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use cutout_tower::BoxError;
    use http::uri::PathAndQuery;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;
    use tonic::server::NamedService;
    use tonic::{Code, Status, Streaming};
    use tonic_prost::ProstCodec;

    /// A request: its message, the status to end with, and for `Stream` how many replies.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoRequest {
        /// Echoed back.
        #[prost(string, tag = "1")]
        pub message: String,
        /// The status the call ends with (0: OK).
        #[prost(int32, tag = "2")]
        pub code: i32,
        /// `Stream`: how many replies come before the status.
        #[prost(uint32, tag = "3")]
        pub count: u32,
        /// A pause before each reply, in milliseconds.
        #[prost(uint32, tag = "4")]
        pub delay_ms: u32,
    }

    impl EchoRequest {
        /// A call that succeeds with `message`.
        pub fn ok(message: &str) -> Self {
            EchoRequest {
                message: message.to_owned(),
                ..EchoRequest::default()
            }
        }

        /// A call that fails with `code`.
        pub fn failing(code: Code) -> Self {
            EchoRequest {
                message: "fail".to_owned(),
                code: code as i32,
                ..EchoRequest::default()
            }
        }

        /// A stream of `count` replies that ends with `code`.
        pub fn stream(count: u32, code: i32) -> Self {
            EchoRequest {
                message: "item".to_owned(),
                code,
                count,
                delay_ms: 0,
            }
        }

        /// The same, waiting `delay` before each reply.
        pub fn slowly(mut self, delay: Duration) -> Self {
            self.delay_ms = u32::try_from(delay.as_millis()).unwrap_or(u32::MAX);
            self
        }
    }

    /// A reply: the request's message and its place in the stream.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoReply {
        /// The request's message.
        #[prost(string, tag = "1")]
        pub message: String,
        /// 0, 1, 2, ... in a stream.
        #[prost(uint32, tag = "2")]
        pub seq: u32,
    }

    /// A running server on its own runtime, so that [`Server::kill`] can end it and every
    /// connection it holds at once, as a crash would.
    pub struct Server {
        addr: SocketAddr,
        calls: Arc<AtomicUsize>,
        runtime: Option<tokio::runtime::Runtime>,
    }

    impl Server {
        /// Starts a server on 127.0.0.1, on a free port.
        pub fn start() -> std::io::Result<Server> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            listener.set_nonblocking(true)?;
            let addr = listener.local_addr()?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            let calls = Arc::new(AtomicUsize::new(0));
            let service = EchoService {
                calls: Arc::clone(&calls),
            };
            runtime.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                    .await
                    .map_err(BoxError::from)
            });
            Ok(Server {
                addr,
                calls,
                runtime: Some(runtime),
            })
        }

        /// Where it listens.
        pub fn addr(&self) -> SocketAddr {
            self.addr
        }

        /// The calls that reached it, whatever their method.
        pub fn calls(&self) -> usize {
            // Orderings: a counter read after the calls it counts have been answered (the
            // answer happens after the increment); Relaxed is enough for that.
            self.calls.load(Ordering::Relaxed)
        }

        /// Ends the server, its listener and its connections at once (dropping every task),
        /// and returns when they are gone.
        pub async fn kill(mut self) {
            if let Some(runtime) = self.runtime.take() {
                let _ = tokio::task::spawn_blocking(move || {
                    runtime.shutdown_timeout(Duration::from_secs(5));
                })
                .await;
            }
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if let Some(runtime) = self.runtime.take() {
                // A runtime may not block its way down inside another's task.
                runtime.shutdown_background();
            }
        }
    }

    /// The server side: routes by path, as tonic-build's `EchoServer` would.
    #[derive(Clone)]
    struct EchoService {
        calls: Arc<AtomicUsize>,
    }

    impl NamedService for EchoService {
        const NAME: &'static str = "echo.Echo";
    }

    type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

    impl tower::Service<http::Request<tonic::body::Body>> for EchoService {
        type Response = http::Response<tonic::body::Body>;
        type Error = Infallible;
        type Future = BoxFuture<Self::Response>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
            // Orderings: see `Server::calls`.
            self.calls.fetch_add(1, Ordering::Relaxed);
            match request.uri().path() {
                "/echo.Echo/Unary" => Box::pin(async move {
                    let mut grpc = tonic::server::Grpc::new(codec());
                    Ok(grpc.unary(tower::service_fn(unary), request).await)
                }),
                "/echo.Echo/Stream" => Box::pin(async move {
                    let mut grpc = tonic::server::Grpc::new(codec());
                    Ok(grpc
                        .server_streaming(tower::service_fn(stream), request)
                        .await)
                }),
                _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
            }
        }
    }

    fn codec<T, U>() -> ProstCodec<T, U> {
        ProstCodec::default()
    }

    async fn unary(
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, Status> {
        let request = request.into_inner();
        tokio::time::sleep(Duration::from_millis(request.delay_ms.into())).await;
        match Code::from_i32(request.code) {
            // An error before any message: tonic sends it trailers-only (in the headers).
            Code::Ok => Ok(tonic::Response::new(EchoReply {
                message: request.message,
                seq: 0,
            })),
            code => Err(Status::new(code, format!("asked for {code:?}"))),
        }
    }

    type Replies = ReceiverStream<Result<EchoReply, Status>>;

    async fn stream(
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<Replies>, Status> {
        let request = request.into_inner();
        let (replies, stream) = mpsc::channel(1);
        tokio::spawn(async move {
            for seq in 0..request.count {
                tokio::time::sleep(Duration::from_millis(request.delay_ms.into())).await;
                let reply = EchoReply {
                    message: request.message.clone(),
                    seq,
                };
                if replies.send(Ok(reply)).await.is_err() {
                    return; // The client went away.
                }
            }
            // After the messages, the status goes in the trailers.
            let code = Code::from_i32(request.code);
            if code != Code::Ok {
                let _ = replies
                    .send(Err(Status::new(code, format!("asked for {code:?}"))))
                    .await;
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(stream)))
    }

    /// The client side, as tonic-build's `EchoClient` would be, over any tower service of
    /// HTTP requests (here a breaker around a `Channel`).
    pub struct EchoClient<T> {
        inner: tonic::client::Grpc<T>,
    }

    impl<T> EchoClient<T>
    where
        T: tonic::client::GrpcService<tonic::body::Body>,
        T::Error: Into<BoxError>,
        T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        <T::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
    {
        /// A client calling through `service`.
        pub fn new(service: T) -> Self {
            EchoClient {
                inner: tonic::client::Grpc::new(service),
            }
        }

        /// `Unary`: the reply, or the status the call ended with. A refusal of the breaker
        /// is an `UNKNOWN` status whose source is the [`cutout_tower::Error`].
        pub async fn unary(&mut self, request: EchoRequest) -> Result<EchoReply, Status> {
            self.ready().await?;
            let path = PathAndQuery::from_static("/echo.Echo/Unary");
            let reply = self
                .inner
                .unary(tonic::Request::new(request), path, codec())
                .await?;
            Ok(reply.into_inner())
        }

        /// `Stream`: the stream of replies; its last item is the status (from the trailers).
        pub async fn stream(
            &mut self,
            request: EchoRequest,
        ) -> Result<Streaming<EchoReply>, Status> {
            self.ready().await?;
            let path = PathAndQuery::from_static("/echo.Echo/Stream");
            let replies = self
                .inner
                .server_streaming(tonic::Request::new(request), path, codec())
                .await?;
            Ok(replies.into_inner())
        }

        /// `Stream`, read to its end: how many replies came before an OK status.
        pub async fn stream_to_end(&mut self, request: EchoRequest) -> Result<u32, Status> {
            let mut stream = self.stream(request).await?;
            let mut count = 0;
            while let Some(reply) = stream.message().await? {
                assert_eq!(reply.seq, count, "replies arrive in order");
                count += 1;
            }
            Ok(count)
        }

        async fn ready(&mut self) -> Result<(), Status> {
            self.inner
                .ready()
                .await
                .map_err(|error| Status::from_error(error.into()))
        }
    }
}

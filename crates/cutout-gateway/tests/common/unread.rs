//! A hostile HTTP/2 client: streams whose answers it never reads (no WINDOW_UPDATE), its connections kept alive by PINGs, so the gateway holds their request slots.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinHandle;

use super::eventually;

type Head = Result<http::Response<Incoming>, hyper_util::client::legacy::Error>;

/// The streams in flight; each task ends with its answer's head, whose body is never read.
/// Aborted on drop.
pub struct UnreadStreams(Vec<JoinHandle<Head>>);

impl UnreadStreams {
    /// `connections` HTTP/2 connections (from 127.0.0.1) to `proxy`, `streams` GETs of `path`
    /// each. A connection's streams start together, the next connection 150 ms later: each
    /// stream makes an upstream connection, and a thousand connects at once overflow a test
    /// upstream's accept queue (its backlog is 1,024), which then fails them after the 2 s
    /// attempt timeout as a real overloaded upstream would, and opens the cluster.
    pub async fn open(
        proxy: SocketAddr,
        path: &str,
        connections: usize,
        streams: usize,
    ) -> UnreadStreams {
        let url: http::Uri = format!("http://{proxy}{path}").parse().unwrap();
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
                .http2_only(true)
                .http2_initial_stream_window_size(65_535)
                .http2_initial_connection_window_size(65_535)
                .http2_keep_alive_interval(Duration::from_secs(1))
                .http2_keep_alive_while_idle(true)
                .timer(hyper_util::rt::TokioTimer::new())
                .build_http();
            for _ in 0..streams {
                let (client, url) = (client.clone(), url.clone());
                tasks.push(tokio::spawn(async move { client.get(url).await }));
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        UnreadStreams(tasks)
    }

    /// The streams that have their answer's head (or an error), once at least `at_least` do
    /// or 10 s passed.
    pub async fn heads(&self, at_least: usize) -> usize {
        let done = || self.0.iter().filter(|t| t.is_finished()).count();
        eventually(Duration::from_secs(10), || done() >= at_least).await;
        done()
    }
}

impl Drop for UnreadStreams {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

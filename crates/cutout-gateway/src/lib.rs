//! cutout-gateway: a reverse proxy with a cutout circuit breaker per cluster and per host, an admin API and a live status page.
//!
//! Each cluster's stack is **cluster breaker → host pick → attempt → forward** (seed 002's
//! Polly pipeline per YARP cluster, with Envoy's outlier ejection inside it): a 5xx, a
//! forwarding error, a timeout, or a response body that breaks or stalls is a failure; an open
//! breaker answers 503 with `Retry-After` without touching the upstream; a timeout answers 504
//! and cancels the forward (the upstream's connection is closed). *Blame* keeps the client's
//! faults (a broken, stalled or oversized upload) out of the count: they are answered 400, 408
//! or 413 and never open a healthy cluster; a client that leaves is never the upstream's
//! failure (its attempt runs on detached and is judged by its own outcome).
//!
//! - [`config`]: the TOML file (`[gateway]`, `[[routes]]`, `[clusters.*]`, `[breakers]` in
//!   cutout's format).
//! - [`proxy::app`] and [`admin::app`]: the two listeners' routers, testable without a socket.
//! - [`cluster`]: a cluster's stack; [`hosts`]: routing: per-host breakers, round-robin over
//!   the hosts that admit, the ejection cap (`max-ejection-percent`), a retry on another host
//!   after a connect failure or a reset ([`retry`]: which, and the retry budget), the panic
//!   threshold, and what the cluster breaker still counts; [`health`]: active health checks
//!   per host, which end a break early; [`attempt`]: the attempt timeout over the whole
//!   response and the give-up rule (detached attempts and their budget);
//!   [`classify`]: what an outcome means to a breaker (gRPC's by `grpc-status`);
//!   [`grpc_answer`]: the gateway's own answers to gRPC calls in gRPC's shape;
//!   [`exhaustion`]: the gateway's own exhaustion (out of descriptors, …) told apart from an
//!   upstream's failure.
//! - [`access`]: request ids and the access log; [`stats`]: per-second statistics and the slow
//!   mark for the status page; [`metrics`]: the Prometheus recorder and the gateway's series.
//! - [`demo`]: the embedded demo with two chaos-switchable [`upstream`]s.
//! - [`server`]: binding with clear errors, the listeners' limits (connections, header-read and
//!   idle timeouts), half-closed requests answered, graceful shutdown on SIGTERM / Ctrl-C with
//!   a drain deadline, SIGHUP reloading; [`share`]: a full listener's fair share between
//!   sources; [`budget`]: a listener's requests in flight bounded by its `max-connections`,
//!   however many HTTP/2 streams carry them; [`tls`]: the proxy listener's TLS (a certificate that can be reloaded) and
//!   [`connector`]: how clusters reach their upstreams (TLS, HTTP/2); [`tunnel`]: WebSocket
//!   upgrades passed through.
//! - [`reload`]: the configuration reloaded without a restart (SIGHUP, `POST /reload`), only
//!   what changed rebuilt; [`routing`]: the routing table a request holds, and what each
//!   cluster is built from.
//! - [`fleet`]: `[fleet]`, the replicas sharing their cluster breakers' signals through Redis
//!   (cutout-fleet), with the fleet's health on `/healthz` and the status page.
//! - [`client_body`]: the client's body watched on its way, so a client's fault (400, 408,
//!   413) is never counted against a cluster; [`refusal`]: rate-limited log lines when a limit
//!   refuses.

#![forbid(unsafe_code)]

pub mod access;
pub mod admin;
pub mod attempt;
pub mod bare;
pub mod budget;
pub mod classify;
pub mod client_body;
pub mod cluster;
pub mod config;
pub mod connector;
pub mod demo;
pub mod error;
pub mod exhaustion;
pub mod fleet;
pub mod forwarded;
pub mod gateway;
pub mod grpc_answer;
pub mod header_rules;
pub mod health;
pub mod hosts;
pub mod metrics;
pub mod order;
pub mod proxy;
pub mod rate;
pub mod refusal;
pub mod reload;
pub mod retry;
pub mod routing;
pub mod server;
pub mod share;
pub mod slots;
pub mod stats;
pub mod status_page;
pub mod tls;
pub mod tunnel;
pub mod upstream;

pub use config::GatewayConfig;
pub use error::{ClientFault, ConfigError, ProxyError, StartError};
pub use gateway::Gateway;

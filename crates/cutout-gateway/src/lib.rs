//! cutout-gateway: a reverse proxy with a cutout circuit breaker per cluster, an admin API and a live status page.
//!
//! Each cluster's stack is **breaker → blame → attempt timeout → forward** (seed 002's Polly
//! pipeline per YARP cluster): a 5xx, a forwarding error or a timeout is a failure; an open
//! breaker answers 503 with `Retry-After` without touching the upstream; a timeout answers 504
//! and cancels the forward (the upstream's connection is closed). *Blame* keeps the client's
//! faults (a broken, stalled or oversized upload) out of the count: they are answered 400, 408
//! or 413 and never open a healthy cluster.
//!
//! - [`config`]: the TOML file (`[gateway]`, `[[routes]]`, `[clusters.*]`, `[breakers]` in
//!   cutout's format).
//! - [`proxy::app`] and [`admin::app`]: the two listeners' routers, testable without a socket.
//! - [`demo`]: the embedded demo with two chaos-switchable [`upstream`]s.
//! - [`server`]: binding with clear errors, the listeners' limits (connections, header-read and
//!   idle timeouts), graceful shutdown on SIGTERM / Ctrl-C with a drain deadline, SIGHUP
//!   ignored.
//! - [`client_body`]: the client's body watched on its way, so a client's fault (400, 408,
//!   413) is never counted against a cluster; [`refusal`]: rate-limited log lines when a limit
//!   refuses.

#![forbid(unsafe_code)]

pub mod admin;
pub mod bare;
pub mod client_body;
pub mod cluster;
pub mod config;
pub mod demo;
pub mod error;
pub mod gateway;
pub mod metrics;
pub mod proxy;
pub mod refusal;
pub mod server;
pub mod status_page;
pub mod upstream;

pub use config::GatewayConfig;
pub use error::{ClientFault, ConfigError, ProxyError, StartError};
pub use gateway::Gateway;

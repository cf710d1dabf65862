//! Circuit-breaker signals shared across a fleet of pods through Redis.
//!
//! A [`cutout::Breaker`] sees only its own pod's calls. At 1 request a second per pod, a
//! breaker whose ratio rules need 20 calls waits 20 s for its window to mean anything, while
//! the dependency sees the whole fleet's traffic failing. A [`Fleet`] shares *signals*, not
//! state: every pod publishes each watched breaker's window counts to Redis and reads the
//! fleet's back, off the call's path, and each pod still decides locally: its breaker opens on
//! its own rules or on the fleet's window ([`FleetRule`]), whichever fires first, and probes
//! on its own after its own jittered break.
//!
//! - **Off the call's path.** One background tokio task per `Fleet`, for any number of
//!   breakers, does one round trip to Redis every [interval](FleetBuilder::interval) (default
//!   250 ms). It reads a breaker only with [`Breaker::snapshot`](cutout::Breaker::snapshot)
//!   (and, for fleet recovery, an open one with `break_may_end` and `break_remaining`), opens
//!   it only with [`Breaker::trip_on_signal`](cutout::Breaker::trip_on_signal) and ends a
//!   break only with [`Breaker::end_break_on_signal`](cutout::Breaker::end_break_on_signal);
//!   it registers no observer or listener, so a watched breaker's hot path is unchanged (a
//!   probe close is seen in the snapshots, not heard from an event).
//! - **Redis is a hint, never a dependency.** Down, slow, partitioned or refusing the
//!   password: a warning is logged, [`Fleet::health`] says degraded (with the last error and
//!   since when), the `metrics` feature's `cutout_fleet_connected{pod}` reads 0, and every
//!   breaker decides on its own calls. Every connect and round has a timeout (200 ms); the
//!   task reconnects with a jittered backoff and the fleet's rules are back with the first
//!   round that succeeds. Nothing blocks, nothing panics, nothing reaches a caller.
//! - **A fleet-wide open cap.** [`Fleet::open_gate`] makes a gate for
//!   [`BreakerBuilder::open_gate`](cutout::BreakerBuilder::open_gate) that answers from the
//!   task's cached view (how many other pods report the breaker open), without I/O.
//! - **Fleet recovery.** A pod whose breaker was closed by its own probes (seen by the task's
//!   snapshots: open or half-open at one tick, closed or recovering at the next, with no
//!   manual action between, so that a [`reset`](cutout::Breaker::reset) proves nothing)
//!   publishes it in the same round, dated on Redis's clock. A pod whose breaker is open on the
//!   same id, on a break of its own ([`break_may_end`](cutout::Breaker::break_may_end)),
//!   asks in its rounds for a release slot; the script grants one only for a recovery dated
//!   after the pod's opening (an older one is stale: it says nothing about what opened it),
//!   and only before the pod's own break ends, and spaces the slots fleet-wide so that
//!   released pods that probe promptly send at most the
//!   [recovery budget](FleetBuilder::recovery_budget)'s probes in any second (default 25;
//!   the slots are strict, the probes follow the pods' calls). At its slot the pod ends its break with
//!   [`end_break_on_signal`](cutout::Breaker::end_break_on_signal)`(PeerRecovered, age)`,
//!   which the core judges against the opening once more, and its own probes decide. Every
//!   pod open on a break of its own reads the recovery within two intervals of the first
//!   close; each is released at its slot. Redis down: nothing is published or granted, and
//!   each breaker serves its own break (a slot already granted is used; a close not yet
//!   published is published when Redis answers again, if the breaker is still closed).
//!
//! The layout in Redis (a ring of time buckets per breaker that sums every pod's report, so
//! that a round costs Redis the same at 10 pods or 10,000), its consistency and why each
//! round is a script are described in the `store` module's source; the README shows them
//! too.
//!
//! ```no_run
//! use std::time::Duration;
//! use cutout::{Breaker, Settings};
//! use cutout_fleet::{Fleet, FleetRule};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fleet = Fleet::builder("redis://127.0.0.1:6379").pod("checkout-7f9c").build()?;
//! let payments = Breaker::new("payments", Settings::default());
//! // Open this pod's breaker when the fleet's 30 s window holds 20 calls, half failed.
//! fleet.watch_with(&payments, FleetRule::new().failure_ratio(0.5))?;
//!
//! if !fleet.wait_connected(Duration::from_secs(1)).await {
//!     // Not an error: the breaker works on its own calls meanwhile.
//!     eprintln!("fleet signals not yet flowing: {:?}", fleet.health().last_error);
//! }
//! let _ = payments.call(|| Ok::<_, std::io::Error>("charged"));
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//! - `metrics`: the series listed in [`metrics`], through the `metrics` facade.
//! - `tls`: `rediss://` URLs (TLS through rustls, the server's certificate checked against
//!   the system's roots or a CA file of the fleet's own, [`FleetBuilder::tls_ca_file`]).
//! - `sentinel`: `redis+sentinel://` URLs, the primary asked of Redis Sentinel on every
//!   connect ([`FleetBuilder::build`]).

#![forbid(unsafe_code)]

mod builder;
mod error;
mod fleet;
mod grace;
mod health;
pub mod metrics;
mod pacing;
mod recovery;
mod report;
mod rule;
mod store;
mod task;
#[cfg(feature = "tls")]
mod tls;
mod view;

pub use builder::FleetBuilder;
pub use error::FleetError;
pub use fleet::Fleet;
pub use grace::TripGrace;
pub use health::{Health, Status};
pub use rule::{FleetRule, ResolvedRule};
pub use view::FleetView;
#[doc(hidden)]
pub use view::sim;

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

//! Connection pools (`[connections]`): each pod keeps idle connections to each replica, closes
//! those idle for `idle-timeout`, and a call that finds none opens one and pays its setup.
//!
//! # The model
//! A pod holds, per replica, a stack of idle connections (the time each became idle). An
//! admitted attempt takes the one that became idle last (most recently used first, as common
//! HTTP client pools do, so that under steady traffic the extra connections age out), unless
//! it has been idle for `idle-timeout` or longer: then it, and every connection idle longer
//! below it, has been closed (reaped), and the attempt opens a new connection. Opening one
//! costs a setup time (TCP and TLS handshakes), log-normal with `setup-median` and
//! `setup-p99`, before the request is sent: the dependency receives the call that much later,
//! and the duration the breaker measures (from its permit to the outcome) and the caller's
//! timeout include it. An attempt that ends with an answer, a success or an error, gives its
//! connection back idle at its end; one that times out closes it (a client that stops
//! waiting for a response mid-flight cannot reuse the connection). Setup that would reach the
//! timeout is a timeout (the call is never sent).
//!
//! So, as with real pools: under steady traffic a pod keeps about as many connections as it
//! has calls in flight and pays setup only when a burst needs more; at low or bursty traffic,
//! where the gaps between calls exceed the idle timeout, most calls pay it; and after a busy
//! period, light traffic finds the connections the busy period opened reaped one idle
//! timeout later. Without the section there is no pool: no call pays any setup (the lab as it
//! was).
//!
//! What it leaves out: a connection's setup never fails (an outage still answers with the
//! dependency's fast failure after the setup); a pool has no limit on idle connections per
//! replica and no limit on connections open at once (the pod's caller pool bounds calls in
//! flight); refused attempts open nothing, and the what-if copy of the dependency, which
//! judges refused attempts, counts no setup; the server's side closes nothing before the
//! client's idle timeout (set `idle-timeout` to the shorter of the two).
//!
//! Keys (all optional; the section turns the model on): `idle-timeout` (default `"90s"`, above
//! 0), `setup-median` (`"3ms"`, above 0), `setup-p99` (`"10ms"`, at least the median).
//! Mistakes are refused with the codes of [`crate::keys`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, MapAccess, Visitor};

use crate::duration::nanos;
use crate::fleet::mix;
use crate::keys::{self, Key, LogNormal, OUT_OF_RANGE};

/// The longest `idle-timeout` and setup a file may give.
const MOST: Duration = Duration::from_secs(7 * 24 * 3600);

/// `[connections]` as read (every key checked; see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionsSpec {
    /// A connection idle this long is closed.
    pub idle_timeout: Duration,
    /// A new connection's setup time.
    pub setup: LogNormal,
}

impl Default for ConnectionsSpec {
    fn default() -> ConnectionsSpec {
        ConnectionsSpec {
            idle_timeout: Duration::from_secs(90),
            setup: LogNormal::new::<de::value::Error>(
                ("", Duration::from_millis(3)),
                ("", Duration::from_millis(10)),
            )
            .expect("3ms and 10ms make a distribution"),
        }
    }
}

const KEYS: &[&str] = &["idle-timeout", "setup-median", "setup-p99"];

impl<'de> Deserialize<'de> for ConnectionsSpec {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<ConnectionsSpec, D::Error> {
        d.deserialize_map(SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = ConnectionsSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the [connections] section")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConnectionsSpec, A::Error> {
        let mut spec = ConnectionsSpec::default();
        let (mut median, mut p99) = (Duration::from_millis(3), Duration::from_millis(10));
        let key = || Key {
            section: "[connections]",
            known: KEYS,
        };
        while let Some(k) = map.next_key_seed(key())? {
            match k {
                "idle-timeout" => {
                    let d = keys::duration(&mut map, "connections.idle-timeout", MOST)?;
                    if d.is_zero() {
                        return Err(keys::error(
                            OUT_OF_RANGE,
                            "connections.idle-timeout must be above 0",
                        ));
                    }
                    spec.idle_timeout = d;
                }
                "setup-median" => {
                    median = keys::duration(&mut map, "connections.setup-median", MOST)?
                }
                "setup-p99" => p99 = keys::duration(&mut map, "connections.setup-p99", MOST)?,
                _ => unreachable!("Key returns a known key"),
            }
        }
        spec.setup = LogNormal::new(
            ("connections.setup-median", median),
            ("connections.setup-p99", p99),
        )?;
        Ok(spec)
    }
}

/// What an attempt got from its pod's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkout {
    /// An idle connection: the call is sent at once.
    Reused,
    /// A new connection: the call is sent after this setup, in nanoseconds.
    Opened(u64),
}

/// The connection pools of every pod of one run.
#[derive(Debug, Clone)]
pub struct Connections {
    spec: ConnectionsSpec,
    idle_timeout: u64,
    /// Per pod, per replica: when each idle connection became idle, oldest first.
    idle: Vec<BTreeMap<u32, Vec<u64>>>,
    /// Per pod: the setup times' stream.
    setups: Vec<fastrand::Rng>,
    opened: u64,
}

impl Connections {
    /// Empty pools for `pods` pods; each pod's setup times come from `seed` and its index.
    pub fn new(spec: ConnectionsSpec, pods: u32, seed: u64) -> Connections {
        Connections {
            spec,
            idle_timeout: nanos(spec.idle_timeout),
            idle: vec![BTreeMap::new(); pods as usize],
            setups: (0..pods)
                .map(|pod| fastrand::Rng::with_seed(mix(seed ^ 0xC0DE, u64::from(pod))))
                .collect(),
            opened: 0,
        }
    }

    /// An attempt of pod `pod` to replica `replica` at `now` takes a connection: the idle
    /// one used last, or a new one when there is none younger than the idle timeout (the
    /// older ones are closed).
    pub fn checkout(&mut self, pod: u32, replica: u32, now: u64) -> Checkout {
        let stack = self.idle[pod as usize].entry(replica).or_default();
        if let Some(&since) = stack.last() {
            if now.saturating_sub(since) < self.idle_timeout {
                stack.pop();
                return Checkout::Reused;
            }
            // The youngest is reaped, so every one below it is too.
            stack.clear();
        }
        self.opened += 1;
        Checkout::Opened(self.spec.setup.draw(&mut self.setups[pod as usize]).max(1))
    }

    /// What [`Connections::checkout`] would give an attempt of pod `pod` to `replica` at
    /// `now`, without taking it: the pool and the setup stream are left as they are, so a
    /// checkout that follows gives the same (this is how the oracle and the judgement of a
    /// refused attempt see the setup an attempt would pay; see [`crate::oracle`]).
    pub fn checkout_if_taken(&self, pod: u32, replica: u32, now: u64) -> Checkout {
        let young = self.idle[pod as usize]
            .get(&replica)
            .and_then(|stack| stack.last())
            .is_some_and(|&since| now.saturating_sub(since) < self.idle_timeout);
        if young {
            Checkout::Reused
        } else {
            let mut setups = self.setups[pod as usize].clone();
            Checkout::Opened(self.spec.setup.draw(&mut setups).max(1))
        }
    }

    /// An attempt that ended with an answer at `now` gives its connection back, idle.
    pub fn checkin(&mut self, pod: u32, replica: u32, now: u64) {
        self.idle[pod as usize]
            .entry(replica)
            .or_default()
            .push(now);
    }

    /// Idle connections of pod `pod` to `replica` still open at `now` (not yet idle for the
    /// idle timeout).
    pub fn idle_at(&self, pod: u32, replica: u32, now: u64) -> usize {
        self.idle[pod as usize].get(&replica).map_or(0, |stack| {
            stack
                .iter()
                .filter(|&&since| now.saturating_sub(since) < self.idle_timeout)
                .count()
        })
    }

    /// Connections opened so far, over every pod.
    pub fn opened(&self) -> u64 {
        self.opened
    }

    /// The spec in force.
    pub fn spec(&self) -> &ConnectionsSpec {
        &self.spec
    }
}

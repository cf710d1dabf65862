//! A listener's request budget: connections and the HTTP/2 streams beyond each connection's first share its `max-connections` slots, so requests in flight stay within what the descriptor budget assumes, and one client's streams cannot keep another out.
//!
//! On HTTP/1.1 a connection carries one request at a time, so `max-connections` bounds the
//! requests in flight, and so the upstream connections they hold: the descriptor budget
//! `GW-WARN-002` computes (about 2 × `max-connections` + the detached attempts + the admin
//! listener + 64). One HTTP/2 connection carries many streams, each forwarded on an upstream
//! connection of its own to an HTTP/1.1 upstream: without a bound of their own, ten HTTP/2
//! clients could make the gateway open thousands of upstream sockets, run out of descriptors,
//! and fail every client (its own failed connects are never counted against a cluster:
//! [`crate::exhaustion`]).
//!
//! So the listener's `max-connections` **slots** are shared:
//! - each open connection holds one, and its slot stands for one request in flight on it: a
//!   request begun while no other is in flight on its connection (every HTTP/1.1 request, an
//!   HTTP/2 connection's first stream) needs nothing more, and never waits;
//! - each further concurrent HTTP/2 stream takes a slot of its own until its answer is sent
//!   or dropped, but **never one of the last [`reserve`]** (an eighth of the slots): those are
//!   kept for new connections, so however many streams one client runs, another client can
//!   still connect and have its request served. A stream that finds no slot waits for one,
//!   first come first served, for at most `request-timeout`, then is answered 503 with
//!   `Retry-After: 1` (counted as `max_connections` in `cutout_gateway_refusals_total`, never
//!   by a breaker);
//! - an HTTP/2 connection is offered at most [`H2_MAX_CONCURRENT_STREAMS`] concurrent streams
//!   (`SETTINGS_MAX_CONCURRENT_STREAMS`; clients queue the rest themselves).
//!
//! Connections and extra streams together hold at most `max-connections` slots, so the
//! requests in flight, and the upstream connections they hold, are at most `max-connections`.
//! What is left: a client's extra streams may hold the other slots (all but the reserve) for
//! as long as it keeps them in flight (an answer it does not read, with PINGs that keep its
//! connection from `idle-timeout`: there is no per-stream idle timeout yet, as Envoy's
//! `stream_idle_timeout`); other clients' HTTP/2 streams past their first then wait or get
//! 503, their first streams and HTTP/1.1 requests do not. And the reserve is for any new
//! connection, the same client's too: the client that holds the streams can take the reserve
//! with connections that each keep a request in flight, which are never closed to make room
//! ([`crate::share`]), and then keep others out with 139 connections on the shipped 1024
//! (pinned by `tests/sre32d_reserve_by_connections.rs`, ignored).

use std::sync::Arc;
use std::time::Duration;

use http::Response;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::refusal::{Refusal, note};

/// The concurrent streams an HTTP/2 connection is offered (HAProxy's default; nginx offers
/// 128, hyper 200).
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;

/// The slots of `max` that extra HTTP/2 streams never take: an eighth, kept for new
/// connections.
pub fn reserve(max: usize) -> usize {
    max / 8
}

/// One listener's slots, shared by its connections and their extra HTTP/2 streams (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct RequestBudget {
    slots: Arc<Semaphore>,
    /// Told once each time a slot is given back, so a waiting stream looks again.
    freed: Arc<Notify>,
    reserve: usize,
    wait: Duration,
}

/// A slot, given back (and a waiting stream told) when dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    freed: Arc<Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The permit is released after this body, before any woken stream can run.
        self.freed.notify_one();
    }
}

impl RequestBudget {
    /// `max` slots; an extra stream that finds none free past the reserve waits at most
    /// `wait`.
    pub fn new(max: usize, wait: Duration) -> RequestBudget {
        RequestBudget {
            slots: Arc::new(Semaphore::new(max)),
            freed: Arc::new(Notify::new()),
            reserve: reserve(max),
            wait,
        }
    }

    /// The semaphore connections take their slots from ([`RequestBudget::hold`] them).
    pub fn slots(&self) -> &Arc<Semaphore> {
        &self.slots
    }

    /// A connection's slot, kept as a [`Slot`] so that giving it back tells a waiting stream.
    pub fn hold(&self, permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            _permit: permit,
            freed: Arc::clone(&self.freed),
        }
    }

    /// A slot past the reserve for an HTTP/2 stream on listener `what` that is not alone on
    /// its connection (one that is needs none: its connection's slot stands for it); or the
    /// 503 its client gets when none freed within the wait.
    pub async fn admit(&self, what: &str) -> Result<Slot, Box<Response<String>>> {
        let until = Instant::now() + self.wait;
        loop {
            // Registered before looking, so a slot freed in between is not missed.
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if let Some(slot) = self.try_extra() {
                return Ok(slot);
            }
            if tokio::time::timeout_at(until, freed).await.is_err() {
                return Err(Box::new(self.refuse(what)));
            }
        }
    }

    /// A slot for an extra stream, if one is free past the reserve.
    fn try_extra(&self) -> Option<Slot> {
        if self.slots.available_permits() <= self.reserve {
            return None;
        }
        let permit = Arc::clone(&self.slots).try_acquire_owned().ok()?;
        Some(self.hold(permit))
    }

    /// The 503 of a stream that waited out the wait, noted.
    fn refuse(&self, what: &str) -> Response<String> {
        note(
            Refusal::MaxConnections,
            what,
            format_args!(
                "an HTTP/2 stream beyond its connection's first waited {} (request-timeout) for \
                 one of the listener's max-connections slots; answered 503",
                cutout::HumanDuration(self.wait)
            ),
        );
        crate::error::refused(
            "the gateway is serving as many requests as max-connections allows",
            Some(Duration::from_secs(1)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_alone_on_its_connection_never_waits_and_extra_streams_leave_the_reserve() {
        // 16 slots, 2 of them the reserve; one connection open.
        let budget = RequestBudget::new(16, Duration::from_secs(30));
        assert_eq!(reserve(16), 2);
        let _connection = budget.hold(Arc::clone(budget.slots()).try_acquire_owned().unwrap());
        let mut extra = Vec::new();
        for _ in 0..13 {
            extra.push(budget.admit("proxy").await.unwrap());
        }
        assert_eq!(budget.slots().available_permits(), 2, "the reserve is left");
        // A new connection may take a reserved slot.
        let newcomer = Arc::clone(budget.slots()).try_acquire_owned();
        assert!(newcomer.is_ok());
        // Another extra stream waits, and begins as soon as a slot frees.
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.admit("proxy").await })
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!waiting.is_finished(), "no slot past the reserve: it waits");
        drop(extra.pop());
        drop(extra.pop());
        let _started = waiting.await.unwrap().expect("a freed slot goes to it");
        assert_eq!(budget.slots().available_permits(), 2);
        // With no slot past the reserve, a stream waits out the wait and is answered 503.
        let refused = budget.admit("proxy").await.unwrap_err();
        assert_eq!(refused.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[http::header::RETRY_AFTER], "1");
    }
}

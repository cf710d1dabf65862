//! A listener's request budget: requests in flight on it bounded by its `max-connections`, however many HTTP/2 streams carry them.
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
//! So:
//! - every request takes one of the listener's `max-connections` **request slots** until its
//!   answer is sent or dropped; an HTTP/1.1 request always finds one (its connection holds a
//!   connection slot), an HTTP/2 stream past the budget **waits** for one, first come first
//!   served, for at most `request-timeout`, then is answered 503 with `Retry-After: 1`
//!   (counted as `max_connections` in `cutout_gateway_refusals_total`, never by a breaker);
//! - an HTTP/2 connection is offered at most [`H2_MAX_CONCURRENT_STREAMS`] concurrent streams
//!   (`SETTINGS_MAX_CONCURRENT_STREAMS`; clients queue the rest themselves), so one connection
//!   cannot take more than that share of the budget.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Response, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::refusal::{Refusal, note};

/// The concurrent streams an HTTP/2 connection is offered (HAProxy's default; nginx offers
/// 128, hyper 200).
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;

/// One listener's request slots (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct RequestBudget {
    slots: Arc<Semaphore>,
    wait: Duration,
}

/// A request's slot, held until its answer is sent or dropped.
#[derive(Debug)]
pub struct RequestSlot(#[allow(dead_code)] OwnedSemaphorePermit);

impl RequestBudget {
    /// `max` requests in flight at once; a request past them waits at most `wait`.
    pub fn new(max: usize, wait: Duration) -> RequestBudget {
        RequestBudget {
            slots: Arc::new(Semaphore::new(max)),
            wait,
        }
    }

    /// Requests that could begin now.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }

    /// A slot for a request on listener `what`, or the 503 its client gets when none freed
    /// within the wait.
    pub async fn admit(&self, what: &str) -> Result<RequestSlot, Response<String>> {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(RequestSlot(slot));
        }
        let acquire = Arc::clone(&self.slots).acquire_owned();
        match tokio::time::timeout(self.wait, acquire).await {
            Ok(Ok(slot)) => Ok(RequestSlot(slot)),
            // Closed (never, the semaphore is not closed) or the wait ran out.
            _ => {
                note(
                    Refusal::MaxConnections,
                    what,
                    format_args!(
                        "an HTTP/2 stream waited {} (request-timeout) for one of the listener's \
                         request slots (max-connections); answered 503",
                        cutout::HumanDuration(self.wait)
                    ),
                );
                let mut response = Response::new(
                    "the gateway is serving as many requests as max-connections allows; retry \
                     after 1s\n"
                        .to_owned(),
                );
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                response
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                Err(response)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_past_the_budget_waits_for_a_slot_then_is_refused() {
        let budget = RequestBudget::new(2, Duration::from_secs(30));
        let first = budget.admit("proxy").await.unwrap();
        let _second = budget.admit("proxy").await.unwrap();
        assert_eq!(budget.available(), 0);
        // A third waits, and begins as soon as a slot frees.
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.admit("proxy").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!waiting.is_finished(), "the third request waits");
        drop(first);
        assert!(waiting.await.unwrap().is_ok(), "a freed slot goes to it");
        // With every slot held, a request waits out the wait and is answered 503.
        let _third = budget.admit("proxy").await.unwrap();
        let refused = budget.admit("proxy").await.unwrap_err();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[http::header::RETRY_AFTER], "1");
    }
}

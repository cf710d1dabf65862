//! Hostile review of the declarative layer (issue #31): `ignore` wins (seed 001: "If you don't want that [timeouts counted],
//! list them in ignoreOn"); a timeout the attribute's `ignore` names must count neither way.
#![cfg(all(feature = "macros", feature = "tokio"))]

use std::time::Duration;

use cutout::declarative::TimedOut;
use cutout::{Registry, Rejected, State};

/// What the slow delegate answers.
#[derive(Debug, PartialEq)]
pub enum E {
    /// The breaker refused the call.
    Refused,
    /// The call ran out of its timeout.
    TimedOut,
}
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E::Refused
    }
}
impl From<TimedOut> for E {
    fn from(_: TimedOut) -> Self {
        E::TimedOut
    }
}

fn timed_out(e: &E) -> bool {
    *e == E::TimedOut
}

#[cutout::resilient]
trait Slow {
    #[breaker(name = "slow-ignored", consecutive_failures = 1, break_duration = "1m",
              timeout = "1s", ignore = timed_out)]
    async fn get(&self) -> Result<u8, E>;
}

struct S;
impl Slow for S {
    async fn get(&self) -> Result<u8, E> {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(1)
    }
}

#[tokio::test(start_paused = true)]
async fn an_ignored_timeout_does_not_open_the_breaker() {
    let registry = Registry::new();
    let w = SlowResilient::new(S, &registry).unwrap();
    assert_eq!(w.get().await, Err(E::TimedOut));
    assert_eq!(
        registry.state("slow-ignored").unwrap(),
        State::Closed,
        "`ignore` names the timeout, yet it counted as a failure"
    );
}

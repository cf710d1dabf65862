//! A breaker on the manual clock driven one call at a time, shared by the adaptive-rule tests.
#![allow(dead_code)]

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Event, OpenReason, Outcome, SettingsBuilder, State, Transition};

/// A breaker on a manual clock, with one call at a time, recording its events.
pub struct Sim {
    pub clock: ManualClock,
    pub breaker: Breaker,
    pub events: std::sync::Arc<std::sync::Mutex<Vec<Event>>>,
}

impl Sim {
    pub fn new(settings: SettingsBuilder) -> Sim {
        let clock = ManualClock::new();
        let breaker = Breaker::builder("dep")
            .settings(settings.build().unwrap())
            .clock(clock.clone())
            .seed(3)
            .build();
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        breaker.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
        Sim {
            clock,
            breaker,
            events,
        }
    }

    /// One call taking `latency` with `outcome`, then idle until `gap` has passed since it
    /// started. Returns whether it was admitted.
    pub fn call(&self, latency: Duration, outcome: Outcome, gap: Duration) -> bool {
        let admitted = match self.breaker.try_acquire() {
            Ok(permit) => {
                self.clock.advance(latency);
                permit.record(outcome);
                true
            }
            Err(_) => false,
        };
        self.clock
            .advance(gap.saturating_sub(if admitted { latency } else { Duration::ZERO }));
        admitted
    }

    /// Healthy traffic: `n` calls of `latency`, one every `gap`.
    pub fn healthy(&self, n: u32, latency: Duration, gap: Duration) {
        for _ in 0..n {
            assert!(self.call(latency, Outcome::Success, gap));
        }
    }

    /// Runs a brownout (every call succeeds at `slow`, one call every `gap`) until the breaker
    /// opens; how many calls it took, `None` if it did not open within `limit`.
    pub fn brownout_for(&self, slow: Duration, gap: Duration, limit: Duration) -> Option<u32> {
        let start = self.clock.elapsed();
        let mut calls = 0;
        while self.clock.elapsed() - start < limit {
            self.call(slow, Outcome::Success, gap.max(slow));
            calls += 1;
            if self.breaker.state() == State::Open {
                return Some(calls);
            }
        }
        None
    }

    /// Waits out the break, then sends probes at `probe` until the breaker leaves half-open (at
    /// most 10); the state it ends in.
    pub fn probes_until_decided(&self, probe: Duration) -> State {
        self.clock.elapse_break(&self.breaker);
        for _ in 0..10 {
            self.call(
                probe,
                Outcome::Success,
                probe.max(Duration::from_millis(100)),
            );
            if self.breaker.state() != State::HalfOpen {
                break;
            }
        }
        self.breaker.state()
    }

    /// The reason of the opening after the last `SlowCallRatio` one, if any: what the first
    /// probe after a brownout's trip did.
    pub fn after_last_slow_trip(&self) -> Option<OpenReason> {
        let reasons = self.open_reasons();
        let at = reasons
            .iter()
            .rposition(|r| *r == OpenReason::SlowCallRatio)?;
        reasons.get(at + 1).copied()
    }

    pub fn open_reasons(&self) -> Vec<OpenReason> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e.transition {
                Transition::Opened { reason, .. } => Some(reason),
                _ => None,
            })
            .collect()
    }
}

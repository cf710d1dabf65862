//! The `metrics` feature's handles for one breaker: a call observer for the calls, and the
//! transition counters and gauges the lock's hooks update (names in [`crate::metrics`]).
//!
//! # Orderings
//! `due` is read and written only under the breaker's lock (by [`Metrics::refresh_due`]), so
//! `Relaxed` suffices: the lock orders it.

use ::metrics::{Counter, Gauge, Histogram, Unit};

use crate::error::RejectReason;
use crate::loom::{AtomicU64, Ordering};
use crate::metrics as names;
use crate::observer::{Call, CallKind, CallObserver};
use crate::snapshot::Snapshot;
use crate::{BreakerId, State};

const STATES: [State; 6] = State::ALL;
const REASONS: [RejectReason; 5] = [
    RejectReason::Open,
    RejectReason::HalfOpenFull,
    RejectReason::Ramp,
    RejectReason::Isolated,
    RejectReason::Throttled,
];
const OUTCOMES: [&str; 4] = ["success", "failure", "ignored", "open_for"];

/// Every transition a breaker can make, as (from, to) of its events.
const TRANSITIONS: [(State, State); 5] = [
    (State::Closed, State::Open),
    (State::Open, State::HalfOpen),
    (State::HalfOpen, State::Open),
    (State::HalfOpen, State::Closed),
    (State::Recovering, State::Open),
];

/// How often the rate and latency gauges are refreshed between transitions, on the breaker's
/// clock.
const REFRESH: u64 = 1_000_000_000;

/// Handles registered once per breaker, so recording is an increment: no lookup, no
/// allocation.
pub(crate) struct Metrics {
    calls: [Counter; 4],
    slow: Counter,
    rejections: [Counter; 5],
    states: [Gauge; 6],
    transitions: [Counter; 5],
    failure_rate: Gauge,
    slow_rate: Gauge,
    normal_latency: Gauge,
    duration: Histogram,
    /// When the rate gauges are next refreshed (nanoseconds on the breaker's clock).
    due: AtomicU64,
}

impl Metrics {
    pub(crate) fn new(id: &BreakerId, state: State) -> Metrics {
        describe();
        let breaker = id.to_string();
        let gauge = |name: &'static str| ::metrics::gauge!(name, "breaker" => breaker.clone());
        let metrics = Metrics {
            calls: OUTCOMES.map(|outcome| {
                ::metrics::counter!(names::CALLS, "breaker" => breaker.clone(), "outcome" => outcome)
            }),
            slow: ::metrics::counter!(names::SLOW_CALLS, "breaker" => breaker.clone()),
            rejections: REASONS.map(|reason| {
                ::metrics::counter!(names::REJECTIONS, "breaker" => breaker.clone(), "reason" => reason.as_str())
            }),
            states: STATES.map(|state| {
                ::metrics::gauge!(names::STATE, "breaker" => breaker.clone(), "state" => state.as_str())
            }),
            transitions: TRANSITIONS.map(|(from, to)| {
                ::metrics::counter!(
                    names::TRANSITIONS,
                    "breaker" => breaker.clone(),
                    "from" => from.as_str(),
                    "to" => to.as_str()
                )
            }),
            failure_rate: gauge(names::FAILURE_RATE),
            slow_rate: gauge(names::SLOW_RATE),
            normal_latency: gauge(names::NORMAL_LATENCY),
            duration: ::metrics::histogram!(names::CALL_DURATION, "breaker" => breaker.clone()),
            due: AtomicU64::new(0),
        };
        metrics.set_state(state);
        for gauge in [
            &metrics.failure_rate,
            &metrics.slow_rate,
            &metrics.normal_latency,
        ] {
            gauge.set(f64::NAN);
        }
        metrics
    }

    /// Moves the state gauge: exactly one state reads 1.
    pub(crate) fn set_state(&self, state: State) {
        for (gauge, s) in self.states.iter().zip(STATES) {
            gauge.set(if s == state { 1.0 } else { 0.0 });
        }
    }

    pub(crate) fn transition(&self, from: State, to: State) {
        if let Some(index) = TRANSITIONS.iter().position(|t| *t == (from, to)) {
            self.transitions[index].increment(1);
        }
    }

    /// Whether the rate gauges are due at `now` (and if so, not again for [`REFRESH`]).
    /// Under the lock.
    pub(crate) fn refresh_due(&self, now: u64) -> bool {
        if now < self.due.load(Ordering::Relaxed) {
            return false;
        }
        self.due
            .store(now.saturating_add(REFRESH), Ordering::Relaxed);
        true
    }

    /// Sets the state, rate and latency gauges from a snapshot.
    pub(crate) fn set_gauges(&self, snapshot: &Snapshot) {
        self.set_state(snapshot.state);
        self.failure_rate
            .set(snapshot.failure_rate.unwrap_or(f64::NAN));
        self.slow_rate.set(snapshot.slow_rate.unwrap_or(f64::NAN));
        self.normal_latency.set(
            snapshot
                .normal_latency
                .map_or(f64::NAN, |latency| latency.as_secs_f64()),
        );
    }
}

impl CallObserver for Metrics {
    fn on_call(&self, call: &Call<'_>) {
        match call.kind {
            CallKind::Success => self.calls[0].increment(1),
            CallKind::Failure => self.calls[1].increment(1),
            CallKind::Ignored => self.calls[2].increment(1),
            CallKind::OpenFor(_) => self.calls[3].increment(1),
            CallKind::Refused(reason) => {
                if let Some(index) = REASONS.iter().position(|r| *r == reason) {
                    self.rejections[index].increment(1);
                }
            }
        }
        if call.slow {
            self.slow.increment(1);
        }
        if let Some(duration) = call.duration {
            self.duration.record(duration.as_secs_f64());
        }
    }
}

/// Registers every series' description with the recorder installed now (cheap, and repeated
/// per breaker so that a recorder installed after the first breaker still gets them).
fn describe() {
    for (name, kind, help) in names::ALL {
        match kind {
            "counter" => ::metrics::describe_counter!(name, Unit::Count, help),
            "histogram" => ::metrics::describe_histogram!(name, Unit::Seconds, help),
            _ if name == names::NORMAL_LATENCY => {
                ::metrics::describe_gauge!(name, Unit::Seconds, help)
            }
            _ => ::metrics::describe_gauge!(name, help),
        }
    }
}

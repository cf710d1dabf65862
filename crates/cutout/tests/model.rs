//! A sequential reference model of the breaker, derived from DESIGN §2 (not from `machine.rs`),
//! and properties that run random operation sequences against a real [`Breaker`] and the model,
//! comparing every admission decision, `state()`, the snapshot and the events after every step.
//!
//! The model keeps the whole history of counted outcomes as a list and recomputes windows from
//! it, counts thresholds with integer percentages instead of floating ratios, and tracks the
//! generation rule as an "era" bumped on every change of phase. Where DESIGN §2 is silent the
//! model's choice is written next to the code (look for "Spec silent").
//!
//! Not modelled yet: the adaptive baselines (relative failures, latency multiple) and the
//! recovery ramp, which the breaker does not have yet.
//!
//! `cargo test -p cutout --test model` (debug) runs 10,000 cases across the properties below.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, Error, HalfOpenRule, Jitter, OpenReason, Outcome, OwnedPermit, RejectReason, Rejected,
    Settings, State, Transition, TripWindow,
};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

const MS: u64 = 1_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------------------------------------
// Settings, as plain numbers the model can compute with.

#[derive(Debug, Clone, Copy)]
enum WindowSpec {
    /// The last n counted calls.
    Count(u32),
    /// The last span (milliseconds), in buckets.
    Time(u64),
}

#[derive(Debug, Clone)]
struct Spec {
    consecutive: Option<u32>,
    /// The failure ratio as a whole percentage.
    failure_pct: Option<u64>,
    minimum_calls: u32,
    window: WindowSpec,
    slow_ms: Option<u64>,
    slow_pct: u64,
    break_ms: u64,
    max_break_ms: u64,
    jitter: Jitter,
    probes: u32,
    probe_successes: u32,
    rule: HalfOpenRule,
    max_wait_ms: Option<u64>,
    shadow: bool,
    enabled: bool,
}

impl Spec {
    fn settings(&self) -> Settings {
        Settings::builder()
            .consecutive_failures(self.consecutive)
            .failure_ratio(self.failure_pct.map(|p| p as f64 / 100.0))
            .minimum_calls(self.minimum_calls)
            .window(match self.window {
                WindowSpec::Count(n) => TripWindow::Count(n),
                WindowSpec::Time(span) => TripWindow::Time(ms(span)),
            })
            .slow_call_threshold(self.slow_ms.map(ms))
            .slow_call_ratio(self.slow_pct as f64 / 100.0)
            .break_duration(ms(self.break_ms))
            .max_break_duration(ms(self.max_break_ms))
            .jitter(self.jitter)
            .half_open_probes(self.probes)
            .probe_successes(self.probe_successes)
            .half_open_rule(self.rule)
            .max_wait_in_half_open(self.max_wait_ms.map(ms))
            .shadow(self.shadow)
            .enabled(self.enabled)
            // The model covers the absolute rules; the relative ones (armed after 20 samples or
            // 100 outcomes, judged against measured baselines) are held by tests/adaptive.rs.
            .adaptive(false)
            .build()
            .expect("generated settings are valid")
    }

    /// DESIGN §2: `minimum_calls`, "for a count window capped at its size".
    fn minimum(&self) -> u64 {
        match self.window {
            WindowSpec::Count(n) => u64::from(self.minimum_calls.min(n)),
            WindowSpec::Time(_) => u64::from(self.minimum_calls),
        }
    }

    /// DESIGN §2: the break doubles on each consecutive open, up to the maximum.
    fn computed_break(&self, opens: u32) -> u64 {
        let mut d = self.break_ms * MS;
        for _ in 1..opens {
            d = d.saturating_mul(2);
            if d >= self.max_break_ms * MS {
                break;
            }
        }
        d.min(self.max_break_ms * MS)
    }
}

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Closed,
    Open { until: u64 },
    HalfOpen { since: u64 },
    Isolated,
    Disabled,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    at: u64,
    failure: bool,
    slow: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Tally {
    calls: u64,
    failures: u64,
    slow: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Normal,
    Probe,
    /// Admitted without counting (disabled, or a shadow breaker that would have refused).
    Free,
}

#[derive(Debug, Clone, Copy)]
struct Ticket {
    era: u64,
    role: Role,
    start: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Admit(Role),
    Refuse(RejectReason, Option<Duration>),
}

#[derive(Debug)]
struct Model {
    spec: Spec,
    now: u64,
    phase: Phase,
    /// Bumped on every change of phase: a ticket from another era decides nothing.
    era: u64,
    /// Every counted outcome since the window was last emptied.
    history: Vec<Mark>,
    consecutive: u32,
    opens: u32,
    opened_at: Option<u64>,
    served: u64,
    in_flight: u32,
    /// Probe slots taken in this half-open (the Rates rule bounds the total).
    taken: u32,
    successes: u32,
    probes: Tally,
    showing_probes: bool,
    shadow_refusals: u64,
    events: Vec<Transition>,
    /// A jittered break was drawn by the breaker: the computed break, awaiting adoption.
    jitter_pending: Option<u64>,
}

impl Model {
    fn new(spec: Spec) -> Model {
        let phase = if spec.enabled {
            Phase::Closed
        } else {
            Phase::Disabled
        };
        Model {
            spec,
            now: 0,
            phase,
            era: 0,
            history: Vec::new(),
            consecutive: 0,
            opens: 0,
            opened_at: None,
            served: 0,
            in_flight: 0,
            taken: 0,
            successes: 0,
            probes: Tally::default(),
            showing_probes: false,
            shadow_refusals: 0,
            events: Vec::new(),
            jitter_pending: None,
        }
    }

    /// The trip window's counts at `now`.
    fn window(&self) -> Tally {
        let count = |marks: &mut dyn Iterator<Item = &Mark>| {
            marks.fold(Tally::default(), |t, m| Tally {
                calls: t.calls + 1,
                failures: t.failures + u64::from(m.failure),
                slow: t.slow + u64::from(m.slow),
            })
        };
        match self.spec.window {
            WindowSpec::Count(n) => count(&mut self.history.iter().rev().take(n as usize)),
            WindowSpec::Time(span_ms) => {
                // A time window is kept in buckets (DESIGN §2); the breaker documents one bucket
                // per second of the span, at least 10 and at most 60, each dropping out whole.
                let buckets = (span_ms / 1000).clamp(10, 60);
                let len = (span_ms * MS).div_ceil(buckets).max(1);
                let current = self.now / len;
                count(
                    &mut self
                        .history
                        .iter()
                        .filter(|m| m.at / len + buckets > current),
                )
            }
        }
    }

    fn state(&self) -> State {
        match self.phase {
            Phase::Closed => State::Closed,
            // DESIGN §2: state() reports HalfOpen for an Open breaker whose break has elapsed.
            Phase::Open { until } if self.now >= until => State::HalfOpen,
            Phase::Open { .. } => State::Open,
            Phase::HalfOpen { .. } => State::HalfOpen,
            Phase::Isolated => State::Isolated,
            Phase::Disabled => State::Disabled,
        }
    }

    /// A new era: outstanding tickets and probe bookkeeping belong to the old one.
    fn new_era(&mut self) {
        self.era += 1;
        self.in_flight = 0;
        self.taken = 0;
        self.successes = 0;
        self.probes = Tally::default();
    }

    fn refuse(&mut self, reason: RejectReason, retry_after: Option<Duration>) -> Answer {
        if self.spec.shadow {
            // Shadow: evaluates and changes state but never refuses.
            self.shadow_refusals += 1;
            return Answer::Admit(Role::Free);
        }
        Answer::Refuse(reason, retry_after)
    }

    fn slot_free(&self) -> bool {
        match self.spec.rule {
            HalfOpenRule::Consecutive => self.in_flight < self.spec.probes,
            HalfOpenRule::Rates => self.taken < self.spec.probes,
        }
    }

    fn admit(&mut self) -> Answer {
        if let Phase::Open { until } = self.phase
            && self.now >= until
        {
            // Entered lazily: the first call after the (inclusive) break becomes a probe.
            self.phase = Phase::HalfOpen { since: self.now };
            self.new_era();
            self.showing_probes = true;
            self.events.push(Transition::HalfOpened);
        }
        match self.phase {
            Phase::Closed => Answer::Admit(Role::Normal),
            Phase::Disabled => Answer::Admit(Role::Free),
            Phase::Isolated => self.refuse(RejectReason::Isolated, None),
            Phase::Open { until } => self.refuse(
                RejectReason::Open,
                Some(Duration::from_nanos(until - self.now)),
            ),
            Phase::HalfOpen { since } => {
                // Spec: "once exceeded, the next call re-opens it". The breaker treats reaching
                // the limit as exceeding it (like the inclusive break end); the model agrees.
                let waited_out = self
                    .spec
                    .max_wait_ms
                    .is_some_and(|max| self.now - since >= max * MS);
                if waited_out {
                    self.open(State::HalfOpen, OpenReason::HalfOpenTimeout);
                    // Spec silent on the refusal's retry-after: the whole new break is left.
                    self.refuse(RejectReason::Open, Some(Duration::from_nanos(self.served)))
                } else if self.slot_free() {
                    self.in_flight += 1;
                    self.taken += 1;
                    Answer::Admit(Role::Probe)
                } else {
                    self.refuse(RejectReason::HalfOpenFull, None)
                }
            }
        }
    }

    fn open(&mut self, from: State, reason: OpenReason) {
        self.opens += 1;
        let computed = self.spec.computed_break(self.opens);
        if self.spec.jitter != Jitter::None {
            // The breaker draws the jitter; the harness checks the draw's bounds and adopts it.
            self.jitter_pending = Some(computed);
        }
        self.served = computed;
        self.opened_at = Some(self.now);
        self.phase = Phase::Open {
            until: self.now + computed,
        };
        // While open the snapshot shows what tripped it: the window from closed, the probes'
        // counts from half-open.
        let probes = self.probes;
        self.new_era();
        if from == State::HalfOpen {
            self.probes = probes;
        } else {
            self.showing_probes = false;
        }
        self.events.push(Transition::Opened {
            from,
            reason,
            break_for: Duration::from_nanos(computed),
        });
    }

    /// The breaker drew `served` for the break just computed: adopt it.
    fn adopt_jitter(&mut self, served: u64) {
        self.served = served;
        self.phase = Phase::Open {
            until: self.opened_at.expect("just opened") + served,
        };
        for event in &mut self.events {
            if let Transition::Opened { break_for, .. } = event {
                *break_for = Duration::from_nanos(served);
            }
        }
    }

    fn close(&mut self) {
        self.phase = Phase::Closed;
        self.forget();
        self.events.push(Transition::Closed {
            from: State::HalfOpen,
        });
    }

    /// Closed afresh: empty window, no break growth (DESIGN §2, reset and full close).
    fn forget(&mut self) {
        self.new_era();
        self.history.clear();
        self.consecutive = 0;
        self.opens = 0;
        self.opened_at = None;
        self.showing_probes = false;
    }

    fn trip_reason(&self) -> Option<OpenReason> {
        // Spec silent on which reason is reported when several trip at once: consecutive
        // failures first, then the failure ratio, then the slow-call ratio.
        if let Some(limit) = self.spec.consecutive
            && self.consecutive >= limit
        {
            return Some(OpenReason::ConsecutiveFailures(self.consecutive));
        }
        let w = self.window();
        if w.calls < self.spec.minimum() {
            return None;
        }
        if let Some(pct) = self.spec.failure_pct
            && w.failures * 100 >= pct * w.calls
        {
            return Some(OpenReason::FailureRatio);
        }
        if w.slow > 0 && w.slow * 100 >= self.spec.slow_pct * w.calls {
            return Some(OpenReason::SlowCallRatio);
        }
        None
    }

    fn give_back(&mut self) {
        self.in_flight -= 1;
        self.taken -= 1;
    }

    fn record(&mut self, ticket: Ticket, outcome: Outcome) {
        if ticket.role == Role::Free || ticket.era != self.era {
            return;
        }
        if outcome == Outcome::Ignored {
            // Touches nothing; in half-open gives the slot back.
            if ticket.role == Role::Probe {
                self.give_back();
            }
            return;
        }
        let failure = outcome == Outcome::Failure;
        // "Above" the threshold: strictly longer; slow regardless of success.
        let slow = self
            .spec
            .slow_ms
            .is_some_and(|t| self.now - ticket.start > t * MS);
        if failure {
            self.consecutive += 1;
        } else {
            self.consecutive = 0;
        }
        match (self.phase, ticket.role) {
            (Phase::Closed, Role::Normal) => {
                self.history.push(Mark {
                    at: self.now,
                    failure,
                    slow,
                });
                if let Some(reason) = self.trip_reason() {
                    self.open(State::Closed, reason);
                }
            }
            (Phase::HalfOpen { .. }, Role::Probe) => {
                self.in_flight -= 1;
                self.probes.calls += 1;
                self.probes.failures += u64::from(failure);
                self.probes.slow += u64::from(slow);
                self.judge_probe(failure, slow);
            }
            other => panic!("a ticket of the current era cannot meet {other:?}"),
        }
    }

    fn judge_probe(&mut self, failure: bool, slow: bool) {
        match self.spec.rule {
            HalfOpenRule::Consecutive => {
                if failure {
                    self.open(State::HalfOpen, OpenReason::ProbeFailed);
                } else if slow {
                    self.open(State::HalfOpen, OpenReason::ProbeSlow);
                } else {
                    self.successes += 1;
                    if self.successes >= self.spec.probe_successes {
                        self.close();
                    }
                }
            }
            HalfOpenRule::Rates => {
                let p = self.probes;
                if p.calls < u64::from(self.spec.probes) {
                    return;
                }
                // Spec: judge the probes' rates "against the trip thresholds". Spec silent when
                // no failure ratio is configured: 50 % (resilience4j's default), as the breaker.
                let pct = self.spec.failure_pct.unwrap_or(50);
                let failing = p.failures * 100 >= pct * p.calls;
                let slowing = p.slow > 0 && p.slow * 100 >= self.spec.slow_pct * p.calls;
                if failing || slowing {
                    self.open(State::HalfOpen, OpenReason::ProbeRates);
                } else {
                    self.close();
                }
            }
        }
    }

    fn drop_ticket(&mut self, ticket: Ticket) {
        if ticket.role == Role::Probe && ticket.era == self.era {
            self.give_back();
        }
    }

    fn isolate(&mut self) {
        self.phase = Phase::Isolated;
        // Spec silent: isolating an open breaker keeps when it opened; otherwise it opens now.
        self.opened_at.get_or_insert(self.now);
        self.new_era();
    }

    fn disable(&mut self) {
        // Spec silent on the counts while disabled: nothing is recorded, nothing is erased.
        self.phase = Phase::Disabled;
        self.opened_at = None;
        self.new_era();
    }

    fn reset(&mut self) {
        self.phase = if self.spec.enabled {
            Phase::Closed
        } else {
            Phase::Disabled
        };
        self.forget();
    }
}

// ---------------------------------------------------------------------------------------------
// Operations and the harness.

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Acquire,
    /// Records the outcome of the held permit at this index (modulo the number held).
    Record(usize, Outcome),
    /// Drops a held permit without recording.
    Drop(usize),
    /// Acquires, lets `latency` ms pass, records.
    Call(u64, Outcome),
    /// The same through `Breaker::call_with`, its classifier answering `outcome` (the path a
    /// healthy call takes without a permit); with `Some(inner)`, another call recording
    /// `inner` starts and ends while this one runs (after its latency), so the word this call
    /// was admitted on may have changed when it ends.
    Through(u64, Outcome, Option<Outcome>),
    Isolate,
    Disable,
    Reset,
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => Just(Outcome::Success),
        4 => Just(Outcome::Failure),
        1 => Just(Outcome::Ignored),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let advance = prop::sample::select(vec![
        0, 1, 50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 40_000,
    ]);
    let latency = prop::sample::select(vec![0, 50, 100, 101, 150, 400]);
    prop_oneof![
        4 => advance.prop_map(Op::Advance),
        3 => Just(Op::Acquire),
        3 => (any::<usize>(), outcome()).prop_map(|(i, o)| Op::Record(i, o)),
        1 => any::<usize>().prop_map(Op::Drop),
        5 => (latency.clone(), outcome()).prop_map(|(l, o)| Op::Call(l, o)),
        4 => (latency, outcome(), prop::option::of(outcome()))
            .prop_map(|(l, o, inner)| Op::Through(l, o, inner)),
        1 => Just(Op::Isolate),
        1 => Just(Op::Disable),
        2 => Just(Op::Reset),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..80)
}

struct Harness {
    model: Model,
    breaker: Breaker,
    clock: ManualClock,
    seen: Arc<Mutex<Vec<Transition>>>,
    held: Vec<(OwnedPermit, Ticket)>,
}

/// At most this many unrecorded permits are held at once.
const MAX_HELD: usize = 6;

impl Harness {
    fn new(spec: Spec, seed: u64) -> Harness {
        let clock = ManualClock::new();
        let breaker = Breaker::builder("model")
            .settings(spec.settings())
            .clock(clock.clone())
            .seed(seed)
            .build();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
        Harness {
            model: Model::new(spec),
            breaker,
            clock,
            seen,
            held: Vec::new(),
        }
    }

    fn advance(&mut self, by_ms: u64) {
        self.clock.advance(ms(by_ms));
        self.model.now += by_ms * MS;
    }

    /// Acquires on both; returns the model's answer after comparing it with the breaker's.
    fn acquire(&mut self) -> Result<Option<(OwnedPermit, Ticket)>, TestCaseError> {
        match self.breaker.try_acquire_owned() {
            Ok(permit) => {
                let ticket = self.judge(Ok(Some(permit.is_probe())))?;
                Ok(ticket.map(|ticket| (permit, ticket)))
            }
            Err(refused) => self.judge(Err(refused)).map(|_| None),
        }
    }

    /// Compares the breaker's admission (whether the call is a probe, when the path tells) or
    /// its refusal with the model's answer; the model's ticket when both admitted.
    fn judge(
        &mut self,
        real: Result<Option<bool>, Rejected>,
    ) -> Result<Option<Ticket>, TestCaseError> {
        let mut answer = self.model.admit();
        self.adopt_jitter(&mut answer)?;
        match (real, answer) {
            (Ok(probe), Answer::Admit(role)) => {
                if let Some(probe) = probe {
                    prop_assert_eq!(probe, role == Role::Probe, "probe role");
                }
                Ok(Some(Ticket {
                    era: self.model.era,
                    role,
                    start: self.model.now,
                }))
            }
            (Err(refused), Answer::Refuse(reason, retry_after)) => {
                prop_assert_eq!(refused.reason(), reason, "refusal reason");
                prop_assert_eq!(refused.retry_after(), retry_after, "retry-after");
                prop_assert_eq!(refused.breaker().as_str(), "model");
                Ok(None)
            }
            (real, answer) => Err(TestCaseError::fail(format!(
                "admission: breaker {:?}, model {answer:?}",
                real.map_err(|refused| refused.reason())
            ))),
        }
    }

    /// Runs one call through `Breaker::call_with`: inside the call, the model admits it too,
    /// the clock moves `latency` ms and the `inner` call runs; after it, the model records
    /// `outcome`.
    fn through(
        &mut self,
        latency: u64,
        outcome: Outcome,
        inner: Option<Outcome>,
    ) -> Result<(), TestCaseError> {
        let breaker = self.breaker.clone();
        let mut inside = None;
        let classify = |_: &Result<(), ()>| outcome;
        let result = breaker.call_with(&classify, || {
            inside = Some(self.inside_call(latency, inner));
            Ok(())
        });
        match (result, inside) {
            (Ok(()), Some(ticket)) => {
                self.model.record(ticket?, outcome);
                self.adopt_jitter(&mut Answer::Admit(Role::Free))
            }
            (Err(Error::Rejected(refused)), None) => self.judge(Err(refused)).map(drop),
            (result, _) => Err(TestCaseError::fail(format!(
                "call_with answered {result:?} and ran the call only if the first is Ok"
            ))),
        }
    }

    /// The model's side of a call that the breaker admitted and is running.
    fn inside_call(
        &mut self,
        latency: u64,
        inner: Option<Outcome>,
    ) -> Result<Ticket, TestCaseError> {
        let ticket = self
            .judge(Ok(None))?
            .ok_or_else(|| TestCaseError::fail("the model refused a call the breaker ran"))?;
        self.compare("call admitted")?;
        self.advance(latency);
        if let Some(inner) = inner {
            self.step(&Op::Call(0, inner))?;
        }
        Ok(ticket)
    }

    /// If the model opened with a jittered break, checks the breaker's draw and adopts it.
    fn adopt_jitter(&mut self, answer: &mut Answer) -> Result<(), TestCaseError> {
        let Some(computed) = self.model.jitter_pending.take() else {
            return Ok(());
        };
        let drawn = self.breaker.snapshot().current_break;
        let served = u64::try_from(drawn.expect("open").as_nanos()).unwrap();
        let low = match self.model.spec.jitter {
            Jitter::Equal => computed / 2,
            _ => 0,
        };
        prop_assert!(
            (low..=computed).contains(&served),
            "jittered break {served} outside [{low}, {computed}]"
        );
        self.model.adopt_jitter(served);
        if let Answer::Refuse(RejectReason::Open, retry) = answer {
            // The refusal of the call that timed half-open out: the whole new break is left.
            *retry = Some(Duration::from_nanos(served));
        }
        Ok(())
    }

    fn finish(
        &mut self,
        permit: OwnedPermit,
        ticket: Ticket,
        outcome: Outcome,
    ) -> Result<(), TestCaseError> {
        permit.record(outcome);
        self.model.record(ticket, outcome);
        // Recording refuses nothing, but it can open with a jittered break.
        self.adopt_jitter(&mut Answer::Admit(Role::Free))
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Advance(by) => self.advance(by),
            Op::Acquire => {
                if let Some(held) = self.acquire()? {
                    self.held.push(held);
                    if self.held.len() > MAX_HELD {
                        let (permit, ticket) = self.held.remove(0);
                        self.finish(permit, ticket, Outcome::Success)?;
                    }
                }
            }
            Op::Record(i, outcome) if !self.held.is_empty() => {
                let (permit, ticket) = self.held.remove(i % self.held.len());
                self.finish(permit, ticket, outcome)?;
            }
            Op::Drop(i) if !self.held.is_empty() => {
                let (permit, ticket) = self.held.remove(i % self.held.len());
                drop(permit);
                self.model.drop_ticket(ticket);
            }
            Op::Record(..) | Op::Drop(_) => {}
            Op::Call(latency, outcome) => {
                if let Some((permit, ticket)) = self.acquire()? {
                    self.compare("call admitted")?;
                    self.advance(latency);
                    self.finish(permit, ticket, outcome)?;
                }
            }
            Op::Through(latency, outcome, inner) => self.through(latency, outcome, inner)?,
            Op::Isolate => {
                self.breaker.isolate();
                self.model.isolate();
            }
            Op::Disable => {
                self.breaker.disable();
                self.model.disable();
            }
            Op::Reset => {
                self.breaker.reset();
                self.model.reset();
            }
        }
        self.compare("after step")
    }

    fn compare(&mut self, when: &str) -> Result<(), TestCaseError> {
        let seen: Vec<Transition> = std::mem::take(&mut *self.seen.lock().unwrap());
        let expected = std::mem::take(&mut self.model.events);
        prop_assert_eq!(seen, expected, "events ({})", when);
        let model = &self.model;
        prop_assert_eq!(self.breaker.state(), model.state(), "state() ({})", when);
        let s = self.breaker.snapshot();
        // Spec: "HalfOpen starts fresh counts". A snapshot that reports half-open because the
        // break has elapsed (before a call enters it lazily) shows no probe yet.
        let lazily_half_open =
            matches!(model.phase, Phase::Open { .. }) && model.state() == State::HalfOpen;
        let shown = if lazily_half_open {
            Default::default()
        } else if model.showing_probes {
            model.probes
        } else {
            model.window()
        };
        prop_assert_eq!(s.state, model.state(), "snapshot.state ({})", when);
        prop_assert_eq!(
            (s.calls, s.failures, s.slow),
            (shown.calls, shown.failures, shown.slow),
            "snapshot calls/failures/slow ({})",
            when
        );
        prop_assert_eq!(
            s.consecutive_failures,
            model.consecutive,
            "snapshot.consecutive_failures ({})",
            when
        );
        let opened_at = model.opened_at.map(Duration::from_nanos);
        prop_assert_eq!(s.opened_at, opened_at, "snapshot.opened_at ({})", when);
        prop_assert_eq!(
            self.breaker.opened_at(),
            opened_at,
            "opened_at() ({})",
            when
        );
        let in_break = matches!(model.phase, Phase::Open { .. } | Phase::HalfOpen { .. });
        prop_assert_eq!(
            s.current_break,
            in_break.then(|| Duration::from_nanos(model.served)),
            "snapshot.current_break ({})",
            when
        );
        prop_assert_eq!(
            s.consecutive_opens,
            model.opens,
            "snapshot.consecutive_opens ({})",
            when
        );
        prop_assert_eq!(
            s.probes_in_flight,
            model.in_flight,
            "snapshot.probes_in_flight ({})",
            when
        );
        prop_assert_eq!(
            s.shadow_refusals,
            model.shadow_refusals,
            "snapshot.shadow_refusals ({})",
            when
        );
        let remaining = match model.phase {
            Phase::Open { until } => Some(Duration::from_nanos(until.saturating_sub(model.now))),
            _ => None,
        };
        prop_assert_eq!(
            self.breaker.break_remaining(),
            remaining,
            "break_remaining() ({})",
            when
        );
        if model.phase == Phase::Closed {
            // DESIGN §2: the failure rate is None until the window holds minimum_calls.
            let w = model.window();
            let rate =
                (w.calls >= model.spec.minimum()).then(|| w.failures as f64 / w.calls as f64);
            prop_assert_eq!(s.failure_rate, rate, "snapshot.failure_rate ({})", when);
        }
        Ok(())
    }
}

fn run(spec: Spec, seed: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut harness = Harness::new(spec, seed);
    harness.compare("new")?;
    for (i, op) in ops.iter().enumerate() {
        harness
            .step(op)
            .map_err(|e| TestCaseError::fail(format!("step {i} {op:?}: {e}")))?;
    }
    // Drop what is still held: every probe slot must come back.
    for (permit, ticket) in std::mem::take(&mut harness.held) {
        drop(permit);
        harness.model.drop_ticket(ticket);
    }
    harness.compare("after dropping every held permit")?;
    prop_assert_eq!(harness.breaker.snapshot().probes_in_flight, 0);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Settings strategies.

#[derive(Debug, Clone, Copy)]
struct Shape {
    time_window: bool,
    rule: HalfOpenRule,
    jitter: bool,
    modes: bool,
}

fn spec(shape: Shape) -> impl Strategy<Value = Spec> {
    let window = if shape.time_window {
        prop::sample::select(vec![2_000u64, 5_000, 10_000, 30_000])
            .prop_map(WindowSpec::Time)
            .boxed()
    } else {
        (1u32..=10).prop_map(WindowSpec::Count).boxed()
    };
    let jitter = if shape.jitter {
        prop::sample::select(vec![Jitter::Equal, Jitter::Full]).boxed()
    } else {
        Just(Jitter::None).boxed()
    };
    let modes = if shape.modes {
        // (shadow, enabled): shadow on, or configured disabled, or both.
        prop::sample::select(vec![(true, true), (false, false), (true, false)]).boxed()
    } else {
        Just((false, true)).boxed()
    };
    let trips = (
        prop::option::weighted(0.7, 1u32..=5),
        prop::option::weighted(0.6, prop::sample::select(vec![25u64, 50, 60, 100])),
        1u32..=8,
        window,
        prop::option::weighted(0.5, prop::sample::select(vec![100u64, 300])),
        prop::sample::select(vec![25u64, 50, 100]),
    );
    let breaks = (
        prop::sample::select(vec![1_000u64, 5_000, 10_000]),
        1u64..=8,
        jitter,
        1u32..=3,
        1u32..=3,
        prop::option::weighted(0.6, prop::sample::select(vec![2_000u64, 10_000, 30_000])),
        modes,
    );
    (trips, breaks).prop_map(move |(trips, breaks)| {
        let (consecutive, failure_pct, minimum_calls, window, slow_ms, slow_pct) = trips;
        let (break_ms, growth, jitter, probes, probe_successes, max_wait_ms, (shadow, enabled)) =
            breaks;
        Spec {
            consecutive,
            failure_pct,
            minimum_calls,
            window,
            slow_ms,
            slow_pct,
            break_ms,
            max_break_ms: break_ms * growth,
            jitter,
            probes,
            probe_successes,
            rule: shape.rule,
            max_wait_ms,
            shadow,
            enabled,
        }
    })
}

const fn shape(time_window: bool, rule: HalfOpenRule, jitter: bool, modes: bool) -> Shape {
    Shape {
        time_window,
        rule,
        jitter,
        modes,
    }
}

const CONSECUTIVE: HalfOpenRule = HalfOpenRule::Consecutive;
const RATES: HalfOpenRule = HalfOpenRule::Rates;

/// `cases` cases; failures are saved in `crates/cutout/proptest-regressions/model.txt` (cargo
/// runs integration tests from the package root) and replayed first on every run.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/model.txt",
        ))),
        ..ProptestConfig::default()
    }
}

// 3,000 + 2,000 + 2,000 + 1,000 + 1,000 + 1,000 = 10,000 cases.

proptest! {
    #![proptest_config(config(3_000))]
    #[test]
    fn count_window_consecutive_probes_agree_with_the_model(
        spec in spec(shape(false, CONSECUTIVE, false, false)), seed in any::<u64>(), ops in ops()
    ) {
        run(spec, seed, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(2_000))]
    #[test]
    fn time_window_consecutive_probes_agree_with_the_model(
        spec in spec(shape(true, CONSECUTIVE, false, false)), seed in any::<u64>(), ops in ops()
    ) {
        run(spec, seed, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(2_000))]
    #[test]
    fn rates_rule_agrees_with_the_model(
        time_window in any::<bool>(),
        spec_count in spec(shape(false, RATES, false, false)),
        spec_time in spec(shape(true, RATES, false, false)),
        seed in any::<u64>(),
        ops in ops()
    ) {
        run(if time_window { spec_time } else { spec_count }, seed, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(1_000))]
    #[test]
    fn shadow_and_disabled_breakers_agree_with_the_model(
        spec in spec(shape(false, CONSECUTIVE, false, true)), seed in any::<u64>(), ops in ops()
    ) {
        run(spec, seed, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(1_000))]
    #[test]
    fn shadow_and_disabled_with_rates_and_time_agree_with_the_model(
        spec in spec(shape(true, RATES, false, true)), seed in any::<u64>(), ops in ops()
    ) {
        run(spec, seed, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(1_000))]
    #[test]
    fn jittered_breaks_stay_in_bounds_and_agree_with_the_model(
        time_window in any::<bool>(),
        spec_count in spec(shape(false, CONSECUTIVE, true, false)),
        spec_time in spec(shape(true, CONSECUTIVE, true, false)),
        seed in any::<u64>(),
        ops in ops()
    ) {
        run(if time_window { spec_time } else { spec_count }, seed, &ops)?;
    }
}

// ---------------------------------------------------------------------------------------------

/// DESIGN §2: "While Open, the snapshot still shows the window that tripped it; HalfOpen starts
/// fresh counts (the probes')". Once the break has elapsed, `snapshot().state` says HalfOpen (as
/// `state()` must), so its counts are the probes' — none yet — even before a call enters
/// half-open lazily (a health endpoint must not show "half_open, 3 of 3 failed").
#[test]
fn a_snapshot_reporting_half_open_shows_fresh_probe_counts() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .window(TripWindow::Count(10))
        .minimum_calls(3)
        .jitter(Jitter::None)
        .break_duration(Duration::from_secs(10))
        .build()
        .unwrap();
    let breaker = Breaker::builder("lazy")
        .settings(settings)
        .clock(clock.clone())
        .build();
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    let open = breaker.snapshot();
    assert_eq!((open.state, open.calls, open.failures), (State::Open, 3, 3));

    clock.elapse_break(&breaker);
    let elapsed = breaker.snapshot();
    assert_eq!(elapsed.state, State::HalfOpen);
    assert_eq!(
        (elapsed.calls, elapsed.failures, elapsed.failure_rate),
        (0, 0, None),
        "a half-open snapshot shows the probes' counts, and no probe has run"
    );

    // What the same breaker shows once a call has entered half-open: fresh counts.
    drop(breaker.try_acquire().unwrap());
    let entered = breaker.snapshot();
    assert_eq!(
        (entered.state, entered.calls, entered.failures),
        (State::HalfOpen, 0, 0)
    );
}

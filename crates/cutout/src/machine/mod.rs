//! The breaker's sequential state machine: every decision as a function of `now`.
//!
//! [`Machine`] holds no atomics and reads no clock. The breaker runs it under its lock and
//! publishes its [`Word`] for the hot path; the property tests run a reference model beside it.

pub(crate) mod backoff;
pub(crate) mod baseline;
pub(crate) mod inflight;
pub(crate) mod ramp;
pub(crate) mod sampling;
pub(crate) mod slices;
pub(crate) mod summed;
pub(crate) mod throttle;
pub(crate) mod trip;
pub(crate) mod window;

use std::time::Duration;

use crate::classify::Outcome;
use crate::error::RejectReason;
use crate::event::{BreakEndReason, CloseReason, OpenReason, Transition};
use crate::front::word::{Flags, Word};
use crate::machine::backoff::{computed_break, jittered};
use crate::machine::baseline::{FailureBaseline, LatencyBaseline, ProbeTail};
use crate::machine::inflight::Marks;
use crate::machine::ramp::Ramp;
use crate::machine::sampling::Timed;
use crate::machine::throttle::Throttle;
use crate::machine::trip::{Baselines, Share, ratio_trip};
use crate::machine::window::{Mark, Totals, Window};
use crate::settings::{HalfOpenRule, HalfOpenTimeout, InitialState, Settings, TripWindow};
use crate::snapshot::{ManualAction, Snapshot};
use crate::state::State;

/// How often, at most, the fast path's latency samples are merged into the baseline (and the
/// relative slow threshold recomputed) while the baseline is armed.
const LATENCY_REFRESH: u64 = 1_000_000_000;

/// Asked, with the opening's reason, before a closed breaker opens; `false` keeps it closed
/// (see [`BreakerBuilder::open_gate_for`](crate::BreakerBuilder::open_gate_for)).
#[derive(Clone)]
pub(crate) struct Gate(pub(crate) std::sync::Arc<dyn Fn(OpenReason) -> bool + Send + Sync>);

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

/// What a permit lets its call do with its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A call admitted while closed: its outcome feeds the window.
    Normal,
    /// A half-open probe: its outcome decides, and its slot must come back if it finishes
    /// without a counted outcome.
    Probe,
    /// Admitted by the recovery ramp: a failure re-opens, slowness slows the ramp.
    Ramp,
    /// Admitted without counting: the breaker is disabled, or in shadow mode would have refused.
    Uncounted,
}

/// The machine's answer to a call asking to be admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Admit {
        generation: u32,
        role: Role,
    },
    Refuse {
        reason: RejectReason,
        retry_after: Option<Duration>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Machine {
    /// Shared with the handle, which hands them out by reference.
    settings: std::sync::Arc<Settings>,
    state: State,
    generation: u32,
    window: Window,
    consecutive_failures: u32,
    consecutive_opens: u32,
    opened_at: Option<u64>,
    /// The break being served (after jitter), or the one served last, in nanoseconds (a
    /// `Duration` would take twice the room: see the layout note below).
    break_served: u64,
    until: u64,
    half_open_since: u64,
    probes_in_flight: u32,
    probes_admitted: u32,
    probe_successes: u32,
    probes: Probes,
    showing_probes: bool,
    /// Shadow mode: every would-be refusal is an uncounted admission instead (configured by
    /// `Settings::shadow`, switched live by `Breaker::shadow` and `Breaker::enforce`).
    shadow: bool,
    shadow_refusals: u64,
    /// The gate a trip from closed must pass, if any, and how many trips it kept closed.
    gate: Option<Gate>,
    suppressed_opens: u64,
    /// The time of the last locked operation: successes counted off the lock since then fall
    /// in its bucket (see [`Machine::absorb`]).
    fast_since: u64,
    failure_baseline: Option<FailureBaseline>,
    latency: Option<LatencyBaseline>,
    /// The normal latency as of the last merge of samples.
    /// The normal latency in nanoseconds, `u64::MAX` until measured (an `Option` would take
    /// 8 bytes more: see the layout note below).
    normal_latency: u64,
    /// The probe tail learned from the latency baseline (`machine/baseline/tail.rs`); here,
    /// not in the baseline, so that its 4-byte fields share the machine's padding.
    probe_tail: ProbeTail,
    /// Of the latency baseline's samples, how many are above the slow threshold in force, as
    /// of the last merge (`None` until armed).
    normal_slow: Option<Share>,
    /// When the samples should next be merged.
    latency_due: u64,
    /// Calls in flight: marks of the tracked-started total (adaptive breakers only).
    marks: Option<Marks>,
    /// When calls in flight should next be checked.
    in_flight_due: u64,
    /// Whether the marks must start over (a new closed period began).
    rebase_marks: bool,
    /// The recovery ramp, while recovering.
    ramp: Option<Ramp>,
    /// No call is timed: no slow-call rule, absolute or relative.
    untimed: bool,
    /// The break being served is the breaker's own (a trip, a failed probe): a proven recovery
    /// may end it early. A break the dependency asked for (`Retry-After`) or an operator
    /// forced is served whole.
    own_break: bool,
    rng: fastrand::Rng,
    /// The last manual action that took effect, and when.
    manual: Option<ManualAction>,
    manual_at: u64,
    /// The refusal total (see `Cells::refused`) when the current state episode began: the
    /// snapshot's refused calls are the total less this.
    refused_base: u64,
    /// A state other than open began since the last locked operation's end: the refusal base
    /// is to be taken again (see [`Machine::take_refused_rebase`]).
    rebase_refused: bool,
    /// Call observers are registered: a success always has a consumer, so the word is never
    /// still.
    observed: bool,
    /// Adaptive throttling instead of opening (boxed: most breakers have none, and the
    /// machine's room is counted, see the layout note).
    throttle: Option<Box<Throttle>>,
    /// The rate rule the trip rules last found above its threshold while the breaker stayed
    /// closed (a [`RateRule`] bit; 0: none), so that a crossing is raised once (see
    /// `event.rs`, "Threshold exceeded").
    above: u8,
    /// Crossings noted under the lock and not yet raised ([`RateRule`] bits): the locked
    /// operation takes them ([`Machine::take_crossings`]) and raises them before its
    /// transitions.
    crossed: u8,
    /// What the fold has taken of the breaker's per-core lines (`front/cells.rs`), kept
    /// under the same lock; the machine itself never reads it.
    pub(crate) cells_taken: crate::front::cells::Taken,
    // Layout: the machine lives inside the breaker's shared allocation, which a default
    // breaker fills to a whole number of cache lines; a field more there costs a line (128
    // bytes) of the 4 KiB budget (tests/memory.rs). The small fields above share their padding.
}

/// The counts of a half-open period's probes: few (at most the probes admitted, one
/// locked operation each), so `u32`s, saturating, that keep the machine within its room (see
/// the layout note of [`Machine`]). Probes are timed for certain, never drawn: their slow
/// share is exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Probes {
    calls: u32,
    failures: u32,
    slow: u32,
    timed: u32,
}

impl Probes {
    fn count(&mut self, mark: Mark) {
        let add = |field: &mut u32, yes: bool| *field = field.saturating_add(u32::from(yes));
        add(&mut self.calls, true);
        add(&mut self.failures, mark.failure);
        add(&mut self.slow, mark.slow);
        add(&mut self.timed, mark.timed);
    }

    /// As a window's totals.
    fn totals(self) -> Totals {
        Totals {
            calls: u64::from(self.calls),
            failures: u64::from(self.failures),
            slow: u64::from(self.slow),
            timed: u64::from(self.timed),
            slow_drawn: 0,
        }
    }
}

/// The rate rules, as bits of [`Machine::above`] and [`Machine::crossed`], in the order the
/// trip rules judge them.
struct RateRule;

impl RateRule {
    const ALL: [(u8, OpenReason); 3] = [
        (1, OpenReason::FailureRatio),
        (2, OpenReason::FailuresAboveNormal),
        (4, OpenReason::SlowCallRatio),
    ];

    /// The bit of a rate rule's reason; 0 for any other reason.
    fn bit(reason: OpenReason) -> u8 {
        RateRule::ALL
            .iter()
            .find(|(_, r)| *r == reason)
            .map_or(0, |(bit, _)| *bit)
    }
}

/// What the breaker publishes for the hot path after each locked operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) word: Word,
    /// When the current break ends while open; 0 in every other state (so that a refusal that
    /// reads it after a newer publication than its word's goes to the lock).
    pub(crate) until: u64,
    /// Until when the fast flag holds (meaningful while it is set), and when a throttling
    /// word's probability is to be recomputed (see `Breaker::throttle`).
    pub(crate) fast_until: u64,
    /// `fast_until` without the lock's upkeep deadlines: until when a success counted off the
    /// lock still falls in the bucket and slice the locked operation published, which is all
    /// an untimed success needs (it reads no precise clock, so the upkeep waits for the next
    /// timed call: one in [`SAMPLE`](sampling::SAMPLE) while sampling, every call otherwise).
    pub(crate) counted_until: u64,
    /// Calls above this many nanoseconds are slow (`u64::MAX`: none is).
    pub(crate) slow_nanos: u64,
    /// Adaptive throttling's refusal threshold for a uniform 64-bit draw (0: none refused).
    pub(crate) throttle: u64,
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn ratio(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

impl Machine {
    /// A machine in the configured initial state at `now` (an isolated one counts as opened
    /// then).
    pub(crate) fn new(
        settings: std::sync::Arc<Settings>,
        seed: u64,
        gate: Option<Gate>,
        now: u64,
    ) -> Machine {
        let state = settings.initial_state.state();
        let opened_at = (state == State::Isolated).then_some(now);
        let throttle = match (settings.throttle(), settings.window) {
            (Some(multiple), TripWindow::Time(span)) => {
                Some(Box::new(Throttle::new(multiple, span)))
            }
            _ => None,
        };
        let nanos_of = |d: Option<Duration>| d.map(nanos);
        let failure_baseline = settings
            .relative_failures()
            .and_then(|_| nanos_of(settings.failure_baseline_window()))
            .map(FailureBaseline::new);
        let latency = settings
            .relative_slow_calls()
            .and_then(|_| nanos_of(settings.latency_baseline_window()))
            .map(LatencyBaseline::new);
        let shadow = settings.shadow;
        Machine {
            cells_taken: Default::default(),
            window: Window::new(settings.window),
            failure_baseline,
            latency,
            normal_latency: u64::MAX,
            probe_tail: ProbeTail::default(),
            normal_slow: None,
            latency_due: 0,
            marks: settings.relative_slow_calls().map(|_| Marks::new()),
            in_flight_due: 0,
            rebase_marks: true,
            ramp: None,
            untimed: settings.slow_call_threshold.is_none()
                && settings.relative_slow_calls().is_none(),
            own_break: false,
            settings,
            state,
            generation: 0,
            consecutive_failures: 0,
            consecutive_opens: 0,
            opened_at,
            break_served: 0,
            until: 0,
            half_open_since: 0,
            probes_in_flight: 0,
            probes_admitted: 0,
            probe_successes: 0,
            probes: Probes::default(),
            showing_probes: false,
            shadow,
            shadow_refusals: 0,
            gate,
            suppressed_opens: 0,
            fast_since: 0,
            rng: fastrand::Rng::with_seed(seed),
            manual: None,
            manual_at: 0,
            refused_base: 0,
            rebase_refused: false,
            observed: false,
            throttle,
            above: 0,
            crossed: 0,
        }
    }

    /// The state as last set under the lock (a lapsed break still reads open: see
    /// [`Machine::state_at`]).
    #[cfg(feature = "metrics")]
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// Whether call observers are registered (see the `observed` field).
    pub(crate) fn set_observed(&mut self, observed: bool) {
        self.observed = observed;
    }

    /// Whether a state other than open began since the last call (every state but open starts
    /// its refused count at zero; an opening keeps the count of the state it ended, as
    /// resilience4j's does). Under the lock, after a locked operation's step.
    pub(crate) fn take_refused_rebase(&mut self) -> bool {
        std::mem::take(&mut self.rebase_refused)
    }

    /// Starts the refused count of the current state episode at `total` (and throttling's
    /// count of its own refusals).
    pub(crate) fn rebase_refused(&mut self, total: u64) {
        self.refused_base = total;
        if let Some(throttle) = &mut self.throttle {
            throttle.rebase(total);
        }
    }

    /// Whether the breaker throttles (and wants the refusal total at each locked operation).
    pub(crate) fn throttles(&self) -> bool {
        self.throttle.is_some()
    }

    /// Counts, for throttling, the refusals made since the last locked operation (the
    /// breaker's refusal total is `total`): while closed they are all throttling's, since
    /// every other state's start rebased the count. They land in the slice of the last
    /// locked operation, as successes counted off the lock land in its bucket: a throttled
    /// draw past `fast_until` takes the lock first (`Breaker::throttle`), so every one of them
    /// came before the next boundary.
    pub(crate) fn absorb_refusals(&mut self, total: u64) {
        if self.state == State::Closed
            && let Some(throttle) = &mut self.throttle
        {
            throttle.absorb(self.fast_since, total);
        }
    }

    /// Throttling's refusal probability at `now`, while closed as seen at `now`, over the
    /// refusals counted as of the last locked operation: the one admission draws against
    /// (refusals made since count from the next locked operation on, which every admitted
    /// call's outcome and every draw past the next bucket boundary causes). A ramp that has
    /// run out is closed with an empty window (it is cleared at the next operation): 0.
    fn throttle_probability(&self, now: u64) -> Option<f64> {
        let throttle = self.throttle.as_ref()?;
        match (self.state, self.state_at(now)) {
            (State::Closed, _) => {
                let totals = self.window.totals(now);
                Some(throttle.probability(now, totals.calls, totals.failures))
            }
            (_, State::Closed) => Some(0.0),
            _ => None,
        }
    }

    /// A shadow breaker's would-be throttling refusal: counted as a shadow refusal, and as a
    /// refusal for the probability (so that it moves as a throttling breaker's would). The
    /// call itself runs uncounted, as a shadow breaker's other would-be refusals do.
    /// A breaker switched out of shadow since the caller read its word refuses it instead.
    pub(crate) fn shadow_throttled(&mut self, now: u64) -> Admission {
        if !self.shadow {
            return Admission::Refuse {
                reason: RejectReason::Throttled,
                retry_after: None,
            };
        }
        if let Some(throttle) = &mut self.throttle {
            throttle.add_refusal(now);
        }
        self.shadow_refusals += 1;
        self.admitted(Role::Uncounted)
    }

    /// The generation: it changes with every transition.
    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    /// Folds in the successes counted off the lock since the last locked operation (how many,
    /// and how many of them timed), then evaluates the trip rules: a call-caused locked
    /// operation starts here.
    ///
    /// They land in the bucket of the last locked operation: every success counted off the
    /// lock came before `fast_until`, the next boundary after it, so in that bucket.
    ///
    /// The trip rules judge the window as those successes left it: as of the last locked
    /// operation's time, which is in the same bucket as every one of them. The window at
    /// `now` may have lost a bucket since, but no outcome has been counted in it yet: the
    /// call whose operation this is will be, and judged then.
    pub(crate) fn absorb(&mut self, now: u64, successes: (u64, u64)) -> Option<Transition> {
        if !self.absorb_counts(successes) {
            return None;
        }
        let reason = self.judged(self.fast_since)?;
        self.rule_trip(now, reason)
    }

    /// [`Machine::absorb`] without the trip rules, for controls (a reset, an isolation): the
    /// successes still reach the baselines. Whether anything was folded.
    pub(crate) fn absorb_counts(&mut self, (n, timed): (u64, u64)) -> bool {
        if n == 0 || self.state != State::Closed {
            return false;
        }
        // They all came after the last locked operation: any run of failures has ended.
        self.consecutive_failures = 0;
        self.window.record_successes(self.fast_since, n, timed);
        if let Some(baseline) = &mut self.failure_baseline {
            baseline.record(self.fast_since, n, 0);
        }
        true
    }

    /// Whether latency samples should be merged now: the refresh is due, or the baseline is
    /// not armed yet (every sample may be the one that arms it).
    pub(crate) fn wants_latency(&self, now: u64) -> bool {
        self.latency.is_some() && (now >= self.latency_due || self.normal_ns().is_none())
    }

    /// Merges latency samples into the baseline: `feed` calls its argument with each
    /// sample's histogram bucket.
    pub(crate) fn merge_latency(&mut self, now: u64, feed: impl FnOnce(&mut dyn FnMut(usize))) {
        if let Some(latency) = &mut self.latency {
            feed(&mut |bucket| latency.merge(now, std::iter::once((bucket, 1))));
            let quantile = self
                .settings
                .relative_slow_calls()
                .map_or(0.5, |slow| slow.quantile);
            self.normal_latency = latency
                .normal(now, quantile)
                .map_or(u64::MAX, |normal| normal.min(u64::MAX - 1));
            self.latency_due = now.saturating_add(LATENCY_REFRESH);
        }
        let threshold = self.slow_nanos();
        self.normal_slow = self.latency.as_ref().and_then(|latency| {
            self.normal_ns()?;
            let (samples, above) = latency.share_above(now, threshold);
            Some(Share {
                of: samples,
                part: above,
            })
        });
        if self.state == State::Closed {
            let spell = self.slow_spell(now);
            // A count window's span in time is unknown: its tail stays pending for the whole
            // baseline window, longer than any brownout that trips it can take unseen.
            let period = match self.settings.window {
                TripWindow::Time(span) => nanos(span),
                TripWindow::Count(_) => self
                    .settings
                    .latency_baseline_window()
                    .map_or(u64::MAX, nanos),
            };
            if let Some(latency) = &self.latency {
                latency.watch_tail(&mut self.probe_tail, now, spell, period);
            }
        }
    }

    /// Whether the trip window's slow calls at `now` are a slow spell the probe tail must not
    /// learn from (see `machine/baseline/tail.rs`): a share at least [`SPELL_MULTIPLE`] × the
    /// latency baseline's own, and more than chance at it. The baseline as a whole, the
    /// window's samples included: its share and the window's are judged at one threshold as of
    /// this merge only so. The chance test reads the timed calls unweighted, as the slow rule's
    /// does (`trip.rs`).
    ///
    /// [`SPELL_MULTIPLE`]: crate::machine::baseline::SPELL_MULTIPLE
    fn slow_spell(&self, now: u64) -> bool {
        let Some(normal) = self.normal_slow else {
            return false;
        };
        let totals = self.window.totals(now);
        let rate = normal.rate_outside(0, 0);
        sampling::slow_share(totals) >= crate::machine::baseline::SPELL_MULTIPLE * rate
            && crate::machine::trip::beyond_chance(
                totals.slow,
                totals.timed,
                rate,
                crate::machine::baseline::TAIL_CHANCE,
            )
    }

    /// Whether every call is timed at `now`: a sampled breaker (one that measures latency)
    /// whose trip window holds few calls (see `machine/sampling.rs`).
    fn exact(&self, now: u64) -> bool {
        self.marks.is_some() && sampling::times_every_call(self.window.totals(now).calls)
    }

    /// Whether calls in flight should be checked now.
    pub(crate) fn wants_in_flight(&self, now: u64) -> bool {
        self.marks.is_some() && self.state == State::Closed && now >= self.in_flight_due
    }

    /// Counts calls in flight for longer than the slow threshold as slow calls of the window,
    /// and opens the breaker if that trips it. `totals`: tracked calls started and finished.
    /// Every timed call is tracked, so a hung one is a timed call that is slow already: it
    /// joins the window's calls, its timed calls and its slow ones as any slow call of its kind
    /// would (one timed by a draw standing for the calls in flight beside it), and
    /// `minimum_calls` counts it as the one real call it is (`sampling::with_hung`).
    pub(crate) fn check_in_flight(&mut self, now: u64, totals: (u64, u64)) -> Option<Transition> {
        let threshold = self.slow_nanos();
        let marks = self.marks.as_mut()?;
        if self.rebase_marks {
            marks.rebase(totals);
            self.rebase_marks = false;
        }
        self.in_flight_due = now.saturating_add((threshold / 3).clamp(1_000_000, LATENCY_REFRESH));
        if threshold == u64::MAX || self.state != State::Closed {
            return None;
        }
        let hung = marks.hung(now, totals, threshold);
        if hung.calls() == 0 {
            return None;
        }
        let totals = self.window.totals(now);
        if totals.calls + hung.calls() < u64::from(self.settings.effective_minimum_calls()) {
            return None;
        }
        let with_hung = sampling::with_hung(totals, hung);
        let reason = ratio_trip(&self.settings, with_hung, self.baselines(now, 0))?;
        self.rule_trip(now, reason)
    }

    /// Opens a closed breaker for `reason`, unless its gate keeps it closed. The gate is user
    /// code run under the breaker's lock: a panic in it is caught and counts as a refusal, so
    /// it can never poison the lock.
    fn trip(&mut self, now: u64, reason: OpenReason) -> Option<Transition> {
        self.gate_allows(reason).then(|| self.open(now, reason))
    }

    /// A trip rule's opening (the window's rules, calls hung in flight): a throttling breaker
    /// refuses in proportion instead, so no rule opens it. Every rule's trip passes here.
    /// A rate rule's trip that leaves the breaker closed is noted as a crossing, unless that
    /// rule is the one already reported (see `event.rs`, "Threshold exceeded").
    fn rule_trip(&mut self, now: u64, reason: OpenReason) -> Option<Transition> {
        let opened = if self.throttle.is_some() {
            None
        } else {
            self.trip(now, reason)
        };
        if opened.is_none() {
            // The consecutive-failures rule is judged first and is no rate rule: the rate
            // rules behind it may be above their thresholds too, and a gated breaker failing
            // every call would otherwise never report them.
            let rate = if RateRule::bit(reason) != 0 {
                Some(reason)
            } else {
                ratio_trip(
                    &self.settings,
                    self.window.totals(now),
                    self.baselines(now, 0),
                )
            };
            match rate.map(RateRule::bit) {
                Some(bit) if bit != 0 && self.above != bit => {
                    self.above = bit;
                    self.crossed |= bit;
                }
                Some(_) => {}
                None => self.above = 0,
            }
        }
        opened
    }

    /// The crossings noted since the last call, as the events to raise (in the order the
    /// rules are judged), before the locked operation's transitions.
    pub(crate) fn take_crossings(&mut self) -> [Option<Transition>; 3] {
        let crossed = std::mem::take(&mut self.crossed);
        RateRule::ALL.map(|(bit, reason)| {
            (crossed & bit != 0).then_some(Transition::ThresholdExceeded { reason })
        })
    }

    /// Opens a closed breaker on a signal from outside its own calls, as a trip does (through
    /// the open gate, growing the break, raising an opening of reason `Signal`). Any other
    /// state is left as it is.
    pub(crate) fn trip_on_signal(&mut self, now: u64) -> Option<Transition> {
        (self.state == State::Closed)
            .then(|| self.trip(now, OpenReason::Signal))
            .flatten()
    }

    /// Ends the break of an open breaker early on evidence from outside its calls that its
    /// dependency is back, gathered `age` nanoseconds before `now`: half-open now, and its own
    /// probes decide as after any break (a failed one re-opens it with a grown break: the
    /// consecutive opens stay). Nothing happens (`None`) unless the breaker is open on a break
    /// of its own (a trip, a failed probe; not a break the dependency asked for, nor one an
    /// operator forced), its break has not already elapsed, and the evidence is not stale: it
    /// must have been gathered at or after the moment this break began, since evidence from
    /// before says nothing about what opened it.
    ///
    /// `now` was read before the lock, so a trip may have opened the breaker after it: the
    /// evidence (at `now - age`) is then older than the break, and stale like any other.
    /// The break served is what was served until now: a ramp after it lasts its fraction of
    /// that, and the snapshot shows it, while the growth (the consecutive opens) is kept.
    pub(crate) fn end_break_on_signal(
        &mut self,
        now: u64,
        reason: BreakEndReason,
        age: u64,
    ) -> Option<Transition> {
        if !self.break_may_end(now) {
            return None;
        }
        let opened_at = self.opened_at?;
        // Stale: gathered before this break began (or before the clock's origin).
        match now.checked_sub(age) {
            Some(gathered) if gathered >= opened_at => {}
            _ => return None,
        }
        let remaining = Duration::from_nanos(self.until.saturating_sub(now));
        self.break_served = now - opened_at;
        self.half_open(now);
        Some(Transition::BreakEnded { reason, remaining })
    }

    /// Whether a signal may end the break at `now`: open, on a break of its own, not yet
    /// elapsed (evidence fresh enough is the other condition, judged per signal).
    pub(crate) fn break_may_end(&self, now: u64) -> bool {
        self.state_at(now) == State::Open && self.own_break
    }

    /// Asks the open gate, if any, whether a closed breaker may open for `reason` (counting a
    /// refusal).
    fn gate_allows(&mut self, reason: OpenReason) -> bool {
        if let Some(Gate(gate)) = &self.gate
            && crate::contained::contained(|| gate(reason)) != Some(true)
        {
            self.suppressed_opens += 1;
            return false;
        }
        true
    }

    /// The measured normal latency, as of the last merge.
    /// The normal latency in nanoseconds, once measured.
    fn normal_ns(&self) -> Option<u64> {
        (self.normal_latency != u64::MAX).then_some(self.normal_latency)
    }

    pub(crate) fn normal_latency(&self) -> Option<Duration> {
        self.normal_ns().map(Duration::from_nanos)
    }

    /// The measured normal failure rate at `now`, with `pending` successes not yet folded:
    /// counted where the next fold will put them (the last locked operation's slice), so not
    /// at all once that slice has left the baseline's window.
    pub(crate) fn normal_failure_rate(&self, now: u64, pending: u64) -> Option<f64> {
        let held = self
            .failure_baseline
            .as_ref()
            .is_some_and(|baseline| baseline.holds(self.fast_since, now));
        self.normal(now, if held { pending } else { 0 })
            .map(Share::rate)
    }

    /// The failure baseline at `now` as the trips read it, with `extra` more successes;
    /// `None` until armed.
    fn normal(&self, now: u64, extra: u64) -> Option<Share> {
        let (outcomes, failures) = self.failure_baseline.as_ref()?.counts_with(now, extra)?;
        Some(Share {
            of: outcomes,
            part: failures,
        })
    }

    /// What the trips compare the window with at `now` (the failure baseline with `extra`
    /// more successes).
    fn baselines(&self, now: u64, extra: u64) -> Baselines {
        Baselines {
            failures: self.normal(now, extra),
            slow: self.normal_slow,
        }
    }

    /// The slow-call threshold in force: the absolute one, tightened by the relative one.
    fn slow_nanos(&self) -> u64 {
        let absolute = self.settings.slow_call_threshold.map_or(u64::MAX, nanos);
        let relative = self
            .settings
            .relative_slow_calls()
            .zip(self.normal_ns())
            .map_or(u64::MAX, |(slow, normal)| slow.threshold_nanos(normal));
        absolute.min(relative)
    }

    /// The threshold the hot path judges calls by: while half-open, the probes' (see
    /// [`probe_slow_nanos`](Self::probe_slow_nanos)); otherwise the one in force.
    fn published_slow_nanos(&self) -> u64 {
        let threshold = self.slow_nanos();
        if self.state == State::HalfOpen {
            self.probe_slow_nanos(threshold)
        } else {
            threshold
        }
    }

    /// A probe is slow only above a limit neither a fresh connection nor the healthy
    /// dependency's own tail crosses by itself: the threshold in force, raised to at least the
    /// probe tail (the baseline's 99th percentile from before any slow spell,
    /// capped at 10 × the normal latency; the normal latency where none has settled, 0 while
    /// unmeasured) plus the margin ([`SlowCalls::margin`](crate::SlowCalls::margin); 50 ms
    /// where no relative rule is configured). A probe opens a new connection more often than
    /// not (the pool idled out during the break), and an operator's absolute budget set close
    /// above a fast dependency's latency (10 ms on a 2 ms one) is crossed by a TLS handshake
    /// alone. And a probe is one sample: against 3 × the median, a healthy dependency whose
    /// p99 is 5 × its median failed 3.5% of its probes. Why the tail is the one from before
    /// the trip, and what the rule can no longer see: `machine/baseline/tail.rs`.
    fn probe_slow_nanos(&self, threshold: u64) -> u64 {
        /// The most the tail may stand above the normal latency for a probe's limit: a
        /// brownout that crept into the settled tail still fails a probe beyond it.
        const PROBE_TAIL_CAP: u64 = 10;
        if threshold == u64::MAX {
            return threshold;
        }
        let margin = self
            .settings
            .slow_calls
            .map_or(crate::relative::DEFAULT_SLOW_MARGIN, |slow| {
                slow.margin_duration()
            });
        let normal = self.normal_ns().unwrap_or(0);
        let tail = self.probe_tail.settled().map_or(normal, |tail| {
            tail.min(normal.saturating_mul(PROBE_TAIL_CAP)).max(normal)
        });
        threshold.max(tail.saturating_add(nanos(margin)))
    }

    /// Ends a locked operation at `now`: what the hot path may do until the next one.
    pub(crate) fn publish(&mut self, now: u64) -> Published {
        self.fast_since = now;
        let closed = self.state == State::Closed;
        // Until the latency baseline is armed every sample may be the one that arms it: each
        // success is then merged under the lock, so that `normal_latency()` is exact.
        let arming = self.latency.is_some() && self.normal_ns().is_none();
        // At the end of a locked operation, which absorbed the refusals made before it.
        let probability = self
            .throttle_probability(now)
            .filter(|_| self.state == State::Closed)
            .unwrap_or(0.0);
        let throttling = probability > 0.0;
        let fast = closed && !arming && !throttling && !self.successes_can_trip(now);
        // The boundaries a success's count depends on: the window's bucket and the baseline's
        // slice it falls in, and a throttling word's deadline (see `Breaker::throttle`: when
        // the refusals' slices move, the probability may fall).
        let mut counted_until = self.window.next_boundary(now);
        if let Some(baseline) = &self.failure_baseline {
            counted_until = counted_until.min(baseline.next_boundary(now));
        }
        if let Some(throttle) = &self.throttle {
            counted_until = counted_until.min(throttle.next_boundary(now));
        }
        // And the lock's upkeep, which the next call that reads the precise clock (a timed
        // one) takes the lock for: the latency refresh and the check of calls in flight.
        let mut fast_until = counted_until;
        if self.latency.is_some() {
            fast_until = fast_until.min(self.latency_due.max(now.saturating_add(1)));
        }
        if self.marks.is_some() {
            fast_until = fast_until.min(self.in_flight_due.max(now.saturating_add(1)));
        }
        // A success would change nothing: not the window (full of successes), not the count (no
        // failures to reset), no baseline (none kept, nothing timed), and no rule has a
        // deadline (so nothing changes with time either).
        let still = closed
            && !self.observed
            && !throttling
            && self.consecutive_failures == 0
            && self.window.success_is_noop()
            && self.failure_baseline.is_none()
            && self.untimed
            && fast_until == u64::MAX;
        // Low traffic: time every call (DESIGN: estimates only where enough calls per trip
        // window make them good ones; the switch and its bound are `machine/sampling.rs`'s).
        let exact = self.exact(now);
        Published {
            word: Word::new(
                self.state,
                self.generation,
                Flags {
                    still,
                    fast,
                    exact,
                    throttling,
                    shadow: self.shadow,
                },
            ),
            // In shadow mode no refusal is decided off the lock: a call that reads 0 here
            // goes to the lock, which admits it uncounted.
            until: if self.state == State::Open && !self.shadow {
                self.until
            } else {
                0
            },
            fast_until,
            counted_until,
            slow_nanos: self.published_slow_nanos(),
            throttle: throttle::threshold(probability),
        }
    }

    /// Whether some run of successes landing before the next boundary could trip the
    /// breaker (then each success takes the lock instead, and is judged as it lands).
    ///
    /// Successes never raise a window's ratio. The first one that could reveal a trip is the
    /// one that brings the window to its minimum calls (or, for the relative rule, that also
    /// arms the baseline); after it, every success lowers the window's failure and slow rates.
    /// It also lowers the baseline's rate, but no faster than the window's, since the baseline
    /// holds every outcome of the window and more: the relative trip only grows less likely.
    /// A full count window is the exception: a success there pushes out its oldest call, so
    /// its failure rate can stay put while the baseline's falls; the relative rule is then
    /// treated as able to trip whenever the window's failures could ever meet it.
    fn successes_can_trip(&self, now: u64) -> bool {
        let totals = self.window.totals(now);
        let minimum = u64::from(self.settings.effective_minimum_calls());
        let added = minimum.saturating_sub(totals.calls).max(1);
        // The successes counted as untimed: they lower the estimated slow share (it is over all
        // calls), leave the timed calls' as it is (timed ones would lower both), and make the
        // estimate's error test stricter (`sampling::beyond_sampling_error`). And no chance
        // test: it could only make a trip less likely.
        let with = |added: u64| Totals {
            calls: (totals.calls + added).min(self.window.capacity()),
            ..totals
        };
        if ratio_trip(&self.settings, with(added), Baselines::default()).is_some() {
            return true;
        }
        // A sampled count window: a success pushes out its oldest call, which may be timed
        // and fast. The estimated share cannot rise (the calls stay as many), but the chance
        // test reads the timed calls, whose slow share can.
        if matches!(self.window, Window::Count(_)) && !self.exact(now) && totals.slow > 0 {
            return true;
        }
        let (Some(relative), Some(baseline)) =
            (self.settings.relative_failures(), &self.failure_baseline)
        else {
            return false;
        };
        if matches!(self.window, Window::Count(_)) {
            let most = totals.failures as f64 / totals.calls.max(minimum).max(1) as f64;
            return totals.failures >= 2 && most >= relative.floor;
        }
        let arming = baseline.outcomes_to_arm(now);
        let added = added.max(arming);
        ratio_trip(&self.settings, with(added), self.baselines(now, added)).is_some()
    }

    /// The state as seen at `now`, without changing anything.
    pub(crate) fn state_at(&self, now: u64) -> State {
        match self.state {
            State::Open if now >= self.until => State::HalfOpen,
            State::Recovering if self.ramp.as_ref().is_some_and(|r| r.finished(now)) => {
                State::Closed
            }
            state => state,
        }
    }

    /// When the breaker opened, as seen at `now`: `None` once closed, including a ramp that
    /// has run out without a call since.
    pub(crate) fn opened_at(&self, now: u64) -> Option<Duration> {
        if self.state_at(now) == State::Closed {
            return None;
        }
        self.opened_at.map(Duration::from_nanos)
    }

    pub(crate) fn break_remaining(&self, now: u64) -> Option<Duration> {
        (self.state == State::Open).then(|| Duration::from_nanos(self.until.saturating_sub(now)))
    }

    /// Decides whether a call may run.
    pub(crate) fn admit(&mut self, now: u64) -> (Admission, Option<Transition>) {
        let mut transition = None;
        if self.state == State::Open && now >= self.until {
            self.half_open(now);
            transition = Some(Transition::HalfOpened);
        }
        self.finish_ramp(now);
        if self.state == State::HalfOpen && self.half_open_timed_out(now) {
            // (Never on the call that entered half-open above: the wait is positive.)
            transition = Some(match self.settings.half_open_timeout {
                HalfOpenTimeout::Open => self.open(now, OpenReason::HalfOpenTimeout),
                HalfOpenTimeout::Close => self.close(now, CloseReason::HalfOpenTimeout),
            });
        }
        let admission = match self.state {
            State::Closed => self.admitted(Role::Normal),
            State::Recovering => {
                let refused = self
                    .ramp
                    .as_mut()
                    .and_then(|ramp| (!ramp.admit(now)).then(|| ramp.retry_after()));
                match refused {
                    Some(retry_after) => self.refused(RejectReason::Ramp, Some(retry_after)),
                    None => self.admitted(Role::Ramp),
                }
            }
            State::Disabled => self.admitted(Role::Uncounted),
            State::Isolated => self.refused(RejectReason::Isolated, None),
            State::Open => {
                let left = Duration::from_nanos(self.until - now);
                self.refused(RejectReason::Open, Some(left))
            }
            State::HalfOpen => {
                if self.probe_slot_free() {
                    self.probes_in_flight += 1;
                    self.probes_admitted += 1;
                    self.admitted(Role::Probe)
                } else {
                    let retry_after = self.half_open_retry_after(now);
                    self.refused(RejectReason::HalfOpenFull, Some(retry_after))
                }
            }
        };
        (admission, transition)
    }

    /// Whether half-open has lasted `max_wait_in_half_open` at `now` (reaching it counts, as
    /// a break's end does).
    fn half_open_timed_out(&self, now: u64) -> bool {
        let waited = now.saturating_sub(self.half_open_since);
        self.settings
            .max_wait_in_half_open
            .is_some_and(|max| waited >= nanos(max))
    }

    /// The retry-after of a call refused because every probe slot is taken: the sooner of
    /// the normal latency once measured (about when a probe in flight finishes and frees its
    /// slot or decides) and what is left of the maximum wait (by then a slot is free or the
    /// wait has run out); with neither, the break last served (the first break if that was
    /// zero: a manual open for no time).
    fn half_open_retry_after(&self, now: u64) -> Duration {
        let left = self.settings.max_wait_in_half_open.map(|max| {
            let waited = now.saturating_sub(self.half_open_since);
            Duration::from_nanos(nanos(max).saturating_sub(waited))
        });
        match (self.normal_latency(), left) {
            (Some(normal), Some(left)) => normal.min(left),
            (Some(hint), None) | (None, Some(hint)) => hint,
            (None, None) if self.break_served == 0 => self.settings.break_duration,
            (None, None) => Duration::from_nanos(self.break_served),
        }
    }

    fn admitted(&self, role: Role) -> Admission {
        Admission::Admit {
            generation: self.generation,
            role,
        }
    }

    /// A refusal, or in shadow mode an uncounted admission in its place.
    fn refused(&mut self, reason: RejectReason, retry_after: Option<Duration>) -> Admission {
        if self.shadow {
            self.shadow_refusals += 1;
            return self.admitted(Role::Uncounted);
        }
        Admission::Refuse {
            reason,
            retry_after,
        }
    }

    fn probe_slot_free(&self) -> bool {
        match self.settings.half_open_rule {
            HalfOpenRule::Consecutive => self.probes_in_flight < self.settings.half_open_probes,
            HalfOpenRule::Rates => self.probes_admitted < self.settings.half_open_probes,
        }
    }

    /// Records a finished call. `timed`: `None` for a call that was not timed, otherwise
    /// whether it ran longer than the slow threshold and whether a draw timed it.
    pub(crate) fn record(
        &mut self,
        now: u64,
        generation: u32,
        role: Role,
        outcome: Outcome,
        timed: Option<Timed>,
    ) -> Option<Transition> {
        if role == Role::Uncounted || generation != self.generation {
            // Uncounted calls record nothing; an outcome from an older generation (a call that
            // started before the last transition) must not decide the current state.
            return None;
        }
        match (self.state, role, outcome) {
            (_, Role::Probe, Outcome::Ignored) => {
                self.release(generation, role);
                None
            }
            (_, _, Outcome::Ignored) => None,
            (State::Closed, Role::Normal, _) => self.record_closed(now, outcome, timed),
            (State::HalfOpen, Role::Probe, _) => self.record_probe(now, outcome, timed),
            (State::Recovering, Role::Ramp, _) => self.record_ramp(now, outcome, timed),
            _ => None,
        }
    }

    /// Records a call whose dependency asked not to be called for `duration` (a classifier's
    /// [`Verdict::OpenFor`](crate::classify::Verdict::OpenFor)): counted as nothing, it opens
    /// the breaker for `min(duration, max_break_duration)` from `now` (the call's end).
    ///
    /// Decided here (DESIGN §2 "Control" asks for the verdict, not for its every case):
    /// - as for any outcome, a call of an older generation or an uncounted one changes
    ///   nothing, and no duration at all is an ignored outcome (a probe's slot comes back);
    /// - from closed the opening passes the open gate (told `RetryAfter`), as a trip does (a
    ///   refusal leaves the call ignored); a half-open probe or a ramp call re-opens the
    ///   breaker;
    /// - no jitter, no growth (the consecutive opens stay), an event with
    ///   [`OpenReason::RetryAfter`]: a call caused it.
    pub(crate) fn record_open_for(
        &mut self,
        now: u64,
        generation: u32,
        role: Role,
        duration: Duration,
    ) -> Option<Transition> {
        if duration.is_zero() {
            return self.record(now, generation, role, Outcome::Ignored, None);
        }
        if role == Role::Uncounted || generation != self.generation {
            return None;
        }
        match (self.state, role) {
            (State::Closed, Role::Normal) if self.gate_allows(OpenReason::RetryAfter) => {}
            (State::HalfOpen, Role::Probe) | (State::Recovering, Role::Ramp) => {}
            _ => return None,
        }
        Some(self.open_as_asked(now, duration))
    }

    /// Opens for `duration` from `now` as the dependency asked, capped by the maximum break:
    /// no jitter, and the consecutive opens stay as they were (no growth).
    fn open_as_asked(&mut self, now: u64, duration: Duration) -> Transition {
        let from = self.state;
        let asked = duration.min(self.settings.max_break_duration);
        self.opened_at = Some(now);
        self.enter_open(now.saturating_add(nanos(asked)));
        self.own_break = false;
        Transition::Opened {
            from,
            reason: OpenReason::RetryAfter,
            // What is served: the time asked, unless the clock's range ends sooner.
            break_for: Duration::from_nanos(self.break_served),
        }
    }

    fn record_ramp(
        &mut self,
        now: u64,
        outcome: Outcome,
        timed: Option<Timed>,
    ) -> Option<Transition> {
        let mark = self.count(outcome, timed);
        if mark.failure {
            return Some(self.open(now, OpenReason::RampFailed));
        }
        let streak = self.settings.probe_successes;
        if let Some(ramp) = &mut self.ramp {
            ramp.succeeded(mark.slow, streak);
        }
        self.finish_ramp(now);
        None
    }

    /// Brings the machine to `now` before any locked operation: a ramp that has run out by
    /// the clock is closed (silently: the Closed event was raised when it started), so that
    /// no outcome, control or read judges it as still recovering. (The lazy half-open is not
    /// settled here: it raises an event, and only a call may cause it.)
    pub(crate) fn settle(&mut self, now: u64) {
        self.finish_ramp(now);
    }

    /// Ends a ramp that has run out: closed, silently (the Closed event was raised when it
    /// started).
    fn finish_ramp(&mut self, now: u64) {
        if self.state == State::Recovering && self.ramp.as_ref().is_some_and(|r| r.finished(now)) {
            self.state = State::Closed;
            self.forget_history();
        }
    }

    /// Counts a counted outcome in the consecutive-failure run; its mark for a window.
    fn count(&mut self, outcome: Outcome, timed: Option<Timed>) -> Mark {
        let failure = outcome == Outcome::Failure;
        if failure {
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        } else {
            self.consecutive_failures = 0;
        }
        Mark {
            failure,
            slow: timed.is_some_and(|timed| timed.slow),
            timed: timed.is_some(),
            drawn: timed.is_some_and(|timed| timed.drawn),
        }
    }

    fn record_closed(
        &mut self,
        now: u64,
        outcome: Outcome,
        timed: Option<Timed>,
    ) -> Option<Transition> {
        let mark = self.count(outcome, timed);
        self.window.record(now, mark);
        if let Some(baseline) = &mut self.failure_baseline {
            baseline.record(now, 1, u64::from(mark.failure));
        }
        let reason = self.judged(now)?;
        self.rule_trip(now, reason)
    }

    /// [`Machine::trip_reason`], noting an evaluation that finds no rule above its threshold:
    /// the next crossing is raised again.
    fn judged(&mut self, now: u64) -> Option<OpenReason> {
        let reason = self.trip_reason(now);
        if reason.is_none() {
            self.above = 0;
        }
        reason
    }

    fn trip_reason(&self, now: u64) -> Option<OpenReason> {
        if let Some(limit) = self.settings.consecutive_failures
            && self.consecutive_failures >= limit
        {
            return Some(OpenReason::ConsecutiveFailures(self.consecutive_failures));
        }
        ratio_trip(
            &self.settings,
            self.window.totals(now),
            self.baselines(now, 0),
        )
    }

    fn record_probe(
        &mut self,
        now: u64,
        outcome: Outcome,
        timed: Option<Timed>,
    ) -> Option<Transition> {
        let mark = self.count(outcome, timed);
        self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        self.probes.count(mark);
        match self.settings.half_open_rule {
            HalfOpenRule::Consecutive => {
                if mark.failure {
                    return Some(self.open(now, OpenReason::ProbeFailed));
                }
                if mark.slow {
                    return Some(self.open(now, OpenReason::ProbeSlow));
                }
                self.probe_successes += 1;
                (self.probe_successes >= self.settings.probe_successes)
                    .then(|| self.close(now, CloseReason::ProbesSucceeded))
            }
            HalfOpenRule::Rates => {
                let probes = self.probes.totals();
                if probes.calls < u64::from(self.settings.half_open_probes) {
                    return None;
                }
                let failure_limit = self.settings.failure_ratio.unwrap_or(0.5);
                let failing = ratio(probes.failures, probes.calls) >= failure_limit;
                let slowing = probes.slow > 0
                    && sampling::slow_share(probes) >= self.settings.slow_call_ratio;
                Some(if failing || slowing {
                    self.open(now, OpenReason::ProbeRates)
                } else {
                    self.close(now, CloseReason::ProbesSucceeded)
                })
            }
        }
    }

    /// Gives a probe's slot back when it finished without a counted outcome.
    pub(crate) fn release(&mut self, generation: u32, role: Role) {
        if role == Role::Probe && generation == self.generation && self.state == State::HalfOpen {
            self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
            self.probes_admitted = self.probes_admitted.saturating_sub(1);
        }
    }

    fn transition_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        // A new period: a crossing in it is raised again (one noted already is still raised).
        self.above = 0;
        self.probes_in_flight = 0;
        self.probes_admitted = 0;
        self.probe_successes = 0;
        self.probes = Probes::default();
    }

    fn open(&mut self, now: u64, reason: OpenReason) -> Transition {
        let from = self.state;
        // An opening on slow evidence is a slow spell the probe tail must not learn from
        // (its calls, and its probes', are in the baseline); one on failures adds no sample.
        if matches!(
            reason,
            OpenReason::SlowCallRatio | OpenReason::ProbeSlow | OpenReason::ProbeRates
        ) && let Some(latency) = &self.latency
        {
            latency.taint_tail(&mut self.probe_tail, now);
        }
        self.consecutive_opens = self.consecutive_opens.saturating_add(1);
        // The counts the snapshot shows as it opens (see `BreakContext`).
        let computed = computed_break(&self.settings, self.consecutive_opens, || {
            let totals = match from {
                State::HalfOpen => self.probes.totals(),
                _ => self.window.totals(now),
            };
            (totals.calls, totals.failures)
        });
        let served = jittered(computed, self.settings.jitter, &mut self.rng);
        self.opened_at = Some(now);
        self.enter_open(now.saturating_add(nanos(served)));
        self.own_break = true;
        Transition::Opened {
            from,
            reason,
            break_for: served,
        }
    }

    /// Open until `until` (nanoseconds), counting the break from `opened_at` (set already).
    fn enter_open(&mut self, until: u64) {
        let from = self.state;
        let opened_at = self.opened_at.unwrap_or(until);
        self.break_served = until.saturating_sub(opened_at);
        // Closed refuses nothing, so the count it hands to the opening is zero (resilience4j's
        // not-permitted calls; a re-opening keeps the half-open's): the calls a throttling
        // breaker refused while closed are not the open breaker's.
        if from == State::Closed {
            self.rebase_refused = true;
        }
        self.state = State::Open;
        self.ramp = None;
        self.until = until;
        // The probes' counts stay visible while open if this opening ended a half-open period
        // (or, for a manual open of an open breaker, if they were visible already).
        let probes = self.probes;
        self.transition_generation();
        if matches!(from, State::HalfOpen | State::Open) {
            self.probes = probes;
        }
    }

    fn half_open(&mut self, now: u64) {
        self.state = State::HalfOpen;
        self.rebase_refused = true;
        self.half_open_since = now;
        self.showing_probes = true;
        self.transition_generation();
    }

    /// The probes succeeded (or half-open timed out into closing, `reason` says which):
    /// closed, or recovering over a ramp when one is configured.
    fn close(&mut self, now: u64, reason: CloseReason) -> Transition {
        let from = self.state;
        if let Some(recovery) = self.settings.recovery {
            self.state = State::Recovering;
            self.rebase_refused = true;
            let served = Duration::from_nanos(self.break_served);
            self.ramp = Some(Ramp::start(now, served, &recovery));
            self.transition_generation();
            self.window.clear();
            self.showing_probes = false;
        } else {
            self.state = State::Closed;
            self.forget_history();
        }
        Transition::Closed { from, reason }
    }

    /// Every path to closed (and `reset`) passes here.
    fn forget_history(&mut self) {
        self.transition_generation();
        self.rebase_refused = true;
        self.rebase_marks = true;
        self.ramp = None;
        self.window.clear();
        self.showing_probes = false;
        self.consecutive_failures = 0;
        self.consecutive_opens = 0;
        self.opened_at = None;
        self.break_served = 0;
    }

    fn manual(&mut self, action: ManualAction, now: u64) {
        self.manual = Some(action);
        self.manual_at = now;
    }

    /// Forces the breaker open until [`Machine::reset`]. No event.
    pub(crate) fn isolate(&mut self, now: u64) {
        self.isolated(now);
        self.manual(ManualAction::Isolate, now);
    }

    fn isolated(&mut self, now: u64) {
        self.state = State::Isolated;
        self.rebase_refused = true;
        self.ramp = None;
        self.opened_at.get_or_insert(now);
        self.transition_generation();
    }

    /// Lets every call through, recording nothing, until [`Machine::reset`]. No event.
    pub(crate) fn disable(&mut self, now: u64) {
        self.state = State::Disabled;
        self.rebase_refused = true;
        self.ramp = None;
        self.opened_at = None;
        self.transition_generation();
        self.manual(ManualAction::Disable, now);
    }

    /// Into shadow mode (`on`) or out of it, at `now`: whether the mode changed (a switch to
    /// the mode in force changes nothing and is not noted). No event, no new generation: the
    /// state, the counts and the calls in flight are the same before and after; only what a
    /// would-be refusal becomes changes (see `Breaker::shadow`).
    pub(crate) fn set_shadow(&mut self, on: bool, now: u64) -> bool {
        if self.shadow == on {
            return false;
        }
        self.shadow = on;
        let action = if on {
            ManualAction::Shadow
        } else {
            ManualAction::Enforce
        };
        self.manual(action, now);
        true
    }

    /// Back to the configured starting state with an empty window and no break growth (an
    /// isolated one counts as opened at `now`). No event. The mode (shadow or enforcing)
    /// stays as it is.
    pub(crate) fn reset(&mut self, now: u64) {
        self.forget_history();
        match self.settings.initial_state {
            InitialState::Closed => self.state = State::Closed,
            InitialState::Disabled => self.state = State::Disabled,
            InitialState::Isolated => self.isolated(now),
        }
        self.manual(ManualAction::Reset, now);
    }

    /// Forces the breaker open until `until` (nanoseconds on its clock; at least `now`, so an
    /// instant already past half-opens on the next call), then half-open as after any break.
    /// No event, no break growth: the consecutive opens stay as they were, so the break after
    /// a failed probe is the one the last opening would have grown to. From closed, half-open
    /// or recovering (as `state()` sees it: an open breaker whose break has elapsed is
    /// half-open) it opens now; an open breaker keeps when it opened and serves the new end
    /// instead of its own. An isolated or disabled breaker is left as it is (`false`).
    pub(crate) fn force_open(&mut self, now: u64, until: u64, action: ManualAction) -> bool {
        match self.state_at(now) {
            State::Isolated | State::Disabled => return false,
            State::Open => {}
            State::Closed | State::HalfOpen | State::Recovering => {
                self.opened_at = Some(now);
                // A lapsed break reads half-open (with no refusals yet): opening from there
                // keeps that episode's count, zero, not the old opening's.
                if self.state == State::Open {
                    self.rebase_refused = true;
                }
            }
        }
        self.enter_open(until.max(now));
        self.own_break = false;
        self.manual(action, now);
        true
    }

    /// What the closed state's rules read at `now` (the window, the baselines, the slow
    /// threshold), for the event of the opening they caused.
    pub(crate) fn trip_evidence(&self, now: u64) -> crate::TripEvidence {
        let totals = self
            .window
            .totals_with_successes(now, self.fast_since, (0, 0));
        let threshold = self.slow_nanos();
        crate::TripEvidence {
            calls: totals.calls,
            failures: totals.failures,
            slow: sampling::estimated_slow(totals),
            normal_failure_rate: self.normal_failure_rate(now, 0),
            normal_latency: self.normal_latency(),
            slow_threshold: (threshold != u64::MAX).then(|| Duration::from_nanos(threshold)),
        }
    }

    /// The state and counts at `now`, with `pending` successes (how many, and how many of
    /// them timed) counted off the lock and not yet folded: what the next locked operation
    /// would fold, read without folding it. Slow calls are those the window's timed calls
    /// estimate, each weighed by the calls it stood for (`machine/sampling.rs`).
    /// `refused`: the refusal total now (see `Cells::refused`).
    pub(crate) fn snapshot(&self, now: u64, pending: (u64, u64), refused: u64) -> Snapshot {
        let closed = self.state == State::Closed;
        let pending = if closed { pending } else { (0, 0) };
        let state = self.state_at(now);
        // A breaker whose break has elapsed reports half-open, and half-open starts fresh
        // counts: the probes' (none yet). Its rates are known once as many probes as the
        // minimum calls (or as the probes, if fewer) have finished.
        let lazily_half_open = self.state == State::Open && state == State::HalfOpen;
        let probes_needed = u64::from(
            self.settings
                .effective_minimum_calls()
                .min(self.settings.half_open_probes),
        );
        let (totals, minimum) = if lazily_half_open {
            (Totals::default(), probes_needed)
        } else if self.showing_probes {
            (self.probes.totals(), probes_needed)
        } else {
            (
                self.window
                    .totals_with_successes(now, self.fast_since, pending),
                u64::from(self.settings.effective_minimum_calls()),
            )
        };
        let armed = totals.calls >= minimum.max(1);
        let in_break = matches!(state, State::Open | State::HalfOpen | State::Recovering);
        let ramp = self.ramp.as_ref().filter(|_| state == State::Recovering);
        Snapshot {
            state,
            failure_rate: armed.then(|| ratio(totals.failures, totals.calls)),
            slow_rate: (armed && self.settings.times_calls()).then(|| sampling::slow_share(totals)),
            calls: totals.calls,
            failures: totals.failures,
            slow: sampling::estimated_slow(totals),
            consecutive_failures: if pending.0 > 0 {
                0
            } else {
                self.consecutive_failures
            },
            opened_at: self.opened_at(now),
            current_break: in_break.then_some(Duration::from_nanos(self.break_served)),
            consecutive_opens: if state == State::Closed && self.state == State::Recovering {
                0
            } else {
                self.consecutive_opens
            },
            probes_in_flight: self.probes_in_flight,
            shadow: self.shadow,
            shadow_refusals: self.shadow_refusals,
            suppressed_opens: self.suppressed_opens,
            normal_latency: self.normal_latency(),
            normal_failure_rate: self.normal_failure_rate(now, pending.0),
            ramp_fraction: ramp.map(|ramp| ramp.fraction(now)),
            recovering_for: ramp.map(|ramp| ramp.elapsed(now)),
            last_manual_action: self.manual,
            last_manual_action_at: self.manual.map(|_| Duration::from_nanos(self.manual_at)),
            // A lapsed break is half-open, and a ramp that has run out closed: both counts
            // start at zero.
            throttle_probability: self.throttle_probability(now),
            refused_calls: if lazily_half_open
                || (state == State::Closed && self.state == State::Recovering)
            {
                0
            } else {
                refused.wrapping_sub(self.refused_base)
            },
        }
    }
}

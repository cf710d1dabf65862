//! The reads and controls of a [`Breaker`]: none of them runs a trip rule or raises an event,
//! and the reads change nothing (see `locked.rs`). The controls (`isolate`, `disable`,
//! `reset`, `open_for`, `open_until`, `shadow`, `enforce`) are its manual actions: the snapshot
//! shows the last one.
//!
//! # Shadow mode, switched live
//! [`Breaker::shadow`] and [`Breaker::enforce`] are resilience4j's transition into and out of
//! its METRICS_ONLY state, with two differences, both on purpose:
//! - Shadow is a mode, not a state: the breaker keeps its state machine and runs it as it
//!   would enforcing (it trips, serves its breaks, probes and closes, and raises each of those
//!   transitions), and only what a refusal becomes changes: an uncounted admission, counted in
//!   [`Snapshot::shadow_refusals`]. So `state()` and `snapshot().state` report the state it is
//!   in (an open shadow breaker reads open, and its health unhealthy: the dependency's health,
//!   not whether calls are let through), and [`Snapshot::shadow`] the mode. resilience4j's
//!   METRICS_ONLY has no break and no probes: switching back to enforcing there starts from
//!   closed; here it starts from wherever the state machine is, with the break it is serving.
//! - The switch raises no transition event, as no control does (DESIGN §2 "Control": no call
//!   caused it): it is a manual action, shown as [`ManualAction::Shadow`] or
//!   [`ManualAction::Enforce`] in the snapshot and, with `tracing`, traced. resilience4j raises
//!   a state transition for it; a listener here that must know watches the snapshot.
//!
//! The counts are carried, both ways: the trip window, the consecutive failures, the
//! consecutive opens (the break's growth), the break being served, the refused count of the
//! state episode, the baselines. resilience4j resets its metrics on entering METRICS_ONLY; here
//! the window counted the same calls in either mode (a shadow breaker counts every call it
//! would have counted enforcing; the ones it would have refused run uncounted, as refused
//! calls are), so there is nothing to discard, and an operator who switches back sees the
//! window that decides the next trip. Calls in flight keep counting: no new generation.
//! [`Breaker::reset`] returns the state and leaves the mode as it is.

use std::time::Duration;

use crate::Breaker;
use crate::breaker::Listener;
use crate::event::Event;
use crate::snapshot::{ManualAction, Snapshot};
use crate::state::State;

impl Breaker {
    /// Calls `listener` on every transition, on the thread of the call that caused it, after
    /// the state changed and with no lock held (the listener list's included): a listener may
    /// subscribe, or call this breaker. A panic in a listener is caught and ignored.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        let mut listeners = crate::loom::lock(&self.shared.listeners);
        let mut list: Vec<Listener> = listeners.iter().flat_map(|l| l.iter().cloned()).collect();
        list.push(std::sync::Arc::new(listener));
        *listeners = Some(std::sync::Arc::from(list));
    }

    /// The state now. Changes nothing and takes no probe slot: an open breaker whose break has
    /// elapsed reports [`State::HalfOpen`] (the next call will be a probe).
    pub fn state(&self) -> State {
        let now = self.shared.hot.clock.recent();
        self.read(|m, _| m.state_at(now))
    }

    /// The state and generation as last published for the hot path: one atomic load, no lock,
    /// no side effect. The generation changes with every transition, so `(state, generation)`
    /// tells whether anything happened since an earlier peek. Unlike [`Breaker::state`], an
    /// open breaker whose break has elapsed reads `Open` here until a call enters half-open.
    /// Safe to call from an [open gate](crate::BreakerBuilder::open_gate) of another breaker.
    pub fn peek(&self) -> (State, u32) {
        let word = self.word();
        (word.state(), word.generation())
    }

    /// The health a health check should report: healthy when closed, degraded while half-open
    /// or recovering, unhealthy when open or isolated.
    pub fn health(&self) -> crate::Health {
        self.state().health()
    }

    /// When the breaker opened, on its clock; `None` while closed or disabled.
    pub fn opened_at(&self) -> Option<Duration> {
        let now = self.shared.hot.clock.recent();
        self.read(|m, _| m.opened_at(now))
    }

    /// What is left of the break being served; `None` unless open.
    pub fn break_remaining(&self) -> Option<Duration> {
        let now = self.shared.hot.clock.recent();
        self.read(|m, _| m.break_remaining(now))
    }

    /// The state and counts, read consistently: successes counted off the lock and not yet
    /// folded are included, as the next locked operation will count them. Changes nothing.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.shared.hot.clock.recent();
        self.read(|m, pending| m.snapshot(now, pending, self.shared.hot.cells.refused()))
    }

    /// Brings the `metrics` feature's gauges (state, failure and slow rates, normal latency)
    /// to what [`Breaker::state`] and [`Breaker::snapshot`] report now. The gauges follow the
    /// breaker's locked operations by themselves; a break that has run out with no call since
    /// shows as half-open only here. Call it before rendering an exposition (on each scrape).
    #[cfg(feature = "metrics")]
    pub fn refresh_metrics(&self) {
        let now = self.shared.hot.clock.recent();
        // Under the lock, as the locked operations set them, so that a refresh racing a
        // transition never leaves an older state's gauge behind the newer one.
        self.read(|m, pending| {
            let snapshot = m.snapshot(now, pending, self.shared.hot.cells.refused());
            crate::contained::contained(|| self.shared.metrics.set_gauges(&snapshot));
        });
    }

    /// What a successful call normally takes, as this breaker measures it: the configured
    /// quantile (default the median) of successful durations over the baseline window.
    /// `None` until 20 timed successes have been merged, and while the breaker is not adaptive;
    /// the relative slow-call trip is not armed until then either. Below 8,192 calls per trip
    /// window every call is timed; above it, without an absolute slow-call threshold, one
    /// call in eight, drawn at random. As the breaker uses it: samples are
    /// merged at every locked operation until armed, then at least once a second.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Settings, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("search")
    ///     .settings(Settings::builder().adaptive(true).build()?)
    ///     .clock(clock.clone())
    ///     .build();
    /// for _ in 0..160 {
    ///     let permit = breaker.try_acquire().unwrap();
    ///     clock.advance(Duration::from_millis(20));
    ///     permit.success();
    /// }
    /// let normal = breaker.normal_latency().unwrap();
    /// assert!(normal > Duration::from_millis(18) && normal < Duration::from_millis(22));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn normal_latency(&self) -> Option<Duration> {
        self.read(|m, _| m.normal_latency())
    }

    /// How often calls normally fail, as this breaker measures it: counted failures over
    /// counted outcomes (while closed) over the baseline window. `None` until 100 outcomes
    /// have landed, and while the breaker is not adaptive; the relative failure trip is not
    /// armed until then either.
    ///
    /// ```
    /// use cutout::{Breaker, Settings, clock::ManualClock};
    ///
    /// let breaker = Breaker::builder("search")
    ///     .settings(Settings::builder().adaptive(true).consecutive_failures(None).build()?)
    ///     .clock(ManualClock::new())
    ///     .build();
    /// for i in 0..100 {
    ///     let _ = breaker.call(|| if i % 25 == 0 { Err(()) } else { Ok(()) });
    /// }
    /// assert_eq!(breaker.normal_failure_rate(), Some(0.04));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn normal_failure_rate(&self) -> Option<f64> {
        let now = self.shared.hot.clock.recent();
        self.read(|m, pending| m.normal_failure_rate(now, pending.0))
    }

    /// Forces the breaker open until [`Breaker::reset`]. Raises no event; shows as
    /// [`ManualAction::Isolate`] in the snapshot.
    pub fn isolate(&self) {
        let now = self.shared.hot.clock.recent();
        self.control(now, ManualAction::Isolate, |m| {
            m.isolate(now);
            true
        });
    }

    /// Lets every call through and records nothing until [`Breaker::reset`]. Raises no event;
    /// shows as [`ManualAction::Disable`] in the snapshot.
    pub fn disable(&self) {
        let now = self.shared.hot.clock.recent();
        self.control(now, ManualAction::Disable, |m| {
            m.disable(now);
            true
        });
    }

    /// Back to the configured [initial state](crate::Settings::initial_state) (closed unless
    /// configured disabled or isolated) with an empty window and no break growth. Calls in
    /// flight from before are not counted. Raises no event; shows as [`ManualAction::Reset`]
    /// in the snapshot. The breaker's [reset hook](crate::BreakerBuilder::on_reset), if it
    /// has one, is told under the same lock.
    pub fn reset(&self) {
        let now = self.shared.hot.clock.recent();
        self.control(now, ManualAction::Reset, |m| {
            m.reset(now);
            if let Some(hook) = &self.shared.hot.on_reset {
                // User code under the lock, as an open gate is: a panic is contained, so it
                // can never poison the lock, and the reset stands.
                let _ = crate::contained::contained(|| hook(&self.shared.id));
            }
            true
        });
    }

    /// Switches into shadow mode: the breaker keeps counting and running its trip rules, its
    /// transitions are raised as before, and it refuses nothing: a call it would have refused
    /// (open, isolated, half-open with every probe slot taken, a ramp's or throttling's
    /// refusal) runs uncounted and is counted in
    /// [`Snapshot::shadow_refusals`]. Returns whether the mode changed (`false` when already
    /// in shadow mode: nothing is noted). A disabled breaker lets everything through either
    /// way.
    ///
    /// resilience4j's METRICS_ONLY, as a mode rather than a state: the state machine runs on
    /// (an open breaker serves its break, then probes), `state()` reports the state it is in
    /// and [`Snapshot::shadow`] the mode. Like every control it raises no transition event (no
    /// call caused it): it shows as [`ManualAction::Shadow`] in the snapshot and, with
    /// `tracing`, in a trace. Every count is carried, both ways (resilience4j resets its
    /// metrics here): the window, the consecutive failures, the consecutive opens, the break
    /// being served, the state episode's refused count; calls in flight keep counting.
    /// [`Breaker::reset`] leaves the mode as it is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, ManualAction, State, clock::ManualClock};
    ///
    /// let breaker = Breaker::builder("ledger").clock(ManualClock::new()).build();
    /// breaker.open_for(Duration::from_secs(30));
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_err(), "refused while open");
    /// assert!(breaker.shadow());
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok(), "let through in shadow mode");
    /// let snapshot = breaker.snapshot();
    /// assert_eq!(snapshot.state, State::Open, "the state machine runs on");
    /// assert_eq!(snapshot.shadow_refusals, 1);
    /// assert_eq!(snapshot.last_manual_action, Some(ManualAction::Shadow));
    /// assert!(breaker.enforce());
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_err(), "refused again");
    /// ```
    pub fn shadow(&self) -> bool {
        self.switch_shadow(true)
    }

    /// Switches out of shadow mode: refusals are enforced again, from the state the breaker
    /// is in (an open breaker refuses at once, with what is left of its break). Returns
    /// whether the mode changed (`false` when already enforcing). Raises no event; shows as
    /// [`ManualAction::Enforce`] in the snapshot. Every count is carried.
    pub fn enforce(&self) -> bool {
        self.switch_shadow(false)
    }

    /// Whether the breaker is in shadow mode: one atomic load, no lock (the mode is published
    /// in the state word).
    pub fn is_shadow(&self) -> bool {
        self.word().is_shadow()
    }

    fn switch_shadow(&self, on: bool) -> bool {
        let now = self.shared.hot.clock.recent();
        let action = if on {
            ManualAction::Shadow
        } else {
            ManualAction::Enforce
        };
        self.control(now, action, |m| m.set_shadow(on, now))
    }

    /// Opens the breaker for `duration` from now, then lets it half-open as after any break
    /// (resilience4j's `transitionToOpenStateFor`): the first call once it has elapsed is a
    /// probe. Returns whether it opened.
    ///
    /// - A control, like [`Breaker::isolate`]: no call caused it, so it raises no transition
    ///   event, runs no trip rule and passes no [open gate](crate::BreakerBuilder::open_gate).
    ///   It shows as [`ManualAction::OpenFor`] in the snapshot (and, with `tracing`, a trace).
    /// - No break growth: the consecutive opens stay as they were, so a probe that fails
    ///   afterwards re-opens with the break the breaker's own last opening would have grown to
    ///   (the first break, from closed). The duration is not capped by `max_break_duration` and
    ///   carries no jitter: it is exactly what the refusals' retry-after counts down.
    /// - From closed, half-open or recovering it opens now (probes and ramp calls in flight
    ///   are not counted); an open breaker keeps its opening time and serves the new end
    ///   instead of its own break, sooner or later.
    /// - An isolated breaker stays isolated (isolation is stronger: it ends only with
    ///   [`Breaker::reset`]) and a disabled one stays disabled: both return `false` and change
    ///   nothing.
    /// - [`Duration::ZERO`] opens for no time: the next call half-opens it. A duration beyond
    ///   the clock's range saturates (open for about 584 years, on a clock that started at 0).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, ManualAction, RejectReason, State, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("payments").clock(clock.clone()).build();
    /// assert!(breaker.open_for(Duration::from_secs(30)));
    /// let refused = breaker.call(|| Ok::<_, ()>(())).unwrap_err();
    /// let refused = refused.rejection().unwrap();
    /// assert_eq!(refused.reason(), RejectReason::Open);
    /// assert_eq!(refused.retry_after(), Some(Duration::from_secs(30)));
    /// assert_eq!(breaker.snapshot().last_manual_action, Some(ManualAction::OpenFor));
    ///
    /// clock.advance(Duration::from_secs(30));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// assert!(breaker.try_acquire().unwrap().is_probe());
    /// ```
    pub fn open_for(&self, duration: Duration) -> bool {
        let now = self.shared.hot.clock.recent();
        let until = now.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        self.control(now, ManualAction::OpenFor, |m| {
            m.force_open(now, until, ManualAction::OpenFor)
        })
    }

    /// Opens the breaker until `instant`, then lets it half-open as after any break
    /// (resilience4j's `transitionToOpenStateUntil`). Returns whether it opened.
    ///
    /// `instant` is a time on the breaker's clock, as [`Event::at`] and
    /// [`Breaker::opened_at`] read it: `event.at + Duration::from_secs(60)`, or for a
    /// breaker on the default clock `Duration::from_nanos(SystemClock.now())` plus a delay
    /// ([`SystemClock`](crate::clock::SystemClock), [`Clock::now`](crate::clock::Clock::now)).
    /// An instant already past opens for no time: the next call half-opens the breaker.
    /// Otherwise as [`Breaker::open_for`] (from which states it opens, no event, no growth);
    /// it shows as [`ManualAction::OpenUntil`] in the snapshot.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, State, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("ledger").clock(clock.clone()).build();
    /// clock.advance(Duration::from_secs(100));
    /// // Maintenance window: closed for traffic until t = 160 s on the breaker's clock.
    /// assert!(breaker.open_until(Duration::from_secs(160)));
    /// assert_eq!(breaker.break_remaining(), Some(Duration::from_secs(60)));
    /// assert_eq!(breaker.opened_at(), Some(Duration::from_secs(100)));
    ///
    /// breaker.isolate();
    /// assert!(!breaker.open_until(Duration::from_secs(200)), "isolation is stronger");
    /// assert_eq!(breaker.state(), State::Isolated);
    /// ```
    pub fn open_until(&self, instant: Duration) -> bool {
        let now = self.shared.hot.clock.recent();
        let until = u64::try_from(instant.as_nanos()).unwrap_or(u64::MAX);
        self.control(now, ManualAction::OpenUntil, |m| {
            m.force_open(now, until, ManualAction::OpenUntil)
        })
    }
}

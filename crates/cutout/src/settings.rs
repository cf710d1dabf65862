//! [`Settings`]: what trips a breaker, how long it breaks, how it probes; built and validated
//! through [`SettingsBuilder`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::State;
use crate::error::{ConfigError, ErrorCode};
use crate::machine::ramp::Recovery;
use crate::relative::{Failures, SlowCalls};

/// The trip span a count window stands for when sizing a default baseline window.
const COUNT_WINDOW_SPAN: Duration = Duration::from_secs(30);

/// The largest count window accepted, so a typo cannot allocate gigabytes.
pub const MAX_COUNT_WINDOW: u32 = cutout_keys::range::MAX_COUNT_WINDOW;

/// The sliding window the trip ratios are measured over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TripWindow {
    /// The last `n` counted calls.
    Count(u32),
    /// The calls of the last duration, kept in buckets: one bucket per second of the window,
    /// at least 10 and at most 60 buckets; a bucket drops out whole, so the window covers
    /// between `duration − bucket` and `duration` of history.
    Time(Duration),
}

/// How much randomness a break carries, so a fleet that opened together does not probe
/// together.
///
/// New kinds may be added (the enum is `#[non_exhaustive]`): match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// Half the computed break plus a uniform draw of up to the other half (the default): keeps
    /// a floor under the time the dependency is left alone.
    #[default]
    Equal,
    /// A uniform draw between zero and the computed break.
    Full,
    /// Exactly the computed break (for tests).
    None,
}

/// How half-open probes decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HalfOpenRule {
    /// Up to `half_open_probes` probes in flight at once; `probe_successes` successes close the
    /// breaker; any counted failure or slow probe re-opens it (the default).
    #[default]
    Consecutive,
    /// resilience4j's rule: admit `half_open_probes` probes in total, and when all have
    /// finished, re-open if their failure rate reaches the failure ratio (50% when none is set)
    /// or their slow rate reaches the slow-call ratio; close otherwise.
    Rates,
}

/// What running out of [`max_wait_in_half_open`](Settings::max_wait_in_half_open) does: the
/// first call after half-open has lasted that long decides it (configuration key
/// `half-open-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HalfOpenTimeout {
    /// Re-open with a grown break, as a failed probe would (the default, `"open"`): the call
    /// is refused and the [`Opened`](crate::Transition::Opened) event's reason is
    /// [`OpenReason::HalfOpenTimeout`](crate::OpenReason::HalfOpenTimeout).
    #[default]
    Open,
    /// Close, as successful probes would (`"close"`): the break growth resets, a recovery ramp
    /// starts if one is configured, the [`Closed`](crate::Transition::Closed) event is raised
    /// from half-open and the call is admitted as the closed (or ramping) breaker's. Outcomes
    /// of probes still in flight are dropped (they belong to the half-open period). For
    /// dependencies whose probes hang rather than fail, where a hung probe should not keep
    /// everyone out.
    Close,
}

impl HalfOpenTimeout {
    /// The stable name, as configuration files write it (`"open"`, `"close"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            HalfOpenTimeout::Open => "open",
            HalfOpenTimeout::Close => "close",
        }
    }
}

/// The state a breaker starts in, and that [`Breaker::reset`](crate::Breaker::reset) returns
/// it to (configuration key `initial-state`).
///
/// `enabled = false` is another way to write [`InitialState::Disabled`]; see
/// [`SettingsBuilder::enabled`] for how the two combine.
///
/// It follows [`State`], so new initial states may be added (the enum is
/// `#[non_exhaustive]`): match with a wildcard arm, or on [`state`](InitialState::state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum InitialState {
    /// Closed: calls flow and are counted (the default, `"closed"`).
    #[default]
    Closed,
    /// Disabled: every call passes and nothing is recorded (`"disabled"`).
    Disabled,
    /// Isolated: every call is refused, as after [`Breaker::isolate`](crate::Breaker::isolate)
    /// (`"isolated"`). For a dependency that must be switched on by hand: [`Breaker::reset`]
    /// returns to isolated too, so only [`Breaker::disable`] or a breaker built with other
    /// settings lets calls through.
    ///
    /// [`Breaker::reset`]: crate::Breaker::reset
    /// [`Breaker::disable`]: crate::Breaker::disable
    Isolated,
}

impl InitialState {
    /// The stable name, as configuration files write it (`"closed"`, `"disabled"`,
    /// `"isolated"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            InitialState::Closed => "closed",
            InitialState::Disabled => "disabled",
            InitialState::Isolated => "isolated",
        }
    }

    /// The breaker state this starts in.
    pub const fn state(self) -> State {
        match self {
            InitialState::Closed => State::Closed,
            InitialState::Disabled => State::Disabled,
            InitialState::Isolated => State::Isolated,
        }
    }
}

/// A break schedule of your own: the computed break (before jitter) for the n-th consecutive
/// open, n counting from 1, or for the [`BreakContext`] of the opening (the consecutive opens
/// and the counts that decided it, as Polly's break-duration generator is given them).
/// Replaces the growth by [`break_multiplier`](Settings::break_multiplier); see
/// [`SettingsBuilder::break_schedule`].
///
/// Clones share the function. Two schedules are equal when they are clones of one another
/// (the function itself cannot be compared), so a [`Registry`](crate::Registry) sees the
/// settings of two calls as the same only when they share the schedule.
#[derive(Clone)]
pub struct BreakSchedule(Arc<dyn Fn(&BreakContext) -> Duration + Send + Sync>);

/// What a [`BreakSchedule`] made with [`BreakSchedule::with_context`] is given at an opening:
/// the consecutive opens and the counts that decided it. New fields may be added (the struct
/// is `#[non_exhaustive]`): build one with [`BreakContext::new`].
///
/// The counts are the ones the snapshot shows as the breaker opens:
/// - from closed (a trip rule, a signal), the trip window's calls and failures, the call
///   that tripped it included;
/// - from half-open (a failed or slow probe, the probes' rates, the maximum wait run out), the
///   probes' counts, since half-open starts fresh counts;
/// - from a recovery ramp (a ramp call failed), none: the window starts empty when the ramp
///   does, and ramp calls are judged one at a time, not counted in it.
///
/// The window is read as it stands at the opening: a schedule sees neither the baselines nor
/// slow calls (a slow-call trip shows the failures among its calls, often none), and with a
/// time window only what the window still holds.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BreakContext {
    /// The consecutive opens, this one included (1 for the first since the breaker last
    /// closed fully): what [`BreakSchedule::new`]'s function is given.
    pub consecutive_opens: u32,
    /// Counted calls in the window that decided (see above).
    pub calls: u64,
    /// Counted failures among them.
    pub failures: u64,
    /// `failures / calls`, 0 when there are no calls.
    pub failure_rate: f64,
}

impl BreakContext {
    /// The context of the `consecutive_opens`-th consecutive open after `failures` of `calls`
    /// failed (for a schedule's own tests; the breaker builds its own). `failure_rate` is
    /// computed, 0 when `calls` is 0.
    pub fn new(consecutive_opens: u32, calls: u64, failures: u64) -> BreakContext {
        let failure_rate = if calls == 0 {
            0.0
        } else {
            failures as f64 / calls as f64
        };
        BreakContext {
            consecutive_opens,
            calls,
            failures,
            failure_rate,
        }
    }
}

impl BreakSchedule {
    /// A schedule from a function of the consecutive-open count (1 for the first open).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::BreakSchedule;
    ///
    /// // Fibonacci-like steps in seconds: 5, 8, 13, 21, then 30 from there on.
    /// let steps = BreakSchedule::new(|opens| {
    ///     let secs = [5, 8, 13, 21];
    ///     let step = opens.saturating_sub(1) as usize;
    ///     Duration::from_secs(secs.get(step).copied().unwrap_or(30))
    /// });
    /// assert_eq!(steps.break_for(2), Duration::from_secs(8));
    /// ```
    pub fn new(schedule: impl Fn(u32) -> Duration + Send + Sync + 'static) -> BreakSchedule {
        BreakSchedule(Arc::new(move |context: &BreakContext| {
            schedule(context.consecutive_opens)
        }))
    }

    /// A schedule from a function of the opening's [`BreakContext`]: the consecutive opens
    /// and the calls and failures that decided it (Polly's break-duration generator). As for
    /// [`BreakSchedule::new`], what it returns is capped at `max_break_duration` and jittered,
    /// and a panic in it serves the multiplier's break instead. Validation asks it about the
    /// first 16 opens with no calls (`CUT-CFG-016` if the break shrinks as the opens grow);
    /// how it answers to the counts is its own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{BreakContext, BreakSchedule};
    ///
    /// // 10 s, plus up to 100 s as the failure rate goes to 1; doubled per consecutive open.
    /// let by_rate = BreakSchedule::with_context(|c: &BreakContext| {
    ///     let secs = (10.0 + 100.0 * c.failure_rate) * f64::from(1u32 << c.consecutive_opens.min(8));
    ///     Duration::from_secs_f64(secs / 2.0)
    /// });
    /// assert_eq!(by_rate.break_at(&BreakContext::new(1, 20, 10)), Duration::from_secs(60));
    /// assert_eq!(by_rate.break_at(&BreakContext::new(1, 20, 20)), Duration::from_secs(110));
    /// ```
    pub fn with_context(
        schedule: impl Fn(&BreakContext) -> Duration + Send + Sync + 'static,
    ) -> BreakSchedule {
        BreakSchedule(Arc::new(schedule))
    }

    /// The function's break for the `opens`-th consecutive open, as it returns it (neither
    /// capped nor jittered: the breaker does both). A schedule made with
    /// [`BreakSchedule::with_context`] is asked with no calls (`BreakContext::new(opens, 0, 0)`).
    pub fn break_for(&self, opens: u32) -> Duration {
        self.break_at(&BreakContext::new(opens, 0, 0))
    }

    /// The function's break for an opening of this `context`, as it returns it (neither
    /// capped nor jittered). A schedule made with [`BreakSchedule::new`] reads the consecutive
    /// opens alone.
    pub fn break_at(&self, context: &BreakContext) -> Duration {
        (self.0)(context)
    }

    /// Opens the validation asks the function about: a break that shrinks from one open to
    /// the next is a mistake (a flapping dependency would be probed ever more often).
    const CHECKED_OPENS: u32 = 16;

    /// `CUT-CFG-016` unless the break never shrinks over the first
    /// [`CHECKED_OPENS`](Self::CHECKED_OPENS) opens. A constant schedule is fine (as a
    /// multiplier of 1 is); an open whose call panics is skipped (the breaker serves the
    /// multiplier's break there), and the breaks on either side of it are compared.
    fn check_grows(&self) -> Result<(), ConfigError> {
        // Each answered break against the last one answered before it: an open whose call
        // panicked is served the multiplier's break, and the schedule resumes after it.
        let mut last: Option<Duration> = None;
        for opens in 1..=Self::CHECKED_OPENS {
            let Some(next) = crate::contained::contained(|| self.break_for(opens)) else {
                continue;
            };
            if let Some(before) = last
                && next < before
            {
                return Err(ConfigError::new(
                    ErrorCode::BreakScheduleShrinks,
                    "break-schedule",
                    (before, next),
                    "a schedule whose break never shrinks from one consecutive open to the next",
                ));
            }
            last = Some(next);
        }
        Ok(())
    }
}

/// `CUT-CFG-017` for a throttling multiple below 1 or not finite, `CUT-CFG-006` for
/// throttling over a count window.
fn check_throttle(multiple: f64, window: TripWindow) -> Result<(), ConfigError> {
    if !cutout_keys::range::throttle(multiple) {
        return Err(ConfigError::new(
            ErrorCode::ThrottleMultipleOutOfRange,
            "throttle",
            multiple,
            cutout_keys::range::THROTTLE,
        ));
    }
    if matches!(window, TripWindow::Count(_)) {
        return Err(ConfigError::new(
            ErrorCode::Contradiction,
            "throttle",
            multiple,
            "a time window (window-type = \"time\"): throttling counts its refusals over time",
        ));
    }
    Ok(())
}

impl fmt::Debug for BreakSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BreakSchedule(..)")
    }
}

impl PartialEq for BreakSchedule {
    fn eq(&self, other: &BreakSchedule) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A breaker's settings. Build with [`Settings::builder`]; every instance is valid.
///
/// Every setting, with its default ([`Settings::default`]) and its key in configuration files
/// (`cutout::config`, feature `serde`, which lists each key's allowed values):
///
/// | setting ([`SettingsBuilder`] method) | file key | default |
/// |---|---|---|
/// | [`consecutive_failures`](SettingsBuilder::consecutive_failures) | `consecutive-failures` | 5 |
/// | [`failure_ratio`](SettingsBuilder::failure_ratio) | `failure-ratio` | off |
/// | [`minimum_calls`](SettingsBuilder::minimum_calls) | `minimum-calls` | 20 |
/// | [`window`](SettingsBuilder::window) | `window-type`, `window-size`, `window-duration` | a 30 s time window |
/// | [`slow_call_threshold`](SettingsBuilder::slow_call_threshold) | `slow-call-threshold` | off |
/// | [`slow_call_ratio`](SettingsBuilder::slow_call_ratio) | `slow-call-ratio` | 0.5 |
/// | [`break_duration`](SettingsBuilder::break_duration) | `break-duration` | 15 s |
/// | [`max_break_duration`](SettingsBuilder::max_break_duration) | `max-break-duration` | 2 min |
/// | [`break_multiplier`](SettingsBuilder::break_multiplier) | `break-multiplier` | 2 (doubling) |
/// | [`break_schedule`](SettingsBuilder::break_schedule) | (code only) | none |
/// | [`jitter`](SettingsBuilder::jitter) | `jitter` | equal |
/// | [`half_open_probes`](SettingsBuilder::half_open_probes) | `half-open-probes` | 1 |
/// | [`probe_successes`](SettingsBuilder::probe_successes) | `probe-successes` | 2 |
/// | [`half_open_rule`](SettingsBuilder::half_open_rule) | `half-open-rule` | consecutive |
/// | [`max_wait_in_half_open`](SettingsBuilder::max_wait_in_half_open) | `max-wait-in-half-open` | 60 s |
/// | [`half_open_timeout`](SettingsBuilder::half_open_timeout) | `half-open-timeout` | open (re-open) |
/// | [`shadow`](SettingsBuilder::shadow) | `shadow` | `false` |
/// | [`initial_state`](SettingsBuilder::initial_state) / [`enabled`](SettingsBuilder::enabled) | `initial-state` / `enabled` | closed |
/// | [`adaptive`](SettingsBuilder::adaptive) | `adaptive` | `true` |
/// | [`slow_calls`](SettingsBuilder::slow_calls) | `slow-calls`, `slow-calls-multiple`, `-quantile`, `-floor`, `-margin`, `latency-baseline-window` | above 3 × the median latency and 50 ms over it, floor 1 ms, baseline over 10 × the trip window |
/// | [`failures`](SettingsBuilder::failures) | `failures`, `failures-multiple`, `-floor`, `failure-baseline-window` | above 5 × the normal failure rate, floor 5%, baseline over 10 × the trip window |
/// | [`recovery`](SettingsBuilder::recovery) | `recovery`, `recovery-fraction`, `-initial-fraction`, `-min-duration`, `-max-duration` | off |
/// | [`throttle`](SettingsBuilder::throttle) | `throttle` | off (the binary breaker) |
///
/// What the defaults cost on the healthy path (BENCHMARKS.md): a count window full of
/// successes with no latency rule, two loads; the default time window with the adaptive
/// rules, about 10–25 ns a call (a count on its core's line and, one call in eight, a clock
/// read and a latency sample).
///
/// ```
/// use std::time::Duration;
/// use cutout::{Settings, TripWindow};
///
/// let settings = Settings::builder()
///     .consecutive_failures(3)
///     .failure_ratio(Some(0.5))
///     .window(TripWindow::Count(10))
///     .minimum_calls(10)
///     .break_duration(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(settings.minimum_calls(), 10);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[cfg_attr(
    feature = "serde",
    doc = "",
    doc = "With the `serde` feature, `Settings` is also [`Deserialize`](serde::Deserialize): a breaker",
    doc = "table in a configuration of your own, with the keys, codes and messages of",
    doc = "[configuration files](crate::config#a-breaker-table-in-your-own-configuration)."
)]
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub(crate) consecutive_failures: Option<u32>,
    pub(crate) failure_ratio: Option<f64>,
    pub(crate) minimum_calls: u32,
    pub(crate) window: TripWindow,
    pub(crate) slow_call_threshold: Option<Duration>,
    pub(crate) slow_call_ratio: f64,
    pub(crate) break_duration: Duration,
    pub(crate) max_break_duration: Duration,
    pub(crate) break_multiplier: f64,
    pub(crate) break_schedule: Option<BreakSchedule>,
    pub(crate) jitter: Jitter,
    pub(crate) half_open_probes: u32,
    pub(crate) probe_successes: u32,
    pub(crate) half_open_rule: HalfOpenRule,
    pub(crate) max_wait_in_half_open: Option<Duration>,
    pub(crate) half_open_timeout: HalfOpenTimeout,
    pub(crate) shadow: bool,
    pub(crate) initial_state: InitialState,
    pub(crate) adaptive: bool,
    pub(crate) slow_calls: Option<SlowCalls>,
    pub(crate) failures: Option<Failures>,
    pub(crate) recovery: Option<Recovery>,
    /// Adaptive throttling's multiple K instead of opening (see [`SettingsBuilder::throttle`]);
    /// 0 when off (an `f64` rather than an `Option`: 8 bytes of a default breaker's 4 KiB;
    /// the builder keeps the `Option` it was given, so that a 0 is reported as given).
    throttle: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            consecutive_failures: Some(5),
            failure_ratio: None,
            minimum_calls: 20,
            window: TripWindow::Time(Duration::from_secs(30)),
            slow_call_threshold: None,
            slow_call_ratio: 0.5,
            break_duration: Duration::from_secs(15),
            max_break_duration: Duration::from_secs(120),
            break_multiplier: 2.0,
            break_schedule: None,
            jitter: Jitter::Equal,
            half_open_probes: 1,
            probe_successes: 2,
            half_open_rule: HalfOpenRule::Consecutive,
            max_wait_in_half_open: Some(Duration::from_secs(60)),
            half_open_timeout: HalfOpenTimeout::Open,
            shadow: false,
            initial_state: InitialState::Closed,
            adaptive: true,
            slow_calls: Some(SlowCalls::above(3.0)),
            failures: Some(Failures::above(5.0)),
            recovery: None,
            throttle: 0.0,
        }
    }
}

impl Settings {
    /// A builder starting from the defaults.
    pub fn builder() -> SettingsBuilder {
        Settings::default().into_builder()
    }

    /// A builder starting from these settings.
    pub fn to_builder(&self) -> SettingsBuilder {
        self.clone().into_builder()
    }

    fn into_builder(self) -> SettingsBuilder {
        SettingsBuilder {
            throttle: self.throttle(),
            settings: self,
            enabled: None,
            initial_state: None,
        }
    }

    /// Consecutive counted failures that open the breaker (default 5; `None`: off).
    pub fn consecutive_failures(&self) -> Option<u32> {
        self.consecutive_failures
    }
    /// The absolute failure ratio over the trip window that opens it (default off).
    pub fn failure_ratio(&self) -> Option<f64> {
        self.failure_ratio
    }
    /// Calls the window must hold before a ratio is evaluated (default 20), as configured.
    pub fn minimum_calls(&self) -> u32 {
        self.minimum_calls
    }
    /// The minimum calls in force: capped at the size of a count window.
    pub fn effective_minimum_calls(&self) -> u32 {
        match self.window {
            TripWindow::Count(size) => self.minimum_calls.min(size),
            TripWindow::Time(_) => self.minimum_calls,
        }
    }
    /// The trip window (default: 30 s of time).
    pub fn window(&self) -> TripWindow {
        self.window
    }
    /// Calls above this duration are slow (default off).
    pub fn slow_call_threshold(&self) -> Option<Duration> {
        self.slow_call_threshold
    }
    /// The slow share of the window that opens the breaker (default 0.5).
    pub fn slow_call_ratio(&self) -> f64 {
        self.slow_call_ratio
    }
    /// The first break (default 15 s).
    pub fn break_duration(&self) -> Duration {
        self.break_duration
    }
    /// The longest break (default 2 min): the cap on every computed break, grown by the
    /// multiplier or given by a [`BreakSchedule`].
    pub fn max_break_duration(&self) -> Duration {
        self.max_break_duration
    }
    /// How much each consecutive open multiplies the break by (default 2: the break doubles);
    /// 1 keeps it constant.
    pub fn break_multiplier(&self) -> f64 {
        self.break_multiplier
    }
    /// The break schedule of your own that replaces the multiplier's growth (default none).
    pub fn break_schedule(&self) -> Option<&BreakSchedule> {
        self.break_schedule.as_ref()
    }
    /// The jitter applied to each break (default [`Jitter::Equal`]).
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }
    /// Probes in flight at once in half-open, or in total under [`HalfOpenRule::Rates`]
    /// (default 1).
    pub fn half_open_probes(&self) -> u32 {
        self.half_open_probes
    }
    /// Successful probes that close the breaker (default 2).
    pub fn probe_successes(&self) -> u32 {
        self.probe_successes
    }
    /// How probes decide (default [`HalfOpenRule::Consecutive`]).
    pub fn half_open_rule(&self) -> HalfOpenRule {
        self.half_open_rule
    }
    /// How long half-open may last before the next call decides it as
    /// [`half_open_timeout`](Settings::half_open_timeout) says: by default, re-opens the
    /// breaker (default 60 s).
    pub fn max_wait_in_half_open(&self) -> Option<Duration> {
        self.max_wait_in_half_open
    }
    /// What running out of [`max_wait_in_half_open`](Settings::max_wait_in_half_open) does
    /// (default [`HalfOpenTimeout::Open`]: re-open).
    pub fn half_open_timeout(&self) -> HalfOpenTimeout {
        self.half_open_timeout
    }
    /// Whether the breaker only observes: it evaluates, changes state and raises events, but
    /// never refuses a call (default false).
    pub fn shadow(&self) -> bool {
        self.shadow
    }
    /// Whether the breaker starts enabled (default true): false exactly when the
    /// [initial state](Settings::initial_state) is [`InitialState::Disabled`], which a
    /// disabled breaker starts in and resets to.
    pub fn enabled(&self) -> bool {
        self.initial_state != InitialState::Disabled
    }
    /// The state the breaker starts in and [`reset`](crate::Breaker::reset) returns it to
    /// (default [`InitialState::Closed`]).
    pub fn initial_state(&self) -> InitialState {
        self.initial_state
    }

    /// Whether the breaker measures the dependency (default true): `false` turns both
    /// relative trips off at once.
    pub fn adaptive(&self) -> bool {
        self.adaptive
    }
    /// Slow calls relative to the measured normal latency (default: above 3 × the median and 50 ms over it).
    pub fn slow_calls(&self) -> Option<SlowCalls> {
        self.slow_calls
    }
    /// Failures relative to the measured normal rate (default: above 5 × the rate).
    pub fn failures(&self) -> Option<Failures> {
        self.failures
    }

    /// The recovery ramp after successful probes (default off: the breaker closes at once).
    pub fn recovery(&self) -> Option<Recovery> {
        self.recovery
    }

    /// Adaptive throttling's multiple K, when the breaker throttles instead of opening.
    pub fn throttle(&self) -> Option<f64> {
        (self.throttle != 0.0).then_some(self.throttle)
    }

    /// The relative slow-call rule in force (`None` when off or not adaptive).
    pub(crate) fn relative_slow_calls(&self) -> Option<SlowCalls> {
        self.slow_calls.filter(|_| self.adaptive)
    }

    /// The relative failure rule in force (`None` when off or not adaptive).
    pub(crate) fn relative_failures(&self) -> Option<Failures> {
        self.failures.filter(|_| self.adaptive)
    }

    /// The span the trip window covers (a count window counts as 30 s).
    fn trip_span(&self) -> Duration {
        match self.window {
            TripWindow::Time(span) => span,
            TripWindow::Count(_) => COUNT_WINDOW_SPAN,
        }
    }

    /// The failure baseline's window: as configured, or 10 × the trip window, widened to
    /// `multiple` × the trip window when that is longer.
    pub fn failure_baseline_window(&self) -> Option<Duration> {
        let failures = self.failures?;
        let span = self.trip_span();
        Some(
            failures
                .window
                .unwrap_or_else(|| span.saturating_mul(10).max(scaled(span, failures.multiple))),
        )
    }

    /// The latency baseline's window: as configured, or 10 × the trip window, widened to
    /// 2 × the trip window / quantile when that is longer.
    pub fn latency_baseline_window(&self) -> Option<Duration> {
        let slow = self.slow_calls?;
        let span = self.trip_span();
        Some(slow.window.unwrap_or_else(|| {
            span.saturating_mul(10)
                .max(scaled(span, 2.0 / slow.quantile))
        }))
    }

    /// Whether calls must be timed (a slow-call threshold or the latency baseline).
    pub(crate) fn times_calls(&self) -> bool {
        self.slow_call_threshold.is_some() || self.relative_slow_calls().is_some()
    }

    /// Checks every key; the first invalid one is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(n) = self.consecutive_failures {
            count("consecutive-failures", n)?;
        }
        if let Some(ratio) = self.failure_ratio {
            ratio_in_range("failure-ratio", ratio)?;
        }
        count("minimum-calls", self.minimum_calls)?;
        match self.window {
            TripWindow::Count(size) => {
                count("window-size", size)?;
                if size > MAX_COUNT_WINDOW {
                    return Err(ConfigError::new(
                        ErrorCode::WindowTooLarge,
                        "window-size",
                        size,
                        cutout_keys::range::WINDOW_SIZE,
                    ));
                }
            }
            TripWindow::Time(duration) => positive("window-duration", duration)?,
        }
        if let Some(threshold) = self.slow_call_threshold {
            positive("slow-call-threshold", threshold)?;
        }
        ratio_in_range("slow-call-ratio", self.slow_call_ratio)?;
        positive("break-duration", self.break_duration)?;
        if self.max_break_duration < self.break_duration {
            return Err(ConfigError::new(
                ErrorCode::MaxBreakBelowBreak,
                "max-break-duration",
                self.max_break_duration,
                "a duration at least break-duration",
            ));
        }
        // A multiplier below 1 would shrink the break with every consecutive open. NaN fails
        // the comparison and is rejected with the rest; so is infinity (use
        // max-break-duration for "the first break, then the longest").
        if !cutout_keys::range::break_multiplier(self.break_multiplier) {
            return Err(ConfigError::new(
                ErrorCode::BreakMultiplierOutOfRange,
                "break-multiplier",
                self.break_multiplier,
                cutout_keys::range::BREAK_MULTIPLIER,
            ));
        }
        if let Some(schedule) = &self.break_schedule {
            schedule.check_grows()?;
        }
        if let Some(multiple) = self.throttle() {
            check_throttle(multiple, self.window)?;
        }
        count("half-open-probes", self.half_open_probes)?;
        count("probe-successes", self.probe_successes)?;
        if !cutout_keys::range::probes(u64::from(self.half_open_probes)) {
            return Err(ConfigError::new(
                ErrorCode::Contradiction,
                "half-open-probes",
                self.half_open_probes,
                cutout_keys::range::PROBES,
            ));
        }
        if let Some(wait) = self.max_wait_in_half_open {
            positive("max-wait-in-half-open", wait)?;
        }
        self.validate_relative()?;
        self.validate_recovery()
    }

    fn validate_recovery(&self) -> Result<(), ConfigError> {
        let Some(recovery) = self.recovery else {
            return Ok(());
        };
        if !cutout_keys::range::recovery_fraction(recovery.fraction) {
            return Err(ConfigError::new(
                ErrorCode::RatioOutOfRange,
                "recovery-fraction",
                recovery.fraction,
                cutout_keys::range::RECOVERY_FRACTION,
            ));
        }
        // At least a thousandth: the fraction a ramp earns grows only with the calls it
        // admits, and a ramp admitting one call in a million would hold a healthy dependency
        // at nothing for hours.
        if !cutout_keys::range::recovery_initial(recovery.initial) {
            return Err(ConfigError::new(
                ErrorCode::RatioOutOfRange,
                "recovery-initial-fraction",
                recovery.initial,
                cutout_keys::range::RECOVERY_INITIAL,
            ));
        }
        positive("recovery-min-duration", recovery.min)?;
        if recovery.max < recovery.min {
            return Err(ConfigError::new(
                ErrorCode::MaxBelowMin,
                "recovery-max-duration",
                recovery.max,
                "a duration at least recovery-min-duration",
            ));
        }
        Ok(())
    }

    fn validate_relative(&self) -> Result<(), ConfigError> {
        let span = self.trip_span();
        if let Some(slow) = self.slow_calls {
            multiple("slow-calls-multiple", slow.multiple)?;
            if !cutout_keys::range::quantile(slow.quantile) {
                return Err(ConfigError::new(
                    ErrorCode::RatioOutOfRange,
                    "slow-calls-quantile",
                    slow.quantile,
                    cutout_keys::range::QUANTILE,
                ));
            }
            if let Some(window) = slow.window {
                positive("latency-baseline-window", window)?;
                // An outage moves a quantile q once it fills a share q of the baseline: the
                // baseline must be longer than trip window / q or it moves first.
                if window.as_secs_f64() <= span.as_secs_f64() / slow.quantile {
                    return Err(ConfigError::new(
                        ErrorCode::BaselineTooShort,
                        "latency-baseline-window",
                        window,
                        "a duration above trip window / slow-calls-quantile",
                    ));
                }
            }
        }
        if let Some(failures) = self.failures {
            multiple("failures-multiple", failures.multiple)?;
            ratio_in_range("failures-floor", failures.floor)?;
            if let Some(window) = failures.window {
                positive("failure-baseline-window", window)?;
                if window.as_secs_f64() < span.as_secs_f64() * failures.multiple {
                    return Err(ConfigError::new(
                        ErrorCode::BaselineTooShort,
                        "failure-baseline-window",
                        window,
                        "a duration of at least failures-multiple × trip window",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `span` × `factor`, saturating at `Duration::MAX` (a multiple may be any finite number above
/// 1) and at `span` for a factor that is not a number above 1.
fn scaled(span: Duration, factor: f64) -> Duration {
    if factor.is_nan() || factor <= 1.0 {
        return span;
    }
    Duration::try_from_secs_f64(span.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

fn multiple(key: &'static str, multiple: f64) -> Result<(), ConfigError> {
    // NaN fails the comparison and is rejected with the rest.
    if cutout_keys::range::multiple(multiple) {
        return Ok(());
    }
    Err(ConfigError::new(
        ErrorCode::MultipleTooSmall,
        key,
        multiple,
        cutout_keys::range::MULTIPLE,
    ))
}

fn count(key: &'static str, n: u32) -> Result<(), ConfigError> {
    if !cutout_keys::range::count(u64::from(n)) {
        return Err(ConfigError::new(
            ErrorCode::CountTooSmall,
            key,
            n,
            cutout_keys::range::COUNT,
        ));
    }
    Ok(())
}

fn ratio_in_range(key: &'static str, ratio: f64) -> Result<(), ConfigError> {
    // NaN fails both comparisons and is rejected with the rest.
    if cutout_keys::range::ratio(ratio) {
        return Ok(());
    }
    Err(ConfigError::new(
        ErrorCode::RatioOutOfRange,
        key,
        ratio,
        cutout_keys::range::RATIO,
    ))
}

fn positive(key: &'static str, duration: Duration) -> Result<(), ConfigError> {
    if duration.is_zero() {
        return Err(ConfigError::new(
            ErrorCode::ZeroDuration,
            key,
            duration,
            cutout_keys::range::POSITIVE,
        ));
    }
    Ok(())
}

/// Builds [`Settings`]; [`SettingsBuilder::build`] validates.
///
/// A setter of a rule that can be off takes the value itself or an `Option` (`None` turns the
/// rule off), so the common case needs no `Some`:
///
/// ```
/// use std::time::Duration;
/// use cutout::Settings;
///
/// let settings = Settings::builder()
///     .consecutive_failures(10)
///     .slow_call_threshold(Duration::from_millis(250))
///     .failure_ratio(None)
///     .build()
///     .unwrap();
/// assert_eq!(settings.consecutive_failures(), Some(10));
/// assert_eq!(settings.slow_call_threshold(), Some(Duration::from_millis(250)));
/// assert_eq!(settings.failure_ratio(), None);
/// ```
#[derive(Debug, Clone)]
pub struct SettingsBuilder {
    settings: Settings,
    /// What this builder was told of the initial state, by [`SettingsBuilder::enabled`] and
    /// [`SettingsBuilder::initial_state`]: the two must agree (see `build`).
    enabled: Option<bool>,
    /// What [`SettingsBuilder::throttle`] was given (checked and stored by `build`).
    throttle: Option<f64>,
    initial_state: Option<InitialState>,
}

impl SettingsBuilder {
    /// Consecutive counted failures that open the breaker; `None` turns the rule off.
    /// Default: `Some(5)`.
    pub fn consecutive_failures(mut self, n: impl Into<Option<u32>>) -> Self {
        let n = n.into();
        self.settings.consecutive_failures = n;
        self
    }
    /// An absolute failure ratio in (0, 1] over the trip window; `None` turns it off.
    /// Inclusive: 0.5 opens at 5 failures of 10.
    /// Default: `None` (the relative failure rule watches the rate instead).
    pub fn failure_ratio(mut self, ratio: impl Into<Option<f64>>) -> Self {
        let ratio = ratio.into();
        self.settings.failure_ratio = ratio;
        self
    }
    /// Calls the window must hold before a ratio is evaluated.
    /// Default: 20.
    pub fn minimum_calls(mut self, n: u32) -> Self {
        self.settings.minimum_calls = n;
        self
    }
    /// The trip window.
    /// Default: a 30 s time window (`TripWindow::Time`).
    pub fn window(mut self, window: TripWindow) -> Self {
        self.settings.window = window;
        self
    }
    /// Calls strictly above this duration are slow, whether they succeeded or failed.
    /// Default: `None` (the relative slow-call rule judges against the measured latency instead).
    pub fn slow_call_threshold(mut self, threshold: impl Into<Option<Duration>>) -> Self {
        let threshold = threshold.into();
        self.settings.slow_call_threshold = threshold;
        self
    }
    /// The slow share of the window, in (0, 1], that opens the breaker. Inclusive.
    /// Default: 0.5.
    pub fn slow_call_ratio(mut self, ratio: f64) -> Self {
        self.settings.slow_call_ratio = ratio;
        self
    }
    /// The first break.
    /// Default: 15 s.
    pub fn break_duration(mut self, duration: Duration) -> Self {
        self.settings.break_duration = duration;
        self
    }
    /// The longest break.
    /// Default: 2 min.
    pub fn max_break_duration(mut self, duration: Duration) -> Self {
        self.settings.max_break_duration = duration;
        self
    }
    /// The jitter on each break.
    /// Default: [`Jitter::Equal`].
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.settings.jitter = jitter;
        self
    }
    /// Probes in flight at once (or in total under [`HalfOpenRule::Rates`]).
    /// Default: 1.
    pub fn half_open_probes(mut self, n: u32) -> Self {
        self.settings.half_open_probes = n;
        self
    }
    /// Successful probes that close the breaker.
    /// Default: 2.
    pub fn probe_successes(mut self, n: u32) -> Self {
        self.settings.probe_successes = n;
        self
    }
    /// How probes decide.
    /// Default: [`HalfOpenRule::Consecutive`].
    pub fn half_open_rule(mut self, rule: HalfOpenRule) -> Self {
        self.settings.half_open_rule = rule;
        self
    }
    /// How long half-open may last before the next call re-opens it (or closes it, see
    /// [`SettingsBuilder::half_open_timeout`]); `None` waits forever.
    /// Default: `Some(60 s)`.
    pub fn max_wait_in_half_open(mut self, wait: impl Into<Option<Duration>>) -> Self {
        let wait = wait.into();
        self.settings.max_wait_in_half_open = wait;
        self
    }
    /// Observe only: never refuse a call.
    /// Default: `false`.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.settings.shadow = shadow;
        self
    }
    /// Start (and reset to) enabled or disabled: `false` is the
    /// [initial state](SettingsBuilder::initial_state) [`InitialState::Disabled`]; `true` is
    /// any other (it turns a disabled initial state taken over from
    /// [`Settings::to_builder`] back to closed, and keeps an isolated one).
    ///
    /// Given both, on one builder, `enabled` and `initial_state` must agree: `enabled(false)`
    /// with any state but disabled, or `enabled(true)` with disabled, fails
    /// [`build`](SettingsBuilder::build) with `CUT-CFG-006` naming `initial-state`.
    /// Default: `true`.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = Some(enabled);
        self
    }
    /// The state to start in and to [`reset`](crate::Breaker::reset) to (see
    /// [`SettingsBuilder::enabled`] for how the two combine). Default:
    /// [`InitialState::Closed`].
    ///
    /// ```
    /// use cutout::{Breaker, InitialState, Settings, State};
    ///
    /// let settings = Settings::builder().initial_state(InitialState::Isolated).build()?;
    /// let breaker = Breaker::new("new-dependency", settings);
    /// assert_eq!(breaker.state(), State::Isolated);
    /// breaker.reset();
    /// assert_eq!(breaker.state(), State::Isolated, "reset returns to the configured state");
    /// breaker.disable();
    /// assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn initial_state(mut self, state: InitialState) -> Self {
        self.initial_state = Some(state);
        self
    }
    /// How much each consecutive open multiplies the break by: a finite number of at least 1
    /// (default 2, the break doubles; 1 keeps it constant). The n-th consecutive open computes
    /// `break_duration × multiplier^(n − 1)`, capped at `max_break_duration`; jitter is applied
    /// after. The growth resets when the breaker fully closes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, Jitter, Settings, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("slow-growth")
    ///     .settings(
    ///         Settings::builder()
    ///             .consecutive_failures(Some(1))
    ///             .break_duration(Duration::from_secs(5))
    ///             .break_multiplier(1.5)
    ///             .jitter(Jitter::None)
    ///             .build()?,
    ///     )
    ///     .clock(clock.clone())
    ///     .build();
    /// let mut breaks = Vec::new();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// for _ in 0..3 {
    ///     breaks.push(breaker.snapshot().current_break.unwrap());
    ///     clock.elapse_break(&breaker);
    ///     let _ = breaker.call(|| Err::<(), _>("still down")); // the probe fails
    /// }
    /// assert_eq!(breaks, [5_000, 7_500, 11_250].map(Duration::from_millis));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn break_multiplier(mut self, multiplier: f64) -> Self {
        self.settings.break_multiplier = multiplier;
        self
    }
    /// A break schedule of your own, replacing the multiplier's growth; `None` goes back to
    /// the multiplier (default: `None`). One that shrinks from an open to the next fails
    /// [`build`](SettingsBuilder::build) with `CUT-CFG-016`. The breaker calls it under its lock each time it opens, with the
    /// consecutive-open count (1 for the first open since the breaker last closed fully), so it
    /// must be quick and must not call into the breaker. What it returns is capped at
    /// `max_break_duration` (raise that to let the schedule alone decide), then jittered.
    /// A zero break half-opens on the next call. If the function panics, the breaker catches
    /// the panic and serves the multiplier's break instead.
    ///
    /// Configuration files cannot express a function: add it to loaded settings with
    /// [`Settings::to_builder`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{BreakSchedule, Breaker, Jitter, Settings, clock::ManualClock};
    ///
    /// // 1 s, 10 s, then 1 min for every later consecutive open.
    /// let schedule = BreakSchedule::new(|opens| match opens {
    ///     1 => Duration::from_secs(1),
    ///     2 => Duration::from_secs(10),
    ///     _ => Duration::from_secs(60),
    /// });
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("stepped")
    ///     .settings(
    ///         Settings::builder()
    ///             .consecutive_failures(Some(1))
    ///             .break_schedule(Some(schedule))
    ///             .jitter(Jitter::None)
    ///             .build()?,
    ///     )
    ///     .clock(clock.clone())
    ///     .build();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.snapshot().current_break, Some(Duration::from_secs(1)));
    /// clock.elapse_break(&breaker);
    /// let _ = breaker.call(|| Err::<(), _>("still down"));
    /// assert_eq!(breaker.snapshot().current_break, Some(Duration::from_secs(10)));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn break_schedule(mut self, schedule: impl Into<Option<BreakSchedule>>) -> Self {
        let schedule = schedule.into();
        self.settings.break_schedule = schedule;
        self
    }
    /// What running out of `max_wait_in_half_open` does: re-open (the default) or close.
    /// Default: [`HalfOpenTimeout::Open`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, HalfOpenTimeout, Jitter, Settings, State, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder("hangs-when-sick")
    ///     .settings(
    ///         Settings::builder()
    ///             .consecutive_failures(Some(1))
    ///             .jitter(Jitter::None)
    ///             .max_wait_in_half_open(Some(Duration::from_secs(5)))
    ///             .half_open_timeout(HalfOpenTimeout::Close)
    ///             .build()?,
    ///     )
    ///     .clock(clock.clone())
    ///     .build();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.elapse_break(&breaker);
    /// let hung = breaker.try_acquire().unwrap(); // a probe that never answers
    /// clock.advance(Duration::from_secs(5));
    /// let next = breaker.try_acquire().unwrap(); // the wait ran out: closed
    /// assert!(!next.is_probe());
    /// assert_eq!(breaker.state(), State::Closed);
    /// # drop(hung);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn half_open_timeout(mut self, timeout: HalfOpenTimeout) -> Self {
        self.settings.half_open_timeout = timeout;
        self
    }
    /// Whether the breaker measures the dependency; `false` turns both relative trips off.
    /// Default: `true`.
    pub fn adaptive(mut self, adaptive: bool) -> Self {
        self.settings.adaptive = adaptive;
        self
    }
    /// Slow calls relative to the measured normal latency; `None` turns the rule off.
    /// Default: `Some(SlowCalls::above(3.0))` (slow above 3 × the median and 50 ms over it,
    /// floor 1 ms).
    pub fn slow_calls(mut self, slow_calls: impl Into<Option<SlowCalls>>) -> Self {
        let slow_calls = slow_calls.into();
        self.settings.slow_calls = slow_calls;
        self
    }
    /// Failures relative to the measured normal rate; `None` turns the rule off.
    /// Default: `Some(Failures::above(5.0))` (above 5 × the normal rate, floor 5%).
    pub fn failures(mut self, failures: impl Into<Option<Failures>>) -> Self {
        let failures = failures.into();
        self.settings.failures = failures;
        self
    }
    /// Hand traffic back over a ramp after the probes succeed; `None` closes at once.
    /// Default: `None`.
    pub fn recovery(mut self, recovery: impl Into<Option<Recovery>>) -> Self {
        let recovery = recovery.into();
        self.settings.recovery = recovery;
        self
    }

    /// Adaptive throttling instead of opening (Google SRE's client-side throttling), with
    /// multiple `K` (at least 1; 2 is the book's choice); `None`, the default, is the binary
    /// breaker. While closed, each call is refused with probability
    /// `max(0, (requests − K × accepts) / (requests + 1))` over the trip window: `requests`
    /// are the calls the window counted plus those throttling refused in it, `accepts` the
    /// counted calls that did not fail. A refusal's reason is
    /// [`RejectReason::Throttled`](crate::RejectReason::Throttled), with no retry-after (the
    /// next call is another draw). No trip rule opens a throttling breaker; a classifier's
    /// open-for verdict, [`Breaker::trip_on_signal`](crate::Breaker::trip_on_signal) and the
    /// controls still do. Needs a time window (`CUT-CFG-006` naming `throttle` otherwise); a
    /// multiple below 1 or not finite fails with `CUT-CFG-017`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, RejectReason, Settings, clock::ManualClock};
    ///
    /// let settings = Settings::builder().throttle(Some(2.0)).build()?;
    /// let breaker = Breaker::builder("ads").settings(settings).clock(ManualClock::new()).build();
    /// for _ in 0..200 {
    ///     let _ = breaker.call(|| Err::<(), _>("overloaded"));
    /// }
    /// // Never opened: it refuses in proportion instead (almost every call, here).
    /// assert_eq!(breaker.state(), cutout::State::Closed);
    /// let refused = (0..1_000)
    ///     .filter(|_| breaker.call(|| Err::<(), _>("overloaded")).is_err_and(|e| {
    ///         e.rejection().is_some_and(|r| r.reason() == RejectReason::Throttled)
    ///     }))
    ///     .count();
    /// assert!(refused > 900, "{refused}");
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn throttle(mut self, multiple: impl Into<Option<f64>>) -> Self {
        let multiple = multiple.into();
        self.throttle = multiple;
        self
    }
    /// Validates and returns the settings.
    pub fn build(mut self) -> Result<Settings, ConfigError> {
        if let Some(multiple) = self.throttle {
            check_throttle(multiple, self.settings.window)?;
        }
        self.settings.throttle = self.throttle.unwrap_or(0.0);
        self.settings.initial_state = match (self.enabled, self.initial_state) {
            (Some(enabled), Some(state)) if enabled != (state != InitialState::Disabled) => {
                return Err(ConfigError::new(
                    ErrorCode::Contradiction,
                    "initial-state",
                    state.as_str(),
                    if enabled {
                        "\"closed\" or \"isolated\" with enabled = true"
                    } else {
                        "only \"disabled\" with enabled = false"
                    },
                ));
            }
            (_, Some(state)) => state,
            (Some(false), None) => InitialState::Disabled,
            (Some(true), None) if self.settings.initial_state == InitialState::Disabled => {
                InitialState::Closed
            }
            (_, None) => self.settings.initial_state,
        };
        self.settings.validate()?;
        Ok(self.settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(builder: SettingsBuilder) -> (ErrorCode, &'static str) {
        let error = builder.build().expect_err("must be rejected");
        (error.code(), error.key())
    }

    #[test]
    fn defaults_are_valid() {
        Settings::default().validate().unwrap();
        assert_eq!(Settings::default().consecutive_failures(), Some(5));
    }

    #[test]
    fn each_invalid_key_has_its_code() {
        let b = Settings::builder;
        let cases = [
            (
                b().failure_ratio(Some(0.0)),
                ErrorCode::RatioOutOfRange,
                "failure-ratio",
            ),
            (
                b().failure_ratio(Some(1.5)),
                ErrorCode::RatioOutOfRange,
                "failure-ratio",
            ),
            (
                b().failure_ratio(Some(f64::NAN)),
                ErrorCode::RatioOutOfRange,
                "failure-ratio",
            ),
            (
                b().slow_call_ratio(-0.1),
                ErrorCode::RatioOutOfRange,
                "slow-call-ratio",
            ),
            (
                b().minimum_calls(0),
                ErrorCode::CountTooSmall,
                "minimum-calls",
            ),
            (
                b().window(TripWindow::Count(0)),
                ErrorCode::CountTooSmall,
                "window-size",
            ),
            (
                b().half_open_probes(0),
                ErrorCode::CountTooSmall,
                "half-open-probes",
            ),
            (
                b().probe_successes(0),
                ErrorCode::CountTooSmall,
                "probe-successes",
            ),
            (
                b().consecutive_failures(Some(0)),
                ErrorCode::CountTooSmall,
                "consecutive-failures",
            ),
            (
                b().window(TripWindow::Time(Duration::ZERO)),
                ErrorCode::ZeroDuration,
                "window-duration",
            ),
            (
                b().break_duration(Duration::ZERO),
                ErrorCode::ZeroDuration,
                "break-duration",
            ),
            (
                b().slow_call_threshold(Some(Duration::ZERO)),
                ErrorCode::ZeroDuration,
                "slow-call-threshold",
            ),
            (
                b().max_wait_in_half_open(Some(Duration::ZERO)),
                ErrorCode::ZeroDuration,
                "max-wait-in-half-open",
            ),
            (
                b().max_break_duration(Duration::from_secs(1)),
                ErrorCode::MaxBreakBelowBreak,
                "max-break-duration",
            ),
            (
                b().window(TripWindow::Count(MAX_COUNT_WINDOW + 1)),
                ErrorCode::WindowTooLarge,
                "window-size",
            ),
            (
                b().half_open_probes(70_000),
                ErrorCode::Contradiction,
                "half-open-probes",
            ),
            (
                b().break_multiplier(0.5),
                ErrorCode::BreakMultiplierOutOfRange,
                "break-multiplier",
            ),
            (
                b().break_multiplier(f64::NAN),
                ErrorCode::BreakMultiplierOutOfRange,
                "break-multiplier",
            ),
            (
                b().enabled(false).initial_state(InitialState::Isolated),
                ErrorCode::Contradiction,
                "initial-state",
            ),
        ];
        for (builder, code, key) in cases {
            assert_eq!(code_of(builder), (code, key));
        }
    }

    #[test]
    fn relative_rules_are_validated() {
        let b = Settings::builder;
        let cases = [
            (
                b().slow_calls(Some(SlowCalls::above(1.0))),
                ErrorCode::MultipleTooSmall,
                "slow-calls-multiple",
            ),
            (
                b().slow_calls(Some(SlowCalls::above(f64::NAN))),
                ErrorCode::MultipleTooSmall,
                "slow-calls-multiple",
            ),
            (
                b().slow_calls(Some(SlowCalls::above(3.0).quantile(0.9))),
                ErrorCode::RatioOutOfRange,
                "slow-calls-quantile",
            ),
            (
                b().failures(Some(Failures::above(0.5))),
                ErrorCode::MultipleTooSmall,
                "failures-multiple",
            ),
            (
                b().failures(Some(Failures::above(5.0).floor(0.0))),
                ErrorCode::RatioOutOfRange,
                "failures-floor",
            ),
            // 30 s trip window: latency needs more than 30 s / 0.5 = 60 s; failures at least 5 × 30 s.
            (
                b().slow_calls(Some(SlowCalls::above(3.0).window(Duration::from_secs(60)))),
                ErrorCode::BaselineTooShort,
                "latency-baseline-window",
            ),
            (
                b().failures(Some(Failures::above(5.0).window(Duration::from_secs(149)))),
                ErrorCode::BaselineTooShort,
                "failure-baseline-window",
            ),
            (
                b().failures(Some(Failures::above(5.0).window(Duration::ZERO))),
                ErrorCode::ZeroDuration,
                "failure-baseline-window",
            ),
        ];
        for (builder, code, key) in cases {
            assert_eq!(code_of(builder), (code, key));
        }
        let edge = b()
            .slow_calls(Some(SlowCalls::above(3.0).window(Duration::from_secs(61))))
            .failures(Some(Failures::above(5.0).window(Duration::from_secs(150))));
        edge.build().unwrap();
    }

    #[test]
    fn recovery_is_validated() {
        let b = Settings::builder;
        let r = Recovery::over;
        let cases = [
            (
                b().recovery(Some(r(0.0))),
                ErrorCode::RatioOutOfRange,
                "recovery-fraction",
            ),
            (
                b().recovery(Some(r(0.5).initial_fraction(1.0))),
                ErrorCode::RatioOutOfRange,
                "recovery-initial-fraction",
            ),
            (
                b().recovery(Some(r(0.5).min_duration(Duration::ZERO))),
                ErrorCode::ZeroDuration,
                "recovery-min-duration",
            ),
            (
                b().recovery(Some(
                    r(0.5)
                        .min_duration(Duration::from_secs(9))
                        .max_duration(Duration::from_secs(8)),
                )),
                ErrorCode::MaxBelowMin,
                "recovery-max-duration",
            ),
        ];
        for (builder, code, key) in cases {
            assert_eq!(code_of(builder), (code, key));
        }
        b().recovery(Some(r(0.25))).build().unwrap();
    }

    #[test]
    fn huge_multiples_saturate_instead_of_overflowing() {
        let settings = Settings::builder()
            .failures(Some(Failures::above(1e300)))
            .slow_calls(Some(SlowCalls::above(3.0).quantile(1e-300)))
            .build()
            .unwrap();
        assert_eq!(settings.failure_baseline_window(), Some(Duration::MAX));
        assert_eq!(settings.latency_baseline_window(), Some(Duration::MAX));
        let _ = crate::Breaker::new(
            "huge",
            settings.to_builder().adaptive(true).build().unwrap(),
        );
    }

    #[test]
    fn default_baselines_widen_with_the_trip_window() {
        let ten_minutes = Settings::builder()
            .window(TripWindow::Time(Duration::from_secs(600)))
            .build()
            .unwrap();
        assert_eq!(
            ten_minutes.failure_baseline_window(),
            Some(Duration::from_secs(6_000))
        );
        assert_eq!(
            ten_minutes.latency_baseline_window(),
            Some(Duration::from_secs(6_000))
        );
        let steep = Settings::builder()
            .failures(Some(Failures::above(20.0)))
            .slow_calls(Some(SlowCalls::above(3.0).quantile(0.05)))
            .build()
            .unwrap();
        assert_eq!(
            steep.failure_baseline_window(),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            steep.latency_baseline_window(),
            Some(Duration::from_secs(1_200))
        );
        assert_eq!(
            Settings::default().failure_baseline_window(),
            Some(Duration::from_secs(300))
        );
    }

    #[test]
    fn message_names_code_key_value_and_range() {
        let error = Settings::builder()
            .failure_ratio(Some(1.5))
            .build()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "CUT-CFG-001: invalid failure-ratio = 1.5: allowed a ratio in (0, 1]"
        );
    }

    #[test]
    fn minimum_calls_is_capped_by_a_count_window_only() {
        let capped = Settings::builder()
            .window(TripWindow::Count(10))
            .minimum_calls(50)
            .build()
            .unwrap();
        assert_eq!(capped.effective_minimum_calls(), 10);
        let time = Settings::builder().minimum_calls(50).build().unwrap();
        assert_eq!(time.effective_minimum_calls(), 50);
    }
}

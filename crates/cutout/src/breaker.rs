//! [`Breaker`]: the shared handle, how it is built, and the calls it runs.
//!
//! The handle's other halves live beside it: `front/` is the hot path (admission and the
//! outcome of a call, off the lock where the published word allows), `locked.rs` the three
//! ways of reaching the machine under its lock, and `control.rs` the reads and controls.
//!
//! # Orderings
//! The machine is the single source of truth and lives under a mutex. After every locked
//! operation, still under the lock, the breaker publishes for the hot path `until` (when the
//! current break ends; 0 unless open), a safe bound on the kernel's coarse clock
//! (`kernel_deadline`; see `clock/kernel.rs`: `until`'s while open, else the counted
//! successes' deadline), `fast_until` (when the fast flag lapses) and `slow_nanos` and
//! `throttle` with `Relaxed`, then the state word with `Release`. The converted deadline is
//! read where `until` or `fast_until` is, and follows the same pairing: a later publication's
//! proves a time before one of that publication's deadlines, or is 0 (it proves nothing, and
//! the precise clock decides). A refusal it proves also needs the end it was converted from,
//! for its retry-after, and both must be of one publication (an old conversion read with a
//! break cut short since would refuse a call after the new end): a new conversion is
//! published as a sequence lock whose sequence is the conversion itself. The lock stores 0
//! to it, a `Release` fence, then `until` and the source, then the conversion with `Release`;
//! the refusal loads the conversion with `Acquire`, then `until`, an `Acquire` fence, and the
//! conversion again. If `until` came from a later publication's store, the fences order that
//! publication's 0 before the second load, which then differs (or reads the later conversion
//! itself, made from that very end: equal conversions prove the same thing of either end);
//! if the conversion read first came from the `Release` store, `until` is at least that
//! publication's. An `until` of 0 (a reset or a close) makes the call take the slow path. An untimed success that reads a later
//! publication's deadline is counted as one a later `fast_until` let in (below), or, where
//! that publication is of another generation (an opening's break end), dropped by its
//! generation's tag (`cells.rs`).
//!
//! - Admission loads the word with `Acquire`. When it reads an open word it then reads
//!   `until`; the acquire pairs with the release that published that word, so `until` is the
//!   one published with it or a later one. A later one was published by a later locked
//!   operation: if that left the breaker in any state but open, it is 0 and the call goes to
//!   the lock; if it opened the breaker again, refusing against its deadline is refusing under
//!   that opening, which the lock had already decided. In shadow mode it is 0 too: a nonzero
//!   `until` is only ever published with an open word that enforces, so a refusal against it
//!   is a refusal under an enforcing opening the lock decided, whichever word the call read
//!   first (one that read a shadow word and then the `until` of a later switch to enforcing
//!   refuses as of that switch; one that read an enforcing word and then a shadow switch's 0
//!   goes to the lock, which admits it uncounted).
//! - A success loads the word with `Acquire` to test its flags and the permit's generation,
//!   then `fast_until`, which by the same pairing is the one published with that word or a
//!   later one. A success under a still word changes nothing and is linearized at the load.
//!   One under a fast word is counted in its thread's cell (`cells.rs`, whose orderings cover
//!   the cells); if a later publication's `fast_until` let it in, it is folded and judged by
//!   the next locked operation, as any success that lands after a fold is.
//! - A call through [`Breaker::call`] admitted on a closed, still word compares the word it
//!   loads at the end with the one it was admitted on: equal, its success is linearized at
//!   that load; otherwise it is finished like any other.
//! - `slow_nanos` is a hint: a call judged against the previous threshold is judged as of a
//!   moment ago. So is `throttle`, read after a throttling word: the threshold published with
//!   that word or a later one, a draw as of a moment ago either way.
//! - Everything else takes the lock, whose acquire and release order the machine itself. No
//!   `SeqCst` is needed: the only cross-variable relations are word → `until` and word →
//!   `fast_until`, covered above (with `until`'s converted bounds).

use std::fmt;
use std::future::Future;

use crate::BreakerId;
use crate::classify::{Classify, DefaultClassifier, Verdict};
use crate::clock::{Clock, TimeSource};
use crate::error::{Error, Rejected};
use crate::event::{Event, OpenReason};
use crate::front::cells::{self, Cells};
use crate::front::word::Word;
use crate::loom::{Arc, AtomicU64, Mutex};
use crate::machine::sampling::Timing;
use crate::machine::{Gate, Machine, Role};
use crate::observer::{CallObserver, Observers};
use crate::permit::{OwnedPermit, Permit, Ticket};
use crate::settings::Settings;

/// Listeners and custom clocks sit outside the modelled protocol, so they use std's `Arc`
/// (loom's cannot hold unsized values).
pub(crate) type Listener = std::sync::Arc<dyn Fn(&Event) + Send + Sync>;

/// What [`BreakerBuilder::on_reset`] registers: told of every [`Breaker::reset`], under the
/// breaker's lock.
pub(crate) type ResetHook = std::sync::Arc<dyn Fn(&BreakerId) + Send + Sync>;

/// What the hot path reads, on a cache line of its own that only locked operations write (the
/// published values) and nothing writes after build (the rest): the mutex's line is written on
/// every locked operation, and sharing it would make every read here a miss under load.
pub(crate) struct Hot {
    pub(crate) word: AtomicU64,
    pub(crate) until: AtomicU64,
    pub(crate) fast_until: AtomicU64,
    /// A deadline on the kernel's coarse clock (`clock/kernel.rs`): the safe bound a coarse
    /// reading is compared against (0 where that proves nothing, and always 0 unless the
    /// breaker runs on the system clock). While open it is `until`'s, else the counted
    /// successes' deadline (`Published::counted_until`, while the word is fast): a refusal
    /// reads it only on an open word, an untimed success only on a fast one.
    pub(crate) kernel_deadline: AtomicU64,
    /// The deadline on the system clock's scale `kernel_deadline` was converted from, so that
    /// the same deadline keeps its conversion (one coarse and one precise read) and its line.
    pub(crate) kernel_source: AtomicU64,
    /// Calls above this many nanoseconds are slow: the absolute threshold tightened by the
    /// relative one; `u64::MAX` when none applies.
    pub(crate) slow_nanos: AtomicU64,
    /// Adaptive throttling's refusal threshold for a uniform draw, read under a throttling
    /// word (0 otherwise).
    pub(crate) throttle: AtomicU64,
    /// What calls count off the lock, a line per core (the lines themselves are elsewhere).
    pub(crate) cells: Cells,
    pub(crate) clock: TimeSource,
    pub(crate) timing: Timing,
    /// How many successes a line takes before its thread takes the lock, less one (a power of
    /// two less one, see `cells::period_mask`): at most a count window's size (so that it
    /// learns when failures have slid out and can go still), and at most `cells::PERIOD`.
    pub(crate) fast_mask: u32,
    /// Whether the breaker measures latency (the relative slow-call rule) and watches calls in
    /// flight.
    pub(crate) adaptive_slow: bool,
    /// Whether a refusal while open may be decided on the inlined quick path when a
    /// [`CoarseClock`](crate::clock::CoarseClock) runs: on the system clock. (Shadow mode can
    /// be switched live, so it is not fixed here: a shadow breaker publishes its break's end
    /// as 0, which sends the quick path to the lock.)
    pub(crate) quick_refusals: bool,
    /// The call observers, fixed at build; `None` when there are none, so that an
    /// unobserved breaker tests one pointer and calls nothing.
    pub(crate) observers: Option<std::sync::Arc<Observers>>,
    /// Read-only after build, like the rest; here rather than beside the mutex because this
    /// line has room (a field more there costs 128 bytes of the 4 KiB budget).
    pub(crate) settings: std::sync::Arc<Settings>,
    /// The owner's reset hook ([`BreakerBuilder::on_reset`]), if any; here for the same
    /// reason as `settings`.
    pub(crate) on_reset: Option<ResetHook>,
}

/// Keeps `T` on cache lines of its own: aligned to a line (64 bytes), and so a whole number of
/// lines long (`Hot` is two), sharing none with the fields around it. Not 128-byte aligned as
/// `CachePadded` is on x86_64 (for the adjacent-line prefetcher): that alignment made the
/// shared state's allocation pad its reference counts to 128 bytes, 112 of them wasted, and
/// those 64 bytes pay for the third per-core line (`front/cells.rs`).
#[repr(align(64))]
pub(crate) struct OwnLines<T>(pub(crate) T);

impl<T> std::ops::Deref for OwnLines<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

pub(crate) struct Shared {
    pub(crate) hot: OwnLines<Hot>,
    pub(crate) id: BreakerId,
    /// Not padded: nothing the hot path reads shares its line (that is all in `hot`).
    pub(crate) machine: Mutex<Machine>,
    /// Copied out before any listener runs, so that none runs under this lock; `None` until the
    /// first subscription (so that a breaker nobody listens to allocates no list). A mutex,
    /// not a read-write lock: it is held for a reference count's bump, and it is 8 bytes
    /// smaller.
    pub(crate) listeners: Mutex<Option<std::sync::Arc<[Listener]>>>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: std::sync::Arc<crate::observe::Metrics>,
}

/// A circuit breaker. A cheap handle: clones share one state, which is how two policies share
/// one breaker.
///
/// ```
/// use cutout::{Breaker, Settings};
///
/// let breaker = Breaker::new("exchange-rates", Settings::default());
/// let rate: Result<f64, cutout::Error<&str>> = breaker.call(|| Ok(1380.0));
/// assert_eq!(rate.unwrap(), 1380.0);
/// ```
#[derive(Clone)]
pub struct Breaker {
    pub(crate) shared: Arc<Shared>,
}

/// Builds a [`Breaker`] with a clock, a jitter seed, an open gate or call observers of its
/// own.
pub struct BreakerBuilder {
    id: BreakerId,
    settings: Settings,
    clock: TimeSource,
    seed: Option<u64>,
    gate: Option<Gate>,
    on_reset: Option<ResetHook>,
    observers: Vec<std::sync::Arc<dyn CallObserver>>,
}

impl fmt::Debug for BreakerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerBuilder")
            .field("id", &self.id)
            .field("settings", &self.settings)
            .field("clock", &self.clock)
            .field("seed", &self.seed)
            .field("gate", &self.gate)
            .field("on_reset", &self.on_reset.is_some())
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl BreakerBuilder {
    /// A gate every trip from closed must pass: when `gate` answers `false`, the breaker stays
    /// closed (the trip is counted in
    /// [`Snapshot::suppressed_opens`](crate::Snapshot::suppressed_opens)) and the next counted
    /// outcome is judged again. Re-opening from half-open or from a ramp is not gated.
    ///
    /// For caps across a fleet of breakers, such as "at most 3 of these 500 per-host breakers
    /// open at once": the gate runs under this breaker's lock, so it must be quick and must
    /// not call into this breaker (reserving a slot in a shared counter is the intended use).
    /// A panic in the gate is caught and keeps the breaker closed. A gate that must know why
    /// the breaker would open (a trip, or an opening its dependency asked for) is set with
    /// [`BreakerBuilder::open_gate_for`].
    ///
    /// Release the slot when [`Breaker::peek`] shows a newer generation than the one the
    /// breaker opened in, in a state that holds none (closed, disabled): `reset()`,
    /// `disable()` and `isolate()` raise no event, so a release driven by events alone would
    /// leak the slot of a breaker reset by hand. (cutout-tower's keyed breakers do this for
    /// their open cap.)
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use cutout::{Breaker, Settings, State};
    ///
    /// let allowed = Arc::new(AtomicBool::new(false));
    /// let gate = Arc::clone(&allowed);
    /// let breaker = Breaker::builder("host-a")
    ///     .settings(Settings::builder().consecutive_failures(Some(1)).build()?)
    ///     .open_gate(move |_id| gate.load(Ordering::Relaxed))
    ///     .build();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(breaker.snapshot().suppressed_opens, 1);
    /// allowed.store(true, Ordering::Relaxed);
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn open_gate(self, gate: impl Fn(&BreakerId) -> bool + Send + Sync + 'static) -> Self {
        self.open_gate_for(move |id, _reason| gate(id))
    }

    /// Like [`BreakerBuilder::open_gate`], with the gate told why the breaker would open: the
    /// [`OpenReason`] its [`Transition::Opened`](crate::Transition::Opened) event would carry.
    /// It replaces a gate set before (there is one gate; `open_gate` is this one, ignoring
    /// the reason).
    ///
    /// The reasons a gate can see are those of an opening from closed: a trip rule's
    /// ([`ConsecutiveFailures`](OpenReason::ConsecutiveFailures),
    /// [`FailureRatio`](OpenReason::FailureRatio),
    /// [`FailuresAboveNormal`](OpenReason::FailuresAboveNormal),
    /// [`SlowCallRatio`](OpenReason::SlowCallRatio)), a [`Signal`](OpenReason::Signal)
    /// ([`Breaker::trip_on_signal`]) and [`RetryAfter`](OpenReason::RetryAfter) (a call's
    /// dependency asked not to be called for a while: a classifier's
    /// [`Verdict::OpenFor`], however it was recorded: `call_with`, a
    /// permit's `record_verdict`, an integration's future). A cap that limits what the
    /// breakers decide can so let the openings a dependency asks for through without
    /// counting them. Everything else is as for `open_gate`: under this breaker's lock, quick,
    /// never calling into this breaker; a panic counts as a refusal.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::{Breaker, OpenReason, Settings, State, Verdict};
    ///
    /// // A cap that is full: no trip may open, but a dependency that asks to be left alone is.
    /// let breaker = Breaker::builder("host-a")
    ///     .settings(Settings::builder().consecutive_failures(Some(1)).build()?)
    ///     .open_gate_for(|_id, reason| reason == OpenReason::RetryAfter)
    ///     .build();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Closed);
    /// breaker
    ///     .try_acquire()
    ///     .unwrap()
    ///     .record_verdict(Verdict::OpenFor(Duration::from_secs(20)));
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn open_gate_for(
        mut self,
        gate: impl Fn(&BreakerId, OpenReason) -> bool + Send + Sync + 'static,
    ) -> Self {
        let id = self.id.clone();
        self.gate = Some(Gate(std::sync::Arc::new(move |reason| gate(&id, reason))));
        self
    }

    /// Tells `hook` of every [`Breaker::reset`] of this breaker (a reset through any clone of
    /// the handle, or through a [`Registry`](crate::Registry)), right after the reset and
    /// under the same lock: no call, trip or opening falls between the two.
    ///
    /// For the owner of a breaker that keeps state of its own about it, state a reset must
    /// clear as it clears the breaker's (break growth carried over from an earlier breaker
    /// for the same dependency, say). A reset still raises no event (DESIGN §2: no call
    /// caused it): this is no listener, there is one hook, set when the breaker is built, and
    /// it sees resets only (`isolate`, `disable` and `open_for` stay silent; their effect shows
    /// in [`Breaker::peek`]'s generation). Like an open gate it runs under the breaker's
    /// lock: it must be quick and must not call into this breaker (that would deadlock;
    /// [`Breaker::peek`], lock-free, still reads the word from before the reset, which is
    /// published when the lock is let go); a panic in it is caught and ignored (the reset
    /// stands).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use cutout::Breaker;
    ///
    /// let resets = Arc::new(AtomicU32::new(0));
    /// let seen = Arc::clone(&resets);
    /// let breaker = Breaker::builder("host-a")
    ///     .on_reset(move |_id| {
    ///         seen.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build();
    /// breaker.clone().reset();
    /// assert_eq!(resets.load(Ordering::Relaxed), 1);
    /// ```
    pub fn on_reset(mut self, hook: impl Fn(&BreakerId) + Send + Sync + 'static) -> Self {
        self.on_reset = Some(std::sync::Arc::new(hook));
        self
    }

    /// The settings (default: [`Settings::default`]).
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The clock the breaker measures breaks, windows and call durations with (default:
    /// [`SystemClock`](crate::clock::SystemClock)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = TimeSource::Custom(std::sync::Arc::new(clock));
        self
    }

    /// Adds a call observer: it sees every call the breaker counts or refuses (see
    /// [`observer`](crate::observer)). May be called more than once; observers are told in the
    /// order they were added. A breaker with none pays nothing for the mechanism.
    pub fn observer(mut self, observer: impl CallObserver) -> Self {
        self.observers.push(std::sync::Arc::new(observer));
        self
    }

    /// Like [`BreakerBuilder::observer`], for an observer shared with other breakers (one
    /// metrics sink for a registry, say).
    pub fn shared_observer(mut self, observer: std::sync::Arc<dyn CallObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Seeds the jitter's random source, for reproducible breaks (default: a random seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the breaker. Starts no thread.
    pub fn build(self) -> Breaker {
        let seed = self.seed.unwrap_or_else(|| fastrand::u64(..));
        let settings = std::sync::Arc::new(self.settings);
        let now = self.clock.recent();
        let mut machine = Machine::new(std::sync::Arc::clone(&settings), seed, self.gate, now);
        #[cfg(feature = "metrics")]
        let metrics = std::sync::Arc::new(crate::observe::Metrics::new(&self.id, machine.state()));
        // The metrics' observer first, so that a slow observer of the user's never delays it.
        #[cfg(feature = "metrics")]
        let observers =
            std::iter::once(std::sync::Arc::clone(&metrics) as std::sync::Arc<dyn CallObserver>)
                .chain(self.observers)
                .collect();
        #[cfg(not(feature = "metrics"))]
        let observers = self.observers;
        let observers = Observers::of(observers);
        // An observer is one more consumer of every success: never still.
        machine.set_observed(observers.is_some());
        let published = machine.publish(now);
        let adaptive_slow = settings.relative_slow_calls().is_some();
        let timing = Timing::of(&settings);
        let machine_generation = machine.generation();
        let fast_mask = cells::period_mask(match settings.window {
            crate::TripWindow::Count(size) => size,
            crate::TripWindow::Time(_) => u32::MAX,
        });
        let hot = Hot {
            word: AtomicU64::new(published.word.bits()),
            until: AtomicU64::new(published.until),
            fast_until: AtomicU64::new(published.fast_until),
            // The first locked operation publishes it; until then the precise clock decides.
            kernel_deadline: AtomicU64::new(0),
            kernel_source: AtomicU64::new(0),
            slow_nanos: AtomicU64::new(published.slow_nanos),
            throttle: AtomicU64::new(published.throttle),
            cells: Cells::new(machine_generation, seed),
            quick_refusals: matches!(self.clock, TimeSource::System(_)),
            clock: self.clock,
            timing,
            fast_mask,
            adaptive_slow,
            observers,
            settings,
            on_reset: self.on_reset,
        };
        Breaker {
            shared: Arc::new(Shared {
                #[cfg(feature = "metrics")]
                metrics,
                hot: OwnLines(hot),
                id: self.id,
                machine: Mutex::new(machine),
                listeners: Mutex::new(None),
            }),
        }
    }
}

impl Breaker {
    /// A breaker named `id` with these settings, on the default clock.
    pub fn new(id: impl Into<BreakerId>, settings: Settings) -> Breaker {
        Breaker::builder(id).settings(settings).build()
    }

    /// A builder for a breaker named `id`.
    pub fn builder(id: impl Into<BreakerId>) -> BreakerBuilder {
        BreakerBuilder {
            id: id.into(),
            settings: Settings::default(),
            clock: TimeSource::default(),
            seed: None,
            gate: None,
            on_reset: None,
            observers: Vec::new(),
        }
    }

    /// The breaker's id.
    pub fn id(&self) -> &BreakerId {
        &self.shared.id
    }

    /// The breaker's settings.
    pub fn settings(&self) -> &Settings {
        &self.shared.hot.settings
    }

    /// Asks to run one call. On success the [`Permit`] must record the call's outcome; dropping
    /// it records nothing and gives a half-open probe slot back.
    ///
    /// A healthy closed breaker answers with one atomic load; an open one with a load, a
    /// coarse clock read and a second load.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        self.ticket().map(|ticket| Permit::new(self, ticket))
    }

    /// Like [`Breaker::try_acquire`], for permits that must outlive the borrow (a `'static`
    /// future): the permit holds a clone of this handle.
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        self.ticket()
            .map(|ticket| OwnedPermit::new(self.clone(), ticket))
    }

    /// The published word, as the hot path reads it.
    #[inline(always)]
    pub(crate) fn word(&self) -> Word {
        Word::from_bits(self.shared.hot.word.load(crate::loom::Ordering::Acquire))
    }

    /// Runs `f` through the breaker; `Ok` is a success and `Err` a failure.
    ///
    /// A refused call does not run `f`. A panic in `f` records nothing, gives a probe slot
    /// back and keeps unwinding.
    #[inline(always)]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, Error<E>> {
        self.call_with(&DefaultClassifier, f)
    }

    /// Runs `f` through the breaker, with `classifier` deciding what its result means: the
    /// breaker records its [verdict](Classify::verdict), which for a classifier of outcomes
    /// is its outcome, and may be [`Verdict::OpenFor`] (a throttled answer that says when to
    /// come back).
    #[inline(always)]
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>>
    where
        C: Classify<T, E> + ?Sized,
    {
        let word = self.word();
        if word.is_closed_still() {
            return self.call_still(word, classifier, f);
        }
        let permit = Permit::new(self, self.ticket_at(word)?);
        let result = f();
        permit.record_verdict(classifier.verdict(&result));
        result.map_err(Error::Inner)
    }

    /// A call admitted on a closed, still word (see [`Word::is_closed_still`]): its ticket is
    /// plain, so there is no permit to drop if `f` panics, and a success that finds the word
    /// as it was has nothing to record (one load and a compare).
    #[inline(always)]
    fn call_still<T, E, C>(
        &self,
        word: Word,
        classifier: &C,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>>
    where
        C: Classify<T, E> + ?Sized,
    {
        let result = f();
        // A classifier of outcomes answers the verdict of its outcome (`Classify::verdict`'s
        // default, inlined): the test below is then the outcome's against a success.
        let verdict = classifier.verdict(&result);
        // An observed breaker never publishes a still word, so its calls never come here.
        if verdict != Verdict::Success || self.word() != word {
            // Laid out of line, so that the healthy call runs straight through.
            std::hint::cold_path();
            self.finish_verdict(Ticket::new(word.generation(), Role::Normal, 0), verdict);
        }
        result.map_err(Error::Inner)
    }

    /// Awaits `future` through the breaker; works on any runtime.
    ///
    /// **A timeout outside this call leaves the breaker blind**: `tokio::time::timeout(d,
    /// breaker.call_async(f))` cancels the call at the deadline and records nothing, so calls
    /// that hang are never counted and the breaker never opens on them. Put the timeout
    /// inside (`breaker.call_async(tokio::time::timeout(d, f))`, mapping the elapsed error to
    /// `Err`), or use `call_async_timeout` (feature `tokio`), which counts a call that runs
    /// out of time as a failure.
    ///
    /// A refused call drops `future` unpolled. Dropping the returned future before it
    /// finishes (a timeout, a `select!`) records nothing and gives a probe slot back.
    pub async fn call_async<T, E, F>(&self, future: F) -> Result<T, Error<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_async_with(&DefaultClassifier, future).await
    }

    /// Like [`Breaker::call_async`], with `classifier` deciding what the result means (its
    /// [verdict](Classify::verdict), as for [`Breaker::call_with`]).
    pub async fn call_async_with<T, E, C, F>(
        &self,
        classifier: &C,
        future: F,
    ) -> Result<T, Error<E>>
    where
        C: Classify<T, E> + ?Sized,
        F: Future<Output = Result<T, E>>,
    {
        let permit = self.try_acquire()?;
        let result = future.await;
        permit.record_verdict(classifier.verdict(&result));
        result.map_err(Error::Inner)
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("id", &self.shared.id)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

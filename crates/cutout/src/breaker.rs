//! [`Breaker`]: the shared handle, its hot path and its controls.
//!
//! # Orderings
//! The machine is the single source of truth and lives under a mutex. After every mutation,
//! still under the lock, the breaker publishes three values for the lock-free hot path:
//! `until` (when the current break ends) and `fast_until` (when the fast flag lapses) with
//! `Relaxed`, then the state word with `Release`.
//!
//! - `try_acquire` loads the word with `Acquire`. When it reads an open word it then reads
//!   `until`; the acquire pairs with the release that published that word, so `until` is at
//!   least the deadline of that opening (a later opening can only move it later, which is the
//!   deadline of a state newer than the word: refusing against it is still correct).
//! - Finishing a successful call loads the word with `Acquire` to test the quiet and fast flags
//!   and the permit's generation, then (fast) `fast_until`, which by the same pairing is at
//!   least the one published with that word; a newer one is a later boundary of a newer
//!   publication, which only lets the call take the lock it could have skipped. A quiet success
//!   changes nothing and is linearized at the load. A call through [`Breaker::call`] admitted
//!   on a closed, still word compares the word it loads at the end with the one it was
//!   admitted on: equal, its success is linearized at that load (under a still word of its
//!   generation a success changes nothing); otherwise it is finished like any other. A fast
//!   success adds to its thread's counter (see `shards.rs`), which every locked operation
//!   drains first, under the lock. A paced one of a thread that owns a tally cell stores to
//!   that cell instead, and every locked operation folds what the cells gained (see
//!   `tally.rs`, which says what that gives up).
//! - Everything else takes the lock, whose acquire/release orders the machine itself.
//! - No `SeqCst` is needed: the only cross-variable relations are word → `until` and word →
//!   `fast_until`, covered above.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::BreakerId;
use crate::baseline::samples::LatencySamples;
use crate::classify::{Classify, DefaultClassifier, Outcome};
use crate::clock::{Clock, TimeSource};
use crate::error::{Error, RejectReason, Rejected, RetryAfter};
use crate::event::{Event, Transition};
use crate::inflight::InFlight;
use crate::loom::{Arc, AtomicU64, Mutex, Ordering, RwLock, lock};
use crate::machine::{Admission, Gate, Machine, Role};
use crate::permit::{OwnedPermit, Permit, Ticket};
use crate::settings::Settings;
use crate::shards::{Add, SuccessShards};
use crate::snapshot::Snapshot;
use crate::state::{State, Word};
use crate::tally::{Tallied, Tally};

/// Listeners and custom clocks sit outside the modelled protocol, so they use std's `Arc`
/// (loom's cannot hold unsized values).
type Listener = std::sync::Arc<dyn Fn(&Event) + Send + Sync>;

/// The two values the hot path reads, on their own cache line: the mutex's line is written on
/// every slow-path call, and sharing it would make every fast read a miss under load.
struct Hot {
    word: AtomicU64,
    until: AtomicU64,
    fast_until: AtomicU64,
    /// Calls above this many nanoseconds are slow: the absolute threshold tightened by the
    /// relative one; `u64::MAX` when none applies. A hint republished under the lock: a call
    /// judged against the previous threshold is judged as of a moment ago.
    slow_nanos: AtomicU64,
    /// Whether a refusal while open may be decided on the inlined quick path when a
    /// [`CoarseClock`](crate::clock::CoarseClock) runs: on the system clock, not in shadow
    /// mode. Fixed at build.
    quick_refusals: bool,
}

/// What the inlined quick path of admission decided.
enum Quick {
    Admit(Ticket),
    /// A [`Ticket::refused`].
    Refuse(Ticket),
    /// Undecided: [`Breaker::ticket_slow`] decides.
    Slow,
}

/// Which calls are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// None: no rule needs durations.
    None,
    /// Every call: an absolute slow-call threshold is set.
    All,
    /// One call in [`SAMPLE`](crate::inflight::SAMPLE) per breaker and thread (probes and ramp
    /// calls always): only the relative slow-call rule needs durations, and a sample measures
    /// the baseline and estimates the slow share (a slow sampled call counts for the calls it
    /// stands for). Saves two precise clock reads on most calls.
    Sampled,
}

pub(crate) struct Shared {
    hot: CachePadded<Hot>,
    id: BreakerId,
    settings: Settings,
    /// Which calls are timed.
    timing: Timing,
    clock: TimeSource,
    shards: SuccessShards,
    /// How many fast successes one cell takes before its thread folds them in under the lock:
    /// a count window's size (so it notices when failures have slid out and it can go quiet),
    /// unbounded for a time window.
    fast_limit: u64,
    samples: Option<LatencySamples>,
    in_flight: Option<InFlight>,
    /// Where the paced successes of threads that own a cell count (sampled breakers on the
    /// system clock: nothing else is paced).
    tally: Option<Tally>,
    /// How far apart a cell's timed calls may come for its untimed ones to be paced (an
    /// eighth of the shortest bucket or slice, see `InFlight::track`; 0 on a custom clock).
    pace: u64,
    machine: CachePadded<Mutex<Machine>>,
    listeners: RwLock<Vec<Listener>>,
    #[cfg(feature = "metrics")]
    metrics: crate::observe::Metrics,
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
    shared: Arc<Shared>,
}

/// Builds a [`Breaker`] with a clock or a jitter seed of its own.
#[derive(Debug)]
pub struct BreakerBuilder {
    id: BreakerId,
    settings: Settings,
    clock: TimeSource,
    seed: Option<u64>,
    gate: Option<Gate>,
}

impl BreakerBuilder {
    /// A gate every trip from closed must pass: when `gate` answers `false`, the breaker stays
    /// closed (the trip is counted in [`Snapshot::suppressed_opens`]) and the next counted
    /// outcome is judged again. Re-opening from half-open or from a ramp is not gated.
    ///
    /// For caps across a fleet of breakers, such as "at most 3 of these 500 per-host breakers
    /// open at once": the gate runs under this breaker's lock, so it must be quick and must
    /// not call into this breaker (reserving a slot in a shared atomic counter is the intended
    /// use; the counter is released when the breaker closes, from its events).
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
    pub fn open_gate(mut self, gate: impl Fn(&BreakerId) -> bool + Send + Sync + 'static) -> Self {
        let id = self.id.clone();
        self.gate = Some(Gate(std::sync::Arc::new(move || gate(&id))));
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

    /// Seeds the jitter's random source, for reproducible breaks (default: a random seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the breaker. Starts no thread.
    pub fn build(self) -> Breaker {
        let seed = self.seed.unwrap_or_else(|| fastrand::u64(..));
        let mut machine = Machine::new(self.settings.clone(), seed, self.gate);
        let published = machine.publish(self.clock.recent());
        let hot = Hot {
            word: AtomicU64::new(published.word.bits()),
            until: AtomicU64::new(published.until),
            fast_until: AtomicU64::new(published.fast_until),
            slow_nanos: AtomicU64::new(published.slow_nanos),
            quick_refusals: matches!(self.clock, TimeSource::System(_)) && !self.settings.shadow,
        };
        let shards = SuccessShards::new(machine.epoch());
        // Only the system clock is worth skipping: a custom clock (a manual one in tests) is
        // read on every call, so that what a call sees never depends on its neighbours' pace.
        let pace = match self.clock {
            TimeSource::System(_) => machine.shortest_period() / crate::inflight::SAMPLE,
            TimeSource::Custom(_) => 0,
        };
        let samples = self
            .settings
            .relative_slow_calls()
            .map(|_| LatencySamples::new());
        let timing = if self.settings.slow_call_threshold.is_some() {
            Timing::All
        } else if self.settings.relative_slow_calls().is_some() {
            Timing::Sampled
        } else {
            Timing::None
        };
        let tally =
            (timing == Timing::Sampled && pace > 0).then(|| Tally::new(machine.generation()));
        let fast_limit = match self.settings.window {
            crate::TripWindow::Count(size) => u64::from(size),
            crate::TripWindow::Time(_) => u64::MAX,
        };
        // Watching calls in flight is part of measuring the dependency: adaptive breakers only.
        let adaptive_slow = self.settings.relative_slow_calls().is_some();
        #[cfg(feature = "metrics")]
        let metrics = crate::observe::Metrics::new(&self.id, published.word.state());
        Breaker {
            shared: Arc::new(Shared {
                #[cfg(feature = "metrics")]
                metrics,
                hot: CachePadded::new(hot),
                id: self.id,
                timing,
                settings: self.settings,
                clock: self.clock,
                shards,
                fast_limit,
                samples,
                in_flight: adaptive_slow.then(InFlight::new),
                tally,
                pace,
                machine: CachePadded::new(Mutex::new(machine)),
                listeners: RwLock::new(Vec::new()),
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
        }
    }

    /// The breaker's id.
    pub fn id(&self) -> &BreakerId {
        &self.shared.id
    }

    /// The breaker's settings.
    pub fn settings(&self) -> &Settings {
        &self.shared.settings
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

    /// Admission: a ticket, or the refusal made a [`Rejected`] (built here, once, in the
    /// caller's `Result`).
    #[inline(always)]
    fn ticket(&self) -> Result<Ticket, Rejected> {
        self.ticket_at(self.word())
    }

    /// The published word, as the hot path reads it.
    #[inline(always)]
    fn word(&self) -> Word {
        Word::from_bits(self.shared.hot.word.load(Ordering::Acquire))
    }

    /// [`Breaker::ticket`] with the word already read.
    #[inline(always)]
    fn ticket_at(&self, word: Word) -> Result<Ticket, Rejected> {
        // Matched apart, so that the admitted ticket of the quick path is never tested for a
        // refusal.
        let refused = match self.quick_ticket(word) {
            Quick::Admit(ticket) => return Ok(ticket),
            Quick::Refuse(ticket) => ticket,
            Quick::Slow => match self.ticket_slow() {
                ticket if ticket.is_refused() => ticket,
                ticket => return Ok(ticket),
            },
        };
        let (reason, retry_after) = refused.refusal();
        Err(Rejected::new(reason, retry_after, self.shared.id.clone()))
    }

    /// The admissions and refusals that need nothing but the word (and, on a sampled breaker,
    /// the thread's turn; while open, the coarse clock): [`Quick::Slow`] sends the call to
    /// [`Breaker::ticket_slow`]. Kept apart from it and small enough to inline, so that the
    /// ticket travels in registers rather than inside a `Result` as large as a [`Rejected`].
    #[inline(always)]
    fn quick_ticket(&self, word: Word) -> Quick {
        let s = &*self.shared;
        if word.is_closed_still() {
            // The healthy path of a permit: one test of the word.
            return Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0));
        }
        match word.state() {
            State::Closed => match (s.timing, &s.in_flight) {
                (Timing::None, _) => Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0)),
                // A sampled breaker's untimed calls, seven in eight.
                (Timing::Sampled, Some(in_flight)) => {
                    let turn = in_flight.turn();
                    match (turn.sampled, turn.paced) {
                        (true, _) => Quick::Slow,
                        (false, true) => Quick::Admit(Ticket::paced(word.generation())),
                        (false, false) => {
                            Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0))
                        }
                    }
                }
                _ => Quick::Slow,
            },
            // With a coarse clock running, a refusal is two more loads: the coarse time and
            // the break's end. Without one, or once the break has ended, the slow path reads
            // the clock itself.
            State::Open if s.hot.quick_refusals => match crate::clock::coarse_time() {
                0 => Quick::Slow,
                now => self
                    .refusal_while_open(now)
                    .map_or(Quick::Slow, Quick::Refuse),
            },
            _ => Quick::Slow,
        }
    }

    /// The refusal of a call at `now` while open, unless the break has ended. Reads the
    /// break's end after the caller read an open word (see the module's orderings).
    #[inline(always)]
    fn refusal_while_open(&self, now: u64) -> Option<Ticket> {
        let until = self.shared.hot.until.load(Ordering::Relaxed);
        (now < until).then(|| {
            self.refuse(
                RejectReason::Open,
                RetryAfter::from_nanos(Some(until - now)),
            )
        })
    }

    /// A timed call admitted while closed: a sampled one (tracked in flight), or any call
    /// with an absolute threshold (tracked one in eight).
    fn closed_timed(&self, word: Word) -> Ticket {
        let s = &*self.shared;
        let track = match s.timing {
            Timing::Sampled => true,
            _ => s.in_flight.as_ref().is_some_and(|f| f.turn().sampled),
        };
        let start = s.clock.now();
        if s.in_flight.is_some() && start >= s.hot.fast_until.load(Ordering::Relaxed) {
            // Timed calls also keep the calls-in-flight check going: past the deadline the
            // lock is taken, and the check may open the breaker.
            return self.admit_locked(start, track);
        }
        self.normal_ticket(word.generation(), start, track)
    }

    /// A timed ticket for a call admitted while closed.
    fn normal_ticket(&self, generation: u32, start: u64, track: bool) -> Ticket {
        let mut ticket = Ticket::timed_from(generation, Role::Normal, start);
        if let (true, Some(in_flight)) = (track, &self.shared.in_flight) {
            in_flight.track(start, self.shared.pace);
            ticket.set_tracked(true);
        }
        ticket
    }

    /// Every other admission: timed calls, and every state but closed. A refusal comes back
    /// as a [`Ticket::refused`].
    #[inline(never)]
    fn ticket_slow(&self) -> Ticket {
        let s = &*self.shared;
        let word = self.word();
        // The refusal while open first, in a function small enough to need few registers:
        // one coarse clock read and a load.
        if word.state() == State::Open && !s.settings.shadow {
            let now = s.clock.recent();
            return self
                .refusal_while_open(now)
                .unwrap_or_else(|| self.admit_locked(now, false));
        }
        self.ticket_other(word)
    }

    /// [`Breaker::ticket_slow`] in every state but open.
    #[inline(never)]
    fn ticket_other(&self, word: Word) -> Ticket {
        let s = &*self.shared;
        match word.state() {
            // A timed call (its turn already taken), or a breaker that closed since the quick
            // path looked.
            State::Closed => match s.timing {
                Timing::None => Ticket::new(word.generation(), Role::Normal, 0),
                _ => self.closed_timed(word),
            },
            State::Disabled => Ticket::uncounted(),
            State::Isolated if !s.settings.shadow => {
                self.refuse(RejectReason::Isolated, RetryAfter::from_nanos(None))
            }
            _ => self.admit_locked(s.clock.recent(), false),
        }
    }

    #[inline]
    fn refuse(&self, reason: RejectReason, retry_after: RetryAfter) -> Ticket {
        #[cfg(feature = "metrics")]
        self.shared.metrics.rejection(reason);
        Ticket::refused(reason, retry_after)
    }

    #[cold]
    fn admit_locked(&self, now: u64, track: bool) -> Ticket {
        let (admission, transition) = self.with_machine(now, |m| m.admit(now));
        self.emit(transition, now);
        let s = &*self.shared;
        match admission {
            Admission::Admit { generation, role } => match (role, s.timing) {
                (Role::Uncounted, _) | (_, Timing::None) => Ticket::new(generation, role, 0),
                // A call admitted while closed is timed as its mode says.
                (Role::Normal, Timing::Sampled) if !track => Ticket::new(generation, role, 0),
                (Role::Normal, _) => self.normal_ticket(generation, s.clock.now(), track),
                // Probes and ramp calls decide: always timed.
                (Role::Probe | Role::Ramp, _) => {
                    Ticket::timed_from(generation, role, s.clock.now())
                }
            },
            Admission::Refuse {
                reason,
                retry_after,
            } => self.refuse(reason, RetryAfter::new(retry_after)),
        }
    }

    /// Records the outcome of a ticket's call.
    #[inline]
    pub(crate) fn finish(&self, ticket: Ticket, outcome: Outcome) {
        // The healthy path, small enough to inline: an untimed success on a quiet breaker
        // changes nothing and writes nothing; on a fast one it adds to its thread's cell (a
        // paced one, to its thread's own tally cell).
        #[cfg(not(feature = "metrics"))]
        if outcome == Outcome::Success && (ticket.is_plain() || ticket.is_paced()) {
            if ticket.is_plain() {
                let word = self.word();
                if word.is_still_in(ticket.generation()) {
                    return;
                }
            } else if self.tally_paced(ticket) {
                return;
            }
            // Straight to the cell: an untimed normal success has nothing else to record.
            if !self.success_off_lock(ticket, None) {
                self.finish_locked(ticket, outcome, 0, self.shared.clock.recent());
            }
            return;
        }
        self.finish_slow(ticket, outcome);
    }

    /// Counts a fast (not slow) success of a normal call without the lock, if the published
    /// word allows: false when it must take the lock.
    ///
    /// The fast flag lapses at `fast_until` (the next bucket boundary, baseline slice or
    /// refresh): a timed call checks it against its end time `end`. An untimed call checks it
    /// with [`Clock::recent`] (one load with a coarse clock, a precise read without), unless
    /// it is paced: on a sampled breaker whose thread's timed calls (one in eight) have come
    /// less than an eighth of a bucket apart, those calls watch the deadline and take the lock
    /// past it. A success then lands in the bucket before its own only if it comes between a
    /// boundary and the next timed call of its thread — about an eighth of a bucket's calls at
    /// worst, or up to seven calls per thread when traffic stops and restarts — and a trip that
    /// the boundary alone brings about (old successes leaving the window) is found at that
    /// timed call, as late. That saves a precise clock read on seven calls in eight of every
    /// busy adaptive breaker.
    ///
    /// A locked operation swaps the cells to its new epoch first and publishes the word last,
    /// so a success that read the word before it finds its cell moved on. It then waits (a
    /// bounded spin) for the new word and judges itself against it: the success comes after
    /// that operation, under the state it published. Taking the lock instead would start
    /// another operation that moves every cell again, and two busy threads would hand each
    /// other a locked operation on every call (a million a second were measured).
    #[inline(never)]
    fn success_off_lock(&self, ticket: Ticket, end: Option<u64>) -> bool {
        let s = &*self.shared;
        let mut seen = None;
        for _ in 0..crate::loom::SPINS {
            let word = self.word();
            if !word.lets_success_off_lock(ticket.generation()) {
                return false;
            }
            let until = s.hot.fast_until.load(Ordering::Relaxed);
            let in_time = until == u64::MAX
                || match end {
                    Some(end) => end < until,
                    None => ticket.is_paced() || s.clock.recent() < until,
                };
            if !in_time {
                return false;
            }
            if word.is_quiet() {
                return true;
            }
            if seen == Some(word.epoch()) {
                // The operation that moved the cell has not published yet.
                crate::loom::spin();
                continue;
            }
            match s.shards.try_add(word.epoch(), s.fast_limit) {
                Add::Added => return true,
                Add::Full => return false,
                Add::Moved => seen = Some(word.epoch()),
            }
        }
        false
    }

    /// Counts a paced success on its thread's own tally cell (a load and a store), if the
    /// published word allows it as [`Breaker::success_off_lock`] would and the thread owns a
    /// cell: false when it must be counted there instead. Not inlined: inlined into `finish`,
    /// it made every caller's healthy path slower (3.5-4.3 -> 5.8-6.5 ns/call, harness, same
    /// phase), and the call costs the paced path little.
    #[inline(never)]
    fn tally_paced(&self, ticket: Ticket) -> bool {
        let s = &*self.shared;
        let Some(tally) = &s.tally else {
            return false;
        };
        let word = self.word();
        if !word.lets_success_off_lock(ticket.generation()) {
            return false;
        }
        if word.is_quiet() {
            return true;
        }
        match tally.add(crate::slot::thread_slot(), word.generation()) {
            Tallied::Counted => true,
            Tallied::CountedFold => {
                self.fold_tally();
                true
            }
            Tallied::NotOwner => false,
        }
    }

    /// A locked operation that only folds the counters in (a tally cell asks for one every
    /// 2³¹ successes, so that its count cannot wrap between folds).
    #[cold]
    fn fold_tally(&self) {
        let now = self.shared.clock.recent();
        self.with_machine(now, |_| ());
    }

    /// Every other outcome: timed calls, failures, probes, and successes that must be counted.
    #[inline(never)]
    fn finish_slow(&self, ticket: Ticket, outcome: Outcome) {
        let s = &*self.shared;
        if ticket.role() == Role::Uncounted {
            return;
        }
        #[cfg(feature = "metrics")]
        s.metrics.call(outcome);
        if let (true, Some(in_flight)) = (ticket.tracked(), &s.in_flight) {
            in_flight.finish();
        }
        let end = ticket.timed().then(|| s.clock.now());
        let duration = end.map(|end| end.saturating_sub(ticket.start));
        let slow = match duration {
            Some(d) if d > s.hot.slow_nanos.load(Ordering::Relaxed) => {
                // A sampled call stands for the calls that were not timed.
                if s.timing == Timing::Sampled && ticket.role() == Role::Normal {
                    crate::inflight::SAMPLE as u8
                } else {
                    1
                }
            }
            _ => 0,
        };
        if let (Outcome::Success, Some(samples), Some(duration)) = (outcome, &s.samples, duration) {
            // Every success measures the dependency, whatever its generation.
            samples.add(duration);
        }
        if ticket.role() == Role::Normal {
            match outcome {
                // Ignored touches nothing while closed.
                Outcome::Ignored => return,
                Outcome::Success
                    if slow == 0
                        && ((ticket.is_paced() && self.tally_paced(ticket))
                            || self.success_off_lock(ticket, end)) =>
                {
                    return;
                }
                _ => {}
            }
        }
        let now = end.unwrap_or_else(|| s.clock.recent());
        self.finish_locked(ticket, outcome, slow, now);
    }

    #[cold]
    fn finish_locked(&self, ticket: Ticket, outcome: Outcome, slow: u8, now: u64) {
        let transition = self.with_machine(now, |m| {
            m.record(now, ticket.generation(), ticket.role(), outcome, slow)
        });
        self.emit(transition, now);
    }

    /// Gives back a probe slot of a ticket that finished without an outcome.
    #[inline]
    pub(crate) fn release(&self, ticket: Ticket) {
        // A dropped permit of a healthy call does nothing at all: only tracked calls and probes
        // have anything to give back.
        if ticket.tracked() || ticket.role() == Role::Probe {
            self.release_slow(ticket);
        }
    }

    #[cold]
    fn release_slow(&self, ticket: Ticket) {
        if let (true, Some(in_flight)) = (ticket.tracked(), &self.shared.in_flight) {
            in_flight.finish();
        }
        if ticket.role() == Role::Probe {
            let now = self.shared.clock.recent();
            self.with_machine(now, |m| m.release(ticket.generation(), ticket.role()));
        }
    }

    /// Runs `f` on the machine under the lock, after folding in the fast successes counted
    /// since the last locked operation, then publishes the hot-path values.
    fn with_machine<R>(&self, now: u64, f: impl FnOnce(&mut Machine) -> R) -> R {
        self.with_machine_fresh(now, false, f)
    }

    /// [`Breaker::with_machine`], merging every pending latency sample first when `fresh`.
    fn with_machine_fresh<R>(&self, now: u64, fresh: bool, f: impl FnOnce(&mut Machine) -> R) -> R {
        let s = &*self.shared;
        let mut machine = lock(&s.machine);
        #[cfg(feature = "metrics")]
        let state_before = machine.state();
        // Take the fast successes of the last epoch, and make any add still racing to land in
        // it fail, so that it takes the lock and is evaluated like any other outcome. Take
        // what the tally cells gained too (a paced success racing this lands in the next fold).
        let epoch = machine.next_epoch();
        let tallied = s.tally.as_ref().map_or(0, |t| t.fold(machine.generation()));
        machine.absorb(s.shards.rotate(epoch) + tallied);
        if let Some(samples) = &s.samples
            && (fresh || machine.wants_latency(now))
        {
            machine.merge_latency(now, samples.drain());
        }
        let mut checked = None;
        if let Some(in_flight) = &s.in_flight
            && machine.wants_in_flight(now)
        {
            checked = machine.check_in_flight(now, in_flight.totals());
        }
        let result = f(&mut machine);
        let published = machine.publish(now);
        s.hot.until.store(published.until, Ordering::Relaxed);
        s.hot
            .fast_until
            .store(published.fast_until, Ordering::Relaxed);
        s.hot
            .slow_nanos
            .store(published.slow_nanos, Ordering::Relaxed);
        s.hot.word.store(published.word.bits(), Ordering::Release);
        #[cfg(feature = "metrics")]
        if published.word.state() != state_before {
            // Under the lock, so gauge updates land in the order of the transitions.
            s.metrics.set_state(published.word.state());
        }
        drop(machine);
        // A check of calls in flight that opened the breaker was caused by this call too.
        self.emit(checked, now);
        result
    }

    fn emit(&self, transition: Option<Transition>, now: u64) {
        let Some(transition) = transition else {
            return;
        };
        let event = Event {
            breaker: self.shared.id.clone(),
            at: Duration::from_nanos(now),
            transition,
        };
        #[cfg(feature = "tracing")]
        crate::observe::trace(&event);
        #[cfg(feature = "metrics")]
        self.shared
            .metrics
            .transition(transition.from(), transition.to());
        let listeners = self
            .shared
            .listeners
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for listener in listeners.iter() {
            // A panicking listener must not take the breaker or the caller down with it; the
            // state changed before any listener ran.
            let _ = catch_unwind(AssertUnwindSafe(|| listener(&event)));
        }
    }

    /// Calls `listener` on every transition, on the thread of the call that caused it, after
    /// the state changed and outside the breaker's lock. A panic in a listener is caught and
    /// ignored. With no listener, a transition costs one uncontended read lock.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        self.shared
            .listeners
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(std::sync::Arc::new(listener));
    }

    /// Runs `f` through the breaker; `Ok` is a success and `Err` a failure.
    ///
    /// A refused call does not run `f`. A panic in `f` records nothing, gives a probe slot
    /// back and keeps unwinding.
    #[inline(always)]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, Error<E>> {
        self.call_with(&DefaultClassifier, f)
    }

    /// Runs `f` through the breaker, with `classifier` deciding what its result means.
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
        permit.record(classifier.classify(&result));
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
        let outcome = classifier.classify(&result);
        // With `metrics`, every call is counted and no success skips `finish`.
        if cfg!(feature = "metrics") || outcome != Outcome::Success || self.word() != word {
            // Laid out of line, so that the healthy call runs straight through.
            std::hint::cold_path();
            self.finish(Ticket::new(word.generation(), Role::Normal, 0), outcome);
        }
        result.map_err(Error::Inner)
    }

    /// Awaits `future` through the breaker; works on any runtime.
    ///
    /// A refused call drops `future` unpolled. Dropping the returned future before it
    /// finishes (a timeout, a `select!`) records nothing and gives a probe slot back.
    pub async fn call_async<T, E, F>(&self, future: F) -> Result<T, Error<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_async_with(&DefaultClassifier, future).await
    }

    /// Like [`Breaker::call_async`], with `classifier` deciding what the result means.
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
        permit.record(classifier.classify(&result));
        result.map_err(Error::Inner)
    }

    /// The state now. Changes nothing and takes no probe slot: an open breaker whose break has
    /// elapsed reports [`State::HalfOpen`] (the next call will be a probe).
    pub fn state(&self) -> State {
        let now = self.shared.clock.recent();
        lock(&self.shared.machine).state_at(now)
    }

    /// The state and generation as last published for the hot path: one atomic load, no lock,
    /// no side effect. The generation changes with every transition, so `(state, generation)`
    /// tells whether anything happened since an earlier peek. Unlike [`Breaker::state`], an
    /// open breaker whose break has elapsed reads `Open` here until a call enters half-open.
    /// Safe to call from an [open gate](BreakerBuilder::open_gate) of another breaker.
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
        lock(&self.shared.machine).opened_at()
    }

    /// What is left of the break being served; `None` unless open.
    pub fn break_remaining(&self) -> Option<Duration> {
        let now = self.shared.clock.recent();
        lock(&self.shared.machine).break_remaining(now)
    }

    /// The state and counts, read consistently (successes counted on the fast path included).
    pub fn snapshot(&self) -> Snapshot {
        let now = self.shared.clock.recent();
        self.with_machine_fresh(now, true, |m| m.snapshot(now))
    }

    /// What a successful call normally takes, as this breaker measures it: the configured
    /// quantile (default the median) of successful durations over the baseline window.
    /// `None` until 20 timed successes have landed, and while the breaker is not adaptive; the
    /// relative slow-call trip is not armed until then either. Without an absolute slow-call
    /// threshold, one call in eight per thread is timed, so that is about 160 calls.
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
        let now = self.shared.clock.recent();
        self.with_machine_fresh(now, true, |m| m.normal_latency())
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
        let now = self.shared.clock.recent();
        self.with_machine(now, |m| m.normal_failure_rate(now))
    }

    /// Forces the breaker open until [`Breaker::reset`]. Raises no event.
    pub fn isolate(&self) {
        let now = self.shared.clock.recent();
        self.with_machine(now, |m| m.isolate(now));
    }

    /// Lets every call through and records nothing until [`Breaker::reset`]. Raises no event.
    pub fn disable(&self) {
        let now = self.shared.clock.recent();
        self.with_machine(now, Machine::disable);
    }

    /// Back to closed (or disabled, if configured so) with an empty window and no break
    /// growth. Calls in flight from before are not counted. Raises no event.
    pub fn reset(&self) {
        let now = self.shared.clock.recent();
        self.with_machine(now, Machine::reset);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const MS: u64 = 1_000_000;

    /// A default (adaptive, sampled) breaker on a manual clock, with untimed successes paced
    /// as on the system clock when `paced`.
    fn sampled(paced: bool) -> (Breaker, ManualClock) {
        let clock = ManualClock::new();
        let mut breaker = Breaker::builder("paced").clock(clock.clone()).build();
        let shared = Arc::get_mut(&mut breaker.shared).expect("a fresh breaker");
        assert_eq!(shared.timing, Timing::Sampled);
        shared.pace = if paced { 125 * MS } else { 0 };
        // As the builder does for a paced breaker (on the system clock).
        shared.tally = paced.then(|| Tally::new(lock(&shared.machine).generation()));
        (breaker, clock)
    }

    fn succeed(breaker: &Breaker, calls: usize) {
        for _ in 0..calls {
            breaker.call(|| Ok::<(), ()>(())).unwrap();
        }
    }

    #[test]
    fn a_paced_success_past_a_boundary_counts_in_the_bucket_before_until_a_timed_call() {
        for paced in [false, true] {
            let (breaker, clock) = sampled(paced);
            // Calls 1 and 9 are timed, at the same moment: the thread's cell is paced from
            // then on (when pacing is on), and calls 10–15 get paced tickets.
            succeed(&breaker, 15);
            clock.advance(Duration::from_millis(1_500));
            // Call 16 is untimed, past the bucket boundary at 1 s; call 17 is timed.
            succeed(&breaker, 2);
            assert_eq!(breaker.snapshot().calls, 17);
            clock.advance(Duration::from_secs(29));
            // At 30.5 s the bucket of 0 s has dropped out of the 30 s window.
            let left = breaker.snapshot().calls;
            if paced {
                assert_eq!(
                    left, 1,
                    "call 16 skipped the clock and landed in the 0 s bucket"
                );
            } else {
                assert_eq!(
                    left, 2,
                    "call 16 read the clock and landed in its own bucket"
                );
            }
        }
    }

    #[test]
    fn busy_threads_do_not_hand_each_other_locked_operations() {
        // Two threads of successes on a breaker with a time window (never quiet: every
        // success adds to a cell), for 200 ms. A success whose cell was moved by the other
        // thread's locked operation waits for its word instead of starting one of its own;
        // before that, the two threads took turns taking the lock, on 1–2% of all calls.
        // With a slow-call threshold of 1 ms, calls in flight are checked every millisecond:
        // each check a locked operation racing the other thread's successes.
        let settings = Settings::builder()
            .slow_call_threshold(Some(Duration::from_millis(1)))
            .build()
            .unwrap();
        let breaker = Breaker::new("busy", settings);
        succeed(&breaker, 1_000);
        let epoch = || lock(&breaker.shared.machine).epoch();
        let (started, before) = (std::time::Instant::now(), epoch());
        let run = Duration::from_millis(200);
        let calls: u64 = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        let mut calls = 0;
                        while started.elapsed() < run {
                            succeed(&breaker, 1_000);
                            calls += 1_000;
                        }
                        calls
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        let operations = u64::from(epoch().wrapping_sub(before) & crate::state::EPOCH_MASK);
        // One per calls-in-flight check (at most one a millisecond), per bucket boundary and
        // per sample merge, on each thread.
        let allowed = 4 * started.elapsed().as_millis() as u64 + 100;
        assert!(
            operations <= allowed,
            "{operations} locked operations for {calls} calls (allowed {allowed})"
        );
    }

    #[test]
    fn paced_successes_of_every_thread_are_counted_once() {
        let (breaker, _clock) = sampled(true);
        succeed(&breaker, 16);
        let tally = breaker.shared.tally.as_ref().expect("a sampled breaker");
        assert!(
            tally.held() > 0,
            "this thread's paced successes are tallied"
        );
        // Threads one after another (each takes the slot the last one gave back), then three
        // at once (one may have no cell of its own and count in the shards).
        for _ in 0..3 {
            std::thread::scope(|scope| {
                scope.spawn(|| succeed(&breaker, 1_000));
            });
        }
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| succeed(&breaker, 2_000));
            }
        });
        assert_eq!(breaker.snapshot().calls, 16 + 3_000 + 6_000);
        assert_eq!(
            breaker.snapshot().calls,
            16 + 3_000 + 6_000,
            "and not again"
        );
    }

    #[test]
    fn a_paced_success_landing_after_a_reset_does_not_count() {
        let (breaker, _clock) = sampled(true);
        succeed(&breaker, 40);
        let tally = breaker.shared.tally.as_ref().expect("a sampled breaker");
        assert!(tally.held() > 0);
        let word = || breaker.word();
        let before = word().generation();
        breaker.reset();
        assert_ne!(word().generation(), before, "a reset starts a generation");
        // A success that read the word before the reset and lands after its fold.
        assert_eq!(
            tally.add(crate::slot::thread_slot(), before),
            Tallied::Counted
        );
        assert_eq!(breaker.snapshot().calls, 0);
        succeed(&breaker, 40);
        assert_eq!(breaker.snapshot().calls, 40);
    }

    #[test]
    fn pacing_lapses_when_timed_calls_come_further_apart() {
        let (breaker, clock) = sampled(true);
        succeed(&breaker, 15);
        // The next timed call (17) comes 200 ms after the last one (9): more than the pace.
        clock.advance(Duration::from_millis(200));
        succeed(&breaker, 2);
        clock.advance(Duration::from_millis(900));
        // Call 18 is untimed and no longer paced: it reads the clock (1.1 s, past the
        // boundary at 1 s) and takes the lock.
        succeed(&breaker, 1);
        clock.advance(Duration::from_millis(29_500));
        assert_eq!(
            breaker.snapshot().calls,
            1,
            "only call 18 is left at 30.6 s"
        );
    }
}

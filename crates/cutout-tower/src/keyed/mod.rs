//! Keyed breakers: one [`Breaker`] per key (per host by default), bounded, observable, capped.
//!
//! [`KeyedBreakers`] is the map: it creates a key's breaker on the key's first call, evicts
//! keys that have been idle, and refuses to let more than a set number of keys be open at once.
//! [`KeyedLayer`] / [`KeyedService`] put it in a tower stack, with a key function that picks
//! the key of each request ([`ByHost`] for `http::Request`: scheme, host and port).
//!
//! # Health checks
//! [`KeyedBreakers::health_checks`] checks the open keys every few seconds with an async
//! function of yours; a check that passes ends that key's break early, and its probes decide
//! (the `health` module's docs say what a check can and cannot do).
//!
//! # Settings per key
//! A key's breaker gets its settings when the key is created, from one of:
//! - [`KeyedBreakers::builder`]: the same settings for every key;
//! - [`KeyedBreakers::builder_per_key`]: a function of the key (`Fn(&K) -> Settings`);
//! - `KeyedBreakers::builder_from_config` (feature `config`): a `cutout::config::Config`
//!   document, matched on the breaker id (the key's `Display`): a key listed as
//!   `[instances.<id>]` gets that instance's merged settings, any other key `[defaults]`.
//!
//! Settings are validated when they are made
//! ([`SettingsBuilder::build`](cutout::SettingsBuilder::build), or `Config::from_toml` with
//! its `CUT-CFG-…` codes), so creating a key never fails: a bad value is reported when the
//! settings or the document are loaded, not on the first call of some host. A key keeps the
//! settings it was created with until it is evicted; seen again, it is created again and its
//! settings are worked out again.
//!
//! # Bounds
//! - At most `max_keys` keys, while some key may go. A new key when the map is full first
//!   sweeps idle keys, then evicts (see [Eviction](#eviction)). When no key may go, the new
//!   key is created all the same, beyond `max_keys`, and counted in
//!   [`KeyedStats::over_capacity`]: a new host is never left without a breaker (refusing it
//!   would be the breaker causing the outage, and letting it through unguarded would leave a
//!   failing host unseen). What the map then holds beyond `max_keys` is bounded by what may
//!   not go: calls in flight, keys serving a break (at most `max_open` with a cap, and each
//!   for at most its break and its half-open wait), keys with a failure in their window, and
//!   keys an operator isolated or disabled. It shrinks back as they become evictable.
//! - A key idle for `idle_after` (no call started or finished) is evicted by the next sweep,
//!   if it may go. Sweeps run on the call path at most once per half `idle_after`, and on
//!   [`KeyedBreakers::evict_idle`].
//!
//! # Eviction
//! - Never a key with a call in flight, nor an isolated or disabled key (both last until
//!   reset, not until idle), nor a key serving its break, half-open or recovering: its state
//!   is the point of having it.
//! - A tripped key nobody calls any more is a **ghost** once it has sat, open past its break's
//!   end or half-open, for its `max_wait_in_half_open` (else `idle_after`) with no probe: its
//!   state advances with the clock (the lapsed break reads half-open, [`Breaker::state`]),
//!   and past that wait its next call would re-open or close it anyway. A recovering key
//!   unused for that long is a ghost too (its ramp advances only on calls, so it would
//!   recover for ever). An open key whose breaker still serves a break (an operator's
//!   `open_for`, which raises no event) is never one. A ghost gives its
//!   open-cap slot back and may be evicted. Its break growth is not dropped: the map keeps
//!   it as a *scar* (the key and its consecutive opens, at most `max_keys` of them, the oldest
//!   going first) and the key's next entry starts its break schedule from there, until that
//!   breaker closes or is reset, through [`KeyedBreakers::reset`] or the key's own
//!   [`Breaker`] handle alike: a reset raises no event, but the core tells the map of every
//!   reset ([`on_reset`](cutout::BreakerBuilder::on_reset)), under the reset's lock, so the
//!   growth carried goes with the breaker's own ("no break growth", DESIGN §2). A ghost's
//!   window is forgotten (it tripped long ago).
//! - A full map evicts the least recently used key that may go and has no recent trouble
//!   (no failure within its trip window, for a count window within `idle_after`; no opening
//!   within `idle_after`; no carried growth; its last judged call not a failure, so a host
//!   called more slowly than its window but failing every time keeps its streak), and only
//!   when there is none the least recently
//!   used of the others. So a stream of new hosts (an attacker choosing host names) pushes out
//!   keys like its own, and a host failing between them keeps its window until it trips:
//!   failures are noted by the map's own services ([`KeyedService`], cutout-reqwest's
//!   middleware); a breaker used through its handle is judged by its state alone.
//! - What it can no longer see: an attacker whose own hosts fail as well competes with a real
//!   failing host on recency alone; a key evicted while closed loses its window.
//!
//! # The open cap
//! With `max_open(n)`, at most `n` keys hold an *open slot* at once, and only a key holding one
//! can be open or half-open (two exceptions below: openings by hand and openings a dependency
//! asked for). The cap is exact for trips: every key's breaker has an
//! [open gate](cutout::BreakerBuilder::open_gate_for), asked under that breaker's lock before
//! it opens from closed and told why. The gate takes a slot if one is free and the breaker
//! opens; if none is, the breaker stays closed — its calls go through, its window and break
//! growth are kept, and its next counted outcome that still meets a trip condition asks
//! again, so it opens on the first such outcome after a slot frees. Each refused trip is
//! counted (per key in the breaker's [`Snapshot::suppressed_opens`], also shown as
//! [`KeySnapshot::suppressed_opens`], and in total in [`KeyedStats::suppressed_opens`]) and,
//! with the `tracing` feature, logged as a warning from the gate (at most one per key per
//! second: a capped key that keeps failing asks on every failure).
//!
//! A key holds its slot from the moment its gate takes it until its breaker is seen closed,
//! reset, disabled or isolated, or it becomes a ghost. A half-open or recovering key keeps it.
//! Slots are released lazily: the gates keep the generation each key had when it took its slot,
//! and before deciding they drop every slot whose key's [`Breaker::peek`] shows a newer
//! generation in a state that holds none, or that is a ghost. So a breaker reset, disabled or
//! isolated directly through its [`Breaker`] handle (which raises no event) frees its slot as
//! surely as one that closes after successful probes. Two keys tripping at once are serialized
//! by a mutex of the map's that the gates take; nothing under it takes a breaker's lock or the
//! map's lock, so no two breakers wait on each other.
//!
//! Transitions no gate is asked about are followed by a listener on every key's breaker
//! (after the fact, on the thread of the call that caused them, with no lock held): a key that
//! enters half-open, or that its own failed probe or ramp call re-opens, while it holds no
//! slot (it was opened by hand, or by a `Retry-After`, or it was a ghost whose slot went to
//! another key) takes a free slot, and with none free it is reset to closed, as a trip beyond
//! the cap stays closed (counted with the kept-closed trips; the reset raises no event and
//! shows as the snapshot's last manual action). Between the transition and its listener,
//! another thread may briefly see one key more open than the cap; what a call returns to its
//! caller is after both.
//!
//! Keys isolated or opened by an operator ([`Breaker::open_for`], no event) do not hold a slot
//! (the cap limits what the breakers decide, not what operators decide) until their own probe
//! runs. Openings the dependency asked for (`Retry-After`: a classifier's
//! [`Verdict::OpenFor`]) hold none either unless
//! [`KeyedBuilder::retry_after_takes_slot`] says so: a rate-limiting host is defending itself,
//! and a few of them must not fill `max_open` and keep failing hosts closed. The gate knows
//! them by the reason the core gives it ([`OpenReason::RetryAfter`]), so this holds however
//! the verdict was recorded, through a key's own [`Breaker`] handle too; a trip a listener
//! causes while such a verdict is being recorded has a trip's reason and needs a slot. An
//! evicted key gives its slot back; a [`Breaker`] handle kept past its key's eviction is no
//! longer part of the map, and trips freely.

mod health;
mod layer;
mod service;

pub use health::{CheckRound, HealthChecks};
pub use layer::{ByHost, HostKey, KeyFn, KeyedLayer};
pub use service::KeyedService;

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use cutout::classify::Verdict;
use cutout::clock::{Clock, SharedClock, SystemClock};
#[cfg(feature = "config")]
use cutout::config::Config;
use cutout::observer::CallObserver;
use cutout::{
    BreakSchedule, Breaker, BreakerId, Event, OpenReason, OwnedPermit, Settings, Snapshot, State,
    Transition, TripWindow,
};

/// Where each key's settings come from (see the [module docs](self#settings-per-key)).
enum SettingsSource<K> {
    /// The same settings for every key. (Boxed like the others: the variants stay small.)
    Fixed(Box<Settings>),
    /// A function of the key.
    PerKey(Box<dyn Fn(&K) -> Settings + Send + Sync>),
    /// A document: the key's instance, else its defaults, by breaker id.
    #[cfg(feature = "config")]
    Config(Box<Config>),
}

impl<K> SettingsSource<K> {
    /// The settings of a new key whose breaker id is `id`.
    #[cfg_attr(not(feature = "config"), allow(unused_variables))]
    fn settings(&self, key: &K, id: &str) -> Settings {
        match self {
            SettingsSource::Fixed(settings) => Settings::clone(settings),
            SettingsSource::PerKey(settings) => settings(key),
            #[cfg(feature = "config")]
            SettingsSource::Config(config) => config.settings_for(id).clone(),
        }
    }
}

impl<K> fmt::Debug for SettingsSource<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsSource::Fixed(settings) => f.debug_tuple("Fixed").field(settings).finish(),
            SettingsSource::PerKey(_) => f.write_str("PerKey(..)"),
            #[cfg(feature = "config")]
            SettingsSource::Config(config) => f
                .debug_struct("Config")
                .field(
                    "instances",
                    &config.instances().map(|(id, _)| id).collect::<Vec<_>>(),
                )
                .finish_non_exhaustive(),
        }
    }
}

/// One breaker per key, created on demand with settings for that key.
///
/// A cheap handle; see the [module docs](self) for the bounds and the open cap.
///
/// ```
/// use std::time::Duration;
/// use cutout::Settings;
/// use cutout_tower::keyed::KeyedBreakers;
///
/// let hosts = KeyedBreakers::<String>::builder(Settings::default())
///     .max_keys(256)
///     .idle_after(Duration::from_secs(600))
///     .max_open(8)
///     .build();
/// let breaker = hosts.breaker(&"https://api.example:443".to_string()).unwrap();
/// assert_eq!(breaker.id().as_str(), "https://api.example:443");
/// assert_eq!(hosts.len(), 1);
/// ```
///
/// # Orderings
/// The per-key counters are `Relaxed`: `in_flight` and `last_used` are read by the sweep under
/// the map's write lock, while calls change them under the read lock (when they enter) or
/// without it (when they finish). A call enters — and counts itself in flight — under the read
/// lock, so a sweep (which holds the write lock) either sees it in flight or runs before it and
/// then the call finds no key and creates a fresh one. The lock provides the ordering; the
/// atomics only need atomicity. A finishing call lowers `in_flight` after writing `last_used`,
/// and a sweep that reads the lowered count with `Relaxed` may see an older `last_used`, which
/// only makes the key look idle for longer than it was: it is then evicted a little early,
/// which loses nothing but a closed key's window. The statistics are plain `Relaxed` counters.
///
/// The times a key's listener and services note (`break_ends`, `half_open_since`,
/// `last_failure`, `failing`, `last_opened`, `carried_opens`) are `Relaxed` too: each is one value read
/// on its own, as a hint whose staleness is bounded by one transition or one call. A gate that
/// reads an older `break_ends` or `half_open_since` sees a key a ghost a little late or early
/// (its slot is kept a little longer, or its next call takes a slot again or is closed); the
/// eviction that reads an older `last_failure` may evict a key whose failure landed during the
/// scan. `carried_opens` is written when the entry is created (before it is shared), by the
/// breaker's reset hook under the breaker's lock (the lock orders it before the next opening,
/// whose break schedule reads it under that lock), and cleared by the breaker's own listener
/// after it closed (an opening after that close reads it cleared; one racing that listener
/// on another thread may still read it, and serve a grown break once).
/// `carry_on_reset` is written by the cap's listener just before the reset it then makes on
/// the same thread, and taken by that reset's hook; a reset of another thread landing between
/// the two takes it instead, and the cap's reset then carries nothing: the key ends closed
/// without growth, as that other reset asked.
pub struct KeyedBreakers<K> {
    inner: Arc<Inner<K>>,
}

/// Clones share the map, its breakers and its statistics.
impl<K> Clone for KeyedBreakers<K> {
    fn clone(&self) -> Self {
        KeyedBreakers {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K> {
    settings: SettingsSource<K>,
    clock: SharedClock,
    observers: Vec<Arc<dyn CallObserver>>,
    max_keys: usize,
    idle_nanos: u64,
    map: RwLock<HashMap<K, Arc<Entry>>>,
    /// The open cap, when there is one.
    cap: Option<Arc<Cap>>,
    next_sweep: AtomicU64,
    next_serial: AtomicU64,
    created: AtomicU64,
    evicted: AtomicU64,
    over_capacity: AtomicU64,
    /// The break growth of tripped keys evicted as ghosts, by key, restored when the key is
    /// created again (see the [module docs](self#eviction)). At most `max_keys` of them.
    scars: Mutex<HashMap<K, Scar>>,
}

/// An evicted tripped key's break growth: its consecutive opens, and when it was evicted.
#[derive(Debug, Clone, Copy)]
struct Scar {
    opens: u32,
    at: u64,
}

/// "Never" for the entries' clock readings.
const NEVER: u64 = u64::MAX;

pub(crate) struct Entry {
    breaker: Breaker,
    clock: SharedClock,
    /// Tells this entry's slot from that of an earlier entry for the same key.
    serial: u64,
    /// Set (under the map's write lock) when the entry leaves the map.
    evicted: AtomicBool,
    in_flight: AtomicUsize,
    last_used: AtomicU64,
    /// When the open cap last logged a refused trip of this key (`u64::MAX`: never).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    last_warned: AtomicU64,
    /// When the break being served ends, from the last opening's event (`NEVER`: unknown,
    /// closed, or opened by hand, which raises no event).
    break_ends: AtomicU64,
    /// When the breaker last entered half-open (`NEVER`: not since it last opened).
    half_open_since: AtomicU64,
    /// When a call through the map's services last failed (`NEVER`: none).
    last_failure: AtomicU64,
    /// Whether the last call judged through the map's services failed (a failure streak
    /// under way, however slowly the key is called): keeps the key out of the quiet tier of
    /// the least-recently-used eviction, so host churn cannot evict a slowly called failing
    /// host between its failures, and with it its consecutive failures.
    failing: AtomicBool,
    /// When the breaker last opened (`NEVER`: never).
    last_opened: AtomicU64,
    /// How long a tripped key may sit unprobed past its break's end (or in half-open) before
    /// it is a ghost: its `max_wait_in_half_open`, else `idle_after`.
    ghost_after: u64,
    /// How long a failure keeps the key out of the least-recently-used eviction: its trip
    /// window for a time window, else `idle_after`.
    failure_horizon: u64,
    /// Consecutive opens carried over from an earlier entry of the key (its scar), or from
    /// before the cap closed the key by reset: added to the opens the break schedule is asked
    /// about, until the breaker next closes or is reset (through the map or its handle).
    carried_opens: Arc<AtomicU32>,
    /// What the next reset leaves in `carried_opens` (taken by the reset hook): 0, except
    /// for the reset by which the cap closes a key, which keeps its growth.
    carry_on_reset: AtomicU32,
}

impl Entry {
    /// Whether the key is a tripped key nobody probes any more (a ghost): open past its
    /// break's end, or half-open, for longer than `ghost_after`, as the events of its own
    /// breaker tell, or recovering and unused for longer than `ghost_after`. Lock-free (atomic loads), so a gate may ask it of other keys.
    fn ghost(&self, now: u64) -> bool {
        let since = match self.breaker.peek().0 {
            State::Open => self.break_ends.load(Ordering::Relaxed),
            State::HalfOpen => self.half_open_since.load(Ordering::Relaxed),
            // A recovering key's ramp advances only on calls: one nobody calls again would
            // recover for ever, holding its slot and its place in the map. Idle that long
            // past its last use, it is a ghost too.
            State::Recovering => self.last_used.load(Ordering::Relaxed),
            _ => return false,
        };
        since != NEVER && now >= since.saturating_add(self.ghost_after)
    }

    /// As [`Entry::ghost`], and for a key opened by hand (no event: its break's end is read
    /// from the breaker under its lock). Under the map's lock, never under a gate.
    fn ghost_locked(&self, now: u64) -> bool {
        // An open key whose breaker still serves a break is no ghost, whatever its last
        // opening's event said: an operator's `open_for` (which raises no event) replaces
        // the break, and its key must not be evicted (and come back closed) during it.
        if self.breaker.peek().0 == State::Open
            && self
                .breaker
                .break_remaining()
                .is_some_and(|left| !left.is_zero())
        {
            return false;
        }
        if self.ghost(now) {
            return true;
        }
        if self.breaker.peek().0 != State::Open || self.break_ends.load(Ordering::Relaxed) != NEVER
        {
            return false;
        }
        let snapshot = self.breaker.snapshot();
        match (snapshot.opened_at, snapshot.current_break) {
            (Some(at), Some(served)) => {
                let ends = u64::try_from((at + served).as_nanos()).unwrap_or(NEVER);
                now >= ends.saturating_add(self.ghost_after)
            }
            _ => false,
        }
    }

    /// Forgets when the last break ends and when half-open began (a key taking a slot: its
    /// next transition's listener writes them anew).
    fn forget_break(&self) {
        self.break_ends.store(NEVER, Ordering::Relaxed);
        self.half_open_since.store(NEVER, Ordering::Relaxed);
    }

    /// Whether the key's last failure or opening is recent enough to keep it from the
    /// least-recently-used eviction of a full map.
    fn has_recent_trouble(&self, now: u64, idle: u64) -> bool {
        let recent = |at: u64, horizon: u64| at != NEVER && now.saturating_sub(at) < horizon;
        recent(
            self.last_failure.load(Ordering::Relaxed),
            self.failure_horizon,
        ) || self.failing.load(Ordering::Relaxed)
            || recent(self.last_opened.load(Ordering::Relaxed), idle)
            || self.carried_opens.load(Ordering::Relaxed) > 0
    }

    /// Follows the key's breaker's transitions: when its break ends, when it half-opened,
    /// and, with an open cap, that a key open or half-open holds a slot (see
    /// [`Cap::follow`]). Runs with no lock held, on the thread of the call that caused it.
    fn on_transition(self: &Arc<Self>, cap: Option<&Cap>, event: &Event) {
        let at = u64::try_from(event.at.as_nanos()).unwrap_or(NEVER);
        match event.transition {
            Transition::Opened { break_for, .. } => {
                let ends = at.saturating_add(u64::try_from(break_for.as_nanos()).unwrap_or(NEVER));
                self.break_ends.store(ends, Ordering::Relaxed);
                self.half_open_since.store(NEVER, Ordering::Relaxed);
                self.last_opened.store(at, Ordering::Relaxed);
            }
            Transition::HalfOpened | Transition::BreakEnded { .. } => {
                self.half_open_since.store(at, Ordering::Relaxed);
            }
            Transition::Closed { .. } => {
                self.break_ends.store(NEVER, Ordering::Relaxed);
                self.half_open_since.store(NEVER, Ordering::Relaxed);
                // Closed for good: the growth carried over from an earlier entry ends here,
                // as the breaker's own does.
                self.carried_opens.store(0, Ordering::Relaxed);
            }
            _ => {}
        }
        if let Some(cap) = cap {
            cap.follow(self, &event.transition);
        }
    }

    /// Notes what a call through the map's services was judged: a failure keeps the key
    /// out of the least-recently-used eviction for its failure horizon.
    pub(crate) fn saw(&self, verdict: &Verdict) {
        match verdict {
            Verdict::Failure => {
                self.last_failure
                    .store(self.clock.recent(), Ordering::Relaxed);
                self.failing.store(true, Ordering::Relaxed);
            }
            Verdict::Success => self.failing.store(false, Ordering::Relaxed),
            _ => {}
        }
    }
}

/// Records `verdict` on `permit`, for every future of this crate, noting a failure or a
/// success on the call's key (`guard`) for the least-recently-used eviction. (Whether an
/// opening is one the dependency asked for is the gate's to tell from its reason, however the
/// verdict was recorded: see [`Cap::admit`].)
pub(crate) fn record_verdict(permit: OwnedPermit, verdict: Verdict, guard: Option<&CallGuard>) {
    if let Some(guard) = guard {
        guard.entry.saw(&verdict);
    }
    permit.record_verdict(verdict);
}

/// The open cap: the slots held, shared by the gates of every key's breaker.
///
/// Lock order: the map's lock, then a breaker's lock, then `slots`. Nothing is locked while
/// `slots` is held (the gates only [`Breaker::peek`] other breakers).
struct Cap {
    max_open: usize,
    /// Whether openings a dependency asked for (`Retry-After`) take a slot.
    count_asked: bool,
    /// The keys holding a slot, by entry serial.
    slots: Mutex<HashMap<u64, Slot>>,
    /// Trips the cap refused, evicted keys' included.
    suppressed: AtomicU64,
}

/// A key's open slot: its entry, and its breaker's generation when it took the slot.
struct Slot {
    entry: Arc<Entry>,
    generation: u32,
}

impl Slot {
    /// Whether the key still holds its slot: it is taking it (its breaker has not moved since),
    /// or it is open, half-open or recovering, and not a ghost. Atomic loads, no lock.
    fn held(&self, now: u64) -> bool {
        let (state, generation) = self.entry.breaker.peek();
        (generation == self.generation || holds_slot(state)) && !self.entry.ghost(now)
    }
}

/// How often a key's refused trips are logged at most, in nanoseconds.
#[cfg(feature = "tracing")]
const WARN_EVERY: u64 = 1_000_000_000;

impl Cap {
    fn new(max_open: usize, count_asked: bool) -> Cap {
        Cap {
            max_open,
            count_asked,
            slots: Mutex::new(HashMap::new()),
            suppressed: AtomicU64::new(0),
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Slot>> {
        // Every mutation is one map operation, so a poisoned map is still consistent.
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops the slots of keys that no longer hold one; returns how many are held.
    fn prune(slots: &mut HashMap<u64, Slot>, now: u64) -> usize {
        slots.retain(|_, slot| slot.held(now));
        slots.len()
    }

    /// Takes a slot for `entry` if it holds none and one is free; whether it holds one now.
    fn take(&self, entry: &Arc<Entry>) -> bool {
        let mut slots = self.slots();
        let held = Self::prune(&mut slots, entry.clock.recent());
        if slots.contains_key(&entry.serial) {
            return true;
        }
        if held < self.max_open {
            // From a listener: the transition's times are written already, and stay.
            let (_, generation) = entry.breaker.peek();
            slots.insert(
                entry.serial,
                Slot {
                    entry: Arc::clone(entry),
                    generation,
                },
            );
            return true;
        }
        false
    }

    /// Keeps "a key open or half-open holds a slot" through the transitions its gate is not
    /// asked about (after the fact, from the key's listener, with no lock held):
    /// - an opening the dependency asked for (`Retry-After`) gives back the slot the key
    ///   held, unless the map counts them (from closed its gate took none, told the reason;
    ///   a probe or ramp call answered so re-opens a key that held one);
    /// - a key entering half-open, or re-opened by its own failed probe or ramp call, that
    ///   holds no slot (opened by hand, or by a `Retry-After`, or a ghost whose slot went to
    ///   another key) takes a free one; with none free it is reset to closed, as a trip
    ///   beyond the cap stays closed (counted as a kept-closed opening). That reset raises no
    ///   event and shows in its snapshot as the last manual action.
    fn follow(&self, entry: &Arc<Entry>, transition: &Transition) {
        if entry.evicted.load(Ordering::Relaxed) {
            return;
        }
        let needs_slot = match *transition {
            // From closed its gate, told the reason, took no slot: there is none to give back,
            // and one held now is a later trip's (a reset and a trip can land between this
            // opening and its listener; removing it left that trip open with no slot).
            Transition::Opened {
                reason: OpenReason::RetryAfter,
                from: State::Closed,
                ..
            } if !self.count_asked => return,
            Transition::Opened {
                reason: OpenReason::RetryAfter,
                ..
            } if !self.count_asked => {
                self.slots().remove(&entry.serial);
                return;
            }
            Transition::Opened { from, .. } => from != State::Closed,
            Transition::HalfOpened | Transition::BreakEnded { .. } => true,
            _ => false,
        };
        if !needs_slot {
            return;
        }
        if !self.take(entry) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            // Closed as a trip beyond the cap stays closed, its break growth kept: the reset
            // drops the breaker's own consecutive opens, so they are carried, as a scar's are,
            // until the breaker next closes on its own or is reset. The reset hook (under the
            // reset's lock) sets what is carried to what is left here for this reset.
            let opens = entry.breaker.snapshot().consecutive_opens;
            let carried = entry.carried_opens.load(Ordering::Relaxed);
            entry
                .carry_on_reset
                .store(carried.saturating_add(opens), Ordering::Relaxed);
            entry.breaker.reset();
        }
    }

    /// The gate of `entry`'s breaker, under that breaker's lock: whether it may open for
    /// `reason`.
    fn admit(&self, entry: &Arc<Entry>, reason: OpenReason) -> bool {
        if reason == OpenReason::RetryAfter && !self.count_asked {
            // An opening the dependency asked for (`Retry-After`, a classifier's
            // `Verdict::OpenFor`), however it was recorded (this crate's futures, a key's
            // `Breaker` handle, cutout-reqwest): the core tells the gate its reason. No slot
            // to take.
            return true;
        }
        let mut slots = self.slots();
        if entry.evicted.load(Ordering::Relaxed) {
            // No longer a key of the map (see `release`): not capped, not counted.
            return true;
        }
        let held = Self::prune(&mut slots, entry.clock.recent());
        if slots.contains_key(&entry.serial) {
            // Still holding the slot it took (its breaker cannot have moved since, or the
            // slot would have been pruned): nothing more to take.
            return true;
        }
        if held < self.max_open {
            // Taken before the gate answers, so a concurrent gate counts it; the generation
            // keeps it from being pruned until the breaker has opened and closed again. The
            // times of an earlier opening (left by a reset, which raises no event) must not
            // make the new one look like a ghost before its listener writes its own.
            entry.forget_break();
            let (_, generation) = entry.breaker.peek();
            slots.insert(
                entry.serial,
                Slot {
                    entry: Arc::clone(entry),
                    generation,
                },
            );
            return true;
        }
        drop(slots);
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        {
            let now = entry.clock.recent();
            let last = entry.last_warned.load(Ordering::Relaxed);
            // Only this breaker's gate writes it, under the breaker's lock.
            if last == u64::MAX || now.saturating_sub(last) >= WARN_EVERY {
                entry.last_warned.store(now, Ordering::Relaxed);
                tracing::warn!(
                    breaker = %entry.breaker.id(),
                    open_slots = held,
                    max_open = self.max_open,
                    "open cap reached: breaker kept closed, its calls go through"
                );
            }
        }
        false
    }

    /// Gives back the slots of entries that left the map. Their `evicted` flags are set first,
    /// so a gate that runs after this sees them.
    fn release<'a>(&self, evicted: impl ExactSizeIterator<Item = &'a Arc<Entry>>) {
        if evicted.len() == 0 {
            return;
        }
        let mut slots = self.slots();
        for entry in evicted {
            slots.remove(&entry.serial);
        }
    }

    /// The slots held at `now`.
    fn held(&self, now: u64) -> usize {
        Self::prune(&mut self.slots(), now)
    }
}

/// Marks a call in flight on its key, so the key is not evicted under it.
pub(crate) struct CallGuard {
    entry: Arc<Entry>,
}

impl CallGuard {
    pub(crate) fn breaker(&self) -> &Breaker {
        &self.entry.breaker
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let entry = &self.entry;
        entry
            .last_used
            .store(entry.clock.recent(), Ordering::Relaxed);
        entry.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for CallGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CallGuard")
            .field(self.entry.breaker.id())
            .finish()
    }
}

/// Builds a [`KeyedBreakers`].
pub struct KeyedBuilder<K> {
    settings: SettingsSource<K>,
    clock: Arc<dyn Clock>,
    max_keys: usize,
    idle_after: Duration,
    max_open: Option<usize>,
    retry_after_takes_slot: bool,
    observers: Vec<Arc<dyn CallObserver>>,
}

impl<K> fmt::Debug for KeyedBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("settings", &self.settings)
            .field("max_keys", &self.max_keys)
            .field("idle_after", &self.idle_after)
            .field("max_open", &self.max_open)
            .field("retry_after_takes_slot", &self.retry_after_takes_slot)
            .finish_non_exhaustive()
    }
}

impl<K> KeyedBuilder<K> {
    fn new(settings: SettingsSource<K>) -> KeyedBuilder<K> {
        KeyedBuilder {
            settings,
            clock: Arc::new(SystemClock),
            max_keys: 1024,
            idle_after: Duration::from_secs(600),
            max_open: None,
            retry_after_takes_slot: false,
            observers: Vec::new(),
        }
    }

    /// A call observer every key's breaker reports to (see [`cutout::observer`]); the call's
    /// [`breaker`](cutout::observer::Call::breaker) is the key's id. May be called more than
    /// once.
    pub fn observer(mut self, observer: impl CallObserver) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// The most keys held at once (default 1024, at least 1).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }

    /// How long a key may go without a call before a sweep evicts it (default 10 minutes).
    /// Keep it well above the trip window, or a slowly failing host is forgotten before it
    /// trips.
    pub fn idle_after(mut self, idle_after: Duration) -> Self {
        self.idle_after = idle_after;
        self
    }

    /// The most keys that may be open or half-open at once (default: no cap). Beyond it a key
    /// that would open stays closed, and opens on a later trip once a slot is free (see the
    /// [module docs](self)).
    pub fn max_open(mut self, max_open: usize) -> Self {
        self.max_open = Some(max_open);
        self
    }

    /// Whether a key opened because its dependency asked (`Retry-After`, a classifier's
    /// [`Verdict::OpenFor`]) takes an open slot (default `false`). A host that asks not to be
    /// called for a while is defending itself, not failing, and rate-limiting hosts must not
    /// fill `max_open` and keep failing ones closed; such a key holds no slot while it serves
    /// the time asked, and takes one (or is closed when none is free) when it half-opens. With
    /// `true`, such an opening passes the gate as a trip does: beyond the cap, the key stays
    /// closed and its calls go through. Either way the opening is told apart from a trip by
    /// its reason, which the core gives the gate
    /// ([`open_gate_for`](cutout::BreakerBuilder::open_gate_for)), however the verdict was
    /// recorded: through the map's services, cutout-reqwest's middleware or a key's own
    /// [`Breaker`] handle (`call_with`, a permit's `record_verdict`).
    pub fn retry_after_takes_slot(mut self, takes: bool) -> Self {
        self.retry_after_takes_slot = takes;
        self
    }

    /// The clock every key's breaker and the idle sweep run on (default: cutout's
    /// [`SystemClock`]; [`TokioClock`](crate::TokioClock) in tests with paused time).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Builds the map.
    pub fn build(self) -> KeyedBreakers<K> {
        let idle_nanos = u64::try_from(self.idle_after.as_nanos()).unwrap_or(u64::MAX);
        KeyedBreakers {
            inner: Arc::new(Inner {
                settings: self.settings,
                clock: SharedClock::from_arc(self.clock),
                observers: self.observers,
                max_keys: self.max_keys,
                idle_nanos,
                map: RwLock::new(HashMap::new()),
                cap: self
                    .max_open
                    .map(|max_open| Arc::new(Cap::new(max_open, self.retry_after_takes_slot))),
                next_sweep: AtomicU64::new(0),
                next_serial: AtomicU64::new(0),
                created: AtomicU64::new(0),
                evicted: AtomicU64::new(0),
                over_capacity: AtomicU64::new(0),
                scars: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// One key's breaker and bookkeeping, for health endpoints.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KeySnapshot {
    /// The breaker's id (the key, as displayed).
    pub id: BreakerId,
    /// The breaker's snapshot.
    pub breaker: Snapshot,
    /// Calls on this key in flight.
    pub in_flight: usize,
    /// Time since the key's last call started or finished.
    pub idle_for: Duration,
    /// Trips of this key the open cap kept closed (the breaker's
    /// [`Snapshot::suppressed_opens`]).
    pub suppressed_opens: u64,
}

/// Counters of a [`KeyedBreakers`] since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct KeyedStats {
    /// Keys held now.
    pub keys: usize,
    /// Keys open or half-open now.
    pub open_keys: usize,
    /// Keys created.
    pub created: u64,
    /// Keys evicted (idle, or least recently used when full).
    pub evicted: u64,
    /// Open-cap slots held now: keys open, half-open or recovering since they opened (0
    /// without a cap). At most `max_open`; every open or half-open key holds one.
    pub open_slots: usize,
    /// Trips the open cap kept closed (the key stayed closed and its calls went through),
    /// evicted keys' included.
    pub suppressed_opens: u64,
    /// Keys created beyond `max_keys` because none could be evicted (every key busy, open,
    /// isolated, disabled or kept for its recent failures): a new host is never left without
    /// a breaker. The map shrinks back to `max_keys` as those keys become evictable.
    pub over_capacity: u64,
}

/// The `[instances.<id>]` of `config` that no [`HostKey`] can match, each with the id a key
/// would have when the id names one in another spelling (`HTTPS://B.example` for
/// `https://b.example:443`), else `None` (`b.example`, `api`: no key). A key's id is its
/// `Display`, `scheme://host:port` in the normal form of [`HostKey::new`], and a document
/// matched on the id falls back to `[defaults]` silently for any other spelling: this is the
/// check [`KeyedBreakers::builder_from_config`] warns with (feature `tracing`), for a caller
/// that wants to refuse such a document instead.
///
/// ```
/// use cutout::config::Config;
/// use cutout_tower::keyed::unmatched_host_instances;
///
/// let config = Config::from_toml(r#"
///     [instances."https://a.example:443"]
///     consecutive-failures = 1
///     [instances."HTTPS://B.example"]
///     consecutive-failures = 2
///     [instances."c.example"]
///     consecutive-failures = 3
/// "#)?;
/// assert_eq!(
///     unmatched_host_instances(&config),
///     vec![
///         ("HTTPS://B.example".to_owned(), Some("https://b.example:443".to_owned())),
///         ("c.example".to_owned(), None),
///     ]
/// );
/// # Ok::<(), cutout::config::LoadError>(())
/// ```
#[cfg(feature = "config")]
pub fn unmatched_host_instances(config: &Config) -> Vec<(String, Option<String>)> {
    let mut unmatched: Vec<(String, Option<String>)> = config
        .instances()
        .filter_map(|(id, _)| {
            let key = HostKey::parse(id).map(|key| key.to_string());
            (key.as_deref() != Some(id)).then(|| (id.to_owned(), key))
        })
        .collect();
    unmatched.sort();
    unmatched
}

/// `settings` with a break schedule that adds `carried` to the consecutive opens it is asked
/// about: a key created again after its eviction as a tripped ghost grows its break from where
/// its last entry left it, until it closes (its listener then sets `carried` to 0). Settings
/// that fail to build so (they cannot: the shift keeps a valid schedule valid) are kept as
/// they were.
fn carry_growth(settings: Settings, carried: Arc<AtomicU32>) -> Settings {
    let first = settings.break_duration();
    let max = settings.max_break_duration();
    let multiplier = settings.break_multiplier();
    let own = settings.break_schedule().cloned();
    let schedule = BreakSchedule::new(move |opens| {
        let opens = opens.saturating_add(carried.load(Ordering::Relaxed));
        match &own {
            Some(own) => own.break_for(opens),
            None => grown_break(first, max, multiplier, opens),
        }
    });
    settings
        .to_builder()
        .break_schedule(Some(schedule))
        .build()
        .unwrap_or(settings)
}

/// The breaker's own growth without a schedule: the first break times `multiplier` per earlier
/// consecutive open (the `opens`-th, 1-based), capped at `max`.
fn grown_break(first: Duration, max: Duration, multiplier: f64, opens: u32) -> Duration {
    let steps = i32::try_from(opens.saturating_sub(1)).unwrap_or(i32::MAX);
    let factor = multiplier.powi(steps);
    if factor.is_finite() && first.as_secs_f64() * factor < max.as_secs_f64() {
        first.mul_f64(factor)
    } else {
        max
    }
}

fn counts_open(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen)
}

/// Whether a key in `state` holds an open-cap slot it took: a failed probe or ramp re-opens a
/// breaker without asking its gate, so the slot is kept until the key is closed for good.
fn holds_slot(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen | State::Recovering)
}

impl<K> KeyedBreakers<K> {
    /// A builder whose keys' breakers all use `settings`.
    pub fn builder(settings: Settings) -> KeyedBuilder<K> {
        KeyedBuilder::new(SettingsSource::Fixed(Box::new(settings)))
    }

    /// A builder whose keys' breakers use `settings(key)`: one host can have its own.
    ///
    /// The function is called once when a key is created (its first call, or
    /// [`KeyedBreakers::breaker`] / [`KeyedBreakers::isolate`] on a new key), on that caller's
    /// thread, with no lock of the map held, so it may read the map. A key created again after
    /// its eviction calls it again. It returns [`Settings`], which are valid by construction:
    /// build and check them up front (an invalid value is an error when it is built, not on
    /// the first call of a host) and have the function pick among them. A panic in it reaches
    /// the call that creates the key; the key is not created and nothing is poisoned.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout::Settings;
    /// use cutout_tower::keyed::KeyedBreakers;
    ///
    /// // Validated once, here: the function only chooses.
    /// let fragile = Settings::builder().consecutive_failures(Some(1)).build()?;
    /// let normal = Settings::builder().consecutive_failures(Some(3)).build()?;
    /// let hosts = KeyedBreakers::<String>::builder_per_key(move |host| {
    ///     if host.ends_with(".legacy.example") { fragile.clone() } else { normal.clone() }
    /// })
    /// .idle_after(Duration::from_secs(600))
    /// .build();
    ///
    /// let old = hosts.breaker(&"db.legacy.example".to_owned()).unwrap();
    /// assert_eq!(old.settings().consecutive_failures(), Some(1));
    /// let new = hosts.breaker(&"api.example".to_owned()).unwrap();
    /// assert_eq!(new.settings().consecutive_failures(), Some(3));
    /// # Ok::<(), cutout::ConfigError>(())
    /// ```
    pub fn builder_per_key<F>(settings: F) -> KeyedBuilder<K>
    where
        F: Fn(&K) -> Settings + Send + Sync + 'static,
    {
        KeyedBuilder::new(SettingsSource::PerKey(Box::new(settings)))
    }

    /// A builder whose keys' breakers take their settings from `config` (feature `config`),
    /// matched on the breaker id, which is the key's `Display`: a key whose id is listed as
    /// `[instances.<id>]` gets that instance's settings, merged as the document says
    /// (built-in defaults ← `[defaults]` ← its `base-config` ← its own keys); any other key
    /// gets `[defaults]` (built-in defaults ← `[defaults]`). This is
    /// [`Config::settings_for`] of the id; `config` is copied.
    ///
    /// Every error of the document (an unknown key, a bad value, a missing `base-config`:
    /// `CUT-CFG-…`) is reported by [`Config::from_toml`] when it is loaded; creating a key
    /// never fails. An instance whose id is no key's is simply never used, so write ids as
    /// the breakers show them: for [`HostKey`] that is `scheme://host:port`
    /// (`[instances."https://b.example:443"]`). To match on something else (the host alone,
    /// a tenant), use [`KeyedBreakers::builder_per_key`] with `config.settings_for(..)`:
    ///
    /// ```
    /// use cutout::config::Config;
    /// use cutout_tower::keyed::{HostKey, KeyedBreakers, KeyedLayer};
    ///
    /// let config = Config::from_toml(r#"
    ///     [defaults]
    ///     consecutive-failures = 3
    ///
    ///     [instances."https://b.example:443"]
    ///     consecutive-failures = 1
    /// "#)?;
    /// let hosts = KeyedBreakers::<HostKey>::builder_from_config(&config).max_open(8).build();
    /// let layer = KeyedLayer::per_host(hosts.clone());
    ///
    /// let b = HostKey { scheme: "https".into(), host: "b.example".into(), port: 443 };
    /// assert_eq!(hosts.breaker(&b).unwrap().settings().consecutive_failures(), Some(1));
    /// let a = HostKey { host: "a.example".into(), ..b };
    /// assert_eq!(hosts.breaker(&a).unwrap().settings().consecutive_failures(), Some(3));
    ///
    /// // The same document keyed on the host alone: [instances."b.example"].
    /// let by_host = KeyedBreakers::<HostKey>::builder_per_key(move |key| {
    ///     config.settings_for(&key.host).clone()
    /// })
    /// .build();
    /// # let _ = (layer, by_host);
    /// # Ok::<(), cutout::config::LoadError>(())
    /// ```
    ///
    /// For [`HostKey`] keys, an instance whose id no key can have (see
    /// [`unmatched_host_instances`]) is warned about here, with the `tracing` feature: once
    /// per instance, with the id a key would have when there is one (`b.example` names no
    /// key; `HTTPS://B.example` would be `https://b.example:443`).
    #[cfg(feature = "config")]
    pub fn builder_from_config(config: &Config) -> KeyedBuilder<K>
    where
        K: 'static,
    {
        if std::any::TypeId::of::<K>() == std::any::TypeId::of::<HostKey>() {
            #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
            for (id, key) in unmatched_host_instances(config) {
                #[cfg(feature = "tracing")]
                tracing::warn!(
                    instance = %id,
                    did_you_mean = key.as_deref().unwrap_or("(no host key)"),
                    "breaker instance matches no host key (ids read scheme://host:port); its \
                     settings are never used"
                );
            }
        }
        KeyedBuilder::new(SettingsSource::Config(Box::new(config.clone())))
    }
}

impl<K> KeyedBreakers<K>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    fn read(&self) -> RwLockReadGuard<'_, HashMap<K, Arc<Entry>>> {
        // Every mutation is one map operation, so a poisoned map is still consistent.
        self.inner
            .map
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<K, Arc<Entry>>> {
        self.inner
            .map
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Enters a call on `key`: its breaker (created if new, beyond `max_keys` when no key can
    /// be evicted) and a guard that keeps it from eviction.
    pub(crate) fn enter(&self, key: &K) -> CallGuard {
        let now = self.inner.clock.recent();
        self.maybe_sweep(now);
        {
            let map = self.read();
            if let Some(entry) = map.get(key) {
                return Self::guard(entry, now);
            }
        }
        // The key's settings are worked out before the write lock: a settings function runs
        // with no lock held. Lost (cheaply) if another call creates the key meanwhile.
        let fresh = self.fresh(key);
        let mut map = self.write();
        if let Some(entry) = map.get(key) {
            return Self::guard(entry, now);
        }
        let entry = self.insert(&mut map, key, fresh, now);
        Self::guard(&entry, now)
    }

    fn guard(entry: &Arc<Entry>, now: u64) -> CallGuard {
        // Under the map's lock (read or write): a sweep cannot be running.
        entry.in_flight.fetch_add(1, Ordering::Relaxed);
        entry.last_used.store(now, Ordering::Relaxed);
        CallGuard {
            entry: Arc::clone(entry),
        }
    }

    /// A new key's breaker id and settings. Called with no lock of the map held.
    fn fresh(&self, key: &K) -> (String, Settings) {
        let id = key.to_string();
        let settings = self.inner.settings.settings(key, &id);
        (id, settings)
    }

    fn scars(&self) -> MutexGuard<'_, HashMap<K, Scar>> {
        // Every mutation is one map operation, so a poisoned map is still consistent.
        self.inner
            .scars
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates `key`'s entry with `fresh` (its id and settings), making room if the map is
    /// full (see the [module docs](self#eviction)): idle keys first, then the least recently
    /// used key with no recent trouble, then the least recently used of the others that may
    /// go; when none may, the map goes beyond `max_keys`. Holds the write lock.
    fn insert(
        &self,
        map: &mut HashMap<K, Arc<Entry>>,
        key: &K,
        fresh: (String, Settings),
        now: u64,
    ) -> Arc<Entry> {
        if map.len() >= self.inner.max_keys {
            self.sweep_locked(map, now);
        }
        // Evict until there is room: a map that went beyond `max_keys` (no key could go)
        // shrinks back as soon as its keys may go, not one eviction per new key for ever.
        while map.len() >= self.inner.max_keys {
            let idle = self.inner.idle_nanos;
            let mut quiet: Option<(u64, &K)> = None;
            let mut troubled: Option<(u64, &K)> = None;
            for (k, e) in map.iter() {
                if e.in_flight.load(Ordering::Relaxed) > 0 || !self.may_evict(e, now) {
                    continue;
                }
                let used = e.last_used.load(Ordering::Relaxed);
                let tier = if e.has_recent_trouble(now, idle) || e.ghost_locked(now) {
                    &mut troubled
                } else {
                    &mut quiet
                };
                if tier.is_none_or(|(best, _)| used < best) {
                    *tier = Some((used, k));
                }
            }
            match quiet.or(troubled).map(|(_, k)| k.clone()) {
                Some(lru) => {
                    if let Some(entry) = map.remove(&lru) {
                        self.evicted_locked(&[(lru, entry)], now);
                    }
                }
                None => {
                    self.inner.over_capacity.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        let scar = self.scars().remove(key);
        let entry = self.new_entry(fresh, scar, now);
        map.insert(key.clone(), Arc::clone(&entry));
        self.inner.created.fetch_add(1, Ordering::Relaxed);
        entry
    }

    /// Whether a key may be evicted at all (calls in flight aside): closed, or a tripped key
    /// nobody probes any more (a ghost, whose growth is kept as a scar; a recovering key
    /// unused past `ghost_after` is one). Never an open, half-open or recovering key still
    /// serving its break or its ramp, nor an isolated or disabled one
    /// (both until reset).
    fn may_evict(&self, entry: &Entry, now: u64) -> bool {
        match entry.breaker.state() {
            State::Closed => true,
            State::Open | State::HalfOpen | State::Recovering => entry.ghost_locked(now),
            _ => false,
        }
    }

    fn new_entry(
        &self,
        (id, settings): (String, Settings),
        scar: Option<Scar>,
        now: u64,
    ) -> Arc<Entry> {
        let carried_opens = Arc::new(AtomicU32::new(scar.map_or(0, |scar| scar.opens)));
        // A key that carries growth from a scar, or one an open cap may close by reset (which
        // drops the breaker's own growth), breaks on a schedule that adds the carried opens.
        let settings = if scar.is_some() || self.inner.cap.is_some() {
            carry_growth(settings, Arc::clone(&carried_opens))
        } else {
            settings
        };
        let idle = self.inner.idle_nanos;
        let ghost_after = settings
            .max_wait_in_half_open()
            .map_or(idle, |wait| u64::try_from(wait.as_nanos()).unwrap_or(NEVER));
        let failure_horizon = match settings.window() {
            TripWindow::Time(window) => u64::try_from(window.as_nanos()).unwrap_or(NEVER),
            _ => idle,
        };
        let builder = self.inner.observers.iter().fold(
            Breaker::builder(id)
                .settings(settings)
                .clock(self.inner.clock.clone()),
            |builder, observer| builder.shared_observer(Arc::clone(observer)),
        );
        Arc::new_cyclic(|weak_entry: &Weak<Entry>| {
            let weak_cap = self.inner.cap.as_ref().map(Arc::downgrade);
            let builder = match &weak_cap {
                Some(weak_cap) => {
                    // Weak handles: the breaker owns its gate, the entry owns the breaker, and
                    // the cap owns the entries of the keys holding a slot.
                    let weak_entry = weak_entry.clone();
                    let weak_cap = weak_cap.clone();
                    builder.open_gate_for(move |_id, reason| {
                        match (weak_cap.upgrade(), weak_entry.upgrade()) {
                            (Some(cap), Some(entry)) => cap.admit(&entry, reason),
                            // The map or the entry is gone: the breaker is on its own.
                            _ => true,
                        }
                    })
                }
                None => builder,
            };
            // A reset (through the map or any handle, which raises no event) drops the growth
            // carried too, as it drops the breaker's own: "no break growth" (DESIGN §2).
            let resetting = weak_entry.clone();
            let builder = builder.on_reset(move |_id| {
                if let Some(entry) = resetting.upgrade() {
                    let left = entry.carry_on_reset.swap(0, Ordering::Relaxed);
                    entry.carried_opens.store(left, Ordering::Relaxed);
                }
            });
            let breaker = builder.build();
            let listening = weak_entry.clone();
            breaker.subscribe(move |event| {
                if let Some(entry) = listening.upgrade() {
                    let cap = weak_cap.as_ref().and_then(Weak::upgrade);
                    entry.on_transition(cap.as_deref(), event);
                }
            });
            Entry {
                breaker,
                clock: self.inner.clock.clone(),
                serial: self.inner.next_serial.fetch_add(1, Ordering::Relaxed),
                evicted: AtomicBool::new(false),
                in_flight: AtomicUsize::new(0),
                last_used: AtomicU64::new(now),
                last_warned: AtomicU64::new(NEVER),
                break_ends: AtomicU64::new(NEVER),
                half_open_since: AtomicU64::new(NEVER),
                last_failure: AtomicU64::new(NEVER),
                failing: AtomicBool::new(false),
                last_opened: AtomicU64::new(NEVER),
                ghost_after,
                failure_horizon,
                carried_opens,
                carry_on_reset: AtomicU32::new(0),
            }
        })
    }

    /// Accounts for entries just removed from the map; holds the map's write lock. A tripped
    /// key leaves its break growth behind as a scar for its next entry.
    fn evicted_locked(&self, evicted: &[(K, Arc<Entry>)], now: u64) {
        let mut scars = None;
        for (key, entry) in evicted {
            entry.evicted.store(true, Ordering::Relaxed);
            if entry.breaker.state() == State::Closed {
                continue;
            }
            let opens = entry
                .breaker
                .snapshot()
                .consecutive_opens
                .saturating_add(entry.carried_opens.load(Ordering::Relaxed));
            if opens == 0 {
                continue;
            }
            let scars = scars.get_or_insert_with(|| self.scars());
            if scars.len() >= self.inner.max_keys {
                // Bounded: the oldest scar goes.
                let oldest = scars
                    .iter()
                    .min_by_key(|(_, scar)| scar.at)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    scars.remove(&oldest);
                }
            }
            scars.insert(key.clone(), Scar { opens, at: now });
        }
        drop(scars);
        if let Some(cap) = &self.inner.cap {
            cap.release(evicted.iter().map(|(_, entry)| entry));
        }
        self.inner
            .evicted
            .fetch_add(evicted.len() as u64, Ordering::Relaxed);
    }

    fn maybe_sweep(&self, now: u64) {
        let next = self.inner.next_sweep.load(Ordering::Relaxed);
        if now < next {
            return;
        }
        let then = now.saturating_add((self.inner.idle_nanos / 2).max(1));
        if self
            .inner
            .next_sweep
            .compare_exchange(next, then, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let mut map = self.write();
            self.sweep_locked(&mut map, now);
        }
    }

    fn sweep_locked(&self, map: &mut HashMap<K, Arc<Entry>>, now: u64) -> usize {
        let idle = self.inner.idle_nanos;
        let mut evicted = Vec::new();
        map.retain(|k, e| {
            let busy = e.in_flight.load(Ordering::Relaxed) > 0;
            let recent = now.saturating_sub(e.last_used.load(Ordering::Relaxed)) < idle;
            let keep = busy || recent || !self.may_evict(e, now);
            if !keep {
                evicted.push((k.clone(), Arc::clone(e)));
            }
            keep
        });
        self.evicted_locked(&evicted, now);
        evicted.len()
    }

    /// Evicts every key idle for `idle_after` that has no call in flight and is closed.
    /// Returns how many were evicted.
    pub fn evict_idle(&self) -> usize {
        let now = self.inner.clock.recent();
        let mut map = self.write();
        self.sweep_locked(&mut map, now)
    }

    /// `key`'s breaker, created if new (an operator may want to isolate a host before it has
    /// been called). Always `Some`: a map full of keys that cannot be evicted creates it
    /// beyond `max_keys` (counted in [`KeyedStats::over_capacity`]); the `Option` is kept
    /// for the callers written when it could be `None`.
    pub fn breaker(&self, key: &K) -> Option<Breaker> {
        if let Some(entry) = self.read().get(key) {
            return Some(entry.breaker.clone());
        }
        let fresh = self.fresh(key);
        let now = self.inner.clock.recent();
        let mut map = self.write();
        if let Some(entry) = map.get(key) {
            return Some(entry.breaker.clone());
        }
        Some(self.insert(&mut map, key, fresh, now).breaker.clone())
    }

    /// `key`'s breaker if the key exists; never creates one.
    pub fn get(&self, key: &K) -> Option<Breaker> {
        self.read().get(key).map(|entry| entry.breaker.clone())
    }

    /// Whether `key` has a breaker.
    pub fn contains(&self, key: &K) -> bool {
        self.read().contains_key(key)
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every key, sorted by breaker id.
    pub fn keys(&self) -> Vec<K> {
        let mut keys: Vec<(String, K)> = self
            .read()
            .iter()
            .map(|(k, e)| (e.breaker.id().to_string(), k.clone()))
            .collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys.into_iter().map(|(_, k)| k).collect()
    }

    /// A snapshot of `key`, if it exists.
    pub fn snapshot(&self, key: &K) -> Option<KeySnapshot> {
        let entry = self.read().get(key).cloned()?;
        Some(self.key_snapshot(&entry))
    }

    /// A snapshot of every key, sorted by id: one health endpoint's worth. Breaker snapshots
    /// are taken outside the map's lock.
    pub fn snapshots(&self) -> Vec<(K, KeySnapshot)> {
        let entries: Vec<(K, Arc<Entry>)> = self
            .read()
            .iter()
            .map(|(k, e)| (k.clone(), Arc::clone(e)))
            .collect();
        let mut out: Vec<(K, KeySnapshot)> = entries
            .into_iter()
            .map(|(k, e)| (k, self.key_snapshot(&e)))
            .collect();
        out.sort_by(|a, b| a.1.id.cmp(&b.1.id));
        out
    }

    fn key_snapshot(&self, entry: &Entry) -> KeySnapshot {
        let now = self.inner.clock.recent();
        let breaker = entry.breaker.snapshot();
        KeySnapshot {
            id: entry.breaker.id().clone(),
            suppressed_opens: breaker.suppressed_opens,
            breaker,
            in_flight: entry.in_flight.load(Ordering::Relaxed),
            idle_for: Duration::from_nanos(
                now.saturating_sub(entry.last_used.load(Ordering::Relaxed)),
            ),
        }
    }

    /// Forces `key` open until [`KeyedBreakers::reset`] (creating the key if new). Isolated
    /// keys are never evicted and do not count against the open cap (isolating an open key
    /// frees its slot). Returns false when the key could not be created (the map is full of
    /// keys that cannot be evicted).
    pub fn isolate(&self, key: &K) -> bool {
        self.breaker(key).map(|b| b.isolate()).is_some()
    }

    /// Resets `key`'s breaker to closed, with no break growth (the growth carried over from
    /// an earlier entry of the key too). Returns false when the key does not exist.
    pub fn reset(&self, key: &K) -> bool {
        let Some(entry) = self.read().get(key).cloned() else {
            return false;
        };
        // The breaker's reset hook drops the growth carried over as well.
        entry.breaker.reset();
        true
    }

    /// Lets every call on `key` through unrecorded until reset. Returns false when the key
    /// does not exist.
    pub fn disable(&self, key: &K) -> bool {
        self.get(key).map(|b| b.disable()).is_some()
    }

    /// The counters, and how many keys are held and open now.
    pub fn stats(&self) -> KeyedStats {
        let breakers: Vec<Breaker> = self.read().values().map(|e| e.breaker.clone()).collect();
        KeyedStats {
            keys: breakers.len(),
            open_keys: breakers.iter().filter(|b| counts_open(b.state())).count(),
            open_slots: self
                .inner
                .cap
                .as_ref()
                .map_or(0, |cap| cap.held(self.inner.clock.recent())),
            created: self.inner.created.load(Ordering::Relaxed),
            evicted: self.inner.evicted.load(Ordering::Relaxed),
            suppressed_opens: self
                .inner
                .cap
                .as_ref()
                .map_or(0, |cap| cap.suppressed.load(Ordering::Relaxed)),
            over_capacity: self.inner.over_capacity.load(Ordering::Relaxed),
        }
    }
}

impl<K> fmt::Debug for KeyedBreakers<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreakers")
            .field("max_keys", &self.inner.max_keys)
            .field("idle_after", &Duration::from_nanos(self.inner.idle_nanos))
            .field("max_open", &self.inner.cap.as_ref().map(|cap| cap.max_open))
            .finish_non_exhaustive()
    }
}

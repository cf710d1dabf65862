//! Keyed breakers: one [`Breaker`] per key (per host by default), bounded, observable, capped.
//!
//! [`KeyedBreakers`] is the map: it creates a key's breaker from a settings template on the
//! key's first call, evicts keys that have been idle, and refuses to let more than a set number
//! of keys be open at once. [`KeyedLayer`] / [`KeyedService`] put it in a tower stack, with a
//! key function that picks the key of each request ([`ByHost`] for `http::Request`: scheme,
//! host and port).
//!
//! # Bounds
//! - At most `max_keys` keys. A new key when the map is full first sweeps idle keys, then
//!   evicts the least recently used key that may be evicted. If none may (every key is busy or
//!   open), the call goes through **without a breaker** and is counted in
//!   [`KeyedStats::unguarded_calls`]: refusing a healthy host because others are failing would
//!   be the breaker causing the outage.
//! - A key idle for `idle_after` (no call started or finished) is evicted by the next sweep.
//!   Sweeps run on the call path at most once per half `idle_after`, and on
//!   [`KeyedBreakers::evict_idle`].
//! - Eviction never drops a key with a call in flight, nor one that is not closed (open,
//!   half-open, recovering, isolated): its state is the point of having it.
//!
//! # The open cap
//! With `max_open(n)`, at most `n` keys may be open (open or half-open) at once. The core has no
//! way to veto an opening before it happens, so the cap is enforced right after it: every key's
//! breaker has a transition listener; when a closed (or recovering) key opens, the listener —
//! on the call that opened it, outside the breaker's lock, serialized with other openings by a
//! mutex — counts the other keys that are open or half-open. If they already fill the cap, it
//! calls [`Breaker::reset`] on the key that just opened: the key is closed again with an empty
//! window, its calls go through, and the suppressed opening is counted (per key in
//! [`KeySnapshot::suppressed_opens`], in total in [`KeyedStats::suppressed_opens`]) and, with
//! the `tracing` feature, logged as a warning. If the key keeps failing it trips again and asks
//! again, and opens once a slot is free.
//!
//! Two consequences of enforcing it after the fact: between the opening and the reset (a few
//! microseconds, on the opening call's thread) a concurrent call to that key can be refused;
//! and the reset clears the key's window and break growth. Keys isolated by an operator do not
//! count against the cap (it limits what the breakers decide, not what operators decide).

mod layer;
mod service;

pub use layer::{ByHost, HostKey, KeyFn, KeyedLayer};
pub use service::KeyedService;

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use cutout::clock::{Clock, SystemClock};
use cutout::{Breaker, BreakerId, Event, Settings, Snapshot, State, Transition};

/// A shared clock handed to every key's breaker.
#[derive(Debug, Clone)]
struct SharedClock(Arc<dyn Clock>);

impl Clock for SharedClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn recent(&self) -> u64 {
        self.0.recent()
    }
}

/// One breaker per key, created on demand from a settings template.
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
    settings: Settings,
    clock: SharedClock,
    max_keys: usize,
    idle_nanos: u64,
    max_open: Option<usize>,
    map: RwLock<HashMap<K, Arc<Entry>>>,
    /// Serializes open-cap decisions.
    cap: Mutex<()>,
    next_sweep: AtomicU64,
    created: AtomicU64,
    evicted: AtomicU64,
    suppressed: AtomicU64,
    unguarded: AtomicU64,
}

pub(crate) struct Entry {
    breaker: Breaker,
    clock: SharedClock,
    in_flight: AtomicUsize,
    last_used: AtomicU64,
    suppressed: AtomicU64,
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
    settings: Settings,
    clock: Arc<dyn Clock>,
    max_keys: usize,
    idle_after: Duration,
    max_open: Option<usize>,
    _key: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for KeyedBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("settings", &self.settings)
            .field("max_keys", &self.max_keys)
            .field("idle_after", &self.idle_after)
            .field("max_open", &self.max_open)
            .finish_non_exhaustive()
    }
}

impl<K> KeyedBuilder<K> {
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
    /// that would open is reset instead (see the [module docs](self)).
    pub fn max_open(mut self, max_open: usize) -> Self {
        self.max_open = Some(max_open);
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
                clock: SharedClock(self.clock),
                max_keys: self.max_keys,
                idle_nanos,
                max_open: self.max_open,
                map: RwLock::new(HashMap::new()),
                cap: Mutex::new(()),
                next_sweep: AtomicU64::new(0),
                created: AtomicU64::new(0),
                evicted: AtomicU64::new(0),
                suppressed: AtomicU64::new(0),
                unguarded: AtomicU64::new(0),
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
    /// Openings of this key the open cap suppressed.
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
    /// Openings the open cap suppressed (the key was reset and its calls went through).
    pub suppressed_opens: u64,
    /// Calls that went through without a breaker because the map was full of keys that could
    /// not be evicted.
    pub unguarded_calls: u64,
}

fn counts_open(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen)
}

fn evictable(state: State) -> bool {
    matches!(state, State::Closed | State::Disabled)
}

impl<K> KeyedBreakers<K> {
    /// A builder whose keys' breakers use `settings`.
    pub fn builder(settings: Settings) -> KeyedBuilder<K> {
        KeyedBuilder {
            settings,
            clock: Arc::new(SystemClock),
            max_keys: 1024,
            idle_after: Duration::from_secs(600),
            max_open: None,
            _key: PhantomData,
        }
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

    /// Enters a call on `key`: its breaker (created if new) and a guard that keeps it from
    /// eviction. `None` when the map is full of keys that cannot be evicted.
    pub(crate) fn enter(&self, key: &K) -> Option<CallGuard> {
        let now = self.inner.clock.recent();
        self.maybe_sweep(now);
        {
            let map = self.read();
            if let Some(entry) = map.get(key) {
                return Some(Self::guard(entry, now));
            }
        }
        let mut map = self.write();
        if let Some(entry) = map.get(key) {
            return Some(Self::guard(entry, now));
        }
        match self.insert(&mut map, key, now) {
            Some(entry) => Some(Self::guard(&entry, now)),
            None => {
                self.inner.unguarded.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn guard(entry: &Arc<Entry>, now: u64) -> CallGuard {
        // Under the map's lock (read or write): a sweep cannot be running.
        entry.in_flight.fetch_add(1, Ordering::Relaxed);
        entry.last_used.store(now, Ordering::Relaxed);
        CallGuard {
            entry: Arc::clone(entry),
        }
    }

    /// Creates `key`'s entry, making room if the map is full. Holds the write lock.
    fn insert(&self, map: &mut HashMap<K, Arc<Entry>>, key: &K, now: u64) -> Option<Arc<Entry>> {
        if map.len() >= self.inner.max_keys {
            self.sweep_locked(map, now);
        }
        if map.len() >= self.inner.max_keys {
            let lru = map
                .iter()
                .filter(|(_, e)| {
                    e.in_flight.load(Ordering::Relaxed) == 0 && evictable(e.breaker.state())
                })
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let lru = lru?;
            map.remove(&lru);
            self.inner.evicted.fetch_add(1, Ordering::Relaxed);
        }
        let entry = self.new_entry(key, now);
        map.insert(key.clone(), Arc::clone(&entry));
        self.inner.created.fetch_add(1, Ordering::Relaxed);
        Some(entry)
    }

    fn new_entry(&self, key: &K, now: u64) -> Arc<Entry> {
        let breaker = Breaker::builder(key.to_string())
            .settings(self.inner.settings.clone())
            .clock(self.inner.clock.clone())
            .build();
        Arc::new_cyclic(|weak_entry: &Weak<Entry>| {
            if self.inner.max_open.is_some() {
                // Weak handles: the breaker owns its listeners and the entry owns the breaker.
                let weak_entry = weak_entry.clone();
                let weak_inner = Arc::downgrade(&self.inner);
                breaker.subscribe(move |event: &Event| {
                    if let Transition::Opened { from, .. } = event.transition
                        && from != State::HalfOpen
                        && let (Some(inner), Some(entry)) =
                            (weak_inner.upgrade(), weak_entry.upgrade())
                    {
                        inner.on_open(&entry);
                    }
                });
            }
            Entry {
                breaker,
                clock: self.inner.clock.clone(),
                in_flight: AtomicUsize::new(0),
                last_used: AtomicU64::new(now),
                suppressed: AtomicU64::new(0),
            }
        })
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
        let before = map.len();
        map.retain(|_, e| {
            let busy = e.in_flight.load(Ordering::Relaxed) > 0;
            let recent = now.saturating_sub(e.last_used.load(Ordering::Relaxed)) < idle;
            busy || recent || !evictable(e.breaker.state())
        });
        let evicted = before - map.len();
        self.inner
            .evicted
            .fetch_add(evicted as u64, Ordering::Relaxed);
        evicted
    }

    /// Evicts every key idle for `idle_after` that has no call in flight and is closed.
    /// Returns how many were evicted.
    pub fn evict_idle(&self) -> usize {
        let now = self.inner.clock.recent();
        let mut map = self.write();
        self.sweep_locked(&mut map, now)
    }

    /// `key`'s breaker, created if new (an operator may want to isolate a host before it has
    /// been called). `None` when the map is full of keys that cannot be evicted.
    pub fn breaker(&self, key: &K) -> Option<Breaker> {
        if let Some(entry) = self.read().get(key) {
            return Some(entry.breaker.clone());
        }
        let now = self.inner.clock.recent();
        let mut map = self.write();
        if let Some(entry) = map.get(key) {
            return Some(entry.breaker.clone());
        }
        self.insert(&mut map, key, now)
            .map(|entry| entry.breaker.clone())
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
        KeySnapshot {
            id: entry.breaker.id().clone(),
            breaker: entry.breaker.snapshot(),
            in_flight: entry.in_flight.load(Ordering::Relaxed),
            idle_for: Duration::from_nanos(
                now.saturating_sub(entry.last_used.load(Ordering::Relaxed)),
            ),
            suppressed_opens: entry.suppressed.load(Ordering::Relaxed),
        }
    }

    /// Forces `key` open until [`KeyedBreakers::reset`] (creating the key if new). Isolated
    /// keys are never evicted and do not count against the open cap. Returns false when the
    /// key could not be created (the map is full of keys that cannot be evicted).
    pub fn isolate(&self, key: &K) -> bool {
        self.breaker(key).map(|b| b.isolate()).is_some()
    }

    /// Resets `key`'s breaker to closed. Returns false when the key does not exist.
    pub fn reset(&self, key: &K) -> bool {
        self.get(key).map(|b| b.reset()).is_some()
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
            created: self.inner.created.load(Ordering::Relaxed),
            evicted: self.inner.evicted.load(Ordering::Relaxed),
            suppressed_opens: self.inner.suppressed.load(Ordering::Relaxed),
            unguarded_calls: self.inner.unguarded.load(Ordering::Relaxed),
        }
    }
}

impl<K> Inner<K> {
    /// Runs in a breaker's listener when a closed or recovering key opened.
    fn on_open(&self, entry: &Arc<Entry>) {
        let Some(max_open) = self.max_open else {
            return;
        };
        let _serial = self
            .cap
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Collect under the map's read lock, read states outside it.
        let others: Vec<Breaker> = self
            .map
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .filter(|e| !Arc::ptr_eq(e, entry))
            .map(|e| e.breaker.clone())
            .collect();
        let open = others.iter().filter(|b| counts_open(b.state())).count();
        if open >= max_open {
            entry.breaker.reset();
            entry.suppressed.fetch_add(1, Ordering::Relaxed);
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::warn!(
                breaker = %entry.breaker.id(),
                open_keys = open,
                max_open,
                "open cap reached: breaker kept closed, its calls go through"
            );
        }
    }
}

impl<K> fmt::Debug for KeyedBreakers<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreakers")
            .field("max_keys", &self.inner.max_keys)
            .field("idle_after", &Duration::from_nanos(self.inner.idle_nanos))
            .field("max_open", &self.inner.max_open)
            .finish_non_exhaustive()
    }
}

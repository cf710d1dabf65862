//! [`Registry`]: named breakers shared by id, with per-id introspection and control.
//!
//! A registry hands out one [`Breaker`] per id: the second caller asking for `"payments"` gets
//! a handle to the same breaker as the first, so failures seen through one open it for both.
//! Both must ask for the same [`Settings`]; a registry never silently picks one of two
//! configurations. The error codes are tabled on [`Registry`] (this module is private).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use crate::clock::{Clock, SharedClock};
use crate::error::ErrorCode;
use crate::observer::CallObserver;
use crate::settings::{HalfOpenRule, Jitter, Settings, TripWindow};
use crate::{Breaker, BreakerId, Snapshot, State};

/// Breakers by id. A cheap handle: clones share one map.
///
/// The same id always yields the same breaker (clones of one handle), as long as every caller
/// asks for equal [`Settings`]. Creating a breaker takes a write lock; every other operation a
/// read lock. Neither is on a call's path: hold on to the [`Breaker`] a registry returns and
/// call through it.
///
/// ```
/// use cutout::{Registry, Settings, State, ErrorCode};
/// use cutout::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let registry = Registry::with_clock(clock.clone());
/// let settings = Settings::builder().consecutive_failures(Some(2)).build()?;
///
/// let orders = registry.breaker("payments", settings.clone())?;
/// let refunds = registry.breaker("payments", settings)?; // the same breaker
/// for _ in 0..2 {
///     let _ = orders.call(|| Err::<(), _>("timeout"));
/// }
/// assert_eq!(refunds.state(), State::Open);
///
/// let unknown = registry.get("paymnts").unwrap_err();
/// assert_eq!(unknown.code(), ErrorCode::UnknownId);
/// assert_eq!(unknown.suggestion(), Some("payments"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Error codes
///
/// | code | meaning | example message |
/// |---|---|---|
/// | `CUT-REG-001` | [`Registry::breaker`] found the id taken by a breaker with different settings; the message names every differing key with both values (a relative rule or the recovery ramp on one side only is named `slow-calls`, `failures` or `recovery`, `on` or `off`; a baseline window left to be derived is `default`) | `CUT-REG-001: breaker "payments" already exists with different settings: failure-ratio = off (existing), 0.5 (requested)` |
/// | `CUT-REG-002` | [`Registry::get`] (or a per-id control) found no breaker with this id; the message suggests the nearest id, or lists the ids when none is close | `CUT-REG-002: no breaker with id "paymnts": did you mean "payments"?` |
///
/// Both are [`ErrorCode`] variants, next to the settings codes (`CUT-CFG-*`).
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    // Keyed by `String`: `BreakerId` has no `Borrow<str>`, and the map must be searchable by
    // `&str`. A `BTreeMap` keeps `list()` sorted for free.
    breakers: RwLock<BTreeMap<String, Breaker>>,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    observers: Vec<Arc<dyn CallObserver>>,
    /// The configuration whose `instances.<id>` override declared breakers' attributes.
    #[cfg(feature = "serde")]
    config: Option<crate::config::Config>,
    /// Which method declared each id (`#[cutout::resilient]`), for conflicts naming both.
    #[cfg(feature = "macros")]
    declared: RwLock<BTreeMap<String, String>>,
}

/// Builds a [`Registry`] with a clock, a jitter seed or call observers shared by every breaker
/// it creates.
#[derive(Default)]
pub struct RegistryBuilder {
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    observers: Vec<Arc<dyn CallObserver>>,
    #[cfg(feature = "serde")]
    config: Option<crate::config::Config>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("clock", &self.clock)
            .field("seed", &self.seed)
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl RegistryBuilder {
    /// The clock every breaker of the registry runs on (default: each breaker's own
    /// [`SystemClock`](crate::clock::SystemClock)). All breakers share this one instance, so
    /// advancing a [`ManualClock`](crate::clock::ManualClock) drives them all.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Makes jitter reproducible: each breaker's random source is seeded from `seed` and its
    /// id, so breakers of one registry still draw different breaks (default: random seeds).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// A call observer every breaker of the registry reports to (see
    /// [`observer`](crate::observer)); [`Call::breaker`](crate::observer::Call::breaker) tells
    /// them apart. May be called more than once.
    pub fn observer(mut self, observer: impl CallObserver) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// The configuration that declared breakers (`#[cutout::resilient]`, feature `macros`)
    /// read their overrides from: an `[instances.<id>]` wins over the attribute key by key,
    /// and `[defaults]` sits under the attribute. Breakers asked for by
    /// [`Registry::breaker`] take their settings as given; [`Config::register`](crate::config::Config::register)
    /// creates a document's instances.
    #[cfg(feature = "serde")]
    pub fn config(mut self, config: crate::config::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Builds the registry, empty.
    pub fn build(self) -> Registry {
        Registry {
            inner: Arc::new(Inner {
                breakers: RwLock::new(BTreeMap::new()),
                clock: self.clock,
                seed: self.seed,
                observers: self.observers,
                #[cfg(feature = "serde")]
                config: self.config,
                #[cfg(feature = "macros")]
                declared: RwLock::new(BTreeMap::new()),
            }),
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// An empty registry whose breakers run on the system clock.
    pub fn new() -> Registry {
        Registry::builder().build()
    }

    /// An empty registry whose breakers all run on `clock` (one shared instance).
    pub fn with_clock(clock: impl Clock) -> Registry {
        Registry::builder().clock(clock).build()
    }

    /// A builder for a registry with a clock or seed.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Breaker>> {
        // A panic cannot leave the map half-updated (an insert is one call), so a poisoned
        // lock still holds a consistent map.
        self.inner
            .breakers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Breaker>> {
        self.inner
            .breakers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The breaker named `id`, created with `settings` if the registry has none yet.
    ///
    /// If the id is taken, the existing breaker is returned when its settings equal
    /// `settings`; otherwise the call fails with `CUT-REG-001`
    /// ([`ErrorCode::SettingsConflict`]), naming every key that differs.
    pub fn breaker(
        &self,
        id: impl AsRef<str>,
        settings: Settings,
    ) -> Result<Breaker, RegistryError> {
        let id = id.as_ref();
        if let Some(existing) = self.read().get(id) {
            return same_settings(existing, &settings);
        }
        let mut breakers = self.write();
        // Another thread may have created it between the two locks.
        if let Some(existing) = breakers.get(id) {
            return same_settings(existing, &settings);
        }
        let breaker = self.build(id, settings);
        breakers.insert(id.to_owned(), breaker.clone());
        Ok(breaker)
    }

    fn build(&self, id: &str, settings: Settings) -> Breaker {
        let mut builder = Breaker::builder(id).settings(settings);
        if let Some(clock) = &self.inner.clock {
            builder = builder.clock(SharedClock::from_arc(Arc::clone(clock)));
        }
        if let Some(seed) = self.inner.seed {
            builder = builder.seed(seed ^ fnv1a(id));
        }
        for observer in &self.inner.observers {
            builder = builder.shared_observer(Arc::clone(observer));
        }
        builder.build()
    }

    /// The breaker named `id`. An unknown id fails with `CUT-REG-002`
    /// ([`ErrorCode::UnknownId`]) and, when one is close, suggests the nearest id.
    pub fn get(&self, id: impl AsRef<str>) -> Result<Breaker, RegistryError> {
        let id = id.as_ref();
        let breakers = self.read();
        match breakers.get(id) {
            Some(breaker) => Ok(breaker.clone()),
            None => Err(unknown(id, &breakers)),
        }
    }

    /// Removes the breaker named `id` from the registry and returns it; an unknown id fails
    /// with `CUT-REG-002`. Handles already given out keep working (they share the removed
    /// breaker's state); the next [`Registry::breaker`] for `id` creates a new one, so a
    /// registry of per-host breakers can evict hosts it no longer sees.
    pub fn remove(&self, id: impl AsRef<str>) -> Result<Breaker, RegistryError> {
        let id = id.as_ref();
        let mut breakers = self.write();
        match breakers.remove(id) {
            Some(breaker) => {
                // A declared breaker removed is no method's any more: a later conflict on
                // its id must not name the method that declared the old one.
                #[cfg(feature = "macros")]
                self.inner
                    .declared
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .remove(id);
                Ok(breaker)
            }
            None => Err(unknown(id, &breakers)),
        }
    }

    /// The configuration given to [`RegistryBuilder::config`], if any.
    #[cfg(feature = "serde")]
    pub fn config(&self) -> Option<&crate::config::Config> {
        self.inner.config.as_ref()
    }

    /// [`Registry::breaker`] for a declared breaker (`#[cutout::resilient]`): remembers the
    /// first method that declared `id`, and on a conflict answers it next to the error
    /// (`None` when the breaker was made in code).
    #[cfg(feature = "macros")]
    pub(crate) fn declare(
        &self,
        id: &str,
        settings: Settings,
        declared_by: &str,
    ) -> Result<Breaker, (RegistryError, Option<String>)> {
        let result = self.breaker(id, settings);
        let mut declared = self
            .inner
            .declared
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match result {
            Ok(breaker) => {
                declared
                    .entry(id.to_owned())
                    .or_insert_with(|| declared_by.to_owned());
                Ok(breaker)
            }
            Err(error) => Err((error, declared.get(id).cloned())),
        }
    }

    /// Whether a breaker named `id` exists.
    pub fn contains(&self, id: impl AsRef<str>) -> bool {
        self.read().contains_key(id.as_ref())
    }

    /// Every breaker, sorted by id.
    pub fn list(&self) -> Vec<Breaker> {
        self.read().values().cloned().collect()
    }

    /// Every id, sorted.
    pub fn ids(&self) -> Vec<BreakerId> {
        self.read().values().map(|b| b.id().clone()).collect()
    }

    /// How many breakers the registry holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The state of breaker `id` (see [`Breaker::state`]).
    pub fn state(&self, id: impl AsRef<str>) -> Result<State, RegistryError> {
        self.get(id).map(|b| b.state())
    }

    /// A snapshot of breaker `id` (see [`Breaker::snapshot`]).
    pub fn snapshot(&self, id: impl AsRef<str>) -> Result<Snapshot, RegistryError> {
        self.get(id).map(|b| b.snapshot())
    }

    /// A snapshot of every breaker, sorted by id: one health endpoint's worth.
    pub fn snapshots(&self) -> Vec<(BreakerId, Snapshot)> {
        // Snapshots take each breaker's lock; take them outside the map's.
        self.list()
            .into_iter()
            .map(|b| (b.id().clone(), b.snapshot()))
            .collect()
    }

    /// Forces breaker `id` open until reset (see [`Breaker::isolate`]).
    pub fn isolate(&self, id: impl AsRef<str>) -> Result<(), RegistryError> {
        self.get(id).map(|b| b.isolate())
    }

    /// Lets every call of breaker `id` through until reset (see [`Breaker::disable`]).
    pub fn disable(&self, id: impl AsRef<str>) -> Result<(), RegistryError> {
        self.get(id).map(|b| b.disable())
    }

    /// Resets breaker `id` (see [`Breaker::reset`]).
    pub fn reset(&self, id: impl AsRef<str>) -> Result<(), RegistryError> {
        self.get(id).map(|b| b.reset())
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("ids", &self.read().keys().collect::<Vec<_>>())
            .field("clock", &self.inner.clock)
            .finish_non_exhaustive()
    }
}

fn same_settings(existing: &Breaker, settings: &Settings) -> Result<Breaker, RegistryError> {
    if existing.settings() == settings {
        return Ok(existing.clone());
    }
    Err(RegistryError(Box::new(ErrorInner {
        code: ErrorCode::SettingsConflict,
        id: existing.id().clone(),
        kind: Kind::Conflict(differences(existing.settings(), settings)),
    })))
}

fn unknown(id: &str, breakers: &BTreeMap<String, Breaker>) -> RegistryError {
    let suggestion = crate::suggest::nearest(id, breakers.keys().map(String::as_str));
    RegistryError(Box::new(ErrorInner {
        code: ErrorCode::UnknownId,
        id: BreakerId::from(id),
        kind: Kind::Unknown {
            suggestion: suggestion.map(str::to_owned),
            known: breakers.keys().take(5).cloned().collect(),
            count: breakers.len(),
        },
    }))
}

/// FNV-1a: mixes an id into a registry's seed, stable across runs and platforms.
fn fnv1a(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A registry call failed: the id is taken with other settings (`CUT-REG-001`) or unknown
/// (`CUT-REG-002`). See [`Registry`] for the table.
pub struct RegistryError(Box<ErrorInner>);

struct ErrorInner {
    code: ErrorCode,
    id: BreakerId,
    kind: Kind,
}

enum Kind {
    /// (key, existing, requested) for every key that differs.
    Conflict(Vec<(&'static str, String, String)>),
    Unknown {
        suggestion: Option<String>,
        /// The first few ids, sorted, for when nothing is close.
        known: Vec<String>,
        count: usize,
    },
}

impl RegistryError {
    /// The stable code: [`ErrorCode::SettingsConflict`] or [`ErrorCode::UnknownId`].
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The id asked for.
    pub fn id(&self) -> &BreakerId {
        &self.0.id
    }

    /// Whether the id is taken by a breaker with different settings (`CUT-REG-001`).
    pub fn is_conflict(&self) -> bool {
        matches!(self.0.kind, Kind::Conflict(_))
    }

    /// Whether no breaker has the id (`CUT-REG-002`).
    pub fn is_unknown_id(&self) -> bool {
        matches!(self.0.kind, Kind::Unknown { .. })
    }

    /// For an unknown id, the nearest existing id, when one is close enough to be a typo.
    pub fn suggestion(&self) -> Option<&str> {
        match &self.0.kind {
            Kind::Unknown { suggestion, .. } => suggestion.as_deref(),
            Kind::Conflict(_) => None,
        }
    }

    /// For a conflict, the keys whose values differ, in the order of the settings' keys.
    pub fn conflicting_keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        let differences = match &self.0.kind {
            Kind::Conflict(differences) => differences.as_slice(),
            Kind::Unknown { .. } => &[],
        };
        differences.iter().map(|(key, _, _)| *key)
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.0;
        match &inner.kind {
            Kind::Conflict(differences) => {
                write!(
                    f,
                    "{}: breaker {:?} already exists with different settings: ",
                    inner.code,
                    inner.id.as_str()
                )?;
                for (i, (key, existing, requested)) in differences.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{key} = {existing} (existing), {requested} (requested)")?;
                }
                Ok(())
            }
            Kind::Unknown {
                suggestion,
                known,
                count,
            } => {
                write!(
                    f,
                    "{}: no breaker with id {:?}",
                    inner.code,
                    inner.id.as_str()
                )?;
                match suggestion {
                    Some(suggestion) => write!(f, ": did you mean {suggestion:?}?"),
                    None if *count == 0 => f.write_str(": the registry is empty"),
                    None => {
                        write!(f, ": known ids are {}", known.join(", "))?;
                        if *count > known.len() {
                            write!(f, " and {} more", count - known.len())?;
                        }
                        Ok(())
                    }
                }
            }
        }
    }
}

impl fmt::Debug for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryError")
            .field("code", &self.0.code)
            .field("id", &self.0.id)
            .field("message", &self.to_string())
            .finish()
    }
}

impl std::error::Error for RegistryError {}

/// Every key whose value differs, named as in configuration files, with both values.
fn differences(existing: &Settings, requested: &Settings) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    let mut check = |key: &'static str, a: String, b: String| {
        if a != b {
            out.push((key, a, b));
        }
    };
    check(
        "consecutive-failures",
        opt(existing.consecutive_failures(), |n| n.to_string()),
        opt(requested.consecutive_failures(), |n| n.to_string()),
    );
    check(
        "failure-ratio",
        opt(existing.failure_ratio(), |r| r.to_string()),
        opt(requested.failure_ratio(), |r| r.to_string()),
    );
    check(
        "minimum-calls",
        existing.minimum_calls().to_string(),
        requested.minimum_calls().to_string(),
    );
    match (existing.window(), requested.window()) {
        (TripWindow::Count(a), TripWindow::Count(b)) => {
            check("window-size", a.to_string(), b.to_string());
        }
        (TripWindow::Time(a), TripWindow::Time(b)) => {
            check("window-duration", duration(a), duration(b));
        }
        (a, b) => check("window-type", window(a), window(b)),
    }
    check(
        "slow-call-threshold",
        opt(existing.slow_call_threshold(), duration),
        opt(requested.slow_call_threshold(), duration),
    );
    check(
        "slow-call-ratio",
        existing.slow_call_ratio().to_string(),
        requested.slow_call_ratio().to_string(),
    );
    check(
        "break-duration",
        duration(existing.break_duration()),
        duration(requested.break_duration()),
    );
    check(
        "max-break-duration",
        duration(existing.max_break_duration()),
        duration(requested.max_break_duration()),
    );
    check(
        "break-multiplier",
        existing.break_multiplier().to_string(),
        requested.break_multiplier().to_string(),
    );
    match (existing.break_schedule(), requested.break_schedule()) {
        (Some(a), Some(b)) if a != b => check(
            "break-schedule",
            "a function".to_owned(),
            "another function".to_owned(),
        ),
        (a, b) => check(
            "break-schedule",
            opt(a, |_| "a function".to_owned()),
            opt(b, |_| "a function".to_owned()),
        ),
    }
    check(
        "jitter",
        jitter(existing.jitter()).to_owned(),
        jitter(requested.jitter()).to_owned(),
    );
    check(
        "half-open-probes",
        existing.half_open_probes().to_string(),
        requested.half_open_probes().to_string(),
    );
    check(
        "probe-successes",
        existing.probe_successes().to_string(),
        requested.probe_successes().to_string(),
    );
    check(
        "half-open-rule",
        rule(existing.half_open_rule()).to_owned(),
        rule(requested.half_open_rule()).to_owned(),
    );
    check(
        "max-wait-in-half-open",
        opt(existing.max_wait_in_half_open(), duration),
        opt(requested.max_wait_in_half_open(), duration),
    );
    check(
        "half-open-timeout",
        existing.half_open_timeout().as_str().to_owned(),
        requested.half_open_timeout().as_str().to_owned(),
    );
    check(
        "shadow",
        existing.shadow().to_string(),
        requested.shadow().to_string(),
    );
    // `enabled` is the initial state seen from one side: the state says it all.
    check(
        "initial-state",
        existing.initial_state().as_str().to_owned(),
        requested.initial_state().as_str().to_owned(),
    );
    check(
        "adaptive",
        existing.adaptive().to_string(),
        requested.adaptive().to_string(),
    );
    match (existing.slow_calls(), requested.slow_calls()) {
        (Some(a), Some(b)) => {
            check(
                "slow-calls-multiple",
                a.multiple().to_string(),
                b.multiple().to_string(),
            );
            check(
                "slow-calls-quantile",
                a.normal_quantile().to_string(),
                b.normal_quantile().to_string(),
            );
            check(
                "slow-calls-floor",
                format!("{:?}", a.floor_duration()),
                format!("{:?}", b.floor_duration()),
            );
            check(
                "slow-calls-margin",
                format!("{:?}", a.margin_duration()),
                format!("{:?}", b.margin_duration()),
            );
            check(
                "latency-baseline-window",
                baseline(a.configured_window()),
                baseline(b.configured_window()),
            );
        }
        (a, b) => check("slow-calls", on_off(a.is_some()), on_off(b.is_some())),
    }
    match (existing.failures(), requested.failures()) {
        (Some(a), Some(b)) => {
            check(
                "failures-multiple",
                a.multiple().to_string(),
                b.multiple().to_string(),
            );
            check(
                "failures-floor",
                a.floor_rate().to_string(),
                b.floor_rate().to_string(),
            );
            check(
                "failure-baseline-window",
                baseline(a.configured_window()),
                baseline(b.configured_window()),
            );
        }
        (a, b) => check("failures", on_off(a.is_some()), on_off(b.is_some())),
    }
    match (existing.recovery(), requested.recovery()) {
        (Some(a), Some(b)) => {
            check(
                "recovery-fraction",
                a.fraction().to_string(),
                b.fraction().to_string(),
            );
            check(
                "recovery-initial-fraction",
                a.initial().to_string(),
                b.initial().to_string(),
            );
            check(
                "recovery-min-duration",
                duration(a.min()),
                duration(b.min()),
            );
            check(
                "recovery-max-duration",
                duration(a.max()),
                duration(b.max()),
            );
        }
        (a, b) => check("recovery", on_off(a.is_some()), on_off(b.is_some())),
    }
    if out.is_empty() {
        // Settings gained a key this list does not know yet: still say something useful.
        out.push((
            "settings",
            format!("{existing:?}"),
            format!("{requested:?}"),
        ));
    }
    out
}

fn opt<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "off".to_owned(), show)
}

fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.to_owned()
}

/// A baseline window as configured; unset, it is derived from the trip window.
fn baseline(window: Option<Duration>) -> String {
    window.map_or_else(|| "default".to_owned(), duration)
}

fn duration(d: Duration) -> String {
    format!("{d:?}")
}

fn window(w: TripWindow) -> String {
    match w {
        TripWindow::Count(n) => format!("count {n} calls"),
        TripWindow::Time(d) => format!("time {d:?}"),
    }
}

fn jitter(j: Jitter) -> &'static str {
    match j {
        Jitter::Equal => "equal",
        Jitter::Full => "full",
        Jitter::None => "none",
    }
}

fn rule(r: HalfOpenRule) -> &'static str {
    match r {
        HalfOpenRule::Consecutive => "consecutive",
        HalfOpenRule::Rates => "rates",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_and_errors_are_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Registry>();
        assert_send_sync::<RegistryError>();
        assert_eq!(
            std::mem::size_of::<RegistryError>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn seeds_differ_per_id() {
        assert_ne!(fnv1a("a"), fnv1a("b"));
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn identical_settings_have_no_differences_but_a_fallback() {
        let s = Settings::default();
        assert_eq!(differences(&s, &s)[0].0, "settings");
    }
}

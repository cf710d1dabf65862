//! [`FleetView`]: the fleet's counts for a breaker, how they are summed, what the gate reads.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::report::{Local, Report};

/// The fleet's counts for one breaker, from the last successful round.
///
/// Only fresh reports count (written within the fleet's
/// [staleness](crate::FleetBuilder::staleness) bound, on Redis's clock, so the pods' own clocks
/// do not matter). This pod is counted from its own snapshot of that round, never from what
/// Redis holds for it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FleetView {
    /// Pods with a fresh report, this one included.
    pub pods: u32,
    /// Of those, pods whose breaker holds an open slot (open, half-open, recovering or
    /// isolated), this one included.
    pub open_pods: u32,
    /// Calls in the trip windows of the pods whose breaker is closed, and of those that
    /// tripped from closed within the last staleness bound (the window that tripped them
    /// stays visible that long, so that pods reading a moment later still see it).
    pub calls: u64,
    /// Failures in those windows.
    pub failures: u64,
    /// Slow calls in those windows.
    pub slow: u64,
    /// Reports too old to count (a pod gone, or one that lost Redis).
    pub stale_pods: u32,
    /// Fields under the breaker's key that are not reports (another format, another
    /// program's data): ignored, and logged at most once a minute per key.
    pub ignored_fields: u32,
    /// Redis's clock at the round.
    pub server_time: SystemTime,
    /// When the round read it, on this process's clock.
    pub read_at: Instant,
}

impl FleetView {
    /// Failures / calls, `None` when no closed pod reported a call.
    pub fn failure_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.failures as f64 / self.calls as f64)
    }

    /// Slow calls / calls, `None` when no closed pod reported a call.
    pub fn slow_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.slow as f64 / self.calls as f64)
    }

    /// One round without Redis, for simulators (cutout-lab) and tests: pure, no I/O. This
    /// pod's `snapshot` and every other pod's last stored report, as (pod, the snapshot it
    /// published, whether it had tripped from closed within the grace when it published,
    /// when the store wrote it in ms), go through the same code as a round on Redis: what a
    /// pod publishes (counts while closed, and within the grace after a trip), encoded and
    /// parsed back, summed over the reports fresh within `staleness` at `now_ms`. Returns the
    /// view and whether `rule` opens this pod's breaker (it is closed and the fleet's window
    /// reaches a threshold; no open cap).
    pub fn simulate(
        pod: &str,
        snapshot: &cutout::Snapshot,
        tripped_lately: bool,
        others: &[(&str, &cutout::Snapshot, bool, u64)],
        now_ms: u64,
        staleness: Duration,
        rule: &crate::ResolvedRule,
    ) -> (FleetView, bool) {
        let local = Local::of(snapshot, tripped_lately);
        let fields: Vec<(Vec<u8>, Vec<u8>)> = others
            .iter()
            .map(|(name, snapshot, tripped_lately, at_ms)| {
                let value = format!("{} {at_ms}", Local::of(snapshot, *tripped_lately).encode());
                (name.as_bytes().to_vec(), value.into_bytes())
            })
            .collect();
        let staleness_ms = u64::try_from(staleness.as_millis()).unwrap_or(u64::MAX);
        let ages = Ages {
            staleness_ms,
            retention_ms: u64::MAX,
        };
        let view = aggregate(pod, &local, now_ms, &fields, ages).view;
        let fires = local.closed && rule.fires(view.calls, view.failures, view.slow).is_some();
        (view, fires)
    }
}

/// A view and what the task needs besides it.
#[derive(Debug)]
pub(crate) struct Aggregate {
    pub(crate) view: FleetView,
    /// Other pods reporting the breaker open.
    pub(crate) open_others: u32,
    /// The pods whose breaker is closed, this one included when closed (for the ranked fleet
    /// trip under an open cap).
    pub(crate) closed: Vec<String>,
    /// Fields that are not reports, lossily decoded (for the warning).
    pub(crate) foreign: Vec<String>,
    /// Reports older than the retention: (field, value) to delete next round if unchanged.
    pub(crate) forget: Vec<(Vec<u8>, Vec<u8>)>,
}

/// How old a report may be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ages {
    pub(crate) staleness_ms: u64,
    pub(crate) retention_ms: u64,
}

/// Sums the fresh reports of the other pods with this pod's own counts. `fields` is the
/// hash's content, this pod's own field included (skipped: it is counted from `local`).
pub(crate) fn aggregate(
    pod: &str,
    local: &Local,
    now_ms: u64,
    fields: &[(Vec<u8>, Vec<u8>)],
    ages: Ages,
) -> Aggregate {
    let mut view = FleetView {
        pods: 1,
        open_pods: u32::from(local.open),
        calls: local.calls,
        failures: local.failures,
        slow: local.slow,
        stale_pods: 0,
        ignored_fields: 0,
        server_time: SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms),
        read_at: Instant::now(),
    };
    let mut open_others = 0;
    let mut closed = Vec::new();
    if local.closed {
        closed.push(pod.to_owned());
    }
    let mut foreign = Vec::new();
    let mut forget = Vec::new();
    for (field, value) in fields {
        if field.as_slice() == pod.as_bytes() {
            continue;
        }
        let (Ok(name), Some(report)) = (std::str::from_utf8(field), Report::parse(value)) else {
            view.ignored_fields = view.ignored_fields.saturating_add(1);
            foreign.push(String::from_utf8_lossy(field).into_owned());
            continue;
        };
        // A report from the future (Redis's clock stepped back) is as good as a fresh one
        // within the bound, and ignored beyond it.
        let age = now_ms.abs_diff(report.at_ms);
        if age > ages.staleness_ms {
            view.stale_pods = view.stale_pods.saturating_add(1);
            if report.at_ms < now_ms && age > ages.retention_ms {
                forget.push((field.clone(), value.clone()));
            }
            continue;
        }
        view.pods = view.pods.saturating_add(1);
        if report.open {
            view.open_pods = view.open_pods.saturating_add(1);
            open_others += 1;
        } else {
            closed.push(name.to_owned());
        }
        view.calls = view.calls.saturating_add(report.calls);
        view.failures = view.failures.saturating_add(report.failures);
        view.slow = view.slow.saturating_add(report.slow);
    }
    Aggregate {
        view,
        open_others,
        closed,
        foreign,
        forget,
    }
}

/// Whether this pod is among the closed pods a capped fleet trip may open: with
/// `cap − open_others` slots free, the pods ranked first by a hash of (breaker, pod) take
/// them. Every pod ranks the same list the same way, so when the whole fleet sees the same
/// outage in the same round, about `free` pods open rather than all of them. (A hash rather
/// than the pods' names, so that the same pods are not the first to open for every breaker.)
pub(crate) fn ranked_in(breaker: &str, pod: &str, closed: &[String], free: u32) -> bool {
    let mine = (rank_hash(breaker, pod), pod);
    let ahead = closed
        .iter()
        .filter(|other| other.as_str() != pod)
        .filter(|other| (rank_hash(breaker, other), other.as_str()) < mine)
        .count();
    u32::try_from(ahead).is_ok_and(|ahead| ahead < free)
}

/// FNV-1a over the breaker's id, a separator and the pod's id, then a finalizer: stable
/// across processes, builds and versions (std's hasher promises none of that).
fn rank_hash(breaker: &str, pod: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in breaker.bytes().chain([0xff]).chain(pod.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finalizer: FNV's low bits mix poorly for short, similar ids.
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// Milliseconds on this process's monotonic clock, from 1 (0 means "no view").
pub(crate) fn monotonic_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// What the task knows of one breaker id, shared with its open gates.
///
/// # Orderings
/// The gate reads `valid_until` with `Acquire`, then `open_others` with `Relaxed`; the task
/// writes `open_others` with `Relaxed`, then `valid_until` with `Release`. A gate that reads a
/// round's deadline therefore reads that round's count or a later one's, never an older
/// round's count under a newer deadline. Invalidating stores 0 with `Release`; a gate that
/// still reads the previous deadline answers from the previous round, which is what it would
/// have done a moment earlier. Nothing else relates the two: no `SeqCst`.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    open_others: AtomicU32,
    valid_until: AtomicU64,
    /// The open cap of the last gate made for this id (0: none), for the ranked fleet trip.
    cap: AtomicU32,
    /// For [`Fleet::view`](crate::Fleet::view): never read by a gate.
    view: Mutex<Option<FleetView>>,
}

impl Slot {
    /// Stores a round's view, fresh until `valid_for` from now.
    pub(crate) fn store(&self, aggregate: &Aggregate, valid_for: Duration) {
        self.open_others
            .store(aggregate.open_others, Ordering::Relaxed);
        let until =
            monotonic_ms().saturating_add(u64::try_from(valid_for.as_millis()).unwrap_or(u64::MAX));
        self.valid_until.store(until, Ordering::Release);
        if let Ok(mut view) = self.view.lock() {
            *view = Some(aggregate.view.clone());
        }
    }

    /// Forgets the view: the gate allows every opening, and `Fleet::view` shows nothing.
    pub(crate) fn invalidate(&self) {
        self.valid_until.store(0, Ordering::Release);
        if let Ok(mut view) = self.view.lock() {
            *view = None;
        }
    }

    /// The last round's view, `None` once it is no longer fresh.
    pub(crate) fn view(&self) -> Option<FleetView> {
        if !self.is_valid() {
            return None;
        }
        self.view.lock().ok().and_then(|view| view.clone())
    }

    fn is_valid(&self) -> bool {
        let until = self.valid_until.load(Ordering::Acquire);
        until != 0 && monotonic_ms() <= until
    }

    /// How many other pods report the breaker open, while the view is fresh.
    pub(crate) fn open_others(&self) -> Option<u32> {
        self.is_valid()
            .then(|| self.open_others.load(Ordering::Relaxed))
    }

    /// The open gate: lock-free loads and a clock read, no I/O. Without a fresh view
    /// (Redis down, slow, no round yet) every opening is allowed: the cap is a hint, and a
    /// breaker that cannot open when its dependency fails is worse than a cap exceeded.
    pub(crate) fn allows_open(&self, max_open_pods: u32) -> bool {
        self.open_others().is_none_or(|open| open < max_open_pods)
    }

    pub(crate) fn set_cap(&self, cap: u32) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub(crate) fn cap(&self) -> Option<u32> {
        Some(self.cap.load(Ordering::Relaxed)).filter(|&cap| cap > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGES: Ages = Ages {
        staleness_ms: 1_000,
        retention_ms: 60_000,
    };

    fn field(pod: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        (pod.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    #[test]
    fn sums_fresh_reports_and_counts_this_pod_once() {
        let local = Local {
            closed: true,
            open: false,
            calls: 10,
            failures: 5,
            slow: 1,
        };
        let now = 1_700_000_100_000;
        let fields = [
            // What Redis holds for this pod is older than its snapshot: skipped.
            field("me", "99 99 0 0 1700000099900"),
            field("b", "20 10 0 0 1700000099800"),
            field("c", "0 0 0 1 1700000099950"),
            field("old", "50 50 0 0 1700000098000"),
            field("gone", "50 50 0 0 1700000000000"),
            field("junk", "hello"),
        ];
        let aggregate = aggregate("me", &local, now, &fields, AGES);
        let view = &aggregate.view;
        assert_eq!((view.pods, view.open_pods), (3, 1));
        assert_eq!((view.calls, view.failures, view.slow), (30, 15, 1));
        assert_eq!((view.stale_pods, view.ignored_fields), (2, 1));
        assert_eq!(view.failure_rate(), Some(0.5));
        assert_eq!(aggregate.open_others, 1);
        assert_eq!(aggregate.closed, ["me", "b"]);
        assert_eq!(aggregate.foreign, ["junk"]);
        assert_eq!(aggregate.forget, [field("gone", "50 50 0 0 1700000000000")]);
    }

    #[test]
    fn an_open_pod_counts_only_as_open() {
        let local = Local {
            closed: false,
            open: true,
            ..Local::default()
        };
        let aggregate = aggregate("me", &local, 5_000, &[field("b", "4 4 0 0 5000")], AGES);
        assert_eq!((aggregate.view.pods, aggregate.view.open_pods), (2, 1));
        assert_eq!(aggregate.open_others, 0, "this pod is not another");
        assert_eq!(aggregate.closed, ["b"]);
    }

    #[test]
    fn the_ranked_trip_admits_about_free_pods() {
        let pods: Vec<String> = (0..20).map(|i| format!("pod-{i}")).collect();
        for free in 0..5 {
            let admitted = pods
                .iter()
                .filter(|pod| ranked_in("payments", pod, &pods, free))
                .count();
            assert_eq!(admitted, free as usize);
        }
        // Another breaker picks other pods first.
        let first = |breaker: &str| -> Vec<&String> {
            pods.iter()
                .filter(|pod| ranked_in(breaker, pod, &pods, 3))
                .collect()
        };
        assert_ne!(first("payments"), first("search"));
    }

    #[test]
    fn the_gate_allows_without_a_fresh_view() {
        let slot = Slot::default();
        assert!(slot.allows_open(1), "no view yet");
        let aggregate = Aggregate {
            view: FleetView {
                pods: 3,
                open_pods: 2,
                calls: 0,
                failures: 0,
                slow: 0,
                stale_pods: 0,
                ignored_fields: 0,
                server_time: SystemTime::UNIX_EPOCH,
                read_at: Instant::now(),
            },
            open_others: 2,
            closed: Vec::new(),
            foreign: Vec::new(),
            forget: Vec::new(),
        };
        slot.store(&aggregate, Duration::from_secs(60));
        assert!(!slot.allows_open(2));
        assert!(slot.allows_open(3));
        assert_eq!(slot.view().map(|view| view.open_pods), Some(2));
        slot.invalidate();
        assert!(slot.allows_open(2), "Redis gone: local decisions");
        assert_eq!(slot.view(), None);
        slot.store(&aggregate, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(3));
        assert!(slot.allows_open(2), "the view went stale");
    }
}

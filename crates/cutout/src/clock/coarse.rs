//! [`CoarseClock`]: the one opt-in background thread, which keeps [`SystemClock::recent`] a
//! single load.
//!
//! # Orderings
//! The thread stores [`SystemClock::now`] into `RECENT` with `Relaxed`, and readers load it
//! with `Relaxed`. The value is the only thing published: no reader uses it to reach other
//! memory. One location's values are seen in the order they were stored, and the thread stores
//! readings of a monotonic clock, so a reader never sees coarse time go backwards while a guard
//! lives. `RUNNING` only keeps two guards from running at once (an `AcqRel` compare-exchange,
//! released with `Release` after the thread has been joined and `RECENT` cleared, so the next
//! guard's first store comes after that clear).
//!
//! [`SystemClock::recent`]: super::SystemClock
//! [`SystemClock::now`]: super::SystemClock

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{Clock, SystemClock};

/// The coarse time: the last [`SystemClock::now`] the thread stored (at least 1), or 0 while no
/// coarse clock runs.
static RECENT: AtomicU64 = AtomicU64::new(0);
/// Whether a guard is alive.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// The coarse time on the [`SystemClock`]'s scale, or 0 when no coarse clock runs: one load.
#[inline(always)]
pub(crate) fn coarse_time() -> u64 {
    RECENT.load(Ordering::Relaxed)
}

fn store_now() {
    RECENT.store(SystemClock.now().max(1), Ordering::Relaxed);
}

/// A guard that keeps a process-wide coarse clock ticking, making
/// [`SystemClock::recent`](super::SystemClock) a single load (under 1 ns against 20–36 ns for
/// a precise read on the VMs this project is measured on).
///
/// Constructing a breaker never starts a thread; this is the one opt-in background thread, for
/// services where refusals are hot (a gateway with an open breaker). While it runs, breakers
/// see break expiry and time-window boundaries up to `resolution` late (plus the thread's
/// scheduling delay), and a refusal's retry-after reads up to as much long. Dropping the guard
/// stops and joins the thread, and `recent` reads the precise clock again.
///
/// ```
/// use std::time::Duration;
/// use cutout::clock::{Clock, CoarseClock, SystemClock};
///
/// let coarse = CoarseClock::start(Duration::from_millis(1))?;
/// assert!(SystemClock.recent() <= SystemClock.now());
/// // Only one runs per process.
/// assert!(CoarseClock::start(Duration::from_millis(1)).is_err());
/// drop(coarse);
/// # Ok::<(), cutout::clock::CoarseClockError>(())
/// ```
#[derive(Debug)]
pub struct CoarseClock {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The coarse clock could not be started.
#[derive(Debug)]
pub struct CoarseClockError(Cause);

#[derive(Debug)]
enum Cause {
    Running,
    ZeroResolution,
    Spawn(io::Error),
}

impl fmt::Display for CoarseClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Cause::Running => f.write_str("coarse clock not started: one is already running"),
            Cause::ZeroResolution => {
                f.write_str("coarse clock not started: its resolution must be above zero")
            }
            Cause::Spawn(error) => {
                write!(
                    f,
                    "coarse clock not started: its thread did not spawn: {error}"
                )
            }
        }
    }
}

impl std::error::Error for CoarseClockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Cause::Spawn(error) => Some(error),
            _ => None,
        }
    }
}

impl CoarseClock {
    /// Starts the coarse clock, updated every `resolution`. Only one runs per process: a second
    /// call while a guard is alive returns an error, as does a zero `resolution`. The thread
    /// wakes once per `resolution`: a millisecond costs next to nothing, a microsecond keeps it
    /// busy.
    pub fn start(resolution: Duration) -> Result<CoarseClock, CoarseClockError> {
        if resolution.is_zero() {
            return Err(CoarseClockError(Cause::ZeroResolution));
        }
        if RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(CoarseClockError(Cause::Running));
        }
        // Valid from the first read, before the thread has run.
        store_now();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let spawned = thread::Builder::new()
            .name("cutout-coarse-clock".into())
            .spawn(move || {
                loop {
                    thread::park_timeout(resolution);
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    store_now();
                }
            });
        match spawned {
            Ok(thread) => Ok(CoarseClock {
                stop,
                thread: Some(thread),
            }),
            Err(error) => {
                RECENT.store(0, Ordering::Relaxed);
                RUNNING.store(false, Ordering::Release);
                Err(CoarseClockError(Cause::Spawn(error)))
            }
        }
    }
}

impl Drop for CoarseClock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // The thread only parks and stores: it cannot panic, and a join error would only
            // repeat that it is gone.
            let _ = thread.join();
        }
        // Cleared after the join, so no late store revives a stopped clock.
        RECENT.store(0, Ordering::Relaxed);
        RUNNING.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test in this binary that starts a coarse clock (it is process-wide).
    #[test]
    fn coarse_time_lags_the_precise_clock_and_stops_with_its_guard() {
        assert!(matches!(
            CoarseClock::start(Duration::ZERO),
            Err(CoarseClockError(Cause::ZeroResolution))
        ));
        assert_eq!(coarse_time(), 0);
        let guard = CoarseClock::start(Duration::from_millis(1)).expect("none runs");
        assert!(matches!(
            CoarseClock::start(Duration::from_millis(1)),
            Err(CoarseClockError(Cause::Running))
        ));
        let first = SystemClock.recent();
        assert!(first > 0 && first <= SystemClock.now());
        // It ticks: within a second, coarse time has moved past a precise reading.
        let mark = SystemClock.now();
        let ticked = (0..1_000).any(|_| {
            thread::sleep(Duration::from_millis(1));
            SystemClock.recent() > mark
        });
        assert!(ticked, "coarse time stayed at or below {mark}");
        drop(guard);
        assert_eq!(coarse_time(), 0, "a stopped clock reads as none");
        let precise = SystemClock.now();
        assert!(
            SystemClock.recent() >= precise,
            "recent reads the precise clock again"
        );
        // A new guard can start once the old one is gone.
        drop(CoarseClock::start(Duration::from_millis(1)).expect("the last one stopped"));
    }
}

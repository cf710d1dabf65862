//! The cases: which subjects each one measures, how often the timed loop reads the clock, and
//! what must hold.

use crate::subjects::lock_floor::{Counting, LockFloor};
use crate::subjects::{cutout, declarative, failsafe, fleet, floor, recloser, tower};
use crate::{Bench, Runner};

/// The largest batch of calls between two clock reads in a timed loop (see
/// [`crate::Length::For`]) for every subject but tower-resilience: no limit in practice, the
/// batch settles where it takes about [`crate::BATCH_TIME`].
pub const MAX_BATCH: u64 = 1 << 24;
/// The largest batch for tower-resilience: its calls take 0.2–0.5 µs on 1 thread, but on 2,
/// where a contended call waits on a tokio mutex or a 1 ms timer, from 0.4 to 100 µs on average
/// over a loop, so a batch sized on fast calls could run tens of milliseconds past the loop's
/// end. 64 calls are 15–30 µs on 1 thread (a clock read is 0.1–0.2% of that) and at most a few
/// milliseconds on 2.
pub const TOWER_MAX_BATCH: u64 = 64;

/// The coarse clocks a coarse row runs under, each ticking every millisecond: cutout's
/// `CoarseClock` (for `SystemClock::recent`) and quanta's upkeep thread (for the `quanta
/// Instant::recent` floor). Dropping it stops both.
pub struct CoarseClocks {
    _cutout: ::cutout::clock::CoarseClock,
    _quanta: quanta::Handle,
}

impl CoarseClocks {
    /// How often both clocks tick.
    pub const RESOLUTION: std::time::Duration = std::time::Duration::from_millis(1);

    /// Starts both; panics if another cutout coarse clock or quanta upkeep thread runs.
    pub fn start() -> CoarseClocks {
        CoarseClocks {
            _cutout: ::cutout::clock::CoarseClock::start(Self::RESOLUTION)
                .expect("no other coarse clock runs"),
            _quanta: quanta::Upkeep::new(Self::RESOLUTION)
                .start()
                .expect("no other upkeep thread runs"),
        }
    }
}

/// What every run of a case must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing to check (floors).
    Nothing,
    /// The breaker stays closed: no call is refused.
    NoRejections,
    /// The breaker is open: every call is refused.
    AllRejected,
}

/// One subject in a case.
pub struct Row {
    /// The library and, where it matters, its configuration.
    pub name: &'static str,
    /// The largest batch of calls between two clock reads in a timed loop.
    pub max_batch: u64,
    /// Whether the coarse clocks run while this row is measured (see [`CoarseClocks`]).
    pub coarse: bool,
    /// Builds (and warms up, or trips) the subject.
    pub make: fn() -> Box<dyn Runner>,
}

/// A case: its rows, the first of which is the reference the ratios divide by.
pub struct Case {
    /// A short id (for `--case`).
    pub id: &'static str,
    /// What is measured.
    pub title: &'static str,
    /// What must hold on every run.
    pub expect: Expect,
    /// The subjects; ratios are row / first row.
    pub rows: Vec<Row>,
}

fn row(name: &'static str, max_batch: u64, make: fn() -> Box<dyn Runner>) -> Row {
    Row {
        name,
        max_batch,
        coarse: false,
        make,
    }
}

fn coarse(name: &'static str, max_batch: u64, make: fn() -> Box<dyn Runner>) -> Row {
    Row {
        coarse: true,
        ..row(name, max_batch, make)
    }
}

/// Every case, in table order.
pub fn all() -> Vec<Case> {
    let mut cases = listed();
    // Fleet signals' rows, where a `redis-server` can be started for them: a watched breaker
    // beside the same breaker unwatched (publishing is off the call's path).
    if fleet::available() {
        for case in &mut cases {
            match case.id {
                "healthy" => case.rows.insert(
                    1,
                    row("cutout (count 100) + fleet signals", MAX_BATCH, || {
                        Box::new(Bench::<_, 0>(fleet::watched(cutout::count_window())))
                    }),
                ),
                "default" => case.rows.insert(
                    1,
                    row("cutout (default) + fleet signals", MAX_BATCH, || {
                        Box::new(Bench::<_, 0>(fleet::watched(cutout::default_settings())))
                    }),
                ),
                _ => {}
            }
        }
    }
    cases
}

/// The cases every machine runs.
fn listed() -> Vec<Case> {
    const F: u64 = MAX_BATCH;
    const P: u64 = MAX_BATCH;
    const T: u64 = TOWER_MAX_BATCH;
    vec![
        Case {
            id: "floor",
            title: "Floors",
            expect: Expect::Nothing,
            rows: vec![
                row("loop + closure", F, || {
                    Box::new(Bench::<_, 0>(floor::closure()))
                }),
                row("relaxed load (shared line)", F, || {
                    Box::new(Bench::<_, 0>(floor::relaxed_load()))
                }),
                row("fetch_add, own line", F, || {
                    Box::new(Bench::<_, 0>(floor::OwnCounter))
                }),
                row("fetch_add, shared line", F, || {
                    Box::new(Bench::<_, 0>(floor::shared_fetch_add()))
                }),
                row("std Instant::now", F, || {
                    Box::new(Bench::<_, 0>(floor::std_now()))
                }),
                row("quanta Instant::now", F, || {
                    Box::new(Bench::<_, 0>(floor::quanta_now()))
                }),
                coarse("quanta Instant::recent (upkeep)", F, || {
                    Box::new(Bench::<_, 0>(floor::quanta_recent()))
                }),
                #[cfg(target_os = "linux")]
                row("CLOCK_MONOTONIC_COARSE (vDSO)", F, || {
                    Box::new(Bench::<_, 0>(floor::kernel_coarse()))
                }),
                row("SystemClock::now", F, || {
                    Box::new(Bench::<_, 0>(floor::system_now()))
                }),
                row("SystemClock::recent", F, || {
                    Box::new(Bench::<_, 0>(floor::system_recent()))
                }),
                coarse("SystemClock::recent (CoarseClock)", F, || {
                    Box::new(Bench::<_, 0>(floor::system_recent()))
                }),
            ],
        },
        Case {
            id: "healthy",
            title: "(a) Healthy success, consecutive / count-window breaker",
            expect: Expect::NoRejections,
            rows: vec![
                row("cutout (count 100)", F, || {
                    Box::new(Bench::<_, 0>(cutout::count_window()))
                }),
                row("cutout (count 100) through #[cutout::resilient]", F, || {
                    Box::new(Bench::<_, 0>(declarative::count_window()))
                }),
                row("failsafe (consecutive 5)", P, || {
                    Box::new(Bench::<_, 0>(failsafe::consecutive()))
                }),
                row("recloser (count 100)", P, || {
                    Box::new(Bench::<_, 0>(recloser::count_window()))
                }),
                row("tower-resilience (consecutive 5)", T, || {
                    Box::new(Bench::<_, 0>(tower::consecutive()))
                }),
                row("floor: the word read before and after the call", F, || {
                    Box::new(Bench::<_, 0>(floor::word_around_call()))
                }),
            ],
        },
        Case {
            id: "default",
            title: "(b) Healthy success, each library's default settings",
            expect: Expect::NoRejections,
            rows: vec![
                row("cutout (default: 30 s time window)", F, || {
                    Box::new(Bench::<_, 0>(cutout::default_settings()))
                }),
                coarse("cutout (default) + CoarseClock", F, || {
                    Box::new(Bench::<_, 0>(cutout::default_settings()))
                }),
                row("failsafe (default: 30 s success rate)", P, || {
                    Box::new(Bench::<_, 0>(failsafe::default_settings()))
                }),
                row("recloser (default: count 100)", P, || {
                    Box::new(Bench::<_, 0>(recloser::count_window()))
                }),
                row("tower-resilience (default: count 100)", T, || {
                    Box::new(Bench::<_, 0>(tower::default_settings()))
                }),
            ],
        },
        Case {
            id: "fail10",
            title: "(c) 10% failures while closed (every 10th call per thread fails)",
            expect: Expect::NoRejections,
            rows: vec![
                row("cutout (count 100)", F, || {
                    Box::new(Bench::<_, 10>(cutout::count_window()))
                }),
                row("cutout (default settings)", F, || {
                    Box::new(Bench::<_, 10>(cutout::default_settings()))
                }),
                row("failsafe (consecutive 5)", P, || {
                    Box::new(Bench::<_, 10>(failsafe::consecutive()))
                }),
                row("recloser (count 100)", P, || {
                    Box::new(Bench::<_, 10>(recloser::count_window()))
                }),
                row("tower-resilience (consecutive 5)", T, || {
                    Box::new(Bench::<_, 10>(tower::consecutive()))
                }),
                row("floor: a lock per failure, swapped counts", F, || {
                    Box::new(Bench::<_, 10>(LockFloor::new(Counting::Swapped)))
                }),
                row("floor: a lock per failure, stored counts", F, || {
                    Box::new(Bench::<_, 10>(LockFloor::new(Counting::Stored)))
                }),
                row(
                    "floor: a lock per failure, added counts it reads",
                    F,
                    || Box::new(Bench::<_, 10>(LockFloor::new(Counting::Added))),
                ),
            ],
        },
        Case {
            id: "open",
            title: "(d) Rejection while open",
            expect: Expect::AllRejected,
            rows: vec![
                row("cutout", F, || Box::new(Bench::<_, 0>(cutout::open()))),
                coarse("cutout + CoarseClock", F, || {
                    Box::new(Bench::<_, 0>(cutout::open()))
                }),
                row("failsafe", P, || Box::new(Bench::<_, 0>(failsafe::open()))),
                row("recloser", P, || Box::new(Bench::<_, 0>(recloser::open()))),
                row("tower-resilience", T, || {
                    Box::new(Bench::<_, 0>(tower::open()))
                }),
            ],
        },
    ]
}

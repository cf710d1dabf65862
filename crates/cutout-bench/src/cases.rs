//! The cases: which subjects each one measures, how many calls, and what must hold.

use crate::subjects::lock_floor::{Counting, LockFloor};
use crate::subjects::{cutout, failsafe, floor, recloser, tower};
use crate::{Bench, Runner};

/// Calls per thread per measurement for cutout and the floors (about 1–10 ms each).
pub const FAST_ITERS: u64 = 4_000_000;
/// Calls per thread per measurement for failsafe and recloser.
pub const PEER_ITERS: u64 = 1_000_000;
/// Calls per thread per measurement for tower-resilience (a boxed future and a tokio mutex
/// per call): 20 ms on 1 thread, but 1–2 s on 2 threads, where each contended call waits on a
/// tokio timer. At 250,000 its 2-thread rows took most of a 9-minute run.
pub const TOWER_ITERS: u64 = 50_000;

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
    /// Calls per thread per measurement.
    pub iters: u64,
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

fn row(name: &'static str, iters: u64, make: fn() -> Box<dyn Runner>) -> Row {
    Row {
        name,
        iters,
        coarse: false,
        make,
    }
}

fn coarse(name: &'static str, iters: u64, make: fn() -> Box<dyn Runner>) -> Row {
    Row {
        coarse: true,
        ..row(name, iters, make)
    }
}

/// Every case, in table order.
pub fn all() -> Vec<Case> {
    const F: u64 = FAST_ITERS;
    const P: u64 = PEER_ITERS;
    const T: u64 = TOWER_ITERS;
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

//! The sampled slow-call estimate across the sampling switch (DESIGN §2 "Estimates", issue
//! #27): a breaker that times every call below 8,192 calls a trip window and one call in eight
//! above it weighs each timed call by the calls it stood for when it was timed, so a window
//! holding calls timed at both rates reads the share of slow calls the calls really had.
//!
//! Everything runs on a manual clock, deterministically (seeded, bounded). Calls overlap in
//! *waves*: a wave admits its calls together, lets 10 ms pass and records its fast ones, then
//! lets the slow ones run to 500 ms. The normal latency is 10 ms, so a 500 ms call is slow
//! under "3 × normal" and under "normal + 50 ms" alike. The tests keep the exact count of the
//! trip window beside the breaker (the same buckets: one a second, dropping out whole) and
//! compare the breaker's estimate with it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{
    Breaker, Event, Jitter, OpenReason, OwnedPermit, Settings, State, Transition, TripWindow,
};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
/// A healthy call.
const FAST: u64 = 10 * MS;
/// A slow one: 50 × the normal latency.
const SLOW: u64 = 500 * MS;

/// The exact counts of a trip window: a time window's calls and slow calls per bucket (one a
/// second, 10 to 60 of them, each dropping out whole), or a count window's last calls.
enum Exact {
    Time {
        period: u64,
        buckets: u64,
        counts: BTreeMap<u64, (u64, u64)>,
    },
    Count {
        size: usize,
        slow: VecDeque<bool>,
    },
}

impl Exact {
    fn new(window: TripWindow) -> Exact {
        match window {
            TripWindow::Time(span) => {
                let span = span.as_nanos() as u64;
                let buckets = (span / SEC).clamp(10, 60);
                Exact::Time {
                    period: span.div_ceil(buckets),
                    buckets,
                    counts: BTreeMap::new(),
                }
            }
            TripWindow::Count(size) => Exact::Count {
                size: size as usize,
                slow: VecDeque::new(),
            },
        }
    }

    fn record(&mut self, now: u64, slow: bool) {
        match self {
            Exact::Time { period, counts, .. } => {
                let entry = counts.entry(now / *period).or_default();
                entry.0 += 1;
                entry.1 += u64::from(slow);
            }
            Exact::Count { size, slow: marks } => {
                marks.push_back(slow);
                if marks.len() > *size {
                    marks.pop_front();
                }
            }
        }
    }

    /// (calls, slow calls) in the window at `now`.
    fn at(&self, now: u64) -> (u64, u64) {
        match self {
            Exact::Time {
                period,
                buckets,
                counts,
            } => {
                let oldest = (now / period).saturating_sub(buckets - 1);
                counts
                    .range(oldest..)
                    .fold((0, 0), |(c, s), (_, &(calls, slow))| (c + calls, s + slow))
            }
            Exact::Count { slow, .. } => (
                slow.len() as u64,
                slow.iter().filter(|&&slow| slow).count() as u64,
            ),
        }
    }
}

/// A breaker on a manual clock, and the exact counts of its trip window.
struct Run {
    breaker: Breaker,
    clock: ManualClock,
    exact: Exact,
    events: Arc<Mutex<Vec<Event>>>,
    /// Whether slow calls fail (so that they stay out of the latency baseline) or succeed.
    slow_fails: bool,
}

/// How a wave ended: every call recorded, or the breaker opened, with the exact window (calls,
/// slow calls) when it did.
#[derive(Debug, PartialEq)]
enum Wave {
    Done,
    Opened {
        reason: OpenReason,
        calls: u64,
        slow: u64,
    },
}

impl Run {
    fn new(settings: Settings, gated: bool, slow_fails: bool) -> Run {
        let clock = ManualClock::new();
        let mut builder = Breaker::builder("estimate")
            .settings(settings.clone())
            .clock(clock.clone())
            .seed(5);
        if gated {
            // Kept closed, so that the estimate can be read however far it goes.
            builder = builder.open_gate(|_| false);
        }
        let breaker = builder.build();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        breaker.subscribe(move |event| sink.lock().unwrap().push(event.clone()));
        Run {
            breaker,
            clock,
            exact: Exact::new(settings.window()),
            events,
            slow_fails,
        }
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    fn advance(&self, nanos: u64) {
        self.clock.advance(Duration::from_nanos(nanos));
    }

    /// A wave of `fast` and `slow` calls admitted together (in a mix: one slow call every so
    /// often), the fast ones recorded after 10 ms, the slow ones after 500 ms.
    fn wave(&mut self, fast: usize, slow: usize) -> Wave {
        let total = fast + slow;
        let mut permits: Vec<(OwnedPermit, bool)> = Vec::with_capacity(total);
        for i in 0..total {
            // Spread the slow calls over the wave: call i is slow when the share so far falls
            // behind.
            let is_slow = (i + 1) * slow / total.max(1) > i * slow / total.max(1);
            match self.breaker.try_acquire_owned() {
                Ok(permit) => permits.push((permit, is_slow)),
                Err(_) => break,
            }
        }
        self.advance(FAST);
        let (fast_permits, slow_permits): (Vec<_>, Vec<_>) =
            permits.into_iter().partition(|&(_, is_slow)| !is_slow);
        for (permit, _) in fast_permits {
            permit.success();
            self.exact.record(self.now(), false);
            if let Some(wave) = self.opened() {
                return wave;
            }
        }
        if slow_permits.is_empty() {
            return Wave::Done;
        }
        self.advance(SLOW - FAST);
        for (permit, _) in slow_permits {
            if self.slow_fails {
                permit.failure();
            } else {
                permit.success();
            }
            self.exact.record(self.now(), true);
            if let Some(wave) = self.opened() {
                return wave;
            }
        }
        Wave::Done
    }

    /// The breaker's first opening, with the exact window when it happened.
    fn opened(&self) -> Option<Wave> {
        let events = self.events.lock().unwrap();
        let reason = events.iter().find_map(|event| match event.transition {
            Transition::Opened { reason, .. } => Some(reason),
            _ => None,
        })?;
        let (calls, slow) = self.exact.at(self.now());
        Some(Wave::Opened {
            reason,
            calls,
            slow,
        })
    }

    /// `waves` waves of `per_wave` calls, `slow_pct` % of them slow, one every `every`
    /// nanoseconds (from the start of one to the start of the next, at least the wave's own
    /// length). Stops at an opening.
    fn phase(&mut self, waves: usize, per_wave: usize, slow_pct: usize, every: u64) -> Wave {
        for _ in 0..waves {
            let start = self.now();
            let slow = per_wave * slow_pct / 100;
            let wave = self.wave(per_wave - slow, slow);
            if wave != Wave::Done {
                return wave;
            }
            let took = self.now() - start;
            self.advance(every.saturating_sub(took));
        }
        Wave::Done
    }
}

fn sixty_second_window() -> Settings {
    Settings::builder()
        .window(TripWindow::Time(Duration::from_secs(60)))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// The window: 9,000 fast calls, then 12,000 calls at 50 × the median, over a 60 s
/// trip window (57 % slow in the end), on a breaker that has served 10 calls a second for five
/// minutes before (so that its latency baseline knows the dependency as it was: a breaker
/// whose whole history is this window compares the window with itself). The first 8,192 calls
/// are timed one by one; from there one call in eight is, and each of those stands for eight.
/// Weighed alike (as the breaker did: slow over timed calls) the window read a slow share of
/// 0.15 and never tripped. Weighed by what each stood for, it trips on the slow-call ratio
/// about when the exact share reaches the ratio (0.5): within the documented bound (never
/// before 0.4, see `machine/sampling.rs`).
#[test]
fn a_window_that_turns_slow_after_the_sampling_switch_trips_on_the_slow_call_ratio() {
    let mut run = Run::new(sixty_second_window(), false, false);
    // Five minutes at 10 calls a second, then a minute with none: the window starts empty.
    assert_eq!(run.phase(300, 10, 0, SEC), Wave::Done);
    run.advance(60 * SEC);
    assert_eq!(run.breaker.snapshot().calls, 0);
    // 9,000 fast calls in 45 waves over 18 s.
    assert_eq!(run.phase(45, 200, 0, 400 * MS), Wave::Done);
    let (calls, slow) = run.exact.at(run.now());
    assert_eq!((calls, slow), (9_000, 0));
    assert_eq!(run.breaker.snapshot().calls, 9_000);
    // 12,000 slow calls in 60 waves of 200 over the next 30 s.
    let wave = run.phase(60, 200, 100, SLOW);
    let snapshot = run.breaker.snapshot();
    let Wave::Opened {
        reason,
        calls,
        slow,
    } = wave
    else {
        panic!(
            "12,000 calls at 50 × the median after 9,000 fast ones (57 % slow) left the breaker \
             {:?}: slow rate {:?} of {} calls",
            snapshot.state, snapshot.slow_rate, snapshot.calls
        );
    };
    assert_eq!(reason, OpenReason::SlowCallRatio);
    let share = slow as f64 / calls as f64;
    eprintln!("opened at an exact slow share of {share:.3} ({slow} of {calls})");
    assert!(
        (0.4..=0.6).contains(&share),
        "opened at an exact slow share of {share:.3} ({slow} of {calls})"
    );
}

/// The reverse: slow calls at low traffic, each timed and weighing one, then a fast burst
/// sampled one in eight. 4,000 fast calls, 4,000 calls 80 % slow (the window peaks at 40 %
/// slow), 12,000 fast calls in 5 s, then 10 calls a second. Once the first 4,000 have slid out
/// the exact share is about 0.2, but weighed alike (slow over timed calls) the 3,200 slow calls
/// timed one by one outweighed the 12,000 fast ones, of which 1,500 were timed: the breaker read
/// 0.56 and opened on a dependency slow in one call in five. Weighed by what each stood for it
/// stays closed, and when the dependency does turn slow (a slow burst) it opens about when the
/// exact share reaches the ratio: not early, not late, within the documented bound.
#[test]
fn slow_calls_timed_one_by_one_before_a_fast_burst_neither_trip_it_early_nor_late() {
    let mut run = Run::new(sixty_second_window(), false, false);
    let mut peak = 0.0f64;
    let mut watch = |run: &Run| {
        let (calls, slow) = run.exact.at(run.now());
        peak = peak.max(slow as f64 / calls.max(1) as f64);
    };
    // 0-10 s: 4,000 fast calls.
    assert_eq!(run.phase(20, 200, 0, 500 * MS), Wave::Done);
    // 10-20 s: 4,000 calls, 80 % slow, every one timed (the window holds fewer than 8,192).
    for _ in 0..20 {
        assert_eq!(run.phase(1, 200, 80, 500 * MS), Wave::Done);
        watch(&run);
    }
    // 20-25 s: a fast burst of 12,000.
    for _ in 0..60 {
        assert_eq!(run.phase(1, 200, 0, 83 * MS), Wave::Done);
        watch(&run);
    }
    // 25-70 s: 10 fast calls a second; the first 4,000 slide out at 60-70 s.
    for _ in 0..450 {
        let wave = run.phase(1, 1, 0, 100 * MS);
        watch(&run);
        let snapshot = run.breaker.snapshot();
        assert_eq!(
            wave,
            Wave::Done,
            "opened at {} ms on a window whose exact slow share is at most {peak:.3}; it read \
             {:?} of {} calls",
            run.now() / MS,
            snapshot.slow_rate,
            snapshot.calls
        );
    }
    assert!(peak <= 0.4, "the exact share peaked at {peak:.3}");
    let (calls, slow) = run.exact.at(run.now());
    let read = run.breaker.snapshot().slow_rate.expect("armed");
    let exact = slow as f64 / calls as f64;
    assert!(
        (read - exact).abs() < 0.05,
        "reads {read:.3} where the exact share is {exact:.3}"
    );
    // From 70 s the dependency is slow under a burst: it opens near the ratio.
    let wave = run.phase(100, 200, 100, SLOW);
    let Wave::Opened {
        reason,
        calls,
        slow,
    } = wave
    else {
        panic!("a slow burst never opened it: {:?}", run.breaker.snapshot());
    };
    assert_eq!(reason, OpenReason::SlowCallRatio);
    let share = slow as f64 / calls as f64;
    eprintln!(
        "peak {peak:.3} before the slow burst, read {read:.3} of exact {exact:.3}; opened at \
         an exact slow share of {share:.3} ({slow} of {calls})"
    );
    assert!(
        (0.4..=0.6).contains(&share),
        "opened at an exact slow share of {share:.3} ({slow} of {calls})"
    );
    assert_eq!(run.breaker.state(), State::Open);
}

/// One phase of a generated traffic pattern: `waves` waves of `per_wave` calls, `slow_pct` %
/// slow, one wave every `every_ms` (a wave with slow calls lasts 500 ms), then `idle_ms` with
/// no call (so that buckets slide out).
#[derive(Debug, Clone)]
struct Phase {
    waves: usize,
    per_wave: usize,
    slow_pct: usize,
    every_ms: u64,
    idle_ms: u64,
}

/// A busy phase (a wave every 10 or 100 ms, up to 8,000 calls a second) or a light one (a
/// wave every 0.5 or 1 s, 20 to 200 calls a second).
fn phase(busy: bool) -> impl Strategy<Value = Phase> {
    let (waves, every, per_wave) = if busy {
        (10usize..60, vec![10u64, 100], vec![100usize, 400])
    } else {
        (30usize..150, vec![500u64, 1_000], vec![20usize, 100])
    };
    (
        waves,
        prop::sample::select(per_wave),
        prop_oneof![Just(0usize), 0usize..=100, Just(100)],
        prop::sample::select(every),
        prop::sample::select(vec![0u64, 0, 0, 5_000, 20_000]),
    )
        .prop_map(|(waves, per_wave, slow_pct, every_ms, idle_ms)| Phase {
            waves,
            per_wave,
            slow_pct,
            every_ms,
            idle_ms,
        })
}

/// Two to four phases, busy and light in turn (either first), so that windows cross the
/// switch up and back down.
fn phases() -> impl Strategy<Value = Vec<Phase>> {
    (any::<bool>(), 2usize..5).prop_flat_map(|(busy_first, n)| {
        (0..n)
            .map(|i| phase(busy_first == (i % 2 == 0)).boxed())
            .collect::<Vec<_>>()
    })
}

fn window() -> impl Strategy<Value = TripWindow> {
    // Time windows mostly: only they cross back down (a count window, once full, stays full).
    prop_oneof![
        3 => Just(TripWindow::Time(Duration::from_secs(30))),
        3 => Just(TripWindow::Time(Duration::from_secs(60))),
        1 => Just(TripWindow::Count(10_000)),
        1 => Just(TripWindow::Count(20_000)),
    ]
}

/// The bound `machine/sampling.rs` documents for the estimated slow count of a window whose
/// slow calls number `slow`: it misses the exact count by more than this with a chance below
/// `chance` (Bernstein's inequality, both sides, for the sum of one term per slow call timed at
/// one in eight: 8 × a draw of 1/8 less 1, variance 7, at most 7 from its mean; a window with
/// fewer slow calls among those timed one in eight only makes the sum's spread smaller).
fn bound(slow: u64, chance: f64) -> f64 {
    let l = (2.0 / chance).ln();
    let m = 7.0;
    let variance = 7.0 * slow as f64;
    l * m / 3.0 + ((l * m / 3.0).powi(2) + 2.0 * l * variance).sqrt()
}

/// The chance each check may fail with: about 200 checks a case, 64 cases a run, so a run
/// fails by chance about once in 100,000.
const CHECK_CHANCE: f64 = 1e-9;

/// What the cases covered.
#[derive(Default)]
struct Covered {
    cases: u64,
    checks: u64,
    /// Cases whose window crossed 8,192 calls upwards, and downwards.
    up: u64,
    down: u64,
    /// Checks of a window holding fewer than 8,192 calls after it held more (samples of a
    /// busy spell beside calls timed one by one).
    after_down: u64,
    /// The largest error seen, as a share of its bound.
    worst: f64,
}

/// One case: a breaker kept closed by its gate (so that every window can be read), slow calls
/// that fail (so that the latency baseline keeps the fast calls' median), and `phases` of
/// waves, each checked against the exact window.
fn case(
    window: TripWindow,
    phases: &[Phase],
    covered: &Mutex<Covered>,
) -> Result<(), TestCaseError> {
    let settings = Settings::builder()
        .window(window)
        .consecutive_failures(None)
        .failures(None)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let mut run = Run::new(settings, true, true);
    // Arms the latency baseline at a 10 ms median.
    prop_assert_eq!(run.phase(1, 50, 0, 100 * MS), Wave::Done);
    let (mut up, mut down, mut was_large) = (false, false, false);
    let (mut checks, mut after_down, mut worst) = (0, 0, 0.0f64);
    for phase in phases {
        for _ in 0..phase.waves {
            let wave = run.phase(1, phase.per_wave, phase.slow_pct, phase.every_ms * MS);
            prop_assert_eq!(wave, Wave::Done);
            let (calls, slow) = run.exact.at(run.now());
            let large = calls >= 8_192;
            up |= large && !was_large;
            down |= was_large && !large;
            was_large = large;
            let s = run.breaker.snapshot();
            prop_assert_eq!(s.calls, calls, "the window's calls");
            prop_assert!(s.slow <= s.calls, "{} slow of {} calls", s.slow, s.calls);
            let Some(rate) = s.slow_rate else { continue };
            prop_assert!((0.0..=1.0).contains(&rate), "slow rate {}", rate);
            let error = s.slow.abs_diff(slow) as f64;
            let limit = bound(slow, CHECK_CHANCE);
            prop_assert!(
                error <= limit,
                "estimated {} slow of {} calls where {} are: off by {} (bound {:.0}) at {} ms",
                s.slow,
                calls,
                slow,
                error,
                limit,
                run.now() / MS
            );
            prop_assert_eq!(
                rate,
                s.slow as f64 / s.calls as f64,
                "the rate is the estimate's"
            );
            checks += 1;
            after_down += u64::from(down && !large);
            worst = worst.max(error / limit);
        }
        run.advance(phase.idle_ms * MS);
    }
    let mut c = covered.lock().unwrap();
    c.cases += 1;
    c.checks += checks;
    c.up += u64::from(up);
    c.down += u64::from(down);
    c.after_down += after_down;
    c.worst = c.worst.max(worst);
    Ok(())
}

/// Windows that cross the sampling switch up (traffic rising past 8,192 calls a window) and
/// down (the buckets of a busy spell sliding out of a time window while traffic goes on, so
/// that samples of eight sit beside calls timed one by one): after every wave the breaker's
/// estimated slow count is within the documented bound of its window's exact count (a chance
/// below 10⁻⁹ per check to miss it), its calls are the exact calls, the estimate never exceeds
/// them, the slow rate never exceeds 1 and is the estimate over the calls. The run shows what
/// it covered (`-- --nocapture`) and fails if it crossed the switch either way too seldom.
#[test]
fn the_estimated_slow_share_stays_within_its_bound_across_the_switch_both_ways() {
    let covered = Mutex::new(Covered::default());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/estimate.txt",
            ),
        )),
        ..ProptestConfig::default()
    });
    let result = runner.run(&(window(), phases()), |(window, phases)| {
        case(window, &phases, &covered)
    });
    let c = covered.into_inner().unwrap();
    eprintln!(
        "{} cases, {} checks; crossed up in {}, down in {} ({} checks after crossing down); the \
         largest error was {:.2} of its bound",
        c.cases, c.checks, c.up, c.down, c.after_down, c.worst
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        c.up >= 10 && c.down >= 5 && c.after_down >= 100,
        "too little crossing"
    );
}

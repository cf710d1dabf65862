//! A classifier's "open for a while" verdict (DESIGN §2 "Control": "a classifier may answer
//! 'open for d' from a result (429/503 `Retry-After`), capped by the maximum break"), on the
//! manual clock: counted as nothing, it opens the breaker for the time asked (capped), raises
//! an event, grows no break, and half-opens after; in every state.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cutout::classify::{self, ByVerdict, Verdict};
use cutout::clock::ManualClock;
use cutout::{
    Breaker, CloseReason, Error, Jitter, OpenReason, Recovery, RejectReason, Rejected, Settings,
    SettingsBuilder, State, Transition, TripWindow,
};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

/// Opens on the third consecutive failure for 10 s, doubling up to 80 s, no jitter, one probe
/// success closes; not adaptive, so every figure is exact.
fn base() -> SettingsBuilder {
    Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(10 * SEC)
        .max_break_duration(80 * SEC)
        .jitter(Jitter::None)
        .probe_successes(1)
        .adaptive(false)
}

/// What the calls below return: a success, a failure, or "busy, come back after".
#[derive(Debug, Clone, Copy)]
enum Reply {
    Ok,
    Busy(Duration),
}

type Classifier = ByVerdict<fn(&Result<Reply, ()>) -> Verdict>;

fn classifier() -> Classifier {
    classify::by_verdict(|r: &Result<Reply, ()>| match r {
        Ok(Reply::Ok) => Verdict::Success,
        Ok(Reply::Busy(after)) => Verdict::OpenFor(*after),
        Err(()) => Verdict::Failure,
    })
}

struct Sim {
    breaker: Breaker,
    clock: ManualClock,
    events: Arc<Mutex<Vec<Transition>>>,
    classifier: Classifier,
}

impl Sim {
    fn new(settings: SettingsBuilder) -> Sim {
        Sim::build(Breaker::builder("dep").settings(settings.build().unwrap()))
    }

    fn build(builder: cutout::BreakerBuilder) -> Sim {
        let clock = ManualClock::new();
        let breaker = builder.clock(clock.clone()).seed(7).build();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        breaker.subscribe(move |event| sink.lock().unwrap().push(event.transition));
        Sim {
            breaker,
            clock,
            events,
            classifier: classifier(),
        }
    }

    fn call(&self, reply: Result<Reply, ()>) -> Result<Reply, Error<()>> {
        self.breaker.call_with(&self.classifier, || reply)
    }

    fn ok(&self) -> Result<Reply, Error<()>> {
        self.call(Ok(Reply::Ok))
    }

    fn fail(&self) -> Result<Reply, Error<()>> {
        self.call(Err(()))
    }

    fn busy(&self, after: Duration) -> Result<Reply, Error<()>> {
        self.call(Ok(Reply::Busy(after)))
    }

    fn refusal(&self) -> Rejected {
        self.ok()
            .unwrap_err()
            .rejection()
            .cloned()
            .expect("refused")
    }

    fn events(&self) -> Vec<Transition> {
        self.events.lock().unwrap().clone()
    }

    /// Fails until the breaker opens (three calls from a closed breaker with none counted).
    fn trip(&self) {
        while self.breaker.state() == State::Closed {
            self.fail().unwrap_err();
        }
    }
}

fn asked(from: State, break_for: Duration) -> Transition {
    Transition::Opened {
        from,
        reason: OpenReason::RetryAfter,
        break_for,
    }
}

#[test]
fn a_call_told_to_come_back_later_opens_the_breaker_for_that_long_then_it_half_opens() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.ok().unwrap();
    sim.fail().unwrap_err();
    sim.clock.advance(5 * SEC);
    // The call itself went through: its result is the caller's.
    assert!(matches!(sim.busy(7 * SEC), Ok(Reply::Busy(_))));
    assert_eq!(b.state(), State::Open);
    assert_eq!(sim.events(), [asked(State::Closed, 7 * SEC)]);
    let refused = sim.refusal();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(refused.retry_after(), Some(7 * SEC));
    let s = b.snapshot();
    assert_eq!(s.opened_at, Some(5 * SEC));
    assert_eq!(s.current_break, Some(7 * SEC), "exactly: no jitter");
    assert_eq!(s.consecutive_opens, 0, "no growth");
    assert_eq!(
        (s.calls, s.failures, s.consecutive_failures),
        (2, 1, 1),
        "counted as nothing: the window and the run of failures as they were"
    );
    assert_eq!(
        s.last_manual_action, None,
        "an outcome, not a manual action"
    );

    sim.clock.advance(7 * SEC - NS);
    assert_eq!(sim.refusal().retry_after(), Some(NS));
    sim.clock.advance(NS);
    assert_eq!(b.state(), State::HalfOpen, "the end is inclusive");
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        sim.events()[1..],
        [
            Transition::HalfOpened,
            Transition::Closed {
                from: State::HalfOpen,
                reason: CloseReason::ProbesSucceeded,
            }
        ]
    );
    assert_eq!(OpenReason::RetryAfter.as_str(), "retry_after");
    assert_eq!(
        OpenReason::RetryAfter.to_string(),
        "the dependency asked to retry later"
    );
}

#[test]
fn the_time_asked_is_capped_by_the_maximum_break_and_any_value_is_accepted() {
    for (asked_for, served) in [
        (81 * SEC, 80 * SEC),
        (Duration::from_secs(u64::MAX), 80 * SEC),
        (Duration::MAX, 80 * SEC),
        (NS, NS),
        (80 * SEC, 80 * SEC),
    ] {
        let sim = Sim::new(base());
        sim.busy(asked_for).unwrap();
        assert_eq!(
            sim.events(),
            [asked(State::Closed, served)],
            "{asked_for:?}"
        );
        assert_eq!(sim.breaker.break_remaining(), Some(served));
    }
    // A clock near the end of its range: the break ends with it, and says so.
    let sim = Sim::new(base().max_break_duration(Duration::from_secs(u64::MAX / 1_000_000_000)));
    sim.clock.advance(Duration::from_nanos(u64::MAX - 1_000));
    sim.busy(Duration::MAX).unwrap();
    assert_eq!(sim.breaker.state(), State::Open);
    assert_eq!(
        sim.events(),
        [asked(State::Closed, Duration::from_nanos(1_000))]
    );
}

#[test]
fn no_time_at_all_is_an_ignored_outcome() {
    let sim = Sim::new(base());
    sim.fail().unwrap_err();
    sim.busy(Duration::ZERO).unwrap();
    assert_eq!(sim.breaker.state(), State::Closed);
    assert!(sim.events().is_empty());
    let s = sim.breaker.snapshot();
    assert_eq!((s.calls, s.consecutive_failures), (1, 1), "touches nothing");
    // In half-open, the probe's slot comes back.
    sim.trip();
    sim.clock.elapse_break(&sim.breaker);
    let probe = sim.breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.open_for(Duration::ZERO);
    assert!(
        sim.breaker.try_acquire().unwrap().is_probe(),
        "the slot was given back"
    );
    assert_eq!(sim.breaker.state(), State::HalfOpen);
}

#[test]
fn jitter_does_not_shorten_the_time_asked() {
    for jitter in [Jitter::Equal, Jitter::Full] {
        let sim = Sim::new(base().jitter(jitter));
        sim.busy(30 * SEC).unwrap();
        assert_eq!(sim.breaker.break_remaining(), Some(30 * SEC), "{jitter:?}");
    }
}

#[test]
fn a_probe_told_to_back_off_reopens_for_the_time_asked_without_growing_the_break() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    sim.trip(); // the first opening: 10 s
    sim.clock.elapse_break(b);
    sim.busy(30 * SEC).unwrap(); // the probe
    assert_eq!(b.break_remaining(), Some(30 * SEC));
    assert_eq!(b.snapshot().consecutive_opens, 1, "as before the probe");
    assert_eq!(
        sim.events()[1..],
        [Transition::HalfOpened, asked(State::HalfOpen, 30 * SEC)]
    );
    sim.clock.advance(30 * SEC);
    sim.fail().unwrap_err(); // a failed probe: the second opening, 20 s
    assert_eq!(b.break_remaining(), Some(20 * SEC));
    assert_eq!(b.snapshot().consecutive_opens, 2);

    // The probes' rates rule: the same.
    let rates = Sim::new(base().half_open_rule(cutout::HalfOpenRule::Rates));
    rates.trip();
    rates.clock.elapse_break(&rates.breaker);
    rates.busy(5 * SEC).unwrap();
    assert_eq!(rates.breaker.break_remaining(), Some(5 * SEC));
}

#[test]
fn a_ramp_call_told_to_back_off_reopens_for_the_time_asked() {
    let sim = Sim::new(base().recovery(Some(Recovery::over(1.0).initial_fraction(0.5))));
    let b = &sim.breaker;
    sim.trip();
    sim.clock.elapse_break(b);
    sim.ok().unwrap(); // the probe starts the ramp
    assert_eq!(b.state(), State::Recovering);
    // Until the ramp admits one.
    while sim.busy(3 * SEC).is_err() {}
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.break_remaining(), Some(3 * SEC));
    assert_eq!(
        sim.events().last(),
        Some(&asked(State::Recovering, 3 * SEC))
    );
    assert_eq!(b.snapshot().consecutive_opens, 1);
}

#[test]
fn an_isolated_or_disabled_breaker_and_an_older_call_change_nothing() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    b.disable();
    sim.busy(30 * SEC).unwrap();
    assert_eq!(b.state(), State::Disabled);

    b.reset();
    let before = b.try_acquire_owned().unwrap();
    b.isolate();
    before.open_for(30 * SEC);
    assert_eq!(b.state(), State::Isolated);
    assert!(sim.events().is_empty());

    // A call admitted before the breaker opened decides nothing after.
    b.reset();
    let slow = b.try_acquire_owned().unwrap();
    sim.trip();
    slow.open_for(60 * SEC);
    assert_eq!(b.break_remaining(), Some(10 * SEC));
    assert_eq!(sim.events().len(), 1, "only the trip");
    // Nor does a probe's, once the breaker has moved on (here: reset by hand).
    sim.clock.elapse_break(b);
    let probe = b.try_acquire_owned().unwrap();
    assert!(probe.is_probe());
    b.reset();
    probe.open_for(5 * SEC);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(sim.events().len(), 2, "the trip and the half-open");
}

#[test]
fn from_closed_it_passes_the_open_gate_and_a_refusal_leaves_it_ignored() {
    let allowed = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&allowed);
    let sim = Sim::build(
        Breaker::builder("dep")
            .settings(base().build().unwrap())
            .open_gate(move |_| gate.load(Ordering::Relaxed)),
    );
    let b = &sim.breaker;
    sim.fail().unwrap_err();
    sim.fail().unwrap_err();
    sim.busy(30 * SEC).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().suppressed_opens, 1);
    assert_eq!(
        b.snapshot().consecutive_failures,
        2,
        "ignored: the run of failures goes on"
    );
    allowed.store(true, Ordering::Relaxed);
    sim.fail().unwrap_err();
    assert_eq!(
        sim.events(),
        [Transition::Opened {
            from: State::Closed,
            reason: OpenReason::ConsecutiveFailures(3),
            break_for: 10 * SEC
        }]
    );
}

#[test]
fn a_still_breaker_records_the_verdict_of_a_call_through_its_healthiest_path() {
    // A count window full of successes, nothing timed or measured: a success changes nothing
    // and `call_with` skips `finish` for it; the verdict still reaches the breaker.
    let sim = Sim::new(base().window(TripWindow::Count(5)).minimum_calls(5));
    // Five count in this thread's cell; the sixth finds it holding the window's size and
    // takes the lock, which folds them in: from then on the breaker is still.
    for _ in 0..6 {
        sim.ok().unwrap();
    }
    sim.busy(2 * SEC).unwrap();
    assert_eq!(sim.events(), [asked(State::Closed, 2 * SEC)]);
}

#[test]
fn permits_and_async_calls_record_verdicts() {
    let sim = Sim::new(base());
    let b = &sim.breaker;
    b.try_acquire()
        .unwrap()
        .record_verdict(Verdict::OpenFor(4 * SEC));
    assert_eq!(b.break_remaining(), Some(4 * SEC));
    sim.clock.advance(4 * SEC);
    b.try_acquire_owned()
        .unwrap()
        .record_verdict(Verdict::Success);
    assert_eq!(b.state(), State::Closed);

    let classifier = classifier();
    let call = b.call_async_with(&classifier, async { Ok(Reply::Busy(6 * SEC)) });
    let mut call = pin!(call);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(
        call.as_mut().poll(&mut cx),
        Poll::Ready(Ok(Reply::Busy(_)))
    ));
    assert_eq!(b.break_remaining(), Some(6 * SEC));
}

#[test]
fn the_break_runs_from_the_end_of_a_timed_call() {
    let sim = Sim::new(base().slow_call_threshold(Some(10 * SEC)));
    let permit = sim.breaker.try_acquire().unwrap();
    sim.clock.advance(1500 * MS);
    permit.open_for(3 * SEC);
    let s = sim.breaker.snapshot();
    assert_eq!(s.opened_at, Some(1500 * MS));
    assert_eq!(s.current_break, Some(3 * SEC));
    assert_eq!(s.slow, 0, "not counted as slow either");
}

/// With `metrics`: counted as a call with outcome `open_for` (not a failure, not a success),
/// and its opening as a transition.
#[cfg(feature = "metrics")]
#[test]
fn metrics_count_it_as_an_open_for_call_and_an_opening() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let sim = Sim::new(base());
        sim.busy(7 * SEC).unwrap();
        sim.ok().unwrap_err();
    });
    let counters: Vec<(String, Vec<String>, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) if n > 0 => {
                let labels = key
                    .key()
                    .labels()
                    .filter(|l| l.key() != "breaker")
                    .map(|l| l.value().to_owned())
                    .collect();
                Some((key.key().name().to_owned(), labels, n))
            }
            _ => None,
        })
        .collect();
    let mut counters = counters;
    counters.sort();
    assert_eq!(
        counters,
        [
            (
                "cutout_calls_total".to_owned(),
                vec!["open_for".to_owned()],
                1
            ),
            (
                "cutout_rejections_total".to_owned(),
                vec!["open".to_owned()],
                1
            ),
            (
                "cutout_transitions_total".to_owned(),
                vec!["closed".to_owned(), "open".to_owned()],
                1
            ),
        ]
    );
}

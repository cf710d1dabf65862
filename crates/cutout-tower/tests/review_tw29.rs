//! Review of issue 29's cutout-tower work, as a tower maintainer would attack it: each test
//! pins a promise of the docs, the README or DESIGN.md and fails on the code under review.
//! Tests marked `#[ignore = "held: …"]` attacked a promise that held; they are kept because
//! they are cheap (`cargo test -p cutout-tower --test review_tw29 -- --ignored`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, OpenReason, Recovery, RejectReason, Settings, State, Transition};
use cutout_tower::keyed::KeyedBreakers;
use cutout_tower::{BreakerService, HttpClassifier, Readiness, TokioClock};
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{Service, ServiceExt};

// ---------------------------------------------------------------------------------------------
// Readiness and p2c
// ---------------------------------------------------------------------------------------------

/// An in-process endpoint: always ready, answers at once, fails while `failing` is set.
#[derive(Clone)]
struct Endpoint {
    failing: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
}

impl Endpoint {
    fn new(failing: bool) -> Endpoint {
        Endpoint {
            failing: Arc::new(AtomicBool::new(failing)),
            hits: Arc::default(),
        }
    }
}

impl Service<u32> for Endpoint {
    type Response = u32;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<u32, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, n: u32) -> Self::Future {
        self.hits.fetch_add(1, Ordering::Relaxed);
        if self.failing.load(Ordering::Relaxed) {
            std::future::ready(Err(std::io::Error::other("down")))
        } else {
            std::future::ready(Ok(n))
        }
    }
}

/// A seeded random source for p2c's choices (splitmix64), so that a run is repeatable.
struct Seeded(u64);

impl tower::util::rng::Rng for Seeded {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

type Guarded = BreakerService<PendingRequests<Endpoint, CompleteOnResponse>>;

/// `endpoint` behind its own breaker, the breaker outside the load measure (as the README's
/// p2c set-up says).
fn guarded(endpoint: &Endpoint, breaker: &Breaker, readiness: Readiness) -> Guarded {
    BreakerService::new(
        PendingRequests::new(endpoint.clone(), CompleteOnResponse::default()),
        breaker.clone(),
    )
    .readiness(readiness)
}

/// A breaker on tokio's clock: three failures open it for a second; one probe closes it.
fn endpoint_breaker(name: &str) -> Breaker {
    endpoint_breaker_with(name, None)
}

/// [`endpoint_breaker`], with a recovery ramp after its probe when `ramp` is given.
fn endpoint_breaker_with(name: &str, ramp: Option<Recovery>) -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(1))
        .jitter(Jitter::None)
        .probe_successes(1)
        .recovery(ramp)
        .adaptive(false)
        .build()
        .unwrap();
    Breaker::builder(name)
        .settings(settings)
        .clock(TokioClock::new())
        .build()
}

/// What the third endpoint (failing, then healed) got after it healed, per readiness mode:
/// (requests it received after its break ended, its breaker's state at the end).
async fn recovered_endpoint_after_its_break(
    readiness: Readiness,
    ramp: Option<Recovery>,
) -> (usize, State) {
    let endpoints = [
        Endpoint::new(false),
        Endpoint::new(false),
        Endpoint::new(true),
    ];
    let breakers = ["a", "b", "c"].map(|name| endpoint_breaker_with(name, ramp));
    let services: Vec<Guarded> = endpoints
        .iter()
        .zip(&breakers)
        .map(|(endpoint, breaker)| guarded(endpoint, breaker, readiness))
        .collect();
    let mut balance = Balance::from_rng(ServiceList::new(services), Seeded(29));
    // The third endpoint fails until its breaker opens (bounded: 300 requests).
    for n in 0..300 {
        if breakers[2].peek().0 == State::Open {
            break;
        }
        let _ = balance.ready().await.unwrap().call(n).await;
    }
    assert_eq!(breakers[2].peek().0, State::Open, "{readiness:?}: tripped");
    // It is healed at once. Traffic goes on during its one-second break (ten requests,
    // 10 ms apart, to the other two), then its break runs out.
    endpoints[2].failing.store(false, Ordering::Relaxed);
    for n in 0..10 {
        let _ = balance.ready().await.unwrap().call(n).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = endpoints[2].hits.load(Ordering::Relaxed);
    // 300 requests, 10 ms apart: three seconds of traffic after the break ended.
    for n in 0..300 {
        let _ = balance.ready().await.unwrap().call(n).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = endpoints[2].hits.load(Ordering::Relaxed) - before;
    (after, breakers[2].state())
}

/// README: with `FailInCall` "p2c `Balance` avoids it through its `Load`"; DESIGN §2 "Giving
/// traffic back". A refusing endpoint stays in p2c's ready set with the `Load` of its last
/// `poll_ready` (`Ready::Refused` reads "refusing" forever), p2c only re-polls the endpoint it
/// chose, and never chooses it while two others are ready: after its break it is never probed,
/// its breaker never closes, and a recovered endpoint gets no traffic again. `WaitForBreak`
/// routes around the open endpoint and gives it traffic back, unless the breaker has a
/// recovery ramp: the ramp's first refusal is answered `Ready` (see the next test) and leaves
/// the endpoint in the ready set refusing, never chosen, its ramp never advancing.
#[tokio::test(start_paused = true)]
async fn p2c_gives_a_recovered_endpoint_traffic_back_after_its_break_in_either_readiness_mode() {
    let fail_in_call = recovered_endpoint_after_its_break(Readiness::FailInCall, None).await;
    let wait_for_break = recovered_endpoint_after_its_break(Readiness::WaitForBreak, None).await;
    let ramp = Some(Recovery::over(1.0));
    let wait_ramped = recovered_endpoint_after_its_break(Readiness::WaitForBreak, ramp).await;
    println!(
        "after the break (requests, state): FailInCall {fail_in_call:?}, WaitForBreak \
         {wait_for_break:?}, WaitForBreak with a ramp {wait_ramped:?}"
    );
    let mut wrong = Vec::new();
    for (mode, (requests, state)) in [
        ("FailInCall", fail_in_call),
        ("WaitForBreak", wait_for_break),
        ("WaitForBreak with a ramp", wait_ramped),
    ] {
        if requests < 30 || state != State::Closed {
            wrong.push(format!(
                "{mode}: the healed endpoint got {requests} of 300 requests after its break and \
                 its breaker is {state:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `Readiness::WaitForBreak`: "`Pending` while refusing, woken when the refusal's retry-after
/// runs out; a throttled refusal fails in the call" (the only exception named). A recovering
/// breaker's ramp refusal (`RejectReason::Ramp`, with a short retry-after) is treated as if the
/// breaker were closed: `poll_ready` answers `Ready` and the call fails with the refusal.
#[tokio::test(start_paused = true)]
async fn wait_for_break_waits_out_a_ramp_refusal_instead_of_failing_the_call() {
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .break_duration(Duration::from_secs(10))
        .jitter(Jitter::None)
        .probe_successes(1)
        .recovery(Recovery::over(1.0))
        .adaptive(false)
        .build()
        .unwrap();
    let breaker = Breaker::builder("inventory")
        .settings(settings)
        .clock(TokioClock::new())
        .build();
    let _ = breaker.call(|| Err::<(), _>("down"));
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok(), "the probe");
    assert_eq!(breaker.state(), State::Recovering, "a ten-second ramp");

    let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
    let mut service =
        BreakerService::new(inner, breaker.clone()).readiness(Readiness::WaitForBreak);
    let mut ramp_refusals = 0;
    for n in 0..10 {
        let ready = service.ready().await.unwrap();
        if let Err(error) = ready.call(n).await
            && error.rejection().map(|r| r.reason()) == Some(RejectReason::Ramp)
        {
            ramp_refusals += 1;
        }
    }
    assert_eq!(
        ramp_refusals, 0,
        "WaitForBreak failed {ramp_refusals} of 10 calls with a ramp refusal after answering Ready"
    );
}

/// `BreakerService`'s docs: "The call's duration runs from the permit, taken when the request
/// can be sent: the wait for readiness is the caller's, not the dependency's, and is not
/// timed"; DESIGN §2 "Judging latency": a quiet period must not make a healthy dependency
/// slow. p2c keeps every ready endpoint's permit (taken at its `poll_ready`) until it chooses
/// that endpoint, and a re-poll keeps the old permit: at one request a second, a call that
/// takes no time is timed from a permit up to seconds old, counted slow, and two healthy
/// endpoints open.
/// One quiet run for the test below: 40 requests a second apart through p2c over two
/// healthy endpoints whose calls take no time; (openings, refusals, (slow, calls) per breaker).
async fn quiet_p2c_run(seed: u64) -> (usize, usize, Vec<(u64, u64)>) {
    let settings = Settings::builder()
        .consecutive_failures(None::<u32>)
        .slow_call_threshold(Some(Duration::from_millis(500)))
        .slow_call_ratio(0.5)
        .minimum_calls(5)
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap();
    let endpoints = [Endpoint::new(false), Endpoint::new(false)];
    let breakers = ["a", "b"].map(|name| {
        Breaker::builder(name)
            .settings(settings.clone())
            .clock(TokioClock::new())
            .build()
    });
    let opened = Arc::new(AtomicUsize::new(0));
    for breaker in &breakers {
        let opened = Arc::clone(&opened);
        breaker.subscribe(move |event| {
            if let Transition::Opened { .. } = event.transition {
                opened.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let services: Vec<Guarded> = endpoints
        .iter()
        .zip(&breakers)
        .map(|(endpoint, breaker)| guarded(endpoint, breaker, Readiness::FailInCall))
        .collect();
    let mut balance = Balance::from_rng(ServiceList::new(services), Seeded(seed));
    let mut refused = 0;
    for n in 0..40 {
        if let Err(error) = balance.ready().await.unwrap().call(n).await
            && error
                .downcast_ref::<cutout_tower::Error>()
                .is_some_and(cutout_tower::Error::is_rejected)
        {
            refused += 1;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let counts = breakers
        .iter()
        .map(|b| {
            let s = b.snapshot();
            (s.slow, s.calls)
        })
        .collect();
    (opened.load(Ordering::Relaxed), refused, counts)
}

/// `BreakerService`'s docs: "The call's duration runs from the permit, taken when the request
/// can be sent: the wait for readiness is the caller's, not the dependency's, and is not
/// timed"; DESIGN §2 "Judging latency": a quiet period must not make a healthy dependency
/// slow. p2c keeps every ready endpoint's permit (taken at its `poll_ready`) until it chooses
/// that endpoint, and a re-poll keeps the old permit: at one request a second, a call that
/// takes no time is timed from a permit up to seconds old, counted slow, and healthy endpoints
/// open (slow-call ratio 0.5 over 5 calls, threshold 500 ms). Five seeds of p2c's choices.
#[tokio::test(start_paused = true)]
async fn a_quiet_p2c_balancer_does_not_make_its_healthy_endpoints_slow() {
    let mut runs = Vec::new();
    for seed in 1..=5 {
        runs.push(quiet_p2c_run(seed).await);
    }
    println!("(openings, refused, (slow, calls) per endpoint) per seed: {runs:?}");
    assert!(
        runs.iter()
            .all(|(opened, refused, _)| *opened == 0 && *refused == 0),
        "calls that took no time opened healthy endpoints; (openings, refused of 40, \
         (slow, calls) per endpoint) per seed: {runs:?}"
    );
}

/// Held: a reserved probe slot does not leak when `poll_ready` is called twice, nor when the
/// service is dropped after `Ready` without a call.
#[ignore = "held: ready twice keeps one probe slot; ready then dropped gives it back"]
#[tokio::test(start_paused = true)]
async fn held_a_probe_slot_reserved_by_poll_ready_is_never_leaked() {
    let breaker = endpoint_breaker("p");
    assert!(breaker.open_for(Duration::from_secs(1)));
    tokio::time::advance(Duration::from_secs(1)).await;
    let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
    let mut service = BreakerService::new(inner, breaker.clone());
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .unwrap();
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .unwrap();
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        1,
        "ready twice: one slot"
    );
    drop(service);
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "dropped: given back"
    );
    assert!(breaker.try_acquire().unwrap().is_probe());
}

/// A breaker on tokio's clock that one failure opens for a minute (a break of its own, which a
/// health check may end).
fn minute_breaker() -> Breaker {
    let settings = Settings::builder()
        .consecutive_failures(Some(1))
        .break_duration(Duration::from_secs(60))
        .jitter(Jitter::None)
        .probe_successes(1)
        .adaptive(false)
        .build()
        .unwrap();
    let breaker = Breaker::builder("inventory")
        .settings(settings)
        .clock(TokioClock::new())
        .build();
    let _ = breaker.call(|| Err::<(), _>("down"));
    assert_eq!(breaker.state(), State::Open);
    breaker
}

/// DESIGN §2 "Giving traffic back": a proven recovery (a health check that passes) ends an open
/// breaker's break early, and the breaker's cost is what it holds back after the dependency
/// recovered. A `WaitForBreak` service waiting on a one-minute break sleeps on a timer set to
/// the break's end: once a health check ends the break (or an operator resets the breaker)
/// after a second, its caller still waits the other 59 s. (The docs name this limit: "noticed
/// only at the timer"; the spec asks for the traffic back.)
#[tokio::test(start_paused = true)]
async fn a_wait_for_break_caller_is_served_once_a_health_check_ends_the_break() {
    let mut late = Vec::new();
    for how in ["end_break_on_signal", "reset"] {
        let breaker = minute_breaker();
        let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
        let mut service =
            BreakerService::new(inner, breaker.clone()).readiness(Readiness::WaitForBreak);
        let started = tokio::time::Instant::now();
        let waiting = tokio::spawn(async move {
            let answer = service.ready().await.unwrap().call(7).await.unwrap();
            (answer, started.elapsed())
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        if how == "reset" {
            breaker.reset();
        } else {
            assert!(
                breaker.end_break_on_signal(cutout::BreakEndReason::HealthCheck, Duration::ZERO)
            );
        }
        let (answer, waited) = waiting.await.unwrap();
        assert_eq!(answer, 7);
        if waited > Duration::from_secs(2) {
            late.push(format!(
                "after {how} at 1 s, the caller was served at {waited:?}"
            ));
        }
    }
    assert!(late.is_empty(), "{late:#?}");
}

/// Held: fifty clones of a `WaitForBreak` service wait on one open breaker with one probe
/// slot; at the break's end one of them probes, the others re-ask every 100 ms, and all fifty
/// are served within 300 ms of the break's end: no lost wake-up, no spinning.
#[ignore = "held: 50 clones pending on one breaker are all served within 300 ms of its end"]
#[tokio::test(start_paused = true)]
async fn held_many_wait_for_break_clones_are_all_woken_at_the_break_s_end() {
    let breaker = minute_breaker();
    let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
    let service = BreakerService::new(inner, breaker.clone()).readiness(Readiness::WaitForBreak);
    let started = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let mut service = service.clone();
            tokio::spawn(async move {
                let answer = service.ready().await.unwrap().call(n).await.unwrap();
                (answer, started.elapsed())
            })
        })
        .collect();
    let mut latest = Duration::ZERO;
    for (n, task) in tasks.into_iter().enumerate() {
        let (answer, at) = task.await.unwrap();
        assert_eq!(answer as usize, n);
        latest = latest.max(at);
    }
    assert!(latest >= Duration::from_secs(60), "{latest:?}");
    assert!(latest <= Duration::from_millis(60_300), "{latest:?}");
    assert_eq!(breaker.state(), State::Closed);
}

/// Held: `Retry-After` edge cases read as the docs say (negative, fractional and signed
/// values are unreadable; `0` and a date in the past ask for no wait; whitespace around digits
/// is allowed; a value beyond `u64` seconds saturates), a 503 with an unreadable one is an
/// outage, and a huge one opens a breaker for its maximum break, without a panic.
#[ignore = "held: Retry-After edge cases; a huge value is capped by the maximum break"]
#[test]
fn held_retry_after_edge_cases_are_read_as_documented() {
    use std::time::SystemTime;

    let read = |value: &str| {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, value.parse().unwrap());
        HttpClassifier::retry_after_at(&headers, SystemTime::now())
    };
    assert_eq!(read("-1"), None);
    assert_eq!(read("+7"), None);
    assert_eq!(read("1.5"), None);
    assert_eq!(read("7 7"), None);
    assert_eq!(read("0"), Some(Duration::ZERO));
    assert_eq!(read(" \t7\t "), Some(Duration::from_secs(7)));
    assert_eq!(read("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
    assert_eq!(read("Sunday, 06-Nov-94 08:49:37 GMT"), Some(Duration::ZERO));
    assert_eq!(read("Sun Nov  6 08:49:37 1994"), Some(Duration::ZERO));
    let huge = "99999999999999999999999999";
    assert_eq!(read(huge), Some(Duration::from_secs(u64::MAX)));

    let classifier = HttpClassifier::new().honor_retry_after(true);
    let headers = |status: u16, value: &str| {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, value.parse().unwrap());
        (http::StatusCode::from_u16(status).unwrap(), headers)
    };
    let (status, h) = headers(503, "-1");
    assert_eq!(classifier.verdict_of(status, &h), cutout::Verdict::Failure);
    let (status, h) = headers(429, "0");
    assert_eq!(classifier.verdict_of(status, &h), cutout::Verdict::Ignored);
    let (status, h) = headers(429, huge);
    let verdict = classifier.verdict_of(status, &h);
    assert_eq!(
        verdict,
        cutout::Verdict::OpenFor(Duration::from_secs(u64::MAX))
    );
    let breaker = Breaker::builder("limited")
        .settings(settings())
        .clock(ManualClock::new())
        .build();
    breaker.try_acquire_owned().unwrap().record_verdict(verdict);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.break_remaining(), Some(Duration::from_secs(600)));
}

// ---------------------------------------------------------------------------------------------
// The keyed map: ghosts, scars, the open cap
// ---------------------------------------------------------------------------------------------

fn settings() -> Settings {
    Settings::builder()
        .consecutive_failures(Some(3))
        .break_duration(Duration::from_secs(30))
        .max_break_duration(Duration::from_secs(600))
        .max_wait_in_half_open(Some(Duration::from_secs(60)))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap()
}

/// A failing call through `breaker`; whether it ran (was not refused).
fn fail(breaker: &Breaker) -> bool {
    !breaker
        .call(|| Err::<(), _>("down"))
        .is_err_and(|e| e.is_rejected())
}

/// Opens (or tries to open) a closed `breaker` with three failures.
fn trip(breaker: &Breaker) {
    for _ in 0..3 {
        assert!(fail(breaker), "a closed breaker lets calls through");
    }
}

fn key(name: &str) -> String {
    name.to_owned()
}

/// Module docs, Eviction: never "a key serving its break". An operator opens a tripped key for
/// an hour (`open_for`, which an open breaker serves "instead of its own break"); the ghost
/// test reads the end of the key's own 30 s break from its last opening event, takes the key
/// for a ghost 90 s later, and the idle sweep evicts it: the host comes back closed and its
/// calls go through during the operator's hour.
#[test]
fn a_tripped_key_an_operator_then_opened_for_an_hour_is_not_evicted_as_a_ghost() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .idle_after(Duration::from_secs(120))
        .build();
    let a = hosts.breaker(&key("a")).unwrap();
    trip(&a);
    assert!(
        a.open_for(Duration::from_secs(3_600)),
        "the operator's hour"
    );
    clock.advance(Duration::from_secs(300));
    assert_eq!(a.state(), State::Open);
    let evicted = hosts.evict_idle();
    let now = hosts.breaker(&key("a")).unwrap();
    assert!(
        evicted == 0 && now.state() == State::Open,
        "evicted {evicted}; the key is {:?} with {:?} of the operator's hour left",
        now.state(),
        now.break_remaining()
    );
}

/// Issue 29, item 2 (keyed maps that never wedge) and the module docs' ghost rule. A key with a
/// recovery ramp whose probe succeeded is recovering; its ramp finishes only on calls (the
/// earned fraction must reach 1), so a key nobody calls again stays recovering for ever: it is
/// never a ghost, `may_evict` refuses a recovering key, and it keeps its open-cap slot. A day
/// later, with `max_open(1)`, another failing host stays closed and the key is still there.
#[test]
fn a_recovering_key_nobody_calls_again_gives_its_slot_back_and_may_be_evicted() {
    let clock = ManualClock::new();
    let ramped = settings()
        .to_builder()
        .probe_successes(1)
        .recovery(Recovery::over(0.1))
        .build()
        .unwrap();
    let hosts = KeyedBreakers::<String>::builder(ramped)
        .clock(clock.clone())
        .idle_after(Duration::from_secs(600))
        .max_open(1)
        .build();
    let a = hosts.breaker(&key("a")).unwrap();
    trip(&a);
    clock.advance(Duration::from_secs(30));
    assert!(a.call(|| Ok::<_, ()>(())).is_ok(), "its probe succeeds");
    assert_eq!(a.state(), State::Recovering);
    drop(a);

    // Nobody calls it again for a day.
    clock.advance(Duration::from_secs(86_400));
    let evicted = hosts.evict_idle();
    let b = hosts.breaker(&key("b")).unwrap();
    trip(&b);
    let stats = hosts.stats();
    assert!(
        b.state() == State::Open,
        "a day later: b is {:?} (suppressed {}), {} open slot(s) held, {evicted} evicted, a is \
         {:?}",
        b.state(),
        stats.suppressed_opens,
        stats.open_slots,
        hosts.get(&key("a")).map(|a| a.state())
    );
}

/// Module docs: "A trip beyond the cap stays closed — its calls go through, its window and
/// break growth are kept"; a ghost that half-opens without a free slot "is reset to closed, as
/// a trip beyond the cap stays closed"; issue 29: "eviction never drops a tripped key's
/// growth". The cap closes the ghost with `Breaker::reset`, which drops its growth: its next
/// opening is the first break again, not the third.
#[test]
fn a_ghost_closed_by_the_full_cap_keeps_its_break_growth() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&key(k)).unwrap());
    trip(&a);
    clock.advance(Duration::from_secs(30));
    assert!(fail(&a), "its probe fails");
    assert_eq!(a.snapshot().current_break, Some(Duration::from_secs(60)));
    // Its 60 s break and its 60 s half-open wait pass unprobed: a ghost. b takes the slot.
    clock.advance(Duration::from_secs(121));
    trip(&b);
    assert_eq!(b.state(), State::Open);
    // a is called again: no slot, so it is closed, its call goes through.
    assert!(fail(&a));
    assert_eq!(a.state(), State::Closed);
    // b's host recovers; a trips again.
    b.reset();
    trip(&a);
    assert_eq!(a.state(), State::Open);
    assert_eq!(
        a.snapshot().current_break,
        Some(Duration::from_secs(120)),
        "a's third opening in a row grows its break (consecutive opens {})",
        a.snapshot().consecutive_opens
    );
}

/// DESIGN §2: "`reset()` → Closed with an empty window and no break growth". A key created
/// again after its eviction as a ghost carries its scar's growth; `KeyedBreakers::reset`
/// clears it, but a reset through the key's `Breaker` handle (what the README's "subscribe to
/// a key's breaker (`hosts.breaker(&key)`)" hands out, and what the module docs say frees a
/// slot "as surely") does not: the next trip still serves the grown break.
#[test]
fn a_key_reset_through_its_breaker_handle_has_no_break_growth() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .idle_after(Duration::from_secs(600))
        .build();
    let a = hosts.breaker(&key("a")).unwrap();
    trip(&a);
    clock.advance(Duration::from_secs(30));
    assert!(fail(&a), "its probe fails: 60 s");
    drop(a);
    clock.advance(Duration::from_secs(86_400));
    assert_eq!(hosts.evict_idle(), 1, "a ghost, evicted with its scar");

    let a = hosts.breaker(&key("a")).unwrap();
    a.reset();
    trip(&a);
    assert_eq!(
        a.snapshot().current_break,
        Some(Duration::from_secs(30)),
        "reset means no break growth"
    );
}

/// The other carried growth: a ghost that half-opens with the cap full is closed by the cap,
/// which keeps its break growth (see `a_ghost_closed_by_the_full_cap_keeps_its_break_growth`).
/// A reset through the key's `Breaker` handle afterwards must drop that growth too: DESIGN §2,
/// "`reset()` → Closed with an empty window and no break growth".
#[test]
fn a_key_closed_by_the_full_cap_then_reset_through_its_handle_has_no_break_growth() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [a, b] = ["a", "b"].map(|k| hosts.breaker(&key(k)).unwrap());
    trip(&a);
    clock.advance(Duration::from_secs(30));
    assert!(fail(&a), "its probe fails: 60 s");
    // A ghost; b takes the slot; a, called again, is closed by the cap with its growth kept.
    clock.advance(Duration::from_secs(121));
    trip(&b);
    assert!(fail(&a));
    assert_eq!(a.state(), State::Closed);
    a.reset();
    b.reset();
    trip(&a);
    assert_eq!(
        a.snapshot().current_break,
        Some(Duration::from_secs(30)),
        "reset means no break growth"
    );
}

/// Module docs: openings a dependency asked for (`Retry-After`, a classifier's
/// `Verdict::OpenFor`) "hold none either unless `retry_after_takes_slot` says so", and with
/// `true` "such an opening passes the gate as a trip does: beyond the cap, the key stays
/// closed". Recorded through the key's `Breaker` handle (cutout's `call_with` and this crate's
/// own `HttpClassifier`), the opening passes the gate as a trip does even with `false`: with
/// the cap full, a host that asked not to be called for 20 s stays closed and is called.
#[test]
fn a_retry_after_recorded_through_a_key_s_handle_opens_it_while_the_cap_is_full() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_open(1)
        .build();
    let [down, limited] = ["down", "limited"].map(|k| hosts.breaker(&key(k)).unwrap());
    trip(&down);
    assert_eq!(hosts.stats().open_slots, 1, "the cap is full");
    let classifier = HttpClassifier::new().honor_retry_after(true);
    let answer = limited.call_with(&classifier, || {
        let response = http::Response::builder()
            .status(429)
            .header(http::header::RETRY_AFTER, "20")
            .body(())
            .unwrap();
        Ok::<_, std::io::Error>(response)
    });
    assert!(answer.is_ok());
    assert_eq!(
        (limited.state(), limited.break_remaining()),
        (State::Open, Some(Duration::from_secs(20))),
        "the host asked for 20 s (suppressed opens: {})",
        hosts.stats().suppressed_opens
    );
}

/// A listener on a rate-limited key that reacts to its opening by calling another key (a
/// fallback host) trips that key while the `Retry-After` verdict is still being recorded (the
/// listener runs on that thread, before `record_verdict` returns). That trip has a trip's
/// reason and needs a slot: with `max_open(1)`, two keys must never be open by trips. (Kept
/// from the thread-local marker the map used before the core told its gate the reason: that
/// marker, set for the whole of the recording, let such a trip through.)
#[tokio::test]
async fn a_trip_made_while_a_retry_after_is_recorded_still_needs_an_open_slot() {
    let hosts = KeyedBreakers::<String>::builder(settings())
        .max_open(1)
        .build();
    let fallback = hosts.breaker(&key("fallback")).unwrap();
    let limited = hosts.breaker(&key("limited")).unwrap();
    let on_open = fallback.clone();
    limited.subscribe(move |event| {
        if let Transition::Opened {
            reason: OpenReason::RetryAfter,
            ..
        } = event.transition
        {
            // The fallback host is down too.
            for _ in 0..3 {
                let _ = on_open.call(|| Err::<(), _>("fallback down"));
            }
        }
    });
    let upstream = tower::service_fn(|host: String| async move {
        let mut response = http::Response::new(());
        if host == "limited" {
            *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, "20".parse().unwrap());
        }
        Ok::<_, std::io::Error>(response)
    });
    let mut service = cutout_tower::keyed::KeyedService::new(
        upstream,
        hosts.clone(),
        |host: &String| host.clone(),
        HttpClassifier::new().honor_retry_after(true),
        None,
    );
    let _ = service.ready().await.unwrap().call(key("limited")).await;
    assert_eq!(limited.state(), State::Open, "the Retry-After was honoured");
    assert_eq!(fallback.state(), State::Open, "the fallback tripped");
    // A third host trips: the fallback's trip should hold the one slot.
    let other = hosts.breaker(&key("other")).unwrap();
    trip(&other);
    let stats = hosts.stats();
    assert!(
        !(fallback.state() == State::Open && other.state() == State::Open),
        "two keys open by trips with max_open(1): open slots {}, suppressed {}",
        stats.open_slots,
        stats.suppressed_opens
    );
}

/// The open cap under concurrent trips: 16 threads fail, succeed, reset (through the map and
/// through handles) and evict 48 keys of a `max_keys(32)`, `max_open(4)` map on the system
/// clock with millisecond breaks, for 2,000 operations each. Checked all along: the slots held
/// never exceed 4 and at most 4 + 16 keys read open or half-open at once (a listener may lag
/// its transition by one call per thread); at the end, once every key closes, no slot is held.
#[ignore = "held: at most max_open slots under 16 threads, none leaked after every key closes"]
#[test]
fn held_the_open_cap_is_exact_under_concurrent_trips_and_leaks_no_slot() {
    const MAX_OPEN: usize = 4;
    const THREADS: u64 = 16;
    let settings = Settings::builder()
        .consecutive_failures(Some(2))
        .break_duration(Duration::from_millis(2))
        .max_break_duration(Duration::from_millis(8))
        .max_wait_in_half_open(Some(Duration::from_millis(20)))
        .probe_successes(1)
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap();
    let hosts = KeyedBreakers::<String>::builder(settings)
        .max_keys(32)
        .idle_after(Duration::from_millis(5))
        .max_open(MAX_OPEN)
        .build();
    let worst_slots = Arc::new(AtomicUsize::new(0));
    let worst_open = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|seed| {
            let hosts = hosts.clone();
            let worst_slots = Arc::clone(&worst_slots);
            let worst_open = Arc::clone(&worst_open);
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed);
                for n in 0..2_000 {
                    let name = format!("k{}", rng.u32(0..48));
                    match rng.u32(0..100) {
                        0..60 => {
                            let breaker = hosts.breaker(&name).unwrap();
                            let _ = breaker.call(|| Err::<(), _>("down"));
                        }
                        60..88 => {
                            let breaker = hosts.breaker(&name).unwrap();
                            let _ = breaker.call(|| Ok::<_, ()>(()));
                        }
                        88..93 => {
                            hosts.reset(&name);
                        }
                        93..97 => {
                            if let Some(breaker) = hosts.get(&name) {
                                breaker.reset();
                            }
                        }
                        _ => {
                            hosts.evict_idle();
                        }
                    }
                    if n % 16 == 0 {
                        let stats = hosts.stats();
                        worst_slots.fetch_max(stats.open_slots, Ordering::Relaxed);
                        worst_open.fetch_max(stats.open_keys, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let (slots, open) = (
        worst_slots.load(Ordering::Relaxed),
        worst_open.load(Ordering::Relaxed),
    );
    println!(
        "worst: {slots} slots held, {open} keys open or half-open; {:?}",
        hosts.stats()
    );
    assert!(slots <= MAX_OPEN, "{slots} slots held at once");
    assert!(
        open <= MAX_OPEN + THREADS as usize,
        "{open} keys open at once"
    );
    // Every key closes: its break ends and a successful probe (or the cap's reset) closes it.
    std::thread::sleep(Duration::from_millis(30));
    for _ in 0..20 {
        for name in hosts.keys() {
            if let Some(breaker) = hosts.get(&name) {
                let _ = breaker.call(|| Ok::<_, ()>(()));
            }
        }
        if hosts.stats().open_keys == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = hosts.stats();
    assert_eq!((stats.open_keys, stats.open_slots), (0, 0), "{stats:?}");
}

/// Scars under churn: 100,000 hosts each trip, go stale and are evicted as ghosts through a
/// `max_keys(1,000)` map (a scar each, at most 1,000 kept); a host never seen before starts
/// from the first break, a recent one from its own scar, and the oldest scar is gone (the
/// bound). About 6 s in a debug build.
#[ignore = "held: scars stay with their own host and are bounded by max_keys"]
#[test]
fn held_scars_of_100k_churned_hosts_never_reach_another_host() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let started = std::time::Instant::now();
    // The first host's probe fails too: two opens, the scar of a 60 s break.
    let first = hosts.breaker(&key("h0")).unwrap();
    trip(&first);
    clock.advance(Duration::from_secs(30));
    assert!(fail(&first));
    drop(first);
    for n in 1..100_000 {
        let host = hosts.breaker(&format!("h{n}")).unwrap();
        trip(&host);
        // Its break and half-open wait lapse: a ghost, evicted by a later host.
        clock.advance(Duration::from_secs(91));
    }
    println!(
        "100k churned in {:?}: {:?}",
        started.elapsed(),
        hosts.stats()
    );
    assert!(hosts.stats().keys <= 1_000);
    let fresh = hosts.breaker(&key("never-seen")).unwrap();
    trip(&fresh);
    assert_eq!(
        fresh.snapshot().current_break,
        Some(Duration::from_secs(30))
    );
    let recent = hosts.breaker(&key("h99000")).unwrap();
    trip(&recent);
    assert_eq!(
        recent.snapshot().current_break,
        Some(Duration::from_secs(60)),
        "its own scar: its second opening"
    );
    let oldest = hosts.breaker(&key("h0")).unwrap();
    trip(&oldest);
    assert_eq!(
        oldest.snapshot().current_break,
        Some(Duration::from_secs(30)),
        "the oldest of 100,000 scars was dropped"
    );
}

/// Issue 29, acceptance 3 ("20,000 distinct attacker hosts through a `max_keys(1,000)` map
/// while one real host fails: the real host still trips") at a real host's own pace: it is
/// called once every 40 s and fails every time (three in a row trip it). The map keeps a key
/// from the least-recently-used eviction only for a failure within its trip window (30 s), so
/// between two of its calls the attacker's new hosts (one every 20 ms) evict it as "quiet", its
/// consecutive failures go with it, and it never trips.
#[tokio::test]
async fn attacker_churn_cannot_evict_a_slowly_called_failing_host_between_its_failures() {
    use cutout_tower::keyed::{HostKey, KeyedLayer};
    use tower::Layer;

    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<HostKey>::builder(settings())
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let upstream = tower::service_fn(|request: http::Request<()>| async move {
        let mut response = http::Response::new(());
        if request.uri().host() == Some("real.example") {
            *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        }
        Ok::<_, std::io::Error>(response)
    });
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream);
    let real = HostKey::new("http", "real.example", None);
    let mut real_calls = 0;
    let mut refused = 0;
    // 20,000 attacker hosts, 20 ms apart; the real host every 2,000 of them (every 40 s).
    for n in 0..20_000 {
        clock.advance(Duration::from_millis(20));
        let url = if n % 2_000 == 1_000 {
            real_calls += 1;
            "http://real.example/".to_owned()
        } else {
            format!("http://h{n}.attacker.example/")
        };
        let request = http::Request::get(url).body(()).unwrap();
        if let Err(error) = service.ready().await.unwrap().call(request).await
            && error.is_rejected()
        {
            refused += 1;
        }
    }
    let stats = hosts.stats();
    let state = hosts
        .get(&real)
        .map(|b| (b.state(), b.snapshot().consecutive_failures));
    assert!(
        refused > 0 && matches!(state, Some((State::Open | State::HalfOpen, _))),
        "{real_calls} failing calls of the real host, 40 s apart: refused {refused}, its key \
         (state, consecutive failures) {state:?}; {} keys evicted",
        stats.evicted
    );
}

/// `KeyedStats::over_capacity`: "The map shrinks back to `max_keys` as those keys become
/// evictable." It does not: a full map evicts one key per new key, so once the keys that
/// pushed it beyond `max_keys` may go, every new key still evicts exactly one and the map stays
/// beyond `max_keys` (until an idle sweep, `idle_after` later).
#[test]
fn a_map_beyond_max_keys_shrinks_back_once_its_keys_may_go() {
    let clock = ManualClock::new();
    let hosts = KeyedBreakers::<String>::builder(settings())
        .clock(clock.clone())
        .max_keys(2)
        .build();
    hosts.isolate(&key("a"));
    hosts.isolate(&key("b"));
    hosts.breaker(&key("c")).unwrap();
    assert_eq!(hosts.stats().over_capacity, 1);
    assert_eq!(hosts.len(), 3, "beyond max_keys while a and b may not go");
    // The operator takes a and b back: both may go now.
    hosts.reset(&key("a"));
    hosts.reset(&key("b"));
    let mut sizes = Vec::new();
    for n in 0..5 {
        clock.advance(Duration::from_secs(1));
        hosts.breaker(&format!("new{n}")).unwrap();
        sizes.push(hosts.len());
    }
    assert!(
        sizes.iter().any(|&len| len <= 2),
        "map sizes after each of 5 new keys with max_keys(2): {sizes:?}"
    );
}

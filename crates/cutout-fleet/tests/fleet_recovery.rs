//! Fleet recovery (issue #28, acceptance 4): a pod whose own probes closed its breaker
//! publishes it, and the pods open on the same dependency end their break early, one release
//! slot at a time within the fleet's probe budget.
//!
//! Real pods (a `Fleet` each, its own task and connection to a `redis-server` of the test's
//! own, the default 250 ms interval) each with its own breaker for the same dependency, and a
//! real dependency: a TCP server on loopback that answers every call (down: an error, up: a
//! success) and notes when each came and whether the pod's breaker admitted it as a probe
//! (`Permit::is_probe`). Each pod calls it through its breaker every 20 ms.

mod common;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{RedisServer, eventually};
use cutout::{BreakEndReason, Breaker, Jitter, Settings, State, Transition};
use cutout_fleet::Fleet;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The fleet's interval (the default).
const INTERVAL: Duration = Duration::from_millis(250);
/// How often each pod calls the dependency.
const CALL_EVERY: Duration = Duration::from_millis(20);

/// The dependency: up or down, and every call it answered (when, and whether a probe).
///
/// # Orderings
/// `up` and a pod's `calling` are single flags that no other memory hangs on: `Relaxed`.
/// The calls' record is behind its mutex.
#[derive(Clone)]
struct Dependency {
    up: Arc<AtomicBool>,
    calls: Arc<Mutex<Vec<(Instant, bool)>>>,
    port: u16,
}

impl Dependency {
    async fn start() -> Dependency {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let dependency = Dependency {
            up: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(Mutex::new(Vec::new())),
            port,
        };
        let serving = dependency.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let serving = serving.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        serving
                            .calls
                            .lock()
                            .unwrap()
                            .push((Instant::now(), line == "probe"));
                        let answer: &[u8] = if serving.up.load(Ordering::Relaxed) {
                            b"ok\n"
                        } else {
                            b"down\n"
                        };
                        if write.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        dependency
    }

    fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::Relaxed);
    }

    /// The most calls (probes only, or all) it answered in any sliding second from `from`.
    fn most_in_a_second(&self, from: Instant, probes_only: bool) -> usize {
        let calls = self.calls.lock().unwrap();
        let times: Vec<Instant> = calls
            .iter()
            .filter(|(at, probe)| *at >= from && (*probe || !probes_only))
            .map(|(at, _)| *at)
            .collect();
        let mut most = 0;
        let mut start = 0;
        for end in 0..times.len() {
            while times[end].duration_since(times[start]) >= Duration::from_secs(1) {
                start += 1;
            }
            most = most.max(end - start + 1);
        }
        most
    }

    /// Calls answered per whole second from `from`, probes and all.
    fn per_second(&self, from: Instant) -> Vec<(usize, usize)> {
        let calls = self.calls.lock().unwrap();
        let mut seconds = Vec::new();
        for (at, probe) in calls.iter().filter(|(at, _)| *at >= from) {
            let s = at.duration_since(from).as_secs() as usize;
            if seconds.len() <= s {
                seconds.resize(s + 1, (0, 0));
            }
            seconds[s].0 += usize::from(*probe);
            seconds[s].1 += 1;
        }
        seconds
    }
}

/// A pod: its fleet, its breaker, and its transitions as they happened.
struct Pod {
    fleet: Fleet,
    breaker: Breaker,
    events: Arc<Mutex<Vec<(Instant, Transition)>>>,
    calling: Arc<AtomicBool>,
}

impl Pod {
    /// When it last went `to` after `after` by `what` (any transition into `to`).
    fn entered(&self, to: State, after: Instant) -> Option<Instant> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .find(|(at, t)| *at >= after && t.to() == to)
            .map(|(at, _)| *at)
    }

    fn peer_ended(&self) -> Vec<Instant> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, t)| {
                matches!(
                    t,
                    Transition::BreakEnded {
                        reason: BreakEndReason::PeerRecovered,
                        ..
                    }
                )
            })
            .map(|(at, _)| *at)
            .collect()
    }
}

fn settings(break_for: Duration) -> Settings {
    Settings::builder()
        .break_duration(break_for)
        .max_break_duration(break_for)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// Starts a pod of `fleet` built from `builder` (connected), its breaker on `settings`,
/// calling `dependency` every [`CALL_EVERY`] while `calling` says so.
async fn pod(
    builder: cutout_fleet::FleetBuilder,
    settings: Settings,
    dependency: &Dependency,
) -> Pod {
    let fleet = builder.build().unwrap();
    let breaker = Breaker::new("inventory", settings);
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    breaker.subscribe(move |event| {
        seen.lock()
            .unwrap()
            .push((Instant::now(), event.transition))
    });
    fleet.watch(&breaker).unwrap();
    assert!(
        fleet.wait_connected(Duration::from_secs(5)).await,
        "{:?}",
        fleet.health()
    );
    let calling = Arc::new(AtomicBool::new(true));
    let (caller, on) = (breaker.clone(), Arc::clone(&calling));
    let stream = TcpStream::connect(("127.0.0.1", dependency.port))
        .await
        .unwrap();
    tokio::spawn(async move {
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mut ticker = tokio::time::interval(CALL_EVERY);
        loop {
            ticker.tick().await;
            if !on.load(Ordering::Relaxed) {
                continue;
            }
            let Ok(permit) = caller.try_acquire_owned() else {
                continue;
            };
            let line: &[u8] = if permit.is_probe() {
                b"probe\n"
            } else {
                b"call\n"
            };
            if write.write_all(line).await.is_err() {
                return;
            }
            match lines.next_line().await {
                Ok(Some(answer)) if answer == "ok" => permit.success(),
                Ok(Some(_)) => permit.failure(),
                _ => return,
            }
        }
    });
    Pod {
        fleet,
        breaker,
        events,
        calling,
    }
}

fn builder(redis: &RedisServer, prefix: &str, name: String) -> cutout_fleet::FleetBuilder {
    Fleet::builder(redis.url())
        .pod(name)
        .prefix(prefix)
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2))
}

/// Acceptance 4: 20 pods open on an outage; the dependency recovers; the first pod whose own
/// break ends closes on its probes; every other pod is half-open within 2 intervals + 1 s of
/// that close plus its release slot (the n-th released after the slots began: n spacings),
/// and the dependency never sees more probes in a second than the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_pods_come_back_within_two_intervals_of_the_first_close_and_the_budget() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dependency = Dependency::start().await;
    // 10 probes a second, 2 a release (the core's defaults: two successes, one at a time):
    // 5 releases' worth, slots 1 / (5 - 1) s = 250 ms apart.
    let budget = 10;
    let spacing = Duration::from_millis(250);
    let mut pods = Vec::new();
    for n in 0..20 {
        // Pod 0's own break is short: it probes first when the dependency is back. The
        // others' are a minute: they come back early through the fleet, or not at all.
        let break_for = if n == 0 {
            Duration::from_millis(1500)
        } else {
            Duration::from_secs(60)
        };
        let builder = builder(&redis, "recovery", format!("pod-{n:02}")).recovery_budget(budget);
        pods.push(pod(builder, settings(break_for), &dependency).await);
    }
    // The outage: every breaker opens on its own failures.
    assert!(
        eventually(Duration::from_secs(5), || pods
            .iter()
            .all(|p| p.breaker.state() == State::Open))
        .await,
        "{:?}",
        pods.iter().map(|p| p.breaker.state()).collect::<Vec<_>>()
    );
    let recovered = Instant::now();
    dependency.set_up(true);
    // Pod 0's break ends within 1.5 s; its two probes close it.
    assert!(
        eventually(Duration::from_secs(4), || pods[0].breaker.state()
            == State::Closed)
        .await,
        "pod 0: {:?}",
        pods[0].breaker.snapshot()
    );
    let first_close = pods[0].entered(State::Closed, recovered).unwrap();
    let bound = |slot: u32| first_close + 2 * INTERVAL + Duration::from_secs(1) + spacing * slot;
    // Every other pod: half-open (then closed by its probes) within its bound.
    let limit = (bound(19) + Duration::from_secs(1)).saturating_duration_since(Instant::now());
    assert!(
        eventually(limit, || pods[1..]
            .iter()
            .all(|p| p.entered(State::Closed, recovered).is_some()))
        .await,
        "{:?}",
        pods.iter().map(|p| p.breaker.state()).collect::<Vec<_>>()
    );
    let mut released: Vec<Instant> = pods[1..]
        .iter()
        .map(|p| {
            let ended = p.peer_ended();
            assert_eq!(ended.len(), 1, "{}: {ended:?}", p.fleet.pod());
            ended[0]
        })
        .collect();
    released.sort();
    for (slot, at) in released.iter().enumerate() {
        assert!(
            *at <= bound(slot as u32),
            "release {slot} at {:?} after the first close, bound {:?}",
            at.duration_since(first_close),
            bound(slot as u32).duration_since(first_close)
        );
    }
    // Slots a spacing apart (less the timers' wake-up lag; never closer than 200 ms).
    let gaps: Vec<Duration> = released.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|gap| *gap >= Duration::from_millis(200)),
        "{gaps:?}"
    );
    let probes = dependency.most_in_a_second(recovered, true);
    let last = *released.last().unwrap();
    println!(
        "first close {:.3} s after the recovery; releases from {:.3} to {:.3} s after it \
         (bound of the last {:.3} s); most probes in any second: {probes} (budget {budget}); \
         calls per second (probes, all) from the recovery: {:?}",
        first_close.duration_since(recovered).as_secs_f64(),
        released[0].duration_since(first_close).as_secs_f64(),
        last.duration_since(first_close).as_secs_f64(),
        bound(19).duration_since(first_close).as_secs_f64(),
        dependency.per_second(recovered)
    );
    assert!(probes <= budget as usize, "{probes} probes in one second");
}

/// A recovery published before a pod opened says nothing about what opened it: that pod
/// serves its own break.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_from_before_a_pods_opening_does_nothing() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dependency = Dependency::start().await;
    let early = pod(
        builder(&redis, "stale", "early".into()),
        settings(Duration::from_millis(500)),
        &dependency,
    )
    .await;
    let late = pod(
        builder(&redis, "stale", "late".into()),
        settings(Duration::from_secs(60)),
        &dependency,
    )
    .await;
    late.calling.store(false, Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(3), || early.breaker.state()
            == State::Open)
        .await
    );
    dependency.set_up(true);
    assert!(
        eventually(Duration::from_secs(3), || early.breaker.state()
            == State::Closed)
        .await
    );
    // Published.
    let mut admin = redis.client();
    let key = early.fleet.recovery_key("inventory");
    assert!(
        eventually(Duration::from_secs(2), || redis::cmd("EXISTS")
            .arg(&key)
            .query::<bool>(&mut admin)
            .unwrap())
        .await
    );
    early.calling.store(false, Ordering::Relaxed);
    // Then the dependency fails again, and the late pod opens, after the recovery.
    dependency.set_up(false);
    late.calling.store(true, Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(3), || late.breaker.state()
            == State::Open)
        .await
    );
    tokio::time::sleep(8 * INTERVAL).await;
    // The script gave it no release slot (the next free slot is still unset: none was ever
    // handed out), and its break was not ended.
    let value: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    let word = |i: usize| i64::from_le_bytes(value[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!(value.len(), 24);
    assert!(word(1) > 0, "the recovery's date");
    assert_eq!(
        word(2),
        0,
        "a release slot was handed out for a stale recovery"
    );
    assert_eq!(late.breaker.state(), State::Open);
    assert!(
        late.peer_ended().is_empty(),
        "{:?}",
        late.events.lock().unwrap()
    );
}

/// An operator's `reset()` is no probe's verdict: it publishes nothing, and an open peer
/// serves its own break.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_publishes_nothing() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dependency = Dependency::start().await;
    let reset = pod(
        builder(&redis, "reset", "reset".into()),
        settings(Duration::from_secs(60)),
        &dependency,
    )
    .await;
    let peer = pod(
        builder(&redis, "reset", "peer".into()),
        settings(Duration::from_secs(60)),
        &dependency,
    )
    .await;
    assert!(
        eventually(Duration::from_secs(3), || [&reset, &peer]
            .iter()
            .all(|p| p.breaker.state() == State::Open))
        .await
    );
    reset.calling.store(false, Ordering::Relaxed);
    dependency.set_up(true);
    // Let both be seen open by a few ticks, then reset one by hand.
    tokio::time::sleep(2 * INTERVAL).await;
    reset.breaker.reset();
    assert_eq!(reset.breaker.state(), State::Closed);
    tokio::time::sleep(8 * INTERVAL).await;
    let mut admin = redis.client();
    let exists: bool = redis::cmd("EXISTS")
        .arg(reset.fleet.recovery_key("inventory"))
        .query(&mut admin)
        .unwrap();
    assert!(!exists, "a reset published a recovery");
    assert_eq!(peer.breaker.state(), State::Open);
    assert!(peer.peer_ended().is_empty());
}

/// Redis is a hint: with Redis down, a pod's close by its probes reaches no peer, and an open
/// peer half-opens when its own break ends, not before. The close is published once Redis is
/// back, and a peer still open on an opening before it is then released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_pods_serve_their_own_break() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let dependency = Dependency::start().await;
    let quick = |name: &str| {
        builder(&redis, "down", name.to_owned()).max_backoff(Duration::from_millis(500))
    };
    let first = pod(
        quick("first"),
        settings(Duration::from_millis(500)),
        &dependency,
    )
    .await;
    let own_break = Duration::from_secs(4);
    let second = pod(quick("second"), settings(own_break), &dependency).await;
    let third = pod(
        quick("third"),
        settings(Duration::from_secs(60)),
        &dependency,
    )
    .await;
    let pods = [&first, &second, &third];
    assert!(
        eventually(Duration::from_secs(3), || pods
            .iter()
            .all(|p| p.breaker.state() == State::Open))
        .await
    );
    let opened = second
        .entered(State::Open, Instant::now() - Duration::from_secs(5))
        .unwrap();
    third.calling.store(false, Ordering::Relaxed);
    redis.kill();
    dependency.set_up(true);
    assert!(
        eventually(Duration::from_secs(3), || first.breaker.state()
            == State::Closed)
        .await
    );
    assert!(
        eventually(Duration::from_secs(3), || !first
            .fleet
            .health()
            .is_connected())
        .await,
        "{:?}",
        first.fleet.health()
    );
    // The second pod half-opens on its own break, closes on its probes.
    assert!(
        eventually(own_break + Duration::from_secs(2), || second
            .entered(State::Closed, opened)
            .is_some())
        .await
    );
    let half_open = second.entered(State::HalfOpen, opened).unwrap();
    assert!(
        half_open.duration_since(opened) >= own_break - Duration::from_millis(50),
        "half-open {:?} after opening",
        half_open.duration_since(opened)
    );
    assert!(second.peer_ended().is_empty());
    assert_eq!(third.breaker.state(), State::Open);
    assert!(third.peer_ended().is_empty());
    // Redis is back (empty): the first pod's close, kept while unpublished, releases the third.
    redis.restart();
    let back = Instant::now();
    third.calling.store(true, Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(4), || !third.peer_ended().is_empty()).await,
        "{:?} {:?}",
        third.breaker.snapshot(),
        third.fleet.health()
    );
    let _ = writeln!(
        std::io::stdout(),
        "the second pod half-opened {:.3} s after opening (its own break: {own_break:?}); the \
         third was released {:.3} s after Redis came back",
        half_open.duration_since(opened).as_secs_f64(),
        third.peer_ended()[0].duration_since(back).as_secs_f64()
    );
}

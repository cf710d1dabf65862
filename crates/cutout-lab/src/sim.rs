//! The discrete-event simulator: one run of a scenario with one breaker setting (or none).
//!
//! Virtual time is one [`ManualClock`] shared by every pod's breakers; the event loop advances
//! it to each event's time before handling the event. A request arrives at its pod's caller
//! pool (`caller.rs`), waits there for a slot if it must, and then makes attempts: each one
//! asks the pod's breaker (or, with a breaker per replica, the breakers of the replicas in
//! turn from a random first one) for a permit, reaches the dependency (`dependency.rs`), which
//! queues it and tells when and how it answers, and ends at the answer, the attempt timeout
//! or the request's deadline, whichever comes first. The breaker times each call itself on
//! the shared clock.
//!
//! The caller's side, when the scenario models it: an admitted attempt that finds no idle
//! connection in its pod's pool ([`crate::connections`]) reaches the dependency only after
//! the new connection's setup (an event of its own, so the dependency still sees its calls
//! in time order), and an attempt started while its pod is saturated
//! ([`crate::saturation`]) ends the episode's delay after the answer; both count in the
//! breaker's timing and against the timeout. With `[[phases]]` ([`crate::phases`]) a pod's
//! arrivals follow the phase in force, a burst at a time.
//!
//! Randomness comes from seeded streams: each pod's arrivals and routes and each breaker's
//! jitter derive from the scenario seed and the pod's index, the dependency's answers from a
//! stream of their own, so a setting never changes the requests the fleet makes, only what
//! happens to them. The what-if copy and the judgement of refused attempts draw from
//! streams of their own too, so neither moves any other figure.
//!
//! A refused attempt is asked of a second copy of the dependency (the *what-if* copy), which
//! every attempt reaches, admitted or refused: whether it would have succeeded is judged at
//! the load the refused calls would have added. It is also judged as the oracle judges
//! ([`crate::oracle`]): the answer it alone would have got from the run's own dependency,
//! with the random numbers it would have drawn.
//!
//! The oracle's run ([`Subject::oracle`]) has no breakers: each attempt draws its random
//! numbers at its start, and the attempt is sent only when the answer it would get now, with
//! those numbers, succeeds within its cut; see [`crate::oracle`] for the rule, why it is the
//! ceiling and what it leaves out.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use cutout::clock::{Clock, ManualClock};
use cutout::{Outcome, OwnedPermit, Settings, State, TripWindow};

use crate::caller::{Arrival, RetryPolicy};
use crate::connections::{Checkout, Connections};
use crate::dependency::{Answer, Dependency, Draws};
use crate::duration::nanos;
use crate::fleet::{BreakerPer, Fleet, PodTransition, mix};
use crate::latency::{Histogram, exact_quantile};
use crate::saturation::Saturation;
use crate::scenario::Scenario;
use crate::signals::Signals;

const SECOND: u64 = 1_000_000_000;

/// What happened to requests and attempts over a run. Every request ends exactly one way; so
/// does every attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests the fleet made.
    pub requests: u64,
    /// Requests that ended in a success.
    pub requests_ok: u64,
    /// Requests whose last attempt failed.
    pub requests_failed: u64,
    /// Requests whose last attempt timed out, or that ran into their deadline during an
    /// attempt or a backoff.
    pub requests_timed_out: u64,
    /// Requests whose last attempt the breaker refused.
    pub requests_refused: u64,
    /// Requests that found the pod's pool and its queue full.
    pub requests_rejected_by_pool: u64,
    /// Requests whose deadline passed while they waited for a slot of the pool.
    pub requests_expired_in_queue: u64,
    /// Requests still unfinished when the run ended (0: the loop drains them).
    pub requests_unfinished: u64,
    /// Attempts: first attempts and retries.
    pub attempts: u64,
    /// Retries (attempts after the first).
    pub retries: u64,
    /// Attempts the breaker admitted (they reached the dependency).
    pub admitted: u64,
    /// Attempts the breaker refused.
    pub refused: u64,
    /// Admitted attempts that succeeded.
    pub attempts_ok: u64,
    /// Admitted attempts that failed within the timeout.
    pub attempts_failed: u64,
    /// Admitted attempts that ran into the timeout or the request's deadline.
    pub attempts_timed_out: u64,
    /// Admitted attempts still in flight when the run ended (0: the loop drains them).
    pub in_flight_at_end: u64,
    /// Admitted attempts that reached a replica while a failing incident was in force on it.
    pub reached_failing: u64,
    /// Refused attempts that would have succeeded within the timeout (asked of the what-if
    /// copy of the dependency, at the load the refused calls add to it).
    pub refused_would_succeed: u64,
    /// Refused attempts that would have succeeded within their cut had they alone been sent:
    /// the answer of the run's own dependency as it stood, with the random numbers the
    /// attempt would have drawn, its pod's delay and the setup of the connection it would
    /// have opened ([`crate::oracle`]'s judgement; 0 for the oracle by construction).
    pub refused_would_succeed_alone: u64,
    /// Admitted attempts that were half-open probes.
    pub probes: u64,
    /// The caller-side latencies of every ended request, summed, in microseconds.
    pub latency_total_us: u64,
    /// Admitted attempts that a saturated pod started, whose duration took on the
    /// episode's delay (`[saturation]`).
    pub attempts_slowed_by_caller: u64,
    /// Connections the pods opened, each paying its setup (`[connections]`); with the
    /// model, every admitted attempt either opened one or reused one.
    pub connections_opened: u64,
    /// Attempts whose connection setup alone reached the timeout: never sent, counted as
    /// timed out.
    pub setups_timed_out: u64,
}

/// One second of the run, summed over the fleet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Attempts made (offered load).
    pub offered: u32,
    /// Attempts admitted.
    pub admitted: u32,
    /// Admitted attempts that finished this second with a success.
    pub succeeded: u32,
    /// Admitted attempts that finished this second with a failure or a timeout.
    pub failed: u32,
    /// Requests that ended this second, whichever way.
    pub ended: u32,
    /// Requests that ended this second with a success (goodput).
    pub goodput: u32,
    /// The median caller-side latency (arrival to end, queueing and retries included) of the
    /// requests that ended this second, in microseconds; 0 when none ended.
    pub latency_p50_us: u32,
    /// The 99th percentile of the same, in microseconds; 0 when none ended.
    pub latency_p99_us: u32,
    /// Calls per second the dependency could serve this second, over every replica, under
    /// the incidents in force.
    pub capacity: u32,
    /// Requests in the fleet's callers (waiting for a slot, in an attempt or a backoff) at
    /// the start of this second.
    pub in_callers: u32,
    /// The longest wait a call reaching a replica at the start of this second would have had
    /// before its service (the dependency's backlog), in milliseconds.
    pub backlog_ms: u32,
    /// Probes admitted.
    pub probes: u32,
    /// Pods whose breaker was closed at the end of the second (with a breaker per replica:
    /// pods whose breakers were all closed).
    pub closed: u32,
    /// Pods with a breaker open (or isolated).
    pub open: u32,
    /// Pods with a breaker half-open (and none open).
    pub half_open: u32,
    /// Pods with a breaker recovering over a ramp (and none open or half-open).
    pub recovering: u32,
}

/// The raw record of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The run's label: its setting's name, and its breaker layout when a scenario compares
    /// several.
    pub setting: String,
    /// The totals.
    pub counts: Counts,
    /// When each probe was admitted, in nanoseconds, in order.
    pub probe_times: Vec<u64>,
    /// Every breaker transition, in order.
    pub transitions: Vec<PodTransition>,
    /// Second by second.
    pub timeline: Vec<Second>,
    /// Caller-side latency of every request that ended (arrival to end, in microseconds).
    pub latencies: Histogram,
    /// Caller-side latency of the requests that ended in a success.
    pub ok_latencies: Histogram,
    /// How far back the outcomes a trip judges can reach: an attempt lasts up to the
    /// timeout and then stays in the trip window for its span (a count window of n calls: the
    /// time n + 4√n + 4 calls take at the rate its breaker sees, a pod's or one replica's
    /// share of it, which Poisson arrivals rarely exceed). Zero without a breaker.
    pub window_reach: Duration,
    /// Whether this is the oracle's run ([`Subject::oracle`]).
    pub oracle: bool,
}

/// What one run is: a label, the breakers' settings (`None`: no breaker at all), their
/// layout, and the retry policy.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// The run's label.
    pub label: String,
    /// The settings of every breaker, or `None` for a fleet without breakers.
    pub settings: Option<&'a Settings>,
    /// One breaker per pod, or one per replica.
    pub per: BreakerPer,
    /// How failed attempts are retried.
    pub retry: RetryPolicy,
    /// Whether the pods share fleet signals (the scenario's `[fleet-signals]`, which must be
    /// in force; ignored without a breaker).
    pub fleet_signals: bool,
    /// Whether this is the oracle ([`crate::oracle`]): no breakers (`settings` is ignored),
    /// an attempt is sent only when it would succeed; with `per` = [`BreakerPer::Host`] it
    /// goes to the first replica, in the random order a breaker per replica tries them, on
    /// which it would.
    pub oracle: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    Arrival(u32),
    /// A request starts an attempt (its first, once it has a slot, or a retry after its
    /// backoff).
    Attempt(usize),
    /// A request's current attempt has its new connection: the call is sent now.
    Send(usize),
    /// A request's current attempt ends.
    End(usize),
    /// A waiting request's deadline.
    Expire(usize),
    /// A pod's fleet-signals round starts: it publishes and reads.
    Round(u32),
    /// A pod's publish and read reach the store.
    Store(u32),
    /// The store's answer to a pod's read arrives.
    Reply(u32),
    /// A release slot (fleet recovery) of a pod's breaker comes.
    Release(u32),
    Tick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Result3 {
    Ok,
    Failed,
    TimedOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for a slot of its pod's pool.
    Waiting,
    /// Holding a slot: in an attempt or a backoff.
    Running,
}

/// A request in progress.
#[derive(Debug)]
struct Request {
    pod: u32,
    arrived: u64,
    deadline: u64,
    /// Attempts made so far.
    attempts: u32,
    stage: Stage,
    /// The attempt in flight: its permit, the breaker that gave it, and what it will end as.
    permit: Option<OwnedPermit>,
    breaker: usize,
    result: Result3,
    /// The replica the attempt in flight goes to.
    replica: u32,
    /// When the attempt in flight times out (its timeout or the request's deadline).
    cut: u64,
    /// The caller's own delay added to the attempt in flight (its pod's saturation).
    delay: u64,
    /// Whether the attempt in flight holds a connection of its pod's pool.
    connection: bool,
    /// The oracle's run: the random numbers of the attempt in flight, drawn at its start.
    draws: Option<Draws>,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Ok,
    Failed,
    TimedOut,
    Refused,
    RejectedByPool,
    ExpiredInQueue,
}

/// The event queue: earliest first, ties in the order scheduled.
#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Reverse<(u64, u64, What)>>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: u64, what: What) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, what)));
    }

    fn pop(&mut self) -> Option<(u64, What)> {
        self.heap.pop().map(|Reverse((at, _, what))| (at, what))
    }
}

struct World<'a> {
    scenario: &'a Scenario,
    clock: ManualClock,
    fleet: Fleet,
    per_host: bool,
    /// The oracle's run ([`Subject::oracle`]).
    oracle: bool,
    /// The oracle's run tries the replicas as a breaker per replica would.
    oracle_per_host: bool,
    retry: RetryPolicy,
    dependency: Dependency,
    what_if: Dependency,
    answers: fastrand::Rng,
    what_if_answers: fastrand::Rng,
    /// The numbers a refused attempt of a breaker's run is judged with, as if it alone had
    /// been sent ([`Counts::refused_would_succeed_alone`]): a stream of their own, one draw
    /// per refused attempt, so that no other figure moves.
    alone_answers: fastrand::Rng,
    queue: Queue,
    requests: Vec<Option<Request>>,
    free: Vec<usize>,
    counts: Counts,
    probe_times: Vec<u64>,
    timeline: Vec<Second>,
    latencies: Histogram,
    ok_latencies: Histogram,
    /// The second whose latencies `this_second` holds, and those latencies (microseconds).
    current_second: usize,
    this_second: Vec<u32>,
    end: u64,
    signals: Option<Signals>,
    saturation: Option<Saturation>,
    connections: Option<Connections>,
}

/// The simulated time one run reports progress over, in nanoseconds.
pub fn simulated_nanos(scenario: &Scenario) -> u64 {
    nanos(scenario.duration)
}

/// Runs `scenario` on `subject`. Deterministic: the same scenario (seed included) and subject
/// give the same run. `progress` hears the simulated time done, about every simulated second.
///
/// Each run gets a fresh thread: cutout's breakers draw which calls they time from per-thread
/// sequences, so a second run on the same thread would start from where the first left them.
pub fn run(scenario: &Scenario, subject: &Subject<'_>, progress: &(dyn Fn(u64) + Sync)) -> Run {
    std::thread::scope(|scope| {
        scope
            .spawn(|| run_here(scenario, subject, progress))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn run_here(scenario: &Scenario, subject: &Subject<'_>, progress: &(dyn Fn(u64) + Sync)) -> Run {
    let clock = ManualClock::new();
    let replicas = scenario.dependency.replicas();
    let settings = if subject.oracle {
        None
    } else {
        subject.settings
    };
    let per_host = subject.per == BreakerPer::Host && settings.is_some();
    let disabled;
    let settings_in_force = settings;
    let settings = match settings {
        Some(settings) => settings,
        None => {
            disabled = Settings::builder()
                .enabled(false)
                .build()
                .expect("a disabled breaker's settings are valid");
            &disabled
        }
    };
    let breakers = if per_host { replicas } else { 1 };
    let fleet = Fleet::new(&scenario.traffic, settings, breakers, &clock, scenario.seed);
    let end = nanos(scenario.duration);
    let signals = match (scenario.fleet_signals, settings_in_force) {
        (Some(spec), Some(settings)) if subject.fleet_signals => {
            let rule = crate::signals::rule(settings)
                .expect("the scenario checked the fleet rule of every setting");
            Some(Signals::new(
                spec,
                settings,
                rule,
                scenario.traffic.pods,
                breakers as usize,
                scenario.seed,
            ))
        }
        _ => None,
    };
    let mut world = World {
        signals,
        saturation: scenario
            .saturation
            .map(|spec| Saturation::new(spec, scenario.traffic.pods, scenario.seed)),
        connections: scenario
            .connections
            .map(|spec| Connections::new(spec, scenario.traffic.pods, scenario.seed)),
        scenario,
        clock,
        fleet,
        per_host,
        oracle: subject.oracle,
        oracle_per_host: subject.oracle && subject.per == BreakerPer::Host,
        retry: subject.retry,
        dependency: scenario.dependency.clone(),
        what_if: scenario.dependency.clone(),
        answers: fastrand::Rng::with_seed(mix(scenario.seed, u64::MAX)),
        what_if_answers: fastrand::Rng::with_seed(mix(scenario.seed, u64::MAX - 1)),
        alone_answers: fastrand::Rng::with_seed(mix(scenario.seed, u64::MAX - 4)),
        queue: Queue::default(),
        requests: Vec::new(),
        free: Vec::new(),
        counts: Counts::default(),
        probe_times: Vec::new(),
        timeline: vec![Second::default(); end.div_ceil(SECOND) as usize],
        latencies: Histogram::default(),
        ok_latencies: Histogram::default(),
        current_second: 0,
        this_second: Vec::new(),
        end,
    };
    world.start();
    while let Some((at, what)) = world.queue.pop() {
        world
            .clock
            .advance(Duration::from_nanos(at - world.clock.now()));
        if what == What::Tick {
            progress(at);
        }
        world.handle(at, what);
    }
    world.flush_latencies();
    world.counts.in_flight_at_end = world
        .requests
        .iter()
        .flatten()
        .filter(|r| r.permit.is_some())
        .count() as u64;
    world.counts.requests_unfinished = world.requests.iter().flatten().count() as u64;
    Run {
        setting: subject.label.clone(),
        counts: world.counts,
        probe_times: world.probe_times,
        transitions: world.fleet.take_transitions(),
        timeline: world.timeline,
        latencies: world.latencies,
        ok_latencies: world.ok_latencies,
        window_reach: settings_in_force.map_or(Duration::ZERO, |s| {
            let share = if per_host { f64::from(replicas) } else { 1.0 };
            let quietest = world
                .fleet
                .pods
                .iter()
                .map(|p| p.weight)
                .fold(1.0, f64::min);
            window_reach(s, &scenario.traffic, share / quietest)
        }),
        oracle: subject.oracle,
    }
}

/// See [`Run::window_reach`]; each breaker sees one `share` of its pod's requests (a breaker
/// per replica: one replica's).
fn window_reach(settings: &Settings, traffic: &crate::fleet::Traffic, share: f64) -> Duration {
    let span = match settings.window() {
        TripWindow::Time(span) => span,
        // Poisson arrivals: n calls take n / rate on average; n + 4√n + 4 bounds them but
        // about once in 30,000 windows.
        TripWindow::Count(n) => {
            let n = f64::from(n);
            let calls = n + 4.0 * n.sqrt() + 4.0;
            Duration::try_from_secs_f64(calls * share / traffic.lowest_rate())
                .unwrap_or(Duration::MAX)
        }
    };
    span.saturating_add(traffic.timeout)
}

impl World<'_> {
    fn start(&mut self) {
        for pod in 0..self.fleet.pods.len() {
            if let Some(at) = self.next_arrival(0, pod) {
                self.queue.push(at, What::Arrival(pod as u32));
            }
        }
        if let Some(signals) = &self.signals {
            for (pod, phase) in signals.phases(self.scenario.seed).into_iter().enumerate() {
                if phase < self.end {
                    self.queue.push(phase, What::Round(pod as u32));
                }
            }
        }
        self.queue.push(0, What::Tick);
    }

    fn second(&mut self, now: u64) -> &mut Second {
        let index = (now / SECOND) as usize;
        if index >= self.timeline.len() {
            self.timeline.resize(index + 1, Second::default());
        }
        &mut self.timeline[index]
    }

    fn handle(&mut self, now: u64, what: What) {
        match what {
            What::Arrival(pod) => self.arrival(now, pod),
            What::Attempt(id) => self.attempt(now, id),
            What::Send(id) => self.send(now, id),
            What::End(id) => self.end_attempt(now, id),
            What::Expire(id) => self.expire(now, id),
            What::Round(pod) => self.round(now, pod as usize),
            What::Store(pod) => self.at_store(now, pod as usize),
            What::Reply(pod) => {
                if let Some(signals) = &mut self.signals
                    && let Some(at) =
                        signals.reply(pod as usize, now, &self.fleet.pods[pod as usize].breakers)
                    && at < self.end
                {
                    self.queue.push(at.max(now), What::Release(pod));
                }
            }
            What::Release(pod) => {
                if let Some(signals) = &mut self.signals {
                    signals.release(pod as usize, now, &self.fleet.pods[pod as usize].breakers);
                }
            }
            What::Tick => self.tick(now),
        }
    }

    /// A fleet-signals round of `pod`; the next one an interval later, until the run ends.
    fn round(&mut self, now: u64, pod: usize) {
        let Some(signals) = &mut self.signals else {
            return;
        };
        signals.round(pod, now, &self.fleet.pods[pod].breakers);
        let (latency, interval) = (signals.latency(), signals.interval());
        self.queue.push(now + latency, What::Store(pod as u32));
        if now + interval < self.end {
            self.queue.push(now + interval, What::Round(pod as u32));
        }
    }

    fn at_store(&mut self, now: u64, pod: usize) {
        let Some(signals) = &mut self.signals else {
            return;
        };
        if signals.at_store(pod, now) {
            let latency = signals.latency();
            self.queue.push(now + latency, What::Reply(pod as u32));
        }
    }

    /// When `pod`'s next burst of requests arrives after `now` (`None`: not before the run
    /// ends): a Poisson process at the rate in force, restarted at each phase change (it has
    /// no memory, so this is exact). Without phases, one gap at `fleet.rate`, drawn as the lab
    /// always drew it.
    fn next_arrival(&mut self, now: u64, pod: usize) -> Option<u64> {
        let traffic = &self.scenario.traffic;
        let at = match &traffic.phases {
            None => now + self.fleet.pods[pod].next_gap(traffic.rate),
            Some(phases) => {
                let mut t = now;
                loop {
                    if t >= self.end {
                        return None;
                    }
                    let (phase, ends) = phases.at(t);
                    if phase.rate > 0.0 {
                        let bursts = phase.rate / f64::from(phase.burst);
                        let next = t.saturating_add(self.fleet.pods[pod].next_gap(bursts));
                        if next < ends {
                            break next;
                        }
                    }
                    t = ends;
                }
            }
        };
        (at < self.end).then_some(at)
    }

    /// `pod`'s requests arrive: one, or the burst of the phase in force.
    fn arrival(&mut self, now: u64, pod: u32) {
        let burst = self
            .scenario
            .traffic
            .phases
            .as_ref()
            .map_or(1, |phases| phases.at(now).0.burst);
        for _ in 0..burst {
            self.arrive_one(now, pod);
        }
        if let Some(next) = self.next_arrival(now, pod as usize) {
            self.queue.push(next, What::Arrival(pod));
        }
    }

    fn arrive_one(&mut self, now: u64, pod: u32) {
        self.counts.requests += 1;
        let traffic = &self.scenario.traffic;
        let request = Request {
            pod,
            arrived: now,
            deadline: now.saturating_add(nanos(traffic.deadline)),
            attempts: 0,
            stage: Stage::Waiting,
            permit: None,
            breaker: 0,
            result: Result3::Ok,
            replica: 0,
            cut: 0,
            delay: 0,
            connection: false,
            draws: None,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.requests[id] = Some(request);
                id
            }
            None => {
                self.requests.push(Some(request));
                self.requests.len() - 1
            }
        };
        match self.fleet.pods[pod as usize].pool.arrive(id) {
            Arrival::Start => self.run_request(now, id),
            Arrival::Queued => {
                let deadline = self.request(id).deadline;
                self.queue.push(deadline, What::Expire(id));
            }
            Arrival::Full => self.end_request(now, id, End::RejectedByPool),
        }
    }

    fn request(&mut self, id: usize) -> &mut Request {
        self.requests[id].as_mut().expect("a live request")
    }

    /// A request takes its slot: its first attempt starts now.
    fn run_request(&mut self, now: u64, id: usize) {
        self.request(id).stage = Stage::Running;
        self.attempt(now, id);
    }

    fn attempt(&mut self, now: u64, id: usize) {
        let t = Duration::from_nanos(now);
        let replicas = self.dependency.replicas();
        let (pod, first_attempt, deadline) = {
            let r = self.request(id);
            r.attempts += 1;
            (r.pod as usize, r.attempts == 1, r.deadline)
        };
        self.counts.attempts += 1;
        if !first_attempt {
            self.counts.retries += 1;
        }
        self.second(now).offered += 1;
        let timeout = self.scenario.traffic.timeout;
        let cut = now.saturating_add(nanos(timeout)).min(deadline);
        // The pod's own delay, asked at every attempt's start (in time order).
        let delay = self
            .saturation
            .as_mut()
            .map_or(0, |s| s.delay_at(pod as u32, now));
        // The oracle's attempt draws its numbers now, sent or not: they are its own.
        let draws = self.oracle.then(|| Draws::take(&mut self.answers));
        let route = &mut self.fleet.pods[pod].route;
        let first = route.u32(..replicas);
        // With a breaker per replica the call goes to a random replica whose breaker admits
        // it (the others in a random order after the first: a refused replica's share spreads
        // evenly over the rest); with one breaker, to a random replica. The oracle admits
        // where the attempt would succeed, trying the replicas in the same way when it routes
        // as a breaker per replica does.
        let mut admitted = None;
        if self.per_host || self.oracle_per_host {
            let mut order: Vec<u32> = (0..replicas).collect();
            order.swap(0, first as usize);
            for k in 0..replicas as usize {
                if k > 0 {
                    let pick = self.fleet.pods[pod].route.usize(k..replicas as usize);
                    order.swap(k, pick);
                }
                let replica = order[k];
                if let Some(draws) = draws {
                    if self.would_succeed(now, pod as u32, replica, delay, cut, draws) {
                        let breaker = &self.fleet.pods[pod].breakers[0];
                        if let Ok(permit) = breaker.try_acquire_owned() {
                            admitted = Some((permit, 0, replica));
                        }
                        break;
                    }
                    continue;
                }
                let breaker = &self.fleet.pods[pod].breakers[replica as usize];
                if let Ok(permit) = breaker.try_acquire_owned() {
                    admitted = Some((permit, replica as usize, replica));
                    break;
                }
            }
        } else if draws.is_none_or(|d| self.would_succeed(now, pod as u32, first, delay, cut, d))
            && let Ok(permit) = self.fleet.pods[pod].breakers[0].try_acquire_owned()
        {
            admitted = Some((permit, 0, first));
        }
        let Some((permit, breaker, replica)) = admitted else {
            self.counts.refused += 1;
            let condition = self.scenario.script.condition_on(t, first);
            let answer = self
                .what_if
                .call(now, first, &condition, &mut self.what_if_answers);
            if answer.ok && answer.at.saturating_add(delay) <= cut {
                self.counts.refused_would_succeed += 1;
            }
            // Judged as the oracle judges: with the numbers this attempt drew (the oracle's),
            // or numbers drawn for it (a breaker's run: it drew none).
            let alone = draws.unwrap_or_else(|| Draws::take(&mut self.alone_answers));
            if self.would_succeed(now, pod as u32, first, delay, cut, alone) {
                self.counts.refused_would_succeed_alone += 1;
            }
            if self.oracle {
                self.oracle_refused(now, id);
            } else {
                self.end_request(now, id, End::Refused);
            }
            return;
        };
        self.counts.admitted += 1;
        self.second(now).admitted += 1;
        if permit.is_probe() {
            self.counts.probes += 1;
            self.probe_times.push(now);
            self.second(now).probes += 1;
        }
        if delay > 0 {
            self.counts.attempts_slowed_by_caller += 1;
        }
        let checkout = self
            .connections
            .as_mut()
            .map(|c| c.checkout(pod as u32, replica, now));
        let r = self.request(id);
        r.permit = Some(permit);
        r.breaker = breaker;
        r.replica = replica;
        r.cut = cut;
        r.delay = delay;
        r.connection = checkout.is_some();
        r.draws = draws;
        match checkout {
            None | Some(Checkout::Reused) => self.send(now, id),
            Some(Checkout::Opened(setup)) => {
                self.counts.connections_opened += 1;
                let sends = now.saturating_add(setup);
                if sends >= cut {
                    // The setup alone reaches the timeout: the call is never sent.
                    self.counts.setups_timed_out += 1;
                    let r = self.request(id);
                    r.result = Result3::TimedOut;
                    self.queue.push(cut, What::End(id));
                } else {
                    self.queue.push(sends, What::Send(id));
                }
            }
        }
    }

    /// The attempt `id` is sent to its replica at `now` (at its start, or after its new
    /// connection's setup): the dependency answers it, and it ends at the answer plus its
    /// pod's delay, or at its cut (timeout or deadline) when that comes first.
    fn send(&mut self, now: u64, id: usize) {
        let t = Duration::from_nanos(now);
        let (replica, cut, delay, draws) = {
            let r = self.request(id);
            (r.replica, r.cut, r.delay, r.draws.take())
        };
        if self.scenario.script.is_failing_on(t, replica) {
            self.counts.reached_failing += 1;
        }
        let condition = self.scenario.script.condition_on(t, replica);
        let answer = match draws {
            Some(draws) => self.dependency.call_drawn(now, replica, &condition, draws),
            None => self
                .dependency
                .call(now, replica, &condition, &mut self.answers),
        };
        self.what_if
            .call(now, replica, &condition, &mut self.what_if_answers);
        let ends = answer.at.saturating_add(delay);
        let (at, result) = if ends <= cut {
            let result = if answer.ok {
                Result3::Ok
            } else {
                Result3::Failed
            };
            (ends, result)
        } else {
            (cut, Result3::TimedOut)
        };
        self.request(id).result = result;
        self.queue.push(at, What::End(id));
    }

    /// Whether an attempt of pod `pod` started at `now`, with the random numbers `draws`, its
    /// pod's `delay` and its `cut`, would succeed if sent to `replica` now: after the setup
    /// of the connection it would open (none if its pool holds one), the dependency as it
    /// stands answers it in time with a success. Changes nothing. The oracle's rule and the
    /// judgement of refused attempts ([`Counts::refused_would_succeed_alone`]).
    fn would_succeed(
        &self,
        now: u64,
        pod: u32,
        replica: u32,
        delay: u64,
        cut: u64,
        draws: Draws,
    ) -> bool {
        let sends = match self
            .connections
            .as_ref()
            .map(|c| c.checkout_if_taken(pod, replica, now))
        {
            None | Some(Checkout::Reused) => now,
            Some(Checkout::Opened(setup)) => now.saturating_add(setup),
        };
        if sends >= cut {
            return false;
        }
        let condition = self
            .scenario
            .script
            .condition_on(Duration::from_nanos(sends), replica);
        let answer: Answer = self
            .dependency
            .answer_if_called(sends, replica, &condition, draws);
        answer.ok && answer.at.saturating_add(delay) <= cut
    }

    /// The oracle refused request `id`'s attempt at `now`: to its caller that is the failure
    /// it spares, known at once and at no cost, so the caller retries as after a failure
    /// (its retries, backoff, deadline and policy; the pods' breakers are disabled, so
    /// breaker-aware retries are naive ones), and the request ends refused when it does not.
    fn oracle_refused(&mut self, now: u64, id: usize) {
        let (pod, attempts, deadline) = {
            let r = self.request(id);
            (r.pod as usize, r.attempts, r.deadline)
        };
        let traffic = &self.scenario.traffic;
        let retry = attempts <= traffic.retries
            && self.retry.retries(
                now,
                traffic.retry_backoff,
                deadline,
                &self.fleet.pods[pod].breakers[0],
            );
        if retry {
            let at = now + nanos(traffic.retry_backoff);
            self.queue.push(at, What::Attempt(id));
        } else {
            self.end_request(now, id, End::Refused);
        }
    }

    fn end_attempt(&mut self, now: u64, id: usize) {
        let (permit, result, breaker, pod, attempts, deadline, connection, replica) = {
            let r = self.request(id);
            (
                r.permit.take().expect("an attempt in flight"),
                r.result,
                r.breaker,
                r.pod as usize,
                r.attempts,
                r.deadline,
                std::mem::take(&mut r.connection),
                r.replica,
            )
        };
        // An answered attempt gives its connection back; a timed-out one closed it.
        if connection
            && result != Result3::TimedOut
            && let Some(pool) = &mut self.connections
        {
            pool.checkin(pod as u32, replica, now);
        }
        permit.record(match result {
            Result3::Ok => Outcome::Success,
            Result3::Failed | Result3::TimedOut => Outcome::Failure,
        });
        match result {
            Result3::Ok => {
                self.counts.attempts_ok += 1;
                self.second(now).succeeded += 1;
                self.end_request(now, id, End::Ok);
                return;
            }
            Result3::Failed => self.counts.attempts_failed += 1,
            Result3::TimedOut => self.counts.attempts_timed_out += 1,
        }
        self.second(now).failed += 1;
        let traffic = &self.scenario.traffic;
        let retry = attempts <= traffic.retries
            && self.retry.retries(
                now,
                traffic.retry_backoff,
                deadline,
                &self.fleet.pods[pod].breakers[breaker],
            );
        if retry {
            let at = now + nanos(traffic.retry_backoff);
            self.queue.push(at, What::Attempt(id));
        } else if result == Result3::Failed && now < deadline {
            self.end_request(now, id, End::Failed);
        } else {
            self.end_request(now, id, End::TimedOut);
        }
    }

    fn expire(&mut self, now: u64, id: usize) {
        let waiting = self.requests[id]
            .as_ref()
            .is_some_and(|r| r.stage == Stage::Waiting && r.deadline == now);
        if waiting {
            let pod = self.request(id).pod as usize;
            self.fleet.pods[pod].pool.leave();
            self.end_request(now, id, End::ExpiredInQueue);
        }
    }

    /// Ends request `id` at `now`: counts it, and gives its slot (if it held one) to the
    /// oldest request still waiting at its pod.
    fn end_request(&mut self, now: u64, id: usize, end: End) {
        let request = self.requests[id].take().expect("a live request");
        self.free.push(id);
        let c = &mut self.counts;
        match end {
            End::Ok => c.requests_ok += 1,
            End::Failed => c.requests_failed += 1,
            End::TimedOut => c.requests_timed_out += 1,
            End::Refused => c.requests_refused += 1,
            End::RejectedByPool => c.requests_rejected_by_pool += 1,
            End::ExpiredInQueue => c.requests_expired_in_queue += 1,
        }
        let micros = (now - request.arrived) / 1_000;
        self.counts.latency_total_us += micros;
        self.latencies.add(micros);
        if end == End::Ok {
            self.ok_latencies.add(micros);
        }
        self.note_latency(now, micros);
        let second = self.second(now);
        second.ended += 1;
        if end == End::Ok {
            second.goodput += 1;
        }
        if request.stage == Stage::Running {
            let requests = &self.requests;
            let next = self.fleet.pods[request.pod as usize]
                .pool
                .release(|waiting| {
                    requests[waiting]
                        .as_ref()
                        .is_some_and(|r| r.stage == Stage::Waiting && r.deadline > now)
                });
            if let Some(next) = next {
                self.run_request(now, next);
            }
        }
    }

    /// Keeps a request's latency for its second's quantiles (requests end in time order).
    fn note_latency(&mut self, now: u64, micros: u64) {
        let index = (now / SECOND) as usize;
        if index != self.current_second {
            self.flush_latencies();
            self.current_second = index;
        }
        self.this_second
            .push(u32::try_from(micros).unwrap_or(u32::MAX));
    }

    fn flush_latencies(&mut self) {
        if self.this_second.is_empty() {
            return;
        }
        let mut values = std::mem::take(&mut self.this_second);
        let p50 = exact_quantile(&mut values, 0.5);
        let p99 = exact_quantile(&mut values, 0.99);
        let index = self.current_second;
        if index >= self.timeline.len() {
            self.timeline.resize(index + 1, Second::default());
        }
        let second = &mut self.timeline[index];
        second.latency_p50_us = p50;
        second.latency_p99_us = p99;
        values.clear();
        self.this_second = values;
    }

    /// The end of a second (`now` > 0) records the pods' breaker states in it; every tick
    /// records the capacity of the second it starts.
    fn tick(&mut self, now: u64) {
        if now > 0 {
            let mut states = Second::default();
            for pod in &self.fleet.pods {
                let worst = pod
                    .breakers
                    .iter()
                    .map(|b| match b.state() {
                        State::Open | State::Isolated => 3,
                        State::HalfOpen => 2,
                        State::Recovering => 1,
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0);
                match worst {
                    3 => states.open += 1,
                    2 => states.half_open += 1,
                    1 => states.recovering += 1,
                    _ => states.closed += 1,
                }
            }
            let second = self.second(now - 1);
            second.closed = states.closed;
            second.open = states.open;
            second.half_open = states.half_open;
            second.recovering = states.recovering;
        }
        if now < self.end {
            let t = Duration::from_nanos(now);
            let script = &self.scenario.script;
            let capacity = self
                .dependency
                .capacity_under(&|replica| script.condition_on(t, replica));
            let backlog = (0..self.dependency.replicas())
                .map(|replica| self.dependency.backlog(now, replica))
                .max()
                .unwrap_or_default();
            let in_callers = (self.requests.len() - self.free.len()) as u32;
            let second = self.second(now);
            second.in_callers = in_callers;
            second.capacity = capacity.round() as u32;
            second.backlog_ms = u32::try_from(backlog.as_millis()).unwrap_or(u32::MAX);
            self.queue.push((now + SECOND).min(self.end), What::Tick);
        }
    }
}

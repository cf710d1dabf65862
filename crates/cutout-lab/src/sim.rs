//! The discrete-event simulator: one run of a scenario with one breaker setting.
//!
//! Virtual time is one [`ManualClock`] shared by every pod's breaker; the event loop advances
//! it to each event's time before handling the event. A call acquires its permit at its start
//! event and records it at its end event, so calls overlap in virtual time and the breaker
//! measures each call's latency itself. Randomness comes from seeded streams: each pod's
//! arrivals and each breaker's jitter derive from the scenario seed and the pod's index, the
//! dependency's answers from a stream of their own, so a setting never changes the requests
//! the fleet makes, only what happens to them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use cutout::clock::{Clock, ManualClock};
use cutout::{Outcome, OwnedPermit, Settings, State};

use crate::dependency::Response;
use crate::duration::nanos;
use crate::fleet::{Fleet, PodTransition, mix};
use crate::scenario::Scenario;

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
    /// Requests whose last attempt timed out.
    pub requests_timed_out: u64,
    /// Requests whose last attempt the breaker refused.
    pub requests_refused: u64,
    /// Attempts: first attempts and retries.
    pub attempts: u64,
    /// Attempts the breaker admitted (they reached the dependency).
    pub admitted: u64,
    /// Attempts the breaker refused.
    pub refused: u64,
    /// Admitted attempts that succeeded.
    pub attempts_ok: u64,
    /// Admitted attempts that failed within the timeout.
    pub attempts_failed: u64,
    /// Admitted attempts that ran into the timeout.
    pub attempts_timed_out: u64,
    /// Admitted attempts still in flight when the run ended (0: the loop drains them).
    pub in_flight_at_end: u64,
    /// Admitted attempts that started while a failing incident was in force.
    pub reached_failing: u64,
    /// Refused attempts that would have succeeded within the timeout (the dependency's answer
    /// drawn for them, at the load of that moment, from a separate random stream).
    pub refused_would_succeed: u64,
    /// Admitted attempts that were half-open probes.
    pub probes: u64,
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
    /// Probes admitted.
    pub probes: u32,
    /// Pods whose breaker was closed at the end of the second.
    pub closed: u32,
    /// Pods whose breaker was open (or isolated).
    pub open: u32,
    /// Pods whose breaker was half-open.
    pub half_open: u32,
    /// Pods whose breaker was recovering over a ramp.
    pub recovering: u32,
}

/// The raw record of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The setting's name.
    pub setting: String,
    /// The totals.
    pub counts: Counts,
    /// When each probe was admitted, in nanoseconds, in order.
    pub probe_times: Vec<u64>,
    /// Every breaker transition, in order.
    pub transitions: Vec<PodTransition>,
    /// Second by second.
    pub timeline: Vec<Second>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    Arrival(u32),
    Attempt { pod: u32, attempt: u32 },
    Finish(usize),
    Tick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Result3 {
    Ok,
    Failed,
    TimedOut,
}

#[derive(Debug)]
struct Call {
    permit: OwnedPermit,
    pod: u32,
    attempt: u32,
    result: Result3,
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
    dependency: crate::dependency::Dependency,
    answers: fastrand::Rng,
    what_if: fastrand::Rng,
    queue: Queue,
    calls: Vec<Option<Call>>,
    free: Vec<usize>,
    counts: Counts,
    probe_times: Vec<u64>,
    timeline: Vec<Second>,
    end: u64,
}

/// Runs `scenario` with every pod's breaker on `settings`. Deterministic: the same scenario
/// (seed included) and settings give the same run.
///
/// Each run gets a fresh thread: cutout's adaptive breakers pick which calls in flight they
/// track with a per-thread turn counter shared by every breaker on the thread, so a second
/// run on the same thread would start from where the first left it and track other calls.
pub fn run(
    scenario: &Scenario,
    setting: &str,
    settings: &Settings,
    progress: &(dyn Fn(u64) + Sync),
) -> Run {
    std::thread::scope(|scope| {
        scope
            .spawn(|| run_here(scenario, setting, settings, progress))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The simulated time one run reports progress over, in nanoseconds.
pub fn simulated_nanos(scenario: &Scenario) -> u64 {
    nanos(scenario.duration)
}

fn run_here(
    scenario: &Scenario,
    setting: &str,
    settings: &Settings,
    progress: &(dyn Fn(u64) + Sync),
) -> Run {
    let clock = ManualClock::new();
    let fleet = Fleet::new(&scenario.traffic, settings, &clock, scenario.seed);
    let end = nanos(scenario.duration);
    let mut world = World {
        scenario,
        clock,
        fleet,
        dependency: scenario.dependency.clone(),
        answers: fastrand::Rng::with_seed(mix(scenario.seed, u64::MAX)),
        what_if: fastrand::Rng::with_seed(mix(scenario.seed, u64::MAX - 1)),
        queue: Queue::default(),
        calls: Vec::new(),
        free: Vec::new(),
        counts: Counts::default(),
        probe_times: Vec::new(),
        timeline: vec![Second::default(); end.div_ceil(SECOND) as usize],
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
    world.counts.in_flight_at_end = world.calls.iter().filter(|c| c.is_some()).count() as u64;
    Run {
        setting: setting.to_owned(),
        counts: world.counts,
        probe_times: world.probe_times,
        transitions: world.fleet.take_transitions(),
        timeline: world.timeline,
    }
}

impl World<'_> {
    fn start(&mut self) {
        let rate = self.scenario.traffic.rate;
        for pod in 0..self.fleet.pods.len() {
            let gap = self.fleet.pods[pod].next_gap(rate);
            if gap < self.end {
                self.queue.push(gap, What::Arrival(pod as u32));
            }
        }
        self.queue.push(SECOND.min(self.end), What::Tick);
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
            What::Arrival(pod) => {
                self.counts.requests += 1;
                self.attempt(now, pod, 0);
                let next = now + self.fleet.pods[pod as usize].next_gap(self.scenario.traffic.rate);
                if next < self.end {
                    self.queue.push(next, What::Arrival(pod));
                }
            }
            What::Attempt { pod, attempt } => self.attempt(now, pod, attempt),
            What::Finish(slot) => self.finish(now, slot),
            What::Tick => self.tick(now),
        }
    }

    fn attempt(&mut self, now: u64, pod: u32, attempt: u32) {
        let t = Duration::from_nanos(now);
        let condition = self.scenario.script.condition(t);
        let timeout = self.scenario.traffic.timeout;
        self.counts.attempts += 1;
        self.second(now).offered += 1;
        let permit = match self.fleet.pods[pod as usize].breaker.try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                self.counts.refused += 1;
                self.counts.requests_refused += 1;
                let answer = self.dependency.respond(now, &condition, &mut self.what_if);
                if answer.succeeds_within(timeout) {
                    self.counts.refused_would_succeed += 1;
                }
                return;
            }
        };
        self.counts.admitted += 1;
        self.second(now).admitted += 1;
        if permit.is_probe() {
            self.counts.probes += 1;
            self.probe_times.push(now);
            self.second(now).probes += 1;
        }
        if self.scenario.script.is_failing(t) {
            self.counts.reached_failing += 1;
        }
        self.dependency.arrive(now);
        let (delay, result) = match self.dependency.respond(now, &condition, &mut self.answers) {
            Response::Success(latency) if latency <= timeout => (latency, Result3::Ok),
            Response::Failure(latency) if latency <= timeout => (latency, Result3::Failed),
            _ => (timeout, Result3::TimedOut),
        };
        let call = Call {
            permit,
            pod,
            attempt,
            result,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.calls[slot] = Some(call);
                slot
            }
            None => {
                self.calls.push(Some(call));
                self.calls.len() - 1
            }
        };
        self.queue.push(now + nanos(delay), What::Finish(slot));
    }

    fn finish(&mut self, now: u64, slot: usize) {
        let Some(call) = self.calls[slot].take() else {
            return;
        };
        self.free.push(slot);
        let outcome = match call.result {
            Result3::Ok => Outcome::Success,
            Result3::Failed | Result3::TimedOut => Outcome::Failure,
        };
        call.permit.record(outcome);
        match call.result {
            Result3::Ok => {
                self.counts.attempts_ok += 1;
                self.counts.requests_ok += 1;
                self.second(now).succeeded += 1;
                return;
            }
            Result3::Failed => self.counts.attempts_failed += 1,
            Result3::TimedOut => self.counts.attempts_timed_out += 1,
        }
        self.second(now).failed += 1;
        let traffic = &self.scenario.traffic;
        if call.attempt < traffic.retries {
            let at = now + nanos(traffic.retry_backoff);
            self.queue.push(
                at,
                What::Attempt {
                    pod: call.pod,
                    attempt: call.attempt + 1,
                },
            );
        } else if call.result == Result3::Failed {
            self.counts.requests_failed += 1;
        } else {
            self.counts.requests_timed_out += 1;
        }
    }

    fn tick(&mut self, now: u64) {
        let mut states = Second::default();
        for pod in &self.fleet.pods {
            match pod.breaker.state() {
                State::Open | State::Isolated => states.open += 1,
                State::HalfOpen => states.half_open += 1,
                State::Recovering => states.recovering += 1,
                _ => states.closed += 1,
            }
        }
        let second = self.second(now.saturating_sub(1));
        second.closed = states.closed;
        second.open = states.open;
        second.half_open = states.half_open;
        second.recovering = states.recovering;
        if now < self.end {
            self.queue.push((now + SECOND).min(self.end), What::Tick);
        }
    }
}

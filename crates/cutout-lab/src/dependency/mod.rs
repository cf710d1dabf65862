//! The simulated dependency: replicas that queue the calls they cannot serve at once, a latency
//! distribution, a base error rate and a capacity, under the condition the incident script
//! puts each replica in.
//!
//! # The load model: a FCFS multi-server queue per replica
//! The dependency is `replicas` hosts; the caller (the simulator) picks the replica of each
//! call. `capacity` is the healthy throughput of all of them together, so each serves
//! `capacity / replicas` calls per second. A replica is a first-come-first-served queue in
//! front of `c` workers (an M/G/c queue when arrivals are Poisson), with
//!
//! > `c = max(1, round(capacity / replicas × mean healthy service time))`,
//!
//! (a scenario's `[dependency]` is refused where the rounded quantity is below 0.5, so the
//! floor of one never applies to it: one worker would more than double that capacity; and
//! the workers of all replicas together are at most a million),
//!
//! the service time being log-normal with the spec's median and 99th percentile (mean =
//! median × exp(σ²/2)). The service time of a call is drawn when it arrives, so its answer
//! time is known at once: the call goes to the worker that frees first (among the workers
//! available now), starts when that worker frees (or at once if it is idle) and holds it for
//! its service time. The replica's whole state is the time each worker frees: the *workload
//! vector* of a FCFS multi-server queue (Kiefer and Wolfowitz, 1955), kept in a tournament
//! tree so that a call costs O(log c). For FCFS with service times known at arrival this is
//! the queue's exact evolution, not an approximation (while the replica's condition holds;
//! see below for changes).
//!
//! Why this model:
//! - its state is O(c) however long the backlog: a queued call is not stored, only the work
//!   it added to its worker, so a backlog of minutes costs nothing;
//! - it is deterministic: the same calls and the same random stream give the same answers;
//! - latency grows with utilisation by the queue's own arithmetic (no tuned curve): the wait
//!   is nil at low load, appears as utilisation nears 1 and grows without bound at 1;
//! - past capacity (arrivals λ above the service rate μ) the backlog grows by (λ − μ)/μ
//!   seconds of wait per second, without bound, and it drains, at (μ − λ)/μ seconds per
//!   second, only once load falls below capacity: recovery needs the load to drop, which is
//!   where a breaker can pay off.
//!
//! **No cancellation** (unless `drop-after-wait`, below). A caller that gives up (its timeout)
//! does not take its call out of the queue: the replica still spends the work, as most RPC
//! servers do, since they do not see a client's cancellation. This is what makes goodput collapse past capacity: once the queue
//! wait exceeds the callers' timeout, every worker is busy serving calls nobody waits for any
//! more, and the calls answered in time fall to nearly none although the replica runs at 100%.
//!
//! **Shedding.** With `max-queue-wait`, a call whose wait would exceed it is rejected at
//! once: it fails after `outage-latency` and gives the workers no work (the server sheds).
//! `max-queue-wait = "0s"` rejects every call that finds all workers busy (a loss system).
//! With `drop-after-wait` (a deadline check, as a server that propagates its callers'
//! deadlines does), a call whose wait exceeds it is dropped unserved when a worker reaches
//! it: it fails then (its caller has usually left), and gives the workers no work, so a
//! backlog can never make the workers serve calls nobody waits for.
//!
//! **Conditions** (see [`Condition`]), read at the call's arrival:
//! - `hung`: the call never answers and gives no work (a black hole);
//! - `down`: the call fails after `outage-latency` and gives no work (connection refused);
//! - `latency_factor` multiplies the service time, so a 30× brownout also cuts the replica's
//!   throughput 30× (its workers are busy 30× longer per call). It is the replica's speed:
//!   when it changes, the work already queued on each worker is rescaled to the new speed
//!   (× new factor / old factor), so the backlog a brownout built shrinks 30× when it ends,
//!   as the replica's queued calls are then served at healthy speed;
//! - `capacity_factor` in (0, 1] leaves only the first ⌈c × factor⌉ workers taking new calls;
//!   the others finish the calls they already hold;
//! - the base error rate and `extra_error_rate` (independent causes): a served call fails,
//!   after its wait and service, with probability 1 − (1 − base) × (1 − extra).
//!
//! Every call draws the same three random numbers (two for its service time, one for its
//! error), whatever the condition, so a condition never shifts the draws of later calls.
//! They can be drawn beforehand ([`Draws`], then [`Dependency::call_drawn`]), and the answer
//! a call would get asked without making it ([`Dependency::answer_if_called`]: the same
//! arithmetic on the workload vector, which it leaves as it is). The lab's oracle judges an
//! attempt that way before it sends it (`crate::oracle`).
//!
//! What the model leaves out:
//! - a call's answer is fixed at arrival, so a condition change does not reach the calls
//!   already queued: a change of speed rescales the workers' queued *work*, which later calls
//!   wait behind, but not the answer times already given (a call queued in a brownout keeps
//!   its late answer, which its caller has mostly stopped waiting for anyway); an outage or a
//!   hang does not drop the calls already queued, which are still answered and whose work
//!   the workers go on doing; a capacity limit does not move the calls already given to a
//!   worker it takes away. A change takes effect at the first call after it;
//! - service does not slow with load (no contention, swapping or GC under pressure): a
//!   replica serves c / mean service time calls per second however deep its queue;
//! - the queue is unbounded unless `max-queue-wait` bounds it (no accept-queue overflow, no
//!   memory limit), and it is FCFS (no LIFO, no priorities, no deadline propagation);
//! - the network: an answer reaches the caller the instant it is served (`outage-latency` is
//!   the only network time); routing between replicas is the caller's;
//! - errors do not depend on load, and a failed call costs its full service time;
//! - `c` is a whole number: the model's throughput is c / mean service time per replica,
//!   which differs from `capacity / replicas` by the rounding (see [`Dependency::workers`]):
//!   from 2/3 of it (c = 1 for 1.49) to twice it (c = 1 for 0.5), and less the larger c is;
//!   a spec below half a worker a replica is refused, with the least capacity that works.
//!
//! The model was fixed before any scenario was run and is not tuned to any outcome.

mod host;
pub mod service;

use std::time::Duration;

use serde::Deserialize;

use crate::duration::{nanos, parse};
use crate::incident::Condition;
use host::Host;
pub use service::ServiceTime;

/// The most workers the model holds over all replicas (each costs 16 bytes per copy).
pub const MAX_WORKERS: f64 = 1_000_000.0;
/// The fewest workers a replica's share of the capacity may come to before rounding
/// (capacity / replicas × mean service time): below it, rounding to one worker would more
/// than double the replica's capacity, and a spec is refused.
const MIN_WORKERS: f64 = 0.5;

/// The dependency as written in a scenario file (`[dependency]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DependencySpec {
    /// The median latency of a healthy call with no wait (`"20ms"`): its service time.
    pub latency_median: Option<String>,
    /// The 99th percentile of the same (`"80ms"`); service time is log-normal.
    pub latency_p99: Option<String>,
    /// Instead of the two above: the service time's empirical distribution, as pairs of a
    /// probability and a duration (`[[0.0, "0.4ms"], [0.5, "1ms"], …, [1.0, "40ms"]]`, what
    /// `cutout-lab fit` writes; [`service`]).
    pub latency_quantiles: Option<Vec<(f64, String)>>,
    /// The share of healthy calls that fail, in [0, 1].
    pub error_rate: f64,
    /// Calls per second all replicas together serve when healthy. Capacity × mean service
    /// time (the calls in service at once) is at most 1,000,000, the workers the model holds,
    /// and capacity / replicas × mean service time at least 0.5: a replica's workers are a
    /// whole number, and one worker for less than half would more than double its capacity.
    pub capacity: f64,
    /// How long a call takes to fail while the dependency is down, or when it sheds the call
    /// (default `"1ms"`).
    pub outage_latency: Option<String>,
    /// The number of replicas (hosts), at least 1 (default 1); each serves
    /// `capacity / replicas`, at least half a worker's worth (see `capacity`).
    pub replicas: Option<u32>,
    /// The longest a replica lets a call wait for a worker: a call that would wait longer is
    /// rejected at once (default: none, the queue is unbounded).
    pub max_queue_wait: Option<String>,
    /// The replica's deadline check: a queued call that waited longer than this for a worker
    /// is dropped unserved when a worker reaches it (its caller has left), and fails then,
    /// giving no work (default: none, every queued call is served).
    pub drop_after_wait: Option<String>,
}

impl DependencySpec {
    /// Checks the spec and builds the model.
    pub fn build(&self) -> Result<Dependency, String> {
        let service = match (
            &self.latency_median,
            &self.latency_p99,
            &self.latency_quantiles,
        ) {
            (Some(median), Some(p99), None) => {
                let median = parse("latency-median", median)?;
                let p99 = parse("latency-p99", p99)?;
                if median.is_zero() || p99 < median {
                    return Err(
                        "latency-p99 must be at least latency-median, which must be above 0".into(),
                    );
                }
                ServiceTime::log_normal(median, p99)
            }
            (None, None, Some(points)) => ServiceTime::quantiles(points)?,
            _ => {
                return Err(
                    "needs latency-median and latency-p99 (a log-normal), or latency-quantiles \
                     (a recorded distribution) alone"
                        .into(),
                );
            }
        };
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "error-rate = {}: needs a ratio in [0, 1]",
                self.error_rate
            ));
        }
        if !(self.capacity.is_finite() && self.capacity > 0.0) {
            return Err(format!(
                "capacity = {}: needs calls per second above 0",
                self.capacity
            ));
        }
        let outage_latency = match &self.outage_latency {
            Some(text) => parse("outage-latency", text)?,
            None => Duration::from_millis(1),
        };
        let replicas = self.replicas.unwrap_or(1);
        if replicas == 0 {
            return Err("replicas = 0: needs at least 1 replica".into());
        }
        let max_queue_wait = match &self.max_queue_wait {
            Some(text) => Some(parse("max-queue-wait", text)?),
            None => None,
        };
        let drop_after_wait = match &self.drop_after_wait {
            Some(text) => Some(parse("drop-after-wait", text)?),
            None => None,
        };
        let mean_s = service.mean_secs();
        let mean_shown =
            humantime::format_duration(Duration::from_micros((mean_s * 1e6).round() as u64));
        // Calls in service at once over all replicas at full load (Little's law).
        let in_service = self.capacity * mean_s;
        if in_service > MAX_WORKERS {
            return Err(format!(
                "capacity = {}: {in_service:.0} calls in service at once over all replicas \
                 (capacity × mean service time, {mean_shown}); the model holds at most \
                 {MAX_WORKERS} workers",
                self.capacity
            ));
        }
        let exact = in_service / f64::from(replicas);
        if exact < MIN_WORKERS {
            // The least capacity (rounded up: 3 significant digits, or a whole number) giving each
            // replica half a worker; and the most replicas this capacity allows.
            let least = MIN_WORKERS * f64::from(replicas) / mean_s;
            let digits = (2 - least.log10().floor() as i32).max(0);
            let scale = 10f64.powi(digits);
            let least = (least * scale).ceil() / scale;
            let most_replicas = (in_service / MIN_WORKERS).floor();
            let or_fewer = if most_replicas >= 1.0 {
                format!(", or replicas = {most_replicas} or fewer")
            } else {
                String::new()
            };
            return Err(format!(
                "capacity = {} over replicas = {replicas}: {} workers a replica (capacity / \
                 replicas × mean service time, {mean_shown}), which the model cannot hold: a \
                 replica has a whole number of workers, and one worker each would serve {} \
                 calls/s, {}× the capacity; needs capacity = {least:.digits$} or more{or_fewer}",
                self.capacity,
                significant(exact),
                significant(f64::from(replicas) / mean_s),
                significant(1.0 / exact),
                digits = digits as usize,
            ));
        }
        let per_replica = workers_per_replica(self.capacity, replicas, &service);
        let workers = per_replica * f64::from(replicas);
        if workers > MAX_WORKERS {
            return Err(format!(
                "capacity = {} over replicas = {replicas}: {workers} workers in all \
                 (replicas × {per_replica}, capacity / replicas × mean service time rounded); \
                 the model holds at most {MAX_WORKERS}",
                self.capacity
            ));
        }
        Ok(
            Dependency::with_service(service, self.error_rate, self.capacity, outage_latency)
                .with_replicas(replicas)
                .with_max_queue_wait(max_queue_wait)
                .with_drop_after_wait(drop_after_wait),
        )
    }
}

/// When and how a call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// When the answer reaches the caller, in nanoseconds of virtual time; `u64::MAX`: never
    /// (the replica is hung).
    pub at: u64,
    /// Whether it is a success.
    pub ok: bool,
}

impl Answer {
    /// The answer that never comes.
    pub const NEVER: Answer = Answer {
        at: u64::MAX,
        ok: false,
    };

    /// Whether a caller that sent the call at `sent` and waits at most `timeout` sees a
    /// success.
    pub fn succeeds_within(&self, sent: u64, timeout: Duration) -> bool {
        self.ok && self.at <= sent.saturating_add(nanos(timeout))
    }
}

/// The random numbers one call draws, whatever its condition: a standard normal for its
/// service time (two numbers of the stream, Box–Muller) and one uniform for its error, in
/// that order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Draws {
    /// The service time's standard normal.
    z: f64,
    /// The error's uniform draw in [0, 1): the call fails when it is at or past its
    /// condition's success probability.
    error: f64,
}

impl Draws {
    /// Draws a call's numbers from `rng`, as [`Dependency::call`] does.
    pub fn take(rng: &mut fastrand::Rng) -> Draws {
        let z = standard_normal(rng);
        let error = rng.f64();
        Draws { z, error }
    }
}

/// The dependency model: see the module docs for how load acts on it.
#[derive(Debug, Clone)]
pub struct Dependency {
    service: ServiceTime,
    error_rate: f64,
    capacity: f64,
    outage_latency: Duration,
    max_queue_wait: Option<Duration>,
    drop_after_wait: Option<Duration>,
    /// One per replica.
    hosts: Vec<Host>,
}

/// `x` to 3 significant digits (or more, for a whole number).
fn significant(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// `c` of each replica, before the bounds check: max(1, round(per-replica capacity × mean
/// service time)). A spec is refused below [`MIN_WORKERS`] before the floor of one applies.
fn workers_per_replica(capacity: f64, replicas: u32, service: &ServiceTime) -> f64 {
    let mean = service.mean_secs();
    (capacity / f64::from(replicas) * mean).round().max(1.0)
}

impl Dependency {
    /// A dependency of one replica and an unbounded queue, whose healthy service time is
    /// log-normal with this median and 99th percentile, serving `capacity` calls per second.
    ///
    /// # Panics
    /// If the model would hold more than a million workers (capacity × mean latency).
    pub fn new(
        median: Duration,
        p99: Duration,
        error_rate: f64,
        capacity: f64,
        outage_latency: Duration,
    ) -> Dependency {
        Dependency::with_service(
            ServiceTime::log_normal(median, p99),
            error_rate,
            capacity,
            outage_latency,
        )
    }

    /// A dependency of one replica and an unbounded queue whose healthy service time is
    /// `service`, serving `capacity` calls per second.
    pub fn with_service(
        service: ServiceTime,
        error_rate: f64,
        capacity: f64,
        outage_latency: Duration,
    ) -> Dependency {
        Dependency {
            service,
            error_rate,
            capacity,
            outage_latency,
            max_queue_wait: None,
            drop_after_wait: None,
            hosts: Vec::new(),
        }
        .with_replicas(1)
    }

    /// The same dependency split over `replicas` replicas (idle), each serving
    /// `capacity / replicas`.
    ///
    /// # Panics
    /// If `replicas` is 0, or the model would hold more than a million workers.
    pub fn with_replicas(mut self, replicas: u32) -> Dependency {
        assert!(replicas >= 1, "a dependency has at least one replica");
        let c = workers_per_replica(self.capacity, replicas, &self.service);
        assert!(
            c * f64::from(replicas) <= MAX_WORKERS,
            "{c} workers per replica: too many"
        );
        self.hosts = vec![Host::new(c as usize); replicas as usize];
        self
    }

    /// With the replicas' deadline check (`drop-after-wait`): a call that would wait longer
    /// than `drop_after_wait` for a worker is dropped unserved when a worker reaches it.
    pub fn with_drop_after_wait(mut self, drop_after_wait: Option<Duration>) -> Dependency {
        self.drop_after_wait = drop_after_wait;
        self
    }

    /// The replicas' deadline check, if any.
    pub fn drop_after_wait(&self) -> Option<Duration> {
        self.drop_after_wait
    }

    /// The same dependency with this bound on a call's wait for a worker (`None`: unbounded).
    pub fn with_max_queue_wait(mut self, max_queue_wait: Option<Duration>) -> Dependency {
        self.max_queue_wait = max_queue_wait;
        self
    }

    /// The number of replicas.
    pub fn replicas(&self) -> u32 {
        self.hosts.len() as u32
    }

    /// The capacity when healthy, over all replicas, in calls per second.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// The base error rate.
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    /// `c`: the workers of each replica, max(1, round(capacity / replicas × mean service
    /// time)). The model's healthy throughput is `replicas × workers / mean_service` calls per
    /// second, which differs from [`Dependency::capacity`] by the rounding of `c`.
    pub fn workers(&self) -> u32 {
        self.hosts[0].workers() as u32
    }

    /// The mean healthy service time (median × exp(σ²/2) for a log-normal).
    pub fn mean_service(&self) -> Duration {
        Duration::from_secs_f64(self.service.mean_secs())
    }

    /// The bound on a call's wait for a worker, if any.
    pub fn max_queue_wait(&self) -> Option<Duration> {
        self.max_queue_wait
    }

    /// Calls per second all replicas serve now, where `condition_of(r)` is replica `r`'s
    /// condition: the workers a call may take (as [`Dependency::call`] counts them) over the
    /// service time (× `latency_factor`), 0 for a down or hung replica, summed over the
    /// replicas. The model's own throughput, so it differs from [`Dependency::capacity`] by
    /// the rounding of the workers.
    pub fn capacity_under(&self, condition_of: &dyn Fn(u32) -> Condition) -> f64 {
        let mean = self.mean_service().as_secs_f64();
        (0..self.replicas())
            .map(|r| {
                let c = condition_of(r);
                if c.down || c.hung {
                    0.0
                } else {
                    available(self.hosts[r as usize].workers(), c.capacity_factor) as f64
                        / (mean * c.latency_factor)
                }
            })
            .sum()
    }

    /// A call reaching `replica` at `now` (nanoseconds, never earlier than the previous call)
    /// while it is in `condition`: it takes its place in the replica's queue, and its answer
    /// is known at once (see the module docs). Every call reaching the dependency must come
    /// through here, in time order, so that it gives the replica its work.
    ///
    /// # Panics
    /// If `replica >= self.replicas()`.
    pub fn call(
        &mut self,
        now: u64,
        replica: u32,
        condition: &Condition,
        rng: &mut fastrand::Rng,
    ) -> Answer {
        self.call_drawn(now, replica, condition, Draws::take(rng))
    }

    /// [`Dependency::call`] with the call's random numbers drawn beforehand (`call` draws
    /// them from its stream, then does exactly this).
    ///
    /// # Panics
    /// If `replica >= self.replicas()`.
    pub fn call_drawn(
        &mut self,
        now: u64,
        replica: u32,
        condition: &Condition,
        draws: Draws,
    ) -> Answer {
        assert!(
            replica < self.replicas(),
            "replica {replica} of {}",
            self.replicas()
        );
        if condition.hung {
            return Answer::NEVER;
        }
        let fast_failure = self.fast_failure(now);
        if condition.down {
            return fast_failure;
        }
        let service = self.service(condition, draws);
        let ok = self.succeeds(condition, draws);
        let limit = self.wait_limit();
        let host = &mut self.hosts[replica as usize];
        host.slow_to(now, condition.latency_factor);
        let workers = host.workers();
        match host.enqueue(
            now,
            available(workers, condition.capacity_factor),
            service,
            limit,
        ) {
            Err(start) => self.turned_away(now, start, fast_failure),
            Ok(start) => Answer {
                at: start.saturating_add(service),
                ok,
            },
        }
    }

    /// The answer a call reaching `replica` at `now` in `condition`, with the random numbers
    /// `draws`, would get: what [`Dependency::call_drawn`] would return, without the call
    /// (the replica is left as it is, and no stream is drawn from). `now` is never earlier
    /// than the last call that reached the replica. This is how the lab's oracle judges an
    /// attempt before it decides to send it (see [`crate::oracle`]).
    ///
    /// # Panics
    /// If `replica >= self.replicas()`.
    pub fn answer_if_called(
        &self,
        now: u64,
        replica: u32,
        condition: &Condition,
        draws: Draws,
    ) -> Answer {
        let host = &self.hosts[replica as usize];
        if condition.hung {
            return Answer::NEVER;
        }
        let fast_failure = self.fast_failure(now);
        if condition.down {
            return fast_failure;
        }
        let service = self.service(condition, draws);
        let start = host.start_if_called(
            now,
            available(host.workers(), condition.capacity_factor),
            condition.latency_factor,
        );
        if self.wait_limit().is_some_and(|max| start - now > max) {
            return self.turned_away(now, start, fast_failure);
        }
        Answer {
            at: start.saturating_add(service),
            ok: self.succeeds(condition, draws),
        }
    }

    /// The longest a call may wait for a worker before it is turned away, in nanoseconds: the
    /// shorter of `max-queue-wait` and `drop-after-wait` (`None`: it always waits).
    fn wait_limit(&self) -> Option<u64> {
        let shed = self.max_queue_wait.map(nanos);
        shed.into_iter()
            .chain(self.drop_after_wait.map(nanos))
            .min()
    }

    /// The answer of a call turned away at `now` that would have started at `start`: shed at
    /// once (`fast_failure`) when its wait passes `max-queue-wait`, else dropped unserved when
    /// a worker reaches it (`drop-after-wait`), failing then.
    fn turned_away(&self, now: u64, start: u64, fast_failure: Answer) -> Answer {
        if self
            .max_queue_wait
            .is_some_and(|max| start - now > nanos(max))
        {
            fast_failure
        } else {
            Answer {
                at: start,
                ok: false,
            }
        }
    }

    /// The answer of a call that fails fast at `now` (a down replica, a shed call).
    fn fast_failure(&self, now: u64) -> Answer {
        Answer {
            at: now.saturating_add(nanos(self.outage_latency)),
            ok: false,
        }
    }

    /// A call's service time in `condition`, in nanoseconds (saturating).
    fn service(&self, condition: &Condition, draws: Draws) -> u64 {
        let service = self.service.nanos(draws.z) * condition.latency_factor;
        service as u64 // saturating
    }

    /// Whether a served call succeeds in `condition`.
    fn succeeds(&self, condition: &Condition, draws: Draws) -> bool {
        draws.error < (1.0 - self.error_rate) * (1.0 - condition.extra_error_rate)
    }

    /// How long a call reaching `replica` at `now` would wait before its service starts,
    /// given the workers that were available to the last call that reached it.
    ///
    /// # Panics
    /// If `replica >= self.replicas()`.
    pub fn backlog(&self, now: u64, replica: u32) -> Duration {
        Duration::from_nanos(self.hosts[replica as usize].wait(now))
    }
}

/// The workers of `workers` that take new calls at `capacity_factor`: ⌈workers × factor⌉.
fn available(workers: usize, capacity_factor: f64) -> usize {
    ((workers as f64 * capacity_factor) - 1e-9).ceil() as usize
}

/// A draw from the standard normal distribution (Box–Muller).
pub(crate) fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64(); // (0, 1]: ln is finite
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SECOND: u64 = 1_000_000_000;

    /// One replica of 8 workers: median 20 ms, p99 80 ms (mean service 23.9 ms), 335 calls/s.
    fn dep() -> Dependency {
        let d = Dependency::new(20 * MS, 80 * MS, 0.0, 335.0, MS);
        assert_eq!(d.workers(), 8);
        d
    }

    /// The model's own healthy throughput per replica: c / mean service time.
    fn mu(d: &Dependency) -> f64 {
        f64::from(d.workers()) / d.mean_service().as_secs_f64()
    }

    /// Poisson arrivals at `rate` per second from `from` to `to` (nanoseconds).
    fn poisson(rate: f64, from: u64, to: u64, rng: &mut fastrand::Rng) -> Vec<u64> {
        let mut at = Vec::new();
        let mut t = from as f64;
        loop {
            t += -(1.0 - rng.f64()).ln() / rate * SECOND as f64;
            if t >= to as f64 {
                return at;
            }
            at.push(t as u64);
        }
    }

    /// Sends calls at these times to replica 0, healthy; returns (sent, answer) pairs.
    fn send(d: &mut Dependency, times: &[u64], rng: &mut fastrand::Rng) -> Vec<(u64, Answer)> {
        times
            .iter()
            .map(|&t| (t, d.call(t, 0, &Condition::HEALTHY, rng)))
            .collect()
    }

    /// The mean sojourn (wait + service) of the calls sent from `from` on, in seconds.
    fn mean_sojourn(calls: &[(u64, Answer)], from: u64) -> f64 {
        let kept: Vec<f64> = calls
            .iter()
            .filter(|(sent, _)| *sent >= from)
            .map(|(sent, a)| (a.at - sent) as f64 / SECOND as f64)
            .collect();
        kept.iter().sum::<f64>() / kept.len() as f64
    }

    /// Little's law L = λW, and the utilisation law (busy workers = λ × mean service = ρc),
    /// each within 5%, sampling the queue every 10 ms over 300 s of steady state at ρ = 0.7.
    #[test]
    fn littles_law_holds_in_steady_state() {
        let mut d = dep();
        let rate = 0.7 * mu(&d);
        let (from, to) = (50 * SECOND, 350 * SECOND);
        let times = poisson(rate, 0, 400 * SECOND, &mut fastrand::Rng::with_seed(1));
        let mut answers = fastrand::Rng::with_seed(2);
        let mut in_system = std::collections::BinaryHeap::new();
        let (mut samples, mut sum_n, mut sum_busy) = (0u64, 0u64, 0u64);
        let mut next_sample = from;
        let mut calls = Vec::new();
        for &t in &times {
            while next_sample < t && next_sample < to {
                while in_system
                    .peek()
                    .is_some_and(|std::cmp::Reverse(at)| *at <= next_sample)
                {
                    in_system.pop();
                }
                sum_n += in_system.len() as u64;
                sum_busy += d.hosts[0].busy(next_sample) as u64;
                samples += 1;
                next_sample += 10 * MS.as_nanos() as u64;
            }
            let answer = d.call(t, 0, &Condition::HEALTHY, &mut answers);
            in_system.push(std::cmp::Reverse(answer.at));
            if (from..to).contains(&t) {
                calls.push((t, answer));
            }
        }
        let l = sum_n as f64 / samples as f64;
        let lambda = calls.len() as f64 / ((to - from) / SECOND) as f64;
        let w = mean_sojourn(&calls, from);
        let busy = sum_busy as f64 / samples as f64;
        let rho_c = lambda * d.mean_service().as_secs_f64();
        eprintln!(
            "L = {l:.3}, λW = {:.3}; busy = {busy:.3}, λ E[S] = {rho_c:.3}",
            lambda * w
        );
        assert!(
            (l / (lambda * w) - 1.0).abs() < 0.05,
            "L {l} vs λW {}",
            lambda * w
        );
        assert!(
            (busy / rho_c - 1.0).abs() < 0.05,
            "busy {busy} vs ρc {rho_c}"
        );
        assert!(w > d.mean_service().as_secs_f64(), "some calls queued");
    }

    /// Mean sojourn grows with utilisation: within 3% of the mean service time at ρ = 0.2,
    /// strictly growing over ρ = 0.5, 0.8, 0.95, with the wait at 0.8 near the textbook's.
    #[test]
    fn latency_grows_with_utilisation() {
        let mean_service = dep().mean_service().as_secs_f64();
        let sojourn: Vec<f64> = [0.2, 0.5, 0.8, 0.95]
            .iter()
            .map(|rho| {
                let mut d = dep();
                let times = poisson(
                    rho * mu(&d),
                    0,
                    300 * SECOND,
                    &mut fastrand::Rng::with_seed(3),
                );
                let calls = send(&mut d, &times, &mut fastrand::Rng::with_seed(4));
                mean_sojourn(&calls, 20 * SECOND)
            })
            .collect();
        eprintln!("mean service {mean_service:.5} s; sojourn at ρ 0.2/0.5/0.8/0.95: {sojourn:.5?}");
        assert!(
            (sojourn[0] / mean_service - 1.0).abs() < 0.03,
            "{sojourn:?}"
        );
        assert!(
            sojourn[1] < sojourn[2] && sojourn[2] < sojourn[3],
            "{sojourn:?}"
        );
        assert!(sojourn[3] > 1.2 * mean_service, "{sojourn:?}");
        // The wait at ρ = 0.8 against the Allen–Cunneen approximation for M/G/c (Erlang C's
        // M/M/c wait × (1 + Cs²)/2), within 15%: the queue behaves like the textbook's.
        let (c, a): (i32, f64) = (8, 0.8 * 8.0);
        let term = |k: i32| a.powi(k) / (1..=k).map(f64::from).product::<f64>();
        let tail = term(c) / (1.0 - a / f64::from(c));
        let erlang_c = tail / ((0..c).map(term).sum::<f64>() + tail);
        let sigma = dep().service.sigma();
        let cs2 = (sigma * sigma).exp() - 1.0;
        let expected = erlang_c * mean_service / (f64::from(c) - a) * (1.0 + cs2) / 2.0;
        let wait = sojourn[2] - mean_service;
        eprintln!("wait at ρ 0.8: {wait:.5} s; Allen–Cunneen {expected:.5} s");
        assert!((wait / expected - 1.0).abs() < 0.15, "{wait} vs {expected}");
    }

    /// Calls that succeed within `timeout` of being sent, per second, over the calls sent in
    /// [from, to).
    fn goodput(calls: &[(u64, Answer)], timeout: Duration, from: u64, to: u64) -> f64 {
        let ok = calls
            .iter()
            .filter(|(sent, a)| (from..to).contains(sent) && a.succeeds_within(*sent, timeout))
            .count();
        ok as f64 / ((to - from) as f64 / SECOND as f64)
    }

    /// At 1.3× capacity with a 1 s caller timeout, the calls answered within 1 s over the
    /// second minute fall below 20% of capacity (the replica is busy with calls nobody waits
    /// for); at 0.8× nearly every call is; at 1.3× with a 200 ms max-queue-wait the replica
    /// sheds the excess and keeps its goodput near capacity.
    #[test]
    fn goodput_collapses_past_capacity_unless_the_replica_sheds() {
        let run = |load: f64, max_queue_wait: Option<Duration>| {
            let mut d = dep().with_max_queue_wait(max_queue_wait);
            let times = poisson(
                load * mu(&d),
                0,
                120 * SECOND,
                &mut fastrand::Rng::with_seed(5),
            );
            let calls = send(&mut d, &times, &mut fastrand::Rng::with_seed(6));
            let offered = times.iter().filter(|&&t| t >= 60 * SECOND).count() as f64 / 60.0;
            let good = goodput(&calls, Duration::from_secs(1), 60 * SECOND, 120 * SECOND);
            (good, offered, mu(&d))
        };
        let (over, _, mu) = run(1.3, None);
        let (under, offered, _) = run(0.8, None);
        let (shed, _, _) = run(1.3, Some(200 * MS));
        eprintln!(
            "capacity {mu:.1}/s; goodput at 1.3x {over:.1}/s, at 0.8x {under:.1}/s of \
             {offered:.1}/s, at 1.3x shedding {shed:.1}/s"
        );
        assert!(over < 0.2 * mu, "{over} of {mu}");
        assert!(under > 0.99 * offered, "{under} of {offered}");
        assert!(shed > 0.9 * mu, "{shed} of {mu}");
    }

    /// After 30 s at 1.5× capacity (a backlog of ~15 s), the backlog keeps growing at 1.1× and
    /// drains only at 0.5×: sampled every 5 s for 30 s, it rises at every sample at 1.1× (by
    /// more than 1.5 s in all; 3 s expected) and falls at every sample at 0.5× (by more than
    /// 10 s over 25 s; 12.5 s expected).
    #[test]
    fn recovery_needs_load_below_capacity() {
        let mut d = dep();
        let mu = mu(&d);
        let mut answers = fastrand::Rng::with_seed(8);
        let overload = poisson(1.5 * mu, 0, 30 * SECOND, &mut fastrand::Rng::with_seed(7));
        send(&mut d, &overload, &mut answers);
        let built = d.backlog(30 * SECOND, 0).as_secs_f64();
        assert!(
            (built - 15.0).abs() < 1.5,
            "backlog after the overload: {built} s"
        );
        let after = |load: f64| {
            let mut d = d.clone();
            let mut answers = answers.clone();
            let times = poisson(
                load * mu,
                30 * SECOND,
                60 * SECOND,
                &mut fastrand::Rng::with_seed(9),
            );
            let mut samples = vec![built];
            for chunk in 0..6 {
                let end = (35 + 5 * chunk) * SECOND;
                let these: Vec<u64> = times
                    .iter()
                    .copied()
                    .filter(|&t| t < end && t >= end - 5 * SECOND)
                    .collect();
                send(&mut d, &these, &mut answers);
                samples.push(d.backlog(end, 0).as_secs_f64());
            }
            samples
        };
        let (draining, growing) = (after(0.5), after(1.1));
        eprintln!("backlog every 5 s at 0.5x: {draining:.2?}; at 1.1x: {growing:.2?}");
        assert!(growing.windows(2).all(|w| w[1] > w[0]), "{growing:?}");
        assert!(growing[6] - growing[0] > 1.5, "{growing:?}");
        assert!(
            draining[..6].windows(2).all(|w| w[1] < w[0]),
            "{draining:?}"
        );
        assert!(draining[0] - draining[5] > 10.0, "{draining:?}");
    }

    /// A 10× brownout at half load cuts capacity to a tenth and builds a backlog (4 s of wait
    /// per second, 80 s in 20 s); when it ends the queued work runs at healthy speed: the
    /// backlog drops tenfold at once (to ~8 s, within 15%) and is gone 20 s later.
    #[test]
    fn a_brownouts_backlog_shrinks_when_it_ends() {
        let mut d = dep();
        let mut answers = fastrand::Rng::with_seed(17);
        let brownout = with(|c| c.latency_factor = 10.0);
        let times = poisson(
            0.5 * mu(&d),
            0,
            60 * SECOND,
            &mut fastrand::Rng::with_seed(18),
        );
        let mut backlog = Vec::new();
        for &t in &times {
            let condition = if t < 20 * SECOND {
                brownout
            } else {
                Condition::HEALTHY
            };
            d.call(t, 0, &condition, &mut answers);
            backlog.push((t, d.backlog(t, 0).as_secs_f64()));
        }
        let at = |s: u64| backlog.iter().find(|(t, _)| *t >= s * SECOND).unwrap().1;
        let last_slow = backlog.iter().rfind(|(t, _)| *t < 20 * SECOND).unwrap().1;
        eprintln!(
            "backlog at the brownout's end {last_slow:.2} s, after it {:.2} s, 20 s later {:.2} s",
            at(20),
            at(40)
        );
        assert!((last_slow / 80.0 - 1.0).abs() < 0.15, "{last_slow}");
        assert!((at(20) / 8.0 - 1.0).abs() < 0.15, "{}", at(20));
        assert_eq!(at(40), 0.0);
    }

    fn with(f: impl FnOnce(&mut Condition)) -> Condition {
        let mut c = Condition::HEALTHY;
        f(&mut c);
        c
    }

    /// A down replica fails every call after the outage latency and takes no work; a hung one
    /// never answers and takes no work; the other replica is untouched.
    #[test]
    fn down_and_hung_replicas_take_no_work() {
        let mut d = dep().with_replicas(2);
        assert_eq!((d.replicas(), d.workers()), (2, 4));
        let mut rng = fastrand::Rng::with_seed(10);
        let down = with(|c| c.down = true);
        let hung = with(|c| c.hung = true);
        for i in 0..1_000 {
            let now = i * 1_000;
            let answer = d.call(now, 1, &down, &mut rng);
            assert_eq!(
                answer,
                Answer {
                    at: now + 1_000_000,
                    ok: false
                }
            );
            assert_eq!(d.call(now, 1, &hung, &mut rng), Answer::NEVER);
        }
        assert_eq!(d.backlog(1_000_000, 1), Duration::ZERO);
        assert_eq!(d.hosts[1].busy(0), 0);
        assert_eq!(d.hosts[0].busy(0), 0);
        assert!(d.call(1_000_000, 0, &Condition::HEALTHY, &mut rng).ok);
        assert_eq!(
            (d.hosts[0].busy(1_000_000), d.hosts[1].busy(1_000_000)),
            (1, 0)
        );
        assert!(!Answer::NEVER.succeeds_within(0, Duration::MAX));
    }

    /// `capacity_under` is the workers taking calls over the service time: a replica's share
    /// × capacity_factor / latency_factor (up to the rounding of the workers), 0 when down or
    /// hung; a capacity factor leaves only ⌈c × factor⌉ workers taking calls.
    #[test]
    fn conditions_cut_capacity() {
        let d = Dependency::new(20 * MS, 80 * MS, 0.0, 400.0, MS).with_replicas(4);
        let conditions = [
            Condition::HEALTHY,
            with(|c| c.capacity_factor = 0.5),
            with(|c| c.latency_factor = 30.0),
            with(|c| c.down = true),
        ];
        // 100 calls/s a replica: 2 workers of 23.9 ms each, 83.7 calls/s.
        let replica = 2.0 / d.mean_service().as_secs_f64();
        let total = d.capacity_under(&|r| conditions[r as usize]);
        assert!(
            (total - (replica + replica / 2.0 + replica / 30.0)).abs() < 1e-9,
            "{total}"
        );
        let healthy = d.capacity_under(&|_| Condition::HEALTHY);
        assert!((healthy - 4.0 * replica).abs() < 1e-9, "{healthy}");
        assert_eq!(d.capacity_under(&|_| with(|c| c.hung = true)), 0.0);

        // Half the 8 workers: 4 calls at once fill them, while the other 4 stay idle.
        let mut d = dep();
        let mut rng = fastrand::Rng::with_seed(11);
        let half = with(|c| c.capacity_factor = 0.5);
        for _ in 0..4 {
            d.call(0, 0, &half, &mut rng);
        }
        assert!(d.backlog(0, 0) > Duration::ZERO);
        d.call(0, 0, &Condition::HEALTHY, &mut rng);
        assert_eq!(d.backlog(0, 0), Duration::ZERO, "3 of 8 still idle");
        assert_eq!(d.hosts[0].busy(0), 5);
        // 0.3 × 10 is 3.0000000000000004 in floating point: still 3 workers.
        let mut d = Dependency::new(20 * MS, 80 * MS, 0.0, 420.0, MS);
        assert_eq!(d.workers(), 10);
        for _ in 0..10 {
            d.call(0, 0, &with(|c| c.capacity_factor = 0.3), &mut rng);
        }
        assert_eq!(d.hosts[0].busy(0), 3);
    }

    /// The k-th answer at light load: wait-free, so its latency is the service time.
    fn light(d: &mut Dependency, c: &Condition, n: u64) -> (Vec<Duration>, f64) {
        let mut rng = fastrand::Rng::with_seed(12);
        let mut failures = 0;
        let mut latencies: Vec<Duration> = (0..n)
            .map(|i| {
                let now = i * 100 * SECOND; // every call finds the replica idle
                let a = d.call(now, 0, c, &mut rng);
                failures += u32::from(!a.ok);
                Duration::from_nanos(a.at - now)
            })
            .collect();
        latencies.sort();
        (latencies, f64::from(failures) / n as f64)
    }

    /// Without a wait, latency is the spec's log-normal (median and p99 within 3%, and 5%
    /// for the p99), a brownout multiplies it, and errors combine as independent causes.
    #[test]
    fn service_and_errors_follow_the_spec_and_the_condition() {
        let fresh = || Dependency::new(20 * MS, 80 * MS, 0.1, 335.0, MS);
        let (latency, failed) = light(&mut fresh(), &Condition::HEALTHY, 20_000);
        let (median, p99) = (latency[10_000].as_secs_f64(), latency[19_800].as_secs_f64());
        eprintln!("median {median:.5} s, p99 {p99:.5} s, failed {failed:.4}");
        assert!((median / 0.020 - 1.0).abs() < 0.03, "{median}");
        assert!((p99 / 0.080 - 1.0).abs() < 0.05, "{p99}");
        assert!((failed - 0.1).abs() < 0.01, "{failed}");
        let spike = with(|c| c.extra_error_rate = 0.5);
        let (_, failed) = light(&mut fresh(), &spike, 5_000);
        assert!((failed - 0.55).abs() < 0.02, "{failed}");
        let (latency, _) = light(&mut fresh(), &with(|c| c.latency_factor = 30.0), 5_000);
        let median = latency[2_500].as_secs_f64();
        assert!((median / 0.600 - 1.0).abs() < 0.05, "{median}");
    }

    /// With max-queue-wait, a call that would wait longer fails after the outage latency and
    /// gives no work: the backlog stops growing.
    #[test]
    fn max_queue_wait_sheds() {
        let mut d = dep().with_max_queue_wait(Some(100 * MS));
        let mut rng = fastrand::Rng::with_seed(13);
        let answers: Vec<Answer> = (0..2_000)
            .map(|_| d.call(0, 0, &Condition::HEALTHY, &mut rng))
            .collect();
        let shed = answers.iter().filter(|a| {
            *a == &Answer {
                at: 1_000_000,
                ok: false,
            }
        });
        let served = answers.iter().filter(|a| a.ok).count();
        assert_eq!(shed.count() + served, 2_000);
        assert!(
            (30..100).contains(&served),
            "{served}: about 8 × (1 + 100/24)"
        );
        let backlog = d.backlog(0, 0);
        assert!(
            backlog > 100 * MS && backlog < 100 * MS + Duration::from_secs(1),
            "{backlog:?}"
        );
        for _ in 0..1_000 {
            d.call(0, 0, &Condition::HEALTHY, &mut rng);
        }
        assert_eq!(d.backlog(0, 0), backlog);
        assert_eq!(d.max_queue_wait(), Some(100 * MS));
    }

    /// With drop-after-wait, a call that would wait longer is dropped when a worker reaches
    /// it: it fails then, not at once, and gives no work, so the backlog stops growing at the
    /// bound; one that waits within it is served. Beside max-queue-wait, a call past both is
    /// shed at once.
    #[test]
    fn drop_after_wait_drops_unserved_when_a_worker_reaches_the_call() {
        let mut d = dep().with_drop_after_wait(Some(100 * MS));
        assert_eq!(d.drop_after_wait(), Some(100 * MS));
        let mut rng = fastrand::Rng::with_seed(13);
        let answers: Vec<Answer> = (0..2_000)
            .map(|_| d.call(0, 0, &Condition::HEALTHY, &mut rng))
            .collect();
        let served = answers.iter().filter(|a| a.ok).count();
        let dropped: Vec<&Answer> = answers.iter().filter(|a| !a.ok).collect();
        assert!(
            (30..100).contains(&served),
            "{served}: about 8 × (1 + 100/24)"
        );
        // A base error rate fails a few served calls too; the dropped ones fail past the
        // bound, when a worker frees, not after the outage latency.
        let late = dropped.iter().filter(|a| a.at > 100_000_000).count();
        assert!(
            late > 1_800,
            "{late} of {} failed past the bound",
            dropped.len()
        );
        let backlog = d.backlog(0, 0);
        assert!(
            backlog > 100 * MS && backlog < 100 * MS + Duration::from_secs(1),
            "{backlog:?}"
        );
        for _ in 0..1_000 {
            d.call(0, 0, &Condition::HEALTHY, &mut rng);
        }
        assert_eq!(d.backlog(0, 0), backlog, "dropped calls give no work");
        // With a shorter max-queue-wait as well, the same calls are shed at once instead.
        let mut both = dep()
            .with_drop_after_wait(Some(100 * MS))
            .with_max_queue_wait(Some(50 * MS));
        let shed = (0..2_000)
            .map(|_| both.call(0, 0, &Condition::HEALTHY, &mut rng))
            .filter(|a| {
                *a == Answer {
                    at: 1_000_000,
                    ok: false,
                }
            })
            .count();
        assert!(shed > 1_800, "{shed}");
    }

    /// `answer_if_called` is the answer `call_drawn` then gives with the same numbers, and
    /// changes nothing, over every condition (a brownout starting and ending, a capacity
    /// limit, down, hung) and a bounded queue; `call` is `call_drawn` with numbers drawn from
    /// its stream.
    #[test]
    fn an_answer_asked_for_is_the_answer_a_call_gets() {
        let conditions = [
            Condition::HEALTHY,
            with(|c| c.latency_factor = 30.0),
            with(|c| c.capacity_factor = 0.25),
            with(|c| c.extra_error_rate = 0.5),
            with(|c| c.down = true),
            with(|c| c.hung = true),
        ];
        for (shed_after, drop_after) in
            [(Some(300), None), (None, Some(300)), (Some(400), Some(200))]
        {
            asked_is_answered(
                dep()
                    .with_max_queue_wait(shed_after.map(|ms| ms * MS))
                    .with_drop_after_wait(drop_after.map(|ms| ms * MS)),
                &conditions,
            );
        }
    }

    fn asked_is_answered(mut d: Dependency, conditions: &[Condition]) {
        let mut twin = d.clone();
        let mut rng = fastrand::Rng::with_seed(19);
        let mut stream = fastrand::Rng::with_seed(20);
        let mut now = 0;
        let (mut shed, mut ok) = (0, 0);
        for i in 0..20_000u64 {
            now += rng.u64(0..6_000_000);
            // Runs of a few hundred calls in each condition, so that queues build and drain.
            let condition = conditions[(i / 300) as usize % conditions.len()];
            let draws = Draws::take(&mut rng);
            let before = format!("{:?}", d.hosts);
            let asked = d.answer_if_called(now, 0, &condition, draws);
            assert_eq!(format!("{:?}", d.hosts), before, "asking changes nothing");
            let answer = d.call_drawn(now, 0, &condition, draws);
            assert_eq!(asked, answer, "call {i} in {condition:?}");
            let (mut drawn, mut copy) = (stream.clone(), twin.clone());
            assert_eq!(
                twin.call(now, 0, &condition, &mut stream),
                copy.call_drawn(now, 0, &condition, Draws::take(&mut drawn))
            );
            assert_eq!(stream, drawn, "three numbers each");
            // No base error rate: a failure in a condition that adds none is a call turned away.
            shed += u64::from(!condition.down && condition.extra_error_rate == 0.0 && !answer.ok);
            ok += u64::from(answer.ok);
        }
        assert!(
            shed > 100 && ok > 5_000,
            "queues built and were shed or dropped: {shed}, {ok}"
        );
    }

    /// The same calls with the same seed get the same answers; a clone carries on alike.
    #[test]
    fn answers_are_deterministic() {
        let times = poisson(400.0, 0, 10 * SECOND, &mut fastrand::Rng::with_seed(14));
        let mut a = dep();
        let first = send(&mut a, &times, &mut fastrand::Rng::with_seed(15));
        let mut b = dep();
        assert_eq!(
            send(&mut b, &times, &mut fastrand::Rng::with_seed(15)),
            first
        );
        let mut c = b.clone();
        let later = [11 * SECOND, 11 * SECOND + 5];
        let mut rng = fastrand::Rng::with_seed(16);
        assert_eq!(
            send(&mut b, &later, &mut rng.clone()),
            send(&mut c, &later, &mut rng)
        );
    }

    fn spec(text: &str) -> Result<Dependency, String> {
        let base = "latency-median = \"20ms\"\nlatency-p99 = \"80ms\"\nerror-rate = 0.01\n";
        let spec: DependencySpec =
            toml::from_str(&format!("{base}{text}")).map_err(|e| e.to_string())?;
        spec.build()
    }

    #[test]
    fn specs_are_checked() {
        let d = spec("capacity = 1000").unwrap();
        assert_eq!(
            (d.replicas(), d.workers(), d.max_queue_wait()),
            (1, 24, None)
        );
        let d = spec("capacity = 1000\nreplicas = 3\nmax-queue-wait = \"2s\"").unwrap();
        assert_eq!(d.replicas(), 3);
        assert_eq!(d.workers(), 8, "round(1000 / 3 × 23.9 ms)");
        assert_eq!(d.max_queue_wait(), Some(Duration::from_secs(2)));
        assert_eq!(d.capacity(), 1000.0);
        // Half a worker a replica is the least the model holds (rounded up to one, it
        // doubles); below, the spec is refused with the least capacity that works.
        let half = spec("capacity = 62.8\nreplicas = 3").unwrap();
        assert_eq!(half.workers(), 1, "62.8 / 3 × 23.9 ms = 0.500");
        let error = spec("capacity = 1\nreplicas = 3").unwrap_err();
        assert!(
            error.contains("capacity = 1 over replicas = 3")
                && error.contains("capacity = 62.8 or more")
                && !error.contains("or fewer"),
            "{error}"
        );
        let error = spec("capacity = 1000\nreplicas = 100").unwrap_err();
        assert!(
            error.contains("capacity = 1000 over replicas = 100")
                && error.contains("0.239 workers")
                && error.contains("capacity = 2094 or more, or replicas = 47 or fewer"),
            "{error}"
        );
        let error = |text: &str| spec(text).unwrap_err();
        assert!(error("capacity = 1000\nreplicas = 0").contains("replicas"));
        assert!(error("capacity = 1000\nmax-queue-wait = \"soon\"").contains("max-queue-wait"));
        assert!(error("capacity = 0").contains("capacity"));
        assert!(error("capacity = 1e12").contains("capacity"));
        assert!(error("capacity = 1000\nreplica = 2").contains("replica"));
    }
}

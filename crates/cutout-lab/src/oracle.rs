//! The oracle: the column of every report that refuses exactly the attempts that would fail or
//! time out, and the figures that read each setting against it (DESIGN §6).
//!
//! # The rule
//! The oracle's run is a simulation of its own, deterministic on the seed, with the same
//! callers (pods, arrivals, pool and queue, timeout, retries and backoff, deadline, the
//! caller-side models) and the same seeded dependency as every other column, and no breakers.
//! At each attempt's start it decides, for that attempt alone:
//!
//! - the attempt draws its random numbers from the dependency's stream at once (its service
//!   time's and its error's, [`Draws`](crate::dependency::Draws)), whether it is then sent or
//!   not: they are the attempt's own;
//! - it asks the dependency, as it stands at that instant (the calls the oracle's run has
//!   sent so far, its backlog, the incident in force), what answer the attempt would get
//!   with those numbers ([`Dependency::answer_if_called`](crate::dependency::Dependency::answer_if_called),
//!   which changes nothing), after the setup of the connection it would open when its pod's
//!   pool has none idle, and ends it as the lab ends any attempt: its pod's saturation delay
//!   added, cut at the attempt timeout or the request's deadline;
//! - it sends the attempt when that answer is a success within the cut, and refuses it
//!   otherwise: a down or hung replica, a call the replica would shed, an error draw, a wait
//!   that would pass the timeout. With a breaker per replica among the scenario's layouts
//!   it tries the replicas in the random order such a breaker's pod tries them and sends the
//!   attempt to the first on which it would succeed.
//!
//! So the oracle sees both the error draw and the latency draw of the attempt, and the exact
//! queue it would join. That is the right ceiling: a breaker decides from the past and can at
//! best learn the probability that an attempt fails; the oracle knows the outcome, so no
//! breaker can refuse fewer attempts that would succeed (it refuses none) or send fewer that
//! fail (it sends none). An oracle that saw only the probability would be one more breaker
//! (a perfect estimator), not a bound.
//!
//! A refusal of the oracle reads to the caller as the failure it stands for, known at once and
//! at no cost: the caller retries as it would after that failure (its retries, backoff and
//! deadline; the oracle's pods have disabled breakers, so breaker-aware retries are naive
//! ones, as without a breaker). A breaker's refusal is never retried because it says the
//! dependency is down for a while; the oracle's says only that this attempt would fail. An
//! oracle whose refusal ended the request would lose the retry that follows an error on a
//! healthy dependency, and sit below the fleet with no breaker on every dependency that ever
//! errs.
//!
//! # What it can no longer see, and where it is not a ceiling
//! - The decision is greedy, one attempt at a time: an attempt that would succeed is sent even
//!   when its work makes a later attempt wait past its timeout (which the oracle then refuses,
//!   and the caller retries). A breaker that refuses some attempts that would succeed can
//!   keep the queue shorter for the others, so a setting can beat the oracle on caller
//!   latency, and on goodput wherever a shorter queue lets more requests through before their
//!   deadline: a negative regret is measured and shown, never clipped (the README gives where).
//! - With `[connections]`, an attempt that opens a connection reaches the dependency after its
//!   setup, and calls sent meanwhile by other attempts can take the worker it was counted on:
//!   the oracle judges the queue as it stands at the attempt's start. Such an attempt can
//!   fail after all; the row "admitted attempts that failed or timed out" counts them (0 in
//!   every run without `[connections]`, where the judgement is exact: the attempt is sent at
//!   the instant it is judged, with the numbers it was judged with).
//! - Its random numbers are drawn at every attempt, sent or not, so past its first refusal the
//!   oracle's dependency answers other attempts with other numbers than any breaker's run:
//!   each column is its own sample of the same seeded world, as the columns always were.
//!   Differences of a few requests between the oracle and a column that refuses nothing
//!   (no breaker, a breaker that never opens) are that sampling, not decisions.
//!
//! # The figures against it
//! Every setting's column (and the no-breaker column) reads, against the oracle of the same
//! seed ([`AgainstOracle`]):
//! - **goodput regret**: the oracle's goodput minus the setting's, in successful requests per
//!   second over the whole run, and as a share of the oracle's goodput;
//! - **time to give traffic back**: from the dependency's recovery (the end of the last
//!   failing incident, as "recovery to full traffic" takes it) to the start of the first
//!   second from which the setting admits at least [`GIVE_BACK_SHARE`] (95%) of the
//!   attempts the oracle admits in the same second, in every 1 s bin of the timeline for
//!   [`GIVE_BACK_HOLD`] (10) seconds in a row (or every second left, when the run ends
//!   sooner); `not within run` when no such stretch comes. Only a shortfall counts: a column
//!   that admits more than the oracle is sending attempts that fail, which the regret and the
//!   calls that reached the failing dependency count, not withholding traffic. The 1 s bins
//!   are unsmoothed: every column sees the same arrivals, so once both admit what arrives
//!   their counts differ only by retries, and 10 s in a row rule out a second of luck;
//! - **refused calls that would have succeeded alone** (the oracle's judgement, in every
//!   column): a refused attempt judged as the oracle judges it, with the numbers it would
//!   have drawn and the dependency of its own run as it stood. The older row, "refused calls
//!   that would have succeeded", asks a what-if copy of the dependency that every attempt
//!   reaches with a stream of its own: it draws a fresh answer, so it counts an attempt the
//!   breaker refused that would have failed on its own error draw as a success with the
//!   dependency's success probability, and judges at a load that includes the other refused
//!   calls. Both are printed; the oracle's column shows the what-if row's count of its own
//!   refusals, which is that difference alone;
//! - time to first open and the calls that reached the failing dependency are the report's
//!   own rows ("first trip after incident start", "calls that reached the failing
//!   dependency"), and the oracle's column has them too: it opens nothing, and it sends a
//!   failing dependency only the attempts that succeed on it (none in a hard outage).

use std::time::Duration;

use crate::sim::Run;

/// The label of the oracle's column, the last of every report.
pub const ORACLE: &str = "oracle";

/// A second counts as traffic given back when the setting admits at least this share of the
/// attempts the oracle admits in it.
pub const GIVE_BACK_SHARE: f64 = 0.95;

/// Seconds in a row that must count as given back (fewer when the run ends sooner).
pub const GIVE_BACK_HOLD: usize = 10;

/// A setting's figures read against the oracle of the same seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgainstOracle {
    /// The oracle's goodput minus the setting's, in successful requests per second over the
    /// whole run (negative where the setting did better).
    pub goodput_regret: f64,
    /// [`AgainstOracle::goodput_regret`] over the oracle's goodput; `None` when the oracle's
    /// goodput is 0.
    pub goodput_regret_share: Option<f64>,
    /// Whether the scenario has a recovery to give traffic back after.
    pub recovers: bool,
    /// From the recovery to the first of [`GIVE_BACK_HOLD`] seconds in a row in which the
    /// setting admitted at least [`GIVE_BACK_SHARE`] of what the oracle admitted; `None`
    /// when there is no recovery or no such stretch before the run ends.
    pub give_back: Option<Duration>,
}

impl AgainstOracle {
    /// `run`'s figures against `oracle`, two runs of the same scenario and seed whose
    /// goodputs (successful requests per second over the run) are `goodput` and
    /// `oracle_goodput`; `recovery` is when the dependency recovers, if it does, and
    /// `duration` the run's length.
    pub fn of(
        run: &Run,
        goodput: f64,
        oracle: &Run,
        oracle_goodput: f64,
        recovery: Option<Duration>,
        duration: Duration,
    ) -> AgainstOracle {
        let regret = oracle_goodput - goodput;
        AgainstOracle {
            goodput_regret: regret,
            goodput_regret_share: (oracle_goodput > 0.0).then(|| regret / oracle_goodput),
            recovers: recovery.is_some(),
            give_back: recovery.and_then(|r| give_back(run, oracle, r, duration)),
        }
    }
}

/// From `recovery` to the first second from which `run` admits at least [`GIVE_BACK_SHARE`]
/// of the attempts `oracle` admits in the same second, every second for [`GIVE_BACK_HOLD`]
/// seconds (or up to the run's end, `duration`, when that comes first); `None` when no such
/// second comes. Seconds are the timeline's 1 s bins, counted from the one the recovery falls
/// in.
pub fn give_back(
    run: &Run,
    oracle: &Run,
    recovery: Duration,
    duration: Duration,
) -> Option<Duration> {
    let from = recovery.as_secs_f64().floor() as usize;
    let last = (duration.as_secs_f64().ceil() as usize)
        .min(run.timeline.len())
        .min(oracle.timeline.len());
    let given_back = |s: usize| {
        f64::from(run.timeline[s].admitted)
            >= GIVE_BACK_SHARE * f64::from(oracle.timeline[s].admitted)
    };
    let mut streak: Option<(usize, usize)> = None;
    for s in from..last {
        if !given_back(s) {
            streak = None;
            continue;
        }
        let (start, held) = streak.map_or((s, 1), |(start, held)| (start, held + 1));
        if held >= GIVE_BACK_HOLD {
            return Some(Duration::from_secs(start as u64).saturating_sub(recovery));
        }
        streak = Some((start, held));
    }
    streak.map(|(start, _)| Duration::from_secs(start as u64).saturating_sub(recovery))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Second;

    fn run(admitted: &[u32]) -> Run {
        Run {
            setting: String::new(),
            counts: Default::default(),
            probe_times: Vec::new(),
            transitions: Vec::new(),
            timeline: admitted
                .iter()
                .map(|&admitted| Second {
                    admitted,
                    ..Second::default()
                })
                .collect(),
            latencies: Default::default(),
            ok_latencies: Default::default(),
            window_reach: Duration::ZERO,
            oracle: false,
        }
    }

    #[test]
    fn traffic_is_given_back_from_the_first_of_ten_seconds_at_95_percent() {
        let oracle = run(&[100; 40]);
        // Short at 2 and 3, then 95 (at the bound) from 4 on; a lucky second at 2 s is not
        // enough: the streak must hold 10 s.
        let mut admitted = vec![0; 40];
        admitted[2] = 100;
        for a in &mut admitted[4..] {
            *a = 95;
        }
        let s = |n| Some(Duration::from_secs(n));
        let setting = run(&admitted);
        assert_eq!(
            give_back(
                &setting,
                &oracle,
                Duration::from_secs(1),
                Duration::from_secs(40)
            ),
            s(3)
        );
        // 94 of 100 is short.
        admitted[9] = 94;
        let setting = run(&admitted);
        assert_eq!(
            give_back(
                &setting,
                &oracle,
                Duration::from_secs(1),
                Duration::from_secs(40)
            ),
            s(9)
        );
        // A recovery inside a second counts from that second's start, never below 0.
        let all = run(&[100; 40]);
        assert_eq!(
            give_back(
                &all,
                &oracle,
                Duration::from_millis(1_500),
                Duration::from_secs(40)
            ),
            s(0)
        );
        // More than the oracle is not withholding traffic.
        assert_eq!(
            give_back(
                &run(&[300; 40]),
                &oracle,
                Duration::ZERO,
                Duration::from_secs(40)
            ),
            s(0)
        );
        // A stretch cut short by the run's end still counts; none at all is `None`.
        let mut late = vec![0; 40];
        late[36..].fill(100);
        assert_eq!(
            give_back(
                &run(&late),
                &oracle,
                Duration::ZERO,
                Duration::from_secs(40)
            ),
            s(36)
        );
        assert_eq!(
            give_back(
                &run(&[0; 40]),
                &oracle,
                Duration::ZERO,
                Duration::from_secs(40)
            ),
            None
        );
    }

    #[test]
    fn regret_is_the_oracles_goodput_minus_the_settings() {
        let (a, o) = (run(&[1; 5]), run(&[1; 5]));
        let d = Duration::from_secs(5);
        let against = AgainstOracle::of(&a, 90.0, &o, 100.0, None, d);
        assert_eq!(against.goodput_regret, 10.0);
        assert_eq!(against.goodput_regret_share, Some(0.1));
        assert_eq!((against.recovers, against.give_back), (false, None));
        let better = AgainstOracle::of(&a, 101.0, &o, 100.0, Some(Duration::ZERO), d);
        assert_eq!(
            better.goodput_regret, -1.0,
            "a setting may beat the oracle: shown"
        );
        assert_eq!(better.give_back, Some(Duration::ZERO));
        assert_eq!(
            AgainstOracle::of(&a, 0.0, &o, 0.0, None, d).goodput_regret_share,
            None
        );
    }
}

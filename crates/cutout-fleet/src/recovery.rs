//! Fleet recovery: a pod whose own probes closed its breaker publishes it, and pods open on
//! the same breaker id end their break early, one release slot at a time.
//!
//! # What is published
//! A *probe close*: between two of the task's observations (every tick, whether or not Redis
//! answers), the breaker went from open or half-open to closed, or to recovering (the start of
//! a ramp), and no manual action happened in between (the snapshot's
//! [`last_manual_action_at`](cutout::Snapshot::last_manual_action_at) is the same at both).
//! That tells a close by the breaker's probes from a [`reset`](cutout::Breaker::reset), an
//! operator's `disable` then `reset`, or any other control: a control proves nothing about the
//! dependency, and the core raises no event for one and stamps it in the snapshot. A breaker
//! whose half-open timeout *closes* it ([`HalfOpenTimeout::Close`]) publishes nothing: the
//! snapshot cannot tell a close by its probes from a close by the timeout (the core exposes no
//! cause of a close), and a timeout proves nothing either.
//!
//! The evidence is dated by the observation *before* the close (the last one that still saw
//! the breaker open or half-open): the close happened after it, so the date is at most one
//! interval early, never late. Early is the safe side: a peer that opened after the date
//! judges the recovery stale, so an error makes a peer ignore a recovery, never accept one
//! that predates its opening. The pod sends the evidence's age (ms on its own monotonic
//! clock), and the script dates it on Redis's clock (`TIME` − age): the pods' clocks never
//! have to agree, only measure durations. A recovery is published by every round until one
//! is answered (a lost round is sent again with the age grown, which the script takes as the
//! same date), and dropped unpublished if the breaker leaves closed and recovering first (a
//! close its own next calls contradicted).
//!
//! # Release slots
//! The breaker's recovery key (its ring's key followed by `:recovery`, in the same Redis
//! Cluster slot) holds two times on Redis's clock: the latest recovery's date, and the next
//! free release slot. A pod whose breaker is open on a break of its own
//! ([`break_may_end`](cutout::Breaker::break_may_end)) asks, in its round, for a slot; the
//! script grants one only if the latest recovery is dated after the pod's opening (else the
//! recovery says nothing about what opened it) and if the slot comes before the pod's own
//! break ends (else the pod probes on its own first, and a slot would be wasted). The slot
//! is `max(next free, now)`, and the next free one moves a *spacing* on: so release slots are
//! at least one spacing apart, fleet-wide, whatever the number of pods, recoveries or
//! rounds. The pod then ends its break with
//! [`end_break_on_signal`](cutout::Breaker::end_break_on_signal)`(PeerRecovered, age)` at its
//! slot (on its clock: the round's answer time plus the slot's distance from Redis's time,
//! so it is late by at most its round trip, never early), and its own probes decide. The core
//! judges the age once more against the breaker's opening, exactly: a breaker that re-opened
//! since it asked ignores the release.
//!
//! # The budget and its spacing
//! [`FleetBuilder::recovery_budget`](crate::FleetBuilder::recovery_budget) is in probes per
//! second fleet-wide. A release may send `w` probes: under
//! [`HalfOpenRule::Consecutive`] `probe_successes + half_open_probes − 1` (the successes that
//! close it, and the probes still in flight when the last one does; 2 at the defaults), under
//! [`HalfOpenRule::Rates`] `half_open_probes`. With `n = ⌊budget / w⌋` releases' worth of
//! probes a second, slots are `1 / (n − 1)` s apart: any second plus one spacing then holds at
//! most `n` slots, so the probes of released pods in any second (a sliding one) are at most
//! `n × w ≤ budget`, provided each released pod sends its probes within one spacing of its
//! slot (its calls come often enough: at the default budget of 25 and `w` = 2, 91 ms). A pod
//! whose calls are sparser spreads its probes further and a second may hold more: cutout-lab's
//! pods at 10 calls a second send their two probes over some 200 ms, and with the pods whose
//! own break ended meanwhile the busiest second held 30.6 probes on average at the default
//! (its README, section 12); the rate over longer spans stays near the budget's nominal
//! `(n − 1) × w` a second. What is strict whatever the callers do: the release slots
//! themselves, at least one spacing apart. Below `n = 2` slots are 2 s apart
//! (`2 w / budget` s when one release's probes exceed the budget), strict when a released pod
//! probes within 1 s. What the budget does not count: pods whose own break ends first (they
//! ask for no slot and probe when their break ends, as without fleet recovery).
//!
//! # What Redis's loss does
//! Nothing blocks on it. A pod that cannot reach Redis publishes nothing and asks for
//! nothing: its breaker serves its own break and probes on its own, as without fleet recovery
//! (Redis is a hint). A slot already granted is kept and used: the budget counted it. A round
//! that ran but whose answer was lost granted a slot nobody uses (the budget is then not
//! reached, never passed). A recovery key lost with Redis's data loses the last recovery (the
//! pods serve their breaks) and the next free slot (a new key starts the slots at its first
//! grant: two grants from the two lives of the key may then be closer than a spacing, once).
//!
//! [`HalfOpenTimeout::Close`]: cutout::HalfOpenTimeout::Close
//! [`HalfOpenRule::Consecutive`]: cutout::HalfOpenRule::Consecutive
//! [`HalfOpenRule::Rates`]: cutout::HalfOpenRule::Rates

use std::time::Duration;

use cutout::{Breaker, HalfOpenRule, HalfOpenTimeout, Settings, Snapshot, State};

/// The first word of a recovery key's value: `CTFR` and its layout's version (1),
/// little-endian. A value that does not start with it is another program's, left alone.
pub(crate) const MAGIC: i64 = 0x0001_5246_5443;
/// Bytes of a recovery key's value: the magic word, the latest recovery's date and the next
/// free release slot (both µs on Redis's clock), each a little-endian `i64`.
pub(crate) const BYTES: usize = 24;

/// The recovery key of the breaker whose ring is `ring_key`: the same hash tag, so the same
/// Redis Cluster slot, and never a ring's key (those end with `}`).
pub(crate) fn key(ring_key: &str) -> String {
    format!("{ring_key}:recovery")
}

/// The probes one release of a breaker with these settings may send before its probes
/// decide (see the module's docs), at least 1.
pub(crate) fn probes_per_release(settings: &Settings) -> u32 {
    let probes = match settings.half_open_rule() {
        HalfOpenRule::Rates => settings.half_open_probes(),
        _ => settings
            .probe_successes()
            .saturating_add(settings.half_open_probes())
            .saturating_sub(1),
    };
    probes.max(1)
}

/// The least time between two release slots, in µs, for a fleet budget of `budget` probes a
/// second and releases of `probes` probes each (see the module's docs).
pub(crate) fn spacing_us(budget: u32, probes: u32) -> u64 {
    let probes = probes.max(1);
    let n = budget / probes;
    if n >= 2 {
        1_000_000u64.div_ceil(u64::from(n - 1))
    } else {
        // 2 s, or 2 w / budget s when one release's probes exceed the budget.
        (2_000_000u64 * u64::from(probes)).div_ceil(u64::from(budget.clamp(1, probes)))
    }
}

/// Whether a close of a breaker with these settings can be told to be its probes' (a
/// half-open timeout that closes it cannot be told from them).
pub(crate) fn publishes(settings: &Settings) -> bool {
    settings.half_open_timeout() != HalfOpenTimeout::Close
}

/// A request for a release slot: how long ago the breaker opened, how long its own break
/// still lasts (both ms, measured on the pod), and the fleet's spacing (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ask {
    pub(crate) opened_age_ms: u64,
    pub(crate) remaining_ms: u64,
    pub(crate) spacing_us: u64,
}

/// What a round asks of the recovery key: a recovery to publish (its evidence's age, ms)
/// and a slot to ask for. `Default`: neither, and the script leaves the key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Args {
    pub(crate) publish_age_ms: Option<u64>,
    pub(crate) ask: Option<Ask>,
    /// The date (pod's ms) of the recovery published: never sent, for the answer.
    pub(crate) publish_at_ms: Option<u64>,
}

impl Args {
    /// Whether the script reads (and may write) the recovery key.
    pub(crate) fn any(&self) -> bool {
        self.publish_age_ms.is_some() || self.ask.is_some()
    }
}

/// A granted release slot, on the pod's clock (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// When to end the break.
    pub(crate) release_ms: u64,
    /// When the recovery's evidence was gathered.
    pub(crate) evidence_ms: u64,
    /// The opening the slot was asked for (the breaker's `opened_at`): a breaker that opened
    /// again since drops the ticket.
    opened_at: Option<Duration>,
}

/// What the task saw of a breaker at its last observation.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    state: State,
    manual_at: Option<Duration>,
    at_ms: u64,
}

/// One watched breaker's side of fleet recovery (the task's, and the lab's model of it), on a
/// clock of whole milliseconds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recovery {
    seen: Option<Seen>,
    /// The date of a probe close not yet published by an answered round.
    pending: Option<u64>,
    /// The slot the last asking round was granted.
    ticket: Option<Ticket>,
    /// The opening of the last breaker state, for the ticket's check.
    opened_at: Option<Duration>,
}

impl Recovery {
    /// Notes the breaker's snapshot at `now_ms`: a probe close since the last observation
    /// becomes a recovery to publish; a breaker no longer closed drops one not yet published;
    /// a breaker no longer open on the opening its ticket was granted for drops the ticket.
    pub(crate) fn observe(&mut self, snapshot: &Snapshot, publishes: bool, now_ms: u64) {
        let state = snapshot.state;
        let manual_at = snapshot.last_manual_action_at;
        let up = matches!(state, State::Closed | State::Recovering);
        if let Some(seen) = self.seen {
            let was_probing = matches!(seen.state, State::Open | State::HalfOpen);
            if publishes && was_probing && up && seen.manual_at == manual_at {
                self.pending = Some(seen.at_ms);
            }
        }
        if !up {
            self.pending = None;
        }
        self.opened_at = snapshot.opened_at;
        if self
            .ticket
            .is_some_and(|t| state != State::Open || t.opened_at != snapshot.opened_at)
        {
            self.ticket = None;
        }
        self.seen = Some(Seen {
            state,
            manual_at,
            at_ms: now_ms,
        });
    }

    /// What this round asks of the recovery key at `now_ms`: the recovery to publish, and a
    /// slot if the breaker is open on a break a peer's recovery may end and holds none
    /// (`breaker`'s `break_may_end` and `break_remaining` are read only then).
    pub(crate) fn args(
        &self,
        breaker: &Breaker,
        snapshot: &Snapshot,
        spacing_us: u64,
        now_ms: u64,
    ) -> Args {
        let publish_age_ms = self.pending.map(|at| now_ms.saturating_sub(at));
        let ask = (snapshot.state == State::Open && self.ticket.is_none())
            .then(|| {
                if !breaker.break_may_end() {
                    return None;
                }
                let remaining = breaker.break_remaining()?;
                let opened_age = snapshot.current_break?.saturating_sub(remaining);
                Some(Ask {
                    // Rounded up: the opening looks older, never newer.
                    opened_age_ms: ms_up(opened_age),
                    remaining_ms: ms_down(remaining),
                    spacing_us,
                })
            })
            .flatten();
        Args {
            publish_age_ms,
            ask,
            publish_at_ms: self.pending,
        }
    }

    /// A round sent at `sent_ms` was answered at `received_ms`, Redis's clock then reading
    /// `now_us`: the recovery it published is published, and the slot it was granted (µs on
    /// Redis's clock; with the latest recovery's date, `recovered_us`) becomes a ticket.
    pub(crate) fn answered(
        &mut self,
        args: &Args,
        reply: (u64, u64, u64),
        sent_ms: u64,
        received_ms: u64,
    ) {
        let (now_us, recovered_us, slot_us) = reply;
        if args.publish_at_ms.is_some() && args.publish_at_ms == self.pending {
            self.pending = None;
        }
        if args.ask.is_some() && slot_us > 0 {
            // The slot is late by at most the round trip (Redis's `now` was read before the
            // answer came); the evidence is dated early by at most the round trip (it was
            // read after the round was sent): both on the safe side.
            let ahead = slot_us.saturating_sub(now_us).div_ceil(1000);
            let behind = now_us.saturating_sub(recovered_us).div_ceil(1000);
            self.ticket = Some(Ticket {
                release_ms: received_ms.saturating_add(ahead),
                evidence_ms: sent_ms.saturating_sub(behind),
                opened_at: self.opened_at,
            });
        }
    }

    /// The slot granted, if any.
    pub(crate) fn ticket(&self) -> Option<Ticket> {
        self.ticket
    }

    /// When the ticket's slot comes, on the pod's clock (ms).
    pub(crate) fn next_release(&self) -> Option<u64> {
        self.ticket.map(|t| t.release_ms)
    }

    /// The ticket, if its slot has come at `now_ms`: taken, with the evidence's age then.
    pub(crate) fn take_due(&mut self, now_ms: u64) -> Option<Duration> {
        let ticket = self.ticket.filter(|t| t.release_ms <= now_ms)?;
        self.ticket = None;
        Some(Duration::from_millis(
            now_ms.saturating_sub(ticket.evidence_ms),
        ))
    }

    /// Whether a recovery waits to be published.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> bool {
        self.pending.is_some()
    }
}

fn ms_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}

fn ms_down(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutout::clock::ManualClock;
    use cutout::{Jitter, Settings};

    fn breaker(clock: &ManualClock) -> Breaker {
        Breaker::builder("dep")
            .settings(
                Settings::builder()
                    .jitter(Jitter::None)
                    .consecutive_failures(Some(1))
                    .adaptive(false)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .build()
    }

    fn close_by_probes(breaker: &Breaker, clock: &ManualClock) {
        clock.advance(breaker.break_remaining().unwrap());
        for _ in 0..2 {
            breaker.call(|| Ok::<_, ()>(())).unwrap();
        }
        assert_eq!(breaker.state(), State::Closed);
    }

    #[test]
    fn a_close_by_the_probes_is_published_and_a_reset_is_not() {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut r = Recovery::default();
        r.observe(&b.snapshot(), true, 0);
        let _ = b.call(|| Err::<(), _>(()));
        r.observe(&b.snapshot(), true, 250);
        assert!(!r.pending());
        close_by_probes(&b, &clock);
        r.observe(&b.snapshot(), true, 500);
        assert!(r.pending(), "closed by its probes");
        let args = r.args(&b, &b.snapshot(), 1, 700);
        assert_eq!(
            args.publish_age_ms,
            Some(450),
            "dated at the observation before"
        );
        assert_eq!(args.ask, None, "closed: no slot");
        r.answered(&args, (1_000_000, 0, 0), 700, 701);
        assert!(!r.pending(), "published");

        let _ = b.call(|| Err::<(), _>(()));
        r.observe(&b.snapshot(), true, 750);
        b.reset();
        r.observe(&b.snapshot(), true, 1_000);
        assert!(!r.pending(), "a reset proves nothing");
        let _ = b.call(|| Err::<(), _>(()));
        r.observe(&b.snapshot(), true, 1_250);
        close_by_probes(&b, &clock);
        r.observe(&b.snapshot(), false, 1_500);
        assert!(
            !r.pending(),
            "a breaker whose timeout closes it publishes nothing"
        );
    }

    #[test]
    fn a_slot_becomes_a_ticket_dated_on_the_safe_side() {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut r = Recovery::default();
        let _ = b.call(|| Err::<(), _>(()));
        clock.advance(Duration::from_secs(4));
        r.observe(&b.snapshot(), true, 10_000);
        let args = r.args(&b, &b.snapshot(), 90_000, 10_000);
        assert_eq!(
            args.ask,
            Some(Ask {
                opened_age_ms: 4_000,
                remaining_ms: 11_000,
                spacing_us: 90_000
            })
        );
        // Redis's now 5 s, the recovery 1.5 s before it, the slot 2 s after it.
        r.answered(&args, (5_000_000, 3_500_000, 7_000_000), 10_000, 10_004);
        assert_eq!(r.next_release(), Some(12_004));
        assert_eq!(r.take_due(12_003), None);
        assert_eq!(r.take_due(12_004), Some(Duration::from_millis(3_504)));
        assert_eq!(r.take_due(12_005), None, "taken once");
    }

    #[test]
    fn a_ticket_goes_with_the_opening_it_was_granted_for() {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut r = Recovery::default();
        let _ = b.call(|| Err::<(), _>(()));
        r.observe(&b.snapshot(), true, 0);
        let args = r.args(&b, &b.snapshot(), 1, 0);
        r.answered(&args, (5_000_000, 4_000_000, 6_000_000), 0, 1);
        assert!(r.next_release().is_some());
        // Its own break ends, its probe fails: open again, on another opening.
        clock.advance(b.break_remaining().unwrap());
        let _ = b.call(|| Err::<(), _>(()));
        assert_eq!(b.state(), State::Open);
        r.observe(&b.snapshot(), true, 250);
        assert_eq!(r.next_release(), None);
    }

    #[test]
    fn the_spacing_keeps_any_second_within_the_budget() {
        assert_eq!(probes_per_release(&Settings::default()), 2);
        assert_eq!(spacing_us(25, 2), 90_910, "12 releases' worth: 11 a second");
        assert_eq!(spacing_us(20, 2), 111_112);
        assert_eq!(spacing_us(4, 2), 1_000_000);
        assert_eq!(spacing_us(3, 2), 2_000_000);
        assert_eq!(spacing_us(1, 2), 4_000_000);
        // Slots one spacing apart: any window of 1 s plus a spacing holds at most n of them.
        for (budget, probes) in [(25, 2), (20, 2), (7, 3), (100, 1), (4, 2)] {
            let d = spacing_us(budget, probes);
            let n = u64::from(budget / probes);
            let slots: Vec<u64> = (0..200).map(|k| k * d).collect();
            for start in (0..100 * d).step_by(997) {
                let within = slots
                    .iter()
                    .filter(|&&s| s > start && s < start + 1_000_000 + d)
                    .count() as u64;
                assert!(within <= n, "{budget}/{probes}: {within} slots");
            }
        }
    }
}

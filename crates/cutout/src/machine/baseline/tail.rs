//! The probe tail: the latency baseline's 99th percentile as it stood before any slow spell,
//! the limit below which a healthy dependency's probe is never slow.
//!
//! # Why a probe needs the tail
//! A probe is one sample. Judged against 3 × the median, a healthy dependency whose p99 is
//! 5 × its median fails 3.5% of its probes: with two probes a recovery, 7% of its recoveries
//! re-open a healthy dependency with a grown break (in the lab, a pod 77 s late; with one probe
//! a pod and fleet recovery, 90 s). The closed state judges slowness on a window of calls; a
//! probe can only say "slower than this dependency ever is when healthy". So a probe is slow
//! only above this tail (capped at 10 × the normal latency) plus the margin (see
//! `Machine::probe_slow_nanos`).
//!
//! # Why "from before the brownout"
//! A brownout's own calls enter the baseline before it trips: a 30 s trip window needs 15 s of
//! a full brownout to reach the 50% slow ratio, 5% of a 5-minute baseline, and its p99 is then
//! the brownout's latency. A tail read at the trip would pass the brownout's probes. So a tail
//! is measured only while the baseline holds nothing from a slow spell, and is kept *pending*
//! for a trip window (the *period*) before probes stand on it (*settled*):
//! - A slow spell is any merge, while closed, at which the trip window's share of slow calls
//!   is [`SPELL_MULTIPLE`] × the baseline's own or more, and more than chance at it
//!   ([`TAIL_CHANCE`]: a creeping brownout, one
//!   an open gate or a throttle keeps closed, a count window filling slowly), and any opening
//!   on slow evidence (the slow-call ratio, a slow probe, the probes' rates). It discards the
//!   pending tail, and no tail is measured again until the baseline has turned over (one
//!   baseline window after the spell's last sign), since until then it holds the spell's
//!   samples, probes' included.
//! - A brownout shows in the window within seconds, at far less than the 1% of the baseline
//!   that moves its p99; the few samples it adds before that are in a pending tail only, which
//!   the spell discards. The settled tail was measured a period before it settled, with no
//!   spell since.
//! - An opening on failures alone adds no latency sample and is no spell: a dependency that
//!   fails now and then keeps its tail.
//! - A count window's span in time is unknown, so its tail stays pending for a whole
//!   baseline window rather than a trip window: at one call a second a 200-call window is
//!   most of a 5-minute baseline, and a brownout lifts both shares alike, so only the longer
//!   wait keeps its start out of the settled tail.
//!
//! # What it can no longer see
//! - A partial brownout that lasts a baseline window (10–20% of calls at 5 × for 7 minutes
//!   or more, under the slow rule's 50%): by then the baseline's own slow share is the
//!   brownout's, the window no longer stands out at 3 ×, and one baseline window after its
//!   last spell the tail is measured on it. If it then turns into a full brownout, its probes
//!   at that latency pass (under the 10 × cap), the breaker closes, and the closed state's
//!   slow rule opens it again within a trip window (`tests/review_probe_tail3.rs`, two tests
//!   ignored as this known limit). Refusing to learn any lengthened tail would also refuse a
//!   dependency whose tail changed for good (a deploy), for ever.
//! - A brownout too small to show beyond chance in the trip window (a few percent of calls)
//!   can lift the settled tail; the 10 × cap bounds it: a probe more than 10 × the normal
//!   latency (plus the margin) is still slow, and the closed state's slow rule judges the rest
//!   once the probes close the breaker.
//! - A probe within the healthy tail plus the margin: the closed state's slow rule judges the
//!   dependency again once the probes close the breaker.
//! - A young breaker (no tail settled yet), or one whose baseline still holds a slow spell,
//!   judges its probes by the tail it had, or as before there was one: the threshold in force,
//!   at least the normal latency plus the margin.

use super::histogram::Histogram;

/// The quantile of the baseline a probe must exceed (plus the margin) to be slow.
pub(crate) const TAIL_QUANTILE: f64 = 0.99;

/// Samples the baseline must hold before its 99th percentile is measured: fewer, and one
/// outlier is the tail.
pub(crate) const TAIL_SAMPLES: u64 = 100;

/// The chance below which a trip window's slow calls, at the baseline's own slow share, may be
/// a slow spell. Loose beside the slow rule's 10⁻⁷: the multiple below is what keeps a
/// healthy dependency's bursts out.
pub(crate) const TAIL_CHANCE: f64 = 1e-4;

/// How many times the baseline's slow share a trip window's must reach to be a slow spell.
/// A healthy dependency's slow calls come in bursts: in the lab's (p99 at 5 × the median,
/// 3.6% of calls above the slow threshold) 30 s windows reached 2 × the baseline's share
/// while healthy, beyond chance at a binomial reading, and a spell at each kept a young
/// breaker from ever settling a tail (its probes at the p99 judged slow, a pod 82 s late).
pub(crate) const SPELL_MULTIPLE: f64 = 3.0;

/// 12 bytes, in the machine beside its other 4-byte fields (a default breaker holds at most
/// 4 KiB, `tests/memory.rs`): the tails in whole microseconds (0 for none), one time in
/// [`TICK`]s. While a tail is pending, `at` is when it was measured; otherwise it is when the
/// baseline is quiet again after a spell (a pending tail is only measured once it is). The
/// period and the turnover are the caller's to give: the settings hold them already.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProbeTail {
    /// The tail probes stand on, in µs (0: none).
    settled: u32,
    /// The tail last measured, in µs (0: none): it settles a period after `at` unless a spell
    /// comes first.
    pending: u32,
    at: u32,
}

/// The unit of [`ProbeTail`]'s time: 2²⁶ ns (67 ms), so that a `u32` spans 9 years of the
/// breaker's clock (it saturates there: a breaker older than that measures no new tail).
/// Periods and turnovers are seconds to minutes.
const TICK: u32 = 26;

/// Nanoseconds as whole microseconds, at least 1 (0 means none), saturating.
fn micros(nanos: u64) -> u32 {
    u32::try_from(nanos / 1_000).unwrap_or(u32::MAX).max(1)
}

/// Nanoseconds in ticks, rounded up (a quiet period ends no earlier than asked), saturating.
fn ticks(nanos: u64) -> u32 {
    u32::try_from(nanos.div_ceil(1 << TICK)).unwrap_or(u32::MAX)
}

impl ProbeTail {
    /// The settled tail, in nanoseconds, if any.
    pub(crate) fn settled(&self) -> Option<u64> {
        (self.settled != 0).then(|| u64::from(self.settled) * 1_000)
    }

    /// At a merge of samples while closed, `spell` saying whether the trip window's slow calls
    /// are a slow spell: a spell taints the baseline (for `turnover`, the baseline window);
    /// otherwise the pending tail settles once it is `period` old, and a new one is measured
    /// (from `slices`, the baseline's live histograms) when none is pending and the baseline
    /// holds no spell.
    pub(crate) fn watch<'a>(
        &mut self,
        now: u64,
        slices: impl Iterator<Item = &'a Histogram> + Clone,
        spell: bool,
        (period, turnover): (u64, u64),
    ) {
        if spell {
            self.taint(now, turnover);
            return;
        }
        let now_ticks = now >> TICK;
        if self.pending != 0 {
            if now_ticks < u64::from(self.at) + u64::from(ticks(period)) {
                return;
            }
            self.settled = self.pending;
            self.pending = 0;
            self.at = 0;
        }
        if now_ticks < u64::from(self.at) {
            return;
        }
        let samples: u64 = slices.clone().map(Histogram::total).sum();
        if samples < TAIL_SAMPLES {
            return;
        }
        if let Some(tail) = Histogram::quantile_of(slices, samples, TAIL_QUANTILE) {
            self.pending = micros(tail);
            self.at = u32::try_from(now_ticks).unwrap_or(u32::MAX);
        }
    }

    /// A sign of a slow spell at `now` (see the module docs): the pending tail may hold it, and
    /// so does every tail until the baseline has turned over (`turnover` later).
    pub(crate) fn taint(&mut self, now: u64, turnover: u64) {
        let quiet = ticks(now.saturating_add(turnover));
        if self.pending != 0 {
            self.pending = 0;
            self.at = quiet;
        } else {
            self.at = self.at.max(quiet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

    /// A 30 s period and a 5-minute turnover.
    const TIMES: (u64, u64) = (30 * SEC, 300 * SEC);

    fn histogram(fast: u32, slow: u32) -> Histogram {
        let mut h = Histogram::default();
        for _ in 0..fast {
            h.record(20 * MS);
        }
        for _ in 0..slow {
            h.record(100 * MS);
        }
        h
    }

    fn near(value: Option<u64>, expected: u64) -> bool {
        value.is_some_and(|v| (v as f64 / expected as f64 - 1.0).abs() <= 0.1)
    }

    #[test]
    fn a_tail_settles_one_period_after_it_was_measured() {
        let mut tail = ProbeTail::default();
        let healthy = [histogram(96, 4)];
        tail.watch(SEC, healthy.iter(), false, TIMES);
        assert_eq!(tail.settled(), None, "pending, not settled");
        tail.watch(30 * SEC, healthy.iter(), false, TIMES);
        assert_eq!(tail.settled(), None, "29 s old");
        // Settled a period later, to the 67 ms tick.
        tail.watch(32 * SEC, healthy.iter(), false, TIMES);
        assert!(near(tail.settled(), 100 * MS), "{:?}", tail.settled());
    }

    #[test]
    fn too_few_samples_measure_no_tail() {
        let mut tail = ProbeTail::default();
        let few = [histogram(98, 1)];
        tail.watch(SEC, few.iter(), false, TIMES);
        tail.watch(40 * SEC, few.iter(), false, TIMES);
        assert_eq!(tail.settled(), None);
    }

    #[test]
    fn a_spell_discards_the_pending_tail_and_quiets_the_baseline_s_turnover() {
        let mut tail = ProbeTail::default();
        let healthy = [histogram(1_000, 0)];
        tail.watch(SEC, healthy.iter(), false, TIMES);
        tail.watch(32 * SEC, healthy.iter(), false, TIMES);
        assert!(near(tail.settled(), 20 * MS));
        // A brownout's calls are in the baseline when its window shows it at 50 s.
        let browned = [histogram(1_000, 60)];
        tail.watch(45 * SEC, browned.iter(), false, TIMES);
        tail.watch(50 * SEC, browned.iter(), true, TIMES);
        tail.watch(100 * SEC, browned.iter(), false, TIMES);
        tail.watch(200 * SEC, browned.iter(), false, TIMES);
        assert!(
            near(tail.settled(), 20 * MS),
            "the brownout's tail never settles: {:?}",
            tail.settled()
        );
        // Once the baseline has turned over, tails are measured again.
        tail.watch(351 * SEC, healthy.iter(), false, TIMES);
        tail.watch(382 * SEC, [histogram(90, 10)].iter(), false, TIMES);
        assert!(near(tail.settled(), 20 * MS), "measured at 351 s");
        tail.watch(413 * SEC, healthy.iter(), false, TIMES);
        assert!(near(tail.settled(), 100 * MS), "measured at 382 s");
    }
}

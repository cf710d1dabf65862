//! The probe tail: the latency baseline's 99th percentile as it stood before anything that
//! tripped the breaker, the limit below which a healthy dependency's probe is never slow.
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
//! # Why "before the trip"
//! A brownout's own calls enter the baseline before it trips: a 30 s trip window needs 15 s of
//! a full brownout to reach the 50% slow ratio, 5% of a 5-minute baseline, and its p99 is then
//! the brownout's latency. A tail read at the trip would pass the brownout's probes. So the
//! tail probes stand on was measured at least one trip window (the *period*) before the trip:
//! a tail is measured, kept pending for a period, and only then *settled*; a trip discards the
//! pending one (it may hold the brownout's start) and no tail is measured again until the
//! baseline has turned over (one baseline window after the trip), since until then it still
//! holds the samples from around the trip.
//!
//! # What it can no longer see
//! - A brownout that trips more than a period after it began (under 50% slow calls at first,
//!   or a count window filling slowly) can lift the settled tail; the 10 × cap bounds it: a
//!   probe more than 10 × the normal latency (plus the margin) is still slow.
//! - A probe within the healthy tail plus the margin: the closed state's slow rule judges the
//!   dependency again once the probes close the breaker.
//! - A young breaker (no tail settled yet) judges its probes as before: the threshold in force,
//!   at least the normal latency plus the margin.

use super::histogram::Histogram;

/// The quantile of the baseline a probe must exceed (plus the margin) to be slow.
pub(crate) const TAIL_QUANTILE: f64 = 0.99;

/// Samples the baseline must hold before its 99th percentile is measured: fewer, and one
/// outlier is the tail.
pub(crate) const TAIL_SAMPLES: u64 = 100;

#[derive(Debug, Clone)]
pub(crate) struct ProbeTail {
    /// The tail probes stand on: measured at least a period before now, with no trip since.
    settled: Option<u64>,
    /// The tail last measured, and when: it settles a period later unless a trip comes first.
    pending: Option<(u64, u64)>,
    /// No tail is measured before this: the baseline still holds samples from around a trip.
    quiet_until: u64,
    /// The trip window's span in nanoseconds: a brownout that trips does so within it.
    period: u64,
    /// The baseline window in nanoseconds: a sample has left the baseline this long after.
    turnover: u64,
}

impl ProbeTail {
    pub(crate) fn new(period: u64, turnover: u64) -> ProbeTail {
        ProbeTail {
            settled: None,
            pending: None,
            quiet_until: 0,
            period: period.max(1),
            turnover,
        }
    }

    /// The settled tail, in nanoseconds, if any.
    pub(crate) fn settled(&self) -> Option<u64> {
        self.settled
    }

    /// At a merge of samples while closed: settles the pending tail once it is a period old,
    /// and measures a new one (from `slices`, the baseline's live histograms) when none is
    /// pending and the baseline holds nothing from around a trip.
    pub(crate) fn watch<'a>(
        &mut self,
        now: u64,
        slices: impl Iterator<Item = &'a Histogram> + Clone,
    ) {
        if let Some((tail, at)) = self.pending
            && now >= at.saturating_add(self.period)
        {
            self.settled = Some(tail);
            self.pending = None;
        }
        if self.pending.is_some() || now < self.quiet_until {
            return;
        }
        let samples: u64 = slices.clone().map(Histogram::total).sum();
        if samples < TAIL_SAMPLES {
            return;
        }
        self.pending = Histogram::quantile_of(slices, samples, TAIL_QUANTILE).map(|t| (t, now));
    }

    /// The breaker opened from closed at `now`: the pending tail may hold what tripped it, and
    /// so does every tail until the baseline has turned over.
    pub(crate) fn tripped(&mut self, now: u64) {
        self.pending = None;
        self.quiet_until = now.saturating_add(self.turnover);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

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
        let mut tail = ProbeTail::new(30 * SEC, 300 * SEC);
        let healthy = [histogram(96, 4)];
        tail.watch(SEC, healthy.iter());
        assert_eq!(tail.settled(), None, "pending, not settled");
        tail.watch(30 * SEC, healthy.iter());
        assert_eq!(tail.settled(), None, "29 s old");
        tail.watch(31 * SEC, healthy.iter());
        assert!(near(tail.settled(), 100 * MS), "{:?}", tail.settled());
    }

    #[test]
    fn too_few_samples_measure_no_tail() {
        let mut tail = ProbeTail::new(30 * SEC, 300 * SEC);
        let few = [histogram(98, 1)];
        tail.watch(SEC, few.iter());
        tail.watch(40 * SEC, few.iter());
        assert_eq!(tail.settled(), None);
    }

    #[test]
    fn a_trip_discards_the_pending_tail_and_quiets_the_baseline_s_turnover() {
        let mut tail = ProbeTail::new(30 * SEC, 300 * SEC);
        let healthy = [histogram(1_000, 0)];
        tail.watch(SEC, healthy.iter());
        tail.watch(31 * SEC, healthy.iter());
        assert!(near(tail.settled(), 20 * MS));
        // A brownout's calls are in the baseline when it trips at 50 s.
        let browned = [histogram(1_000, 60)];
        tail.watch(45 * SEC, browned.iter());
        tail.tripped(50 * SEC);
        tail.watch(100 * SEC, browned.iter());
        tail.watch(200 * SEC, browned.iter());
        assert!(
            near(tail.settled(), 20 * MS),
            "the brownout's tail never settles: {:?}",
            tail.settled()
        );
        // Once the baseline has turned over, tails are measured again.
        tail.watch(350 * SEC, healthy.iter());
        tail.watch(381 * SEC, [histogram(90, 10)].iter());
        assert!(near(tail.settled(), 20 * MS), "measured at 350 s");
        tail.watch(411 * SEC, healthy.iter());
        assert!(near(tail.settled(), 100 * MS), "measured at 381 s");
    }
}

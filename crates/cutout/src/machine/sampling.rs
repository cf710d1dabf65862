//! Which calls are timed, what each timed call weighs, and how far the slow-call estimate they
//! make can be off: the one place that decides all three.
//!
//! # Which calls are timed
//! A breaker with an absolute slow-call threshold times every call ([`Timing::All`]); one with
//! no slow-call rule times none ([`Timing::None`]). One whose relative slow-call rule alone
//! needs durations ([`Timing::Sampled`]) times every call while its trip window holds fewer
//! than [`EXACT_BELOW`] calls (8,192: 273 calls a second over the default 30 s window), and
//! above that one call in [`SAMPLE`] (eight), each by a draw of its core's line (a xorshift
//! sequence, not a count: calls that come in a cycle of eight kinds would otherwise have the
//! same kind timed every time). Which of the two applies is the *exact* flag the machine
//! publishes in the state word after every locked operation (`Machine::publish`), from the
//! window as that operation left it. Probes and ramp calls are always timed, and so is every
//! call admitted under a throttling word; none of those is drawn.
//!
//! # What each weighs
//! A call timed by a draw stands for [`SAMPLE`] calls: itself and the seven the draws passed
//! over while it was drawn. Every other timed call stands for itself. The weight is fixed when
//! the call is admitted (the permit carries it: `Ticket::drawn`) and travels with the call:
//! into the trip window, where each bucket (or count-window slot) keeps its slow calls timed by
//! a draw apart from those timed for certain, and into the counts of calls in flight, where a
//! line's `started` / `finished` totals keep the two kinds in the two halves of one word
//! ([`TRACKED_DRAWN`]). So a window that holds calls timed at both rates (a busy spell beside
//! a quiet one, either way round) weighs each by its own rate, however the window has moved
//! since, and a change of traffic never biases the estimate. (Taking the weight from the
//! window's size when it is read, instead, weighed calls timed one by one as eight once the
//! window had grown, and samples of a busy spell as one once it had slid out.)
//!
//! Successes counted off the lock need no weight: they are never slow, and the estimate below
//! only weighs slow calls. The latency baseline is not weighed either: each timed success is
//! one sample of it, whichever way it was timed, so across a change of traffic its quantile
//! leans towards the spell whose calls were all timed.
//!
//! # The estimate
//! With `N` calls in the window, `E` of its slow calls timed for certain and `k` timed by a
//! draw, the window's slow calls are estimated as `Ŝ = min(E + 8k, N)` and its slow share as
//! `Ŝ / N` ([`estimated_slow`], [`slow_share`]). Each of the `S_d` slow calls among those
//! that could only be timed by a draw was drawn with a chance of one in eight, whatever its
//! duration (the draw knows nothing of the call), so `E + 8k` is an unbiased estimate of the
//! slow calls (Horvitz–Thompson): `k` is binomial of `S_d` draws at 1/8, and the estimate
//! misses by `8k − S_d`. The cap never lets the slow calls exceed the calls, so a rate never
//! exceeds 1; `minimum_calls` counts the window's real calls, never weights.
//!
//! # The bound
//! The estimated share's standard deviation is `√(7 · S_d) / N`, at most `√(7 · share / N)`:
//! at most 0.021 in a window of 8,192 calls or more whose share is 0.5 or less, and 0.018
//! where it is 0.4. Such a window with a true share of 0.4 reads 0.5 with a chance of
//! 9.2 × 10⁻⁸ (the binomial tail of 512 draws of 3,277 at 1/8, 5.4 standard deviations). In
//! any window the estimated count is off by more than `t` with a chance of at most
//! `2 · exp(−t² / (14 · S_d + 14 · t / 3))` (Bernstein's inequality: a term per slow call,
//! of variance 7 and at most 7 from its mean); `tests/estimate.rs` holds every estimate to it
//! at a chance of 10⁻⁹.
//!
//! A window with fewer calls may still hold calls timed by a draw: a time window whose busy
//! spell is sliding out. There the standard deviation is larger (a last bucket of 300 busy
//! calls, 40 % slow, beside 290 quiet ones: 0.05), and a few slow samples of eight could read
//! as half the window. So the slow rule asks one more thing of an estimate before it trips
//! ([`beyond_sampling_error`]): that a window whose true share were four fifths of the ratio
//! ([`HELD_SHARE`]; 0.4 at the default 0.5) would give this many slow samples with a chance
//! below [`SAMPLING_CHANCE`] (10⁻⁷). Such a window has at most `M = ⌊0.8 · ratio · N⌋ − E`
//! slow calls that only a draw could time, and `P(Binomial(M, 1/8) ≥ k)` is bounded as the
//! chance test does (`trip.rs`). So **a window whose exact slow share is at most four fifths
//! of the ratio trips on an estimate with a chance below 10⁻⁷ each time it is judged, whatever
//! its size and however its calls were timed.** The test never holds back a window where
//! every call was timed (then `k = 0` and `E ≥ ratio · N`), nor one whose calls timed for
//! certain alone hold four fifths of the ratio's slow calls (`E ≥ 0.8 · ratio · N`), nor a
//! window of more than 4,064 / ratio calls (8,128 at the default ratio: every window above the
//! switch). What it costs: after a busy spell, a window of a few hundred calls whose slow ones
//! are mostly samples of eight waits for the calls timed one by one to show the slowness, at
//! most until the busy spell's buckets have slid out (one trip window); an estimate alone
//! cannot tell that from a couple of unlucky draws.
//!
//! # The chance test's counts
//! The relative rule's chance test (`trip.rs`) asks whether the window's slow calls are more
//! than the baseline's own share of slow calls would give. It reads the timed calls as they
//! are: `k` = slow timed calls, `n` = timed calls, unweighted. If the dependency is as it was
//! (each call slow with the baseline's chance, whether or not it is drawn), every timed call
//! is one independent trial at that chance, so `k` is binomial of `n` and the test keeps its
//! false-alarm level exactly. Weighed counts would not be binomial (a sample of eight moves
//! the count by eight): the test would take them for eight times the evidence they are. The
//! rate it tests against, the latency baseline's share of samples above the threshold, counts
//! each sample once as well, and under the same hypothesis every sample is a trial at that
//! chance too. After a change of traffic both lean towards the spell whose calls were all
//! timed: that can cost the test power (a breaker whose whole history is one window compares
//! the window with itself), never a false alarm.
//!
//! # Calls in flight
//! A call hung in flight (`inflight.rs`) counts as a slow call of its kind: one timed for
//! certain as one, a drawn one as eight (`with_hung`), and for the chance test and
//! `minimum_calls` as the one real call it is.

use crate::machine::trip::beyond_chance;
use crate::machine::window::Totals;
use crate::settings::Settings;

/// Below this many calls in the trip window a sampled breaker times every call; above it, one
/// in [`SAMPLE`]. Under loom the models reach the sampled path with a smaller figure, within
/// their budget of operations.
pub(crate) const EXACT_BELOW: u64 = if cfg!(loom) { 64 } else { 8_192 };

/// Above low traffic, one call in this many is timed, by a draw; each stands for this many.
pub(crate) const SAMPLE: u64 = 8;

/// The share of the ratio below which a window must not trip on an estimate (with a chance
/// of [`SAMPLING_CHANCE`]): four fifths, as a fraction (so that a window at exactly four
/// fifths of a ratio such as 0.5 is computed exactly).
pub(crate) const HELD_SHARE: (f64, f64) = (4.0, 5.0);

/// How unlikely, at [`HELD_SHARE`] of the ratio, an estimate's slow samples must be.
pub(crate) const SAMPLING_CHANCE: f64 = 1e-7;

/// What a line's `started` / `finished` totals add for a tracked call timed by a draw: the
/// high half of the word counts those, the low half calls timed for certain (see
/// [`tracked`]).
pub(crate) const TRACKED_DRAWN: u64 = 1 << 32;

/// Which calls a breaker times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timing {
    /// None: no rule needs durations.
    None,
    /// Every call: an absolute slow-call threshold is set.
    All,
    /// Only the relative slow-call rule needs durations: every call at low traffic, one in
    /// [`SAMPLE`] by a draw above it (probes and ramp calls always). A sample measures the
    /// baseline and estimates the window's slow share.
    Sampled,
}

impl Timing {
    /// The timing `settings` ask for.
    pub(crate) fn of(settings: &Settings) -> Timing {
        if settings.slow_call_threshold.is_some() {
            Timing::All
        } else if settings.relative_slow_calls().is_some() {
            Timing::Sampled
        } else {
            Timing::None
        }
    }
}

/// Whether a sampled breaker whose trip window holds `calls` times every call.
pub(crate) fn times_every_call(calls: u64) -> bool {
    calls < EXACT_BELOW
}

/// Whether a line's draw `x` (uniform over non-zero `u64`s) times its call: its top three bits
/// are zero, a chance of one in [`SAMPLE`].
#[inline]
pub(crate) fn drawn(x: u64) -> bool {
    x >> (64 - SAMPLE.trailing_zeros()) == 0
}

/// What a tracked call adds to its line's `started` and `finished` totals.
#[inline]
pub(crate) fn tracked_unit(drawn: bool) -> u64 {
    if drawn { TRACKED_DRAWN } else { 1 }
}

/// How a timed call admitted while closed was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    /// For certain: it weighs one.
    Certain,
    /// By a draw: it stands for [`SAMPLE`] calls.
    Drawn,
}

/// A timed call's measure, as its outcome brings it to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timed {
    /// Slower than the threshold in force.
    pub(crate) slow: bool,
    /// Timed by a draw.
    pub(crate) drawn: bool,
}

/// Calls hung in flight (see `inflight.rs`), by how they were timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hung {
    pub(crate) certain: u64,
    pub(crate) drawn: u64,
}

impl Hung {
    /// The real calls among them.
    pub(crate) fn calls(self) -> u64 {
        self.certain + self.drawn
    }
}

/// The tracked calls that `d` (a difference of `started` and `finished` totals, wrapping)
/// leaves in flight, by kind; a kind that comes out negative (more finished than started
/// before the mark) has none.
///
/// Exact as long as each kind's difference is within ±2³¹. It is at most the calls of that
/// kind in flight, and at least minus those that started after the mark and finished since:
/// calls of four slow thresholds or so. By Little's law, 2³¹ calls finishing within four
/// thresholds of about three normal latencies each would be some 180 million calls in flight
/// at once.
pub(crate) fn tracked(d: u64) -> Hung {
    // d = certain + drawn · 2³² (mod 2⁶⁴): the low half is `certain` modulo 2³², and what is
    // left after taking it away is `drawn` in the high half.
    let certain = i64::from(d as u32 as i32);
    let drawn = i64::from((d.wrapping_sub(certain as u64) >> 32) as u32 as i32);
    Hung {
        certain: certain.max(0) as u64,
        drawn: drawn.max(0) as u64,
    }
}

/// The window's slow calls as its timed calls estimate them: each slow call timed by a draw
/// for [`SAMPLE`], each other one for itself, never more than the window's calls.
pub(crate) fn estimated_slow(totals: Totals) -> u64 {
    totals
        .slow
        .saturating_add((SAMPLE - 1).saturating_mul(totals.slow_drawn))
        .min(totals.calls)
}

/// The estimated share of slow calls: [`estimated_slow`] over the calls (0 with none).
pub(crate) fn slow_share(totals: Totals) -> f64 {
    if totals.calls == 0 {
        0.0
    } else {
        estimated_slow(totals) as f64 / totals.calls as f64
    }
}

/// Whether the window's slow samples are more than a window at [`HELD_SHARE`] of `ratio`
/// would give by chance (see the module docs): always, where no slow call was drawn.
pub(crate) fn beyond_sampling_error(totals: Totals, ratio: f64) -> bool {
    let k = totals.slow_drawn;
    if k == 0 {
        return true;
    }
    let certain = totals.slow.saturating_sub(k);
    let held = (ratio * totals.calls as f64 * HELD_SHARE.0 / HELD_SHARE.1).floor() as u64;
    let Some(most) = held.checked_sub(certain).filter(|&most| most >= k) else {
        // No window at the held share could hold this many slow samples.
        return true;
    };
    beyond_chance(k, most, 1.0 / SAMPLE as f64, SAMPLING_CHANCE)
}

/// The window with calls hung in flight counted as slow calls of their kind: for the estimate,
/// a drawn one stands for [`SAMPLE`] calls (itself and those in flight beside it); for the
/// chance test, each is one timed call. (`minimum_calls` is asked of the real calls, see
/// `Machine::check_in_flight`.)
pub(crate) fn with_hung(totals: Totals, hung: Hung) -> Totals {
    Totals {
        calls: totals.calls + hung.certain + SAMPLE * hung.drawn,
        slow: totals.slow + hung.calls(),
        timed: totals.timed + hung.calls(),
        slow_drawn: totals.slow_drawn + hung.drawn,
        ..totals
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn window(calls: u64, certain: u64, drawn: u64) -> Totals {
        Totals {
            calls,
            slow: certain + drawn,
            timed: calls,
            slow_drawn: drawn,
            ..Totals::default()
        }
    }

    #[test]
    fn a_sample_stands_for_eight_and_never_for_more_than_the_window() {
        assert_eq!(estimated_slow(window(100, 10, 3)), 34);
        assert_eq!(slow_share(window(100, 10, 3)), 0.34);
        assert_eq!(
            estimated_slow(window(20, 2, 3)),
            20,
            "26 estimated, 20 calls"
        );
        assert_eq!(slow_share(window(20, 2, 3)), 1.0);
        assert_eq!(slow_share(Totals::default()), 0.0);
    }

    #[test]
    fn a_draw_times_one_call_in_eight() {
        assert!(drawn(1) && drawn(u64::MAX >> 3));
        assert!(!drawn(u64::MAX >> 2) && !drawn(u64::MAX));
    }

    #[test]
    fn tracked_calls_of_each_kind_come_back_from_one_word() {
        let started = |certain: u64, drawn: u64| certain + drawn * TRACKED_DRAWN;
        let d = started(5, 3).wrapping_sub(started(2, 1));
        assert_eq!(
            tracked(d),
            Hung {
                certain: 3,
                drawn: 2
            }
        );
        // More finished than started before the mark, in one kind and not the other.
        let d = started(2, 7).wrapping_sub(started(6, 1));
        assert_eq!(
            tracked(d),
            Hung {
                certain: 0,
                drawn: 6
            }
        );
        let d = started(9, 1).wrapping_sub(started(1, 4));
        assert_eq!(
            tracked(d),
            Hung {
                certain: 8,
                drawn: 0
            }
        );
        // Totals that wrapped long ago (each kind past 2³²) still differ by what is in flight.
        let base = u64::MAX - 3;
        let d = base
            .wrapping_add(started(40, 2))
            .wrapping_sub(base.wrapping_add(started(38, 0)));
        assert_eq!(
            tracked(d),
            Hung {
                certain: 2,
                drawn: 2
            }
        );
    }

    #[test]
    fn a_few_slow_samples_in_a_small_window_do_not_trip_it() {
        // After a busy spell slid out: 30 calls, two slow samples (16 estimated slow calls).
        let few = window(30, 0, 2);
        assert!(slow_share(few) >= 0.5);
        assert!(!beyond_sampling_error(few, 0.5));
        // The same share, shown by calls timed one by one, is no estimate.
        assert!(beyond_sampling_error(window(30, 16, 0), 0.5));
        // Calls timed for certain holding four fifths of the ratio's slow calls: never held.
        assert!(beyond_sampling_error(window(30, 12, 1), 0.5));
    }

    #[test]
    fn large_windows_are_never_held_back() {
        // Above 4,064 / ratio calls, an estimate at the ratio (the fewest samples that reach
        // it, beside any number of slow calls timed for certain) always passes.
        for ratio in [0.25, 0.5, 1.0] {
            let from = (4_064.0 / ratio) as u64 + 1;
            for calls in (from..from + 40_000).step_by(97) {
                let slow = (ratio * calls as f64).ceil() as u64;
                for certain in (0..slow).step_by((slow / 16).max(1) as usize) {
                    let k = (slow - certain).div_ceil(SAMPLE);
                    let at_ratio = window(calls, certain, k);
                    assert!(slow_share(at_ratio) >= ratio);
                    assert!(
                        beyond_sampling_error(at_ratio, ratio),
                        "{k} samples and {certain} slow calls of {calls} at {ratio}"
                    );
                }
            }
        }
        // Just below: held back (every slow call a sample, at the ratio).
        assert!(!beyond_sampling_error(window(8_128, 0, 508), 0.5));
        assert!(slow_share(window(8_128, 0, 508)) >= 0.5);
    }

    #[test]
    fn hung_calls_weigh_as_their_kind() {
        let totals = with_hung(
            window(100, 10, 0),
            Hung {
                certain: 3,
                drawn: 2,
            },
        );
        assert_eq!((totals.calls, totals.slow, totals.timed), (119, 15, 105));
        assert_eq!(estimated_slow(totals), 13 + 16);
    }
}

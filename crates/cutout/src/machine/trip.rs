//! Trip conditions over a window: absolute ratios, failures relative to the measured normal
//! rate, and slow calls. (The consecutive-failure trip needs no window: see `machine/mod.rs`.)

use crate::event::OpenReason;
use crate::machine::window::Totals;
use crate::settings::Settings;

/// How unlikely, under the baseline, the window's failures must be before the relative rule
/// calls them more than chance.
const CHANCE: f64 = 1e-4;

fn ratio(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

/// The failure baseline as a trip reads it: outcomes and failures over its window (armed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Normal {
    pub(crate) outcomes: u64,
    pub(crate) failures: u64,
}

impl Normal {
    pub(crate) fn rate(self) -> f64 {
        ratio(self.failures, self.outcomes)
    }
}

/// Whether `totals` open the breaker, given the failure baseline (`None` while unarmed).
/// `real_calls` is how many calls the window holds for `minimum_calls`: `totals.calls` except
/// where an estimate of calls in flight is added. Ratios are evaluated only once the window
/// holds the minimum calls; thresholds are inclusive, except the relative one, which must be
/// exceeded.
pub(crate) fn ratio_trip(
    settings: &Settings,
    totals: Totals,
    real_calls: u64,
    normal: Option<Normal>,
) -> Option<OpenReason> {
    if totals.calls == 0 || real_calls < u64::from(settings.effective_minimum_calls()) {
        return None;
    }
    let rate = ratio(totals.failures, totals.calls);
    if settings.failure_ratio.is_some_and(|limit| rate >= limit) {
        return Some(OpenReason::FailureRatio);
    }
    if let (Some(relative), Some(normal)) = (settings.relative_failures(), normal)
        && totals.failures >= 2
        && rate >= relative.floor
        && rate > relative.multiple * normal.rate()
        && beyond_chance(totals, normal)
    {
        return Some(OpenReason::FailuresAboveNormal);
    }
    if totals.slow > 0 && ratio(totals.slow, totals.calls) >= settings.slow_call_ratio {
        return Some(OpenReason::SlowCallRatio);
    }
    None
}

/// Whether the window's failures are more than chance at the baseline's rate: seeing that many
/// in that many calls is less likely than [`CHANCE`]. The rate is the baseline's outside the
/// window (which it includes), counted with one failure more so that a baseline that has seen
/// none yet still allows for some; the tail is Poisson's, which for rates this small is the
/// binomial's within a few percent. At high traffic the floor rate decides before this does;
/// at low traffic it keeps a pair of ordinary failures in a short window from tripping (at 1
/// call a second, a 0.1% error rate and a 30 s window, two failures in a window come about
/// every ten pod-hours; four, about once in nine pod-years).
fn beyond_chance(totals: Totals, normal: Normal) -> bool {
    let outcomes = normal.outcomes.saturating_sub(totals.calls);
    let failures = normal.failures.saturating_sub(totals.failures);
    let expected = totals.calls as f64 * (failures + 1) as f64 / (outcomes + 1) as f64;
    // P(X >= k) = 1 - sum_{i<k} e^-λ λ^i / i!; far in the tail it is certainly below.
    let k = totals.failures;
    if k as f64 > expected + 10.0 * expected.sqrt() + 30.0 {
        return true;
    }
    let mut term = (-expected).exp();
    let mut below = 0.0;
    for i in 0..k {
        below += term;
        term *= expected / (i + 1) as f64;
    }
    1.0 - below < CHANCE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(calls: u64, failures: u64) -> Totals {
        Totals {
            calls,
            failures,
            slow: 0,
        }
    }

    #[test]
    fn ordinary_failures_at_low_traffic_are_chance() {
        // 1 call a second, 0.1% errors: 270 outcomes outside a 30 s window, none failed.
        let normal = |failures| Normal {
            outcomes: 300,
            failures,
        };
        assert!(!beyond_chance(totals(30, 2), normal(2)));
        assert!(!beyond_chance(totals(30, 3), normal(3)));
        assert!(beyond_chance(totals(30, 4), normal(4)));
        // 3 failures in 20 calls against one in 1,000 before them.
        let normal = Normal {
            outcomes: 1_020,
            failures: 4,
        };
        assert!(beyond_chance(totals(20, 3), normal));
        // An outage: every call fails.
        assert!(beyond_chance(
            totals(500, 500),
            Normal {
                outcomes: 10_000,
                failures: 600
            }
        ));
    }
}

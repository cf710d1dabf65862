//! Trip conditions over a window: absolute ratios, failures relative to the measured normal
//! rate, and slow calls. (The consecutive-failure trip needs no window: see `machine.rs`.)

use crate::event::OpenReason;
use crate::settings::Settings;
use crate::window::Totals;

fn ratio(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

/// Whether `totals` open the breaker, given the baseline failure rate (`None` while unarmed).
/// Ratios are evaluated only once the window holds the minimum calls; thresholds are
/// inclusive, except the relative one, which must be exceeded.
pub(crate) fn ratio_trip(
    settings: &Settings,
    totals: Totals,
    normal_rate: Option<f64>,
) -> Option<OpenReason> {
    if totals.calls == 0 || totals.calls < u64::from(settings.effective_minimum_calls()) {
        return None;
    }
    let rate = ratio(totals.failures, totals.calls);
    if settings.failure_ratio.is_some_and(|limit| rate >= limit) {
        return Some(OpenReason::FailureRatio);
    }
    if let (Some(relative), Some(normal)) = (settings.relative_failures(), normal_rate)
        && totals.failures >= 2
        && rate >= relative.floor
        && rate > relative.multiple * normal
    {
        return Some(OpenReason::FailuresAboveNormal);
    }
    if totals.slow > 0 && ratio(totals.slow, totals.calls) >= settings.slow_call_ratio {
        return Some(OpenReason::SlowCallRatio);
    }
    None
}

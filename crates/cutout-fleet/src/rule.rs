//! [`FleetRule`]: when the fleet's window opens a pod's closed breaker.

use cutout::Settings;

use crate::error::{FleetError, Kind};

/// When the fleet's counts for a breaker open this pod's closed breaker (through
/// [`Breaker::trip_on_signal`](cutout::Breaker::trip_on_signal)). Every part defaults to the
/// breaker's own settings, so that the fleet judges the fleet's window as the breaker judges
/// its own:
///
/// - minimum calls: the breaker's [`minimum_calls`](Settings::minimum_calls);
/// - failure ratio: the breaker's [`failure_ratio`](Settings::failure_ratio) if set, else 0.5
///   (a breaker that trips only on consecutive failures or on its measured baseline still has
///   a fleet rule, and 0.5 never fires on a healthy fleet);
/// - slow-call ratio: the breaker's [`slow_call_ratio`](Settings::slow_call_ratio) when it has
///   an absolute [`slow_call_threshold`](Settings::slow_call_threshold), else off (the
///   relative slow-call rule measures each pod against its own baseline, and its counts are
///   estimates above 8,192 calls a window; opt in with [`FleetRule::slow_call_ratio`]).
///
/// The fleet's window is the sum of the windows of the pods whose breaker is closed and
/// whose report is fresh, this pod's own counts included once (read locally, not back from
/// Redis). Thresholds are inclusive, as the breaker's are.
///
/// ```
/// use cutout::Settings;
/// use cutout_fleet::FleetRule;
///
/// let settings = Settings::builder().minimum_calls(30).build()?;
/// let rule = FleetRule::new().failure_ratio(0.6).resolve(&settings)?;
/// assert_eq!(rule.minimum_calls, 30);
/// assert_eq!(rule.failure_ratio, 0.6);
/// assert_eq!(rule.slow_call_ratio, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FleetRule {
    minimum_calls: Option<u32>,
    failure_ratio: Option<f64>,
    slow_call_ratio: Option<Option<f64>>,
}

/// A [`FleetRule`] with every default taken from a breaker's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ResolvedRule {
    /// Calls the fleet's window must hold before a ratio is judged (at least 1).
    pub minimum_calls: u64,
    /// The failure ratio, in (0, 1], at which the fleet trips a pod.
    pub failure_ratio: f64,
    /// The slow-call ratio, in (0, 1], at which the fleet trips a pod; `None`: slow calls do
    /// not trip it.
    pub slow_call_ratio: Option<f64>,
}

/// Which threshold the fleet's window reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    FailureRatio,
    SlowCallRatio,
}

impl Trigger {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::FailureRatio => "failure_ratio",
            Trigger::SlowCallRatio => "slow_call_ratio",
        }
    }
}

impl FleetRule {
    /// Every part from the breaker's settings (see the [type's docs](FleetRule)).
    pub fn new() -> FleetRule {
        FleetRule::default()
    }

    /// The calls the fleet's window must hold (at least 1).
    pub fn minimum_calls(mut self, calls: u32) -> FleetRule {
        self.minimum_calls = Some(calls);
        self
    }

    /// The failure ratio at which the fleet trips a pod, in (0, 1].
    pub fn failure_ratio(mut self, ratio: f64) -> FleetRule {
        self.failure_ratio = Some(ratio);
        self
    }

    /// The slow-call ratio at which the fleet trips a pod, in (0, 1]; `None` turns the slow
    /// rule off, whatever the breaker's settings.
    pub fn slow_call_ratio(mut self, ratio: Option<f64>) -> FleetRule {
        self.slow_call_ratio = Some(ratio);
        self
    }

    /// The rule in force for a breaker with these settings. An error names the part out of
    /// range.
    pub fn resolve(&self, settings: &Settings) -> Result<ResolvedRule, FleetError> {
        let minimum_calls = self.minimum_calls.unwrap_or(settings.minimum_calls());
        if minimum_calls == 0 {
            return Err(FleetError::new(
                Kind::Invalid,
                "minimum_calls = 0, allowed 1..",
            ));
        }
        let failure_ratio = self
            .failure_ratio
            .or(settings.failure_ratio())
            .unwrap_or(0.5);
        check_ratio("failure_ratio", failure_ratio)?;
        let slow_call_ratio = match self.slow_call_ratio {
            Some(ratio) => ratio,
            None => settings
                .slow_call_threshold()
                .map(|_| settings.slow_call_ratio()),
        };
        if let Some(ratio) = slow_call_ratio {
            check_ratio("slow_call_ratio", ratio)?;
        }
        Ok(ResolvedRule {
            minimum_calls: u64::from(minimum_calls),
            failure_ratio,
            slow_call_ratio,
        })
    }
}

fn check_ratio(name: &str, ratio: f64) -> Result<(), FleetError> {
    if ratio.is_finite() && ratio > 0.0 && ratio <= 1.0 {
        Ok(())
    } else {
        Err(FleetError::new(
            Kind::Invalid,
            format!("{name} = {ratio}, allowed (0, 1]"),
        ))
    }
}

impl ResolvedRule {
    /// Which threshold, if any, a window of these counts reaches.
    pub(crate) fn fires(&self, calls: u64, failures: u64, slow: u64) -> Option<Trigger> {
        if calls == 0 || calls < self.minimum_calls {
            return None;
        }
        // Counts far below 2^53: the ratios are exact enough.
        let calls_f = calls as f64;
        if failures as f64 / calls_f >= self.failure_ratio {
            return Some(Trigger::FailureRatio);
        }
        match self.slow_call_ratio {
            Some(ratio) if slow as f64 / calls_f >= ratio => Some(Trigger::SlowCallRatio),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn defaults_come_from_the_breaker() {
        let rule = FleetRule::new().resolve(&Settings::default()).unwrap();
        assert_eq!(rule.minimum_calls, 20);
        assert_eq!(rule.failure_ratio, 0.5);
        assert_eq!(rule.slow_call_ratio, None);

        let settings = Settings::builder()
            .failure_ratio(Some(0.3))
            .slow_call_threshold(Some(Duration::from_millis(200)))
            .slow_call_ratio(0.8)
            .minimum_calls(50)
            .build()
            .unwrap();
        let rule = FleetRule::new().resolve(&settings).unwrap();
        assert_eq!(
            (rule.minimum_calls, rule.failure_ratio, rule.slow_call_ratio),
            (50, 0.3, Some(0.8))
        );
        let rule = FleetRule::new()
            .slow_call_ratio(None)
            .resolve(&settings)
            .unwrap();
        assert_eq!(rule.slow_call_ratio, None);
    }

    #[test]
    fn out_of_range_parts_are_named() {
        let settings = Settings::default();
        for (rule, name) in [
            (FleetRule::new().minimum_calls(0), "minimum_calls"),
            (FleetRule::new().failure_ratio(0.0), "failure_ratio"),
            (FleetRule::new().failure_ratio(1.5), "failure_ratio"),
            (FleetRule::new().failure_ratio(f64::NAN), "failure_ratio"),
            (
                FleetRule::new().slow_call_ratio(Some(-1.0)),
                "slow_call_ratio",
            ),
        ] {
            let error = rule.resolve(&settings).unwrap_err();
            assert!(error.is_invalid(), "{error}");
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn thresholds_are_inclusive_and_wait_for_the_minimum() {
        let rule = ResolvedRule {
            minimum_calls: 40,
            failure_ratio: 0.5,
            slow_call_ratio: Some(0.5),
        };
        assert_eq!(rule.fires(39, 39, 0), None, "below the minimum");
        assert_eq!(rule.fires(40, 20, 0), Some(Trigger::FailureRatio));
        assert_eq!(rule.fires(40, 19, 0), None);
        assert_eq!(rule.fires(40, 0, 20), Some(Trigger::SlowCallRatio));
        assert_eq!(rule.fires(0, 0, 0), None);
        let no_slow = ResolvedRule {
            slow_call_ratio: None,
            ..rule
        };
        assert_eq!(no_slow.fires(40, 0, 40), None);
    }

    #[test]
    fn a_healthy_fleet_does_not_fire() {
        let rule = FleetRule::new().resolve(&Settings::default()).unwrap();
        // 20 pods × 20 calls at 1% failures.
        assert_eq!(rule.fires(400, 4, 0), None);
    }
}

//! Relative trips: slow calls and failures as multiples of what the breaker measured, instead
//! of numbers guessed per dependency.

use std::time::Duration;

/// Slow calls relative to the measured normal latency: a call is slow when it takes more than
/// `multiple` × the `quantile` of successful durations over the baseline window, and more than
/// a floor (default 1 ms: scheduling noise is not a brownout, however fast the dependency).
/// Composes with an absolute threshold: a call is slow when above either.
///
/// When this rule alone needs durations, a breaker times every call while its trip window
/// holds fewer than 8,192 calls (273 calls a second over the default 30 s), and every probe
/// and ramp call. Above that it times one call in eight, drawn at random on each core's line:
/// the sample feeds the baseline, and each timed call weighs in the window as many calls as it
/// stood for when it was timed (one below the switch, eight above), so a window holding calls
/// timed at both rates, after a change of traffic either way, is not biased; the estimated slow
/// calls never exceed the window's calls, and `minimum_calls` counts real calls. In a window of
/// 8,192 calls or more the estimated share's standard deviation is at most √(7 × share /
/// calls): 0.021 at a share of 0.5, 0.018 at 0.4. In any window, a slow-call trip on an
/// estimate also needs its slow samples to be more than a window at four fifths of the ratio
/// would give by chance (below 1 in 10 million): so a window whose exact share is 0.4 or less
/// (under the default ratio of 0.5) trips with a chance below 1 in 10 million each time it is
/// judged, however its calls were timed; nearer the ratio it is as likely to trip a little
/// early as a little late. Calls hung in flight count as slow calls of their kind. An absolute
/// threshold makes every call timed. (The rules and their bound: `machine/sampling.rs`.)
///
/// ```
/// use std::time::Duration;
/// use cutout::{Settings, SlowCalls};
///
/// let settings = Settings::builder()
///     .slow_calls(Some(SlowCalls::above(3.0).quantile(0.5).window(Duration::from_secs(600))))
///     .build()?;
/// assert_eq!(settings.slow_calls().unwrap().multiple(), 3.0);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowCalls {
    pub(crate) multiple: f64,
    pub(crate) quantile: f64,
    pub(crate) window: Option<Duration>,
    pub(crate) floor: Duration,
}

impl SlowCalls {
    /// Slow above `multiple` × the median over the default baseline window.
    pub fn above(multiple: f64) -> SlowCalls {
        SlowCalls {
            multiple,
            quantile: 0.5,
            window: None,
            floor: Duration::from_millis(1),
        }
    }

    /// The duration no call is slow below, whatever the baseline (default 1 ms). Without it, a
    /// dependency answering in microseconds would see its calls called slow by a context
    /// switch. Zero turns the floor off.
    pub fn floor(mut self, floor: Duration) -> SlowCalls {
        self.floor = floor;
        self
    }

    /// The floor below which no call is slow.
    pub fn floor_duration(&self) -> Duration {
        self.floor
    }

    /// The quantile that counts as normal, in (0, 0.5] (default 0.5). A brownout moves it
    /// only once it covers more than this share of the baseline window.
    pub fn quantile(mut self, quantile: f64) -> SlowCalls {
        self.quantile = quantile;
        self
    }

    /// How far back the baseline reaches. Unset, it is 10 × the trip window (5 min for the
    /// default 30 s), widened when needed so it always outlasts an outage's trip window.
    pub fn window(mut self, window: Duration) -> SlowCalls {
        self.window = Some(window);
        self
    }

    /// The multiple of normal above which a call is slow.
    pub fn multiple(&self) -> f64 {
        self.multiple
    }

    /// The quantile that counts as normal.
    pub fn normal_quantile(&self) -> f64 {
        self.quantile
    }

    /// The configured baseline window, if any.
    pub fn configured_window(&self) -> Option<Duration> {
        self.window
    }
}

/// Failures relative to the measured normal failure rate: trips when the trip window's rate
/// is above `multiple` × the baseline rate, and at least `floor`, with at least two failures
/// in the window and the baseline armed (100 outcomes). An absolute failure ratio stays a
/// ceiling: this trip can only fire sooner.
///
/// ```
/// use cutout::{Failures, Settings};
///
/// let settings = Settings::builder()
///     .failures(Some(Failures::above(5.0).floor(0.05)))
///     .failure_ratio(Some(0.5))
///     .build()?;
/// assert_eq!(settings.failures().unwrap().floor_rate(), 0.05);
/// # Ok::<(), cutout::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Failures {
    pub(crate) multiple: f64,
    pub(crate) floor: f64,
    pub(crate) window: Option<Duration>,
}

impl Failures {
    /// Trips above `multiple` × the measured rate, with a floor of 0.05.
    pub fn above(multiple: f64) -> Failures {
        Failures {
            multiple,
            floor: 0.05,
            window: None,
        }
    }

    /// The rate, in (0, 1], below which nothing is wrong whatever the baseline (default
    /// 0.05): five times nearly zero is nearly zero.
    pub fn floor(mut self, floor: f64) -> Failures {
        self.floor = floor;
        self
    }

    /// How far back the baseline reaches. Unset, it is 10 × the trip window, widened to
    /// `multiple` × the trip window when that is longer.
    pub fn window(mut self, window: Duration) -> Failures {
        self.window = Some(window);
        self
    }

    /// The multiple of the normal rate above which the breaker trips.
    pub fn multiple(&self) -> f64 {
        self.multiple
    }

    /// The floor rate.
    pub fn floor_rate(&self) -> f64 {
        self.floor
    }

    /// The configured baseline window, if any.
    pub fn configured_window(&self) -> Option<Duration> {
        self.window
    }
}

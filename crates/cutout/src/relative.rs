//! Relative trips: slow calls and failures as multiples of what the breaker measured, instead
//! of numbers guessed per dependency.
//!
//! Why a relative slow call needs a margin as well as a multiple, and what it can no longer
//! see: [`SlowCalls`], "Judging latency".

use std::time::Duration;

/// Slow calls relative to the measured normal latency: a call is slow when it takes more than
/// `multiple` × the `quantile` of successful durations over the baseline window, more than
/// that normal latency plus a margin (default 50 ms: what a caller adds by itself, see
/// "Judging latency" below), and more than a floor (default 1 ms).
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
/// # Judging latency: what the caller adds is not the dependency's fault
///
/// A call's duration is the dependency's time plus the caller's: its own CPU saturation and
/// scheduler lag (every dependency it calls gets slower at once), a new connection's setup
/// (TCP, TLS) and a change of traffic pattern (busy pooled connections giving way to light
/// serial ones, each opening a connection). Those add a roughly *constant* delay to every call,
/// whatever the dependency's own latency. Against a fast dependency a constant delay is a
/// large multiple: 3 × a 0.1 ms median is crossed by a context switch, a TLS handshake or a
/// caller at 100% CPU, and a multiple alone then blames a healthy dependency for its caller.
///
/// So a relative slow call must be slow in both senses: above `multiple` × the normal latency
/// **and** above the normal latency plus an absolute **margin** (default 50 ms,
/// [`SlowCalls::margin`]). The margin is the delay the caller may add by itself without
/// blaming the dependency; 50 ms covers a TLS handshake on a local network, a saturated
/// caller's run-queue waits and a CPU-throttled container's stalls (a cgroup at its quota
/// waits out the rest of a 100 ms period, about half of it on average), while a real
/// brownout of anything slower than 25 ms is judged by the multiple exactly as before (for
/// a normal latency above 25 ms, 3 × normal is already more than normal + 50 ms).
///
/// What the rule can then no longer see: a slowdown that adds less than the margin to a fast
/// dependency (a 2 ms cache answering in 40 ms, twenty times its normal). That takes a
/// latency budget the operator knows: an absolute
/// [`slow_call_threshold`](crate::SettingsBuilder::slow_call_threshold), which is judged as it
/// is while closed, margin or not (a call is slow above either threshold). A margin of zero gives back the
/// multiple alone.
///
/// A half-open probe opens a fresh connection more often than not (the pool idled out during
/// the break), and it is one sample, so it is slow only above a limit neither a fresh
/// connection nor the healthy dependency's own tail crosses by itself: the threshold in
/// force, raised to at least the *probe tail* plus the margin. The probe tail is the
/// baseline's 99th percentile, measured only while the baseline holds no slow spell (a trip
/// window whose slow calls are beyond chance, or an opening on slow evidence, in the last
/// baseline window) and used a trip window after it was measured, so a brownout's own calls,
/// which enter the baseline before it trips, cannot lift it; capped at 10 × the normal
/// latency. A young breaker with none settled yet uses the normal latency.
/// That changes an absolute threshold set close above a fast dependency (10 ms on a 2 ms one
/// is crossed by a TLS handshake alone; with no relative rule configured the margin is 50
/// ms), and the relative one for a dependency whose tail is long (p99 at 5 × its median:
/// against 3 × the median, 3.5% of a healthy dependency's probes were slow). What it can no
/// longer see: a slowdown within the healthy tail plus the margin, which the closed state's
/// slow rule judges once the probes close the breaker. Ramp calls come after the probes, on
/// warm connections, and are judged as closed ones are. A slow probe re-opens the breaker exactly as a failed one does (the same grown break,
/// never more): it proved the dependency answers, not that it is worse than down.
///
/// # Example
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
    /// The floor in nanoseconds, saturating (as the margin).
    pub(crate) floor: u64,
    /// The margin in nanoseconds, saturating (a `u64` rather than a `Duration`: 8 bytes
    /// fewer in every breaker, which the 4 KiB budget of a default breaker needs).
    pub(crate) margin: u64,
}

/// The default [`SlowCalls::margin`].
pub(crate) const DEFAULT_SLOW_MARGIN: Duration = Duration::from_millis(50);

impl SlowCalls {
    /// Slow above `multiple` × the median over the default baseline window.
    pub fn above(multiple: f64) -> SlowCalls {
        SlowCalls {
            multiple,
            quantile: 0.5,
            window: None,
            floor: 1_000_000,
            margin: DEFAULT_SLOW_MARGIN.as_nanos() as u64,
        }
    }

    /// How much longer than normal a call must take, besides `multiple` × normal, to be slow
    /// (default 50 ms). It is the delay a caller may add by itself (its CPU saturation, a new
    /// connection's setup, a change of traffic pattern) without blaming the dependency: see
    /// "Judging latency" on [`SlowCalls`] for why, and for what the rule can then no longer see. Zero
    /// judges by the multiple alone.
    pub fn margin(mut self, margin: Duration) -> SlowCalls {
        self.margin = u64::try_from(margin.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The margin above normal latency a slow call must also exceed.
    pub fn margin_duration(&self) -> Duration {
        Duration::from_nanos(self.margin)
    }

    /// The relative slow threshold for a normal latency of `normal`: the largest of
    /// `multiple` × normal, normal + margin, and the floor, saturating at [`Duration::MAX`]
    /// (never below `normal`).
    pub fn threshold_for(&self, normal: Duration) -> Duration {
        match u64::try_from(normal.as_nanos()) {
            Ok(nanos) => Duration::from_nanos(self.threshold_nanos(nanos)).max(normal),
            // Beyond what the breaker measures (584 years): in saturating arithmetic.
            Err(_) => Duration::try_from_secs_f64(normal.as_secs_f64() * self.multiple)
                .unwrap_or(Duration::MAX)
                .max(normal.saturating_add(self.margin_duration()))
                .max(self.floor_duration()),
        }
    }

    /// [`threshold_for`](Self::threshold_for) in nanoseconds, saturating.
    pub(crate) fn threshold_nanos(&self, normal: u64) -> u64 {
        let multiple = normal as f64 * self.multiple;
        let multiple = if multiple >= u64::MAX as f64 {
            u64::MAX
        } else {
            multiple as u64
        };
        multiple
            .max(normal.saturating_add(self.margin))
            .max(self.floor)
    }

    /// The duration no call is slow below, whatever the baseline (default 1 ms). Without it, a
    /// dependency answering in microseconds would see its calls called slow by a context
    /// switch. Zero turns the floor off.
    pub fn floor(mut self, floor: Duration) -> SlowCalls {
        self.floor = u64::try_from(floor.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The floor below which no call is slow.
    pub fn floor_duration(&self) -> Duration {
        Duration::from_nanos(self.floor)
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

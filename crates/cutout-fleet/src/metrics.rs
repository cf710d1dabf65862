//! The series the `metrics` feature records, with their names, types and labels.
//!
//! With the feature on, a fleet registers these through the `metrics` facade when it is built
//! (and a breaker's trip counter when it is watched), with the recorder installed then:
//! install the exporter's recorder first. Each is described, so a Prometheus exposition
//! carries a `# HELP` line for it.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `cutout_fleet_connected` | gauge | `pod` | 1 while the last round with Redis succeeded, 0 while degraded (and before the first round) |
//! | `cutout_fleet_failed_rounds_total` | counter | `pod` | rounds and connects that failed (unreachable, timed out, refused) |
//! | `cutout_fleet_trips_total` | counter | `pod`, `breaker` | breakers this pod opened on the fleet's counts |
//! | `cutout_fleet_breaks_ended_total` | counter | `pod`, `breaker` | breaks this pod ended early on a peer's recovery (fleet recovery) |

/// 1 while connected: `cutout_fleet_connected{pod}`.
pub const CONNECTED: &str = "cutout_fleet_connected";
/// Failed rounds: `cutout_fleet_failed_rounds_total{pod}`.
pub const FAILED_ROUNDS: &str = "cutout_fleet_failed_rounds_total";
/// Fleet trips: `cutout_fleet_trips_total{pod, breaker}`.
pub const TRIPS: &str = "cutout_fleet_trips_total";

/// Breaks ended on a peer's recovery: `cutout_fleet_breaks_ended_total{pod, breaker}`.
pub const BREAKS_ENDED: &str = "cutout_fleet_breaks_ended_total";

/// Every series, as (name, type, HELP text): the descriptions the feature registers.
pub const ALL: [(&str, &str, &str); 4] = [
    (
        CONNECTED,
        "gauge",
        "1 while the fleet's last round with Redis succeeded, 0 while breakers decide locally.",
    ),
    (
        FAILED_ROUNDS,
        "counter",
        "Rounds and connects with Redis that failed (unreachable, timed out, refused).",
    ),
    (
        TRIPS,
        "counter",
        "Breakers this pod opened because the fleet's window reached the fleet rule.",
    ),
    (
        BREAKS_ENDED,
        "counter",
        "Breaks this pod ended early because a peer's probes closed its breaker (fleet recovery).",
    ),
];

/// The handles of one fleet, registered at build.
#[cfg(feature = "metrics")]
pub(crate) struct Handles {
    pub(crate) connected: metrics::Gauge,
    pub(crate) failed_rounds: metrics::Counter,
}

#[cfg(feature = "metrics")]
impl Handles {
    pub(crate) fn new(pod: &str) -> Handles {
        metrics::describe_gauge!(CONNECTED, ALL[0].2);
        metrics::describe_counter!(FAILED_ROUNDS, ALL[1].2);
        metrics::describe_counter!(TRIPS, ALL[2].2);
        metrics::describe_counter!(BREAKS_ENDED, ALL[3].2);
        let connected = metrics::gauge!(CONNECTED, "pod" => pod.to_owned());
        connected.set(0.0);
        Handles {
            connected,
            failed_rounds: metrics::counter!(FAILED_ROUNDS, "pod" => pod.to_owned()),
        }
    }
}

/// A watched breaker's trip counter.
#[cfg(feature = "metrics")]
pub(crate) fn trips(pod: &str, breaker: &str) -> metrics::Counter {
    metrics::counter!(TRIPS, "pod" => pod.to_owned(), "breaker" => breaker.to_owned())
}

/// A watched breaker's counter of breaks ended on a peer's recovery.
#[cfg(feature = "metrics")]
pub(crate) fn releases(pod: &str, breaker: &str) -> metrics::Counter {
    metrics::counter!(BREAKS_ENDED, "pod" => pod.to_owned(), "breaker" => breaker.to_owned())
}

//! The process-wide Prometheus recorder (installed once) whose handle renders `/metrics`, and the gateway's own series.
//!
//! Besides cutout's series (`cutout_calls_total`, `cutout_rejections_total`,
//! `cutout_transitions_total`, `cutout_state`, … for every cluster breaker and every host
//! breaker, `breaker` = `<cluster>` or `<cluster>/<host>:<port>`; see `cutout::metrics`), the
//! gateway exports:
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `cutout_gateway_requests_total` | counter | `cluster`, `code` (`1xx`…`5xx`, or `gone`: the client left before an answer), `decision` (`admitted`, `refused`, `ejected`, `unguarded`, `none`) | requests, when their answer ended |
//! | `cutout_gateway_request_duration_seconds` | histogram | `cluster` | from the request's head to the end of its answer |
//! | `cutout_gateway_upstream_requests_total` | counter | `cluster`, `host`, `code` (`1xx`…`5xx`, `error`: no answer or a broken one) | attempts per host |
//! | `cutout_gateway_give_ups_total` | counter | `cluster`, `counted` (`detached`: the attempt ran on and its own outcome counted; `dropped`: cancelled past `max-detached-attempts`, counting nothing; `deadline`: the gateway's `request-timeout`) | clients found gone before their answer ended, and what became of their attempt (see [`crate::attempt`]); every series is exported from the start, at 0 |
//! | `cutout_gateway_detached_attempts` | gauge | `cluster` | attempts running on detached now (at most `max-detached-attempts`) |
//! | `cutout_gateway_in_flight_requests` | gauge | `cluster` | requests whose answer has not ended (a detached request's, until its attempt ends); counted in [`ClusterMetrics::in_flight_count`] (the retry budget's active requests) and set at each scrape |
//! | `cutout_gateway_ejected_hosts` | gauge | `cluster` | hosts ejected now (open, half-open, recovering) |
//! | `cutout_gateway_max_ejected_hosts` | gauge | `cluster` | the ejection cap |
//! | `cutout_gateway_retries_total` | counter | `cluster`, `decision` (`retried`: sent again to another host; `over_budget`: a retry the retry budget refused) | attempts failed by a connect failure or a reset that could be retried (see [`crate::hosts`]) |
//! | `cutout_gateway_health_checks_total` | counter | `cluster`, `host`, `result` (`pass`, `fail`) | active health checks (see [`crate::health`]); exported at 0 from the start for every checked host |
//!
//! Requests that reach no cluster (400, 404, 405) are counted with `cluster="(none)"`.
//! Histograms have buckets ([`DURATION_BUCKETS`], seconds), for the gateway's and for cutout's
//! `cutout_call_duration_seconds`, so that Prometheus can take any quantile of any
//! aggregation. Every breaker's gauges are brought to its `state()` before each rendering
//! (`Breaker::refresh_metrics`), so that `/metrics` and `/breakers` agree.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests by cluster, status class and breaker decision.
pub const REQUESTS: &str = "cutout_gateway_requests_total";
/// Request durations by cluster, in seconds.
pub const REQUEST_DURATION: &str = "cutout_gateway_request_duration_seconds";
/// Attempts by cluster, host and status class.
pub const UPSTREAM_REQUESTS: &str = "cutout_gateway_upstream_requests_total";
/// Give-ups by cluster and what they counted for.
pub const GIVE_UPS: &str = "cutout_gateway_give_ups_total";
/// Detached attempts running now, by cluster.
pub const DETACHED: &str = "cutout_gateway_detached_attempts";
/// Requests in flight by cluster.
pub const IN_FLIGHT: &str = "cutout_gateway_in_flight_requests";
/// Hosts ejected now, by cluster.
pub const EJECTED: &str = "cutout_gateway_ejected_hosts";
/// The ejection cap, by cluster.
pub const MAX_EJECTED: &str = "cutout_gateway_max_ejected_hosts";
/// Retries on another host, and those the budget refused, by cluster.
pub const RETRIES: &str = "cutout_gateway_retries_total";
/// Active health checks by cluster, host and result.
pub const HEALTH_CHECKS: &str = "cutout_gateway_health_checks_total";
/// Refusals by a limit, by limit and listener (every one, where the log line is throttled).
pub const REFUSALS: &str = "cutout_gateway_refusals_total";

/// The gateway's series, as (name, type, HELP text).
pub const ALL: [(&str, &str, &str); 11] = [
    (
        REQUESTS,
        "counter",
        "Requests through the gateway, by cluster, status class and breaker decision.",
    ),
    (
        REQUEST_DURATION,
        "histogram",
        "Time from a request's head to the end of its answer, in seconds.",
    ),
    (
        UPSTREAM_REQUESTS,
        "counter",
        "Attempts sent to upstream hosts, by cluster, host and status class.",
    ),
    (
        GIVE_UPS,
        "counter",
        "Clients found gone before their answer ended, by what became of their attempt.",
    ),
    (
        DETACHED,
        "gauge",
        "Attempts whose client left, running on detached to be judged by their own outcome.",
    ),
    (IN_FLIGHT, "gauge", "Requests whose answer has not ended."),
    (
        EJECTED,
        "gauge",
        "Hosts of the cluster ejected by their breakers now.",
    ),
    (
        MAX_EJECTED,
        "gauge",
        "The most hosts of the cluster that may be ejected at once.",
    ),
    (
        RETRIES,
        "counter",
        "Attempts failed by a connect failure or a reset, retried on another host or refused \
         by the retry budget.",
    ),
    (
        HEALTH_CHECKS,
        "counter",
        "Active health checks of the cluster's hosts, by result.",
    ),
    (
        REFUSALS,
        "counter",
        "Connections and requests refused by a limit (max_connections, fair_share, rate_limit, \
         header_read_timeout, ...), by limit and listener.",
    ),
];

/// The buckets of every duration histogram, in seconds: 0.5 ms to 30 s.
pub const DURATION_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How often histograms are drained into their buckets when nobody scrapes (the exporter keeps
/// samples until then).
pub const UPKEEP: Duration = Duration::from_secs(1);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the global `metrics` recorder (once per process; later
/// calls return the same handle) and returns the handle that renders the exposition. `None`
/// when another global recorder was installed first.
///
/// Call it before breakers are built: cutout registers its counters when a breaker is created.
/// It also starts a thread that runs the exporter's upkeep every [`UPKEEP`], so that
/// histogram samples do not pile up between scrapes.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = [REQUEST_DURATION, cutout::metrics::CALL_DURATION]
                .into_iter()
                .try_fold(PrometheusBuilder::new(), |builder, name| {
                    builder
                        .set_buckets_for_metric(Matcher::Full(name.to_owned()), &DURATION_BUCKETS)
                })
                .expect("the buckets are not empty")
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            let upkeep = handle.clone();
            let _ = std::thread::Builder::new()
                .name("cutout-gateway-metrics".to_owned())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP);
                        upkeep.run_upkeep();
                    }
                });
            Some(handle)
        })
        .clone()
}

fn describe() {
    for (name, kind, help) in ALL {
        match kind {
            "counter" => metrics::describe_counter!(name, metrics::Unit::Count, help),
            "histogram" => metrics::describe_histogram!(name, metrics::Unit::Seconds, help),
            _ => metrics::describe_gauge!(name, help),
        }
    }
}

/// Status classes, as the `code` label writes them.
pub const CODES: [&str; 7] = ["1xx", "2xx", "3xx", "4xx", "5xx", "gone", "error"];

/// The `code` label of a status (`gone` for none).
pub fn code_index(status: Option<u16>) -> usize {
    match status {
        Some(s @ 100..=599) => usize::from(s / 100 - 1),
        Some(_) => 6,
        None => 5,
    }
}

/// The breaker decisions, as the `decision` label writes them.
pub const DECISIONS: [&str; 5] = ["admitted", "refused", "ejected", "unguarded", "none"];

/// What became of a retriable failure, as the `decision` label of [`RETRIES`] writes it.
pub const RETRY_DECISIONS: [&str; 2] = ["retried", "over_budget"];

/// What became of a give-up's attempt, as the `counted` label writes it (in
/// [`GiveUpCount::index`](crate::attempt::GiveUpCount::index) order).
pub const COUNTED: [&str; 3] = ["detached", "dropped", "deadline"];

/// One cluster's metric handles (registered on first use).
#[derive(Debug)]
pub struct ClusterMetrics {
    cluster: String,
    hosts: Vec<String>,
    requests: [[OnceLock<Counter>; DECISIONS.len()]; CODES.len()],
    upstream: Vec<[OnceLock<Counter>; CODES.len()]>,
    give_ups: [OnceLock<Counter>; COUNTED.len()],
    retries: [OnceLock<Counter>; RETRY_DECISIONS.len()],
    duration: Histogram,
    in_flight: Gauge,
    in_flight_count: Arc<AtomicUsize>,
    detached: Gauge,
    ejected: Gauge,
    max_ejected: Gauge,
}

impl ClusterMetrics {
    /// The handles of `cluster` with these hosts (`host:port`). The give-up counters are
    /// registered at once (exported at 0), so that a rate over them starts with the cluster.
    pub fn new(cluster: &str, hosts: &[String]) -> ClusterMetrics {
        let metrics = ClusterMetrics::unregistered(cluster, hosts);
        for counted in 0..COUNTED.len() {
            metrics.give_up_counter(counted);
        }
        metrics
    }

    /// The handles of requests that reach no cluster (`cluster="(none)"`): no give-up
    /// counters until one is counted (none is).
    pub fn unrouted() -> ClusterMetrics {
        ClusterMetrics::unregistered("(none)", &[])
    }

    fn unregistered(cluster: &str, hosts: &[String]) -> ClusterMetrics {
        let label = cluster.to_owned();
        ClusterMetrics {
            cluster: cluster.to_owned(),
            hosts: hosts.to_vec(),
            requests: Default::default(),
            upstream: hosts.iter().map(|_| Default::default()).collect(),
            give_ups: Default::default(),
            retries: Default::default(),
            duration: metrics::histogram!(REQUEST_DURATION, "cluster" => label.clone()),
            in_flight: metrics::gauge!(IN_FLIGHT, "cluster" => label.clone()),
            in_flight_count: Arc::new(AtomicUsize::new(0)),
            detached: metrics::gauge!(DETACHED, "cluster" => label.clone()),
            ejected: metrics::gauge!(EJECTED, "cluster" => label.clone()),
            max_ejected: metrics::gauge!(MAX_EJECTED, "cluster" => label),
        }
    }

    /// A request ended with `status` (`None`: the client left before an answer) after
    /// `duration`.
    pub fn request(&self, status: Option<u16>, decision: usize, duration: Duration) {
        let code = code_index(status);
        let decision = decision.min(DECISIONS.len() - 1);
        self.requests[code][decision]
            .get_or_init(|| {
                metrics::counter!(
                    REQUESTS,
                    "cluster" => self.cluster.clone(),
                    "code" => CODES[code],
                    "decision" => DECISIONS[decision],
                )
            })
            .increment(1);
        self.duration.record(duration.as_secs_f64());
    }

    /// An attempt at host `host` ended with `status` (`None`: no answer, or a broken one).
    pub fn upstream(&self, host: usize, status: Option<u16>) {
        let Some(counters) = self.upstream.get(host) else {
            return;
        };
        let code = status.map_or(6, |s| code_index(Some(s)));
        counters[code]
            .get_or_init(|| {
                metrics::counter!(
                    UPSTREAM_REQUESTS,
                    "cluster" => self.cluster.clone(),
                    "host" => self.hosts[host].clone(),
                    "code" => CODES[code],
                )
            })
            .increment(1);
    }

    /// A failed attempt was retried on another host (`true`), or the budget refused its retry.
    pub fn retry(&self, retried: bool) {
        let decision = usize::from(!retried);
        self.retries[decision]
            .get_or_init(|| {
                metrics::counter!(
                    RETRIES,
                    "cluster" => self.cluster.clone(),
                    "decision" => RETRY_DECISIONS[decision],
                )
            })
            .increment(1);
    }

    /// A client gave up; `counted` indexes [`COUNTED`].
    pub fn give_up(&self, counted: usize) {
        self.give_up_counter(counted).increment(1);
    }

    fn give_up_counter(&self, counted: usize) -> &Counter {
        let counted = counted.min(COUNTED.len() - 1);
        self.give_ups[counted].get_or_init(|| {
            metrics::counter!(
                GIVE_UPS,
                "cluster" => self.cluster.clone(),
                "counted" => COUNTED[counted],
            )
        })
    }

    /// The gauge of the cluster's detached attempts (given to its
    /// [`Detached`](crate::attempt::Detached) budget).
    pub fn detached_gauge(&self) -> Gauge {
        self.detached.clone()
    }

    /// A request started (`true`) or ended (`false`).
    ///
    /// # Orderings
    /// `Relaxed`: a count read on its own (by the scrape, by the retry budget); it publishes
    /// nothing else.
    pub fn in_flight(&self, started: bool) {
        if started {
            self.in_flight_count.fetch_add(1, Ordering::Relaxed);
        } else {
            self.in_flight_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The requests in flight now, shared with the cluster's retry budget (its active
    /// requests, [`crate::retry::RetryBudget`]).
    pub fn in_flight_count(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.in_flight_count)
    }

    /// Sets the in-flight gauge to the count (at each scrape).
    pub fn set_in_flight(&self) {
        self.in_flight
            .set(self.in_flight_count.load(Ordering::Relaxed) as f64);
    }

    /// The ejection gauges, set at each scrape.
    pub fn set_ejected(&self, ejected: usize, max: usize) {
        self.ejected.set(ejected as f64);
        self.max_ejected.set(max as f64);
    }
}

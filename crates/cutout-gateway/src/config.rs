//! The gateway's configuration file: listeners, routes, clusters and `[breakers]` settings.
//!
//! ```toml
//! [gateway]
//! listen = "127.0.0.1:8080"        # the proxy listener
//! admin = "127.0.0.1:9090"         # the admin listener (loopback by default)
//! admin-token = "s3cret"           # optional: bearer token for the admin API
//! attempt-timeout = "2s"           # per forwarded attempt, inside the breaker
//! breakers = true                  # false: no breaker at all (benchmarks)
//! honor-retry-after = false        # true: a 429 / 503 `Retry-After` opens the breaker
//! healthz-strict = false           # true: /healthz answers 503 while a cluster is open
//! max-ejection-percent = 50        # at most this share of a cluster's hosts ejected at once
//! panic-threshold = 50             # below this share of healthy hosts, spread over all of them
//! retry = true                     # a connect failure or reset: once more on another host
//! retry-budget-percent = 20        # retries in flight at most this share of active requests...
//! min-concurrent-retries = 3       # ...or this many, whichever is more
//! max-detached-attempts = 64       # per cluster: attempts whose client left, run on to be judged
//! max-detached-body = "1MiB"       # what a detached attempt may drain of its response body
//! access-log = true                # one `tracing` line per request (target cutout_gateway::access)
//! rate-limit-per-source = "off"    # or "100/s", "6000/m": a request rate per client address, past it 429
//! access-log-refused = 100         # one line per 100 requests a breaker refused (1: each)
//! drain-delay = "0s"               # on SIGTERM, serve on this long with /readyz 503 first
//! trusted-hops = 0                 # proxies in front trusted in X-Forwarded-For (0: the edge)
//! # tls-cert = "gateway.crt"       # TLS on the proxy listener (ALPN h2, http/1.1), with tls-key
//! # tls-key = "gateway.key"
//! # h2c = false                    # true: a plain listener serves HTTP/2 prior knowledge too
//! # rate-limit-burst = 100         # (with a rate) the most requests at once; default the rate's count
//! # Limits (see [`Limits`]; every one has a default):
//! header-read-timeout = "10s"      # a request head must arrive within this
//! idle-timeout = "60s"             # a connection moving no byte for this long is closed
//! request-timeout = "30s"          # whole-request deadline (until the response head)
//! max-connections = 1024           # open connections on the proxy listener
//! admin-max-connections = 32       # open connections on the admin listener
//! max-request-body = "10MiB"       # larger bodies are answered 413
//! pool-idle-timeout = "30s"        # idle pooled upstream connections are closed after this
//! shutdown-timeout = "30s"         # how long shutdown waits for in-flight requests
//!
//! [[routes]]
//! prefix = "/accounts"             # longest matching prefix wins
//! cluster = "account-service"
//! strip-prefix = false             # default false: the upstream sees the full path
//! # methods = ["GET", "HEAD"]      # default every method but TRACE and TRACK (405 with Allow)
//! # set-request-headers = { "x-env" = "prod" }  # and remove-request-headers = ["x-debug"],
//! # set-response-headers / remove-response-headers: removals first, then settings
//!
//! [clusters.account-service]
//! upstreams = ["http://127.0.0.1:7001"]   # round-robin over these
//! attempt-timeout = "1s"           # optional: overrides [gateway]
//! honor-retry-after = true         # optional: overrides [gateway]
//! max-ejection-percent = 100       # optional: overrides [gateway]
//! max-detached-attempts = 16       # optional: overrides [gateway]
//! # (and panic-threshold, retry, retry-budget-percent, min-concurrent-retries likewise)
//! # protocol = "auto"              # or "http1", "h2", "h2c" (see crate::connector)
//! # tls-roots = "ca.pem"           # https:// upstreams: CA roots (default the system's)
//! # tls-server-name = "api.internal"  # the name verified and sent as SNI (default the host)
//! # tls-client-cert = "client.crt" # and tls-client-key: a client certificate upstream
//!
//! [clusters.account-service.health-check]   # optional: active checks of each upstream host
//! path = "/healthz"                # required: GET this path on each host directly
//! interval = "5s"                  # between the starts of two checks of a host
//! timeout = "1s"                   # a 2xx head within this passes (at most interval)
//! healthy-threshold = 1            # passes in a row that end a host's break early
//! unhealthy-threshold = "off"      # failures in a row that eject a host (off: never)
//! jitter = "500ms"                 # up to this much added to each wait (default interval / 10)
//!
//! # cutout's own format (see `cutout::config`): [breakers.defaults],
//! # [breakers.configs.<name>], [breakers.instances.<cluster>], and for one host of a
//! # cluster [breakers.instances."<cluster>/<host>:<port>"] (else the host has the cluster's).
//! [breakers.defaults]
//! failure-ratio = 0.5
//! ```
//!
//! Every error names the key, the value and a stable code (`GW-CFG-…` for the gateway's own
//! keys, cutout's `CUT-CFG-…` inside `[breakers]`); see [`ConfigError`].
//!
//! What the routing keys do (`retry`, `retry-budget-percent`, `min-concurrent-retries`,
//! `panic-threshold`, with `max-ejection-percent`) is in [`crate::hosts`]; what a
//! `health-check` table does, its defaults and why checks are off unless configured, in
//! [`crate::health`].
//!
//! # The gateway's base breaker settings
//!
//! `[breakers]` is merged over cutout's built-in defaults, key by key, as cutout's format
//! says, with two changes the gateway makes under everything the operator did not set. They
//! are what a cluster gets with no `[breakers]` section at all, and they are safe to leave on:
//! no healthy cluster or host opens under load, after a quiet period, on fresh connections or
//! because a host restarted.
//!
//! **1. Latency alone never opens a breaker unless the operator gave a latency budget.** The
//! relative slow-call rule (slow above 3 × the measured median, floor 1 ms) is off: the base
//! puts `slow-calls = "off"` in `[breakers.defaults]` unless that section sets one of the
//! rule's keys ([`SLOW_CALL_KEYS`]). Failures still open breakers as cutout's defaults say
//! (5 consecutive failures; relative failures, above 5 × the measured normal rate), and so
//! does an absolute `slow-call-threshold` the operator sets. The operator switches the
//! relative rule back on by setting one of its keys: `slow-calls-multiple = 3` in
//! `[breakers.defaults]` for every breaker, or in a `[breakers.configs.<name>]` or
//! `[breakers.instances.<id>]` for those breakers only (cutout's rule: a later section's key
//! switches a rule back on). `adaptive = true` alone does not: it is the built-in default, and
//! it says nothing about latency.
//!
//! Why: every duration the gateway measures is the upstream's time *plus the gateway's own*:
//! its CPU and scheduler (under a burst the gateway saturates its cores, and every call it
//! makes is slower at once), its queue, a fresh connection's setup (a probe, a restarted host,
//! light traffic after the pool idled out), a change of traffic pattern (busy pooled
//! connections, then light serial ones). A multiple of a median learned in one of these
//! conditions blames the upstream for another. Issue #27 measured it on a 2-core machine:
//! 300 sequential requests (median 0.1 ms) then `wrk -t2 -c50 -d5s` opened a healthy cluster
//! 0.3 s into the burst on its slow-call ratio, 46,063 non-2xx answers, 0 upstream failures;
//! a restarted host's probes (2–3 ms on fresh connections against a 0.1–0.3 ms median learned
//! on pooled ones) were judged slow, each break doubling (14.9 → 32.4 → 74.4 → 76.0 s).
//! Nothing the gateway can measure on one cluster's calls tells the
//! upstream's share from its own, so by default it judges only what is the upstream's:
//! its answers (5xx, resets, timeouts, broken bodies).
//!
//! What the gateway can then no longer see on its own: **a brownout without errors**, an
//! upstream that answers 200 but slowly (10 × its normal latency, within the attempt timeout).
//! It opens no breaker until it fails: attempt timeouts are failures (504), so a brownout that
//! crosses the attempt timeout still opens it. An operator who knows what slow means for a
//! cluster says so with `slow-call-threshold` (an absolute budget: a fresh connection or a
//! busy gateway does not cross a budget set well above them), or switches the relative rule
//! on where the gateway's own latency is known to be small against the upstream's. Probes are
//! judged the same way: on their outcome, and slowness only against the operator's budget.
//!
//! **2. A host breaker's break stops growing at 15 s** ([`DEFAULT_HOST_MAX_BREAK`]), unless
//! the operator set `max-break-duration` for it (in `[breakers.defaults]`, or in the sections
//! its settings come from: the cluster's instance and its base config, or the host's own
//! instance); when `break-duration` is longer, the break stays at `break-duration`. Cluster
//! breakers keep cutout's 2 min. See [`GatewayConfig::host_settings`] for why, and
//! [`crate::hosts`] for the worst case of readmission it gives.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use std::collections::BTreeSet;

use cutout::config::Config as BreakerConfig;
use cutout::{HumanDuration, Settings};
use http::Uri;

use crate::connector::{Protocol, TlsKeys, UpstreamTls};
use crate::error::ConfigError;
use crate::health::HealthCheckConfig;
use crate::rate::RateLimit;
use crate::tls::{ListenerTls, PemPair};

/// The default proxy listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default admin listener (loopback only).
pub const DEFAULT_ADMIN: &str = "127.0.0.1:9090";
/// The default attempt timeout.
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// Whether a throttled upstream's `Retry-After` opens its cluster's breaker, by default.
pub const DEFAULT_HONOR_RETRY_AFTER: bool = false;
/// The default `header-read-timeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default `idle-timeout`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The default `request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `max-connections` (proxy listener).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The default `admin-max-connections`.
pub const DEFAULT_ADMIN_MAX_CONNECTIONS: usize = 32;
/// The default `max-request-body`: 10 MiB.
pub const DEFAULT_MAX_REQUEST_BODY: usize = 10 * 1024 * 1024;
/// The default `pool-idle-timeout`.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `shutdown-timeout`.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `access-log-refused`: one line per 100 refused requests of a cluster. A
/// breaker's refusal is the cheapest answer the gateway gives, and an open cluster under load
/// refuses thousands a second; a line each made the log the gateway's largest cost (32 MB in
/// 16 s in a review) and told nothing the first line and the metrics do not.
pub const DEFAULT_ACCESS_LOG_REFUSED: u32 = 100;
/// The longest `drain-delay` accepted: a load balancer that needs more to notice is
/// misconfigured, and a rollout would wait that long per replica.
pub const MAX_DRAIN_DELAY: Duration = Duration::from_secs(600);
/// The largest `rate-limit-burst` accepted.
pub const MAX_RATE_BURST: usize = 1_000_000;
/// The largest `max-connections` / `admin-max-connections` accepted.
pub const MAX_CONNECTIONS_LIMIT: usize = 1 << 20;
/// The default `max-ejection-percent`: at most half of a cluster's hosts ejected at once (at
/// least one). Envoy's default is 10 %, with at least one host; for the clusters of two to five
/// hosts a gateway like this one fronts, 10 % is always "one host", so this default says what
/// it means: half of the cluster may be ejected, the other half keeps serving, and failures
/// beyond that are the cluster breaker's to judge.
pub const DEFAULT_MAX_EJECTION_PERCENT: u8 = 50;
/// The default `panic-threshold`: Envoy's `healthy_panic_threshold` (50 %). When fewer than
/// this share of a cluster's hosts (those an operator has not isolated) are healthy (closed,
/// half-open or recovering), the cluster spreads its requests over every such host rather than
/// refuse them (see [`crate::hosts`]). With the default `max-ejection-percent` (50) at least
/// half of the hosts always stay closed, so a panic is reached only with a higher cap.
pub const DEFAULT_PANIC_THRESHOLD: u8 = 50;
/// Whether a request is retried once on another host after a connect failure or a reset, by
/// default: on, as nginx's `proxy_next_upstream error` is (see [`crate::hosts`]).
pub const DEFAULT_RETRY: bool = true;
/// The default `retry-budget-percent`: Envoy's retry budget, retries in flight at most 20 % of
/// the cluster's active requests.
pub const DEFAULT_RETRY_BUDGET_PERCENT: u8 = 20;
/// The default `min-concurrent-retries`: Envoy's `min_retry_concurrency` (3), so that a
/// lightly loaded cluster can retry at all (20 % of 4 active requests is less than one).
pub const DEFAULT_MIN_CONCURRENT_RETRIES: usize = 3;
/// The default `max-detached-attempts`: at most 64 attempts per cluster run on detached after
/// their client left (see [`crate::attempt`]).
///
/// Why 64: enough for the judgement they are for. A hung upstream whose clients all leave gets
/// up to 64 failures per attempt timeout from detached attempts alone (32 a second at the
/// default 2 s), many times the 5 consecutive failures or the 20 calls the default breaker
/// needs; a healthy one gets as many successes. Small enough to cost little: each holds one
/// upstream connection (a descriptor) and its buffers, and asks the upstream for work nobody
/// reads; 64 of them are a few MiB and 64 descriptors per cluster, and a flood of clients that
/// leave mid-answer cannot make a struggling upstream do more than 64 such requests at once.
/// Past the bound an attempt is cancelled and counts nothing: the other calls still judge.
/// What it does not bound: clients that close their connection *before* their answer's head
/// are found gone only when it is written (a close reads like a half-close, [`crate::server`]),
/// so until then their requests run in their connections as patient clients' would, bounded
/// by `max-connections` and the attempt timeout, not by this (a review: 300 clients asking a
/// 1.5 s endpoint and closing after 100 ms had the upstream work on 300 requests at once).
pub const DEFAULT_MAX_DETACHED_ATTEMPTS: usize = 64;
/// The default `max-detached-body`: 1 MiB. A detached attempt's body is read and thrown away,
/// never held, so the cap bounds transfer, not memory: a response still streaming past 1 MiB
/// after its client left is a download nobody reads, and past the cap the attempt is cancelled
/// and counts nothing (whether it would have ended whole is unknown). On a LAN 1 MiB takes
/// milliseconds, so ordinary answers are judged whole.
pub const DEFAULT_MAX_DETACHED_BODY: usize = 1 << 20;
/// The longest break of a host breaker whose `max-break-duration` the operator did not set
/// (see [`GatewayConfig::host_settings`]): cutout's default first break, so that a host's
/// break never grows past it.
pub const DEFAULT_HOST_MAX_BREAK: Duration = Duration::from_secs(15);
/// The keys of cutout's relative slow-call rule (its switch first), as cutout's config knows
/// them. The gateway's base switches the rule off in `[breakers.defaults]` unless that section
/// sets one of them; any of them in a later section (a config, an instance) switches it back
/// on there (see the [module docs](self)).
pub use cutout_keys::SLOW_CALL_KEYS;

/// The gateway's resource limits (`[gateway]` keys), each with a default.
///
/// | key | default | what it bounds |
/// |---|---|---|
/// | `header-read-timeout` | 10 s | hyper's header-read timer: from the moment a connection waits for a request head (accept, or the end of the previous response) until the head is complete. It closes slow-header (slowloris) connections, connections that never send, and kept-alive connections left unused |
/// | `idle-timeout` | 60 s | a connection on which no byte moves either way for this long is closed, whatever it is doing (a stalled upload, a client that stops reading its response). At least `request-timeout` (`GW-CFG-010`), so it never cuts a request the deadline would let finish |
/// | `request-timeout` | 30 s | the whole-request deadline on both listeners, until the response head: the proxy answers 504, admin 503; the breaker counts nothing (the gateway gave up, not the upstream) |
/// | `max-connections` | 1024 | open connections on the proxy listener; more are accepted and closed at once, unless another source holds at least two more than the newcomer's would: then one of its idle connections is closed to make room ([`crate::share`]), so one client can fill the listener but cannot keep another out |
/// | `admin-max-connections` | 32 | the same for the admin listener, counted apart, so a flood on the proxy cannot lock the operator out |
/// | `max-request-body` | 10 MiB | a request body larger than this is answered 413 (at once from `Content-Length`, or when the streamed body crosses it), never counted by the breaker |
/// | `pool-idle-timeout` | 30 s | an idle pooled connection to an upstream is closed after this |
/// | `shutdown-timeout` | 30 s | on SIGTERM / Ctrl-C, how long in-flight requests may finish before their connections are closed |
///
/// Besides these, `max-detached-attempts` and `max-detached-body` bound the attempts whose
/// client left ([`crate::attempt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `header-read-timeout`.
    pub header_read_timeout: Duration,
    /// `idle-timeout`.
    pub idle_timeout: Duration,
    /// `request-timeout`.
    pub request_timeout: Duration,
    /// `max-connections` (proxy listener).
    pub max_connections: usize,
    /// `admin-max-connections`.
    pub admin_max_connections: usize,
    /// `max-request-body`, in bytes.
    pub max_request_body: usize,
    /// `pool-idle-timeout`.
    pub pool_idle_timeout: Duration,
    /// `shutdown-timeout`.
    pub shutdown_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            admin_max_connections: DEFAULT_ADMIN_MAX_CONNECTIONS,
            max_request_body: DEFAULT_MAX_REQUEST_BODY,
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// The whole gateway configuration, validated.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where the proxy listens.
    pub listen: SocketAddr,
    /// Where the admin API listens.
    pub admin: SocketAddr,
    /// Token the admin API requires (all endpoints but the page and the health endpoints), in
    /// `Authorization: Bearer <token>` or `x-cutout-token: <token>`.
    pub admin_token: Option<String>,
    /// `healthz-strict`: `/healthz` answers 503 while any cluster is open or isolated (default
    /// `false`: always 200, the body tells each cluster's health).
    pub healthz_strict: bool,
    /// Resource limits of both listeners and the upstream pool.
    pub limits: Limits,
    /// Whether clusters are guarded by breakers (`false` only for comparisons): no cluster
    /// breaker and no host ejection.
    pub breakers_enabled: bool,
    /// `give-up-floor`, deprecated and ignored: a client's give-up no longer counts against
    /// the upstream however late it comes, so no floor is needed. `Some` when the file still
    /// sets it (read and validated as a duration, then warned about: `GW-WARN-003`).
    pub give_up_floor: Option<Duration>,
    /// `max-detached-body`: the bytes a detached attempt may drain of its response body (see
    /// [`crate::attempt`]); past it the attempt is cancelled and counts nothing.
    pub max_detached_body: usize,
    /// `access-log`: one `tracing` line per request, target `cutout_gateway::access` (see
    /// [`crate::access`]).
    pub access_log: bool,
    /// `rate-limit-per-source` (and `rate-limit-burst`): each source's request rate, past
    /// which a request is answered 429 ([`crate::rate`]); `None` (the default, `"off"`): no
    /// limit.
    pub rate_limit: Option<RateLimit>,
    /// `trusted-hops`: how many proxies in front of the gateway are trusted to say who the
    /// client is in `X-Forwarded-For` (default 0: the gateway is the edge, and a client's own
    /// `X-Forwarded-For` and `Forwarded` are dropped; see [`crate::forwarded`]).
    pub trusted_hops: usize,
    /// `drain-delay`: on SIGTERM, how long the gateway keeps serving with `/readyz` already
    /// 503 before its proxy listener stops (default 0: it stops at once), so that load
    /// balancers take it out of rotation first. The admin listener answers until the drain
    /// is over either way.
    pub drain_delay: Duration,
    /// `access-log-refused`: one access-log line for this many of a cluster's requests a
    /// breaker refused (or every host ejected), with `sampled = N` on it (default 100; 1 logs
    /// each). The metrics and the status page count every one.
    pub access_log_refused: u32,
    /// Routes, longest prefix first.
    pub routes: Vec<Route>,
    /// Clusters by name.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Breaker settings: the `[breakers]` document (cutout's format) over the gateway's base
    /// (the relative slow-call rule off unless the operator switched it on, see the [module
    /// docs](self)), looked up by cluster name. A host breaker's settings are
    /// [`GatewayConfig::host_settings`].
    pub breakers: BreakerConfig,
    /// `[fleet]`: the replicas share their cluster breakers' signals through Redis
    /// ([`crate::fleet`]); `None` without the section.
    pub fleet: Option<crate::fleet::FleetConfig>,
    /// `tls-cert` and `tls-key`: the proxy listener serves TLS with this certificate (ALPN
    /// `h2` and `http/1.1`, see [`crate::tls`]); `None` (the default): plain HTTP.
    pub tls: Option<ListenerTls>,
    /// `h2c`: the plain proxy listener also serves HTTP/2 with prior knowledge (a connection
    /// that opens with the HTTP/2 preface); default `false`: HTTP/1.1 only. Not with
    /// `tls-cert` (`GW-CFG-010`): a TLS listener chooses HTTP/2 by ALPN.
    pub h2c: bool,
    /// The keys the operator wrote in each `[breakers]` section.
    written: Written,
}

/// The keys the operator wrote in each `[breakers]` section, so that a value the operator
/// chose can be told from one the gateway's base or cutout's defaults give.
#[derive(Debug, Clone, Default)]
struct Written {
    defaults: BTreeSet<String>,
    configs: BTreeMap<String, BTreeSet<String>>,
    /// Each instance's base config and keys.
    instances: BTreeMap<String, (Option<String>, BTreeSet<String>)>,
}

impl Written {
    /// The keys of `table`'s sections (tables that are not tables are left to cutout's
    /// validation, which rejects them).
    fn of(table: &toml::Table) -> Written {
        let keys = |value: Option<&toml::Value>| -> BTreeSet<String> {
            value
                .and_then(toml::Value::as_table)
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default()
        };
        let named = |section: &str| -> Vec<(&String, &toml::Value)> {
            table
                .get(section)
                .and_then(toml::Value::as_table)
                .map(|t| t.iter().collect())
                .unwrap_or_default()
        };
        Written {
            defaults: keys(table.get("defaults")),
            configs: named("configs")
                .into_iter()
                .map(|(name, value)| (name.clone(), keys(Some(value))))
                .collect(),
            instances: named("instances")
                .into_iter()
                .map(|(id, value)| {
                    let base = value
                        .get("base-config")
                        .and_then(toml::Value::as_str)
                        .map(str::to_owned);
                    (id.clone(), (base, keys(Some(value))))
                })
                .collect(),
        }
    }

    /// Whether the operator set `key` for breaker `id`: in `[defaults]`, in its instance's
    /// base config, or in its instance (the sections cutout merges for it).
    fn sets(&self, id: &str, key: &str) -> bool {
        if self.defaults.contains(key) {
            return true;
        }
        let Some((base, own)) = self.instances.get(id) else {
            return false;
        };
        own.contains(key)
            || base
                .as_ref()
                .and_then(|name| self.configs.get(name))
                .is_some_and(|keys| keys.contains(key))
    }
}

/// The `[breakers]` document over the gateway's base: `slow-calls = "off"` in its
/// `[defaults]` unless the operator's `[defaults]` sets one of [`SLOW_CALL_KEYS`].
fn breaker_document(value: Option<toml::Value>) -> Result<(BreakerConfig, Written), ConfigError> {
    let mut table = match value {
        None => toml::Table::new(),
        Some(toml::Value::Table(table)) => table,
        Some(other) => return Err(wrong_type("breakers", &other, "a table")),
    };
    let written = Written::of(&table);
    let defaults = table
        .entry("defaults")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    // A `defaults` that is not a table is left as written: cutout rejects it with its code.
    if let toml::Value::Table(defaults) = defaults
        && !SLOW_CALL_KEYS.iter().any(|key| defaults.contains_key(*key))
    {
        defaults.insert(
            "slow-calls".to_owned(),
            toml::Value::String("off".to_owned()),
        );
    }
    let document = BreakerConfig::from_deserializer(toml::Value::Table(table)).map_err(|e| {
        ConfigError::new(
            e.code().as_str(),
            &format!("breakers.{}", e.section()),
            e.key(),
            &e.to_string(),
        )
    })?;
    Ok((document, written))
}

/// A path prefix routed to a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The prefix, starting with `/`; matches the path itself and anything under `prefix/`.
    pub prefix: String,
    /// The cluster's name.
    pub cluster: String,
    /// Whether the prefix is removed before forwarding.
    pub strip_prefix: bool,
    /// `methods`: the methods the route forwards (others are answered 405 with `Allow`);
    /// `None` (the default): every method but `TRACE` and `TRACK`, which echo a request
    /// (its cookies and credentials) back to a script, and `CONNECT`, never forwarded.
    pub methods: Option<Vec<http::Method>>,
    /// `set-request-headers`, `remove-request-headers`, `set-response-headers`,
    /// `remove-response-headers` ([`crate::header_rules`]).
    pub headers: std::sync::Arc<crate::header_rules::HeaderRules>,
}

/// Methods a route without `methods` refuses (405): they echo the request back (cross-site
/// tracing), which no service behind a gateway should be asked to do by default.
pub const REFUSED_BY_DEFAULT: [&str; 2] = ["TRACE", "TRACK"];

impl Route {
    /// Whether the route forwards `method`.
    pub fn allows(&self, method: &http::Method) -> bool {
        match &self.methods {
            Some(methods) => methods.contains(method),
            None => !REFUSED_BY_DEFAULT.contains(&method.as_str()),
        }
    }
}

impl Route {
    /// Whether `path` falls under this route (`/accounts` matches `/accounts`,
    /// `/accounts/7` and `/accounts?x`, not `/accountsX`).
    pub fn matches(&self, path: &str) -> bool {
        let prefix = self.prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return true;
        }
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

/// One cluster: its upstreams, timeout and how its responses are classified.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Base URLs (`http://host:port` or `https://host:port`), tried round-robin.
    pub upstreams: Vec<Uri>,
    /// The attempt timeout inside the breaker.
    pub attempt_timeout: Duration,
    /// `honor-retry-after`: whether an upstream's 429, or 503 with `Retry-After`, carrying
    /// `Retry-After` in seconds opens the cluster's breaker for that long (capped by the
    /// breaker's `max-break-duration`; cutout-tower's
    /// [`HttpClassifier::honor_retry_after`](cutout_tower::HttpClassifier::honor_retry_after)).
    /// The cluster's key, else `[gateway]`'s, else `false`: such responses are then only
    /// ignored by the breaker. Either way the upstream's response is passed to the client.
    pub honor_retry_after: bool,
    /// `max-ejection-percent` (0–100): how many of the cluster's hosts their own breakers may
    /// eject at once, as a share of its upstreams, at least one; 0 turns per-host ejection off.
    /// A cluster of one upstream has no host breakers (its cluster breaker is its host's).
    /// The cluster's key, else `[gateway]`'s, else [`DEFAULT_MAX_EJECTION_PERCENT`].
    pub max_ejection_percent: u8,
    /// `max-detached-attempts` (0–1048576): how many attempts whose client left may run on
    /// detached at once, to be judged by their own outcome; past it (and with 0) such an
    /// attempt is cancelled and counts nothing (see [`crate::attempt`]). The cluster's key,
    /// else `[gateway]`'s, else [`DEFAULT_MAX_DETACHED_ATTEMPTS`].
    pub max_detached_attempts: usize,
    /// `panic-threshold` (0–100 %; 0 turns the panic off): below this share of healthy hosts
    /// the cluster spreads over every host rather than refuse (see [`crate::hosts`]). The
    /// cluster's key, else `[gateway]`'s, else [`DEFAULT_PANIC_THRESHOLD`].
    pub panic_threshold: u8,
    /// `retry`: whether a request is retried once on another host of the cluster after a
    /// connect failure (any method) or a connection reset before any byte of answer (an
    /// idempotent method), within the retry budget (see [`crate::hosts`]). The cluster's key,
    /// else `[gateway]`'s, else [`DEFAULT_RETRY`].
    pub retry: bool,
    /// `retry-budget-percent` (0–100): retries in flight at most this share of the cluster's
    /// active requests, or `min-concurrent-retries`, whichever is more. The cluster's key,
    /// else `[gateway]`'s, else [`DEFAULT_RETRY_BUDGET_PERCENT`].
    pub retry_budget_percent: u8,
    /// `min-concurrent-retries` (0–1048576): retries in flight the budget always allows. The
    /// cluster's key, else `[gateway]`'s, else [`DEFAULT_MIN_CONCURRENT_RETRIES`].
    pub min_concurrent_retries: usize,
    /// `[clusters.<name>.health-check]`: active checks of each upstream host (see
    /// [`crate::health`]); `None` (the default): no checks.
    pub health_check: Option<HealthCheckConfig>,
    /// `protocol`: the HTTP version spoken to the upstreams (`auto`, `http1`, `h2`, `h2c`;
    /// see [`crate::connector`]); default `auto`.
    pub protocol: Protocol,
    /// `tls-roots`, `tls-server-name`, `tls-client-cert` and `tls-client-key`, read: how the
    /// cluster's `https://` upstreams are verified and what it presents to them.
    pub tls: UpstreamTls,
}

impl ClusterConfig {
    /// How the cluster's breaker classifies upstream responses: cutout-tower's
    /// [`HttpClassifier`](cutout_tower::HttpClassifier) (5xx, forwarding errors and timeouts
    /// fail; 429 and 503 with `Retry-After` are throttling, other 4xx ignored), honouring
    /// `Retry-After` when [`honor_retry_after`](ClusterConfig::honor_retry_after) is set.
    ///
    /// ```
    /// use cutout::classify::{Classify, Verdict};
    /// use cutout_gateway::GatewayConfig;
    ///
    /// let config = GatewayConfig::from_toml(r#"
    ///     [gateway]
    ///     honor-retry-after = true
    ///     [clusters.quotes]
    ///     upstreams = ["http://127.0.0.1:7001"]
    /// "#)?;
    /// let classifier = config.clusters["quotes"].classifier();
    /// let busy = http::Response::builder().status(429).header("retry-after", "7").body(())?;
    /// assert_eq!(
    ///     classifier.verdict(&Ok::<_, ()>(busy)),
    ///     Verdict::OpenFor(std::time::Duration::from_secs(7))
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classifier(&self) -> cutout_tower::HttpClassifier {
        cutout_tower::HttpClassifier::new().honor_retry_after(self.honor_retry_after)
    }

    /// How many hosts may be ejected at once: `max-ejection-percent` of the upstreams, rounded
    /// down, at least one (Envoy's rule); 0 when ejection is off (the percentage is 0, or the
    /// cluster has a single upstream).
    ///
    /// ```
    /// use cutout_gateway::GatewayConfig;
    ///
    /// let config = GatewayConfig::from_toml(r#"
    ///     [clusters.pool]
    ///     upstreams = ["http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"]
    /// "#)?;
    /// assert_eq!(config.clusters["pool"].max_ejected(), 1, "50 % of 3, rounded down");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_ejected(&self) -> usize {
        let hosts = self.upstreams.len();
        if hosts < 2 || self.max_ejection_percent == 0 {
            return 0;
        }
        (hosts * usize::from(self.max_ejection_percent) / 100).max(1)
    }
}

impl GatewayConfig {
    /// Reads and validates a TOML document.
    pub fn from_toml(text: &str) -> Result<GatewayConfig, ConfigError> {
        let mut table: toml::Table = toml::from_str(text)
            .map_err(|e| ConfigError::new("GW-CFG-001", "", "", e.message().trim()))?;
        for key in table.keys() {
            if !["gateway", "routes", "clusters", "breakers", "fleet"].contains(&key.as_str()) {
                return Err(ConfigError::new(
                    "GW-CFG-002",
                    key,
                    "",
                    "unknown section; allowed gateway, routes, clusters, breakers, fleet",
                ));
            }
        }
        let gateway = match table.remove("gateway") {
            None => toml::Table::new(),
            Some(toml::Value::Table(t)) => t,
            Some(other) => return Err(wrong_type("gateway", &other, "a table")),
        };
        let mut listen = DEFAULT_LISTEN.parse().expect("a valid default");
        let mut admin = DEFAULT_ADMIN.parse().expect("a valid default");
        let mut admin_token = None;
        let mut timeout = DEFAULT_ATTEMPT_TIMEOUT;
        let mut breakers_enabled = true;
        let mut honor_retry_after = DEFAULT_HONOR_RETRY_AFTER;
        let mut healthz_strict = false;
        let mut limits = Limits::default();
        let mut max_ejection_percent = DEFAULT_MAX_EJECTION_PERCENT;
        let mut give_up_floor = None;
        let mut max_detached_attempts = DEFAULT_MAX_DETACHED_ATTEMPTS;
        let mut max_detached_body = DEFAULT_MAX_DETACHED_BODY;
        let mut access_log = true;
        let mut rate_limit: Option<RateLimit> = None;
        let mut trusted_hops = 0;
        let mut drain_delay = Duration::ZERO;
        let mut access_log_refused = DEFAULT_ACCESS_LOG_REFUSED;
        let mut rate_limit_burst: Option<u32> = None;
        let mut panic_threshold = DEFAULT_PANIC_THRESHOLD;
        let mut retry = DEFAULT_RETRY;
        let mut retry_budget_percent = DEFAULT_RETRY_BUDGET_PERCENT;
        let mut min_concurrent_retries = DEFAULT_MIN_CONCURRENT_RETRIES;
        let mut tls_cert: Option<std::path::PathBuf> = None;
        let mut tls_key: Option<std::path::PathBuf> = None;
        let mut h2c = false;
        for (key, value) in &gateway {
            let path = format!("gateway.{key}");
            match key.as_str() {
                "listen" => listen = addr(&path, value)?,
                "admin" => admin = addr(&path, value)?,
                "admin-token" => {
                    let token = string(&path, value)?;
                    if token.is_empty() || token.chars().any(|c| c.is_whitespace()) {
                        return Err(ConfigError::new(
                            "GW-CFG-004",
                            &path,
                            "(hidden)",
                            "allowed a non-empty token without spaces",
                        ));
                    }
                    admin_token = Some(token.to_owned());
                }
                "attempt-timeout" => timeout = duration(&path, value)?,
                "breakers" => breakers_enabled = boolean(&path, value)?,
                "honor-retry-after" => honor_retry_after = boolean(&path, value)?,
                "healthz-strict" => healthz_strict = boolean(&path, value)?,
                "header-read-timeout" => limits.header_read_timeout = duration(&path, value)?,
                "idle-timeout" => limits.idle_timeout = duration(&path, value)?,
                "request-timeout" => limits.request_timeout = duration(&path, value)?,
                "max-connections" => {
                    limits.max_connections = count(&path, value, 1, MAX_CONNECTIONS_LIMIT)?;
                }
                "admin-max-connections" => {
                    limits.admin_max_connections = count(&path, value, 1, MAX_CONNECTIONS_LIMIT)?;
                }
                "max-request-body" => limits.max_request_body = size(&path, value)?,
                "pool-idle-timeout" => limits.pool_idle_timeout = duration(&path, value)?,
                "shutdown-timeout" => limits.shutdown_timeout = duration(&path, value)?,
                "max-ejection-percent" => max_ejection_percent = percent(&path, value)?,
                "give-up-floor" => give_up_floor = Some(duration(&path, value)?),
                "max-detached-attempts" => {
                    max_detached_attempts = count(&path, value, 0, MAX_CONNECTIONS_LIMIT)?;
                }
                "max-detached-body" => max_detached_body = size(&path, value)?,
                "access-log" => access_log = boolean(&path, value)?,
                "rate-limit-per-source" => {
                    let text = string(&path, value)?;
                    rate_limit = if text == "off" {
                        None
                    } else {
                        Some(RateLimit::parse(text).map_err(|(code, why)| {
                            ConfigError::new(code, &path, &show(value), &why)
                        })?)
                    };
                }
                "access-log-refused" => {
                    access_log_refused = count(&path, value, 1, 1_000_000)? as u32;
                }
                "drain-delay" => {
                    drain_delay = duration_or_zero(&path, value)?;
                    if drain_delay > MAX_DRAIN_DELAY {
                        return Err(ConfigError::new(
                            "GW-CFG-009",
                            &path,
                            &show(value),
                            "out of range; allowed 0s to 10m",
                        ));
                    }
                }
                "trusted-hops" => {
                    trusted_hops = count(&path, value, 0, crate::forwarded::MAX_TRUSTED_HOPS)?;
                }
                "rate-limit-burst" => {
                    rate_limit_burst = Some(count(&path, value, 1, MAX_RATE_BURST)? as u32);
                }
                "panic-threshold" => panic_threshold = percent(&path, value)?,
                "retry" => retry = boolean(&path, value)?,
                "retry-budget-percent" => retry_budget_percent = percent(&path, value)?,
                "min-concurrent-retries" => {
                    min_concurrent_retries = count(&path, value, 0, MAX_CONNECTIONS_LIMIT)?;
                }
                "tls-cert" => tls_cert = Some(file(&path, value)?),
                "tls-key" => tls_key = Some(file(&path, value)?),
                "h2c" => h2c = boolean(&path, value)?,
                _ => {
                    return Err(unknown_key(
                        &path,
                        value,
                        "listen, admin, tls-cert, tls-key, h2c, admin-token, attempt-timeout, breakers, \
                         honor-retry-after, healthz-strict, header-read-timeout, idle-timeout, \
                         request-timeout, max-connections, admin-max-connections, \
                         max-request-body, pool-idle-timeout, shutdown-timeout, \
                         max-ejection-percent, max-detached-attempts, max-detached-body, \
                         access-log, access-log-refused, rate-limit-per-source, \
                         rate-limit-burst, trusted-hops, drain-delay, \
                         panic-threshold, \
                         retry, retry-budget-percent, min-concurrent-retries (give-up-floor is \
                         deprecated)",
                    ));
                }
            }
        }
        if let Some(burst) = rate_limit_burst {
            match &mut rate_limit {
                Some(rate) => rate.burst = burst,
                None => {
                    return Err(ConfigError::new(
                        "GW-CFG-005",
                        "gateway.rate-limit-burst",
                        &burst.to_string(),
                        "a burst needs gateway.rate-limit-per-source (such as \"100/s\")",
                    ));
                }
            }
        }
        let tls = listener_tls(tls_cert, tls_key, h2c)?;
        if limits.idle_timeout < limits.request_timeout {
            return Err(ConfigError::new(
                "GW-CFG-010",
                "gateway.idle-timeout",
                &HumanDuration(limits.idle_timeout).to_string(),
                &format!(
                    "shorter than gateway.request-timeout ({}): an idle connection would be cut \
                     before the request's deadline; allowed at least request-timeout",
                    HumanDuration(limits.request_timeout)
                ),
            ));
        }

        let defaults = ClusterDefaults {
            attempt_timeout: timeout,
            honor_retry_after,
            max_ejection_percent,
            max_detached_attempts,
            panic_threshold,
            retry,
            retry_budget_percent,
            min_concurrent_retries,
        };
        let clusters = parse_clusters(table.remove("clusters"), defaults)?;
        let routes = parse_routes(table.remove("routes"), &clusters)?;
        let (breakers, written) = breaker_document(table.remove("breakers"))?;
        let fleet = table
            .remove("fleet")
            .map(crate::fleet::FleetConfig::parse)
            .transpose()?;
        for (id, _) in breakers.instances() {
            let known = match id.split_once('/') {
                None => clusters.contains_key(id),
                Some((cluster, host)) => clusters.get(cluster).is_some_and(|c| {
                    c.upstreams
                        .iter()
                        .any(|u| u.authority().is_some_and(|a| a.as_str() == host))
                }),
            };
            if !known {
                return Err(ConfigError::new(
                    "GW-CFG-007",
                    &format!("breakers.instances.{id}"),
                    id,
                    "a breaker instance names no cluster and no host of one; allowed a name \
                     from [clusters], or \"<cluster>/<host>:<port>\" for one of its upstreams",
                ));
            }
        }
        if listen == admin && listen.port() != 0 {
            return Err(ConfigError::new(
                "GW-CFG-008",
                "gateway.admin",
                &admin.to_string(),
                "the admin listener must differ from gateway.listen",
            ));
        }
        Ok(GatewayConfig {
            listen,
            admin,
            admin_token,
            healthz_strict,
            limits,
            breakers_enabled,
            give_up_floor,
            max_detached_body,
            access_log,
            rate_limit,
            trusted_hops,
            drain_delay,
            access_log_refused,
            routes,
            clusters,
            breakers,
            fleet,
            tls,
            h2c,
            written,
        })
    }

    /// The settings of cluster `name`'s breaker: its `[breakers.instances.<name>]`, else
    /// `[breakers.defaults]`, over the gateway's base (see the [module docs](self)). A cluster
    /// of one upstream has no host breakers: its breaker is its host's, so its break is capped
    /// as a host's is ([`GatewayConfig::host_settings`]): a single upstream restarted after
    /// minutes down is readmitted within one break, not into a break of up to 2 min.
    pub fn cluster_settings(&self, name: &str) -> Settings {
        let settings = self.breakers.settings_for(name).clone();
        let single = self
            .clusters
            .get(name)
            .is_some_and(|cluster| cluster.upstreams.len() == 1);
        if single {
            self.capped(settings, name)
        } else {
            settings
        }
    }

    /// The settings of the host breaker `id` (`<cluster>/<host>:<port>`) of `cluster`: its
    /// own `[breakers.instances."<id>"]`, else its cluster's, with the break capped at
    /// [`DEFAULT_HOST_MAX_BREAK`] (or at `break-duration`, when that is longer) unless the
    /// operator set `max-break-duration` in a section those settings come from.
    ///
    /// Why a host's break stops growing at 15 s when a cluster's grows to 2 min: a break's
    /// growth bounds what probing a dead dependency costs, and for a host that cost is one
    /// request per break (its probe, answered 502 at once when nothing listens, or 504 after
    /// the attempt timeout when the host hangs) while the cluster's other hosts serve everything
    /// else. Growth then buys little and costs the readmission: a host that was down for
    /// minutes comes back into a break of up to 2 min (issue #27: still ejected 2 min 35 s
    /// after it came back). Envoy's outlier detection ejects for `base_ejection_time` (30 s) × the
    /// times ejected, up to `max_ejection_time` (300 s), and readmits blindly: a host that is
    /// still dead takes its share again until 5 consecutive errors eject it anew, 5 failed
    /// requests per ejection, 10 a minute at the first ejection. A break that stays at 7.5–15 s
    /// (equal jitter) costs at most one failed request per break, 4–8 a minute for a dead
    /// host whatever the traffic (0.7 % of 20 req/s over three hosts, less at more traffic),
    /// and readmits a host that came back within one break plus its probes, whatever its
    /// downtime ([`crate::hosts`] states the worst case).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cutout_gateway::GatewayConfig;
    ///
    /// let config = GatewayConfig::from_toml(r#"
    ///     [clusters.pool]
    ///     upstreams = ["http://127.0.0.1:7001", "http://127.0.0.1:7002"]
    /// "#)?;
    /// let host = config.host_settings("pool", "pool/127.0.0.1:7001");
    /// assert_eq!(host.max_break_duration(), Duration::from_secs(15));
    /// assert_eq!(config.cluster_settings("pool").max_break_duration(), Duration::from_secs(120));
    /// // The shipped defaults judge failures, not latency.
    /// assert!(host.slow_calls().is_none() && host.failures().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn host_settings(&self, cluster: &str, id: &str) -> Settings {
        let (settings, layers) = match self.breakers.instance(id) {
            Some(own) => (own.clone(), id),
            None => (self.breakers.settings_for(cluster).clone(), cluster),
        };
        self.capped(settings, layers)
    }

    /// `settings` (those of breaker `layers`) with the host's cap on the break, unless the
    /// operator set `max-break-duration` in a section they come from.
    fn capped(&self, settings: Settings, layers: &str) -> Settings {
        if self.written.sets(layers, "max-break-duration") {
            return settings;
        }
        let cap = DEFAULT_HOST_MAX_BREAK.max(settings.break_duration());
        if cap >= settings.max_break_duration() {
            return settings;
        }
        // A shorter cap, at least the first break, is always valid; should the builder still
        // refuse, the settings stay as written.
        settings
            .to_builder()
            .max_break_duration(cap)
            .build()
            .unwrap_or(settings)
    }

    /// The route for `path`: the longest matching prefix.
    pub fn route(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(path))
    }

    /// Warnings about a valid configuration, each with a stable code: `GW-WARN-001` when the
    /// admin listener is bound off loopback without `admin-token` (anyone who reaches the
    /// address can isolate clusters); `GW-WARN-003` when the file sets the deprecated
    /// `give-up-floor` (ignored). `--check` prints them, and the gateway logs them at start.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(floor) = self.give_up_floor {
            warnings.push(format!(
                "GW-WARN-003: gateway.give-up-floor = \"{}\" is deprecated and ignored: a \
                 client's give-up no longer counts against the upstream (its attempt runs on \
                 detached and is judged by its own outcome, within max-detached-attempts); \
                 remove the key",
                HumanDuration(floor)
            ));
        }
        if !self.admin.ip().is_loopback() && self.admin_token.is_none() {
            warnings.push(format!(
                "GW-WARN-001: gateway.admin = \"{}\" is not a loopback address and no \
                 gateway.admin-token is set: anyone who can reach it can read the breakers and \
                 isolate or reset clusters; set admin-token or bind 127.0.0.1",
                self.admin
            ));
        }
        warnings
    }
}

/// What `[gateway]` sets for every cluster that does not set it itself.
#[derive(Debug, Clone, Copy)]
struct ClusterDefaults {
    attempt_timeout: Duration,
    honor_retry_after: bool,
    max_ejection_percent: u8,
    max_detached_attempts: usize,
    panic_threshold: u8,
    retry: bool,
    retry_budget_percent: u8,
    min_concurrent_retries: usize,
}

fn parse_clusters(
    value: Option<toml::Value>,
    defaults: ClusterDefaults,
) -> Result<BTreeMap<String, ClusterConfig>, ConfigError> {
    let table = match value {
        Some(toml::Value::Table(t)) => t,
        Some(other) => return Err(wrong_type("clusters", &other, "a table of clusters")),
        None => {
            return Err(ConfigError::new(
                "GW-CFG-005",
                "clusters",
                "",
                "missing; allowed at least one [clusters.<name>] with upstreams",
            ));
        }
    };
    let mut clusters = BTreeMap::new();
    for (name, value) in table {
        let section = format!("clusters.{name}");
        let toml::Value::Table(entries) = value else {
            return Err(wrong_type(&section, &value, "a table"));
        };
        let mut upstreams = Vec::new();
        let mut attempt_timeout = defaults.attempt_timeout;
        let mut honor_retry_after = defaults.honor_retry_after;
        let mut max_ejection_percent = defaults.max_ejection_percent;
        let mut max_detached_attempts = defaults.max_detached_attempts;
        let mut panic_threshold = defaults.panic_threshold;
        let mut retry = defaults.retry;
        let mut retry_budget_percent = defaults.retry_budget_percent;
        let mut min_concurrent_retries = defaults.min_concurrent_retries;
        let mut health_check = None;
        let mut protocol = None;
        let mut tls_keys = TlsKeys::default();
        let mut client_cert = None;
        let mut client_key = None;
        for (key, value) in &entries {
            let path = format!("{section}.{key}");
            match key.as_str() {
                "upstreams" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| wrong_type(&path, value, "an array of URLs"))?;
                    for item in list {
                        let uri = upstream(&path, item)?;
                        if upstreams
                            .iter()
                            .any(|u: &Uri| u.authority() == uri.authority())
                        {
                            return Err(ConfigError::new(
                                "GW-CFG-011",
                                &path,
                                &show(item),
                                "a duplicate upstream (each host has its own breaker); allowed \
                                 each host:port once per cluster",
                            ));
                        }
                        upstreams.push(uri);
                    }
                }
                "attempt-timeout" => attempt_timeout = duration(&path, value)?,
                "honor-retry-after" => honor_retry_after = boolean(&path, value)?,
                "max-ejection-percent" => max_ejection_percent = percent(&path, value)?,
                "max-detached-attempts" => {
                    max_detached_attempts = count(&path, value, 0, MAX_CONNECTIONS_LIMIT)?;
                }
                "panic-threshold" => panic_threshold = percent(&path, value)?,
                "retry" => retry = boolean(&path, value)?,
                "retry-budget-percent" => retry_budget_percent = percent(&path, value)?,
                "min-concurrent-retries" => {
                    min_concurrent_retries = count(&path, value, 0, MAX_CONNECTIONS_LIMIT)?;
                }
                "health-check" => health_check = Some(parse_health_check(&path, value)?),
                "protocol" => protocol = Some((protocol_of(&path, value)?, path.clone())),
                "tls-roots" => tls_keys.roots = Some((file(&path, value)?, path.clone())),
                "tls-server-name" => {
                    tls_keys.server_name = Some((string(&path, value)?.to_owned(), path.clone()));
                }
                "tls-client-cert" => client_cert = Some(file(&path, value)?),
                "tls-client-key" => client_key = Some(file(&path, value)?),
                _ => {
                    return Err(unknown_key(
                        &path,
                        value,
                        "upstreams, attempt-timeout, honor-retry-after, max-ejection-percent, \
                         max-detached-attempts, panic-threshold, retry, retry-budget-percent, \
                         min-concurrent-retries, health-check, protocol, tls-roots, \
                         tls-server-name, tls-client-cert, tls-client-key",
                    ));
                }
            }
        }
        if upstreams.is_empty() {
            return Err(ConfigError::new(
                "GW-CFG-005",
                &format!("{section}.upstreams"),
                "[]",
                "allowed at least one upstream URL",
            ));
        }
        tls_keys.client = pem_pair(&section, "tls-client-cert", client_cert, client_key)?;
        let https = upstreams.iter().any(|u| u.scheme_str() == Some("https"));
        let protocol = match protocol {
            None => Protocol::Auto,
            Some(((_, true), path)) if https => {
                return Err(ConfigError::new(
                    "GW-CFG-010",
                    &path,
                    "h2c",
                    "h2c is HTTP/2 over cleartext but the cluster has https:// upstreams; \
                     allowed \"h2\" (HTTP/2 by ALPN over TLS) or http:// upstreams",
                ));
            }
            Some(((protocol, _), _)) => protocol,
        };
        // The files are read whenever a key names them, so `--check` finds a bad one before
        // an https:// upstream is added.
        let named =
            tls_keys.roots.is_some() || tls_keys.client.is_some() || tls_keys.server_name.is_some();
        let tls = if https || named {
            UpstreamTls::load(&tls_keys)?
        } else {
            UpstreamTls::none()
        };
        clusters.insert(
            name,
            ClusterConfig {
                upstreams,
                attempt_timeout,
                honor_retry_after,
                max_ejection_percent,
                max_detached_attempts,
                panic_threshold,
                retry,
                retry_budget_percent,
                min_concurrent_retries,
                health_check,
                protocol,
                tls,
            },
        );
    }
    Ok(clusters)
}

/// A `[clusters.<name>.health-check]` table at `section` (see [`crate::health`] for what each
/// key does and why the defaults are what they are).
fn parse_health_check(
    section: &str,
    value: &toml::Value,
) -> Result<HealthCheckConfig, ConfigError> {
    use crate::health::{
        DEFAULT_HEALTHY_THRESHOLD, DEFAULT_INTERVAL, DEFAULT_TIMEOUT, MAX_THRESHOLD,
    };
    let toml::Value::Table(entries) = value else {
        return Err(wrong_type(
            section,
            value,
            "a table with path, interval, timeout, \
            healthy-threshold, unhealthy-threshold, jitter",
        ));
    };
    let mut path = None;
    let mut interval = DEFAULT_INTERVAL;
    let mut timeout = None;
    let mut healthy_threshold = DEFAULT_HEALTHY_THRESHOLD;
    let mut unhealthy_threshold = None;
    let mut jitter = None;
    for (key, value) in entries {
        let at = format!("{section}.{key}");
        match key.as_str() {
            "path" => {
                let text = string(&at, value)?;
                let parsed = text
                    .parse::<http::uri::PathAndQuery>()
                    .ok()
                    .filter(|p| text.starts_with('/') && p.as_str() == text);
                path = Some(parsed.ok_or_else(|| {
                    ConfigError::new(
                        "GW-CFG-004",
                        &at,
                        &show(value),
                        "allowed a path starting with /, with an optional query, such as \
                         \"/healthz\"",
                    )
                })?);
            }
            "interval" => interval = duration(&at, value)?,
            "timeout" => timeout = Some(duration(&at, value)?),
            "jitter" => jitter = Some(duration_or_zero(&at, value)?),
            "healthy-threshold" => {
                healthy_threshold = count(&at, value, 1, MAX_THRESHOLD as usize)? as u32;
            }
            "unhealthy-threshold" => {
                unhealthy_threshold = match value {
                    toml::Value::String(off) if off == "off" => None,
                    toml::Value::Integer(_) => {
                        Some(count(&at, value, 1, MAX_THRESHOLD as usize)? as u32)
                    }
                    other => {
                        return Err(wrong_type(
                            &at,
                            other,
                            &format!("an integer in 1-{MAX_THRESHOLD}, or \"off\""),
                        ));
                    }
                };
            }
            _ => {
                return Err(unknown_key(
                    &at,
                    value,
                    "path, interval, timeout, healthy-threshold, unhealthy-threshold, jitter",
                ));
            }
        }
    }
    let path = path.ok_or_else(|| {
        ConfigError::new(
            "GW-CFG-005",
            &format!("{section}.path"),
            "",
            "missing; a health check needs the path it asks each host for",
        )
    })?;
    let longer = |key: &str, value: Duration| {
        ConfigError::new(
            "GW-CFG-010",
            &format!("{section}.{key}"),
            &HumanDuration(value).to_string(),
            &format!(
                "longer than {section}.interval ({}); allowed at most the interval",
                HumanDuration(interval)
            ),
        )
    };
    // Unset, the timeout is the default or the interval, whichever is shorter.
    let timeout = timeout.unwrap_or(DEFAULT_TIMEOUT.min(interval));
    if timeout > interval {
        return Err(longer("timeout", timeout));
    }
    let jitter = jitter.unwrap_or(interval / 10);
    if jitter > interval {
        return Err(longer("jitter", jitter));
    }
    Ok(HealthCheckConfig {
        path,
        interval,
        timeout,
        healthy_threshold,
        unhealthy_threshold,
        jitter,
    })
}

/// A route's `methods`: a non-empty array of method names, uppercase (`"GET"`, `"PURGE"`),
/// never `CONNECT` (the gateway tunnels nothing).
fn route_methods(path: &str, value: &toml::Value) -> Result<Vec<http::Method>, ConfigError> {
    let allowed = "allowed a non-empty array of uppercase method names such as [\"GET\", \"POST\"], \
                   without CONNECT";
    let list = value
        .as_array()
        .ok_or_else(|| wrong_type(path, value, "an array of method names"))?;
    if list.is_empty() {
        return Err(ConfigError::new("GW-CFG-004", path, &show(value), allowed));
    }
    let mut methods = Vec::new();
    for item in list {
        let name = item
            .as_str()
            .ok_or_else(|| wrong_type(path, item, "an array of method names"))?;
        let method = http::Method::from_bytes(name.as_bytes())
            .ok()
            .filter(|m| m != http::Method::CONNECT && crate::proxy::uppercase_method(m))
            .ok_or_else(|| ConfigError::new("GW-CFG-004", path, &show(item), allowed))?;
        if !methods.contains(&method) {
            methods.push(method);
        }
    }
    Ok(methods)
}

fn parse_routes(
    value: Option<toml::Value>,
    clusters: &BTreeMap<String, ClusterConfig>,
) -> Result<Vec<Route>, ConfigError> {
    let list = match value {
        None => Vec::new(),
        Some(toml::Value::Array(list)) => list,
        Some(other) => return Err(wrong_type("routes", &other, "an array of [[routes]]")),
    };
    let mut routes: Vec<Route> = Vec::new();
    for (n, value) in list.into_iter().enumerate() {
        let section = format!("routes[{n}]");
        let toml::Value::Table(entries) = value else {
            return Err(wrong_type(&section, &value, "a table"));
        };
        let (mut prefix, mut cluster, mut strip_prefix) = (None, None, false);
        let mut methods = None;
        let mut headers = crate::header_rules::HeaderRules::default();
        for (key, value) in &entries {
            let path = format!("{section}.{key}");
            match key.as_str() {
                "prefix" => {
                    let p = string(&path, value)?;
                    if !p.starts_with('/') {
                        return Err(ConfigError::new(
                            "GW-CFG-004",
                            &path,
                            &show(value),
                            "allowed a path starting with /",
                        ));
                    }
                    prefix = Some(p.to_owned());
                }
                "cluster" => {
                    let c = string(&path, value)?;
                    if !clusters.contains_key(c) {
                        return Err(ConfigError::new(
                            "GW-CFG-007",
                            &path,
                            c,
                            "unknown cluster; allowed a name from [clusters]",
                        ));
                    }
                    cluster = Some(c.to_owned());
                }
                "strip-prefix" => strip_prefix = boolean(&path, value)?,
                "methods" => methods = Some(route_methods(&path, value)?),
                "set-request-headers" => {
                    headers.request.set = crate::header_rules::parse_set(&path, value)?;
                }
                "remove-request-headers" => {
                    headers.request.remove = crate::header_rules::parse_remove(&path, value)?;
                }
                "set-response-headers" => {
                    headers.response.set = crate::header_rules::parse_set(&path, value)?;
                }
                "remove-response-headers" => {
                    headers.response.remove = crate::header_rules::parse_remove(&path, value)?;
                }
                _ => {
                    return Err(unknown_key(
                        &path,
                        value,
                        "prefix, cluster, strip-prefix, methods, set-request-headers, \
                         remove-request-headers, set-response-headers, remove-response-headers",
                    ));
                }
            }
        }
        let missing = |key: &str| {
            ConfigError::new(
                "GW-CFG-005",
                &format!("{section}.{key}"),
                "",
                "missing; a route needs prefix and cluster",
            )
        };
        let prefix = prefix.ok_or_else(|| missing("prefix"))?;
        if routes.iter().any(|r| r.prefix == prefix) {
            return Err(ConfigError::new(
                "GW-CFG-006",
                &format!("{section}.prefix"),
                &prefix,
                "duplicate prefix; allowed each prefix once",
            ));
        }
        routes.push(Route {
            prefix,
            cluster: cluster.ok_or_else(|| missing("cluster"))?,
            strip_prefix,
            methods,
            headers: std::sync::Arc::new(headers),
        });
    }
    routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
    Ok(routes)
}

/// A key the table does not have; `allowed` lists the ones it does.
fn unknown_key(path: &str, value: &toml::Value, allowed: &str) -> ConfigError {
    ConfigError::new(
        "GW-CFG-002",
        path,
        &show(value),
        &format!("unknown key; allowed {allowed}"),
    )
}

fn boolean(path: &str, value: &toml::Value) -> Result<bool, ConfigError> {
    value
        .as_bool()
        .ok_or_else(|| wrong_type(path, value, "true or false"))
}

pub(crate) fn wrong_type(path: &str, value: &toml::Value, allowed: &str) -> ConfigError {
    ConfigError::new(
        "GW-CFG-003",
        path,
        &show(value),
        &format!("wrong type ({}); allowed {allowed}", value.type_str()),
    )
}

/// A value as written, for messages (strings quoted, tables and arrays by type).
pub(crate) fn show(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => format!("({})", other.type_str()),
    }
}

fn string<'a>(path: &str, value: &'a toml::Value) -> Result<&'a str, ConfigError> {
    value
        .as_str()
        .ok_or_else(|| wrong_type(path, value, "a string"))
}

fn addr(path: &str, value: &toml::Value) -> Result<SocketAddr, ConfigError> {
    let text = string(path, value)?;
    text.parse().map_err(|_| {
        if let Some((_, port)) = text.rsplit_once(':')
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
        {
            return ConfigError::new(
                "GW-CFG-009",
                path,
                &show(value),
                "port out of range; allowed 0-65535 (0: any free port)",
            );
        }
        ConfigError::new(
            "GW-CFG-004",
            path,
            &show(value),
            "allowed an IP address and port such as \"127.0.0.1:8080\"",
        )
    })
}

/// The port written in an authority (`host:port`, `[v6]:port`): `Ok(None)` without one,
/// `Err(())` when it is not a number in 1–65535.
pub(crate) fn authority_port(authority: &str) -> Result<Option<u16>, ()> {
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Ok(None);
    };
    if host.starts_with('[') && !host.ends_with(']') {
        // A colon inside an IPv6 literal without a port.
        return Ok(None);
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.len() > 5 {
        return Err(());
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(()),
        Ok(n) => Ok(Some(n)),
    }
}

/// An integer in `min..=max`: GW-CFG-003 when not an integer, GW-CFG-009 when out of range.
fn count(path: &str, value: &toml::Value, min: usize, max: usize) -> Result<usize, ConfigError> {
    let n = value
        .as_integer()
        .ok_or_else(|| wrong_type(path, value, &format!("an integer in {min}-{max}")))?;
    usize::try_from(n)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ConfigError::new(
                "GW-CFG-009",
                path,
                &show(value),
                &format!("out of range; allowed {min}-{max}"),
            )
        })
}

/// A percentage: an integer in 0–100 (GW-CFG-003 when not an integer, GW-CFG-009 when out of
/// range).
fn percent(path: &str, value: &toml::Value) -> Result<u8, ConfigError> {
    count(path, value, 0, 100).map(|n| n as u8)
}

/// A size in bytes: an integer, or a string with a unit (`"64KiB"`, `"10 MiB"`, `"1MB"`,
/// `"512B"`; KB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024). At least one byte.
fn size(path: &str, value: &toml::Value) -> Result<usize, ConfigError> {
    let out_of_range = || {
        ConfigError::new(
            "GW-CFG-009",
            path,
            &show(value),
            "out of range; allowed 1 byte or more",
        )
    };
    let bytes: u64 = match value {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| out_of_range())?,
        toml::Value::String(text) => parse_size(text).ok_or_else(|| {
            ConfigError::new(
                "GW-CFG-004",
                path,
                &show(value),
                "allowed a size such as 1048576, \"64KiB\", \"10MiB\" or \"1GB\"",
            )
        })?,
        other => return Err(wrong_type(path, other, "a size such as \"10MiB\"")),
    };
    if bytes == 0 {
        return Err(out_of_range());
    }
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" => 1 << 10,
        "mb" => 1000 * 1000,
        "mib" => 1 << 20,
        "gb" => 1000 * 1000 * 1000,
        "gib" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(unit)
}

pub(crate) fn duration(path: &str, value: &toml::Value) -> Result<Duration, ConfigError> {
    let text = string(path, value)?;
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(ConfigError::new(
            "GW-CFG-004",
            path,
            &show(value),
            "allowed a positive duration such as \"2s\" or \"500ms\"",
        )),
    }
}

/// A duration that may be zero (`"0s"`), such as a jitter.
fn duration_or_zero(path: &str, value: &toml::Value) -> Result<Duration, ConfigError> {
    let text = string(path, value)?;
    humantime::parse_duration(text).map_err(|_| {
        ConfigError::new(
            "GW-CFG-004",
            path,
            &show(value),
            "allowed a duration such as \"0s\", \"500ms\" or \"1s\"",
        )
    })
}

/// A file's path (a non-empty string; relative paths are from the working directory).
fn file(path: &str, value: &toml::Value) -> Result<std::path::PathBuf, ConfigError> {
    let text = string(path, value)?;
    if text.is_empty() {
        return Err(ConfigError::new(
            "GW-CFG-004",
            path,
            "\"\"",
            "allowed the path of a PEM file",
        ));
    }
    Ok(std::path::PathBuf::from(text))
}

/// A `protocol` value, and whether it was written `h2c` (HTTP/2, cleartext only).
fn protocol_of(path: &str, value: &toml::Value) -> Result<(Protocol, bool), ConfigError> {
    match string(path, value)? {
        "auto" => Ok((Protocol::Auto, false)),
        "http1" => Ok((Protocol::Http1, false)),
        "h2" => Ok((Protocol::H2, false)),
        "h2c" => Ok((Protocol::H2, true)),
        _ => Err(ConfigError::new(
            "GW-CFG-004",
            path,
            &show(value),
            "allowed \"auto\", \"http1\", \"h2\" or \"h2c\"",
        )),
    }
}

/// A certificate and key pair of `section` (`<prefix>-cert` and `<prefix>-key`): both or
/// neither (`GW-CFG-005` for one alone).
fn pem_pair(
    section: &str,
    cert_key: &str,
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
) -> Result<Option<PemPair>, ConfigError> {
    let key_key = cert_key.replace("-cert", "-key");
    let (cert_path, key_path) = (
        format!("{section}.{cert_key}"),
        format!("{section}.{key_key}"),
    );
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(PemPair {
            cert,
            key,
            cert_key: cert_path,
            key_key: key_path,
        })),
        (Some(cert), None) => Err(ConfigError::new(
            "GW-CFG-005",
            &key_path,
            "",
            &format!(
                "missing: {cert_path} = \"{}\" needs its private key's file",
                cert.display()
            ),
        )),
        (None, Some(key)) => Err(ConfigError::new(
            "GW-CFG-005",
            &cert_path,
            "",
            &format!(
                "missing: {key_path} = \"{}\" needs its certificate's file",
                key.display()
            ),
        )),
    }
}

/// The proxy listener's TLS from `tls-cert` and `tls-key`, read; `h2c` with them is
/// refused.
fn listener_tls(
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
    h2c: bool,
) -> Result<Option<ListenerTls>, ConfigError> {
    let Some(pair) = pem_pair("gateway", "tls-cert", cert, key)? else {
        return Ok(None);
    };
    if h2c {
        return Err(ConfigError::new(
            "GW-CFG-010",
            "gateway.h2c",
            "true",
            "h2c is HTTP/2 over cleartext but the listener has tls-cert: a TLS listener \
             offers HTTP/2 by ALPN already; allowed h2c = false with tls-cert",
        ));
    }
    ListenerTls::load(pair).map(Some)
}

fn upstream(path: &str, value: &toml::Value) -> Result<Uri, ConfigError> {
    let text = string(path, value)?;
    let bad = || {
        ConfigError::new(
            "GW-CFG-004",
            path,
            &show(value),
            "allowed an http:// or https:// URL with a host, such as \"http://127.0.0.1:7001\"",
        )
    };
    let uri: Uri = text.parse().map_err(|_| bad())?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(bad());
    }
    if let Some(authority) = uri.authority()
        && authority_port(authority.as_str()).is_err()
    {
        return Err(ConfigError::new(
            "GW-CFG-009",
            path,
            &show(value),
            "port out of range; allowed 1-65535",
        ));
    }
    if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return Err(bad());
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [[routes]]
        prefix = "/a"
        cluster = "a"
        [clusters.a]
        upstreams = ["http://127.0.0.1:1"]
    "#;

    #[test]
    fn minimal_document_uses_defaults() {
        let c = GatewayConfig::from_toml(MINIMAL).unwrap();
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(c.clusters["a"].attempt_timeout, DEFAULT_ATTEMPT_TIMEOUT);
        assert!(!c.clusters["a"].honor_retry_after, "off unless configured");
        assert!(c.breakers_enabled);
        assert_eq!(c.route("/a/x").unwrap().cluster, "a");
        assert!(c.route("/ab").is_none());
    }

    #[test]
    fn longest_prefix_wins() {
        let c = GatewayConfig::from_toml(
            r#"
            [[routes]]
            prefix = "/"
            cluster = "a"
            [[routes]]
            prefix = "/b"
            cluster = "b"
            [clusters.a]
            upstreams = ["http://127.0.0.1:1"]
            [clusters.b]
            upstreams = ["http://127.0.0.1:2"]
        "#,
        )
        .unwrap();
        assert_eq!(c.route("/b/1").unwrap().cluster, "b");
        assert_eq!(c.route("/c").unwrap().cluster, "a");
    }

    #[test]
    fn honor_retry_after_is_read_from_the_gateway_and_each_cluster() {
        let doc = |gateway: &str, a: &str| {
            format!(
                "[gateway]\n{gateway}\n\
                 [clusters.a]\nupstreams = [\"http://127.0.0.1:1\"]\n{a}\n\
                 [clusters.b]\nupstreams = [\"http://127.0.0.1:2\"]\n"
            )
        };
        let read = |gateway: &str, a: &str| {
            let c = GatewayConfig::from_toml(&doc(gateway, a)).unwrap();
            (
                c.clusters["a"].honor_retry_after,
                c.clusters["b"].honor_retry_after,
            )
        };
        assert_eq!(read("", ""), (false, false));
        assert_eq!(read("honor-retry-after = true", ""), (true, true));
        assert_eq!(read("", "honor-retry-after = true"), (true, false));
        assert_eq!(
            read("honor-retry-after = true", "honor-retry-after = false"),
            (false, true),
            "a cluster's key overrides [gateway]'s"
        );
        // And the classifier follows it.
        let c = GatewayConfig::from_toml(&doc("", "honor-retry-after = true")).unwrap();
        let headers = {
            let mut h = http::HeaderMap::new();
            h.insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("7"),
            );
            h
        };
        let of = |cluster: &str| {
            c.clusters[cluster]
                .classifier()
                .verdict_of(http::StatusCode::TOO_MANY_REQUESTS, &headers)
        };
        assert_eq!(
            of("a"),
            cutout::classify::Verdict::OpenFor(Duration::from_secs(7))
        );
        assert_eq!(of("b"), cutout::classify::Verdict::Ignored);

        for (gateway, a, key) in [
            (
                "honor-retry-after = \"yes\"",
                "",
                "gateway.honor-retry-after",
            ),
            ("", "honor-retry-after = 1", "clusters.a.honor-retry-after"),
        ] {
            let e = err(&doc(gateway, a));
            assert_eq!((e.code(), e.key()), ("GW-CFG-003", key));
        }
        let e = err(&doc("honr-retry-after = true", ""));
        assert_eq!(e.code(), "GW-CFG-002");
        assert!(e.to_string().contains("honor-retry-after"), "{e}");
    }

    #[test]
    fn sizes_and_ports_are_read() {
        assert_eq!(parse_size("64KiB"), Some(65536));
        assert_eq!(parse_size("10 MiB"), Some(10 << 20));
        assert_eq!(parse_size("1MB"), Some(1_000_000));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("2gib"), Some(2 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("1.5MiB"), None);
        assert_eq!(parse_size("99999999999999999999GiB"), None);
        assert_eq!(authority_port("a.example"), Ok(None));
        assert_eq!(authority_port("a.example:8080"), Ok(Some(8080)));
        assert_eq!(authority_port("[::1]"), Ok(None));
        assert_eq!(authority_port("[::1]:9"), Ok(Some(9)));
        for bad in ["a:0", "a:65536", "a:99999", "a:", "a:x", "a:0000000000080"] {
            assert_eq!(authority_port(bad), Err(()), "{bad}");
        }
        let c = GatewayConfig::from_toml(MINIMAL).unwrap();
        assert_eq!(c.limits, Limits::default());
        assert!(!c.healthz_strict);
        assert!(c.warnings().is_empty());
    }

    fn err(doc: &str) -> ConfigError {
        GatewayConfig::from_toml(doc).unwrap_err()
    }

    const POOL: &str = r#"
        [clusters.pool]
        upstreams = ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3", "http://127.0.0.1:4"]
    "#;

    #[test]
    fn ejection_detached_and_access_log_keys_have_defaults_and_codes() {
        let c = GatewayConfig::from_toml(POOL).unwrap();
        assert_eq!(c.clusters["pool"].max_ejection_percent, 50);
        assert_eq!(c.clusters["pool"].max_ejected(), 2);
        assert_eq!(c.clusters["pool"].max_detached_attempts, 64);
        assert_eq!(c.max_detached_body, 1 << 20);
        assert_eq!(c.give_up_floor, None);
        assert!(c.warnings().is_empty());
        assert!(c.access_log);
        let doc = |gateway: &str, cluster: &str| {
            format!("[gateway]\n{gateway}\n{}\n{cluster}\n", POOL.trim())
        };
        let c = GatewayConfig::from_toml(&doc(
            "max-ejection-percent = 10\nmax-detached-attempts = 0\nmax-detached-body = \"64KiB\"\n\
             access-log = false",
            "",
        ))
        .unwrap();
        assert_eq!(c.clusters["pool"].max_detached_attempts, 0, "0: cancel");
        assert_eq!(c.max_detached_body, 64 << 10);
        assert_eq!(
            c.clusters["pool"].max_ejected(),
            1,
            "10 % of 4 is 0: at least one"
        );
        assert!(!c.access_log);
        let c = GatewayConfig::from_toml(&doc(
            "max-detached-attempts = 8",
            "max-detached-attempts = 100",
        ))
        .unwrap();
        assert_eq!(
            c.clusters["pool"].max_detached_attempts, 100,
            "the cluster's own"
        );
        let c = GatewayConfig::from_toml(&doc("", "max-ejection-percent = 0")).unwrap();
        assert_eq!(c.clusters["pool"].max_ejected(), 0, "off");
        let c = GatewayConfig::from_toml(&doc("", "max-ejection-percent = 100")).unwrap();
        assert_eq!(c.clusters["pool"].max_ejected(), 4);
        let c = GatewayConfig::from_toml(MINIMAL).unwrap();
        assert_eq!(
            c.clusters["a"].max_ejected(),
            0,
            "one upstream: no host breakers"
        );
        for (gateway, cluster, code, key) in [
            (
                "max-ejection-percent = 101",
                "",
                "GW-CFG-009",
                "gateway.max-ejection-percent",
            ),
            (
                "max-ejection-percent = -1",
                "",
                "GW-CFG-009",
                "gateway.max-ejection-percent",
            ),
            (
                "",
                "max-ejection-percent = \"half\"",
                "GW-CFG-003",
                "clusters.pool.max-ejection-percent",
            ),
            (
                "give-up-floor = \"0s\"",
                "",
                "GW-CFG-004",
                "gateway.give-up-floor",
            ),
            (
                "max-detached-attempts = -1",
                "",
                "GW-CFG-009",
                "gateway.max-detached-attempts",
            ),
            (
                "max-detached-attempts = 1048577",
                "",
                "GW-CFG-009",
                "gateway.max-detached-attempts",
            ),
            (
                "",
                "max-detached-attempts = \"many\"",
                "GW-CFG-003",
                "clusters.pool.max-detached-attempts",
            ),
            (
                "max-detached-body = 0",
                "",
                "GW-CFG-009",
                "gateway.max-detached-body",
            ),
            (
                "max-detached-body = \"lots\"",
                "",
                "GW-CFG-004",
                "gateway.max-detached-body",
            ),
            (
                "access-log = \"yes\"",
                "",
                "GW-CFG-003",
                "gateway.access-log",
            ),
        ] {
            let e = err(&doc(gateway, cluster));
            assert_eq!((e.code(), e.key()), (code, key), "{e}");
        }
        let e =
            err("[clusters.a]\nupstreams = [\"http://127.0.0.1:1\", \"http://127.0.0.1:1/\"]\n");
        assert_eq!(
            (e.code(), e.key()),
            ("GW-CFG-011", "clusters.a.upstreams"),
            "{e}"
        );
    }

    #[test]
    fn routing_keys_have_defaults_and_codes() {
        let c = GatewayConfig::from_toml(POOL).unwrap();
        let pool = &c.clusters["pool"];
        assert_eq!(
            (
                pool.panic_threshold,
                pool.retry,
                pool.retry_budget_percent,
                pool.min_concurrent_retries
            ),
            (50, true, 20, 3)
        );
        assert!(pool.health_check.is_none(), "no checks unless configured");
        let doc = |gateway: &str, cluster: &str| {
            format!("[gateway]\n{gateway}\n{}\n{cluster}\n", POOL.trim())
        };
        let c = GatewayConfig::from_toml(&doc(
            "panic-threshold = 0\nretry = false\nretry-budget-percent = 50\n\
             min-concurrent-retries = 0",
            "",
        ))
        .unwrap();
        let pool = &c.clusters["pool"];
        assert_eq!(
            (
                pool.panic_threshold,
                pool.retry,
                pool.retry_budget_percent,
                pool.min_concurrent_retries
            ),
            (0, false, 50, 0),
            "[gateway] sets them for every cluster"
        );
        let c = GatewayConfig::from_toml(&doc(
            "retry = false\npanic-threshold = 10",
            "retry = true\npanic-threshold = 70\nmin-concurrent-retries = 9",
        ))
        .unwrap();
        let pool = &c.clusters["pool"];
        assert_eq!(
            (
                pool.retry,
                pool.panic_threshold,
                pool.min_concurrent_retries
            ),
            (true, 70, 9),
            "the cluster's own"
        );
        for (gateway, cluster, code, key) in [
            (
                "panic-threshold = 101",
                "",
                "GW-CFG-009",
                "gateway.panic-threshold",
            ),
            ("retry = \"yes\"", "", "GW-CFG-003", "gateway.retry"),
            (
                "retry-budget-percent = -1",
                "",
                "GW-CFG-009",
                "gateway.retry-budget-percent",
            ),
            (
                "",
                "min-concurrent-retries = \"x\"",
                "GW-CFG-003",
                "clusters.pool.min-concurrent-retries",
            ),
            (
                "",
                "panic-threshold = 0.5",
                "GW-CFG-003",
                "clusters.pool.panic-threshold",
            ),
            (
                "health-check = { path = \"/h\" }",
                "",
                "GW-CFG-002",
                "gateway.health-check",
            ),
        ] {
            let e = err(&doc(gateway, cluster));
            assert_eq!((e.code(), e.key()), (code, key), "{e}");
        }
    }

    #[test]
    fn a_health_check_table_has_defaults_and_codes_for_bad_values() {
        let with = |keys: &str| {
            GatewayConfig::from_toml(&format!(
                "{}\n[clusters.pool.health-check]\n{keys}\n",
                POOL.trim()
            ))
        };
        let check = |keys: &str| with(keys).unwrap().clusters["pool"].health_check.clone();
        let c = check("path = \"/healthz\"").unwrap();
        assert_eq!(c.path.as_str(), "/healthz");
        assert_eq!(
            (c.interval, c.timeout, c.jitter),
            (
                Duration::from_secs(5),
                Duration::from_secs(1),
                Duration::from_millis(500)
            )
        );
        assert_eq!((c.healthy_threshold, c.unhealthy_threshold), (1, None));
        let c = check("path = \"/h?deep=1\"\ninterval = \"200ms\"").unwrap();
        assert_eq!(c.path.as_str(), "/h?deep=1");
        assert_eq!(
            (c.timeout, c.jitter),
            (Duration::from_millis(200), Duration::from_millis(20)),
            "an interval shorter than the default timeout is the timeout"
        );
        let c = check(
            "path = \"/h\"\ninterval = \"2s\"\ntimeout = \"500ms\"\nhealthy-threshold = 2\n\
             unhealthy-threshold = 3\njitter = \"0s\"",
        )
        .unwrap();
        assert_eq!(
            (c.interval, c.timeout, c.jitter),
            (
                Duration::from_secs(2),
                Duration::from_millis(500),
                Duration::ZERO
            )
        );
        assert_eq!((c.healthy_threshold, c.unhealthy_threshold), (2, Some(3)));
        let c = check("path = \"/h\"\nunhealthy-threshold = \"off\"").unwrap();
        assert_eq!(c.unhealthy_threshold, None);
        let at = |key: &str| format!("clusters.pool.health-check.{key}");
        for (keys, code, key) in [
            ("interval = \"1s\"", "GW-CFG-005", at("path")),
            ("path = \"healthz\"", "GW-CFG-004", at("path")),
            ("path = \"/a b\"", "GW-CFG-004", at("path")),
            ("path = 3", "GW-CFG-003", at("path")),
            (
                "path = \"/h\"\ninterval = \"0s\"",
                "GW-CFG-004",
                at("interval"),
            ),
            (
                "path = \"/h\"\ntimeout = \"10s\"",
                "GW-CFG-010",
                at("timeout"),
            ),
            ("path = \"/h\"\njitter = \"6s\"", "GW-CFG-010", at("jitter")),
            (
                "path = \"/h\"\njitter = \"soon\"",
                "GW-CFG-004",
                at("jitter"),
            ),
            (
                "path = \"/h\"\nhealthy-threshold = 0",
                "GW-CFG-009",
                at("healthy-threshold"),
            ),
            (
                "path = \"/h\"\nhealthy-threshold = 1001",
                "GW-CFG-009",
                at("healthy-threshold"),
            ),
            (
                "path = \"/h\"\nunhealthy-threshold = \"never\"",
                "GW-CFG-003",
                at("unhealthy-threshold"),
            ),
            (
                "path = \"/h\"\nunhealthy-threshold = 0",
                "GW-CFG-009",
                at("unhealthy-threshold"),
            ),
            ("path = \"/h\"\ncolor = 1", "GW-CFG-002", at("color")),
        ] {
            let e = with(keys).unwrap_err();
            assert_eq!((e.code(), e.key()), (code, key.as_str()), "{keys}: {e}");
        }
        let e = err(&format!("{}\nhealth-check = true\n", POOL.trim()));
        assert_eq!(
            (e.code(), e.key()),
            ("GW-CFG-003", "clusters.pool.health-check"),
            "{e}"
        );
    }

    #[test]
    fn the_deprecated_give_up_floor_is_accepted_with_a_warning() {
        let c = GatewayConfig::from_toml(&format!(
            "[gateway]\ngive-up-floor = \"250ms\"\n{}",
            POOL.trim()
        ))
        .unwrap();
        assert_eq!(c.give_up_floor, Some(Duration::from_millis(250)));
        let warnings = c.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("GW-WARN-003: gateway.give-up-floor = \"250ms\""),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("ignored"), "{warnings:?}");
    }

    #[test]
    fn a_host_of_a_cluster_may_have_its_own_breaker_settings() {
        let c = GatewayConfig::from_toml(&format!(
            "{POOL}\n[breakers.instances.\"pool/127.0.0.1:2\"]\nminimum-calls = 3\n"
        ))
        .unwrap();
        assert_eq!(
            c.breakers
                .instance("pool/127.0.0.1:2")
                .unwrap()
                .minimum_calls(),
            3
        );
        let e = err(&format!(
            "{POOL}\n[breakers.instances.\"pool/127.0.0.1:9\"]\nminimum-calls = 3\n"
        ));
        assert_eq!(e.code(), "GW-CFG-007");
        assert!(e.to_string().contains("<cluster>/<host>:<port>"), "{e}");
    }

    fn settings_of(doc: &str) -> (Settings, Settings, Settings) {
        let c = GatewayConfig::from_toml(&format!("{POOL}\n{doc}")).unwrap();
        (
            c.cluster_settings("pool"),
            c.host_settings("pool", "pool/127.0.0.1:1"),
            c.host_settings("pool", "pool/127.0.0.1:2"),
        )
    }

    #[test]
    fn the_shipped_defaults_never_judge_latency_without_a_budget() {
        let (cluster, host, _) = settings_of("");
        for s in [&cluster, &host] {
            assert!(s.slow_calls().is_none(), "the relative slow rule is off");
            assert_eq!(s.slow_call_threshold(), None);
            assert!(
                s.adaptive() && s.failures().is_some(),
                "relative failures stay"
            );
            assert_eq!(s.consecutive_failures(), Some(5));
        }
        // Whatever else the operator sets, the rule stays off...
        let (cluster, host, _) = settings_of(
            "[breakers.defaults]
failure-ratio = 0.5
adaptive = true
",
        );
        assert_eq!(cluster.failure_ratio(), Some(0.5));
        assert!(cluster.slow_calls().is_none() && host.slow_calls().is_none());
        // ... and a latency budget is the operator's: absolute, the relative rule still off.
        let (cluster, _, _) = settings_of(
            "[breakers.defaults]
slow-call-threshold = \"250ms\"
",
        );
        assert_eq!(
            cluster.slow_call_threshold(),
            Some(Duration::from_millis(250))
        );
        assert!(cluster.slow_calls().is_none());
        // A key of the rule switches it on where it is written.
        let (cluster, host, _) = settings_of(
            "[breakers.defaults]
slow-calls-multiple = 4
",
        );
        assert_eq!(cluster.slow_calls().map(|r| r.multiple()), Some(4.0));
        assert_eq!(host.slow_calls().map(|r| r.multiple()), Some(4.0));
        let (cluster, a, b) = settings_of(
            "[breakers.instances.\"pool/127.0.0.1:2\"]
slow-calls-floor = \"5ms\"
",
        );
        assert!(cluster.slow_calls().is_none() && a.slow_calls().is_none());
        assert_eq!(
            b.slow_calls().map(|r| r.floor_duration()),
            Some(Duration::from_millis(5)),
            "only the instance that set it"
        );
        let (cluster, _, _) = settings_of(
            "[breakers.configs.watched]
latency-baseline-window = \"10m\"
             [breakers.instances.pool]
base-config = \"watched\"
",
        );
        assert!(cluster.slow_calls().is_some(), "through a base config");
        // The operator's own switch, and contradictions, are cutout's.
        let (cluster, _, _) = settings_of(
            "[breakers.defaults]
slow-calls = \"off\"
",
        );
        assert!(cluster.slow_calls().is_none());
        let e = err(&format!(
            "{POOL}\n[breakers.defaults]\nslow-calls = \"off\"\nslow-calls-multiple = 4\n"
        ));
        assert_eq!(e.code(), "CUT-CFG-006", "{e}");
        let e = err(&format!("{POOL}\n[breakers]\ndefaults = 3\n"));
        assert!(e.code().starts_with("CUT-CFG-"), "{e}");
        let e = err(&format!("breakers = 3\n{POOL}"));
        assert_eq!((e.code(), e.key()), ("GW-CFG-003", "breakers"), "{e}");
    }

    #[test]
    fn a_host_breakers_break_stops_growing_at_15_s_unless_the_operator_says() {
        let (cluster, host, _) = settings_of("");
        assert_eq!(cluster.max_break_duration(), Duration::from_secs(120));
        assert_eq!(host.max_break_duration(), DEFAULT_HOST_MAX_BREAK);
        assert_eq!(host.break_duration(), Duration::from_secs(15));
        // A longer first break: the cap is the first break (no growth), never an error.
        let (_, host, _) = settings_of(
            "[breakers.defaults]
break-duration = \"40s\"
",
        );
        assert_eq!(
            (host.break_duration(), host.max_break_duration()),
            (Duration::from_secs(40), Duration::from_secs(40))
        );
        // The operator's cap, wherever the host's settings come from, is kept.
        let (cluster, host, _) = settings_of(
            "[breakers.defaults]
max-break-duration = \"5m\"
",
        );
        assert_eq!(cluster.max_break_duration(), Duration::from_secs(300));
        assert_eq!(host.max_break_duration(), Duration::from_secs(300));
        let (_, host, other) = settings_of(
            "[breakers.instances.pool]
max-break-duration = \"1m\"
",
        );
        assert_eq!(host.max_break_duration(), Duration::from_secs(60));
        assert_eq!(other.max_break_duration(), Duration::from_secs(60));
        let (_, a, b) = settings_of(
            "[breakers.configs.slow]
max-break-duration = \"3m\"
             [breakers.instances.\"pool/127.0.0.1:2\"]
base-config = \"slow\"
minimum-calls = 3
",
        );
        assert_eq!(a.max_break_duration(), DEFAULT_HOST_MAX_BREAK);
        assert_eq!(b.max_break_duration(), Duration::from_secs(180));
        assert_eq!(b.minimum_calls(), 3);
        // A host instance that does not set it: capped, its other keys kept.
        let (_, _, b) = settings_of(
            "[breakers.instances.\"pool/127.0.0.1:2\"]
minimum-calls = 3
",
        );
        assert_eq!(
            (b.max_break_duration(), b.minimum_calls()),
            (DEFAULT_HOST_MAX_BREAK, 3)
        );
    }

    #[test]
    fn errors_name_code_key_and_value() {
        let e = err(&format!("{MINIMAL}\n[gateway]\nlisten = \"nowhere\""));
        assert_eq!(e.code(), "GW-CFG-004");
        assert_eq!(e.key(), "gateway.listen");
        assert!(e.to_string().contains("nowhere"), "{e}");

        let e = err(&format!("{MINIMAL}\n[gateway]\nlistn = \"x\""));
        assert_eq!(e.code(), "GW-CFG-002");

        let e = err(MINIMAL.replace("http://127.0.0.1:1", "ftp://x").as_str());
        assert_eq!(e.key(), "clusters.a.upstreams");

        let e = err(&format!(
            "{MINIMAL}\n[breakers.defaults]\nfailure-ratio = \"150%\""
        ));
        assert_eq!(e.code(), "CUT-CFG-001");
        assert!(e.to_string().contains("failure-ratio"), "{e}");

        let e = err(&format!(
            "{MINIMAL}\n[breakers.instances.nope]\nminimum-calls = 3"
        ));
        assert_eq!(e.code(), "GW-CFG-007");

        assert_eq!(err("[[routes]\n").code(), "GW-CFG-001");
        assert_eq!(err("").code(), "GW-CFG-005");
        let e = err(&MINIMAL.replace("cluster = \"a\"", "cluster = \"b\""));
        assert_eq!(e.code(), "GW-CFG-007");
        assert_eq!(e.value(), "b");
    }
}

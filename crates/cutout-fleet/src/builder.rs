//! [`FleetBuilder`]: the URL, the pod's id, the prefix and the timings, checked at build.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Code, FleetError, Kind};
use crate::fleet::{Fleet, Shared};
use crate::store::Target;

/// The timings and names a fleet runs with, once validated.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) pod: String,
    pub(crate) prefix: String,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) staleness: Duration,
    pub(crate) retention: Duration,
    pub(crate) max_backoff: Duration,
    /// Fleet recovery's budget, probes per second fleet-wide; `None`: off.
    pub(crate) recovery_budget: Option<u32>,
    /// Where Redis is, for logs: `host:port` or a socket path, never the password.
    pub(crate) addr: String,
}

/// Builds a [`Fleet`]. Every setting has a default; [`FleetBuilder::build`] validates them and
/// the URL, and starts the background task. It does no I/O: an unreachable Redis or one that
/// refuses the password is not an error of the build (the task logs a warning and reports it
/// in [`Fleet::health`], and the breakers keep deciding locally).
///
/// ```
/// use std::time::Duration;
/// use cutout_fleet::Fleet;
///
/// // Not a URL: a clear error at build.
/// let error = Fleet::builder("localhost:6379").build().unwrap_err();
/// assert!(error.is_url(), "{error}");
///
/// // A setting out of range: named, with the range.
/// let error = Fleet::builder("redis://127.0.0.1:6379")
///     .interval(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert!(error.is_invalid() && error.to_string().contains("interval"), "{error}");
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct FleetBuilder {
    url: String,
    pod: Option<String>,
    prefix: String,
    interval: Duration,
    timeout: Duration,
    connect_timeout: Duration,
    staleness: Option<Duration>,
    retention: Duration,
    max_backoff: Duration,
    recovery: bool,
    recovery_budget: u32,
    runtime: Option<tokio::runtime::Handle>,
    /// The CA file of `rediss://` connects, instead of the system's roots.
    tls_ca_file: Option<std::path::PathBuf>,
}

const MIN_INTERVAL: Duration = Duration::from_millis(10);
const MAX_INTERVAL: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_STALENESS: Duration = Duration::from_secs(3600);
const MAX_RETENTION: Duration = Duration::from_secs(86_400);
const MAX_BACKOFF: Duration = Duration::from_secs(600);
const MAX_NAME: usize = 256;
/// The default fleet recovery budget, probes per second fleet-wide (see
/// [`FleetBuilder::recovery_budget`]).
pub(crate) const RECOVERY_BUDGET: u32 = 25;
pub(crate) const MAX_RECOVERY_BUDGET: u32 = 100_000;

impl FleetBuilder {
    pub(crate) fn new(url: String) -> FleetBuilder {
        FleetBuilder {
            url,
            pod: None,
            prefix: "cutout:fleet".to_owned(),
            interval: Duration::from_millis(250),
            timeout: Duration::from_millis(200),
            connect_timeout: Duration::from_millis(200),
            staleness: None,
            retention: Duration::from_secs(60),
            max_backoff: Duration::from_secs(5),
            recovery: true,
            recovery_budget: RECOVERY_BUDGET,
            runtime: None,
            tls_ca_file: None,
        }
    }

    /// This pod's id: the `pod` of its logs and the `pod` label of the metrics (1 to 256
    /// bytes, no whitespace or control characters; Redis never sees it: each pod's report is
    /// a share of the breaker's ring, and two pods of one id count as two). Default: the
    /// `HOSTNAME` environment variable (a Kubernetes pod's name) when it is a valid id, else
    /// `pod-` followed by 16 random hex digits.
    pub fn pod(mut self, pod: impl Into<String>) -> Self {
        self.pod = Some(pod.into());
        self
    }

    /// The prefix of the keys: a breaker's ring is `{<prefix>:<breaker id>}`, escaped so that
    /// no two (prefix, id) pairs meet ([`Fleet::key`]; default `cutout:fleet`; 1 to 256
    /// bytes, no whitespace or control characters). Services sharing a Redis with breakers
    /// of the same ids but different dependencies need different prefixes.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How often the task publishes and reads (default 250 ms; 10 ms to 60 s). One round
    /// trip per tick for all watched breakers.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The longest a round may take before it counts as failed and the connection is
    /// replaced (default 200 ms; 1 ms to 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a connect may take, the handshake (`AUTH`) included (default 200 ms; 1 ms
    /// to 60 s). Loading the script after it is bounded by [`timeout`](Self::timeout).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How old another pod's report may be, on Redis's clock, and still count (default
    /// 3 × the interval + 250 ms: 1 s for the default interval; from one interval to 1 h):
    /// the ring's window, 4 buckets of a quarter of it, so that a report counts for between ¾
    /// of the bound and all of it after its pod's last round (keep the interval under ¾ of it
    /// for a live pod to count all along). Also how long a view stays usable by the open
    /// gate after the round that read it.
    pub fn staleness(mut self, staleness: Duration) -> Self {
        self.staleness = Some(staleness);
        self
    }

    /// How long a breaker's ring outlives the last round of its last pod (its `PEXPIRE`;
    /// default 60 s; from the staleness bound to one day).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The longest wait between two connect attempts while Redis is unreachable (default
    /// 5 s; from one interval to 10 min). The wait starts at one interval and doubles after
    /// each failed attempt, with equal jitter.
    pub fn max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// Whether this pod takes part in fleet recovery (default on): it publishes a close of a
    /// watched breaker by its own probes, and ends the break of an open one early when a peer
    /// published one, in a release slot within the
    /// [recovery budget](FleetBuilder::recovery_budget). Off, its breakers serve their own
    /// breaks and nothing of theirs is published; the peers' recoveries go on without it.
    pub fn recovery(mut self, enabled: bool) -> Self {
        self.recovery = enabled;
        self
    }

    /// Fleet recovery's probe budget: the most probes a second that released breakers may
    /// send the dependency, fleet-wide (default 25; 1 to 100,000). The script hands out
    /// release slots far enough apart that a sliding second holds at most
    /// `⌊budget / w⌋` releases' worth of probes, `w` being the probes one release of the
    /// breaker may send (2 at the core's defaults: two probe successes close it, one at a
    /// time): at the default, 11 releases a second, one every 91 ms. Strict as long as each
    /// released pod sends its probes within one spacing of its release (pods whose calls are
    /// sparser spread them, and a second may hold more: see below); pods whose own break
    /// ends first are not counted (they probe as they would without fleet recovery). Every
    /// pod of a fleet should use the same budget: each slot is spaced by the budget of the
    /// pod that asks for it.
    ///
    /// The default, 25, from cutout-lab's `outage-fleet-recovery` (100 pods × 10 requests a
    /// second, a 3-minute outage, the core's defaults, 20 seeds; its README's section 12):
    /// traffic given back 9.8 s after the recovery (105.8 s without fleet recovery), at a
    /// busiest second of 30.6 probes (21.1 without: the outage's own waves), 3% of the
    /// fleet's calls. A budget of 20 gives 11.3 s and 26.4 probes, 30 gives 7.8 s and 36.6:
    /// the probes a fleet sends to come back are about two per pod whatever the budget, and
    /// the budget says how fast they may come. Size it to what the dependency can take while
    /// it recovers, not to the fleet.
    pub fn recovery_budget(mut self, probes_per_second: u32) -> Self {
        self.recovery_budget = probes_per_second;
        self
    }

    /// The runtime the task is spawned on (default: the current one, as
    /// `tokio::runtime::Handle::current` finds it).
    pub fn runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// The CA certificate (PEM, one or more) that a `rediss://` server's certificate must be
    /// signed by, instead of the system's roots (feature `tls`): a private CA, a test CA, a
    /// managed service's own. Read once at [`build`](Self::build): a file that cannot be
    /// read or holds no PEM certificate is `FLEET-CFG-005`, and so is a CA file for a URL
    /// that is not `rediss://`.
    #[cfg(feature = "tls")]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Validates the URL and the settings and starts the task. Does no I/O (but for reading
    /// the [CA file](Self::tls_ca_file), if one is given).
    ///
    /// The URL is `redis://[user:password@]host[:port][/db]` (the user an ACL user, or none
    /// for the `default` user), with the feature `tls` also
    /// `rediss://[user:password@]host[:port][/db]` (TLS, the server's certificate checked
    /// against the system's roots or the [CA file](Self::tls_ca_file), and its name against
    /// the host), `redis+unix:///path` (or `unix:///path`), or with the feature `sentinel`
    /// `redis+sentinel://[user:password@]host[:port][,host[:port]...]/name[/db]`: the
    /// sentinels (port 26379 by default) are asked for the primary of `name` on every
    /// connect, and the credentials and database are the primary's (the sentinels are asked
    /// without credentials).
    ///
    /// Errors: a malformed URL or one this build cannot use ([`FleetError::is_url`], with a
    /// code saying what is wrong: no scheme, another scheme, TLS (not compiled in), the
    /// port, the rest), a setting out of range ([`FleetError::is_invalid`]), no runtime
    /// ([`FleetError::is_no_runtime`]).
    pub fn build(mut self) -> Result<Fleet, FleetError> {
        let runtime = self.runtime.take();
        let (config, target) = self.prepare()?;
        let runtime = match runtime {
            Some(handle) => handle,
            None => tokio::runtime::Handle::try_current().map_err(|_| {
                FleetError::new(
                    Kind::NoRuntime,
                    "Fleet::build needs a tokio runtime: call it inside one, or pass \
                     FleetBuilder::runtime(handle)",
                )
            })?,
        };
        let shared = Arc::new(Shared::new(config));
        let task = runtime.spawn(crate::task::run(Arc::clone(&shared), target));
        Ok(Fleet::new(shared, task))
    }

    /// Checks what [`build`](Self::build) checks (the URL, the settings, the CA file), and
    /// starts nothing: for a configuration validated before it is applied (a reload, a
    /// `--check`). Needs no runtime.
    pub fn validate(&self) -> Result<(), FleetError> {
        let mut checked = self.clone();
        checked.runtime = None;
        checked.prepare().map(drop)
    }

    /// The validated settings and where to connect.
    fn prepare(self) -> Result<(Config, Target), FleetError> {
        let (target, addr) = target(&self.url, self.tls_ca_file.as_deref())?;
        let pod = match self.pod {
            Some(pod) => {
                check_name("pod", &pod)?;
                pod
            }
            None => default_pod(),
        };
        check_name("prefix", &self.prefix)?;
        check_range("interval", self.interval, MIN_INTERVAL, MAX_INTERVAL)?;
        check_range(
            "timeout",
            self.timeout,
            Duration::from_millis(1),
            MAX_TIMEOUT,
        )?;
        check_range(
            "connect_timeout",
            self.connect_timeout,
            Duration::from_millis(1),
            MAX_TIMEOUT,
        )?;
        let staleness = self.staleness.unwrap_or(
            self.interval
                .saturating_mul(3)
                .saturating_add(Duration::from_millis(250)),
        );
        check_range("staleness", staleness, self.interval, MAX_STALENESS)?;
        check_range("retention", self.retention, staleness, MAX_RETENTION)?;
        check_range("max_backoff", self.max_backoff, self.interval, MAX_BACKOFF)?;
        if !(1..=MAX_RECOVERY_BUDGET).contains(&self.recovery_budget) {
            return Err(FleetError::new(
                Kind::Invalid,
                format!(
                    "recovery_budget = {} probes per second, allowed 1..={MAX_RECOVERY_BUDGET} \
                     (to switch fleet recovery off: recovery(false))",
                    self.recovery_budget
                ),
            ));
        }
        let config = Config {
            pod,
            prefix: self.prefix,
            interval: self.interval,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            staleness,
            retention: self.retention,
            max_backoff: self.max_backoff,
            recovery_budget: self.recovery.then_some(self.recovery_budget),
            addr,
        };
        Ok((config, target))
    }
}

/// The URL without its password, for error messages (and without the user's name: the part
/// before the `@` goes whole).
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        (None, Some(at)) => format!("***@{}", &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// What the task connects to for `url`, and where that is for the logs (`host:port`, a
/// socket path, or the sentinels and the name; never the password).
fn target(url: &str, ca_file: Option<&std::path::Path>) -> Result<(Target, String), FleetError> {
    #[cfg(feature = "sentinel")]
    {
        let trimmed = url.trim();
        let scheme = "redis+sentinel://";
        if trimmed.len() >= scheme.len()
            && trimmed.is_char_boundary(scheme.len())
            && trimmed[..scheme.len()].eq_ignore_ascii_case(scheme)
        {
            if let Some(path) = ca_file {
                return Err(ca_without_tls(path));
            }
            return sentinel(url, &trimmed[scheme.len()..]);
        }
    }
    let client = open(url, ca_file)?;
    if let redis::ConnectionAddr::Tcp(_, 0) = client.get_connection_info().addr() {
        return Err(FleetError::with_code(
            Code::UrlPort,
            format!(
                "{}: port 0 is out of range: allowed 1 to 65535",
                redact(url)
            ),
        ));
    }
    let addr = client.get_connection_info().addr().to_string();
    Ok((Target::Direct(Box::new(client)), addr))
}

/// The Redis client for `url`, over TLS with the system's roots or those of `ca_file`.
fn open(url: &str, ca_file: Option<&std::path::Path>) -> Result<redis::Client, FleetError> {
    use redis::IntoConnectionInfo;
    let info = url
        .into_connection_info()
        .map_err(|error| url_error(url, &error))?;
    #[cfg(feature = "tls")]
    let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    #[cfg(not(feature = "tls"))]
    let tls = false;
    #[cfg(feature = "tls")]
    if tls {
        crate::tls::install_provider();
    }
    let opened = match ca_file {
        None => redis::Client::open(info),
        Some(path) if !tls => return Err(ca_without_tls(path)),
        #[cfg(feature = "tls")]
        Some(path) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(crate::tls::read_ca(path)?),
            },
        ),
        #[cfg(not(feature = "tls"))]
        Some(path) => return Err(ca_without_tls(path)),
    };
    opened.map_err(|error| url_error(url, &error))
}

/// A CA file given for a URL that is not `rediss://`.
fn ca_without_tls(path: &std::path::Path) -> FleetError {
    FleetError::with_code(
        Code::CaFile,
        format!(
            "tls_ca_file = {}: the URL is not rediss://, and only a TLS connection has a \
             certificate to check",
            path.display()
        ),
    )
}

/// The form of a Sentinel URL, for messages.
#[cfg(feature = "sentinel")]
const SENTINEL_FORM: &str =
    "redis+sentinel://[user:password@]host[:port][,host[:port]...]/name[/db]";

/// `redis+sentinel://[user:password@]host[:port][,host[:port]...]/name[/db]` (`rest` is what
/// follows the scheme): the sentinels, each port 26379 unless given, the name of the primary,
/// and the primary's credentials and database. The Redis client has no URL for this; the
/// form is the one other clients and the Sentinel documentation use.
#[cfg(feature = "sentinel")]
fn sentinel(url: &str, rest: &str) -> Result<(Target, String), FleetError> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let shown = redact(url);
    let bad = |code, what: String| FleetError::with_code(code, format!("{shown}: {what}"));
    if rest.contains(['?', '#']) {
        return Err(bad(
            Code::UrlMalformed,
            format!("no query or fragment is read: write {SENTINEL_FORM}"),
        ));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let mut sentinels = Vec::new();
    for entry in hosts.split(',') {
        let (host, port) = split_host_port(entry);
        if host.is_empty() {
            return Err(bad(
                Code::UrlMalformed,
                format!("a sentinel without a host: write {SENTINEL_FORM}"),
            ));
        }
        let port = match port.map(check_port) {
            Some(Err(what)) => return Err(bad(Code::UrlPort, format!("a sentinel's {what}"))),
            Some(Ok(Some(port))) => port,
            Some(Ok(None)) | None => 26_379,
        };
        sentinels.push(redis::ConnectionAddr::Tcp(host.to_owned(), port));
    }
    let (name, db) = path.split_once('/').unwrap_or((path, ""));
    let db = db.trim_end_matches('/');
    if name.is_empty() {
        return Err(bad(
            Code::UrlMalformed,
            format!("no name of the primary (the path): write {SENTINEL_FORM}"),
        ));
    }
    let name = decode(name).ok_or_else(|| {
        bad(
            Code::UrlMalformed,
            "the name is not valid percent-encoded UTF-8".to_owned(),
        )
    })?;
    let db = match db {
        "" => None,
        db => Some(db.parse::<i64>().map_err(|_| {
            bad(
                Code::UrlMalformed,
                format!("database {db:?} is not a number: write {SENTINEL_FORM}"),
            )
        })?),
    };
    let refused = |error: redis::RedisError| bad(Code::UrlMalformed, detail(&error));
    let mut builder =
        SentinelClientBuilder::new(sentinels.clone(), &name, SentinelServerType::Master)
            .map_err(refused)?;
    if let Some(userinfo) = userinfo {
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let credentials = (decode(user), decode(password));
        let (Some(user), Some(password)) = credentials else {
            return Err(bad(
                Code::UrlMalformed,
                "the user or the password is not valid percent-encoded UTF-8".to_owned(),
            ));
        };
        if !user.is_empty() {
            builder = builder.set_client_to_redis_username(user);
        }
        if !password.is_empty() {
            builder = builder.set_client_to_redis_password(password);
        }
    }
    if let Some(db) = db {
        builder = builder.set_client_to_redis_db(db);
    }
    let client = builder.build().map_err(refused)?;
    let via: Vec<String> = sentinels.iter().map(ToString::to_string).collect();
    let addr = format!("sentinels {} for {name:?}", via.join(","));
    Ok((Target::Sentinel(Box::new(client)), addr))
}

/// Percent-decoding (`%40` for `@`), as URLs carry a password or a name; `None` for a bad
/// escape or bytes that are not UTF-8.
#[cfg(feature = "sentinel")]
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URL forms this build accepts, for messages.
#[cfg(not(feature = "tls"))]
const FORMS: &str = "redis://[user:password@]host[:port][/db] or redis+unix:///path";
/// The URL forms this build accepts, for messages.
#[cfg(feature = "tls")]
const FORMS: &str = "redis://[user:password@]host[:port][/db], \
                     rediss://[user:password@]host[:port][/db] or redis+unix:///path";

/// Says precisely why the Redis client refused `url`: no scheme, a scheme that is not
/// Redis's, TLS, the port, or (from the client's own detail) the rest. Never the password.
fn url_error(url: &str, error: &redis::RedisError) -> FleetError {
    let shown = redact(url);
    let bad = |code, what: String| FleetError::with_code(code, format!("{shown}: {what}"));
    let trimmed = url.trim();
    if trimmed.is_empty() {
        return FleetError::with_code(
            Code::UrlNoScheme,
            format!("the URL is empty: write {FORMS}"),
        );
    }
    let Some(colon_slashes) = trimmed.find("://") else {
        let hint = if trimmed.chars().any(|c| c.is_whitespace() || c.is_control()) {
            String::new()
        } else {
            format!(" (\"redis://{}\" for a TCP address)", redact(trimmed))
        };
        return bad(Code::UrlNoScheme, format!("no scheme: write {FORMS}{hint}"));
    };
    let scheme = trimmed[..colon_slashes].to_ascii_lowercase();
    match scheme.as_str() {
        "rediss" | "valkeys" if cfg!(not(feature = "tls")) => {
            return bad(
                Code::UrlTls,
                format!(
                    "{scheme}:// is Redis over TLS, and TLS is not compiled into this build: \
                     use redis:// on a trusted network, or a TLS proxy on the pod"
                ),
            );
        }
        "redis" | "valkey" | "rediss" | "valkeys" => {}
        "redis+unix" | "valkey+unix" | "unix" => return bad(Code::UrlMalformed, detail(error)),
        "redis+sentinel" => {
            return bad(
                Code::UrlScheme,
                "redis+sentinel:// needs cutout-fleet's feature \"sentinel\", not enabled in \
                 this build"
                    .to_owned(),
            );
        }
        _ => {
            return bad(
                Code::UrlScheme,
                format!("scheme {scheme:?} is not a Redis scheme: allowed {FORMS}"),
            );
        }
    }
    // `redis://[user:password@]host[:port][/db]`: the host and port are after the last `@`
    // of the authority, which ends at the first `/`, `?` or `#`.
    let rest = &trimmed[colon_slashes + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = split_host_port(host_port);
    if let Some(Err(what)) = port.map(check_port) {
        return bad(Code::UrlPort, what);
    }
    if host.is_empty() {
        return bad(Code::UrlMalformed, format!("no host: write {FORMS}"));
    }
    bad(Code::UrlMalformed, detail(error))
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`: the host and the port's text, if any.
fn split_host_port(host_port: &str) -> (&str, Option<&str>) {
    match host_port.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => (bracketed, None),
        },
        None => match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    }
}

/// A port's text: a number from 1 to 65535, or what is wrong with it. Empty is no port.
fn check_port(port: &str) -> Result<Option<u16>, String> {
    let range = "allowed 1 to 65535";
    if port.is_empty() {
        return Ok(None);
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port {port:?} is not a number: {range}"));
    }
    match port.parse::<u16>() {
        Ok(0) => Err(format!("port 0 is out of range: {range}")),
        Ok(number) => Ok(Some(number)),
        Err(_) if port.len() > 12 => {
            Err(format!("port {}... is out of range: {range}", &port[..12]))
        }
        Err(_) => Err(format!("port {port} is out of range: {range}")),
    }
}

/// The client's reason, in the words of a message: its description without the kind's
/// name it appends (`Invalid database number - InvalidClientConfig`), and "did not parse"
/// said as what it means. Its descriptions are fixed texts: never the password.
fn detail(error: &redis::RedisError) -> String {
    let text = error.to_string();
    let detail = text.split(" - ").next().unwrap_or_default().trim();
    if detail.is_empty() || detail.contains("did not parse") {
        return format!("not a valid URL: write {FORMS}");
    }
    let mut detail = detail.to_owned();
    if let Some(first) = detail.get_mut(..1) {
        first.make_ascii_lowercase();
    }
    format!("{detail}: write {FORMS}")
}

fn check_name(name: &str, value: &str) -> Result<(), FleetError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME
        && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(FleetError::with_code(
            Code::Name,
            format!(
                "{name} = {value:?}, allowed 1 to {MAX_NAME} bytes without whitespace or \
                 control characters"
            ),
        ))
    }
}

fn check_range(
    name: &str,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), FleetError> {
    if value >= min && value <= max {
        Ok(())
    } else {
        Err(FleetError::new(
            Kind::Invalid,
            format!("{name} = {value:?}, allowed {min:?}..={max:?}"),
        ))
    }
}

fn default_pod() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|host| check_name("pod", host).is_ok())
        .unwrap_or_else(|| format!("pod-{:016x}", fastrand::u64(..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("pod", "web-7f9c-abcde").is_ok());
        for bad in ["", "a b", "tab\there", "new\nline", &"x".repeat(257)] {
            assert!(check_name("pod", bad).unwrap_err().is_invalid());
        }
    }
}

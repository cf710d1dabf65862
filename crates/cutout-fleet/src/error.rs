//! [`FleetError`]: what went wrong building a fleet, watching a breaker or talking to Redis,
//! each with a stable code.
//!
//! # Codes
//! Every error carries a code ([`FleetError::code`]) that never changes meaning (new ones
//! are added), and its message starts with it, as the other crates' codes do (`CUT-CFG-*`,
//! `GW-CFG-*`). `FLEET-URL-*` and `FLEET-CFG-*` are returned by
//! [`FleetBuilder::build`](crate::FleetBuilder::build) and [`Fleet::watch`](crate::Fleet::watch);
//! `FLEET-RUN-*` are the failures of a connect or a round, reported through
//! [`Fleet::health`](crate::Fleet::health) and the logs, never to a breaker's callers.
//!
//! | code | kind | meaning |
//! |---|---|---|
//! | `FLEET-URL-001` | [`is_url`](FleetError::is_url) | the URL is empty or has no scheme (`127.0.0.1:6379` for `redis://127.0.0.1:6379`) |
//! | `FLEET-URL-002` | [`is_url`](FleetError::is_url) | the scheme is not one of Redis's (`http://`), or `redis+sentinel://` without the feature `sentinel` |
//! | `FLEET-URL-003` | [`is_url`](FleetError::is_url) | `rediss://` without the feature `tls` |
//! | `FLEET-URL-004` | [`is_url`](FleetError::is_url) | the port is not a number from 1 to 65535 |
//! | `FLEET-URL-005` | [`is_url`](FleetError::is_url) | otherwise malformed: no host, a wildcard host, a database that is not a number, not a URL; for `redis+sentinel://`, no name, a sentinel without a host, a query |
//! | `FLEET-CFG-001` | [`is_invalid`](FleetError::is_invalid) | a setting out of its range (the message names it, with the value and the range) |
//! | `FLEET-CFG-002` | [`is_invalid`](FleetError::is_invalid) | the pod's id or the prefix is empty, too long, or has whitespace or control characters |
//! | `FLEET-CFG-003` | [`is_no_runtime`](FleetError::is_no_runtime) | built outside a tokio runtime, without a runtime handle |
//! | `FLEET-CFG-004` | [`is_already_watched`](FleetError::is_already_watched) | a breaker of this id is already watched by this fleet |
//! | `FLEET-CFG-005` | [`is_invalid`](FleetError::is_invalid) | (feature `tls`) the TLS CA file cannot be read or holds no PEM certificate, or is given for a URL that is not `rediss://` |
//! | `FLEET-RUN-001` | [`is_unreachable`](FleetError::is_unreachable) | Redis cannot be reached: refused, reset, closed, name not resolved, any I/O error |
//! | `FLEET-RUN-002` | [`is_auth`](FleetError::is_auth) | Redis refused the credentials, or asked for some |
//! | `FLEET-RUN-003` | [`is_timeout`](FleetError::is_timeout) | a connect or a round took longer than its timeout |
//! | `FLEET-RUN-004` | [`is_server`](FleetError::is_server) | the server takes no writes now (`READONLY`, `MASTERDOWN`, `LOADING`): a demoted primary, a replica without its primary, a restart loading its data; the link is replaced |
//! | `FLEET-RUN-005` | [`is_server`](FleetError::is_server) | any other error reply (`OOM`, `NOPERM`, scripting disabled, ...) |
//! | `FLEET-RUN-006` | [`is_protocol`](FleetError::is_protocol) | not a Redis server: its answer to the connect is not the Redis protocol (an HTTP server, a TLS port, another service) |
//! | `FLEET-RUN-007` | [`is_protocol`](FleetError::is_protocol) | Redis answered a round with something this crate does not understand |
//! | `FLEET-RUN-008` | [`is_unreachable`](FleetError::is_unreachable) | (`redis+sentinel://`) no sentinel named a primary for the name that says it is one |
//! | `FLEET-RUN-009` | [`is_tls`](FleetError::is_tls) | (`rediss://`) the TLS handshake failed: a certificate no trusted root signs or that does not name the host, or a server that does not speak TLS on that port |

use std::fmt;

/// What went wrong: at build (a malformed URL, an invalid setting, no tokio runtime), when
/// watching a breaker, or in a round with Redis (reported through
/// [`Fleet::health`](crate::Fleet::health), never to a breaker's callers).
///
/// Opaque, with a predicate per kind (`is_*`) and a stable [`code`](FleetError::code) (the
/// table is in the README); the message starts with the code and says what and, for
/// settings, which one. Cheap to clone, `Send + Sync`.
///
/// ```
/// use cutout_fleet::Fleet;
///
/// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # let _guard = runtime.enter();
/// let error = Fleet::builder("redis://127.0.0.1:99999").build().unwrap_err();
/// assert!(error.is_url());
/// assert_eq!(error.code(), "FLEET-URL-004");
/// assert_eq!(
///     error.to_string(),
///     "FLEET-URL-004: invalid Redis URL: redis://127.0.0.1:99999: port 99999 is out of \
///      range: allowed 1 to 65535"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct FleetError {
    code: Code,
    message: String,
}

/// The kind of an error: what its predicate says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Url,
    Invalid,
    NoRuntime,
    AlreadyWatched,
    Unreachable,
    Auth,
    Timeout,
    Server,
    Protocol,
    Tls,
}

/// The precise error: its stable code, and through it its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    UrlNoScheme,
    UrlScheme,
    UrlTls,
    UrlPort,
    UrlMalformed,
    Setting,
    Name,
    NoRuntime,
    AlreadyWatched,
    Unreachable,
    Auth,
    Timeout,
    NotWritable,
    Server,
    NotRedis,
    Protocol,
    /// Only a `redis+sentinel://` URL (feature `sentinel`) meets it; its code is kept in every
    /// build so that codes never depend on features.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    NoPrimary,
    /// Only a `rediss://` URL (feature `tls`) meets these two; their codes are kept in every
    /// build so that codes never depend on features.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    CaFile,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Tls,
}

impl Code {
    /// The code a kind has when nothing more precise is known.
    fn of(kind: Kind) -> Code {
        match kind {
            Kind::Url => Code::UrlMalformed,
            Kind::Invalid => Code::Setting,
            Kind::NoRuntime => Code::NoRuntime,
            Kind::AlreadyWatched => Code::AlreadyWatched,
            Kind::Unreachable => Code::Unreachable,
            Kind::Auth => Code::Auth,
            Kind::Timeout => Code::Timeout,
            Kind::Server => Code::Server,
            Kind::Protocol => Code::Protocol,
            Kind::Tls => Code::Tls,
        }
    }

    fn kind(self) -> Kind {
        match self {
            Code::UrlNoScheme
            | Code::UrlScheme
            | Code::UrlTls
            | Code::UrlPort
            | Code::UrlMalformed => Kind::Url,
            Code::Setting | Code::Name | Code::CaFile => Kind::Invalid,
            Code::NoRuntime => Kind::NoRuntime,
            Code::AlreadyWatched => Kind::AlreadyWatched,
            Code::Unreachable | Code::NoPrimary => Kind::Unreachable,
            Code::Auth => Kind::Auth,
            Code::Timeout => Kind::Timeout,
            Code::NotWritable | Code::Server => Kind::Server,
            Code::NotRedis | Code::Protocol => Kind::Protocol,
            Code::Tls => Kind::Tls,
        }
    }

    const fn as_str(self) -> &'static str {
        match self {
            Code::UrlNoScheme => "FLEET-URL-001",
            Code::UrlScheme => "FLEET-URL-002",
            Code::UrlTls => "FLEET-URL-003",
            Code::UrlPort => "FLEET-URL-004",
            Code::UrlMalformed => "FLEET-URL-005",
            Code::Setting => "FLEET-CFG-001",
            Code::Name => "FLEET-CFG-002",
            Code::NoRuntime => "FLEET-CFG-003",
            Code::AlreadyWatched => "FLEET-CFG-004",
            Code::Unreachable => "FLEET-RUN-001",
            Code::Auth => "FLEET-RUN-002",
            Code::Timeout => "FLEET-RUN-003",
            Code::NotWritable => "FLEET-RUN-004",
            Code::Server => "FLEET-RUN-005",
            Code::NotRedis => "FLEET-RUN-006",
            Code::Protocol => "FLEET-RUN-007",
            Code::NoPrimary => "FLEET-RUN-008",
            Code::CaFile => "FLEET-CFG-005",
            Code::Tls => "FLEET-RUN-009",
        }
    }
}

impl FleetError {
    /// An error of `kind`, with that kind's general code.
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> FleetError {
        FleetError::with_code(Code::of(kind), message)
    }

    /// An error of a precise code.
    pub(crate) fn with_code(code: Code, message: impl Into<String>) -> FleetError {
        FleetError {
            code,
            message: message.into(),
        }
    }

    /// The stable code: `"FLEET-URL-004"`, `"FLEET-RUN-001"`, ... (the table is in the
    /// README and in this module's source). A code never changes meaning; new ones are added.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// The Redis URL could not be parsed or names something this build cannot reach (a
    /// `rediss://` URL: TLS is not compiled in). Returned by
    /// [`FleetBuilder::build`](crate::FleetBuilder::build); the code says what is wrong
    /// (`FLEET-URL-001` to `FLEET-URL-005`).
    pub fn is_url(&self) -> bool {
        self.kind() == Kind::Url
    }

    /// A setting is out of range (the message names it, with the value and the range).
    pub fn is_invalid(&self) -> bool {
        self.kind() == Kind::Invalid
    }

    /// [`FleetBuilder::build`](crate::FleetBuilder::build) was called outside a tokio runtime
    /// and no [`runtime`](crate::FleetBuilder::runtime) handle was given.
    pub fn is_no_runtime(&self) -> bool {
        self.kind() == Kind::NoRuntime
    }

    /// A breaker of this id is already watched by this fleet (two would publish under one
    /// pod's field).
    pub fn is_already_watched(&self) -> bool {
        self.kind() == Kind::AlreadyWatched
    }

    /// Redis could not be reached: connection refused, reset or dropped, name not resolved
    /// (`FLEET-RUN-001`); through Sentinel, also no primary for the name (`FLEET-RUN-008`).
    pub fn is_unreachable(&self) -> bool {
        self.kind() == Kind::Unreachable
    }

    /// Redis refused the credentials (`WRONGPASS`), or asked for some (`NOAUTH`).
    pub fn is_auth(&self) -> bool {
        self.kind() == Kind::Auth
    }

    /// A connect or a round took longer than its timeout (Redis slow, paused or partitioned).
    pub fn is_timeout(&self) -> bool {
        self.kind() == Kind::Timeout
    }

    /// Redis answered a round with an error other than authentication: `READONLY`,
    /// `MASTERDOWN` or `LOADING` (`FLEET-RUN-004`: the server takes no writes now, and the
    /// link is replaced), or any other (`FLEET-RUN-005`: `NOPERM`, `OOM`, scripting
    /// disabled, ...).
    pub fn is_server(&self) -> bool {
        self.kind() == Kind::Server
    }

    /// The server answered with something this crate does not understand: not a Redis
    /// server at all (`FLEET-RUN-006`), or a reply of an unexpected shape (`FLEET-RUN-007`).
    pub fn is_protocol(&self) -> bool {
        self.kind() == Kind::Protocol
    }

    /// The TLS handshake of a `rediss://` connect failed (`FLEET-RUN-009`): the server's
    /// certificate is signed by no trusted root (a private CA: give it with
    /// [`FleetBuilder::tls_ca_file`](crate::FleetBuilder)), does not name the URL's host, or
    /// the server does not speak TLS on that port.
    pub fn is_tls(&self) -> bool {
        self.kind() == Kind::Tls
    }

    /// Whether this error means the connection should be replaced, rather than the round
    /// simply tried again on the next tick: it may be dead or desynchronised (unreachable,
    /// timed out, an answer not understood), refused (authentication), or lead to a server
    /// that takes no writes now (`READONLY`, `MASTERDOWN`, `LOADING`: behind one address, a
    /// new connection may reach the new primary). Only the other server errors keep it.
    pub(crate) fn drops_connection(&self) -> bool {
        matches!(
            self.code,
            Code::Unreachable
                | Code::NoPrimary
                | Code::Timeout
                | Code::Auth
                | Code::NotWritable
                | Code::NotRedis
                | Code::Protocol
                | Code::Tls
        )
    }

    /// The same error, its message prefixed with what was being done.
    pub(crate) fn context(mut self, what: &str) -> FleetError {
        self.message = format!("{what}: {}", self.message);
        self
    }

    pub(crate) fn kind(&self) -> Kind {
        self.code.kind()
    }

    /// The precise code.
    pub(crate) fn code_of(&self) -> Code {
        self.code
    }

    /// Maps a client error, in a round or while connecting.
    pub(crate) fn from_redis(error: &redis::RedisError) -> FleetError {
        use redis::ErrorKind as K;
        use redis::ServerErrorKind as S;
        let code = error.code().unwrap_or_default();
        let code = if matches!(code, "NOAUTH" | "WRONGPASS")
            || error.kind() == K::AuthenticationFailed
            || code.starts_with("WRONGPASS")
        {
            Code::Auth
        } else if error.is_timeout() {
            Code::Timeout
        } else if error.is_io_error() || error.is_connection_dropped() {
            Code::Unreachable
        } else if matches!(
            error.kind(),
            K::Server(S::ReadOnly | S::MasterDown | S::BusyLoading)
        ) || matches!(code, "READONLY" | "MASTERDOWN" | "LOADING")
        {
            Code::NotWritable
        } else if matches!(error.kind(), K::Parse | K::UnexpectedReturnType) {
            Code::Protocol
        } else if matches!(error.kind(), K::InvalidClientConfig) {
            // At connect time, after the URL was accepted: a name that resolved to no
            // address.
            Code::Unreachable
        } else {
            Code::Server
        };
        FleetError::with_code(code, error.to_string())
    }
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.code {
            Code::UrlNoScheme
            | Code::UrlScheme
            | Code::UrlTls
            | Code::UrlPort
            | Code::UrlMalformed => "invalid Redis URL",
            Code::Setting | Code::Name | Code::CaFile => "invalid fleet setting",
            Code::NoRuntime => "no tokio runtime",
            Code::AlreadyWatched => "breaker already watched",
            Code::Unreachable => "Redis unreachable",
            Code::Auth => "Redis authentication failed",
            Code::Timeout => "Redis timed out",
            Code::NotWritable => "Redis takes no writes here now",
            Code::Server => "Redis error",
            Code::NotRedis => "not a Redis server",
            Code::Protocol => "unexpected reply from Redis",
            Code::NoPrimary => "no primary from the sentinels",
            Code::Tls => "TLS handshake failed",
        };
        write!(f, "{}: {what}: {}", self.code.as_str(), self.message)
    }
}

impl fmt::Debug for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetError")
            .field("code", &self.code.as_str())
            .field("kind", &self.kind())
            .field("message", &self.message)
            .finish()
    }
}

impl std::error::Error for FleetError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_send_sync_and_small() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<FleetError>();
        assert!(std::mem::size_of::<FleetError>() <= 40);
    }

    #[test]
    fn display_names_the_code_and_the_kind() {
        let error = FleetError::new(Kind::Invalid, "interval = 0ms, allowed 10ms..=60s");
        assert_eq!(
            error.to_string(),
            "FLEET-CFG-001: invalid fleet setting: interval = 0ms, allowed 10ms..=60s"
        );
        assert!(error.is_invalid() && !error.is_url());
        assert_eq!(error.code(), "FLEET-CFG-001");
    }

    /// The error a server answers, as the client hands it over.
    fn server_error(reply: &[u8]) -> redis::RedisError {
        match redis::parse_redis_value(reply).unwrap() {
            redis::Value::ServerError(error) => error.into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_server_that_takes_no_writes_now_drops_the_link() {
        for reply in [
            &b"-READONLY You can't write against a read only replica.\r\n"[..],
            b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
            b"-LOADING Redis is loading the dataset in memory\r\n",
        ] {
            let error = FleetError::from_redis(&server_error(reply));
            assert_eq!(error.code(), "FLEET-RUN-004", "{error}");
            assert!(error.is_server(), "{error}");
            assert!(error.drops_connection(), "{error}");
        }
        for reply in [
            &b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"[..],
            b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
            b"-ERR unknown command\r\n",
        ] {
            let error = FleetError::from_redis(&server_error(reply));
            assert_eq!(error.code(), "FLEET-RUN-005", "{error}");
            assert!(error.is_server() && !error.drops_connection(), "{error}");
        }
        for reply in [
            &b"-NOAUTH Authentication required.\r\n"[..],
            b"-WRONGPASS invalid\r\n",
        ] {
            let error = FleetError::from_redis(&server_error(reply));
            assert!(error.is_auth() && error.drops_connection(), "{error}");
        }
        let reset =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let error = FleetError::from_redis(&reset);
        assert_eq!(error.code(), "FLEET-RUN-001", "{error}");
        assert!(error.drops_connection());
    }
}

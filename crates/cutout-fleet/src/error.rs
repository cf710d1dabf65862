//! [`FleetError`]: what went wrong building a fleet, watching a breaker or talking to Redis.

use std::fmt;

/// What went wrong: at build (a malformed URL, an invalid setting, no tokio runtime), when
/// watching a breaker, or in a round with Redis (reported through
/// [`Fleet::health`](crate::Fleet::health), never to a breaker's callers).
///
/// Opaque, with a predicate per kind (`is_*`); the message says what and, for settings, which
/// one. Cheap to clone, `Send + Sync`.
#[derive(Clone, PartialEq, Eq)]
pub struct FleetError {
    kind: Kind,
    message: String,
}

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
}

impl FleetError {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> FleetError {
        FleetError {
            kind,
            message: message.into(),
        }
    }

    /// The Redis URL could not be parsed or names something this build cannot reach (a
    /// `rediss://` URL: TLS is not compiled in). Returned by
    /// [`FleetBuilder::build`](crate::FleetBuilder::build).
    pub fn is_url(&self) -> bool {
        self.kind == Kind::Url
    }

    /// A setting is out of range (the message names it, with the value and the range).
    pub fn is_invalid(&self) -> bool {
        self.kind == Kind::Invalid
    }

    /// [`FleetBuilder::build`](crate::FleetBuilder::build) was called outside a tokio runtime
    /// and no [`runtime`](crate::FleetBuilder::runtime) handle was given.
    pub fn is_no_runtime(&self) -> bool {
        self.kind == Kind::NoRuntime
    }

    /// A breaker of this id is already watched by this fleet (two would publish under one
    /// pod's field).
    pub fn is_already_watched(&self) -> bool {
        self.kind == Kind::AlreadyWatched
    }

    /// Redis could not be reached: connection refused, reset or dropped, name not resolved.
    pub fn is_unreachable(&self) -> bool {
        self.kind == Kind::Unreachable
    }

    /// Redis refused the credentials (`WRONGPASS`), or asked for some (`NOAUTH`).
    pub fn is_auth(&self) -> bool {
        self.kind == Kind::Auth
    }

    /// A connect or a round took longer than its timeout (Redis slow, paused or partitioned).
    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::Timeout
    }

    /// Redis answered a round with an error other than authentication (`READONLY`,
    /// `NOPERM`, `OOM`, scripting disabled, ...).
    pub fn is_server(&self) -> bool {
        self.kind == Kind::Server
    }

    /// Redis answered with something this crate does not understand.
    pub fn is_protocol(&self) -> bool {
        self.kind == Kind::Protocol
    }

    /// Whether this error means the connection should be replaced (it may be dead or
    /// desynchronised), rather than the round simply tried again on the next tick.
    pub(crate) fn drops_connection(&self) -> bool {
        matches!(
            self.kind,
            Kind::Unreachable | Kind::Timeout | Kind::Auth | Kind::Protocol
        )
    }

    /// The same error, its message prefixed with what was being done.
    pub(crate) fn context(mut self, what: &str) -> FleetError {
        self.message = format!("{what}: {}", self.message);
        self
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Maps a client error, in a round or while connecting.
    pub(crate) fn from_redis(error: &redis::RedisError) -> FleetError {
        use redis::ErrorKind as K;
        let code = error.code().unwrap_or_default();
        let kind = if matches!(code, "NOAUTH" | "WRONGPASS")
            || error.kind() == K::AuthenticationFailed
            || code.starts_with("WRONGPASS")
        {
            Kind::Auth
        } else if error.is_timeout() {
            Kind::Timeout
        } else if error.is_io_error() || error.is_connection_dropped() {
            Kind::Unreachable
        } else if matches!(error.kind(), K::Parse | K::UnexpectedReturnType) {
            Kind::Protocol
        } else if matches!(error.kind(), K::InvalidClientConfig) {
            Kind::Url
        } else {
            Kind::Server
        };
        FleetError::new(kind, error.to_string())
    }
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Kind::Url => "invalid Redis URL",
            Kind::Invalid => "invalid fleet setting",
            Kind::NoRuntime => "no tokio runtime",
            Kind::AlreadyWatched => "breaker already watched",
            Kind::Unreachable => "Redis unreachable",
            Kind::Auth => "Redis refused authentication",
            Kind::Timeout => "Redis timed out",
            Kind::Server => "Redis error",
            Kind::Protocol => "unexpected reply from Redis",
        };
        write!(f, "{what}: {}", self.message)
    }
}

impl fmt::Debug for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetError")
            .field("kind", &self.kind)
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
    fn display_names_the_kind() {
        let error = FleetError::new(Kind::Invalid, "interval = 0ms, allowed 10ms..=60s");
        assert_eq!(
            error.to_string(),
            "invalid fleet setting: interval = 0ms, allowed 10ms..=60s"
        );
        assert!(error.is_invalid() && !error.is_url());
    }
}

//! The gateway's own exhaustion (out of descriptors, socket buffers, memory or local ports) told apart from an upstream's failure, so it never opens a healthy cluster.
//!
//! A connect that fails because *this process* ran out of something says nothing about the
//! upstream: `EMFILE` (the process's descriptor limit, `ulimit -n`), `ENFILE` (the system's),
//! `ENOBUFS` and `ENOMEM` (the kernel could not allocate the socket), `EADDRNOTAVAIL` on a
//! connect (no local port left for the upstream's address). Counted as the upstream's failure,
//! a burst of such errors would open the cluster's breaker (and eject its hosts), so every
//! other client would get 503 from a healthy cluster until the break ran out: the breaker
//! blaming the dependency for the gateway's own limit.
//!
//! So an attempt that failed with one of them ([`is_exhausted`]) is:
//! - **ignored** by every breaker (cluster and host: [`crate::classify`]), and by the health
//!   checks (a check that could not open its socket is neither a pass nor a fail:
//!   [`crate::health`]);
//! - **not retried** on another host ([`crate::retry`]): the next connect would meet the same
//!   limit, and the retry budget is for the upstreams' failures;
//! - answered **503 with `Retry-After: 1`** saying the gateway is out of resources (the access
//!   log's outcome `exhausted`), with a rate-limited log line (`exhausted` in
//!   `cutout_gateway_refusals_total`) naming the error and `ulimit -n`.
//!
//! The listener's own budget keeps this rare: requests in flight on a listener are bounded
//! by its `max-connections`, however many HTTP/2 streams carry them ([`crate::server`]), which
//! is what the descriptor budget of `GW-WARN-002` assumes.

use std::error::Error as StdError;
use std::io;

use rustix::io::Errno;

/// Whether `error` (an attempt's or a health check's failure, any depth of its sources) is the
/// gateway's own exhaustion (see the [module docs](self)): then its errno.
pub fn exhausted(error: &(dyn StdError + 'static)) -> Option<Errno> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<io::Error>()
            && let Some(errno) = Errno::from_io_error(io)
            && is_own(errno)
        {
            return Some(errno);
        }
        next = error.source();
    }
    None
}

/// What `errno` says, as the log lines and answers name it ("Too many open files (os error
/// 24)").
pub fn reason(errno: Errno) -> io::Error {
    io::Error::from_raw_os_error(errno.raw_os_error())
}

/// [`exhausted`] as a yes or no.
pub fn is_exhausted(error: &(dyn StdError + 'static)) -> bool {
    exhausted(error).is_some()
}

/// The errors that say the gateway's process or host ran out of something.
fn is_own(errno: Errno) -> bool {
    [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOBUFS,
        Errno::NOMEM,
        Errno::ADDRNOTAVAIL,
    ]
    .contains(&errno)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    /// An error wrapping another, as hyper-util's connect errors wrap the `io::Error`.
    #[derive(Debug)]
    struct Wrapped(io::Error);

    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tcp connect error")
        }
    }

    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_process_s_own_limits_are_found_at_any_depth() {
        for errno in [
            Errno::MFILE,
            Errno::NFILE,
            Errno::NOBUFS,
            Errno::NOMEM,
            Errno::ADDRNOTAVAIL,
        ] {
            let error = Wrapped(io::Error::from_raw_os_error(errno.raw_os_error()));
            assert_eq!(exhausted(&error), Some(errno), "{errno:?}");
        }
    }

    #[test]
    fn an_upstream_s_refusal_or_reset_is_not_the_gateway_s() {
        for errno in [
            Errno::CONNREFUSED,
            Errno::CONNRESET,
            Errno::TIMEDOUT,
            Errno::HOSTUNREACH,
            Errno::NETUNREACH,
        ] {
            let error = Wrapped(io::Error::from_raw_os_error(errno.raw_os_error()));
            assert!(!is_exhausted(&error), "{errno:?}");
        }
        assert!(!is_exhausted(&Wrapped(io::Error::other("no errno"))));
    }
}

//! The live status page: static HTML whose script polls `/breakers` every second and redraws.
//!
//! What it shows comes from the server (`GET /breakers`, see
//! [`breakers_json`](crate::admin::breakers_json)), never from the page's own memory: per
//! cluster and per host, the state with its reason and a break countdown (ticking between
//! polls), request rate, upstream error rate (the upstream's errors only, of the requests
//! forwarded), refused share (the gateway's own 503s), slow rate, p50 / p99 with a minute of
//! history as sparklines, the ramp fraction while recovering, the ejection count; the recent
//! transitions and manual actions. Isolate, reset and open-for buttons for every breaker send
//! the token the page was opened with (`/#token=…`, kept in the fragment) in `Authorization`;
//! without one where one is needed, the page says so and disables them.

/// The page (see `status.html`).
pub const HTML: &str = include_str!("status.html");

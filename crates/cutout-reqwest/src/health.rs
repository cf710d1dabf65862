//! An active health check of a host with a plain reqwest client, for
//! [`KeyedBreakers::health_checks`](cutout_tower::keyed::KeyedBreakers::health_checks): a
//! passing check ends that host's break early and its own probes decide.

use std::future::Future;
use std::pin::Pin;

use cutout_tower::keyed::HostKey;

/// A check's answer, boxed: whether the host answered 2xx.
pub type HealthCheckFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// A check of each host: `GET scheme://host:port<path>` with `client`, passing on a 2xx answer
/// of that host (the timeout is
/// [`HealthChecks::timeout`](cutout_tower::keyed::HealthChecks::timeout)). A redirect the
/// client follows to another origin (scheme, host or port) fails the check whatever the
/// other host answers: a host is judged by its own answer, not by that of the maintenance
/// page or failover address it sends callers to. A redirect within the host (`/healthz` to
/// `/healthz/`) is the host's own answer and is followed as the client's policy says.
/// Give it a client *without* the breaker middleware: a check must not go through the breaker
/// it is checking, nor count in its window. Only the open hosts are checked, and a failing
/// check opens nothing.
///
/// ```no_run
/// use cutout::Settings;
/// use cutout_reqwest::{BreakerMiddleware, HealthChecks, KeyedBreakers, health_check};
///
/// # #[tokio::main]
/// # async fn main() {
/// let hosts = KeyedBreakers::builder(Settings::default()).build();
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(BreakerMiddleware::per_host(hosts.clone()))
///     .build();
/// let checks = hosts.health_checks(
///     HealthChecks::default(),
///     health_check(reqwest::Client::new(), "/healthz"),
/// );
/// let task = tokio::spawn(checks);
/// # let _ = client; task.abort();
/// # }
/// ```
pub fn health_check(
    client: reqwest::Client,
    path: &str,
) -> impl FnMut(&HostKey) -> HealthCheckFuture + Send + 'static {
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    move |host: &HostKey| {
        let url = check_url(host, &path);
        let client = client.clone();
        Box::pin(async move {
            let Ok(sent) = reqwest::Url::parse(&url) else {
                return false;
            };
            match client.get(sent.clone()).send().await {
                Ok(response) => {
                    response.status().is_success() && response.url().origin() == sent.origin()
                }
                Err(_) => false,
            }
        })
    }
}

/// `scheme://host:port/path`, with an IPv6 host in brackets.
fn check_url(host: &HostKey, path: &str) -> String {
    let name = host.host.trim_start_matches('[').trim_end_matches(']');
    if name.contains(':') {
        format!("{}://[{name}]:{}{path}", host.scheme, host.port)
    } else {
        format!("{}://{name}:{}{path}", host.scheme, host.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_host_s_scheme_and_port_with_ipv6_in_brackets() {
        let key = |scheme: &str, host: &str, port| HostKey {
            scheme: scheme.into(),
            host: host.into(),
            port,
        };
        assert_eq!(
            check_url(&key("http", "a.example", 8080), "/healthz"),
            "http://a.example:8080/healthz"
        );
        assert_eq!(
            check_url(&key("https", "::1", 443), "/h"),
            "https://[::1]:443/h"
        );
        assert_eq!(
            check_url(&key("http", "[::1]", 80), "/h"),
            "http://[::1]:80/h"
        );
    }
}

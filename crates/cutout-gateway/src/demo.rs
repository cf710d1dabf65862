//! `cutout-gateway demo`: the gateway on an embedded config plus two chaos-switchable upstreams, with instructions.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::GatewayConfig;
use crate::error::StartError;
use crate::gateway::Gateway;
use crate::server;
use crate::upstream::Upstream;

/// The demo's ports (all on 127.0.0.1): proxy, admin, account-service, transfer-service.
pub const DEMO_PORTS: [u16; 4] = [8080, 9090, 7001, 7002];

/// The embedded demo configuration; `{proxy}`, `{admin}`, `{account}` and `{transfer}` are
/// replaced by ports. Breakers as seed 002's: at least 5 calls, failure ratio 0.5 over 10 s,
/// a 30 s break, one probe (whose success closes it); a 1 s attempt timeout inside.
pub const DEMO_CONFIG: &str = r#"
[gateway]
listen = "127.0.0.1:{proxy}"
admin = "127.0.0.1:{admin}"
attempt-timeout = "1s"

[[routes]]
prefix = "/accounts"
cluster = "account-service"

[[routes]]
prefix = "/transfers"
cluster = "transfer-service"

[clusters.account-service]
upstreams = ["http://127.0.0.1:{account}"]

[clusters.transfer-service]
upstreams = ["http://127.0.0.1:{transfer}"]

[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
window-duration = "10s"
break-duration = "30s"
max-break-duration = "30s"
jitter = "none"
half-open-probes = 1
probe-successes = 1
consecutive-failures = "off"
adaptive = false
"#;

/// The demo configuration for the given ports.
pub fn config(proxy: u16, admin: u16, account: u16, transfer: u16) -> GatewayConfig {
    let text = DEMO_CONFIG
        .replace("{proxy}", &proxy.to_string())
        .replace("{admin}", &admin.to_string())
        .replace("{account}", &account.to_string())
        .replace("{transfer}", &transfer.to_string());
    GatewayConfig::from_toml(&text).expect("the embedded demo config is valid")
}

/// A running demo's pieces.
#[derive(Debug)]
pub struct Demo {
    /// The gateway.
    pub gateway: Arc<Gateway>,
    /// The account-service upstream and its address.
    pub account: (Arc<Upstream>, SocketAddr),
    /// The transfer-service upstream and its address.
    pub transfer: (Arc<Upstream>, SocketAddr),
}

/// Starts the two upstreams on `account` and `transfer` (0: any free port), builds the
/// gateway config for them with proxy and admin on `proxy`/`admin`, and returns the demo
/// (the gateway's listeners are not bound yet: see [`server::run`]).
pub async fn start_upstreams(
    ports: [u16; 4],
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Demo, StartError> {
    let [proxy, admin, account_port, transfer_port] = ports;
    let mut started = Vec::new();
    for (name, port) in [
        ("account-service", account_port),
        ("transfer-service", transfer_port),
    ] {
        let upstream = Upstream::new(name);
        let listener =
            server::bind("demo upstream", SocketAddr::from(([127, 0, 0, 1], port))).await?;
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let mut stop = shutdown.clone();
        tokio::spawn(server::serve(listener, upstream.app(), async move {
            let _ = stop.wait_for(|s| *s).await;
        }));
        started.push((upstream, addr));
    }
    let transfer = started.pop().expect("two upstreams");
    let account = started.pop().expect("two upstreams");
    let gateway = Gateway::new(config(proxy, admin, account.1.port(), transfer.1.port()));
    Ok(Demo {
        gateway,
        account,
        transfer,
    })
}

/// What to try, printed when the demo starts.
pub fn instructions(
    proxy: SocketAddr,
    admin: SocketAddr,
    account: SocketAddr,
    transfer: SocketAddr,
) -> String {
    format!(
        "\
cutout-gateway demo
  proxy   http://{proxy}   (/accounts → account-service, /transfers → transfer-service)
  admin   http://{admin}   (status page: open it in a browser)
  account-service  http://{account}    transfer-service  http://{transfer}

Try:
  curl -i http://{proxy}/accounts/42                      # 200 from account-service
  curl -X POST http://{account}/chaos/fail               # account-service answers 500
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{{http_code}}\\n' http://{proxy}/accounts/42; done
                                                          # 500s until 5 calls with >= 50 % failures, then 503 + Retry-After: open
  curl -i http://{proxy}/transfers/7                      # transfer-service is unaffected
  curl -X POST http://{account}/chaos/recover            # heal it; after the 30 s break one probe closes it
  curl -X POST http://{transfer}/chaos/hang              # hang: the gateway answers 504 after 1 s and cancels the forward
  curl -X POST http://{transfer}/chaos/slow              # 1.5 s answers: 504 too (timeout 1 s)
  curl http://{admin}/breakers                            # JSON snapshots
  curl -X POST http://{admin}/breakers/transfer-service/isolate   # force open; .../reset closes it
  curl http://{admin}/healthz ; curl http://{admin}/readyz ; curl http://{admin}/metrics
Ctrl-C stops the demo.
"
    )
}

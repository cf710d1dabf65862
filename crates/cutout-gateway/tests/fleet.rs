//! `[fleet]` with two real gateway processes (the binary, each with `--config`, different pod
//! names) on one real `redis-server`, in front of one upstream of the test's own: an outage
//! both see opens both on the fleet's window within two fleet intervals of the fleet rule
//! firing, before either has the minimum calls of its own; with Redis stopped mid-run, both
//! keep serving and judging locally, `/healthz` stays 200 with the fleet flag down, and the
//! log holds one warning, not one a round.

mod common;
#[allow(unused_imports)]
#[path = "../../cutout-fleet/tests/common/mod.rs"]
mod redis_common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Proc, get, serve_router};
use redis_common::certs::Certificates;
use redis_common::{RedisServer, free_port};
use serde_json::Value;
use tokio::sync::watch;

/// The fleet's interval in these tests (cutout-fleet's default).
const INTERVAL: Duration = Duration::from_millis(250);
/// The breakers' minimum calls: each gateway alone needs this many failures of its own.
const MINIMUM_CALLS: usize = 6;

/// An upstream that answers 200, or 500 while `failing`.
async fn upstream(failing: Arc<AtomicBool>, stop: &watch::Sender<bool>) -> u16 {
    let router = axum::Router::new().fallback(move || {
        let failing = Arc::clone(&failing);
        async move {
            if failing.load(Ordering::SeqCst) {
                (StatusCode::INTERNAL_SERVER_ERROR, "down")
            } else {
                (StatusCode::OK, "ok")
            }
        }
    });
    serve_router(router, stop).await.port()
}

/// A gateway process with its config file and its stderr in a file of their own.
struct GatewayProcess {
    _proc: Proc,
    proxy: u16,
    admin: u16,
    stderr: PathBuf,
    pod: &'static str,
}

impl GatewayProcess {
    fn start(pod: &'static str, upstream: u16, redis: u16) -> GatewayProcess {
        GatewayProcess::start_with(
            pod,
            upstream,
            &format!("redis = \"redis://127.0.0.1:{redis}\""),
        )
    }

    /// A gateway whose `[fleet]` table is `fleet` (its `pod` and `interval` added).
    fn start_with(pod: &'static str, upstream: u16, fleet: &str) -> GatewayProcess {
        let (proxy, admin) = (free_port(), free_port());
        let dir = std::env::temp_dir().join(format!(
            "cutout-gateway-fleet-{}-{pod}-{proxy}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("gateway.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[gateway]
listen = "127.0.0.1:{proxy}"
admin = "127.0.0.1:{admin}"
access-log = false
[[routes]]
prefix = "/"
cluster = "api"
[clusters.api]
upstreams = ["http://127.0.0.1:{upstream}"]
[breakers.defaults]
minimum-calls = {MINIMUM_CALLS}
failure-ratio = 0.5
consecutive-failures = "off"
[fleet]
{fleet}
pod = "{pod}"
interval = "{}ms"
"#,
                INTERVAL.as_millis()
            ),
        )
        .unwrap();
        let stderr = dir.join("stderr.log");
        let child = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let proc = Proc(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", admin)).is_err() {
            assert!(Instant::now() < deadline, "{pod}: the admin listener is up");
            std::thread::sleep(Duration::from_millis(20));
        }
        GatewayProcess {
            _proc: proc,
            proxy,
            admin,
            stderr,
            pod,
        }
    }

    async fn healthz(&self) -> (StatusCode, Value) {
        let reply = get(&format!("http://127.0.0.1:{}/healthz", self.admin)).await;
        (reply.status, serde_json::from_str(&reply.body).unwrap())
    }

    /// The `api` cluster's entry in `/breakers`.
    async fn cluster(&self) -> Value {
        let reply = get(&format!("http://127.0.0.1:{}/breakers", self.admin)).await;
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        body["breakers"][0].clone()
    }

    async fn request(&self) -> StatusCode {
        get(&format!("http://127.0.0.1:{}/api/x", self.proxy))
            .await
            .status
    }

    async fn wait_fleet(&self, status: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let (_, body) = self.healthz().await;
            if body["fleet"]["status"] == status || Instant::now() >= deadline {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_seen_by_both_replicas_opens_both_within_two_intervals_of_the_fleet_rule() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (stop, _) = watch::channel(false);
    let failing = Arc::new(AtomicBool::new(false));
    let upstream = upstream(Arc::clone(&failing), &stop).await;
    let gateways = Arc::new([
        GatewayProcess::start("gw-a", upstream, redis.port()),
        GatewayProcess::start("gw-b", upstream, redis.port()),
    ]);
    // Every call the test made through each gateway, and the failures among them: what
    // each breaker's window and the fleet's hold.
    let mut calls = [0usize; 2];
    let mut failures = [0usize; 2];
    for (n, gateway) in gateways.iter().enumerate() {
        let body = gateway
            .wait_fleet("connected", Duration::from_secs(5))
            .await;
        assert_eq!(
            body["fleet"]["status"], "connected",
            "{}: {body}",
            gateway.pod
        );
        assert_eq!(body["fleet"]["pod"], gateway.pod);
        assert_eq!(gateway.request().await, StatusCode::OK);
        calls[n] += 1;
    }
    failing.store(true, Ordering::SeqCst);

    // Watch both clusters' state every 10 ms, from the outage on.
    let started = Instant::now();
    let watcher = {
        let gateways = Arc::clone(&gateways);
        tokio::spawn(async move {
            let mut opened: [Option<(Instant, Value)>; 2] = [None, None];
            while opened.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(30)
            {
                for (n, gateway) in gateways.iter().enumerate() {
                    if opened[n].is_none() {
                        let cluster = gateway.cluster().await;
                        if cluster["state"] != "closed" {
                            opened[n] = Some((Instant::now(), cluster));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            opened
        })
    };

    // 1 request a second to each, half a second apart. The fleet rule (cutout-fleet's
    // default: the breaker's own minimum calls and failure ratio, on the sum of the
    // replicas' windows) fires with the answer that makes the sum hold the minimum calls
    // with half of them failed.
    let mut fired: Option<(Instant, [usize; 2], [usize; 2])> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    for round in 0..40 {
        tick.tick().await;
        let n = round % 2;
        let status = gateways[n].request().await;
        if status == StatusCode::INTERNAL_SERVER_ERROR || status == StatusCode::OK {
            calls[n] += 1;
        }
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            failures[n] += 1;
        }
        let (all, failed) = (calls.iter().sum::<usize>(), failures.iter().sum::<usize>());
        if fired.is_none() && all >= MINIMUM_CALLS && failed * 2 >= all {
            fired = Some((Instant::now(), calls, failures));
        }
        if watcher.is_finished() {
            break;
        }
    }
    let opened = watcher.await.unwrap();
    let (fired, calls_then, failures_then) =
        fired.expect("the fleet's window reached the minimum calls");
    println!("the fleet rule fired with calls {calls_then:?}, failures {failures_then:?}");
    let bound = INTERVAL * 2;
    for (n, open) in opened.iter().enumerate() {
        let pod = gateways[n].pod;
        let (at, cluster) = open
            .as_ref()
            .unwrap_or_else(|| panic!("{pod}: the cluster never opened"));
        let after = at.saturating_duration_since(fired);
        let before = fired.saturating_duration_since(*at);
        println!(
            "{pod}: open {:.0} ms after the fleet rule fired ({:.0} ms before), {} calls of \
             its own then, reason {}",
            after.as_secs_f64() * 1000.0,
            before.as_secs_f64() * 1000.0,
            calls_then[n],
            cluster["reason"]
        );
        // Opened by the fleet's signal, not by its own rules: it had fewer than the minimum
        // calls of its own.
        assert_eq!(cluster["reason"], "signal", "{pod}: {cluster}");
        assert!(calls_then[n] < MINIMUM_CALLS, "{pod}: {calls_then:?}");
        // The watcher polls every 10 ms (and each poll is an HTTP round trip on loopback).
        assert!(
            after <= bound + Duration::from_millis(30),
            "{pod}: opened {after:?} after the fleet rule fired, more than two intervals \
             ({bound:?})"
        );
    }
    // Both refuse now.
    for gateway in gateways.iter() {
        assert_eq!(
            gateway.request().await,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            gateway.pod
        );
    }
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_the_replicas_serve_and_judge_locally_and_only_the_flag_changes() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let (stop, _) = watch::channel(false);
    let failing = Arc::new(AtomicBool::new(false));
    let upstream = upstream(Arc::clone(&failing), &stop).await;
    let gateways = [
        GatewayProcess::start("gw-c", upstream, redis.port()),
        GatewayProcess::start("gw-d", upstream, redis.port()),
    ];
    for gateway in &gateways {
        let body = gateway
            .wait_fleet("connected", Duration::from_secs(5))
            .await;
        assert_eq!(
            body["fleet"]["status"], "connected",
            "{}: {body}",
            gateway.pod
        );
    }

    redis.kill();
    let killed = Instant::now();
    // 1 request a second to each for 8 s: every one served.
    for _ in 0..8 {
        for gateway in &gateways {
            assert_eq!(gateway.request().await, StatusCode::OK, "{}", gateway.pod);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for gateway in &gateways {
        let (status, body) = gateway.healthz().await;
        println!("{}: /healthz {status} {body}", gateway.pod);
        // Redis down changes nothing but the flag.
        assert_eq!(status, StatusCode::OK, "{}: {body}", gateway.pod);
        assert_eq!(body["status"], "ok", "{}: {body}", gateway.pod);
        assert_eq!(body["clusters"]["api"]["state"], "closed");
        assert_eq!(
            body["fleet"]["status"], "degraded",
            "{}: {body}",
            gateway.pod
        );
        assert_eq!(body["fleet"]["connected"], false);
        assert_eq!(body["fleet"]["error"]["code"], "FLEET-RUN-001", "{body}");
        // The status page's data says it too.
        let reply = get(&format!("http://127.0.0.1:{}/breakers", gateway.admin)).await;
        let breakers: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(breakers["fleet"]["status"], "degraded");
        // And /metrics.
        let exposition = get(&format!("http://127.0.0.1:{}/metrics", gateway.admin))
            .await
            .body;
        let series = format!("cutout_fleet_connected{{pod=\"{}\"}}", gateway.pod);
        assert_eq!(
            common::metric_value(&exposition, &series),
            Some(0.0),
            "{series}"
        );
        // And the page shows the flag from that data.
        let page = get(&format!("http://127.0.0.1:{}/", gateway.admin))
            .await
            .body;
        assert!(page.contains("id=\"fleet\"") && page.contains("data.fleet.status"));
    }

    // Judging locally: an outage on one gateway's own calls opens it on its own rules.
    failing.store(true, Ordering::SeqCst);
    let gateway = &gateways[0];
    let mut statuses = Vec::new();
    for _ in 0..30 {
        let status = gateway.request().await.as_u16();
        statuses.push(status);
        if status == 503 {
            break;
        }
    }
    let cluster = gateway.cluster().await;
    println!("{}: {statuses:?} → {}", gateway.pod, cluster["reason"]);
    assert_eq!(cluster["state"], "open", "{cluster}");
    assert_ne!(cluster["reason"], "signal", "{cluster}");
    // Its own rule: the window of its own calls (the 8 served above, these failures) half
    // failed.
    let (last, before) = statuses.split_last().unwrap();
    assert_eq!(*last, 503, "{statuses:?}");
    assert!(
        before.iter().all(|s| *s == 500) && before.len() >= MINIMUM_CALLS,
        "{statuses:?}"
    );
    // The other, without Redis, knows nothing of it.
    assert_eq!(gateways[1].cluster().await["state"], "closed");

    // No error storm: the fleet's failed rounds, each a warning at most once a minute.
    let down = killed.elapsed();
    for gateway in &gateways {
        let log = gateway.log();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|line| line.contains("WARN") && line.contains("Redis"))
            .collect();
        let (_, body) = gateway.healthz().await;
        let failed = body["fleet"]["failed_rounds"].as_u64().unwrap();
        println!(
            "{}: {} warning(s) for {failed} failed rounds in {down:.1?} without Redis",
            gateway.pod,
            warnings.len()
        );
        assert!(
            !warnings.is_empty(),
            "{}: no warning at all:\n{log}",
            gateway.pod
        );
        assert!(warnings.len() <= 2, "{}: {warnings:#?}", gateway.pod);
        assert!(failed >= 4, "{}: {body}", gateway.pod);
    }

    // Redis back: the flag comes back (the reconnect backoff is at most 5 s).
    redis.restart();
    for gateway in &gateways {
        let body = gateway
            .wait_fleet("connected", Duration::from_secs(8))
            .await;
        assert_eq!(
            body["fleet"]["status"], "connected",
            "{}: {body}",
            gateway.pod
        );
    }
    let _ = stop.send(true);
}

#[test]
fn a_bad_fleet_url_is_a_coded_config_error_naming_the_key() {
    let dir =
        std::env::temp_dir().join(format!("cutout-gateway-fleet-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (url, code) in [
        ("redis://:s3cret@127.0.0.1:99999", "FLEET-URL-004"),
        ("127.0.0.1:6379", "FLEET-URL-001"),
        ("http://127.0.0.1:6379", "FLEET-URL-002"),
    ] {
        let config = dir.join("gateway.toml");
        std::fs::write(
            &config,
            format!(
                "[clusters.api]\nupstreams = [\"http://127.0.0.1:1\"]\n[[routes]]\nprefix = \"/\"\n\
                 cluster = \"api\"\n[fleet]\nredis = \"{url}\"\n"
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--check")
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{url}: {}", stderr.trim());
        assert!(!out.status.success(), "{url}: accepted");
        assert!(
            stderr.contains(code) && stderr.contains("fleet.redis"),
            "{url}: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A managed Redis's way: `rediss://` with an ACL user, the server's certificate signed by a
/// CA of the test's own given as `tls-ca-file`; and the same user with a wrong password says
/// so on `/healthz`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_reaches_redis_over_tls_as_an_acl_user() {
    let certificates = Certificates::generate("gateway");
    let tls_port = free_port();
    let args = certificates.redis_args(tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(redis) = RedisServer::start_with(&args) else {
        return;
    };
    let mut conn = redis.client();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "gateway",
            "on",
            ">gw-pw",
            "~{cutout%3Afleet:*",
            "+@all",
        ])
        .query(&mut conn)
        .expect("ACL SETUSER");
    let (stop, _) = watch::channel(false);
    let upstream = upstream(Arc::new(AtomicBool::new(false)), &stop).await;
    let ca = certificates.ca();
    let good = GatewayProcess::start_with(
        "gw-tls",
        upstream,
        &format!(
            "redis = \"rediss://gateway:gw-pw@127.0.0.1:{tls_port}\"\ntls-ca-file = {:?}",
            ca.display().to_string()
        ),
    );
    let body = good.wait_fleet("connected", Duration::from_secs(5)).await;
    assert_eq!(body["fleet"]["status"], "connected", "{body}");
    // Its cluster's ring is in Redis, under the ACL's keys.
    let key = "{cutout%3Afleet:api}";
    let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut conn).unwrap();
    assert_eq!(exists, 1, "no ring at {key}");
    let wrong = GatewayProcess::start_with(
        "gw-tls-wrong",
        upstream,
        &format!(
            "redis = \"rediss://gateway:not-it@127.0.0.1:{tls_port}\"\ntls-ca-file = {:?}",
            ca.display().to_string()
        ),
    );
    let body = wrong.wait_fleet("degraded", Duration::from_secs(5)).await;
    println!("wrong password: {}", body["fleet"]["error"]);
    assert_eq!(body["fleet"]["error"]["code"], "FLEET-RUN-002", "{body}");
    let message = body["fleet"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("authentication failed"), "{message}");
    assert!(!message.contains("not-it"), "{message}");
    assert_eq!(wrong.request().await, StatusCode::OK);
    let _ = stop.send(true);
}

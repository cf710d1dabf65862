//! Reloading the configuration without a restart, on the real binary over loopback: under `wrk` load with no failed
//! request, an unchanged cluster's open breaker kept with its break, bad files changing nothing (with the code
//! `--check` gives too), restart-only keys warned about, SIGHUP, and the token on `POST /reload`.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Wrk, get, send, serve_upstream, wrk_or_skip};
use cutout_gateway::upstream::Upstream;
use http::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::watch;

/// Two clusters: `moving` (whose attempt timeout the files change) and `steady` (never
/// changed). `{extra}` goes into `[gateway]`, `{timeout}` is moving's attempt timeout.
const TEMPLATE: &str = r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
{extra}

[[routes]]
prefix = "/moving"
cluster = "moving"

[[routes]]
prefix = "/steady"
cluster = "steady"

[clusters.moving]
upstreams = ["http://127.0.0.1:{moving}"]
attempt-timeout = "{timeout}"

[clusters.steady]
upstreams = ["http://127.0.0.1:{steady}"]

[breakers.defaults]
break-duration = "60s"
max-break-duration = "60s"
jitter = "none"
"#;

/// The upstreams of both clusters, served in this process.
struct Upstreams {
    moving: SocketAddr,
    steady: SocketAddr,
    _stop: watch::Sender<bool>,
}

async fn upstreams() -> Upstreams {
    let (stop, _) = watch::channel(false);
    let moving = serve_upstream(&Upstream::new("moving"), &stop).await;
    let steady = serve_upstream(&Upstream::new("steady"), &stop).await;
    Upstreams {
        moving,
        steady,
        _stop: stop,
    }
}

fn config(up: &Upstreams, timeout: &str, extra: &str) -> String {
    TEMPLATE
        .replace("{extra}", extra)
        .replace("{timeout}", timeout)
        .replace("{moving}", &up.moving.port().to_string())
        .replace("{steady}", &up.steady.port().to_string())
}

/// A directory of this test's own under the temp dir, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!(
            "cutout-gateway-reload-{test}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `cutout-gateway --config FILE` as a child process (killed by its id on drop), its stderr
/// collected line by line.
struct Binary {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    proxy: SocketAddr,
    admin: SocketAddr,
}

/// `line` without its terminal colour sequences.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The address after `name=` in a log line.
fn field_addr(line: &str, name: &str) -> Option<SocketAddr> {
    let rest = &line[line.find(&format!("{name}="))? + name.len() + 1..];
    rest.split_whitespace().next()?.parse().ok()
}

impl Binary {
    fn start(file: &Path) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg("--config")
            .arg(file)
            .env("NO_COLOR", "1")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(plain(&line));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let (proxy, admin) = loop {
            let found = log.lock().unwrap().iter().find_map(|l| {
                l.contains("cutout-gateway listening")
                    .then(|| Some((field_addr(l, "proxy")?, field_addr(l, "admin")?)))
                    .flatten()
            });
            if let Some(found) = found {
                break found;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not start: {:#?}",
                log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Binary {
            child,
            log,
            proxy,
            admin,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy)
    }

    fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    fn logged(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    async fn wait_logged(&self, needle: &str, times: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.logged(needle) >= times {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    async fn reload(&self, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        let reply = send(Method::POST, &self.admin_url("/reload"), headers, "").await;
        let json = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        (reply.status, json)
    }

    async fn breakers(&self, headers: &[(&str, &str)]) -> Value {
        let reply = send(Method::GET, &self.admin_url("/breakers"), headers, "").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        serde_json::from_str(&reply.body).unwrap()
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The cluster `name` of a `/breakers` answer.
fn cluster<'a>(breakers: &'a Value, name: &str) -> &'a Value {
    breakers["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == name)
        .unwrap_or_else(|| panic!("no cluster {name} in {breakers}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `--check` of `file` on the binary: whether it passed, and what it printed.
fn check(file: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .args(["--check", "--config"])
        .arg(file)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_reloads_under_wrk_load_fail_no_request_and_keep_an_unchanged_open_breaker() {
    if !wrk_or_skip("ten_reloads_under_wrk_load_fail_no_request_and_keep_an_unchanged_open_breaker")
    {
        return;
    }
    let up = upstreams().await;
    let dir = Dir::new("load");
    let files = [config(&up, "2s", ""), config(&up, "3s", "")];
    let file = dir.file("gw.toml", &files[0]);
    let gw = Binary::start(&file);
    assert_eq!(get(&gw.url("/moving/1")).await.status, StatusCode::OK);
    // steady's breaker opened by an operator for 60 s; its break must outlive the reloads.
    let opened = send(
        Method::POST,
        &gw.admin_url("/breakers/steady/open-for?duration=60s"),
        &[],
        "",
    )
    .await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.body);
    let before = cluster(&gw.breakers(&[]).await, "steady")["retry_after_ms"]
        .as_f64()
        .unwrap();
    let opened_at = Instant::now();

    let wrk = Wrk::start(&["-t2", "-c20", "-d6s", "--latency"], &gw.url("/moving/1"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    for n in 1..=10 {
        std::fs::write(&file, &files[n % 2]).unwrap();
        let (status, answer) = gw.reload(&[]).await;
        assert_eq!(status, StatusCode::OK, "reload {n}: {answer}");
        assert_eq!(
            strings(&answer["rebuilt"]),
            ["cluster moving"],
            "reload {n}: only moving's stack changes: {answer}"
        );
        let timeout = cluster(&gw.breakers(&[]).await, "moving")["attempt_timeout_ms"]
            .as_f64()
            .unwrap();
        assert_eq!(timeout, [2000.0, 3000.0][n % 2], "reload {n} is in force");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let report = wrk.finish().await;
    eprintln!("wrk over 10 reloads:\n{}", report.report);
    assert!(report.requests > 100, "{}", report.report);
    assert_eq!(report.non_2xx, 0, "{}", report.report);
    assert!(
        !report.report.contains("Socket errors"),
        "socket errors: {}",
        report.report
    );
    assert_eq!(gw.logged("configuration reloaded"), 10, "{}", gw.log());

    // The same breaker: still open, its break running on from where it was.
    let steady = cluster(&gw.breakers(&[]).await, "steady").clone();
    assert_eq!(steady["state"], "open", "{steady}");
    let expected = before - opened_at.elapsed().as_secs_f64() * 1000.0;
    let left = steady["retry_after_ms"].as_f64().unwrap();
    assert!(
        (left - expected).abs() <= 1000.0,
        "remaining break {left} ms, expected {expected} ms (±1 s)"
    );
    let refused = get(&gw.url("/steady/1")).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    let retry_after: f64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (retry_after * 1000.0 - expected).abs() <= 1500.0,
        "Retry-After {retry_after} s, expected about {expected} ms"
    );
    // The status page's data names the last reload and what it rebuilt.
    let reload = &gw.breakers(&[]).await["reload"];
    assert_eq!(reload["ok"], true, "{reload}");
    assert_eq!(strings(&reload["rebuilt"]), ["cluster moving"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_changes_nothing_and_says_why_with_the_code_check_gives() {
    let up = upstreams().await;
    let dir = Dir::new("bad");
    let good = config(&up, "2s", "");
    let file = dir.file("gw.toml", &good);
    let gw = Binary::start(&file);
    let cases = [
        (
            "syntax",
            good.replace("[clusters.steady]", "[clusters.steady"),
            "GW-CFG-001",
            "",
        ),
        (
            "value",
            config(&up, "3s", "").replace(
                "jitter = \"none\"",
                "jitter = \"none\"\nfailure-ratio = 7.0",
            ),
            "CUT-CFG",
            "",
        ),
        (
            "range",
            config(&up, "3s", "max-ejection-percent = 200"),
            "GW-CFG-009",
            "gateway.max-ejection-percent",
        ),
    ];
    for (what, text, code, key) in cases {
        std::fs::write(&file, &text).unwrap();
        let (status, answer) = gw.reload(&[]).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: {answer}");
        let got = answer["code"].as_str().unwrap_or_default();
        assert!(
            got.starts_with(code),
            "{what}: code {got}, wanted {code}: {answer}"
        );
        if !key.is_empty() {
            assert_eq!(answer["key"], key, "{what}: {answer}");
        }
        let error = answer["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            error.contains(got),
            "{what}: the message names its code: {error}"
        );
        // `--check` of the same file: the same verdict, the same code.
        let (passed, said) = check(&file);
        assert!(!passed, "{what}: --check passed a file the reload refused");
        assert!(
            said.contains(got),
            "{what}: --check said {said}, the reload {got}"
        );
        // Nothing changed: the old timeout in force, requests routed as before.
        let breakers = gw.breakers(&[]).await;
        assert_eq!(
            cluster(&breakers, "moving")["attempt_timeout_ms"],
            2000.0,
            "{what}"
        );
        assert_eq!(breakers["reload"]["ok"], false, "{what}");
        assert_eq!(
            get(&gw.url("/moving/1")).await.status,
            StatusCode::OK,
            "{what}"
        );
        assert_eq!(
            get(&gw.url("/steady/1")).await.status,
            StatusCode::OK,
            "{what}"
        );
        assert!(
            gw.wait_logged(
                &format!(
                    "refused, nothing changed: {}",
                    error.lines().next().unwrap_or("")
                ),
                1
            )
            .await,
            "{what}: logged with its code: {}",
            gw.log()
        );
    }
    // A good file again: `--check` passes it, and the reload applies it.
    std::fs::write(&file, config(&up, "3s", "")).unwrap();
    assert!(check(&file).0);
    let (status, answer) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let breakers = gw.breakers(&[]).await;
    assert_eq!(cluster(&breakers, "moving")["attempt_timeout_ms"], 3000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_running_binary() {
    let up = upstreams().await;
    let dir = Dir::new("hup");
    let file = dir.file("gw.toml", &config(&up, "2s", ""));
    let gw = Binary::start(&file);
    std::fs::write(&file, config(&up, "3s", "")).unwrap();
    let status = Command::new("kill")
        .args(["-HUP", &gw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        gw.wait_logged("configuration reloaded", 1).await,
        "{}",
        gw.log()
    );
    assert!(
        gw.logged("(SIGHUP): rebuilt: [cluster moving]") == 1,
        "{}",
        gw.log()
    );
    let breakers = gw.breakers(&[]).await;
    assert_eq!(cluster(&breakers, "moving")["attempt_timeout_ms"], 3000.0);
    assert_eq!(breakers["reload"]["trigger"], "SIGHUP");
    assert_eq!(get(&gw.url("/moving/1")).await.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_reload_needs_the_token_and_the_admin_checks() {
    let up = upstreams().await;
    let dir = Dir::new("token");
    let file = dir.file("gw.toml", &config(&up, "2s", "admin-token = \"s3cret\""));
    let gw = Binary::start(&file);
    std::fs::write(&file, config(&up, "3s", "admin-token = \"s3cret\"")).unwrap();
    let (status, _) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = gw.reload(&[("x-cutout-token", "wrong")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let origin = format!("http://evil.example:{}", gw.admin.port());
    let (status, _) = gw
        .reload(&[("authorization", "Bearer s3cret"), ("origin", &origin)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a cross-origin reload");
    assert_eq!(gw.logged("configuration reload"), 0, "{}", gw.log());
    let token = [("authorization", "Bearer s3cret")];
    let breakers = gw.breakers(&token).await;
    assert_eq!(cluster(&breakers, "moving")["attempt_timeout_ms"], 2000.0);
    let (status, answer) = gw.reload(&token).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let breakers = gw.breakers(&token).await;
    assert_eq!(cluster(&breakers, "moving")["attempt_timeout_ms"], 3000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_only_key_is_named_and_kept_while_the_rest_applies() {
    let up = upstreams().await;
    let dir = Dir::new("restart");
    let file = dir.file("gw.toml", &config(&up, "2s", "max-connections = 100"));
    let gw = Binary::start(&file);
    std::fs::write(
        &file,
        config(&up, "3s", "max-connections = 200\ntrusted-hops = 1"),
    )
    .unwrap();
    let (status, answer) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        strings(&answer["restart_required"]),
        ["gateway.max-connections"],
        "{answer}"
    );
    assert_eq!(
        strings(&answer["changed"]),
        ["gateway.trusted-hops"],
        "{answer}"
    );
    assert!(
        gw.wait_logged("GW-WARN-004: gateway.max-connections", 1)
            .await,
        "{}",
        gw.log()
    );
    let breakers = gw.breakers(&[]).await;
    assert_eq!(cluster(&breakers, "moving")["attempt_timeout_ms"], 3000.0);
    assert_eq!(get(&gw.url("/moving/1")).await.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_breaker_is_rebuilt_and_an_added_cluster_routed() {
    let up = upstreams().await;
    let dir = Dir::new("changed");
    let file = dir.file("gw.toml", &config(&up, "2s", ""));
    let gw = Binary::start(&file);
    for id in ["steady", "moving"] {
        let opened = send(
            Method::POST,
            &gw.admin_url(&format!("/breakers/{id}/open-for?duration=60s")),
            &[],
            "",
        )
        .await;
        assert_eq!(opened.status, StatusCode::OK);
    }
    // steady's own breaker settings change; moving's do not; a third cluster comes in.
    let text = config(&up, "2s", "").replace("[breakers.defaults]", "[breakers.instances.steady]\nbreak-duration = \"20s\"\nmax-break-duration = \"20s\"\n\n[breakers.defaults]")
        + &format!(
            "\n[[routes]]\nprefix = \"/third\"\ncluster = \"third\"\n\n[clusters.third]\nupstreams = [\"http://{}\"]\n",
            up.moving
        );
    std::fs::write(&file, text).unwrap();
    let (status, answer) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        strings(&answer["rebuilt"]),
        ["cluster steady", "breaker steady", "routes"],
        "{answer}"
    );
    assert_eq!(strings(&answer["added"]), ["cluster third"], "{answer}");
    let breakers = gw.breakers(&[]).await;
    assert_eq!(
        cluster(&breakers, "steady")["state"],
        "closed",
        "a new breaker"
    );
    assert_eq!(
        cluster(&breakers, "moving")["state"],
        "open",
        "the same breaker"
    );
    assert_eq!(get(&gw.url("/steady/1")).await.status, StatusCode::OK);
    assert_eq!(get(&gw.url("/third/1")).await.status, StatusCode::OK);
    // The status page shows the line.
    let page = get(&gw.admin_url("/")).await.body;
    assert!(
        page.contains("id=\"reload\"") && page.contains("rebuilt: "),
        "the page shows reloads"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_cluster_is_the_same_object_and_breakers_keep_their_exact_break() {
    use cutout::clock::ManualClock;
    use cutout_gateway::{Gateway, GatewayConfig, reload};
    let up = upstreams().await;
    let dir = Dir::new("same");
    let file = dir.file("gw.toml", &config(&up, "2s", ""));
    let clock = ManualClock::new();
    let gateway = Gateway::with_clock(
        GatewayConfig::from_toml(&config(&up, "2s", "")).unwrap(),
        clock.clone(),
    );
    gateway.set_source(&file);
    for id in ["steady", "moving"] {
        assert!(
            gateway
                .registry()
                .get(id)
                .unwrap()
                .open_for(Duration::from_secs(60))
        );
    }
    clock.advance(Duration::from_secs(7));
    let before = gateway.clusters();
    let remaining = |id: &str| gateway.registry().get(id).unwrap().break_remaining();
    let (steady_left, moving_left) = (remaining("steady"), remaining("moving"));
    assert_eq!(steady_left, Some(Duration::from_secs(53)));

    std::fs::write(&file, config(&up, "3s", "")).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert_eq!(record.rebuilt, ["cluster moving"]);
    let after = gateway.clusters();
    assert!(
        Arc::ptr_eq(&before["steady"], &after["steady"]),
        "steady is the same cluster"
    );
    assert!(
        !Arc::ptr_eq(&before["moving"], &after["moving"]),
        "moving has a new stack"
    );
    assert_eq!(after["moving"].attempt_timeout(), Duration::from_secs(3));
    // Both breakers are the ones opened: the same break left, to the nanosecond.
    assert_eq!(remaining("steady"), steady_left);
    assert_eq!(remaining("moving"), moving_left);
    assert_eq!(
        after["moving"].breaker().break_remaining(),
        moving_left,
        "the new stack runs on the old breaker"
    );
    // The old stack's breaker handle and the registry's are one breaker.
    before["moving"].breaker().reset();
    assert_eq!(remaining("moving"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_finishes_on_the_routing_it_started_on() {
    use cutout_gateway::upstream::Mode;
    let (stop, _) = watch::channel(false);
    let slow = Upstream::new("moving");
    slow.set_mode(Mode::Slow);
    let moving = serve_upstream(&slow, &stop).await;
    let steady = serve_upstream(&Upstream::new("steady"), &stop).await;
    let up = Upstreams {
        moving,
        steady,
        _stop: stop,
    };
    let dir = Dir::new("inflight");
    let file = dir.file("gw.toml", &config(&up, "3s", ""));
    let gw = Binary::start(&file);
    let url = gw.url("/moving/1");
    let in_flight = tokio::spawn(async move { get(&url).await.status });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // moving now points at a port nobody listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let moved = config(&up, "3s", "").replace(
        &format!("http://127.0.0.1:{}", up.moving.port()),
        &format!("http://127.0.0.1:{dead}"),
    );
    std::fs::write(&file, moved).unwrap();
    let (status, answer) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(!in_flight.is_finished(), "the request was still in flight");
    assert_eq!(
        in_flight.await.unwrap(),
        StatusCode::OK,
        "served by the old upstream"
    );
    assert_eq!(
        get(&gw.url("/moving/1")).await.status,
        StatusCode::BAD_GATEWAY,
        "a new request goes to the new upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_cluster_s_health_checks_start_again() {
    let up = upstreams().await;
    let dir = Dir::new("checks");
    let checked = |timeout: &str| {
        format!(
            "{}\n[clusters.moving.health-check]\npath = \"/\"\ninterval = \"100ms\"\ntimeout = \"50ms\"\njitter = \"0ms\"\n",
            config(&up, timeout, "")
        )
    };
    let file = dir.file("gw.toml", &checked("2s"));
    let gw = Binary::start(&file);
    std::fs::write(&file, checked("3s")).unwrap();
    let (status, answer) = gw.reload(&[]).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(strings(&answer["rebuilt"]), ["cluster moving"], "{answer}");
    let reloaded_at = answer["at_unix_ms"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let breakers = gw.breakers(&[]).await;
        let check = &cluster(&breakers, "moving")["hosts"][0]["health_check"];
        if check["at_unix_ms"]
            .as_u64()
            .is_some_and(|at| at >= reloaded_at)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no check on the rebuilt cluster since the reload: {check}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `[fleet]` across reloads: an unchanged table keeps the running fleet (its rounds go on),
/// which stops watching a removed cluster and watches a rebuilt one again; a changed table
/// starts the fleet anew on every cluster breaker; a table removed stops it. No Redis is
/// needed: the fleet starts without I/O and reports its connection in its health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_fleet_watching_every_cluster_breaker() {
    use cutout_gateway::{Gateway, GatewayConfig, reload};
    let up = upstreams().await;
    let dir = Dir::new("fleet");
    let fleet = "\n[fleet]\nredis = \"redis://127.0.0.1:1\"\npod = \"a\"\ninterval = \"50ms\"\n";
    let text = config(&up, "2s", "") + fleet;
    let file = dir.file("gw.toml", &text);
    let gateway = Gateway::new(GatewayConfig::from_toml(&text).unwrap());
    gateway.set_source(&file);
    let health = || gateway.fleet_json().expect("[fleet] is configured");
    assert_eq!(health()["watched"], 2, "{}", health());
    // The rounds it has run (Redis unreachable: each one fails): a new fleet starts from none.
    let rounds = || {
        let h = health();
        h["rounds"].as_u64().unwrap() + h["failed_rounds"].as_u64().unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rounds() < 5 {
        assert!(std::time::Instant::now() < deadline, "{}", health());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = rounds();

    // moving's stack and steady's breaker rebuilt: the same fleet watches both.
    let rebuilt = config(&up, "3s", "").replace(
        "[breakers.defaults]",
        "[breakers.instances.steady]\nbreak-duration = \"20s\"\nmax-break-duration = \"20s\"\n\n[breakers.defaults]",
    ) + fleet;
    std::fs::write(&file, &rebuilt).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert!(
        record.rebuilt.contains(&"breaker steady".to_owned()),
        "{record:?}"
    );
    assert_eq!(health()["watched"], 2, "{}", health());
    assert!(
        rounds() >= before,
        "the same fleet: {} rounds after {before}",
        rounds()
    );

    // steady removed: no longer watched.
    let without_steady = (config(&up, "3s", "") + fleet)
        .replace(
            "[[routes]]\nprefix = \"/steady\"\ncluster = \"steady\"\n",
            "",
        )
        .replace(
            &format!(
                "[clusters.steady]\nupstreams = [\"http://127.0.0.1:{}\"]\n",
                up.steady.port()
            ),
            "",
        );
    std::fs::write(&file, &without_steady).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert_eq!(record.removed, ["cluster steady"], "{record:?}");
    assert_eq!(health()["watched"], 1, "{}", health());

    // Another pod name: a new fleet, on every cluster breaker.
    std::fs::write(&file, without_steady.replace("pod = \"a\"", "pod = \"b\"")).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert!(
        record.rebuilt.contains(&"section fleet".to_owned()),
        "{record:?}"
    );
    assert_eq!(health()["pod"], "b", "{}", health());
    assert_eq!(health()["watched"], 1, "{}", health());

    // No [fleet]: stopped.
    std::fs::write(&file, without_steady.replace(fleet, "")).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert!(gateway.fleet_json().is_none());
}

//! Acceptance 4: bad input. A malformed URL is a clear error at build; an unreachable Redis,
//! a wrong password and keys of another format under the prefix are logged warnings (once,
//! not once a round), never a panic, and the breakers keep working on their own calls.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, eventually, free_port, logs, sparse_settings};
use cutout::{Breaker, OpenReason, Settings, State, Transition};
use cutout_fleet::{Fleet, FleetRule};
use redis::Commands;

/// A breaker that opens on 3 consecutive failures of its own.
fn local_breaker(id: &str) -> Breaker {
    Breaker::new(
        id,
        Settings::builder()
            .consecutive_failures(Some(3))
            .build()
            .unwrap(),
    )
}

fn opens_locally(breaker: &Breaker) {
    for _ in 0..3 {
        let error = breaker.call(|| Err::<(), _>("upstream 503")).unwrap_err();
        assert_eq!(error.into_inner(), Some("upstream 503"));
    }
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_malformed_url_is_an_error_at_build() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let mut urls = vec![
        "",
        "localhost:6379",
        "not a url",
        "redis://127.0.0.1:notaport",
        "http://127.0.0.1:6379",
    ];
    if cfg!(not(feature = "tls")) {
        urls.push("rediss://127.0.0.1:6379"); // TLS is not compiled in
    }
    for url in urls {
        let error = Fleet::builder(url).build().unwrap_err();
        assert!(error.is_url(), "{url:?}: {error}");
        println!("{url:?} → {error}");
    }
    // The password never shows in the message.
    let error = Fleet::builder("redis://:s3cret@127.0.0.1:notaport")
        .build()
        .unwrap_err();
    assert!(!error.to_string().contains("s3cret"), "{error}");
}

#[test]
fn settings_out_of_range_and_no_runtime_are_errors_at_build() {
    let url = "redis://127.0.0.1:6379";
    let error = Fleet::builder(url).build().unwrap_err();
    assert!(error.is_no_runtime(), "{error}");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let cases = [
        (Fleet::builder(url).interval(Duration::ZERO), "interval"),
        (Fleet::builder(url).timeout(Duration::ZERO), "timeout"),
        (
            Fleet::builder(url).connect_timeout(Duration::ZERO),
            "connect_timeout",
        ),
        (
            Fleet::builder(url).staleness(Duration::from_millis(10)),
            "staleness",
        ),
        (
            Fleet::builder(url).retention(Duration::from_millis(10)),
            "retention",
        ),
        (
            Fleet::builder(url).max_backoff(Duration::ZERO),
            "max_backoff",
        ),
        (Fleet::builder(url).pod("two words"), "pod"),
        (Fleet::builder(url).prefix(""), "prefix"),
    ];
    for (builder, name) in cases {
        let error = builder.build().unwrap_err();
        assert!(
            error.is_invalid() && error.to_string().contains(name),
            "{error}"
        );
    }

    // The rule and the id are checked at watch.
    let fleet = Fleet::builder(url).pod("rules").build().unwrap();
    let breaker = Breaker::new("payments", Settings::default());
    let error = fleet
        .watch_with(&breaker, FleetRule::new().failure_ratio(2.0))
        .unwrap_err();
    assert!(error.is_invalid(), "{error}");
    fleet.watch(&breaker).unwrap();
    let error = fleet
        .watch(&Breaker::new("payments", Settings::default()))
        .unwrap_err();
    assert!(error.is_already_watched(), "{error}");
    assert!(fleet.unwatch("payments"));
    assert!(!fleet.unwatch("payments"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_a_warning_and_breakers_decide_locally() {
    let logs = logs();
    let port = free_port(); // nothing listens there
    let started = Instant::now();
    let fleet = Fleet::builder(format!("redis://127.0.0.1:{port}"))
        .pod("unreachable-a")
        .build()
        .expect("an unreachable Redis is no error at build");
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "build does no I/O"
    );
    let breaker = local_breaker("payments");
    fleet.watch(&breaker).unwrap();

    assert!(eventually(Duration::from_secs(2), || fleet.health().is_degraded()).await);
    let health = fleet.health();
    let error = health.error().unwrap();
    assert!(error.is_unreachable(), "{error}");
    println!("unreachable: {error}");
    opens_locally(&breaker);

    // Several failed attempts later, one warning.
    assert!(eventually(Duration::from_secs(3), || fleet.health().failed_rounds >= 3).await);
    let warnings = logs.lines_with(&["unreachable-a", "WARN"]);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(&format!("127.0.0.1:{port}")),
        "{}",
        warnings[0]
    );
    println!("logged once: {}", warnings[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_warning_and_breakers_decide_locally() {
    let logs = logs();
    let Some(redis) = RedisServer::start_with(&["--requirepass", "s3cret"]) else {
        return;
    };
    let port = redis.port();
    for (pod, url) in [
        ("auth-wrong", format!("redis://:wrong@127.0.0.1:{port}")),
        ("auth-missing", format!("redis://127.0.0.1:{port}")),
    ] {
        let fleet = Fleet::builder(&url).pod(pod).build().unwrap();
        let breaker = local_breaker("payments");
        fleet.watch(&breaker).unwrap();
        assert!(eventually(Duration::from_secs(2), || fleet.health().is_degraded()).await);
        let health = fleet.health();
        let error = health.error().unwrap();
        assert!(error.is_auth(), "{pod}: {error}");
        println!("{pod}: {error}");
        opens_locally(&breaker);
        // Logged right after the round that failed; later rounds log nothing more.
        assert!(
            eventually(Duration::from_secs(1), || !logs
                .lines_with(&[pod, "WARN"])
                .is_empty())
            .await
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        let warnings = logs.lines_with(&[pod, "WARN"]);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert!(warnings[0].contains("password"), "{}", warnings[0]);
        assert!(
            !warnings[0].contains("wrong@"),
            "no URL with its password in logs"
        );
    }
    // The right password connects.
    let fleet = Fleet::builder(format!("redis://:s3cret@127.0.0.1:{port}"))
        .pod("auth-right")
        .build()
        .unwrap();
    fleet.watch(&local_breaker("payments")).unwrap();
    assert!(
        fleet.wait_connected(Duration::from_secs(3)).await,
        "{:?}",
        fleet.health()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_another_format_are_left_alone_and_logged_once() {
    let logs = logs();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut admin = redis.client();
    let fleet = Fleet::builder(redis.url())
        .pod("foreign-a")
        .prefix("foreign")
        .build()
        .unwrap();
    // Another program's data where rings would be: a string, a list, and a string that
    // starts like a ring of another version of the layout.
    let (payments, search, ledger) = (
        fleet.key("payments"),
        fleet.key("search"),
        fleet.key("ledger"),
    );
    let other_version = [&b"CTFL\x02\0\0\0"[..], &[0u8; 408]].concat();
    let _: () = admin.set(&payments, "not a ring").unwrap();
    let _: () = admin.rpush(&search, &["a", "b"]).unwrap();
    let _: () = admin.set(&ledger, &other_version).unwrap();

    let payments_breaker = local_breaker("payments");
    let search_breaker = local_breaker("search");
    let ledger_breaker = local_breaker("ledger");
    // `orders` needs 40 calls: only the fleet can open it, with another pod's failures.
    let orders = Breaker::new("orders", sparse_settings(Duration::from_secs(10), 40));
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&reasons);
    orders.subscribe(move |event| {
        if let Transition::Opened { reason, .. } = event.transition {
            seen.lock().unwrap().push(reason);
        }
    });
    for breaker in [&payments_breaker, &search_breaker, &ledger_breaker, &orders] {
        fleet.watch(breaker).unwrap();
    }
    assert!(fleet.wait_connected(Duration::from_secs(3)).await);
    // Several rounds.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let health = fleet.health();
    assert!(
        health.is_connected(),
        "foreign keys do not degrade the link: {health:?}"
    );
    assert!(health.rounds >= 4);

    // Left alone: same value, same type, and no expiry put on them.
    let value: String = admin.get(&payments).unwrap();
    assert_eq!(value, "not a ring");
    let list: Vec<String> = admin.lrange(&search, 0, -1).unwrap();
    assert_eq!(list, ["a", "b"]);
    let value: Vec<u8> = admin.get(&ledger).unwrap();
    assert_eq!(value, other_version);
    for key in [&payments, &search, &ledger] {
        let ttl: i64 = admin.pttl(key).unwrap();
        assert_eq!(ttl, -1, "no PEXPIRE on another program's key {key}");
    }
    assert_eq!(fleet.view("payments"), None);
    assert_eq!(fleet.view("search"), None);
    assert_eq!(fleet.view("ledger"), None);
    assert!(fleet.view("orders").is_some(), "the ring is used");

    // One warning per key over several rounds, naming what the key holds.
    for (key, kind) in [
        (&payments, "string"),
        (&search, "list"),
        (&ledger, "string"),
    ] {
        let warnings = logs.lines_with(&["foreign-a", key, "WARN"]);
        assert_eq!(warnings.len(), 1, "{key}: {warnings:#?}");
        assert!(warnings[0].contains(kind), "{}", warnings[0]);
        println!("{key}: {}", warnings[0]);
    }

    // The breakers keep working: locally for those whose keys are foreign ...
    opens_locally(&payments_breaker);
    opens_locally(&search_breaker);
    opens_locally(&ledger_breaker);
    // ... and on the fleet's window for `orders`: another pod, whose own breaker needs 80
    // calls, fails 40 calls out of 40.
    let other = Fleet::builder(redis.url())
        .pod("foreign-b")
        .prefix("foreign")
        .build()
        .unwrap();
    let elsewhere = Breaker::new("orders", sparse_settings(Duration::from_secs(10), 80));
    other.watch(&elsewhere).unwrap();
    for _ in 0..40 {
        let _ = elsewhere.call(|| Err::<(), _>("upstream 503"));
    }
    let opened = eventually(Duration::from_secs(3), || orders.state() == State::Open).await;
    assert!(opened, "{:?}", fleet.view("orders"));
    assert_eq!(*reasons.lock().unwrap(), [OpenReason::Signal]);
}

/// Issue #34: a URL without `redis://`, a port out of range, an unknown scheme each say what
/// is wrong, with a stable code, instead of "did not parse".
#[test]
fn each_malformed_url_says_what_is_wrong_with_a_stable_code() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let mut cases: Vec<(&str, &str, &[&str])> = Vec::new();
    if cfg!(not(feature = "tls")) {
        cases.push(("rediss://127.0.0.1:6379", "FLEET-URL-003", &["TLS"]));
    }
    cases.extend([
        ("", "FLEET-URL-001", &["empty", "redis://"][..]),
        (
            "127.0.0.1:6379",
            "FLEET-URL-001",
            &["no scheme", "redis://127.0.0.1:6379"],
        ),
        (
            "localhost:6379",
            "FLEET-URL-001",
            &["no scheme", "redis://localhost:6379"],
        ),
        ("not a url", "FLEET-URL-001", &["no scheme"]),
        (
            "http://127.0.0.1:6379",
            "FLEET-URL-002",
            &["scheme \"http\"", "redis://"],
        ),
        (
            "redis://127.0.0.1:99999",
            "FLEET-URL-004",
            &["port 99999", "1 to 65535"],
        ),
        (
            "redis://127.0.0.1:notaport",
            "FLEET-URL-004",
            &["port \"notaport\"", "1 to 65535"],
        ),
        (
            "redis://127.0.0.1:0",
            "FLEET-URL-004",
            &["port 0", "1 to 65535"],
        ),
        (
            "redis://127.0.0.1:6379/notadb",
            "FLEET-URL-005",
            &["database"],
        ),
        ("redis://:6379", "FLEET-URL-005", &["no host"]),
        ("redis://0.0.0.0:6379", "FLEET-URL-005", &["wildcard"]),
    ]);
    #[cfg(not(feature = "sentinel"))]
    cases.push((
        "redis+sentinel://127.0.0.1:26379/mymaster",
        "FLEET-URL-002",
        &["redis+sentinel://", "feature \"sentinel\""],
    ));
    #[cfg(feature = "sentinel")]
    cases.extend([
        (
            "redis+sentinel://127.0.0.1:26379",
            "FLEET-URL-005",
            &["no name of the primary", "redis+sentinel://"][..],
        ),
        (
            "redis+sentinel://127.0.0.1:26379,127.0.0.1:99999/mymaster",
            "FLEET-URL-004",
            &["a sentinel's port 99999 is out of range"],
        ),
        (
            "redis+sentinel://127.0.0.1:26379,/mymaster",
            "FLEET-URL-005",
            &["a sentinel without a host"],
        ),
        (
            "redis+sentinel://127.0.0.1/mymaster/first",
            "FLEET-URL-005",
            &["database \"first\" is not a number"],
        ),
        (
            "redis+sentinel://127.0.0.1/mymaster?timeout=1",
            "FLEET-URL-005",
            &["no query"],
        ),
    ]);
    // Every case is tried before any is judged, so that a failure shows them all.
    let mut wrong = Vec::new();
    for (url, code, needles) in &cases {
        let error = match Fleet::builder(*url).build() {
            Ok(fleet) => {
                wrong.push(format!("{url:?}: wanted {code}, but it built {fleet:?}"));
                continue;
            }
            Err(error) => error,
        };
        let message = error.to_string();
        println!("{url:?} → {message}");
        let ok = error.is_url()
            && error.code() == *code
            && message.starts_with(code)
            && needles.iter().all(|needle| message.contains(needle))
            && !message.contains("did not parse");
        if !ok {
            wrong.push(format!(
                "{url:?}: wanted {code} with {needles:?}, got {message}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The password never shows, whatever is wrong.
    for url in [
        "redis://:s3cret@127.0.0.1:99999",
        "redis://user:s3cret@127.0.0.1:notaport",
        "http://:s3cret@127.0.0.1:6379",
        "redis://:s3cret@127.0.0.1:6379/notadb",
        "user:s3cret@127.0.0.1:6379",
        "redis+sentinel://:s3cret@127.0.0.1:99999/mymaster",
    ] {
        let error = Fleet::builder(url).build().unwrap_err();
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }
    // A good Sentinel URL builds (no I/O), and what the logs show of it has no password.
    #[cfg(feature = "sentinel")]
    {
        let fleet = Fleet::builder("redis+sentinel://:s3cret@127.0.0.1,[::1]:26380/mymaster/2")
            .build()
            .unwrap();
        let shown = format!("{fleet:?}");
        assert!(
            shown.contains("mymaster") && shown.contains("sentinels 127.0.0.1:26379,::1:26380"),
            "{shown}"
        );
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}

/// A loopback listener of the test's own that answers every connection with `answer` (after
/// the client's first bytes) and keeps it open: not a Redis.
async fn not_redis(answer: &'static [u8]) -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            connections.spawn(async move {
                let mut buffer = [0u8; 1024];
                if matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {
                    let _ = stream.write_all(answer).await;
                }
                // Held open until the client goes, bounded.
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await;
            });
        }
    });
    (port, task)
}

/// Issue #34: a server that is not Redis (an HTTP server, a listener answering garbage) is
/// named as such in the health, with a stable code, not as raw parse bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_redis_is_named_as_such() {
    let answers: [(&str, &'static [u8], &str); 2] = [
        (
            "not-redis-http",
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "an HTTP server",
        ),
        (
            "not-redis-garbage",
            b"\x00\x7f{garbage}\xff\xfe\r\n",
            "not the Redis protocol",
        ),
    ];
    let mut wrong = Vec::new();
    for (pod, answer, what) in answers {
        let (port, server) = not_redis(answer).await;
        let fleet = Fleet::builder(format!("redis://127.0.0.1:{port}"))
            .pod(pod)
            .build()
            .unwrap();
        let breaker = local_breaker("payments");
        fleet.watch(&breaker).unwrap();
        assert!(eventually(Duration::from_secs(3), || fleet.health().is_degraded()).await);
        let health = fleet.health();
        let error = health.error().unwrap();
        let message = error.to_string();
        println!("{pod}: {message}");
        let ok = error.code() == "FLEET-RUN-006"
            && error.is_protocol()
            && message.contains("not a Redis server")
            && message.contains(what)
            && message.contains(&format!("127.0.0.1:{port}"))
            && !["Incompatible", "\\x", "\\u{", "garbage", "Bad Request"]
                .iter()
                .any(|raw| message.contains(raw));
        if !ok {
            wrong.push(format!(
                "{pod}: wanted FLEET-RUN-006 and {what:?}, got {message}"
            ));
        }
        opens_locally(&breaker);
        drop(fleet);
        server.abort();
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `validate` checks what `build` checks and starts nothing: it needs no runtime, so that a
/// configuration can be checked before it is applied.
#[test]
fn validate_checks_without_a_runtime_and_starts_nothing() {
    assert!(Fleet::builder("redis://127.0.0.1:6379").validate().is_ok());
    let error = Fleet::builder("redis://127.0.0.1:99999")
        .validate()
        .unwrap_err();
    assert_eq!(error.code(), "FLEET-URL-004", "{error}");
    let error = Fleet::builder("redis://127.0.0.1:6379")
        .pod("a b")
        .validate()
        .unwrap_err();
    assert_eq!(error.code(), "FLEET-CFG-002", "{error}");
    // build, by contrast, needs the runtime it would start the task on.
    let error = Fleet::builder("redis://127.0.0.1:6379")
        .build()
        .unwrap_err();
    assert!(error.is_no_runtime(), "{error}");
}

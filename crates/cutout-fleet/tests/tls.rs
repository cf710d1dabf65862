//! `rediss://` and ACL users against a real `redis-server` with `--tls-port`: a CA and a
//! server certificate generated here with rcgen, the CA given with `tls_ca_file` (it is in no
//! system's roots), an ACL user confined to the fleet's keys, and the errors of a wrong
//! password, an unknown user, an untrusted certificate, a plain port and a bad CA file.

#![cfg(feature = "tls")]

mod common;

use std::path::{Path, PathBuf};

use std::time::Duration;

use common::certs::Certificates;
use common::{RedisServer, eventually, free_port};
use cutout::{Breaker, Settings};
use cutout_fleet::Fleet;

/// A server with its plain port (the helper's, which it pings) and a TLS port, and an ACL
/// user `fleet` (password `fleet-pw`) allowed only the fleet's keys.
struct TlsRedis {
    server: RedisServer,
    tls_port: u16,
    _certificates: Certificates,
    ca: PathBuf,
}

fn start(name: &str) -> Option<TlsRedis> {
    let certificates = Certificates::generate(name);
    let tls_port = free_port();
    let args = certificates.redis_args(tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = RedisServer::start_with(&args)?;
    let mut conn = server.client();
    // The README's ACL: the fleet's keys only, every command.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "fleet",
            "on",
            ">fleet-pw",
            "~{cutout%3Afleet:*",
            "+@all",
        ])
        .query(&mut conn)
        .expect("ACL SETUSER");
    let ca = certificates.ca();
    Some(TlsRedis {
        server,
        tls_port,
        _certificates: certificates,
        ca,
    })
}

fn breaker(id: &str) -> Breaker {
    Breaker::new(id, Settings::default())
}

/// Builds a fleet for `url` (with the CA file, if given) watching one breaker, and waits up
/// to 3 s for it to be connected (`true`) or degraded with an error (`false`).
async fn connect(url: &str, ca: Option<&Path>, pod: &str) -> (Fleet, Breaker, bool) {
    let mut builder = Fleet::builder(url)
        .pod(pod)
        .connect_timeout(Duration::from_secs(2));
    if let Some(ca) = ca {
        builder = builder.tls_ca_file(ca);
    }
    let fleet = builder.build().expect("a valid URL and CA file");
    let payments = breaker("payments");
    fleet.watch(&payments).unwrap();
    let settled = eventually(Duration::from_secs(3), || {
        let health = fleet.health();
        health.is_connected() || health.is_degraded()
    })
    .await;
    assert!(settled, "{pod}: neither connected nor degraded in 3 s");
    let connected = fleet.wait_connected(Duration::from_millis(500)).await;
    (fleet, payments, connected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_the_ca_file_connects_and_publishes() {
    let Some(redis) = start("ok") else {
        return;
    };
    let url = format!("rediss://127.0.0.1:{}", redis.tls_port);
    let (fleet, _payments, connected) = connect(&url, Some(&redis.ca), "tls-ok").await;
    assert!(connected, "{:?}", fleet.health());
    // The ring was written through the TLS port: the plain port sees it.
    let key = fleet.key("payments");
    let mut conn = redis.server.client();
    let exists = eventually(Duration::from_secs(2), || {
        redis::cmd("EXISTS")
            .arg(&key)
            .query::<i64>(&mut conn)
            .unwrap()
            == 1
    })
    .await;
    assert!(exists, "no ring at {key} after a TLS round");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_connects_over_tls_and_over_plain_tcp() {
    let Some(redis) = start("acl") else {
        return;
    };
    for url in [
        format!("rediss://fleet:fleet-pw@127.0.0.1:{}", redis.tls_port),
        format!("redis://fleet:fleet-pw@127.0.0.1:{}", redis.server.port()),
    ] {
        let ca = url.starts_with("rediss").then_some(redis.ca.as_path());
        let (fleet, _payments, connected) = connect(&url, ca, "acl-ok").await;
        assert!(connected, "{}: {:?}", url, fleet.health());
    }
    // The ACL confines the user to the fleet's keys: the same user under another prefix is
    // refused by Redis (`NOPERM`), which shows the user really is `fleet`, not `default`.
    let fleet = Fleet::builder(format!(
        "redis://fleet:fleet-pw@127.0.0.1:{}",
        redis.server.port()
    ))
    .pod("acl-other-prefix")
    .prefix("other")
    .build()
    .unwrap();
    fleet.watch(&breaker("payments")).unwrap();
    assert!(eventually(Duration::from_secs(3), || fleet.health().is_degraded()).await);
    let health = fleet.health();
    let error = health.error().unwrap();
    assert!(
        error.is_server() && error.to_string().contains("no permissions"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_or_an_unknown_user_says_authentication_failed() {
    let Some(redis) = start("wrongpass") else {
        return;
    };
    let tls = redis.tls_port;
    let plain = redis.server.port();
    for (pod, url, ca) in [
        (
            "acl-wrong-password",
            format!("rediss://fleet:not-the-password@127.0.0.1:{tls}"),
            Some(redis.ca.as_path()),
        ),
        (
            "acl-unknown-user",
            format!("rediss://nobody:fleet-pw@127.0.0.1:{tls}"),
            Some(redis.ca.as_path()),
        ),
        (
            "acl-wrong-password-plain",
            format!("redis://fleet:not-the-password@127.0.0.1:{plain}"),
            None,
        ),
    ] {
        let (fleet, _payments, connected) = connect(&url, ca, pod).await;
        assert!(!connected, "{pod}: connected with bad credentials");
        let health = fleet.health();
        let error = health.error().unwrap();
        let message = error.to_string();
        println!("{pod}: {message}");
        assert!(error.is_auth(), "{pod}: {message}");
        assert_eq!(error.code(), "FLEET-RUN-002", "{pod}: {message}");
        assert!(
            message.contains("authentication failed"),
            "{pod}: {message}"
        );
        assert!(!message.contains("not-the-password"), "{pod}: {message}");
        assert!(
            !message.to_lowercase().contains("parse"),
            "{pod}: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_and_a_plain_port_are_tls_errors() {
    let Some(redis) = start("untrusted") else {
        return;
    };
    // Without the CA file: the system's roots do not hold the test CA.
    let url = format!("rediss://127.0.0.1:{}", redis.tls_port);
    let (fleet, _payments, connected) = connect(&url, None, "tls-untrusted").await;
    assert!(!connected);
    let health = fleet.health();
    let error = health.error().unwrap();
    let message = error.to_string();
    println!("untrusted: {message}");
    assert!(
        error.is_tls() && error.code() == "FLEET-RUN-009",
        "{message}"
    );
    assert!(message.contains("tls_ca_file"), "{message}");
    // TLS to the plain port.
    let url = format!("rediss://127.0.0.1:{}", redis.server.port());
    let (fleet, _payments, connected) = connect(&url, Some(&redis.ca), "tls-plain-port").await;
    assert!(!connected);
    let health = fleet.health();
    let error = health.error().unwrap();
    let message = error.to_string();
    println!("plain port: {message}");
    assert!(
        error.is_tls() && error.code() == "FLEET-RUN-009",
        "{message}"
    );
    assert!(
        message.contains("does not speak TLS on this port"),
        "{message}"
    );
}

#[test]
fn a_bad_ca_file_is_an_error_at_build() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let dir = std::env::temp_dir().join(format!("cutout-fleet-tls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "just text\n").unwrap();
    let certificates = Certificates::generate("bad");
    for (url, ca, needle) in [
        (
            "rediss://127.0.0.1:6380",
            dir.join("missing.pem"),
            "cannot be read",
        ),
        (
            "rediss://127.0.0.1:6380",
            not_pem.clone(),
            "no PEM certificate",
        ),
        ("redis://127.0.0.1:6379", certificates.ca(), "not rediss://"),
    ] {
        let error = Fleet::builder(url).tls_ca_file(&ca).build().unwrap_err();
        let message = error.to_string();
        println!("{url} + {}: {message}", ca.display());
        assert_eq!(error.code(), "FLEET-CFG-005", "{message}");
        assert!(error.is_invalid(), "{message}");
        assert!(message.contains(needle), "{message}");
        assert!(message.contains(&ca.display().to_string()), "{message}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! TLS on both sides: a TLS proxy listener (ALPN h2 and http/1.1) for `curl --http2` and `h2load`, `https://` upstreams verified against their roots and SNI, a client certificate upstream, the listener's certificate reloaded from its files, the handshake bounded by `header-read-timeout`, and the TLS keys' coded errors. Certificates are made at test time (rcgen); everything is on loopback.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::routing::any;
use common::tls::{Leaf, Pki, serve_tls, toml_path, tool_or_skip};
use cutout_gateway::GatewayConfig;
use http::Version;
use rustls_pki_types::ServerName;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// What an upstream saw of each request: its HTTP version and `X-Forwarded-Proto`.
#[derive(Default)]
struct Seen(Mutex<Vec<(Version, String)>>);

impl Seen {
    fn all(&self) -> Vec<(Version, String)> {
        self.0.lock().unwrap().clone()
    }
}

/// An upstream that answers 200 `ok` to everything and records what it saw.
fn recording(seen: &Arc<Seen>) -> Router {
    let seen = Arc::clone(seen);
    Router::new().fallback(any(move |request: Request| {
        let seen = Arc::clone(&seen);
        async move {
            let proto = request
                .headers()
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            seen.0.lock().unwrap().push((request.version(), proto));
            "ok"
        }
    }))
}

/// One cluster `up` of `upstream` with `cluster_extra` keys, routed at `/`, and `gateway_extra`
/// in `[gateway]`.
fn config(gateway_extra: &str, upstream: &str, cluster_extra: &str) -> String {
    format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
access-log = false
{gateway_extra}

[[routes]]
prefix = "/"
cluster = "up"

[clusters.up]
upstreams = ["{upstream}"]
{cluster_extra}
"#
    )
}

fn listener_keys(leaf: &Leaf) -> String {
    format!(
        "tls-cert = {}\ntls-key = {}",
        toml_path(&leaf.cert),
        toml_path(&leaf.key)
    )
}

/// A TLS gateway in front of a TLS (ALPN h2) upstream, both with certificates of `pki`.
async fn tls_to_h2(pki: &Pki, seen: &Arc<Seen>, stop: &watch::Sender<bool>) -> common::Running {
    let upstream = serve_tls(recording(seen), &pki.leaf("upstream", &["127.0.0.1"]), stop).await;
    let gateway = pki.leaf("gateway", &["localhost", "127.0.0.1"]);
    let text = config(
        &listener_keys(&gateway),
        &format!("https://{upstream}"),
        &format!("tls-roots = {}", toml_path(&pki.ca)),
    );
    common::start_gateway(&text, None).await
}

async fn curl(args: &[&str]) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10", "-o", "/dev/null"])
        .args(args)
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_speaks_http2_and_http1_through_the_tls_listener_to_an_h2_upstream() {
    if !tool_or_skip("curl through TLS", "curl", "curl") {
        return;
    }
    let pki = Pki::new("curl");
    let seen = Arc::new(Seen::default());
    let (stop, _) = watch::channel(false);
    let gateway = tls_to_h2(&pki, &seen, &stop).await;
    let url = format!("https://localhost:{}/accounts/7", gateway.proxy.port());
    let ca = pki.ca.display().to_string();
    let h2 = curl(&[
        "--http2",
        "--cacert",
        &ca,
        "-w",
        "%{http_code} %{http_version}",
        &url,
    ])
    .await;
    assert_eq!(h2, "200 2", "curl --http2 got HTTP/2 and a 200");
    let h1 = curl(&[
        "--http1.1",
        "--cacert",
        &ca,
        "-w",
        "%{http_code} %{http_version}",
        &url,
    ])
    .await;
    assert_eq!(h1, "200 1.1", "curl --http1.1 got HTTP/1.1 and a 200");
    // Without the CA, curl refuses the gateway's certificate: it is verified, not just used.
    let untrusted = curl(&["--http2", "-w", "%{http_code}", &url]).await;
    assert_eq!(untrusted, "000");
    let seen = seen.all();
    assert_eq!(seen.len(), 2);
    for (version, proto) in seen {
        assert_eq!(version, Version::HTTP_2, "the upstream chose h2 by ALPN");
        assert_eq!(
            proto, "https",
            "X-Forwarded-Proto says the client came over TLS"
        );
    }
    let _ = stop.send(true);
}

/// `h2load`'s "status codes: N 2xx, …" line, as (2xx, 3xx, 4xx, 5xx).
fn status_codes(report: &str) -> Option<(u64, u64, u64, u64)> {
    let line = report.lines().find(|l| l.starts_with("status codes:"))?;
    let n: Vec<u64> = line
        .trim_start_matches("status codes:")
        .split(',')
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    Some((*n.first()?, *n.get(1)?, *n.get(2)?, *n.get(3)?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2load_a_thousand_requests_through_the_tls_listener_to_an_h2_upstream_are_all_200() {
    if !tool_or_skip("h2load through TLS", "h2load", "nghttp2-client") {
        return;
    }
    let pki = Pki::new("h2load");
    let seen = Arc::new(Seen::default());
    let (stop, _) = watch::channel(false);
    let gateway = tls_to_h2(&pki, &seen, &stop).await;
    let url = format!("https://127.0.0.1:{}/load", gateway.proxy.port());
    let out = tokio::process::Command::new("h2load")
        .args(["-n1000", "-c10", &url])
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "h2load ran: {report}");
    assert!(
        report.contains("Application protocol: h2"),
        "h2load negotiated h2: {report}"
    );
    assert_eq!(
        status_codes(&report),
        Some((1000, 0, 0, 0)),
        "all 1000 answered 200: {report}"
    );
    let seen = seen.all();
    assert_eq!(seen.len(), 1000);
    assert!(seen.iter().all(|(v, _)| *v == Version::HTTP_2));
    let breaker = gateway.gateway.clusters()["up"].breaker().snapshot();
    assert_eq!(breaker.failures, 0);
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_verified_against_its_roots_and_the_name_it_is_given() {
    let pki = Pki::new("roots");
    let other = Pki::new("other");
    let seen = Arc::new(Seen::default());
    let (stop, _) = watch::channel(false);
    // The upstream's certificate names upstream.internal only, not 127.0.0.1.
    let leaf = pki.leaf("upstream", &["upstream.internal"]);
    let upstream = serve_tls(recording(&seen), &leaf, &stop).await;
    let url = format!("https://{upstream}");
    let roots = format!("tls-roots = {}", toml_path(&pki.ca));
    let cases = [
        // (cluster keys, the status through the gateway)
        (
            format!("{roots}\ntls-server-name = \"upstream.internal\""),
            200,
        ),
        // The URL's host is checked by default: 127.0.0.1 is not in the certificate.
        (roots.clone(), 502),
        // Another CA's roots do not verify it.
        (
            format!(
                "tls-roots = {}\ntls-server-name = \"upstream.internal\"",
                toml_path(&other.ca)
            ),
            502,
        ),
        // HTTP/1.1 only over TLS works too.
        (
            format!("{roots}\ntls-server-name = \"upstream.internal\"\nprotocol = \"http1\""),
            200,
        ),
    ];
    for (keys, status) in cases {
        let gateway = common::start_gateway(&config("", &url, &keys), None).await;
        let reply = common::get(&format!("http://{}/x", gateway.proxy)).await;
        assert_eq!(reply.status, status, "with {keys}");
    }
    let seen = seen.all();
    assert_eq!(
        seen.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        [Version::HTTP_2, Version::HTTP_11],
        "auto chose h2 by ALPN, http1 stayed on HTTP/1.1; the refused handshakes reached no \
         handler"
    );
    assert!(seen.iter().all(|(_, proto)| proto == "http"));
    let _ = stop.send(true);
}

/// An upstream that asks for a client certificate of `pki`'s CA and refuses connections
/// without one.
async fn mutual_upstream(pki: &Pki, stop: &watch::Sender<bool>) -> SocketAddr {
    let leaf = pki.leaf("mutual", &["127.0.0.1"]);
    let mut roots = rustls::RootCertStore::empty();
    for cert in cutout_gateway::tls::read_certs("ca", &pki.ca).unwrap() {
        roots.add(cert).unwrap();
    }
    let provider = cutout_gateway::tls::provider();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(&provider),
    )
    .build()
    .unwrap();
    let certs = cutout_gateway::tls::read_certs("cert", &leaf.cert).unwrap();
    let key = cutout_gateway::tls::read_key("key", &leaf.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = stop.subscribe();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                accepted = listener.accept() => accepted.unwrap(),
                _ = rx.wait_for(|s| *s) => return,
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(bytes::Bytes::from_static(b"mutual")),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_to_an_upstream_that_asks_for_one() {
    let pki = Pki::new("mutual");
    let (stop, _) = watch::channel(false);
    let upstream = mutual_upstream(&pki, &stop).await;
    let client = pki.leaf("client", &["gateway.internal"]);
    let roots = format!("tls-roots = {}", toml_path(&pki.ca));
    let url = format!("https://{upstream}");
    let with = format!(
        "{roots}\ntls-client-cert = {}\ntls-client-key = {}",
        toml_path(&client.cert),
        toml_path(&client.key)
    );
    let gateway = common::start_gateway(&config("", &url, &with), None).await;
    let reply = common::get(&format!("http://{}/x", gateway.proxy)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "mutual");
    let without = common::start_gateway(&config("", &url, &roots), None).await;
    let reply = common::get(&format!("http://{}/x", without.proxy)).await;
    assert_eq!(reply.status, 502, "refused without a client certificate");
    let _ = stop.send(true);
}

/// Whether a TLS handshake with the gateway at `addr` verifies against `ca`'s roots.
async fn handshake_verifies(addr: SocketAddr, ca: &Path) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    for cert in cutout_gateway::tls::read_certs("ca", ca).unwrap() {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(cutout_gateway::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp))
        .await
        .expect("the handshake ends")
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_certificate_is_reloaded_from_its_files_and_a_bad_reload_keeps_the_old() {
    let first = Pki::new("first");
    let second = Pki::new("second");
    let (stop, _) = watch::channel(false);
    let upstream = common::serve_router(recording(&Arc::new(Seen::default())), &stop).await;
    let leaf = first.leaf("gateway", &["127.0.0.1"]);
    let text = config(&listener_keys(&leaf), &format!("http://{upstream}"), "");
    let gateway = common::start_gateway(&text, None).await;
    let tls = gateway
        .gateway
        .config()
        .tls
        .clone()
        .expect("a TLS listener");
    assert!(handshake_verifies(gateway.proxy, &first.ca).await);
    assert!(!handshake_verifies(gateway.proxy, &second.ca).await);

    // The files are replaced by the second CA's pair, then reloaded.
    let next = second.leaf("gateway", &["127.0.0.1"]);
    std::fs::copy(&next.cert, &leaf.cert).unwrap();
    std::fs::copy(&next.key, &leaf.key).unwrap();
    assert!(
        handshake_verifies(gateway.proxy, &first.ca).await,
        "nothing changes before the reload"
    );
    tls.reload().unwrap();
    assert!(handshake_verifies(gateway.proxy, &second.ca).await);
    assert!(!handshake_verifies(gateway.proxy, &first.ca).await);

    // A reload of a broken file fails with its code and keeps serving the pair it had.
    std::fs::write(&leaf.key, "not a key").unwrap();
    let error = tls.reload().unwrap_err();
    assert_eq!(error.code(), "GW-CFG-013");
    assert_eq!(error.key(), "gateway.tls-key");
    assert!(handshake_verifies(gateway.proxy, &second.ca).await);
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_that_never_comes_is_closed_after_header_read_timeout() {
    let pki = Pki::new("slow");
    let (stop, _) = watch::channel(false);
    let upstream = common::serve_router(recording(&Arc::new(Seen::default())), &stop).await;
    let leaf = pki.leaf("gateway", &["127.0.0.1"]);
    let keys = format!("{}\nheader-read-timeout = \"300ms\"", listener_keys(&leaf));
    let gateway =
        common::start_gateway(&config(&keys, &format!("http://{upstream}"), ""), None).await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(gateway.proxy).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("the gateway closes the connection");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "closed, nothing sent: {read:?}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "closed after about header-read-timeout: {took:?}"
    );
    // The listener still serves a client that does shake hands.
    assert!(handshake_verifies(gateway.proxy, &pki.ca).await);
    let _ = stop.send(true);
}

#[test]
fn tls_keys_have_coded_errors_naming_the_key() {
    let pki = Pki::new("errors");
    let leaf = pki.leaf("gateway", &["127.0.0.1"]);
    let other = pki.leaf("other", &["127.0.0.1"]);
    let garbage = pki.file(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64 !!\n",
    );
    let empty = pki.file("empty.pem", "no PEM here\n");
    let missing = pki.dir.join("missing.pem");
    let up = "http://127.0.0.1:1";
    let https = "https://127.0.0.1:1";
    let pair = |cert: &Path, key: &Path| {
        format!(
            "tls-cert = {}\ntls-key = {}",
            toml_path(cert),
            toml_path(key)
        )
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            config(&pair(&missing, &leaf.key), up, ""),
            "GW-CFG-012",
            "gateway.tls-cert",
        ),
        (
            config(&pair(&leaf.cert, &missing), up, ""),
            "GW-CFG-012",
            "gateway.tls-key",
        ),
        (
            config(&pair(&garbage, &leaf.key), up, ""),
            "GW-CFG-013",
            "gateway.tls-cert",
        ),
        (
            config(&pair(&empty, &leaf.key), up, ""),
            "GW-CFG-013",
            "gateway.tls-cert",
        ),
        (
            config(&pair(&leaf.cert, &empty), up, ""),
            "GW-CFG-013",
            "gateway.tls-key",
        ),
        // Another leaf's key is not this certificate's.
        (
            config(&pair(&leaf.cert, &other.key), up, ""),
            "GW-CFG-013",
            "gateway.tls-key",
        ),
        (
            config(&format!("tls-cert = {}", toml_path(&leaf.cert)), up, ""),
            "GW-CFG-005",
            "gateway.tls-key",
        ),
        (
            config(&format!("tls-key = {}", toml_path(&leaf.key)), up, ""),
            "GW-CFG-005",
            "gateway.tls-cert",
        ),
        (
            config(
                &format!("{}\nh2c = true", pair(&leaf.cert, &leaf.key)),
                up,
                "",
            ),
            "GW-CFG-010",
            "gateway.h2c",
        ),
        (
            config("tls-cert = \"\"", up, ""),
            "GW-CFG-004",
            "gateway.tls-cert",
        ),
        (
            config("", https, "protocol = \"h2c\""),
            "GW-CFG-010",
            "clusters.up.protocol",
        ),
        (
            config("", up, "protocol = \"h3\""),
            "GW-CFG-004",
            "clusters.up.protocol",
        ),
        (
            config("", https, &format!("tls-roots = {}", toml_path(&missing))),
            "GW-CFG-012",
            "clusters.up.tls-roots",
        ),
        (
            config("", https, &format!("tls-roots = {}", toml_path(&empty))),
            "GW-CFG-013",
            "clusters.up.tls-roots",
        ),
        (
            config("", https, "tls-server-name = \"not a name!\""),
            "GW-CFG-004",
            "clusters.up.tls-server-name",
        ),
        (
            config(
                "",
                https,
                &format!("tls-client-cert = {}", toml_path(&leaf.cert)),
            ),
            "GW-CFG-005",
            "clusters.up.tls-client-key",
        ),
        (
            config(
                "",
                https,
                &format!(
                    "tls-client-cert = {}\ntls-client-key = {}",
                    toml_path(&leaf.cert),
                    toml_path(&other.key)
                ),
            ),
            "GW-CFG-013",
            "clusters.up.tls-client-key",
        ),
        (
            config("", "ftp://127.0.0.1:1", ""),
            "GW-CFG-004",
            "clusters.up.upstreams",
        ),
        // Read even before the cluster has an https:// upstream.
        (
            config("", up, &format!("tls-roots = {}", toml_path(&garbage))),
            "GW-CFG-013",
            "clusters.up.tls-roots",
        ),
    ];
    for (text, code, key) in cases {
        let error = GatewayConfig::from_toml(&text).expect_err(&text);
        assert_eq!((error.code(), error.key()), (code, key), "{error}\n{text}");
    }
    // The good ones.
    let ok = GatewayConfig::from_toml(&config(&pair(&leaf.cert, &leaf.key), https, "")).unwrap();
    assert!(ok.tls.is_some() && !ok.h2c);
    let ok = GatewayConfig::from_toml(&config("h2c = true", up, "protocol = \"h2c\"")).unwrap();
    assert!(ok.h2c && ok.tls.is_none());
}

#[test]
fn check_accepts_an_https_upstream_and_a_tls_listener() {
    let pki = Pki::new("check");
    let leaf = pki.leaf("gateway", &["127.0.0.1"]);
    let text = config(
        &listener_keys(&leaf),
        "https://127.0.0.1:8443",
        &format!("tls-roots = {}\nprotocol = \"h2\"", toml_path(&pki.ca)),
    );
    let file = pki.file("gateway.toml", &text);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .args(["--check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid (1 clusters, 1 routes)"), "{stdout}");
    // And a bad roots file is refused by --check with its code.
    let bad = pki.file("bad.toml", &text.replace("ca.pem", "nothing.pem"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cutout-gateway"))
        .args(["--check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GW-CFG-012"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_counts_tls_connections() {
    let pki = Pki::new("max");
    let (stop, _) = watch::channel(false);
    let upstream = common::serve_router(recording(&Arc::new(Seen::default())), &stop).await;
    let leaf = pki.leaf("gateway", &["127.0.0.1"]);
    let keys = format!("{}\nmax-connections = 2", listener_keys(&leaf));
    let gateway =
        common::start_gateway(&config(&keys, &format!("http://{upstream}"), ""), None).await;
    let connector = |ca: &Path| {
        let mut roots = rustls::RootCertStore::empty();
        for cert in cutout_gateway::tls::read_certs("ca", ca).unwrap() {
            roots.add(cert).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(cutout_gateway::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    let connector = connector(&pki.ca);
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut held = Vec::new();
    for _ in 0..2 {
        let tcp = TcpStream::connect(gateway.proxy).await.unwrap();
        held.push(connector.connect(name.clone(), tcp).await.unwrap());
    }
    // The third is closed before its handshake ends (the same source holds both slots).
    let tcp = TcpStream::connect(gateway.proxy).await.unwrap();
    let third = tokio::time::timeout(Duration::from_secs(5), connector.connect(name.clone(), tcp))
        .await
        .expect("the third connection is answered");
    assert!(
        third.is_err(),
        "a third TLS connection is refused at max-connections = 2"
    );
    drop(held);
    // Once they close, a new one is served.
    let mut served = false;
    for _ in 0..50 {
        if handshake_verifies(gateway.proxy, &pki.ca).await {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "a slot freed is a slot for the next TLS client");
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_of_an_https_upstream_shake_hands_with_the_cluster_s_roots() {
    let pki = Pki::new("health");
    let other = Pki::new("health-other");
    let seen = Arc::new(Seen::default());
    let (stop, _) = watch::channel(false);
    let upstream = serve_tls(
        recording(&seen),
        &pki.leaf("upstream", &["127.0.0.1"]),
        &stop,
    )
    .await;
    let check = "[clusters.up.health-check]\npath = \"/healthz\"\ninterval = \"200ms\"\n\
                 timeout = \"200ms\"";
    let last =
        |gateway: &common::Running| gateway.gateway.clusters()["up"].shared().health[0].last();
    // Verified against the cluster's roots: the checks pass, over HTTP/2 (ALPN).
    let roots = format!("tls-roots = {}\n{check}", toml_path(&pki.ca));
    let gateway =
        common::start_gateway(&config("", &format!("https://{upstream}"), &roots), None).await;
    assert!(
        common::eventually(Duration::from_secs(5), || last(&gateway)
            .is_some_and(|r| r.passed))
        .await,
        "a check passed: {:?}",
        last(&gateway)
    );
    assert!(seen.all().iter().any(|(v, _)| *v == Version::HTTP_2));
    drop(gateway);
    // Against another CA's roots the handshake fails, and so does the check.
    let roots = format!("tls-roots = {}\n{check}", toml_path(&other.ca));
    let gateway =
        common::start_gateway(&config("", &format!("https://{upstream}"), &roots), None).await;
    assert!(
        common::eventually(Duration::from_secs(5), || last(&gateway).is_some()).await,
        "a check ran"
    );
    let result = last(&gateway).unwrap();
    assert!(
        !result.passed,
        "an unverified upstream fails its check: {result:?}"
    );
    let _ = stop.send(true);
}

/// A reload serves the certificate the files hold now from the running listener (a
/// certificate rotated under the same paths, as an operator renews one), keeps the
/// listener's certificate object so that the next reload replaces it again, and keeps TLS on
/// when the new file drops it (a bound listener cannot change its protocol: `GW-WARN-004`).
#[test]
fn a_reload_serves_the_rotated_certificate_and_keeps_tls_as_bound() {
    use cutout_gateway::{Gateway, reload};
    let pki = Pki::new("rotate");
    let first = pki.leaf("gateway", &["127.0.0.1"]);
    let text = config(&listener_keys(&first), "http://127.0.0.1:1", "");
    let file = pki.file("gw.toml", &text);
    let gateway = Gateway::new(GatewayConfig::from_toml(&text).unwrap());
    gateway.set_source(&file);
    let running = gateway.config().tls.clone().expect("a TLS listener");
    let served = |tls: &cutout_gateway::tls::ListenerTls| tls.cert().current().cert[0].to_vec();
    let before = served(&running);

    // A new pair under the same paths.
    let renewed = pki.leaf("gateway", &["127.0.0.1"]);
    assert_eq!(
        (renewed.cert.clone(), renewed.key.clone()),
        (first.cert, first.key)
    );
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert_eq!(record.rebuilt, ["listener certificate"], "{record:?}");
    let after = served(&running);
    assert_ne!(
        after, before,
        "the running listener serves the renewed certificate"
    );
    let kept = gateway.config().tls.clone().unwrap();
    assert!(
        Arc::ptr_eq(kept.cert(), running.cert()),
        "the configuration keeps the running listener's certificate"
    );

    // A file without TLS: the listener stays TLS, and the reload says why.
    std::fs::write(&file, config("", "http://127.0.0.1:1", "")).unwrap();
    let record = reload::reload(&gateway, "test");
    assert!(record.error.is_none(), "{record:?}");
    assert_eq!(record.restart_required, ["gateway.tls-cert"], "{record:?}");
    assert!(gateway.config().tls.is_some());
    assert_eq!(served(&running), after);

    // A file whose certificate is unreadable changes nothing.
    let missing = pki.dir.join("missing.pem");
    std::fs::write(
        &file,
        config(
            &format!(
                "tls-cert = {}\ntls-key = {}",
                toml_path(&missing),
                toml_path(&renewed.key)
            ),
            "http://127.0.0.1:1",
            "",
        ),
    )
    .unwrap();
    let record = reload::reload(&gateway, "test");
    assert_eq!(
        record.error.as_ref().map(|e| e.code.as_str()),
        Some("GW-CFG-012")
    );
    assert_eq!(served(&running), after);
}

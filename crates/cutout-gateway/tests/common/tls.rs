//! Certificates made at test time (rcgen): a CA and leaves it signs, written as PEM files in a
//! directory of the test's own (removed on drop); an HTTPS upstream served by the gateway's
//! own TLS listener code; and whether a system tool (`curl`, `h2load`) is there.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use cutout_gateway::server::{self, ListenerLimits, Protocols};
use cutout_gateway::tls::{ListenerTls, PemPair};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::sync::watch;

/// A directory of PEM files, removed on drop.
pub struct Pki {
    pub dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate's file.
    pub ca: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A leaf's certificate and key files.
#[derive(Debug, Clone)]
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Leaf {
    /// As the gateway's configuration names them.
    pub fn pair(&self, prefix: &str) -> PemPair {
        PemPair {
            cert: self.cert.clone(),
            key: self.key.clone(),
            cert_key: format!("{prefix}-cert"),
            key_key: format!("{prefix}-key"),
        }
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

impl Pki {
    /// A new CA named `name`, in a fresh directory.
    pub fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "cutout-gateway-tls-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(params, key),
            ca,
        }
    }

    /// A leaf for `names` (DNS names or IP addresses) signed by the CA, as `file`.crt/.key.
    pub fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, file);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: self.dir.join(format!("{file}.crt")),
            key: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }

    /// A file of the directory with `text` in it.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// `path` as a TOML string.
pub fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// Serves `router` over TLS with `leaf` (ALPN h2 and http/1.1) on loopback until `stop`.
pub async fn serve_tls(
    router: axum::Router,
    leaf: &Leaf,
    stop: &watch::Sender<bool>,
) -> SocketAddr {
    let tls = ListenerTls::load(leaf.pair("upstream.tls")).unwrap();
    serve_speaking(
        router,
        Protocols {
            tls: Some(tls),
            h2c: false,
        },
        stop,
    )
    .await
}

/// Serves `router` on loopback speaking `protocols` until `stop`.
pub async fn serve_speaking(
    router: axum::Router,
    protocols: Protocols,
    stop: &watch::Sender<bool>,
) -> SocketAddr {
    let listener = server::bind("upstream", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rx = stop.subscribe();
    let limits = ListenerLimits {
        half_close: false,
        ..ListenerLimits::default()
    };
    tokio::spawn(server::serve_protocols(
        "upstream",
        listener,
        router,
        limits,
        protocols,
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    addr
}

/// Whether `tool` runs (`tool --version`); when it does not, the test is skipped with one
/// line naming the Debian package (or fails when `CUTOUT_REQUIRE_SERVICES=1`, as CI sets).
pub fn tool_or_skip(test: &str, tool: &str, package: &str) -> bool {
    if Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
    {
        return true;
    }
    assert!(
        std::env::var("CUTOUT_REQUIRE_SERVICES").as_deref() != Ok("1"),
        "{test}: {tool} is not on the PATH and CUTOUT_REQUIRE_SERVICES=1: install it \
         (apt-get install -y {package})"
    );
    eprintln!("SKIPPED {test}: install {tool} (apt-get install -y {package}) to run it");
    false
}

//! The gateway binary under a descriptor limit (`ulimit -n`), from a configuration file written for it: for the tests of its own exhaustion.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::{Proc, dead_port, eventually};

/// A running `cutout-gateway --config` under `ulimit -n`; killed and its files removed on
/// drop.
pub struct Limited {
    /// The proxy listener's port.
    pub proxy: u16,
    /// The admin listener's port.
    pub admin: u16,
    /// Its stderr.
    pub log: PathBuf,
    dir: PathBuf,
    _process: Proc,
}

impl Limited {
    /// Starts the binary under `ulimit -n {nofile}` (shell text: `"40"`, or
    /// `"${VAR:-1024}"`) with the configuration `config(proxy, admin)`, once its proxy
    /// listener accepts; `name` names its temporary directory.
    pub async fn start(
        name: &str,
        nofile: &str,
        config: impl FnOnce(u16, u16) -> String,
    ) -> Limited {
        let (proxy, admin) = (dead_port(), dead_port());
        let dir = std::env::temp_dir().join(format!("{name}-{}-{proxy}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("gateway.toml");
        std::fs::write(&file, config(proxy, admin)).unwrap();
        let log = dir.join("gateway.log");
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {nofile} && exec \"$0\" --config \"$1\" 2> \"$2\""
            ))
            .arg(env!("CARGO_BIN_EXE_cutout-gateway"))
            .arg(&file)
            .arg(&log)
            .spawn()
            .unwrap();
        let limited = Limited {
            proxy,
            admin,
            log,
            dir,
            _process: Proc(child),
        };
        assert!(
            eventually(Duration::from_secs(10), || std::net::TcpStream::connect((
                "127.0.0.1",
                proxy
            ))
            .is_ok())
            .await,
            "the gateway starts under ulimit -n {nofile}: {}",
            limited.log_text()
        );
        limited
    }

    /// What it has written to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One GET on a fresh connection: its status and body (status 0: no answer within 30 s).
pub async fn fetch(url: http::Uri) -> (u16, String) {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let answer = async {
        let response = client.get(url).await.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(30), answer)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}

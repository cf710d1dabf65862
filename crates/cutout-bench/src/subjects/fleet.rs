//! cutout's breaker watched by a cutout-fleet `Fleet` that publishes to a real Redis (a
//! `redis-server` of its own on loopback): what fleet signals cost a call, for the harness's
//! "+ fleet signals" rows. The fleet's task reads the breaker with `snapshot()` every 250 ms
//! on a runtime thread of its own; nothing of it is on the call's path.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cutout::Breaker;
use cutout_fleet::Fleet;

use super::cutout::Cutout;
use crate::Subject;

/// A watched breaker, with what keeps the watch going.
pub struct Fleeted {
    inner: Cutout,
    _fleet: Fleet,
    _runtime: tokio::runtime::Runtime,
    _redis: Redis,
}

impl Subject for Fleeted {
    type Handle = Breaker;
    fn handle(&self) -> Breaker {
        self.inner.handle()
    }
}

/// A `redis-server` child, stopped when dropped.
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether the fleet rows can run: `redis-server` is on the PATH (Debian's package).
pub fn available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `inner`'s breaker watched by a fleet on a Redis of its own, connected before it returns.
pub fn watched(inner: Cutout) -> Fleeted {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let redis = Redis(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH for the fleet rows"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let fleet = Fleet::builder(format!("redis://127.0.0.1:{port}"))
        .pod("bench")
        .runtime(runtime.handle().clone())
        .build()
        .expect("a fleet");
    fleet.watch(&inner.handle()).expect("watched");
    assert!(
        runtime.block_on(fleet.wait_connected(Duration::from_secs(10))),
        "the fleet connected to its redis-server"
    );
    Fleeted {
        inner,
        _fleet: fleet,
        _runtime: runtime,
        _redis: redis,
    }
}

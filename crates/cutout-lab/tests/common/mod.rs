//! What the lab's integration tests share: a scratch directory, a tiny scenario, a standard
//! normal draw, and a number written with thousands separated.

#![allow(dead_code)]

use std::path::PathBuf;

/// A fresh directory for one test, removed when dropped.
pub struct Dir(pub PathBuf);

impl Dir {
    /// `cutout-lab-<test>-<pid>` in the system's temporary directory.
    pub fn new(test: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("cutout-lab-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    /// The path of `name` in it.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    /// Writes `bytes` to `name` in it, and returns its path.
    pub fn write(&self, name: &str, bytes: &(impl AsRef<[u8]> + ?Sized)) -> String {
        let path = self.path(name);
        std::fs::write(&path, bytes.as_ref()).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiny scenario: 5 pods × 10 req/s for 90 s, a 20 s outage from 20 s, two settings.
pub const TINY_SCENARIO: &str = r#"
seed = 2
duration = "90s"
[dependency]
latency-median = "20ms"
latency-p99 = "80ms"
error-rate = 0.01
capacity = 1000
[fleet]
pods = 5
rate = 10
timeout = "1s"
[[incidents]]
kind = "outage"
start = "20s"
duration = "20s"
[breakers.instances.none]
jitter = "none"
[breakers.instances.equal]
"#;

/// A standard normal draw (Box–Muller).
pub fn normal(rng: &mut fastrand::Rng) -> f64 {
    (-2.0 * (1.0 - rng.f64()).ln()).sqrt() * (2.0 * std::f64::consts::PI * rng.f64()).cos()
}

/// `x` to `decimals` places, its whole part's thousands separated by commas (`360,124`,
/// `1,086.8`), as the README's tables write them.
pub fn thousands(x: f64, decimals: usize) -> String {
    let text = format!("{:.decimals$}", x.abs());
    let (whole, fraction) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let mut out = String::from(if x < 0.0 { "-" } else { "" });
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

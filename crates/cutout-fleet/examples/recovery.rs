//! Fleet recovery: five pods in one process open on a dependency outage; when the dependency
//! is back, the first pod whose own break ends closes on its probes, publishes it, and the
//! four others end their (much longer) breaks in release slots a budget apart, instead of
//! serving them whole.
//!
//! ```text
//! redis-server --port 6379 --save "" --appendonly no &
//! cargo run -p cutout-fleet --example recovery         # or REDIS_URL=redis://host:port
//! ```
//!
//! Without a Redis the example still runs: the fleet reports itself degraded, and each pod
//! serves its own break (the four long ones stay open to the end, which is the point).

use std::time::{Duration, Instant};

use cutout::{Breaker, Jitter, Settings};
use cutout_fleet::Fleet;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .init();
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut pods = Vec::new();
    for n in 0..5 {
        // web-0's break is 2 s; the others' a minute: without fleet recovery they would
        // refuse every call for a minute after the dependency is back.
        let break_for = Duration::from_secs(if n == 0 { 2 } else { 60 });
        let settings = Settings::builder()
            .break_duration(break_for)
            .max_break_duration(break_for)
            .jitter(Jitter::None)
            .build()?;
        let fleet = Fleet::builder(url.as_str())
            .pod(format!("web-{n}"))
            .prefix("cutout-example-recovery")
            // 4 probes a second: 2 releases' worth (two probes each), one release a second.
            .recovery_budget(4)
            .build()?;
        let breaker = Breaker::new("payments", settings);
        fleet.watch(&breaker)?;
        pods.push((fleet, breaker));
    }
    if !pods[0].0.wait_connected(Duration::from_secs(1)).await {
        println!(
            "Redis at {url} not reachable ({}); each pod serves its own break",
            pods[0]
                .0
                .health()
                .last_error
                .map_or_else(|| "no answer yet".to_owned(), |e| e.to_string())
        );
    }

    let start = Instant::now();
    let (outage_from, outage_to) = (Duration::from_secs(1), Duration::from_secs(2));
    let mut ticker = tokio::time::interval(Duration::from_millis(50));
    let mut last_print = Duration::ZERO;
    while start.elapsed() < Duration::from_secs(10) {
        ticker.tick().await;
        let now = start.elapsed();
        let down = now >= outage_from && now < outage_to;
        for (_, breaker) in &pods {
            let _ = breaker.call(|| if down { Err("503") } else { Ok(()) });
        }
        if now >= last_print + Duration::from_millis(500) {
            last_print = now;
            let states: Vec<String> = pods
                .iter()
                .map(|(fleet, breaker)| format!("{}={}", fleet.pod(), breaker.state()))
                .collect();
            println!(
                "t={:>4.1}s {} | dependency {}",
                now.as_secs_f64(),
                states.join(" "),
                if down { "DOWN" } else { "up" },
            );
        }
    }
    Ok(())
}

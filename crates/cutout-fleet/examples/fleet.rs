//! Three pods in one process share their breakers' signals through Redis; a dependency
//! outage opens all three on the fleet's window though no pod sees enough calls to trip on
//! its own.
//!
//! ```text
//! redis-server --port 6379 --save "" --appendonly no &
//! cargo run -p cutout-fleet --example fleet            # or REDIS_URL=redis://host:port
//! ```
//!
//! Without a Redis the example still runs: the fleet reports itself degraded, and the
//! breakers decide on their own calls (here: they never trip, which is the point).

use std::time::{Duration, Instant};

use cutout::{Breaker, Settings, TripWindow};
use cutout_fleet::Fleet;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .init();
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());

    // Each pod sees 4 calls a second: at most 20 in its 5 s window, below the 30 its ratio
    // rule waits for. Consecutive failures and the adaptive rules are off, so only the ratio
    // (alone, or on the fleet's window) can open a breaker.
    let settings = Settings::builder()
        .window(TripWindow::Time(Duration::from_secs(5)))
        .minimum_calls(30)
        .failure_ratio(Some(0.5))
        .consecutive_failures(None)
        .adaptive(false)
        .build()?;
    let mut pods = Vec::new();
    for name in ["web-1", "web-2", "web-3"] {
        let fleet = Fleet::builder(url.as_str())
            .pod(name)
            .prefix("cutout-example")
            .build()?;
        let breaker = Breaker::builder("payments")
            .settings(settings.clone())
            // At most 2 of the 3 pods open at once.
            .open_gate(fleet.open_gate("payments", 2))
            .build();
        fleet.watch(&breaker)?;
        pods.push((fleet, breaker));
    }
    if !pods[0].0.wait_connected(Duration::from_secs(1)).await {
        println!(
            "Redis at {url} not reachable ({}); the breakers decide locally",
            pods[0]
                .0
                .health()
                .last_error
                .map_or_else(|| "no answer yet".to_owned(), |e| e.to_string())
        );
    }

    let start = Instant::now();
    let outage_at = Duration::from_secs(4);
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut last_print = Duration::ZERO;
    while start.elapsed() < Duration::from_secs(12) {
        ticker.tick().await;
        let down = start.elapsed() >= outage_at;
        for (_, breaker) in &pods {
            let _ = breaker.call(|| if down { Err("503") } else { Ok(()) });
        }
        if start.elapsed() >= last_print + Duration::from_secs(1) {
            last_print = start.elapsed();
            let states: Vec<String> = pods
                .iter()
                .map(|(fleet, breaker)| format!("{}={}", fleet.pod(), breaker.state()))
                .collect();
            let view = pods[0].0.view("payments");
            println!(
                "t={:>4.1}s {} | dependency {} | link {} | fleet window: {}",
                start.elapsed().as_secs_f64(),
                states.join(" "),
                if down { "DOWN" } else { "up" },
                pods[0].0.health().status,
                view.map_or_else(
                    || "none".to_owned(),
                    |v| format!(
                        "{} pods, {} calls, {} failures, {} open",
                        v.pods, v.calls, v.failures, v.open_pods
                    )
                ),
            );
        }
    }
    Ok(())
}

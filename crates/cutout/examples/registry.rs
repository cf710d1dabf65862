//! Breakers from an embedded TOML document, in a registry on a manual clock: loads it, prints
//! each breaker's merged settings, trips one, and shows what an unknown id and a bad file say.
//!
//! `cargo run -p cutout --features serde --example registry`

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::config::Config;
use cutout::{Registry, Settings, TripWindow};

const BREAKERS: &str = r#"
[defaults]
break-duration = "30s"
max-break-duration = "5m"
jitter = "none"

[configs.strict]
failure-ratio = "50%"
window-size = 10
minimum-calls = 10

[configs.slow-backend]
slow-call-threshold = "2s"
window-duration = "1m"

[instances.payments]
base-config = "strict"
half-open-probes = 2

[instances.reports]
base-config = "slow-backend"
shadow = true
adaptive = true                 # also trip on calls slow relative to normal latency
slow-calls-multiple = 4
failures = "off"

[instances.ledger]
consecutive-failures = 3
"#;

fn describe(settings: &Settings) -> String {
    let window = match settings.window() {
        TripWindow::Count(n) => format!("last {n} calls"),
        TripWindow::Time(d) => format!("last {d:?}"),
    };
    let off = |v: Option<String>| v.unwrap_or_else(|| "off".to_owned());
    let adaptive = if settings.adaptive() {
        format!(
            ", adaptive (slow calls {}, failures {})",
            off(settings
                .slow_calls()
                .map(|s| format!("above {}× normal", s.multiple()))),
            off(settings
                .failures()
                .map(|f| format!("above {}× normal", f.multiple()))),
        )
    } else {
        String::new()
    };
    format!(
        "window {window}, consecutive {}, ratio {}, slow above {}, break {:?} (max {:?}), \
         probes {}{}{adaptive}",
        off(settings.consecutive_failures().map(|n| n.to_string())),
        off(settings
            .failure_ratio()
            .map(|r| format!("{:.0}%", r * 100.0))),
        off(settings.slow_call_threshold().map(|d| format!("{d:?}"))),
        settings.break_duration(),
        settings.max_break_duration(),
        settings.half_open_probes(),
        if settings.shadow() { ", shadow" } else { "" },
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_toml(BREAKERS)?;
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    config.register(&registry)?;

    println!("breakers:");
    for breaker in registry.list() {
        println!(
            "  {:<9} {:<8} {}",
            breaker.id().as_str(),
            breaker.state().to_string(),
            describe(breaker.settings())
        );
    }

    let ledger = registry.get("ledger")?;
    for _ in 0..3 {
        let _ = ledger.call(|| Err::<(), _>("connection refused"));
    }
    println!("\nafter 3 failures: ledger is {}", ledger.state());
    clock.advance(Duration::from_secs(30));
    println!("30 s later: ledger is {}", ledger.state());

    println!(
        "\nregistry.get(\"ledgr\"): {}",
        registry.get("ledgr").unwrap_err()
    );
    let bad = "[instances.payments]\nfailure_ratio = \"150%\"";
    println!(
        "a file with {bad:?}:\n  {}",
        Config::from_toml(bad).unwrap_err()
    );
    Ok(())
}

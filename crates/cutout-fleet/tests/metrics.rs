//! The `metrics` feature: `cutout_fleet_connected{pod}` follows the link, failed rounds and
//! fleet trips are counted, and every series is described.

#![cfg(feature = "metrics")]

mod common;

use std::time::Duration;

use common::{RedisServer, eventually, sparse_settings};
use cutout::{Breaker, State};
use cutout_fleet::Fleet;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The value of the series `name{labels}` in the exposition (labels in any order).
fn value(handle: &PrometheusHandle, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    handle.render().lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, ""));
        let matches = series_name == name
            && labels
                .iter()
                .all(|(label, value)| rest.contains(&format!("{label}=\"{value}\"")));
        matches.then(|| value.parse().ok()).flatten()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gauge_follows_the_link_and_trips_are_counted() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let pod = [("pod", "metrics-a")];
    // Handles are registered at build and at watch, with the recorder in force then.
    let (fleet, breaker) = metrics::with_local_recorder(&recorder, || {
        let fleet = Fleet::builder(redis.url())
            .pod("metrics-a")
            .prefix("metrics")
            .max_backoff(Duration::from_millis(500))
            .build()
            .unwrap();
        let breaker = Breaker::new("orders", sparse_settings(Duration::from_secs(10), 40));
        fleet.watch(&breaker).unwrap();
        (fleet, breaker)
    });
    // Registered at build (0 until the first round, which may already have run).
    assert!(value(&handle, cutout_fleet::metrics::CONNECTED, &pod).is_some());
    assert!(fleet.wait_connected(Duration::from_secs(3)).await);
    assert!(
        eventually(Duration::from_secs(1), || value(
            &handle,
            cutout_fleet::metrics::CONNECTED,
            &pod
        ) == Some(1.0))
        .await
    );

    // A fleet trip: another pod (whose own breaker needs 80 calls) fails 40 out of 40.
    let other = Fleet::builder(redis.url())
        .pod("metrics-b")
        .prefix("metrics")
        .build()
        .unwrap();
    let elsewhere = Breaker::new("orders", sparse_settings(Duration::from_secs(10), 80));
    other.watch(&elsewhere).unwrap();
    for _ in 0..40 {
        let _ = elsewhere.call(|| Err::<(), _>("upstream 503"));
    }
    assert!(eventually(Duration::from_secs(3), || breaker.state() == State::Open).await);
    drop(other);
    let trips = [("pod", "metrics-a"), ("breaker", "orders")];
    assert_eq!(
        value(&handle, cutout_fleet::metrics::TRIPS, &trips),
        Some(1.0)
    );

    // Redis gone: 0, and failed rounds counted.
    redis.kill();
    assert!(eventually(Duration::from_secs(2), || fleet.health().is_degraded()).await);
    // Registered at build (0 until the first round, which may already have run).
    assert!(value(&handle, cutout_fleet::metrics::CONNECTED, &pod).is_some());
    let failed = value(&handle, cutout_fleet::metrics::FAILED_ROUNDS, &pod).unwrap();
    assert!(failed >= 1.0);
    assert!(failed <= fleet.health().failed_rounds as f64);

    // Back: 1 again.
    redis.restart();
    assert!(fleet.wait_connected(Duration::from_secs(3)).await);
    assert_eq!(
        value(&handle, cutout_fleet::metrics::CONNECTED, &pod),
        Some(1.0)
    );

    // Every series is described.
    let exposition = handle.render();
    for (name, kind, help) in cutout_fleet::metrics::ALL {
        assert!(
            exposition.contains(&format!("# HELP {name} {help}")),
            "{exposition}"
        );
        assert!(
            exposition.contains(&format!("# TYPE {name} {kind}")),
            "{exposition}"
        );
    }
}

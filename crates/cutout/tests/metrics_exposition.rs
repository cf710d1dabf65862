//! The `metrics` feature through a real Prometheus exporter (`metrics-exporter-prometheus`):
//! every series `cutout::metrics` documents is exposed with its HELP and TYPE lines, and the
//! gauges read what the snapshot reads.

#![cfg(feature = "metrics")]

use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Settings};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

const MS: Duration = Duration::from_millis(1);

/// The value of the sample line `name{…labels…}` with every label in `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| line.split(['{', ' ']).next() == Some(name))
        .find(|line| labels.iter().all(|label| line.contains(label)))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[test]
fn every_documented_series_is_exposed_with_help_and_type() {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(cutout::metrics::CALL_DURATION.to_owned()),
            &[0.005, 0.05, 0.5],
        )
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    let breaker = metrics::with_local_recorder(&recorder, || {
        Breaker::builder("payments")
            .settings(
                Settings::builder()
                    .consecutive_failures(Some(3))
                    .slow_call_threshold(Some(100 * MS))
                    .minimum_calls(10)
                    .jitter(Jitter::None)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .build()
    });
    // 30 timed successes of 10 ms (the adaptive latency baseline arms at 20), one slow one,
    // three failures (open), two refusals.
    for _ in 0..30 {
        let permit = breaker.try_acquire().unwrap();
        clock.advance(10 * MS);
        permit.success();
    }
    let permit = breaker.try_acquire().unwrap();
    clock.advance(300 * MS);
    permit.success();
    for _ in 0..3 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    for _ in 0..2 {
        let _ = breaker.call(|| Ok::<_, ()>(()));
    }
    breaker.refresh_metrics();
    let text = handle.render();

    for (name, kind, help) in cutout::metrics::ALL {
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "no HELP for {name} in\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "no TYPE {kind} for {name} in\n{text}"
        );
    }
    let b = "breaker=\"payments\"";
    let snapshot = breaker.snapshot();
    let of = |name: &str, labels: &[&str]| {
        let mut labels = labels.to_vec();
        labels.push(b);
        sample(&text, name, &labels)
    };
    assert_eq!(
        of("cutout_calls_total", &["outcome=\"success\""]),
        Some(31.0)
    );
    assert_eq!(
        of("cutout_calls_total", &["outcome=\"failure\""]),
        Some(3.0)
    );
    assert_eq!(of("cutout_slow_calls_total", &[]), Some(1.0));
    assert_eq!(
        of("cutout_rejections_total", &["reason=\"open\""]),
        Some(2.0)
    );
    assert_eq!(
        of(
            "cutout_transitions_total",
            &["from=\"closed\"", "to=\"open\""]
        ),
        Some(1.0)
    );
    assert_eq!(of("cutout_state", &["state=\"open\""]), Some(1.0));
    assert_eq!(of("cutout_state", &["state=\"closed\""]), Some(0.0));
    assert_eq!(
        of("cutout_failure_rate", &[]),
        snapshot.failure_rate,
        "{snapshot:?}"
    );
    assert_eq!(of("cutout_slow_rate", &[]), snapshot.slow_rate);
    let latency = snapshot.normal_latency.expect("armed").as_secs_f64();
    assert_eq!(of("cutout_normal_latency_seconds", &[]), Some(latency));
    assert_eq!(of("cutout_call_duration_seconds_count", &[]), Some(34.0));
    assert_eq!(
        of("cutout_call_duration_seconds_bucket", &["le=\"0.05\""]),
        Some(33.0),
        "30 of 10 ms and 3 failures at 0 ms under 50 ms"
    );
}

/// The state gauge follows what `state()` reports: a break that ran out with no call since
/// reads half-open after `refresh_metrics`, as `state()` does.
#[test]
fn the_state_gauge_follows_state_after_a_refresh() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    let breaker = metrics::with_local_recorder(&recorder, || {
        Breaker::builder("search")
            .settings(
                Settings::builder()
                    .consecutive_failures(Some(1))
                    .break_duration(Duration::from_secs(5))
                    .jitter(Jitter::None)
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .build()
    });
    let _ = breaker.call(|| Err::<(), _>(()));
    let open = |text: &str, state: &str| {
        sample(
            text,
            "cutout_state",
            &["breaker=\"search\"", &format!("state=\"{state}\"")],
        )
    };
    assert_eq!(open(&handle.render(), "open"), Some(1.0));
    clock.advance(Duration::from_secs(5));
    assert_eq!(breaker.state(), cutout::State::HalfOpen);
    breaker.refresh_metrics();
    let text = handle.render();
    assert_eq!(open(&text, "half_open"), Some(1.0));
    assert_eq!(open(&text, "open"), Some(0.0));
}

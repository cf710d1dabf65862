//! Observability through the `metrics` facade: counters, a state gauge, nothing recorded on
//! the healthy path. The `tracing` events are in `observe_tracing.rs`: a test binary of their
//! own, since `tracing` caches per call site whether anyone listens, and the breakers of tests
//! running beside a scoped subscriber could make that cache skip its events.

#![cfg(feature = "metrics")]

mod observe_common;

use std::time::Duration;

use cutout::clock::ManualClock;
use observe_common::ramping;

const SEC: Duration = Duration::from_secs(1);

#[cfg(feature = "metrics")]
mod metrics_tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

    type Labels = Vec<(String, String)>;
    type Row = (String, Labels, f64);

    /// Reads the recorder. Its snapshots reset what they read, so counters are summed over
    /// every read so far; gauges are as last set (every transition sets all six).
    struct Reader {
        snapshotter: Snapshotter,
        counters: std::collections::BTreeMap<(String, Labels), f64>,
    }

    impl Reader {
        fn read(&mut self) -> Vec<Row> {
            let mut rows = Vec::new();
            for (name, labels, value, is_counter) in raw(&self.snapshotter) {
                if is_counter {
                    *self.counters.entry((name, labels)).or_default() += value;
                } else {
                    rows.push((name, labels, value));
                }
            }
            rows.extend(
                self.counters
                    .iter()
                    .map(|((n, l), v)| (n.clone(), l.clone(), *v)),
            );
            rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            rows
        }
    }

    /// (name, labels without `breaker`, value, is a counter) of breaker `payments`.
    fn raw(snapshotter: &Snapshotter) -> Vec<(String, Labels, f64, bool)> {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                key.key()
                    .labels()
                    .any(|l| l.key() == "breaker" && l.value() == "payments")
            })
            .map(|(key, _, _, value)| {
                let labels = key
                    .key()
                    .labels()
                    .filter(|l| l.key() != "breaker")
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                let (value, is_counter) = match value {
                    DebugValue::Counter(n) => (n as f64, true),
                    DebugValue::Gauge(g) => (g.into_inner(), false),
                    DebugValue::Histogram(_) => (f64::NAN, false),
                };
                (key.key().name().to_owned(), labels, value, is_counter)
            })
            .collect()
    }

    fn state_gauge(rows: &[Row]) -> Vec<(String, f64)> {
        rows.iter()
            .filter(|(name, ..)| name == "cutout_state")
            .map(|(_, labels, v)| (labels[0].1.clone(), *v))
            .collect()
    }

    fn only_one(gauge: &[(String, f64)]) -> String {
        let ones: Vec<_> = gauge.iter().filter(|(_, v)| *v == 1.0).collect();
        assert_eq!(ones.len(), 1, "{gauge:?}");
        assert_eq!(gauge.len(), 6, "every state has a gauge: {gauge:?}");
        assert!(gauge.iter().all(|(_, v)| *v == 0.0 || *v == 1.0));
        ones[0].0.clone()
    }

    fn counter(rows: &[Row], name: &str, label: (&str, &str)) -> f64 {
        rows.iter()
            .filter(|(n, labels, _)| {
                n == name && labels.iter().any(|(k, v)| k == label.0 && v == label.1)
            })
            .map(|(.., v)| *v)
            .sum()
    }

    #[test]
    fn counters_and_the_state_gauge_follow_a_full_outage_and_ramp() {
        let recorder = DebuggingRecorder::new();
        let mut reader = Reader {
            snapshotter: recorder.snapshotter(),
            counters: Default::default(),
        };
        metrics::with_local_recorder(&recorder, || {
            let clock = ManualClock::new();
            let b = ramping(&clock);
            assert_eq!(only_one(&state_gauge(&reader.read())), "closed");

            b.call(|| Ok::<_, ()>(())).unwrap();
            let _ = b.call(|| Err::<(), _>(()));
            let _ = b.call(|| Err::<(), _>(()));
            let rows = reader.read();
            assert_eq!(only_one(&state_gauge(&rows)), "open");
            assert_eq!(
                counter(&rows, "cutout_calls_total", ("outcome", "success")),
                1.0
            );
            assert_eq!(
                counter(&rows, "cutout_calls_total", ("outcome", "failure")),
                2.0
            );

            assert!(b.call(|| Ok::<_, ()>(())).is_err());
            assert!(b.call(|| Ok::<_, ()>(())).is_err());
            let rows = reader.read();
            assert_eq!(
                counter(&rows, "cutout_rejections_total", ("reason", "open")),
                2.0
            );

            clock.elapse_break(&b);
            let probe = b.try_acquire().unwrap(); // half-open
            assert_eq!(only_one(&state_gauge(&reader.read())), "half_open");
            probe.success(); // the ramp starts
            assert_eq!(only_one(&state_gauge(&reader.read())), "recovering");

            clock.advance(3 * SEC); // past the 2 s ramp
            for _ in 0..50 {
                let _ = b.call(|| Ok::<_, ()>(()));
            }
            let rows = reader.read();
            assert_eq!(only_one(&state_gauge(&rows)), "closed");
            let transitions: Vec<_> = rows
                .iter()
                .filter(|(name, ..)| name == "cutout_transitions_total")
                .map(|(_, labels, v)| (labels[0].1.clone(), labels[1].1.clone(), *v))
                .collect();
            assert_eq!(
                transitions,
                // Every possible transition is registered up front (no allocation when one
                // happens); the ones this outage went through count 1.
                [
                    ("closed".into(), "open".into(), 1.0),
                    ("half_open".into(), "closed".into(), 1.0),
                    ("half_open".into(), "open".into(), 0.0),
                    ("open".into(), "half_open".into(), 1.0),
                    ("recovering".into(), "open".into(), 0.0),
                ]
            );
        });
    }

    #[test]
    fn isolate_and_reset_move_the_gauge_without_events() {
        let recorder = DebuggingRecorder::new();
        let mut reader = Reader {
            snapshotter: recorder.snapshotter(),
            counters: Default::default(),
        };
        metrics::with_local_recorder(&recorder, || {
            let b = ramping(&ManualClock::new());
            b.isolate();
            assert_eq!(only_one(&state_gauge(&reader.read())), "isolated");
            assert!(b.call(|| Ok::<_, ()>(())).is_err());
            b.reset();
            let rows = reader.read();
            assert_eq!(only_one(&state_gauge(&rows)), "closed");
            assert_eq!(
                counter(&rows, "cutout_rejections_total", ("reason", "isolated")),
                1.0
            );
            assert_eq!(
                counter(&rows, "cutout_transitions_total", ("from", "closed")),
                0.0
            );
        });
    }
}

//! Observability through `tracing`: one event per transition, with the breaker's id, the
//! states, the reason and the break. A test binary of its own: `tracing` caches per call site
//! whether any subscriber listens, and breakers of other tests emitting on other threads while
//! the scoped subscriber below is set could leave that cache saying no (it failed about one run
//! in five beside the metrics tests).

#![cfg(feature = "tracing")]

mod observe_common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use cutout::clock::ManualClock;
use observe_common::ramping;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn one_event_per_transition_with_id_states_reason_and_break() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = ramping(&clock);
        let _ = b.call(|| Err::<(), _>(()));
        let _ = b.call(|| Err::<(), _>(()));
        clock.elapse_break(&b);
        b.call(|| Ok::<_, ()>(())).unwrap();
    });
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("circuit breaker opened"),
        "{}",
        lines[0]
    );
    for needle in [
        "breaker=payments",
        "from=\"closed\"",
        "to=\"open\"",
        "reason=\"consecutive_failures\"",
        "break_ms=10000",
    ] {
        assert!(lines[0].contains(needle), "{needle} in {}", lines[0]);
    }
    assert!(lines[1].contains("from=\"open\"") && lines[1].contains("to=\"half_open\""));
    assert!(lines[2].contains("from=\"half_open\"") && lines[2].contains("to=\"closed\""));
}

/// Manual actions raise no transition event: each leaves one info-level `tracing` event with
/// the breaker, the action's stable name, whether it took effect, the state after it and the
/// breaker's clock. (No call runs here, so no transition's call site is reached from this
/// test: see the module docs.)
#[test]
fn one_event_per_manual_action_with_id_action_effect_and_state() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = ramping(&clock);
        clock.advance(std::time::Duration::from_millis(1_500));
        assert!(b.open_for(std::time::Duration::from_secs(30)));
        b.isolate();
        assert!(!b.open_until(std::time::Duration::from_secs(60)));
        b.disable();
        b.reset();
    });
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let expected = [
        ("open_for", true, "open"),
        ("isolate", true, "isolated"),
        ("open_until", false, "isolated"),
        ("disable", true, "disabled"),
        ("reset", true, "closed"),
    ];
    for (line, (action, applied, state)) in lines.iter().zip(expected) {
        assert!(
            line.contains("INFO") && line.contains("circuit breaker manual action"),
            "{line}"
        );
        for needle in [
            "breaker=payments".to_owned(),
            format!("action=\"{action}\""),
            format!("applied={applied}"),
            format!("state=\"{state}\""),
            "at_ms=1500".to_owned(),
        ] {
            assert!(line.contains(&needle), "{needle} in {line}");
        }
    }
}

//! Runs user code the breaker calls (observers, listeners, open gates, reset hooks, break
//! schedules, the metrics recorder) so that nothing it panics with leaves: neither its panic nor a panic of
//! dropping that panic's payload.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// `f()`, or `None` if it panicked. The payload is dropped inside a second `catch_unwind`; a
/// payload whose drop panics again is leaked rather than let out.
pub(crate) fn contained<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(again);
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload that panics when dropped.
    struct Bomb;

    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the payload's drop panicked");
        }
    }

    #[test]
    fn a_panic_and_a_panicking_payload_both_stay_inside() {
        assert_eq!(contained(|| 7), Some(7));
        assert_eq!(contained(|| -> u8 { panic!("plain") }), None);
        assert_eq!(contained(|| -> u8 { std::panic::panic_any(Bomb) }), None);
    }
}

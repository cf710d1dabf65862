//! The subjects: cutout and each peer configured per case, and the floor operations.

pub mod cutout;
pub mod declarative;
pub mod failsafe;
pub mod fleet;
pub mod floor;
pub mod lock_floor;
pub mod recloser;
pub mod tower;

/// Long enough that an opened breaker stays open for the whole run.
pub const LONG_BREAK: std::time::Duration = std::time::Duration::from_secs(3600);

/// Successful calls made after construction, before any measurement: fills every count
/// window (size 100) ten times over.
pub const WARM_UP_CALLS: u64 = 1_000;

/// Makes `n` calls on `subject` with outcome `fail`, through one handle.
pub(crate) fn feed<S: crate::Subject>(subject: &S, n: u64, fail: bool) -> crate::Outcome {
    use crate::Call;
    let mut handle = subject.handle();
    let mut last = crate::Outcome::Ok;
    for _ in 0..n {
        last = handle.call(fail);
    }
    last
}

/// Trips `subject` with failing calls (at most `limit`) and checks that it now refuses.
pub(crate) fn trip<S: crate::Subject>(subject: &S, limit: u64) {
    for _ in 0..limit {
        if feed(subject, 1, true) == crate::Outcome::Rejected {
            return;
        }
    }
    assert_eq!(
        feed(subject, 1, false),
        crate::Outcome::Rejected,
        "the breaker did not open after {limit} failures"
    );
}

//! Hostile review (branch `rev`): loom models of the kernel-clock refusal's two reads.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=/work/wt/rev-loom \
//!     cargo test -p cutout --release --test rev_loom
//! ```

#![cfg(loom)]

use std::time::Duration;

use cutout::{Breaker, Jitter, RejectReason, Settings};
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 1_000;
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// A long manual break (60 s) is cut to nothing by `open_for(ZERO)` on another thread while a
/// call is refused on the kernel's coarse clock. The refusal loads the converted end
/// (`until_kernel`) and then `until`, both `Relaxed`, and the lock stores `until` before
/// `until_kernel`: the call can read the OLD converted end (which proves "before 60 s") with
/// the NEW `until` (the break already over), and refuses with a retry-after of zero. Either
/// the call came before the cut (then 60 s are left, and the retry-after must say so) or
/// after it (then the break has ended and it must not be refused): a zero retry-after on an
/// open refusal is neither.
#[test]
fn a_refusal_racing_a_shortened_break_never_says_retry_after_zero() {
    model(|| {
        let breaker = Breaker::builder("loom")
            .settings(
                Settings::builder()
                    .jitter(Jitter::None)
                    .consecutive_failures(Some(1))
                    .max_wait_in_half_open(None)
                    .build()
                    .expect("valid settings"),
            )
            .build();
        assert!(breaker.open_for(Duration::from_secs(60)));
        let cut = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                breaker.open_for(Duration::ZERO);
            })
        };
        match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(rejected) => {
                assert_eq!(rejected.reason(), RejectReason::Open);
                let retry = rejected.retry_after().expect("an open breaker says when");
                assert!(
                    retry > Duration::ZERO,
                    "refused while open with nothing left of the break: {rejected:?}"
                );
            }
        }
        cut.join().unwrap();
    });
}

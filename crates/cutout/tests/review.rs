//! Review tests (in progress).
use cutout::{Breaker, Settings};
#[test]
fn smoke() {
    let b = Breaker::new("x", Settings::default());
    b.call(|| Ok::<(), ()>(())).unwrap();
}

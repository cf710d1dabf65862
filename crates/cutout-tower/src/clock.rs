//! [`TokioClock`]: a breaker clock that follows tokio's time, paused or not (cutout's own,
//! from its `tokio` feature, re-exported so that tower users find it here).

pub use cutout::clock::TokioClock;

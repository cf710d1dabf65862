//! Synchronisation primitives, swapped for loom's under `cfg(loom)` so the models explore them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard, RwLock};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// One turn of a bounded wait for another thread: a pause hint, or under loom a yield so the
/// model lets the other thread run.
#[inline]
pub(crate) fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// How many turns of [`spin`] a bounded wait takes before giving up (few under loom, where
/// each is a branch of the model).
pub(crate) const SPINS: u32 = if cfg!(loom) { 2 } else { 128 };

/// Locks a mutex, recovering the data if a previous holder panicked.
///
/// The breaker never runs user code while holding its lock, so a poisoned lock can only come from
/// a bug in the breaker itself; the state it guards is kept consistent by every transition
/// before anything that could panic, so recovering is safe and keeps the breaker serving.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

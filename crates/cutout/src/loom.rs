//! Synchronisation primitives, swapped for loom's under `cfg(loom)` so the models explore them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a previous holder panicked.
///
/// The user code the breaker runs while holding its lock (an open gate, a break schedule, a
/// reset hook) runs contained, its panics caught (`contained.rs`), so a poisoned lock can
/// only come from a bug in the breaker itself; the state it guards is kept consistent by every transition before anything that
/// could panic, so recovering is safe and keeps the breaker serving.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

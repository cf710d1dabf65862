//! Zero heap allocations on every call path: success, failure, refusal, probes, transitions.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Breaker, Jitter, Settings, TripWindow};

/// Counts the allocations made by the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the only addition is a
// const-initialised thread-local counter, which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn breaker(id: &str, settings: Settings, clock: &ManualClock) -> Breaker {
    let breaker = Breaker::builder(id)
        .settings(settings)
        .clock(clock.clone())
        .build();
    breaker.subscribe(|event| {
        std::hint::black_box(event);
    });
    breaker
}

#[test]
fn the_counter_sees_allocations() {
    assert_eq!(
        allocations_during(|| drop(std::hint::black_box(Box::new(1)))),
        1
    );
}

#[test]
fn successes_failures_and_refusals_allocate_nothing() {
    let clock = ManualClock::new();
    let count_window = Settings::builder()
        .window(TripWindow::Count(100))
        .consecutive_failures(Some(1_000))
        .build()
        .unwrap();
    let timed = Settings::builder()
        .slow_call_threshold(Some(Duration::from_millis(5)))
        .consecutive_failures(Some(1_000))
        .build()
        .unwrap();
    let long_id = "https://a-rather-long-host-name.internal.example:8443/payments";
    for (id, settings) in [
        ("quiet", count_window),
        ("default", Settings::default()),
        ("timed", timed),
        (long_id, Settings::default()),
    ] {
        let b = breaker(id, settings, &clock);
        // Fill the windows first (a success on a full clean count window writes nothing).
        for _ in 0..200 {
            b.call(|| Ok::<_, ()>(())).unwrap();
        }
        let n = allocations_during(|| {
            for i in 0..1_000 {
                let _ = b.call(|| if i % 10 == 0 { Err(()) } else { Ok(()) });
            }
        });
        assert_eq!(n, 0, "{id}: successes and failures");
        b.isolate();
        let n = allocations_during(|| {
            for _ in 0..1_000 {
                assert!(b.call(|| Ok::<_, ()>(())).is_err());
            }
        });
        assert_eq!(n, 0, "{id}: refusals");
    }
}

#[test]
fn transitions_probes_and_snapshots_allocate_nothing() {
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(2))
        .jitter(Jitter::Equal)
        .build()
        .unwrap();
    let b = breaker("dep", settings, &clock);
    let n = allocations_during(|| {
        for _ in 0..100 {
            let _ = b.call(|| Err::<(), _>(())); // closed -> open
            let _ = b.call(|| Err::<(), _>(()));
            assert!(b.call(|| Ok::<_, ()>(())).is_err()); // refused while open
            clock.elapse_break(&b);
            drop(b.try_acquire().unwrap()); // dropped probe
            b.call(|| Ok::<_, ()>(())).unwrap(); // half-open, probes succeed
            b.call(|| Ok::<_, ()>(())).unwrap(); // -> closed
            std::hint::black_box(b.snapshot());
            std::hint::black_box(b.state());
        }
    });
    assert_eq!(n, 0);
}

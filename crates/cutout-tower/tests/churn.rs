//! Host churn chosen by an attacker against a bounded map (issue 29, acceptance 3): 20,000
//! distinct hosts through `max_keys(1,000)` while one real host fails. The real host still
//! trips, and the heap stays flat, measured by a counting allocator of this test binary.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use cutout::clock::ManualClock;
use cutout::{Jitter, Settings, State};
use cutout_tower::HttpClassifier;
use cutout_tower::keyed::{KeyedBreakers, KeyedLayer};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt};

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only adds
// and subtracts the sizes it is given.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as it is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[tokio::test(flavor = "current_thread")]
async fn attacker_host_churn_cannot_evict_a_failing_host_and_the_heap_stays_flat() {
    const ATTACKERS: usize = 20_000;
    const EVERY: usize = 2_000;
    let clock = ManualClock::new();
    let settings = Settings::builder()
        .consecutive_failures(Some(3))
        .jitter(Jitter::None)
        .adaptive(false)
        .build()
        .unwrap();
    let hosts = KeyedBreakers::builder(settings)
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let upstream = tower::service_fn(|request: Request<()>| async move {
        let failing = request.uri().host() == Some("real.example");
        let mut response = Response::new(());
        if failing {
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        }
        Ok::<_, std::io::Error>(response)
    });
    let mut service = KeyedLayer::per_host(hosts.clone())
        .classifier(HttpClassifier::new())
        .layer(upstream);

    let mut real_calls = 0;
    let mut refused = 0;
    let mut live_at_full = 0;
    let mut samples = [0isize; ATTACKERS / 2_000];
    for n in 0..ATTACKERS {
        clock.advance(Duration::from_millis(1));
        let url = if n % EVERY == EVERY / 2 {
            real_calls += 1;
            "http://real.example/".to_owned()
        } else {
            format!("http://h{n}.attacker.example/")
        };
        let request = Request::get(url).body(()).unwrap();
        match service.ready().await.unwrap().call(request).await {
            Err(error) if error.is_rejected() => refused += 1,
            _ => {}
        }
        if n == 12_000 {
            live_at_full = LIVE.load(Ordering::Relaxed);
        }
        if n % 2_000 == 0 {
            // No printing inside the loop: captured output is heap too.
            samples[n / 2_000] = LIVE.load(Ordering::Relaxed);
        }
    }
    let live_at_end = LIVE.load(Ordering::Relaxed);
    println!("live heap every 2,000 hosts: {samples:?} B");
    let stats = hosts.stats();
    println!(
        "\nreal calls {real_calls}, refused {refused}, keys {}, evicted {}, unguarded {}, \
         live heap after 12,000 hosts {live_at_full} B, after {ATTACKERS} {live_at_end} B",
        stats.keys, stats.evicted, stats.over_capacity
    );
    let real = cutout_tower::keyed::HostKey::new("http", "real.example", None);
    assert_eq!(
        hosts.get(&real).map(|b| b.state()),
        Some(State::Open),
        "the real host's failures, 2,000 hosts apart, still trip it"
    );
    assert!(refused >= 1, "its calls after the trip are refused");
    assert!(stats.keys <= 1_000, "{stats:?}");
    assert_eq!(stats.over_capacity, 0);
    // Flat: the map is full from the first thousand hosts on. Its table may grow once more on
    // the way (measured: 2,048 to 4,096 buckets near the 10,000th host, as the hash map's
    // deleted slots use up its room and it resizes rather than rehash at over half full); with
    // another random hash seed that resize can come after the 12,000th host (+133,120 bytes,
    // seen once in CI). A table never shrinks, and rehashes in place once it has twice the room
    // its live keys need, so one late resize (256 KiB) is allowed beyond the 16 KiB of noise. A
    // leak of 35 bytes or more per host (8,000 hosts after the 12,000th) still fails.
    assert!(
        live_at_end <= live_at_full + (16 + 256) * 1024,
        "heap grew from {live_at_full} to {live_at_end} bytes"
    );
}

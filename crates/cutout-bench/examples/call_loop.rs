//! One subject's calls in a plain loop on one thread, for a profiler or `valgrind --tool=callgrind`
//! (whose instruction counts do not move with the machine's phase): `call_loop CASE N [THREADS]`,
//! where CASE is `count`, `default` or `open` and one call in ten fails (none for `open`), and
//! THREADS (default 1) threads each make N calls on the one breaker at once.

use cutout::{Breaker, Jitter, Settings, TripWindow};
use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "count".into());
    let n: u64 = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000_000);
    let threads: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let fail_every = match case.as_str() {
        "count-healthy" | "default-healthy" | "open" => 0,
        _ => 10,
    };
    let breaker = match case.as_str() {
        "count" | "count-healthy" => Breaker::builder("loop").settings(
            Settings::builder()
                .consecutive_failures(Some(5))
                .failure_ratio(Some(0.5))
                .adaptive(false)
                .window(TripWindow::Count(100))
                .build()
                .expect("valid settings"),
        ),
        "default" | "default-healthy" => Breaker::builder("loop"),
        "open" => Breaker::builder("loop").settings(
            Settings::builder()
                .consecutive_failures(Some(5))
                .break_duration(Duration::from_secs(3600))
                .max_break_duration(Duration::from_secs(3600))
                .jitter(Jitter::None)
                .build()
                .expect("valid settings"),
        ),
        other => {
            eprintln!("unknown case {other}: count, count-healthy, default, default-healthy, open");
            std::process::exit(2);
        }
    }
    .build();
    if case == "open" {
        for _ in 0..5 {
            let _ = breaker.call(|| Err::<(), ()>(()));
        }
    } else {
        for _ in 0..10_000 {
            let _ = breaker.call(|| Ok::<(), ()>(()));
        }
    }
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (breaker, barrier, case) = (&breaker, &barrier, &case);
            scope.spawn(move || {
                barrier.wait();
                let (mut ok, mut failed, mut refused) = (0u64, 0u64, 0u64);
                let start = std::time::Instant::now();
                for i in 0..n {
                    let fail = fail_every != 0 && i % fail_every == fail_every - 1;
                    match breaker.call(|| if fail { Err(()) } else { Ok(()) }) {
                        Ok(()) => ok += 1,
                        Err(e) if e.is_rejected() => refused += 1,
                        Err(_) => failed += 1,
                    }
                }
                let took = start.elapsed();
                println!(
                    "{case} (thread {thread}): {n} calls, {ok} ok, {failed} failed, {refused} refused, {:.2} ns a call",
                    took.as_nanos() as f64 / n as f64
                );
            });
        }
    });
}

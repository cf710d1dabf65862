//! The threaded harness: every case on 1 and 2 threads hammering one shared breaker, repeated,
//! with the median and range of ns/call per thread and each peer's ratio to cutout.
//!
//! `cargo run --release -p cutout-bench --bin harness -- [--repeats N] [--case ID]... [--scale F]`
//!
//! Per case: the subjects are built (and warmed up or tripped) once; an untimed pass counts heap
//! allocations per call on 1 thread; then each repeat measures every row on 1 thread, then every
//! row on 2 threads, back to back, so that a ratio compares runs taken moments apart. A row's
//! figure for one repeat is the mean over its threads of (thread's loop time / calls).

use std::time::Instant;

use cutout_bench::cases::{self, Case, CoarseClocks, Expect};
use cutout_bench::stats::{Spread, fig, spread};
use cutout_bench::{Runner, ThreadRun, alloc};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

const THREADS: [usize; 2] = [1, 2];
/// Calls in the untimed allocation-counting pass.
const ALLOC_PASS_CALLS: u64 = 10_000;

struct Options {
    repeats: usize,
    cases: Vec<String>,
    scale: f64,
}

fn options() -> Options {
    let mut options = Options {
        repeats: 15,
        cases: Vec::new(),
        scale: 1.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&arg));
        match arg.as_str() {
            "--repeats" => options.repeats = value().parse().unwrap_or_else(|_| usage("--repeats")),
            "--case" => options.cases.push(value()),
            "--scale" => options.scale = value().parse().unwrap_or_else(|_| usage("--scale")),
            _ => usage(&arg),
        }
    }
    options
}

fn usage(arg: &str) -> ! {
    eprintln!(
        "bad argument {arg}\nusage: harness [--repeats N] [--case floor|healthy|default|fail10|open]... [--scale F]"
    );
    std::process::exit(2)
}

fn main() {
    let options = options();
    let started = Instant::now();
    println!("# cutout-bench harness\n");
    println!("- cpu: {}", cpu_model());
    println!(
        "- cores available: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("- load average at start: {}", load_average());
    println!(
        "- repeats: {}, iteration scale: {}\n",
        options.repeats, options.scale
    );
    println!(
        "| case | subject | allocs/call | 1 thread: ns/call median (min–max) | ×cutout | 2 threads: ns/call per thread median (min–max) | ×cutout |"
    );
    println!("|---|---|---|---|---|---|---|");
    for case in cases::all() {
        if options.cases.is_empty() || options.cases.iter().any(|id| id == case.id) {
            run_case(&case, &options);
        }
    }
    println!();
    println!("- load average at end: {}", load_average());
    println!("- wall time: {:.1} s", started.elapsed().as_secs_f64());
}

/// Results of one row: per thread count, one figure per repeat.
struct Series {
    ns: Vec<Vec<f64>>,
}

fn run_case(case: &Case, options: &Options) {
    let runners: Vec<Box<dyn Runner>> = case.rows.iter().map(|row| (row.make)()).collect();
    let iters: Vec<u64> = case
        .rows
        .iter()
        .map(|row| ((row.iters as f64 * options.scale) as u64).max(1_000))
        .collect();

    let allocs: Vec<f64> = case
        .rows
        .iter()
        .zip(&runners)
        .map(|(row, runner)| {
            let _clock = row.coarse.then(CoarseClocks::start);
            alloc::set_counting(true);
            let runs = runner.run(1, ALLOC_PASS_CALLS);
            alloc::set_counting(false);
            check(case, row.name, &runs);
            runs[0].allocs as f64 / runs[0].iters as f64
        })
        .collect();

    let mut series: Vec<Series> = case
        .rows
        .iter()
        .map(|_| Series {
            ns: vec![Vec::new(); THREADS.len()],
        })
        .collect();
    for _ in 0..options.repeats {
        for (t, &threads) in THREADS.iter().enumerate() {
            for (i, (row, runner)) in case.rows.iter().zip(&runners).enumerate() {
                let _clock = row.coarse.then(CoarseClocks::start);
                let runs = runner.run(threads, iters[i]);
                check(case, row.name, &runs);
                let mean = runs.iter().map(ThreadRun::ns_per_call).sum::<f64>() / runs.len() as f64;
                series[i].ns[t].push(mean);
            }
        }
    }

    for (i, row) in case.rows.iter().enumerate() {
        let mut cells = Vec::new();
        for t in 0..THREADS.len() {
            let ns = Spread::of(&series[i].ns[t]).expect("at least one repeat");
            cells.push(spread(ns));
            cells.push(if case.expect == Expect::Nothing || i == 0 {
                String::new()
            } else {
                let ratios: Vec<f64> = series[i].ns[t]
                    .iter()
                    .zip(&series[0].ns[t])
                    .map(|(row, reference)| row / reference)
                    .collect();
                let ratio = Spread::of(&ratios).expect("at least one repeat");
                format!("{}×", fig(ratio.median))
            });
        }
        println!(
            "| {} | {} | {} | {} |",
            case.id,
            row.name,
            fig(allocs[i]),
            cells.join(" | ")
        );
    }
}

fn check(case: &Case, row: &str, runs: &[ThreadRun]) {
    let rejected: u64 = runs.iter().map(|run| run.rejected).sum();
    let calls: u64 = runs.iter().map(|run| run.iters).sum();
    match case.expect {
        Expect::Nothing => {}
        Expect::NoRejections => assert_eq!(
            rejected, 0,
            "{}: {row} refused {rejected} of {calls} calls while it must stay closed",
            case.id
        ),
        Expect::AllRejected => assert_eq!(
            rejected,
            calls,
            "{}: {row} let {} of {calls} calls through while it must be open",
            case.id,
            calls - rejected
        ),
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

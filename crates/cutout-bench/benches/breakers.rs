//! Criterion benches: every harness case on one thread, cutout beside the peers.
//!
//! `cargo bench -p cutout-bench` (about 2 minutes). The threaded figures, the ratios and the
//! table in BENCHMARKS.md come from the harness binary; these give criterion's confidence
//! intervals for the single-thread cells of the same subjects.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use cutout_bench::cases::{self, CoarseClocks};

fn breakers(c: &mut Criterion) {
    for case in cases::all() {
        let mut group = c.benchmark_group(case.id);
        group
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(30);
        for row in &case.rows {
            let runner = (row.make)();
            let _clock = row.coarse.then(CoarseClocks::start);
            group.bench_function(row.name, |b| {
                b.iter_custom(|iters| runner.run(1, iters)[0].elapsed)
            });
        }
        group.finish();
    }
}

criterion_group!(benches, breakers);
criterion_main!(benches);

//! The one way outcomes are counted off the lock: a line per core of what its threads' calls
//! did since the last locked operation, folded into the machine by the next one.
//!
//! A line holds five things, one cache line in all:
//! - `successes`: successes counted under a fast word (see `word.rs`), tagged with the
//!   generation they belong to (bits 32–63), with how many of them were timed (bits 16–31)
//!   and how many in all (bits 0–15). An add that finds another generation's tag is refused,
//!   so a success never counts in a generation it was not admitted in.
//! - `turn`: a pseudo-random sequence of the line's own, for choosing which calls are timed:
//!   each one with a chance of one in [`SAMPLE`].
//! - `started` / `finished`: tracked calls (see `machine/inflight.rs`), for calls hung in flight.
//! - `refused`: refusals counted by the line's own thread (see [`Cells::refuse`]), a total that
//!   only grows; the machine keeps the total at which the current state episode began.
//! - `samples`: up to [`LANES`] latency samples (a histogram bucket each) waiting for the lock.
//!
//! # The invariant
//! Every success counted here reaches every consumer that needs it: every locked operation
//! that a call causes starts by [folding](Cells::fold) the lines into the window, the
//! consecutive-failure count and the failure baseline, and then evaluates the trip rules
//! (`Machine::absorb`); its latency samples reach the latency baseline at the same fold when it
//! is due, or at once when the lanes are full. A success counted just after a fold (its thread
//! read the word before the operation and added after its fold) is folded by the next locked
//! operation, and evaluated there: its trip comes at the next call that takes the lock, at
//! worst. Reads and controls fold nothing into the trip decision (see `breaker.rs`).
//!
//! # Orderings
//! Every access is `Relaxed`. A success's tag check and add are one compare-exchange on one
//! word, and a fold one swap per line, so each add either precedes the swap of its line (and is
//! taken by it) or follows it (and is taken by the next fold): none is lost or taken twice.
//! The breaker's lock, held by every fold, orders the machine; the counts carry no other data.
//! The same holds for each sample lane (a compare-exchange to fill it, a swap to drain its word)
//! and for `started` / `finished` (monotonic sums read under the lock: a start or finish that
//! lands after a read is seen by the next one, and a late finish only makes the hung estimate
//! lower). `turn` is a plain load and store: two threads sharing a line may draw the same
//! number, which only shifts which call is sampled.
//!
//! `refused` is a plain load and store too, but of one writer: only the thread whose slot is
//! the line's index writes it (slots are unique among live threads, and a slot given back
//! happens before it is handed out again, see `slot.rs`), so no count is lost. Threads without
//! a line of their own (more threads than lines, or a thread already exiting) add to a shared
//! counter instead, with a read-modify-write. Readers sum them under the breaker's lock; a
//! refusal that lands after a read is seen by the next one.

use crate::front::slot::thread_slot;
use crate::loom::{AtomicU64, Ordering};

/// One call in this many is timed on a sampled breaker above low traffic.
pub(crate) const SAMPLE: u64 = 8;

/// Latency samples a line holds: four 16-bit lanes in each of three words.
pub(crate) const LANES: usize = 12;

/// A core's line. Aligned to 64 bytes so that two cores never write one line; not to 128 (as
/// `CachePadded` is on x86_64, for the adjacent-line prefetcher): a breaker may pay 64 bytes
/// per core and no more.
#[repr(align(64))]
struct Line {
    successes: AtomicU64,
    turn: AtomicU64,
    started: AtomicU64,
    finished: AtomicU64,
    refused: AtomicU64,
    samples: [AtomicU64; LANES / 4],
}

impl Line {
    fn new(generation: u32) -> Line {
        Line {
            successes: AtomicU64::new(join(generation, 0)),
            // Any state but 0 (xorshift's fixed point). Every line starts at the same one, so
            // which calls a thread times depends on its own calls only, never on the line its
            // slot gave it (that depends on which other threads hold slots): one thread's run
            // of a seeded simulation times the same calls whatever else the process runs. Two
            // threads on two lines draw the same sequence, each over its own calls.
            turn: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            samples: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The most successes a line holds between folds (its thread then takes the lock).
const MOST: u32 = u16::MAX as u32;
const TIMED_ONE: u64 = 1 << 16;

fn join(generation: u32, count: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(count)
}

fn split(bits: u64) -> (u32, u32) {
    ((bits >> 32) as u32, bits as u32)
}

/// A line's count as (successes, timed ones).
fn counts(count: u32) -> (u64, u64) {
    (u64::from(count & 0xffff), u64::from(count >> 16))
}

/// How many lines a breaker gets: one a core, at least 2 and at most 64.
pub(crate) fn line_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .clamp(2, 64)
    })
}

/// The per-core lines of one breaker.
pub(crate) struct Cells {
    lines: Box<[Line]>,
}

impl Cells {
    pub(crate) fn new(generation: u32) -> Cells {
        Cells::with_lines(line_count(), generation)
    }

    fn with_lines(lines: usize, generation: u32) -> Cells {
        Cells {
            lines: (0..lines.max(1)).map(|_| Line::new(generation)).collect(),
        }
    }

    /// The calling thread's line: threads hold the lowest free slots (see `slot.rs`), so as
    /// many live threads as lines use distinct ones.
    #[inline]
    fn line(&self) -> &Line {
        let slot = thread_slot();
        let lines = self.lines.len();
        let index = if slot < lines { slot } else { slot % lines };
        &self.lines[index]
    }

    /// Counts a success of `generation` (`timed` or not) on this thread's line, unless the line
    /// holds another generation's successes (a locked operation moved it on) or `limit` of
    /// them already (at most 65,535): `false` then, and the caller takes the lock.
    #[inline]
    pub(crate) fn add_success(&self, generation: u32, limit: u32, timed: bool) -> bool {
        let cell = &self.line().successes;
        let add = 1 + if timed { TIMED_ONE } else { 0 };
        let limit = u64::from(limit.min(MOST));
        let mut current = cell.load(Ordering::Relaxed);
        loop {
            let (tag, count) = split(current);
            if tag != generation || counts(count).0 >= limit {
                return false;
            }
            match cell.compare_exchange_weak(
                current,
                current + add,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// Takes every line's successes of `generation` (the machine's), as (successes, timed
    /// ones), and tags every line with it; successes of any other generation are dropped.
    /// Under the breaker's lock.
    pub(crate) fn fold(&self, generation: u32) -> (u64, u64) {
        self.sum(generation, |line| {
            line.successes.swap(join(generation, 0), Ordering::Relaxed)
        })
    }

    /// The successes of `generation` waiting to be folded, changing nothing (for reads).
    pub(crate) fn pending(&self, generation: u32) -> (u64, u64) {
        self.sum(generation, |line| line.successes.load(Ordering::Relaxed))
    }

    fn sum(&self, generation: u32, read: impl Fn(&Line) -> u64) -> (u64, u64) {
        self.lines
            .iter()
            .fold((0, 0), |(all, timed), line| match split(read(line)) {
                (tag, count) if tag == generation => {
                    let (n, t) = counts(count);
                    (all + n, timed + t)
                }
                _ => (all, timed),
            })
    }

    /// Called as a call is admitted on a sampled breaker: whether it is timed, with a chance
    /// of one in [`SAMPLE`]. A draw (xorshift), not a count: a caller whose calls come in a
    /// cycle (eight kinds of request in turn, one of them slow) would otherwise have the same
    /// kind sampled every time, and the estimate of slow calls would be all or nothing.
    #[inline]
    pub(crate) fn turn(&self) -> bool {
        let turn = &self.line().turn;
        let mut x = turn.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        turn.store(x, Ordering::Relaxed);
        x >> (64 - SAMPLE.trailing_zeros()) == 0
    }

    /// Counts a tracked call as started.
    #[inline]
    pub(crate) fn track(&self) {
        self.line().started.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a tracked call as finished (recorded or dropped).
    #[inline]
    pub(crate) fn untrack(&self) {
        self.line().finished.fetch_add(1, Ordering::Relaxed);
    }

    /// The tracked calls started and finished, over every line.
    pub(crate) fn tracked(&self) -> (u64, u64) {
        self.lines.iter().fold((0, 0), |(s, f), line| {
            (
                s + line.started.load(Ordering::Relaxed),
                f + line.finished.load(Ordering::Relaxed),
            )
        })
    }

    /// Counts a refusal: on this thread's own line if it has one (a load and a store, no
    /// read-modify-write: the line has no other writer of `refused`), else on `elsewhere`, the
    /// breaker's counter for threads without a line.
    #[inline]
    pub(crate) fn refuse(&self, elsewhere: &AtomicU64) {
        // Under loom every modelled thread runs on one OS thread, so they would share a slot:
        // the shared counter is the path a model can check.
        #[cfg(not(loom))]
        if let Some(line) = self.lines.get(thread_slot()) {
            let refused = line.refused.load(Ordering::Relaxed);
            line.refused.store(refused + 1, Ordering::Relaxed);
            return;
        }
        elsewhere.fetch_add(1, Ordering::Relaxed);
    }

    /// Every refusal counted so far, on the lines and `elsewhere`.
    pub(crate) fn refused(&self, elsewhere: &AtomicU64) -> u64 {
        self.lines
            .iter()
            .map(|line| line.refused.load(Ordering::Relaxed))
            .fold(elsewhere.load(Ordering::Relaxed), u64::wrapping_add)
    }

    /// Leaves a latency sample (histogram `bucket`) for the next merge; `false` when this
    /// thread's lanes are all taken (the caller then takes the lock and merges).
    #[inline]
    pub(crate) fn add_sample(&self, bucket: usize) -> bool {
        let Ok(code) = u16::try_from(bucket + 1) else {
            return false;
        };
        for word in &self.line().samples {
            let mut current = word.load(Ordering::Relaxed);
            while let Some(lane) = (0..4).find(|lane| (current >> (16 * lane)) & 0xffff == 0) {
                let next = current | (u64::from(code) << (16 * lane));
                match word.compare_exchange_weak(
                    current,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => current = now,
                }
            }
        }
        false
    }

    /// Takes every waiting sample out, calling `f` with each one's bucket. Under the lock.
    pub(crate) fn drain_samples(&self, mut f: impl FnMut(usize)) {
        for word in self.lines.iter().flat_map(|line| &line.samples) {
            if word.load(Ordering::Relaxed) != 0 {
                lanes(word.swap(0, Ordering::Relaxed), &mut f);
            }
        }
    }

    /// Whether any line's lanes are all taken.
    pub(crate) fn samples_full(&self) -> bool {
        self.lines.iter().any(|line| {
            line.samples.iter().all(|word| {
                let bits = word.load(Ordering::Relaxed);
                (0..4).all(|lane| (bits >> (16 * lane)) & 0xffff != 0)
            })
        })
    }
}

fn lanes(bits: u64, f: &mut impl FnMut(usize)) {
    for lane in 0..4 {
        let code = (bits >> (16 * lane)) & 0xffff;
        if code != 0 {
            f(code as usize - 1);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Line>(), 64);
        assert_eq!(std::mem::align_of::<Line>(), 64);
    }

    #[test]
    fn a_fold_takes_each_success_of_its_generation_once() {
        let cells = Cells::with_lines(2, 3);
        for _ in 0..5 {
            assert!(cells.add_success(3, u32::MAX, false));
        }
        assert_eq!(cells.pending(3), (5, 0));
        assert_eq!(cells.pending(3), (5, 0), "a read takes nothing");
        assert_eq!(cells.fold(3), (5, 0));
        assert_eq!(cells.fold(3), (0, 0), "nothing new");
        assert!(cells.add_success(3, 2, true));
        assert!(cells.add_success(3, 2, true));
        assert!(!cells.add_success(3, 2, true), "the line holds its limit");
        assert_eq!(cells.fold(3), (2, 2), "both timed");
    }

    #[test]
    fn a_success_of_an_older_generation_never_lands_after_a_transition() {
        let cells = Cells::with_lines(2, 0);
        assert!(cells.add_success(0, u32::MAX, false));
        // A transition's operation folds (taking generation 0) and retags every line.
        assert_eq!(cells.fold(0), (1, 0));
        assert_eq!(cells.fold(1), (0, 0));
        // A success that read generation 0 before it lands afterwards, however many locked
        // operations have passed: refused (there is no epoch to wrap).
        for _ in 0..1_000 {
            cells.fold(1);
        }
        assert!(!cells.add_success(0, u32::MAX, false));
        assert!(cells.add_success(1, u32::MAX, false));
        assert_eq!(cells.fold(1), (1, 0));
    }

    #[test]
    fn samples_wait_in_lanes_until_drained() {
        let cells = Cells::with_lines(1, 0);
        for bucket in 0..LANES {
            assert!(cells.add_sample(bucket * 3));
        }
        assert!(cells.samples_full());
        assert!(!cells.add_sample(7), "every lane is taken");
        let mut drained = Vec::new();
        cells.drain_samples(|b| drained.push(b));
        drained.sort_unstable();
        assert_eq!(drained, (0..LANES).map(|b| b * 3).collect::<Vec<_>>());
        assert!(!cells.samples_full());
        let mut again = 0;
        cells.drain_samples(|_| again += 1);
        assert_eq!(again, 0);
    }

    #[test]
    fn about_one_call_in_eight_is_timed_and_not_in_a_cycle() {
        let cells = Cells::with_lines(2, 0);
        let draws: Vec<bool> = (0..80_000).map(|_| cells.turn()).collect();
        let timed = draws.iter().filter(|&&t| t).count();
        assert!((9_000..11_000).contains(&timed), "{timed} of 80,000");
        // Calls in a cycle of eight: each position is timed about as often as the others.
        for position in 0..8 {
            let here = draws
                .iter()
                .skip(position)
                .step_by(8)
                .filter(|&&t| t)
                .count();
            assert!(
                (1_000..1_500).contains(&here),
                "position {position}: {here}"
            );
        }
    }

    #[test]
    fn refusals_from_more_threads_than_lines_are_all_counted() {
        // Eight threads on 2 lines (at most two own a line and store, the rest add to the
        // shared counter) and on 64 (most own one). A lost store shows as a short total.
        for lines in [2, 64] {
            let cells = std::sync::Arc::new(Cells::with_lines(lines, 0));
            let elsewhere = std::sync::Arc::new(AtomicU64::new(0));
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let cells = std::sync::Arc::clone(&cells);
                    let elsewhere = std::sync::Arc::clone(&elsewhere);
                    let barrier = std::sync::Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        for _ in 0..20_000 {
                            cells.refuse(&elsewhere);
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(cells.refused(&elsewhere), 160_000, "{lines} lines");
        }
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let cells = std::sync::Arc::new(Cells::with_lines(2, 0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let cells = std::sync::Arc::clone(&cells);
                std::thread::spawn(move || {
                    (0..10_000)
                        .filter(|i| cells.add_success(0, u32::MAX, i % 2 == 0))
                        .count()
                })
            })
            .collect();
        let added: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            added, 40_000,
            "threads sharing a line retry, so none is lost"
        );
        assert_eq!(cells.fold(0), (40_000, 20_000));
    }
}

//! The one way outcomes are counted off the lock: a line per core of what its threads' calls
//! did since the last locked operation, folded into the machine by the next one.
//!
//! A line holds five things, one cache line in all:
//! - `successes`: successes counted under a fast word (see `word.rs`), tagged with the
//!   generation they belong to (bits 32–63), with how many of them were timed (bits 16–31)
//!   and how many in all (bits 0–15). An add that finds another generation's tag is refused,
//!   so a success never counts in a generation it was not admitted in.
//! - `turn`: a pseudo-random sequence of the line's own, for choosing which calls are timed:
//!   each one with a chance of one in [`SAMPLE`](sampling::SAMPLE) (what a drawn call weighs,
//!   and the bound of the estimate, are `machine/sampling.rs`'s).
//! - `started` / `finished`: tracked calls (see `machine/inflight.rs`), for calls hung in flight,
//!   those timed for certain in the low half of the word and those timed by a draw in the high
//!   half.
//! - `refused` / `refused_shared`: refusals (see [`Cells::refuse`]), by the line's own thread
//!   and by threads that share the line; totals that only grow, of which the machine keeps
//!   the sum at which the current state episode began.
//! - `samples`: up to [`LANES`] latency samples (a histogram bucket each, one byte) waiting
//!   for the lock.
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
//! lower; each half is its own kind's total, wrapping, so a difference of two readings is
//! each kind's, see `sampling::tracked`). `turn` is a plain load and store: two threads sharing
//! a line may draw the same number, which only shifts which call is sampled.
//!
//! `refused` is a plain load and store too, but of one writer: only the thread whose slot is
//! the line's index writes it (slots are unique among live threads, and a slot given back
//! happens before it is handed out again, see `slot.rs`), so no count is lost. Threads without
//! a line of their own (more threads than lines, or a thread already exiting) add to the
//! `refused_shared` of the line they share, with a read-modify-write, as their successes do.
//! Readers sum both under the breaker's lock; a refusal that lands after a read is seen by the
//! next one.

use crate::front::slot::thread_slot;
use crate::loom::{AtomicU64, Ordering};
use crate::machine::sampling;

/// Latency samples a line holds: eight one-byte lanes in each of two words (a histogram
/// bucket plus one fits a byte: there are fewer than 255 buckets).
pub(crate) const LANES: usize = 16;
const PER_WORD: usize = 8;
const _: () = assert!(crate::machine::baseline::histogram::BUCKETS < 255);

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
    refused_shared: AtomicU64,
    samples: [AtomicU64; LANES / PER_WORD],
}

impl Line {
    /// A line whose draws start at `start` (not 0, see [`first_draw`]).
    fn new(generation: u32, start: u64) -> Line {
        Line {
            successes: AtomicU64::new(join(generation, 0)),
            // Every line of a breaker starts at the same state, so which calls a thread times
            // depends on its own calls only, never on the line its slot gave it (that depends
            // on which other threads hold slots): one thread's run of a seeded simulation
            // times the same calls whatever else the process runs. Two threads on two lines
            // draw the same sequence, each over its own calls; two breakers with two seeds
            // draw two sequences.
            turn: AtomicU64::new(start),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            refused_shared: AtomicU64::new(0),
            samples: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The state a breaker seeded with `seed` starts its lines' draws at: the seed mixed
/// (splitmix64's finaliser, so that seeds 1 and 2 start far apart), never 0 (xorshift's fixed
/// point).
fn first_draw(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    if z == 0 { 0x9E37_79B9_7F4A_7C15 } else { z }
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

/// How many lines a breaker gets: one a core (at least 2, at most 64) and one more, so that a
/// runtime's workers (one a core) and the thread that drives them (a `block_on` caller, a
/// benchmark's main thread that warmed the breaker up) each have a line of their own when
/// they are the process's first threads to count. Slots are handed out lowest first, so
/// threads beyond those share lines (see [`Cells::refuse`]).
pub(crate) fn line_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .clamp(2, 64)
            + 1
    })
}

/// The per-core lines of one breaker.
pub(crate) struct Cells {
    lines: Box<[Line]>,
}

impl Cells {
    /// The lines of a breaker seeded with `seed` (its jitter's seed: one seed, one breaker's
    /// draws).
    pub(crate) fn new(generation: u32, seed: u64) -> Cells {
        Cells::seeded(line_count(), generation, seed)
    }

    #[cfg(test)]
    fn with_lines(lines: usize, generation: u32) -> Cells {
        Cells::seeded(lines, generation, 0)
    }

    fn seeded(lines: usize, generation: u32, seed: u64) -> Cells {
        let start = first_draw(seed);
        Cells {
            lines: (0..lines.max(1))
                .map(|_| Line::new(generation, start))
                .collect(),
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
    /// of one in [`SAMPLE`](sampling::SAMPLE). A draw (xorshift), not a count: a caller whose
    /// calls come in a cycle (eight kinds of request in turn, one of them slow) would
    /// otherwise have the same kind sampled every time, and the estimate of slow calls would be
    /// all or nothing.
    #[inline]
    pub(crate) fn turn(&self) -> bool {
        sampling::drawn(self.draw())
    }

    /// The next number of this line's sequence (xorshift, uniform over non-zero `u64`s): the
    /// sampling turn's, and adaptive throttling's draw.
    #[inline]
    pub(crate) fn draw(&self) -> u64 {
        let turn = &self.line().turn;
        let mut x = turn.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        turn.store(x, Ordering::Relaxed);
        x
    }

    /// Counts a tracked call as started, in the half of its kind (`drawn`: timed by a draw).
    #[inline]
    pub(crate) fn track(&self, drawn: bool) {
        self.line()
            .started
            .fetch_add(sampling::tracked_unit(drawn), Ordering::Relaxed);
    }

    /// Counts a tracked call as finished (recorded or dropped), in the half of its kind.
    #[inline]
    pub(crate) fn untrack(&self, drawn: bool) {
        self.line()
            .finished
            .fetch_add(sampling::tracked_unit(drawn), Ordering::Relaxed);
    }

    /// The tracked calls started and finished, over every line (each kind in its half,
    /// wrapping).
    pub(crate) fn tracked(&self) -> (u64, u64) {
        self.lines.iter().fold((0, 0), |(s, f): (u64, u64), line| {
            (
                s.wrapping_add(line.started.load(Ordering::Relaxed)),
                f.wrapping_add(line.finished.load(Ordering::Relaxed)),
            )
        })
    }

    /// Counts a refusal: on this thread's own line if it has one (a load and a store, no
    /// read-modify-write: the line has no other writer of `refused`), else with an add to the
    /// `refused_shared` of the line it shares.
    #[inline]
    pub(crate) fn refuse(&self) {
        let slot = thread_slot();
        // Under loom every modelled thread runs on one OS thread, so they would share a slot:
        // the shared count is the path a model can check.
        #[cfg(not(loom))]
        if let Some(line) = self.lines.get(slot) {
            let refused = line.refused.load(Ordering::Relaxed);
            line.refused.store(refused + 1, Ordering::Relaxed);
            return;
        }
        self.lines[slot % self.lines.len()]
            .refused_shared
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Every refusal counted so far.
    pub(crate) fn refused(&self) -> u64 {
        self.lines.iter().fold(0, |total: u64, line| {
            total
                .wrapping_add(line.refused.load(Ordering::Relaxed))
                .wrapping_add(line.refused_shared.load(Ordering::Relaxed))
        })
    }

    /// Leaves a latency sample (histogram `bucket`) for the next merge; `false` when this
    /// thread's lanes are all taken (the caller then takes the lock and merges).
    #[inline]
    pub(crate) fn add_sample(&self, bucket: usize) -> bool {
        let Ok(code) = u8::try_from(bucket + 1) else {
            return false;
        };
        for word in &self.line().samples {
            let mut current = word.load(Ordering::Relaxed);
            while let Some(lane) = free_lane(current) {
                let next = current | (u64::from(code) << (8 * lane));
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
            line.samples
                .iter()
                .all(|word| free_lane(word.load(Ordering::Relaxed)).is_none())
        })
    }
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The lowest empty (zero) byte lane of a samples word, if any: the zero-byte test
/// `(x − 0x01…01) & !x & 0x80…80`, whose lowest flag is exact (a borrow only reaches the bytes
/// above the first zero one).
fn free_lane(bits: u64) -> Option<usize> {
    let zeros = bits.wrapping_sub(LOW_BITS) & !bits & HIGH_BITS;
    (zeros != 0).then(|| zeros.trailing_zeros() as usize / 8)
}

fn lanes(bits: u64, f: &mut impl FnMut(usize)) {
    for lane in 0..PER_WORD {
        let code = (bits >> (8 * lane)) & 0xff;
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
        // lines they share) and on 64 (most own one). A lost store shows as a short total.
        for lines in [2, 64] {
            let cells = std::sync::Arc::new(Cells::with_lines(lines, 0));
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let cells = std::sync::Arc::clone(&cells);
                    let barrier = std::sync::Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        for _ in 0..20_000 {
                            cells.refuse();
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(cells.refused(), 160_000, "{lines} lines");
        }
    }

    #[test]
    fn the_free_lane_is_the_lowest_empty_byte() {
        assert_eq!(free_lane(0), Some(0));
        assert_eq!(free_lane(0x01), Some(1));
        assert_eq!(free_lane(0x0100), Some(0));
        assert_eq!(free_lane(0x01_01_01), Some(3));
        // A byte of 0x01 above an empty one (where a borrow could mislead a naive test).
        assert_eq!(free_lane(0x0101_0101_0100_0101), Some(2));
        assert_eq!(free_lane(u64::MAX), None);
        assert_eq!(free_lane(0x6901_0203_0405_0607), None);
        assert_eq!(free_lane(0x0001_0203_0405_0607), Some(7));
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

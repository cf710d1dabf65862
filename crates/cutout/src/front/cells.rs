//! The one way outcomes are counted off the lock: a line per core of what its threads' calls
//! did since the last locked operation, folded into the machine by the next one.
//!
//! A line holds seven things, one cache line in all:
//! - `successes`: successes counted under a fast word (see `word.rs`) by the line's own thread
//!   (the one whose slot is the line's index), tagged with the generation they belong to
//!   (bits 32–63), with how many of them were timed (bits 16–31) and how many in all (bits
//!   0–15), each half wrapping on its own. A success of a later generation restarts the count
//!   at it, one of an earlier generation is refused, so a success never counts in a generation
//!   it was not admitted in.
//! - `successes_shared`: the successes of threads without a line of their own (more threads
//!   than lines, or a thread already exiting), on the line they share, tagged the same way
//!   and added with a compare-exchange.
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
//! Every access is `Relaxed`.
//!
//! A line's `successes` has one writer, its owner, which counts with a plain load and store:
//! its load reads its own last store (program order; a slot given back happens before it is
//! handed out again, see `slot.rs`, so a new owner reads the last one's), so no count is lost.
//! A fold never writes a line: it loads each line's word, sums the counts of the lines tagged
//! with the machine's generation, and takes the sums' growth since the last fold ([`Taken`],
//! kept under the breaker's lock). A load reads some store of the owner's, and a later fold
//! (ordered after this one by the lock) reads that store or a later one (read-read
//! coherence), so each store is taken by exactly one fold, the first to read it or a later
//! store. The sums are modulo 2^16, and are exact because no line grows by more than
//! [`PERIOD`] between two folds (its owner takes the lock at each multiple of its period) and
//! 65 lines of `PERIOD` stay below 2^16. A count restarted at a generation was not tagged with
//! it at the last fold (no call of a generation is admitted before the operation that made it
//! publishes it, and that operation [retags](Cells::retag) what was taken), so its whole count
//! is new; the old generation's unfolded count it overwrote could no longer be folded anyway.
//!
//! A shared word's tag check and add are one compare-exchange, and a fold one swap (where the
//! word holds any, so that a line nobody shares is only read), so each add either precedes
//! the swap (and is taken by it) or follows it (and is taken by the next fold): none is lost
//! or taken twice. The breaker's lock, held by every fold, orders the
//! machine; the counts carry no other data. The same holds for each sample lane (a
//! compare-exchange to fill it, a swap to drain its word) and for `started` / `finished`
//! (monotonic sums read under the lock: a start or finish that lands after a read is seen by
//! the next one, and a late finish only makes the hung estimate lower; each half is its own
//! kind's total, wrapping, so a difference of two readings is each kind's, see
//! `sampling::tracked`). `turn` is a plain load and store: two threads sharing a line may draw
//! the same number, which only shifts which call is sampled.
//!
//! `refused` is a plain load and store too, of one writer, as `successes` is. Threads without
//! a line of their own (more threads than lines, or a thread already exiting) add to the
//! `refused_shared` of the line they share, with a read-modify-write. Readers sum both under
//! the breaker's lock; a refusal that lands after a read is seen by the next one.

#[cfg(loom)]
use crate::front::slot::NO_SLOT;
use crate::front::slot::thread_slot;
use crate::loom::{AtomicU64, Ordering};
use crate::machine::sampling;

/// Latency samples a line holds: eight one-byte lanes in one word (a histogram bucket plus
/// one fits a byte: there are fewer than 255 buckets).
pub(crate) const LANES: usize = 8;
const PER_WORD: usize = 8;
const _: () = assert!(crate::machine::baseline::histogram::BUCKETS < 255);

/// A core's line. Aligned to 64 bytes so that two cores never write one line; not to 128 (as
/// `CachePadded` is on x86_64, for the adjacent-line prefetcher): a breaker may pay 64 bytes
/// per core and no more.
#[repr(align(64))]
struct Line {
    successes: AtomicU64,
    successes_shared: AtomicU64,
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
            successes_shared: AtomicU64::new(join(generation, 0)),
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

/// What [`Cells::add_success`] did with a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// Counted; the next locked operation folds it.
    Counted,
    /// Counted on the thread's own line, which now holds a period's worth: the caller takes
    /// the lock, whose fold takes it.
    FoldDue,
    /// Not counted: the caller takes the lock, which records it (or drops it as stale).
    Refused,
}

/// The most successes a line counts between folds: 2^16 (the counts' modulus) over the most
/// lines there are (65), rounded down to a power of two, so that the sums of all lines grow by
/// less than 2^16 between two folds.
pub(crate) const PERIOD: u32 = 512;
const _: () = assert!(PERIOD as u64 * 65 < 1 << 16);

/// What the fold has taken of the lines' own counts: the sums, modulo 2^16, of the counts of
/// the lines tagged with the machine's generation, as of the last fold (kept under the lock,
/// off the lines, so that a fold writes no line). Between two folds each line grows by at
/// most [`PERIOD`] (then its thread asks for a fold), so the sums grow by less than 2^16 and
/// their difference is exact. A line whose count restarts at a generation was untagged (or
/// tagged with an older generation) at the last fold, so its whole count is new.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    all: u16,
    timed: u16,
}

impl Taken {
    /// (successes, timed ones) counted between `earlier` and these sums.
    fn since(self, earlier: Taken) -> (u64, u64) {
        (
            u64::from(self.all.wrapping_sub(earlier.all)),
            u64::from(self.timed.wrapping_sub(earlier.timed)),
        )
    }
}

/// The largest power of two at most `limit` and [`PERIOD`] (at least 1), less one.
pub(crate) fn period_mask(limit: u32) -> u32 {
    let limit = limit.clamp(1, PERIOD);
    (1 << (31 - limit.leading_zeros())) - 1
}

/// A success on the thread's own line: a plain load and store, the line's count restarted at a
/// later generation and refused for an older one. `mask` is [`period_mask`]'s.
#[inline(always)]
fn own_success(cell: &AtomicU64, generation: u32, mask: u32, timed: bool) -> Added {
    let (tag, count) = split(cell.load(Ordering::Relaxed));
    let one = 1 | if timed { TIMED_ONE as u32 } else { 0 };
    let next = if tag == generation {
        // Each half wraps on its own (a carry out of the low half would count a timed one).
        let all = (count as u16).wrapping_add(1);
        let timed_count = ((count >> 16) as u16).wrapping_add(u16::from(timed));
        u32::from(all) | (u32::from(timed_count) << 16)
    } else if generation.wrapping_sub(tag) < 1 << 31 {
        one
    } else {
        return Added::Refused;
    };
    cell.store(join(generation, next), Ordering::Relaxed);
    if next & 0xffff & mask == 0 {
        Added::FoldDue
    } else {
        Added::Counted
    }
}

/// A success of a thread without a line of its own, on the shared word of the line it
/// shares, whose tag the fold sets: refused for another generation, or when it holds `limit` (at most 65,535).
#[inline]
fn shared_success(cell: &AtomicU64, generation: u32, limit: u32, timed: bool) -> Added {
    let add = 1 + if timed { TIMED_ONE } else { 0 };
    let limit = u64::from(limit.min(MOST));
    let mut current = cell.load(Ordering::Relaxed);
    loop {
        let (tag, count) = split(current);
        if tag != generation || counts(count).0 >= limit {
            return Added::Refused;
        }
        match cell.compare_exchange_weak(
            current,
            current + add,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Added::Counted,
            Err(now) => current = now,
        }
    }
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

    /// Counts a success of `generation` (`timed` or not): on this thread's own line with a
    /// plain load and store (it is the line's one writer of `successes`), or, for a thread
    /// without a line, with a compare-exchange on the breaker's `shared` word.
    ///
    /// [`Added::Refused`] when the count holds a later generation (the success is stale: the
    /// lock drops it) or, on the shared word, `mask + 1` successes already. On its own line a
    /// thread's count restarts at a later generation, and every `mask + 1` successes (a power
    /// of two, at most [`PERIOD`], see [`period_mask`]) it asks for a fold
    /// ([`Added::FoldDue`]), so that no line holds more than that unfolded and the sums the
    /// fold reads never wrap (see [`Taken`]).
    #[inline]
    pub(crate) fn add_success(&self, generation: u32, mask: u32, timed: bool) -> Added {
        // Under loom every modelled thread runs on one OS thread, so they would share a slot:
        // the shared word is the path a model checks for them all, as for refusals.
        #[cfg(not(loom))]
        let slot = thread_slot();
        #[cfg(loom)]
        let slot = NO_SLOT;
        self.add_success_at(slot, generation, mask, timed)
    }

    /// [`Cells::add_success`] for the thread holding `slot`.
    #[inline(always)]
    fn add_success_at(&self, slot: usize, generation: u32, mask: u32, timed: bool) -> Added {
        match self.lines.get(slot) {
            Some(line) => own_success(&line.successes, generation, mask, timed),
            None => shared_success(
                &self.lines[slot % self.lines.len()].successes_shared,
                generation,
                mask + 1,
                timed,
            ),
        }
    }

    /// Takes the successes of `generation` (the machine's) counted since the last fold, as
    /// (successes, timed ones): what the lines' own sums grew by since `taken`, and the shared
    /// words' counts (swapped out where there are any, so that a fold writes no line nobody
    /// shares). Successes of any other generation are dropped. Under the breaker's lock.
    pub(crate) fn fold(&self, generation: u32, taken: &mut Taken) -> (u64, u64) {
        let now = self.sums(generation);
        let (mut all, mut timed) = now.since(*taken);
        *taken = now;
        for line in self.lines.iter() {
            if line.successes_shared.load(Ordering::Relaxed) == join(generation, 0) {
                continue;
            }
            let (tag, count) = split(
                line.successes_shared
                    .swap(join(generation, 0), Ordering::Relaxed),
            );
            if tag == generation {
                let (n, t) = counts(count);
                all += n;
                timed += t;
            }
        }
        (all, timed)
    }

    /// The generation changed to `generation` under the lock: what the fold has taken is the
    /// lines' sums of the new generation (none yet: no call was admitted in it), and the
    /// shared words are tagged with it, dropping what they held.
    pub(crate) fn retag(&self, generation: u32, taken: &mut Taken) {
        *taken = self.sums(generation);
        for line in self.lines.iter() {
            line.successes_shared
                .store(join(generation, 0), Ordering::Relaxed);
        }
    }

    /// The successes of `generation` waiting to be folded, changing nothing (for reads).
    pub(crate) fn pending(&self, generation: u32, taken: Taken) -> (u64, u64) {
        let (all, timed) = self.sums(generation).since(taken);
        self.lines.iter().fold((all, timed), |(all, timed), line| {
            match split(line.successes_shared.load(Ordering::Relaxed)) {
                (tag, count) if tag == generation => {
                    let (n, t) = counts(count);
                    (all + n, timed + t)
                }
                _ => (all, timed),
            }
        })
    }

    /// The sums of the lines' own counts tagged with `generation`, each modulo 2^16.
    fn sums(&self, generation: u32) -> Taken {
        self.lines.iter().fold(Taken::default(), |sums, line| {
            match split(line.successes.load(Ordering::Relaxed)) {
                (tag, count) if tag == generation => Taken {
                    all: sums.all.wrapping_add(count as u16),
                    timed: sums.timed.wrapping_add((count >> 16) as u16),
                },
                _ => sums,
            }
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

    /// Cells, the shared word and what the fold has taken, as a breaker holds them.
    struct Counted {
        cells: Cells,
        taken: Taken,
    }

    impl Counted {
        fn new(lines: usize, generation: u32) -> Counted {
            Counted {
                cells: Cells::with_lines(lines, generation),
                taken: Taken::default(),
            }
        }

        /// A success of `generation` from the thread holding `slot` (a slot at or beyond the
        /// lines has no line: the shared word).
        fn add(&self, slot: usize, generation: u32, limit: u32, timed: bool) -> Added {
            self.cells
                .add_success_at(slot, generation, period_mask(limit), timed)
        }

        fn fold(&mut self, generation: u32) -> (u64, u64) {
            self.cells.fold(generation, &mut self.taken)
        }

        fn pending(&self, generation: u32) -> (u64, u64) {
            self.cells.pending(generation, self.taken)
        }
    }

    #[test]
    fn a_fold_takes_each_success_of_its_generation_once() {
        let mut c = Counted::new(2, 3);
        // Both lines' owners and a thread without a line.
        for slot in [0, 1, 1, 7, 0] {
            assert_eq!(c.add(slot, 3, u32::MAX, false), Added::Counted);
        }
        assert_eq!(c.pending(3), (5, 0));
        assert_eq!(c.pending(3), (5, 0), "a read takes nothing");
        assert_eq!(c.fold(3), (5, 0));
        assert_eq!(c.fold(3), (0, 0), "nothing new");
        assert_eq!(c.add(0, 3, u32::MAX, true), Added::Counted);
        assert_eq!(c.add(9, 3, u32::MAX, true), Added::Counted);
        assert_eq!(c.fold(3), (2, 2), "both timed");
        // A later fold takes only what came after this one, on a line that already held some.
        for _ in 0..3 {
            c.add(1, 3, u32::MAX, false);
        }
        assert_eq!(c.fold(3), (3, 0));
    }

    #[test]
    fn a_line_asks_for_a_fold_every_period_and_the_shared_word_holds_its_limit() {
        let mut c = Counted::new(2, 0);
        // A count window of 100: a period of 64.
        assert_eq!(period_mask(100), 63);
        for n in 1..=200u32 {
            let expected = if n % 64 == 0 {
                Added::FoldDue
            } else {
                Added::Counted
            };
            assert_eq!(c.add(0, 0, 100, false), expected, "success {n}");
        }
        assert_eq!(c.fold(0), (200, 0), "a period's fold is a count like any");
        for _ in 0..64 {
            assert_eq!(c.add(5, 0, 100, false), Added::Counted);
        }
        assert_eq!(
            c.add(5, 0, 100, false),
            Added::Refused,
            "the shared word is full"
        );
        assert_eq!(c.fold(0), (64, 0));
        assert_eq!(
            c.add(5, 0, 100, false),
            Added::Counted,
            "emptied by the fold"
        );
        // A window of one: every success asks.
        assert_eq!(period_mask(1), 0);
        assert_eq!(c.add(1, 0, 1, false), Added::FoldDue);
        assert_eq!(period_mask(u32::MAX), PERIOD - 1);
        assert_eq!(period_mask(0), 0);
    }

    #[test]
    fn every_line_folded_once_a_period_is_counted_exactly_past_the_counts_modulus() {
        // The most lines there are, each a period's worth between folds, for more than 2^16
        // successes a line: the sums wrap and their differences stay exact.
        let mut c = Counted::new(65, 0);
        let mut total = (0, 0);
        for round in 0..140u32 {
            for slot in 0..65 {
                for n in 0..PERIOD {
                    let timed = (n + round) % 3 == 0;
                    assert_ne!(c.add(slot, 0, u32::MAX, timed), Added::Refused);
                }
            }
            let (all, timed) = c.fold(0);
            total = (total.0 + all, total.1 + timed);
        }
        let timed: u64 = (0..140u32)
            .map(|round| (0..PERIOD).filter(|n| (n + round) % 3 == 0).count() as u64 * 65)
            .sum();
        assert_eq!(total, (140 * 65 * u64::from(PERIOD), timed));
    }

    #[test]
    fn a_success_of_an_older_generation_never_lands_after_a_transition() {
        let mut c = Counted::new(2, 0);
        assert_eq!(c.add(0, 0, u32::MAX, false), Added::Counted);
        assert_eq!(c.add(4, 0, u32::MAX, false), Added::Counted);
        // A transition's operation folds (taking generation 0), then retags.
        assert_eq!(c.fold(0), (2, 0));
        c.cells.retag(1, &mut c.taken);
        assert_eq!(c.fold(1), (0, 0));
        // Generation 0's successes landing afterwards, however many locked operations have
        // passed: on a line still tagged 0 they are counted in 0, which no fold takes; on the
        // shared word (tagged 1) refused.
        for _ in 0..1_000 {
            c.fold(1);
        }
        assert_eq!(c.add(0, 0, u32::MAX, false), Added::Counted);
        assert_eq!(c.add(4, 0, u32::MAX, false), Added::Refused);
        assert_eq!(c.fold(1), (0, 0), "a stale success is never folded");
        // Generation 1 restarts the line; a stale one after that is refused.
        assert_eq!(c.add(0, 1, u32::MAX, true), Added::Counted);
        assert_eq!(c.add(0, 0, u32::MAX, false), Added::Refused);
        assert_eq!(c.add(4, 1, u32::MAX, false), Added::Counted);
        assert_eq!(c.pending(1), (2, 1));
        assert_eq!(c.fold(1), (2, 1));
        // A line that restarts at a generation it skipped (1 → 3) counts from there.
        c.cells.retag(3, &mut c.taken);
        assert_eq!(c.add(0, 3, u32::MAX, false), Added::Counted);
        assert_eq!(c.add(1, 3, u32::MAX, false), Added::Counted);
        assert_eq!(c.fold(3), (2, 0));
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
        // Four threads on two lines: whoever holds slot 0 or 1 stores on its line, the others
        // share the word with a compare-exchange, which is refused once full. None is lost
        // and none is taken twice.
        let c = std::sync::Arc::new(Counted::new(2, 0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || {
                    let slot = thread_slot();
                    (0..10_000)
                        .filter(|i| c.add(slot, 0, 20_000, i % 2 == 0) != Added::Refused)
                        .map(|i| (1, u64::from(i % 2 == 0)))
                        .fold((0, 0), |(a, t), (x, y)| (a + x, t + y))
                })
            })
            .collect();
        let added = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .fold((0, 0), |(a, t), (x, y)| (a + x, t + y));
        let mut c = std::sync::Arc::into_inner(c).unwrap();
        assert_eq!(c.fold(0), added);
        assert!(added.0 >= 512, "{added:?}");
    }
}

/// Models of a line's own count (`loom_` so that CI's `--lib loom_` runs them): under loom
/// every modelled thread shares one OS thread's slot, so the breaker-level models in
/// `tests/loom.rs` only reach the shared word; these drive a line's owner directly.
#[cfg(all(test, loom))]
mod loom_cells {
    use super::*;
    use crate::loom::{Arc, Mutex, lock};
    use loom::thread;

    struct Held {
        cells: Cells,
        taken: Mutex<Taken>,
    }

    impl Held {
        /// One line in generation 0, shared with an owner thread spawned to run `owner` on it.
        fn with_owner<T: Send + 'static>(
            owner: impl FnOnce(&AtomicU64) -> T + Send + 'static,
        ) -> (Arc<Held>, thread::JoinHandle<T>) {
            let held = Arc::new(Held {
                cells: Cells::with_lines(1, 0),
                taken: Mutex::new(Taken::default()),
            });
            let theirs = Arc::clone(&held);
            let handle = thread::spawn(move || owner(&theirs.cells.lines[0].successes));
            (held, handle)
        }

        fn fold(&self, generation: u32) -> (u64, u64) {
            self.cells.fold(generation, &mut lock(&self.taken))
        }
    }

    /// The owner stores three successes (a period of two: the second asks for a fold) while
    /// another thread folds: every success is taken once, by that fold or the next.
    #[test]
    fn loom_an_owners_stores_racing_folds_are_each_taken_once() {
        loom::model(|| {
            let (held, owner) = Held::with_owner(|line| {
                let mut asked = 0;
                for n in 0..3 {
                    if own_success(line, 0, 1, n == 1) == Added::FoldDue {
                        asked += 1;
                    }
                }
                asked
            });
            let other = held.fold(0);
            // The owner asked once (its second success ends a period of two); the fold it
            // asked for is this one, or any later.
            assert_eq!(owner.join().unwrap(), 1);
            let last = held.fold(0);
            assert_eq!((other.0 + last.0, other.1 + last.1), (3, 1));
        });
    }

    /// A transition's fold and retag racing an owner's successes of the old generation: each
    /// is taken once by the old generation's fold or dropped, and none reaches the new one.
    #[test]
    fn loom_an_owners_stale_successes_never_reach_the_next_generation() {
        loom::model(|| {
            let (held, owner) = Held::with_owner(|line| {
                for _ in 0..2 {
                    own_success(line, 0, PERIOD - 1, false);
                }
            });
            let before = {
                let mut taken = lock(&held.taken);
                let folded = held.cells.fold(0, &mut taken);
                held.cells.retag(1, &mut taken);
                folded
            };
            owner.join().unwrap();
            assert!(before.0 <= 2);
            assert_eq!(held.fold(1), (0, 0), "no success of 0 is folded in 1");
            // The next generation's own success restarts the line and is taken once.
            own_success(&held.cells.lines[0].successes, 1, PERIOD - 1, false);
            assert_eq!(held.fold(1), (1, 0));
        });
    }
}

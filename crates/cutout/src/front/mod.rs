//! The hot path of a [`Breaker`]: admitting a call and finishing it, off the lock wherever the
//! published word allows (see `breaker.rs` for the orderings, `cells.rs` for the one place
//! outcomes are counted off the lock, `word.rs` for what each flag promises).
//!
//! A success skips the lock in two ways only:
//! - under a *still* word it records nothing: no consumer would change;
//! - under a *fast* word it adds one to its thread's cell, which the next locked operation
//!   folds into the window, the consecutive-failure count and the failure baseline before it
//!   evaluates the trip rules; a timed one also leaves its latency sample in its line.
//!
//! Everything else (failures, slow calls, probes, ramp calls, successes a word does not let
//! off, a verdict asking to open for a while, and admissions that need the machine) takes the
//! lock.

pub(crate) mod cells;
pub(crate) mod slot;
pub(crate) mod word;

use std::time::Duration;

use crate::Breaker;
use crate::classify::{Outcome, Verdict};
use crate::error::{RejectReason, Rejected, RetryAfter};
use crate::front::cells::Added;
use crate::front::word::Word;
use crate::loom::Ordering;
use crate::machine::sampling::{Pick, Timed, Timing};
use crate::machine::{Admission, Role};
use crate::observer::{Call, CallKind};
use crate::permit::Ticket;
use crate::state::State;

/// What the inlined quick path of admission decided.
enum Quick {
    Admit(Ticket),
    /// A [`Ticket::refused`].
    Refuse(Ticket),
    /// Undecided: [`Breaker::ticket_slow`] decides; [`Pick::Drawn`] for a closed call a draw
    /// chose to time (it stands for eight, see `machine/sampling.rs`).
    Slow(Pick),
}

impl Breaker {
    /// Admission: a ticket, or the refusal made a [`Rejected`] (built here, once, in the
    /// caller's `Result`).
    #[inline(always)]
    pub(crate) fn ticket(&self) -> Result<Ticket, Rejected> {
        self.ticket_at(self.word())
    }

    /// [`Breaker::ticket`] with the word already read.
    #[inline(always)]
    pub(crate) fn ticket_at(&self, word: Word) -> Result<Ticket, Rejected> {
        // Matched apart, so that the admitted ticket of the quick path is never tested for a
        // refusal.
        let refused = match self.quick_ticket(word) {
            Quick::Admit(ticket) => return Ok(ticket),
            Quick::Refuse(ticket) => ticket,
            Quick::Slow(pick) => match self.ticket_slow(pick) {
                ticket if ticket.is_refused() => ticket,
                ticket => return Ok(ticket),
            },
        };
        let (reason, retry_after) = refused.refusal();
        Err(Rejected::new(reason, retry_after, self.shared.id.clone()))
    }

    /// The admissions and refusals that need nothing but the word (and, on a sampled breaker,
    /// the line's turn; while open, the coarse clock): [`Quick::Slow`] sends the call to
    /// [`Breaker::ticket_slow`]. Small enough to inline, so that the ticket travels in
    /// registers rather than inside a `Result` as large as a [`Rejected`].
    #[inline(always)]
    fn quick_ticket(&self, word: Word) -> Quick {
        let s = &*self.shared;
        if word.is_closed_still() {
            return Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0));
        }
        match word.state() {
            // Throttling: each call a draw, on the slow path.
            State::Closed if word.is_throttling() => Quick::Slow(Pick::Certain),
            State::Closed => match s.hot.timing {
                Timing::None => Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0)),
                // A sampled breaker above low traffic: seven calls in eight are not timed, and
                // the eighth stands for all eight.
                Timing::Sampled if !word.is_exact() => {
                    if s.hot.cells.turn() {
                        Quick::Slow(Pick::Drawn)
                    } else {
                        Quick::Admit(Ticket::new(word.generation(), Role::Normal, 0))
                    }
                }
                _ => Quick::Slow(Pick::Certain),
            },
            // On the system clock a refusal needs no precise read: with a coarse clock
            // running it is two more loads (the coarse time and the break's end); without one,
            // a read of the kernel's coarse clock against the break's end converted to its
            // scale (`clock/kernel.rs`). Near the end of the break, or once it has ended, the
            // slow path reads the clock itself.
            State::Open if s.hot.quick_refusals => match crate::clock::coarse_time() {
                0 => self
                    .refusal_on_kernel_clock()
                    .map_or(Quick::Slow(Pick::Certain), Quick::Refuse),
                now => self
                    .refusal_while_open(now)
                    .map_or(Quick::Slow(Pick::Certain), Quick::Refuse),
            },
            _ => Quick::Slow(Pick::Certain),
        }
    }

    /// The refusal of a call at `now` while open, unless the break has ended. Reads the
    /// break's end after the caller read an open word (see the orderings in `breaker.rs`).
    #[inline(always)]
    fn refusal_while_open(&self, now: u64) -> Option<Ticket> {
        let until = self.shared.hot.until.load(Ordering::Relaxed);
        (now < until).then(|| {
            let after = if self.shared.hot.quick_refusals {
                RetryAfter::until_system(until)
            } else {
                RetryAfter::from_nanos(Some(until - now))
            };
            self.refuse(RejectReason::Open, after)
        })
    }

    /// The refusal of a call while open that the kernel's coarse clock proves is before the
    /// break's end, if it does (see `clock/kernel.rs`). Its retry-after carries the break's end
    /// and reads the precise clock only when asked, so the refusal takes no precise reading.
    /// Reads the converted end, then `until`, then the converted end again, after the caller
    /// read an open word; a conversion that changed in between, or an `until` of 0 (a reset or
    /// a close raced it), refuses nothing here.
    #[inline(always)]
    fn refusal_on_kernel_clock(&self) -> Option<Ticket> {
        let hot = &self.shared.hot;
        let reading = crate::clock::kernel::now();
        let until = crate::clock::kernel::proved(&hot.kernel_deadline, &hot.until, reading)?;
        Some(self.refuse(RejectReason::Open, RetryAfter::until_system(until)))
    }

    /// A timed call admitted while closed, picked as `pick` says.
    fn closed_timed(&self, word: Word, pick: Pick) -> Ticket {
        let s = &*self.shared;
        let start = s.hot.clock.now();
        if start >= s.hot.fast_until.load(Ordering::Relaxed) {
            // Timed calls keep the deadlines of the hot path (bucket boundaries, the latency
            // refresh, the check of calls in flight): past one, the lock is taken.
            return self.admit_locked(start, Some(pick));
        }
        self.normal_ticket(word.generation(), start, pick)
    }

    /// A timed ticket for a call admitted while closed, carrying how it was picked (the weight
    /// it takes to the window): tracked in flight, in its kind's count, on an adaptive breaker
    /// (every timed call is, so a hung one is a slow timed call).
    fn normal_ticket(&self, generation: u32, start: u64, pick: Pick) -> Ticket {
        let mut ticket = Ticket::timed_from(generation, Role::Normal, start);
        let drawn = pick == Pick::Drawn;
        if drawn {
            ticket.set_drawn();
        }
        if self.shared.hot.adaptive_slow {
            self.shared.hot.cells.track(drawn);
            ticket.set_tracked();
        }
        ticket
    }

    /// Every other admission: timed calls, and every state but closed. A refusal comes back
    /// as a [`Ticket::refused`]. `pick`: `Drawn` when the quick path's draw chose to time this
    /// call (a call that is then admitted while closed and timed stands for eight, whatever
    /// word it is admitted under: had the draw gone the other way, it would not have been
    /// timed).
    #[inline(never)]
    fn ticket_slow(&self, pick: Pick) -> Ticket {
        let s = &*self.shared;
        let word = self.word();
        // The refusal while open first, in a function small enough to need few registers:
        // one coarse clock read and a load.
        // (In shadow mode the break's end is published as 0: the lock decides.)
        if word.state() == State::Open {
            let now = s.hot.clock.recent();
            return self
                .refusal_while_open(now)
                .unwrap_or_else(|| self.admit_locked(now, None));
        }
        self.ticket_other(word, pick)
    }

    /// [`Breaker::ticket_slow`] in every state but open.
    #[inline(never)]
    fn ticket_other(&self, word: Word, pick: Pick) -> Ticket {
        let s = &*self.shared;
        match word.state() {
            // Throttled: refused with the published probability (a shadow breaker refuses
            // nothing). The threshold is read after the word (see `breaker.rs`).
            State::Closed if word.is_throttling() => match self.throttle(word) {
                Err(ticket) => ticket,
                Ok(word) if word.state() == State::Closed => match s.hot.timing {
                    Timing::None => Ticket::new(word.generation(), Role::Normal, 0),
                    _ => self.closed_timed(word, pick),
                },
                Ok(_) => self.ticket_slow(pick),
            },
            // A timed call (its turn already taken), or a breaker that closed since the quick
            // path looked.
            State::Closed => match s.hot.timing {
                Timing::None => Ticket::new(word.generation(), Role::Normal, 0),
                _ => self.closed_timed(word, pick),
            },
            State::Disabled => Ticket::uncounted(),
            State::Isolated if !word.is_shadow() => {
                self.refuse(RejectReason::Isolated, RetryAfter::from_nanos(None))
            }
            _ => self.admit_locked(s.hot.clock.recent(), None),
        }
    }

    /// Adaptive throttling's draw for a call admitted on a throttling `word`: the word to admit
    /// it under, or the ticket it gets instead (a refusal; in shadow mode, an uncounted
    /// admission counted as a would-be refusal). Past `fast_until` (the window, or the refusals' slices,
    /// moved since the probability was published) the lock recomputes the probability first:
    /// a breaker refusing almost everything takes the lock rarely otherwise, and would keep
    /// refusing after its dependency recovered.
    #[inline(never)]
    fn throttle(&self, word: Word) -> Result<Word, Ticket> {
        let s = &*self.shared;
        let now = s.hot.clock.recent();
        let word = if now >= s.hot.fast_until.load(Ordering::Relaxed) {
            self.operate(now, None, |_| ((), None));
            self.word()
        } else {
            word
        };
        if word.state() == State::Closed
            && word.is_throttling()
            && s.hot.cells.draw() < s.hot.throttle.load(Ordering::Relaxed)
        {
            if word.is_shadow() {
                let admission = self.operate(now, None, |m| (m.shadow_throttled(now), None));
                return Err(match admission {
                    Admission::Admit { generation, role } => Ticket::new(generation, role, 0),
                    // Switched out of shadow since the word was read.
                    Admission::Refuse {
                        reason,
                        retry_after,
                    } => self.refuse(reason, self.retry_after(reason, retry_after, now)),
                });
            }
            return Err(self.refuse(RejectReason::Throttled, RetryAfter::from_nanos(None)));
        }
        Ok(word)
    }

    /// A refusal: counted for the snapshot's refused calls (on this thread's line; see
    /// `Cells::refuse`) and told to the observers.
    #[inline]
    fn refuse(&self, reason: RejectReason, retry_after: RetryAfter) -> Ticket {
        let s = &*self.shared;
        s.hot.cells.refuse();
        self.observe(CallKind::Refused(reason), None, false);
        Ticket::refused(reason, retry_after)
    }

    /// Tells the observers of a call, if there are any: one pointer test when there are none
    /// (the call itself is out of line, so that the paths it sits on stay as small).
    #[inline(always)]
    fn observe(&self, kind: CallKind, duration: Option<u64>, slow: bool) {
        if self.shared.hot.observers.is_some() {
            self.tell(kind, duration, slow);
        }
    }

    #[cold]
    #[inline(never)]
    fn tell(&self, kind: CallKind, duration: Option<u64>, slow: bool) {
        if let Some(observers) = &self.shared.hot.observers {
            observers.tell(&Call {
                breaker: &self.shared.id,
                kind,
                duration: duration.map(std::time::Duration::from_nanos),
                slow,
            });
        }
    }

    /// An admission by the machine; `timed`: a closed call is timed, and how it was picked
    /// (`None`: the word decides, as for a call whose turn was not drawn).
    #[cold]
    fn admit_locked(&self, now: u64, timed: Option<Pick>) -> Ticket {
        let admission = self.operate(now, None, |m| m.admit(now));
        let s = &*self.shared;
        match admission {
            Admission::Admit { generation, role } => match (role, s.hot.timing) {
                (Role::Uncounted, _) | (_, Timing::None) => Ticket::new(generation, role, 0),
                // A call admitted while closed is timed as its mode says: drawn on the quick
                // path, or every call where the word just published says so (a breaker that
                // closed from a ramp, say).
                (Role::Normal, Timing::Sampled) if timed.is_none() && !self.word().is_exact() => {
                    Ticket::new(generation, role, 0)
                }
                (Role::Normal, _) => self.normal_ticket(
                    generation,
                    s.hot.clock.now(),
                    timed.unwrap_or(Pick::Certain),
                ),
                // Probes and ramp calls decide: always timed, each for itself.
                (Role::Probe | Role::Ramp, _) => {
                    Ticket::timed_from(generation, role, s.hot.clock.now())
                }
            },
            Admission::Refuse {
                reason,
                retry_after,
            } => self.refuse(reason, self.retry_after(reason, retry_after, now)),
        }
    }

    /// The retry-after of a refusal the machine decided at `now`: on the system clock, a
    /// refusal while open carries the break's end and reads the clock when asked, as the
    /// quick path's do (see [`Rejected::retry_after`]); every other one what was left.
    fn retry_after(&self, reason: RejectReason, left: Option<Duration>, now: u64) -> RetryAfter {
        match (reason, left) {
            (RejectReason::Open, Some(left)) if self.shared.hot.quick_refusals => {
                let left = u64::try_from(left.as_nanos()).unwrap_or(u64::MAX);
                RetryAfter::until_system(now.saturating_add(left))
            }
            _ => RetryAfter::new(left),
        }
    }

    /// Records the outcome of a ticket's call.
    #[inline]
    pub(crate) fn finish(&self, ticket: Ticket, outcome: Outcome) {
        // The healthy path, small enough to inline: an untimed success on a still breaker
        // writes nothing; on a fast one it adds one to its thread's cell.
        if outcome == Outcome::Success && ticket.is_plain() {
            // Under a still word a success changes nothing, whichever generation admitted it
            // (an observed breaker is never still).
            if !self.word().is_closed_still() && !self.success_off_lock(ticket, None) {
                self.finish_locked(ticket, outcome, None, self.shared.hot.clock.recent(), None);
            }
            self.observe(CallKind::Success, None, false);
            return;
        }
        self.finish_slow(ticket, outcome);
    }

    /// Records a classifier's verdict on a ticket's call: an outcome through
    /// [`Breaker::finish`], whose healthy path is unchanged; a request to open for a while
    /// through [`Breaker::finish_open_for`], off the inlined path.
    #[inline]
    pub(crate) fn finish_verdict(&self, ticket: Ticket, verdict: Verdict) {
        match verdict.open_for() {
            None => self.finish(ticket, verdict.outcome()),
            Some(duration) => self.finish_open_for(ticket, duration),
        }
    }

    /// A call whose dependency asked not to be called for `duration` (more than zero): under
    /// the lock, as any outcome that changes state, at the call's end (see
    /// `Machine::record_open_for`). Counted as nothing, so no consumer of counted outcomes is
    /// skipped; the lock's fold and trip rules run first, as for every call-caused operation.
    /// Observers see it as [`CallKind::OpenFor`].
    #[cold]
    #[inline(never)]
    fn finish_open_for(&self, ticket: Ticket, duration: std::time::Duration) {
        let s = &*self.shared;
        if ticket.role() == Role::Uncounted {
            return;
        }
        if ticket.tracked() {
            s.hot.cells.untrack(ticket.drawn());
        }
        let now = if ticket.timed() {
            s.hot.clock.now()
        } else {
            s.hot.clock.recent()
        };
        self.operate(now, None, |m| {
            let transition = m.record_open_for(now, ticket.generation(), ticket.role(), duration);
            ((), transition)
        });
        let took = ticket.timed().then(|| now.saturating_sub(ticket.start));
        // Slow as any timed call is: over the threshold in force.
        let slow = took.is_some_and(|took| took > s.hot.slow_nanos.load(Ordering::Relaxed));
        self.observe(CallKind::OpenFor(duration), took, slow);
    }

    /// Counts a fast (not slow) success of a normal call in its thread's cell, if the
    /// published word allows: `false` when it must take the lock.
    ///
    /// The fast flag lapses at `fast_until` (the next bucket boundary, baseline slice or
    /// deadline). A timed call checks it against its end time `end`; an untimed one with
    /// [`Breaker::untimed_in_time`]: the kernel's coarse clock against the counted successes'
    /// deadline (`fast_until` without the lock's upkeep deadlines) converted to its scale, or
    /// [`Clock::recent`](crate::clock::Clock::recent) (one load with a
    /// [`CoarseClock`](crate::clock::CoarseClock) running). So every success counted in a
    /// cell came before the bucket boundary and baseline slice of the locked operation that
    /// published the word: in its bucket.
    #[inline(never)]
    fn success_off_lock(&self, ticket: Ticket, end: Option<u64>) -> bool {
        let s = &*self.shared;
        let word = self.word();
        if !word.lets_success_off_lock(ticket.generation()) {
            return false;
        }
        let until = s.hot.fast_until.load(Ordering::Relaxed);
        if until != u64::MAX {
            let in_time = match end {
                Some(end) => end < until,
                None => self.untimed_in_time(until),
            };
            if !in_time {
                return false;
            }
        }
        match s
            .hot
            .cells
            .add_success(ticket.generation(), s.hot.fast_mask, end.is_some())
        {
            Added::Counted => true,
            Added::FoldDue => {
                self.fold_due(end);
                true
            }
            Added::Refused => false,
        }
    }

    /// A success was counted on a line that now holds a period's worth, which the fold takes
    /// now (at the call's end, if timed). Out of line, so that the common success pays no
    /// part of a locked operation's frame.
    #[cold]
    #[inline(never)]
    fn fold_due(&self, end: Option<u64>) {
        let now = end.unwrap_or_else(|| self.shared.hot.clock.recent());
        self.operate(now, None, |_| ((), None));
    }

    /// Whether an untimed success may be counted off the lock under a fast word whose flag
    /// lapses at `until`: proved on the kernel's coarse clock against the counted successes'
    /// deadline where it can be (a 2 ns read, see `clock/kernel.rs`; the lock's upkeep
    /// deadlines are left to the next timed call), else by
    /// [`Clock::recent`](crate::clock::Clock::recent) against `until`.
    #[inline(always)]
    fn untimed_in_time(&self, until: u64) -> bool {
        let hot = &self.shared.hot;
        if hot.quick_refusals
            && crate::clock::coarse_time() == 0
            && crate::clock::kernel::now() < hot.kernel_deadline.load(Ordering::Relaxed)
        {
            return true;
        }
        hot.clock.recent() < until
    }

    /// Every other outcome: timed calls, failures, probes, and successes that must be counted.
    /// Observers are told once it is recorded.
    #[inline(never)]
    fn finish_slow(&self, ticket: Ticket, outcome: Outcome) {
        if ticket.role() == Role::Uncounted {
            return;
        }
        let (duration, slow) = self.record_slow(ticket, outcome);
        let kind = match outcome {
            Outcome::Success => CallKind::Success,
            Outcome::Failure => CallKind::Failure,
            Outcome::Ignored => CallKind::Ignored,
        };
        self.observe(kind, duration, slow);
    }

    /// [`Breaker::finish_slow`]'s recording: the call's duration when timed, and whether slow.
    #[inline(always)]
    fn record_slow(&self, ticket: Ticket, outcome: Outcome) -> (Option<u64>, bool) {
        let s = &*self.shared;
        if ticket.tracked() {
            s.hot.cells.untrack(ticket.drawn());
        }
        let end = ticket.timed().then(|| s.hot.clock.now());
        let duration = end.map(|end| end.saturating_sub(ticket.start));
        // Untimed, or whether slow and how it was picked.
        let timed = duration.map(|d| Timed {
            slow: d > s.hot.slow_nanos.load(Ordering::Relaxed),
            drawn: ticket.drawn(),
        });
        // Every success measures the dependency, whatever its generation. A sample that finds
        // its line's lanes full goes to the lock, which merges them all.
        let mut sample = None;
        if let (Outcome::Success, true, Some(duration)) = (outcome, s.hot.adaptive_slow, duration) {
            let bucket = crate::machine::baseline::histogram::bucket_of(duration);
            if !s.hot.cells.add_sample(bucket) {
                sample = Some(bucket);
            }
        }
        let slow = timed.is_some_and(|timed| timed.slow);
        if ticket.role() == Role::Normal && sample.is_none() {
            match outcome {
                // Ignored touches nothing while closed.
                Outcome::Ignored => return (duration, slow),
                Outcome::Success if !slow && self.success_off_lock(ticket, end) => {
                    return (duration, slow);
                }
                _ => {}
            }
        }
        let now = end.unwrap_or_else(|| s.hot.clock.recent());
        self.finish_locked(ticket, outcome, timed, now, sample);
        (duration, slow)
    }

    /// `timed`: `None` for an untimed call, otherwise whether it was slow and how it was
    /// picked.
    #[cold]
    fn finish_locked(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        timed: Option<Timed>,
        now: u64,
        sample: Option<usize>,
    ) {
        self.operate(now, sample, |m| {
            let transition = m.record(now, ticket.generation(), ticket.role(), outcome, timed);
            ((), transition)
        });
    }

    /// Gives back a probe slot of a ticket that finished without an outcome.
    #[inline]
    pub(crate) fn release(&self, ticket: Ticket) {
        // A dropped permit of a healthy call does nothing at all: only tracked calls and probes
        // have anything to give back.
        if ticket.tracked() || ticket.role() == Role::Probe {
            self.release_slow(ticket);
        }
    }

    #[cold]
    fn release_slow(&self, ticket: Ticket) {
        if ticket.tracked() {
            self.shared.hot.cells.untrack(ticket.drawn());
        }
        if ticket.role() == Role::Probe {
            let now = self.shared.hot.clock.recent();
            self.operate(now, None, |m| {
                m.release(ticket.generation(), ticket.role());
                ((), None)
            });
        }
    }
}

//! The three ways a [`Breaker`] reaches its machine under the lock, and the events that leave
//! it afterwards.
//!
//! - [`Breaker::operate`], for what a call causes (an admission that needs the machine, an
//!   outcome, a probe slot given back): it folds what calls counted off the lock and
//!   evaluates the trip rules, merges latency samples when due, checks the calls in flight
//!   when due, then does the call's own step, and raises the transitions any of these made.
//! - [`Breaker::control`], for `reset`, `isolate`, `disable`, `open_for`, `open_until`,
//!   `shadow` and `enforce`: the folded successes still reach the baselines, but no trip
//!   rule runs and no event is raised (no call caused it); the machine notes the action for
//!   the snapshot, and with the `tracing` feature it is traced once the lock is let go.
//! - [`Breaker::read`], for every read: it changes nothing, and sees the successes waiting in
//!   the cells as the next fold would count them.
//!
//! Each of the first two publishes the hot path's values before it lets go of the lock (see the
//! orderings in `breaker.rs`). Listeners run after it, on a copy of the listener list taken
//! under that list's lock and released before the first one runs: a listener may subscribe, or
//! call its breaker.

use std::time::Duration;

use crate::Breaker;
use crate::TripEvidence;
use crate::clock::kernel;
use crate::event::{Event, Transition};
use crate::loom::{Ordering, lock};
use crate::machine::Machine;
use crate::snapshot::ManualAction;

impl Breaker {
    /// A locked operation caused by a call at `now`. `sample`: a latency sample that found its
    /// line full (merged with every waiting one). `f` returns its result and the transition it
    /// made, if any.
    pub(crate) fn operate<R>(
        &self,
        now: u64,
        sample: Option<usize>,
        f: impl FnOnce(&mut Machine) -> (R, Option<Transition>),
    ) -> R {
        let s = &*self.shared;
        let (result, transitions) = self.locked(now, |machine, folded| {
            let folded = machine.absorb(now, folded);
            // Only a breaker that measures latency has samples (reading the lanes would fetch
            // every other core's line for nothing).
            if s.hot.adaptive_slow
                && (sample.is_some() || machine.wants_latency(now) || s.hot.cells.samples_full())
            {
                self.merge_samples(machine, now, sample);
            }
            let hung = if s.hot.adaptive_slow && machine.wants_in_flight(now) {
                machine.check_in_flight(now, s.hot.cells.tracked())
            } else {
                None
            };
            let (result, own) = f(machine);
            // The thresholds exceeded first: a crossing comes before any opening it led to.
            let [c0, c1, c2] = machine.take_crossings();
            let transitions = [c0, c1, c2, folded, hung, own];
            // Read only when a rule of the closed state tripped: the window still holds what
            // tripped it (an open breaker's window shows it until half-open).
            let evidence = transitions
                .iter()
                .flatten()
                .any(crate::evidence::closed_rule)
                .then(|| machine.trip_evidence(now));
            (result, (transitions, evidence))
        });
        let (transitions, evidence) = transitions;
        for transition in transitions.into_iter().flatten() {
            let evidence = evidence.filter(|_| crate::evidence::closed_rule(&transition));
            self.emit(transition, now, evidence);
        }
        result
    }

    /// A control at `now` (`reset`, `isolate`, `disable`, `open_for`, `open_until`, `shadow`,
    /// `enforce`): no trip rule runs, no event. With the `tracing` feature, `action` is traced
    /// after the lock is let go, with whether it took effect (`applied`, from `f`'s answer).
    pub(crate) fn control(
        &self,
        now: u64,
        action: ManualAction,
        f: impl FnOnce(&mut Machine) -> bool,
    ) -> bool {
        let (applied, state) = self.locked(now, |machine, folded| {
            machine.absorb_counts(folded);
            if self.shared.hot.adaptive_slow {
                self.merge_samples(machine, now, None);
            }
            let applied = f(machine);
            (applied, machine.state_at(now))
        });
        #[cfg(feature = "tracing")]
        crate::observe::trace_manual(&self.shared.id, action, now, applied, state);
        #[cfg(not(feature = "tracing"))]
        let _ = (action, state);
        applied
    }

    /// What every locked operation does around its own step `body`: lock, settle the machine
    /// at `now`, fold the cells (handed to `body`), and publish the hot path's values before
    /// letting go of the lock.
    fn locked<R>(&self, now: u64, body: impl FnOnce(&mut Machine, (u64, u64)) -> R) -> R {
        let s = &*self.shared;
        let mut machine = lock(&s.machine);
        #[cfg(feature = "metrics")]
        let state_before = machine.state_at(now);
        let settled_from = machine.generation();
        machine.settle(now);
        if machine.throttles() {
            machine.absorb_refusals(s.hot.cells.refused());
        }
        let generation = machine.generation();
        // A generation that time moved on (a break run out, a ramp finished) takes what the
        // fold has taken anew, as `publish` does for one the operation moved: the old sums
        // are of lines tagged with the old generation, and their difference with the new
        // one's would be no count at all. What the old one counted since is dropped.
        if generation != settled_from {
            s.hot.cells.retag(generation, &mut machine.cells_taken);
        }
        let folded = s.hot.cells.fold(generation, &mut machine.cells_taken);
        let result = body(&mut machine, folded);
        if machine.take_refused_rebase() {
            machine.rebase_refused(s.hot.cells.refused());
        }
        self.publish(&mut machine, generation, now);
        // Under the lock, so gauge updates land in the order of the transitions.
        // The recorder is user code: contained, so that a panic in it cannot keep the
        // transition's events from being raised.
        #[cfg(feature = "metrics")]
        if s.metrics.refresh_due(now) | (machine.state_at(now) != state_before) {
            let snapshot = machine.snapshot(now, (0, 0), s.hot.cells.refused());
            crate::contained::contained(|| s.metrics.set_gauges(&snapshot));
        }
        result
    }

    /// A read: `f` gets the machine and the successes waiting in the cells (how many, and how
    /// many of them timed), and may change neither.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Machine, (u64, u64)) -> R) -> R {
        let s = &*self.shared;
        let machine = lock(&s.machine);
        let pending = s
            .hot
            .cells
            .pending(machine.generation(), machine.cells_taken);
        f(&machine, pending)
    }

    fn merge_samples(&self, machine: &mut Machine, now: u64, extra: Option<usize>) {
        let cells = &self.shared.hot.cells;
        machine.merge_latency(now, |add| {
            cells.drain_samples(&mut *add);
            if let Some(bucket) = extra {
                add(bucket);
            }
        });
    }

    /// Publishes the hot path's values; a generation that changed since `generation` (the one
    /// the cells were folded in) retags the cells, dropping what the old one counted since.
    fn publish(&self, machine: &mut Machine, generation: u32, now: u64) {
        let s = &*self.shared;
        if machine.generation() != generation {
            let generation = machine.generation();
            s.hot.cells.retag(generation, &mut machine.cells_taken);
        }
        let published = machine.publish(now);
        // The deadline the hot path may test on the kernel's coarse clock: the break's end
        // while open (a refusal), the counted successes' deadline while fast (an untimed
        // success), and none otherwise.
        let word = published.word;
        let kernel_source = if published.until != 0 {
            published.until
        } else if word.lets_success_off_lock(word.generation()) {
            published.counted_until
        } else {
            0
        };
        // Nothing changed (a failure that trips nothing, in the same bucket): no store, so the
        // line every call reads stays in the other cores' caches. A reader cannot tell this
        // from a publication of the same values, so the pairing below is unchanged.
        let hot = &s.hot;
        let relaxed = Ordering::Relaxed;
        if hot.word.load(relaxed) == word.bits()
            && hot.until.load(relaxed) == published.until
            && hot.fast_until.load(relaxed) == published.fast_until
            && hot.kernel_source.load(relaxed) == kernel_source
            && hot.slow_nanos.load(relaxed) == published.slow_nanos
            && hot.throttle.load(relaxed) == published.throttle
        {
            return;
        }
        // The same deadline keeps its conversion: its margin covers the drift over a longer
        // wait. A new one is published as a sequence lock whose sequence is the converted
        // deadline itself (see `breaker.rs`): taken away first, then the ends, then the new
        // conversion, so that a refusal that read one conversion and its end reads both of
        // one publication.
        let reconverted = hot.kernel_source.load(relaxed) != kernel_source;
        if reconverted {
            kernel::unseal(&hot.kernel_deadline);
        }
        hot.until.store(published.until, relaxed);
        hot.fast_until.store(published.fast_until, relaxed);
        if reconverted {
            hot.kernel_source.store(kernel_source, relaxed);
            kernel::seal(
                &hot.kernel_deadline,
                self.on_kernel_clock(kernel_source, now),
            );
        }
        hot.slow_nanos.store(published.slow_nanos, relaxed);
        hot.throttle.store(published.throttle, relaxed);
        hot.word.store(word.bits(), Ordering::Release);
    }

    /// `deadline` on the kernel's coarse clock, for a breaker on the system clock while no
    /// [`CoarseClock`](crate::clock::CoarseClock) runs (one coarse and one precise read, and only
    /// for a deadline more than two ticks after `now`); 0 otherwise.
    fn on_kernel_clock(&self, deadline: u64, now: u64) -> u64 {
        let s = &*self.shared;
        if !s.hot.quick_refusals || deadline == 0 || crate::clock::coarse_time() != 0 {
            return 0;
        }
        kernel::convert(deadline, now, || s.hot.clock.now())
    }

    /// Raises `transition` to the listeners, with no lock held, with what tripped it if a
    /// rule of the closed state did.
    fn emit(&self, transition: Transition, now: u64, evidence: Option<TripEvidence>) {
        let event = Event {
            breaker: self.shared.id.clone(),
            at: Duration::from_nanos(now),
            transition,
            evidence,
        };
        #[cfg(feature = "tracing")]
        crate::observe::trace(&event);
        #[cfg(feature = "metrics")]
        self.shared
            .metrics
            .transition(transition.from(), transition.to());
        let Some(listeners) = lock(&self.shared.listeners).clone() else {
            return;
        };
        for listener in listeners.iter() {
            // A panicking listener must not take the breaker or the caller down with it; the
            // state changed before any listener ran.
            crate::contained::contained(|| listener(&event));
        }
    }
}

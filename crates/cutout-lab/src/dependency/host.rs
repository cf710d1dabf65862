//! One replica's workers: the time at which each will have finished the work already given to
//! it (the queue's *workload vector*), held in a tournament tree so that the worker that frees
//! first, among the first `k`, is found and given a call in O(log c).

/// The workers of one replica. State is one free time per worker, however long the backlog:
/// a call waiting in the queue is not stored, only the work it added to its worker.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// The number of workers.
    workers: usize,
    /// The tree's leaf count: `workers` rounded up to a power of two.
    width: usize,
    /// `tree[width + i]` is worker `i`'s free time in nanoseconds (padding leaves hold
    /// `u64::MAX`); `tree[j]` is the least of `tree[2j]` and `tree[2j + 1]`; `tree[0]` is unused.
    tree: Vec<u64>,
    /// The workers the last call that reached the replica could use (the first ones).
    available: usize,
    /// The latency factor the work in the tree was given at: the replica's slowness.
    factor: f64,
}

impl Host {
    /// A replica of `workers` idle workers (`workers >= 1`).
    pub(crate) fn new(workers: usize) -> Host {
        assert!(workers >= 1, "a replica has at least one worker");
        let width = workers.next_power_of_two();
        let mut tree = vec![u64::MAX; 2 * width];
        tree[width..width + workers].fill(0);
        for j in (1..width).rev() {
            tree[j] = tree[2 * j].min(tree[2 * j + 1]);
        }
        Host {
            workers,
            width,
            tree,
            available: workers,
            factor: 1.0,
        }
    }

    /// The number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// The worker, among the first `available` (clamped to 1..=workers), that frees first,
    /// and when. Ties go to the lowest-numbered worker.
    pub(crate) fn earliest(&self, available: usize) -> (usize, u64) {
        let available = available.clamp(1, self.workers);
        let mut node = if available == self.workers {
            1
        } else {
            // The range's nodes, met left to right on the left edge and right to left on the
            // right edge (every left-edge node lies left of every right-edge one): ties go left.
            let (mut lo, mut hi) = (self.width, self.width + available);
            let (mut left, mut right) = (None::<usize>, None::<usize>);
            while lo < hi {
                if lo & 1 == 1 {
                    if left.is_none_or(|b| self.tree[lo] < self.tree[b]) {
                        left = Some(lo);
                    }
                    lo += 1;
                }
                if hi & 1 == 1 {
                    hi -= 1;
                    if right.is_none_or(|b| self.tree[hi] <= self.tree[b]) {
                        right = Some(hi);
                    }
                }
                lo /= 2;
                hi /= 2;
            }
            match (left, right) {
                (Some(l), Some(r)) if self.tree[r] < self.tree[l] => r,
                (Some(l), _) => l,
                (None, Some(r)) => r,
                (None, None) => unreachable!("the range holds at least one worker"),
            }
        };
        // Down to the leftmost leaf holding the subtree's least free time: it lies in range.
        while node < self.width {
            node *= 2;
            if self.tree[node] != self.tree[node / 2] {
                node += 1;
            }
        }
        (node - self.width, self.tree[node])
    }

    /// Gives a call to the first `available` workers at `now`: it waits for the worker that
    /// frees first, or is turned away (and gives no work) when that wait would exceed
    /// `max_wait`. Returns when it starts (`Err`: when it would have, turned away); the
    /// worker is then busy for `service` nanoseconds from the start.
    pub(crate) fn enqueue(
        &mut self,
        now: u64,
        available: usize,
        service: u64,
        max_wait: Option<u64>,
    ) -> Result<u64, u64> {
        self.available = available.clamp(1, self.workers);
        let (worker, free) = self.earliest(self.available);
        let start = free.max(now);
        if max_wait.is_some_and(|max| start - now > max) {
            return Err(start);
        }
        self.set(worker, start.saturating_add(service));
        Ok(start)
    }

    /// The replica runs at `factor` × its healthy service times from `now` on: the work still
    /// ahead of each worker is stretched (or shrunk) by `factor / previous factor`. O(c), and
    /// only when the factor changes.
    pub(crate) fn slow_to(&mut self, now: u64, factor: f64) {
        if factor == self.factor {
            return;
        }
        let ratio = factor / self.factor;
        self.factor = factor;
        for free in &mut self.tree[self.width..self.width + self.workers] {
            if *free > now && *free != u64::MAX {
                let ahead = (*free - now) as f64 * ratio;
                *free = now.saturating_add(ahead as u64);
            }
        }
        for j in (1..self.width).rev() {
            self.tree[j] = self.tree[2 * j].min(self.tree[2 * j + 1]);
        }
    }

    /// When a call reaching the first `available` workers at `now`, the replica then running
    /// at `factor` × its healthy service times, would start, had the call come: what
    /// [`Host::slow_to`] and [`Host::enqueue`] would give it (before `max_wait`), without
    /// changing anything. The stretch of [`Host::slow_to`] is monotone in a worker's free
    /// time (a time past `now` maps to a later one past `now`, the others stay), so the worker
    /// that frees first is the same before and after it, and its stretched time is the start.
    pub(crate) fn start_if_called(&self, now: u64, available: usize, factor: f64) -> u64 {
        let (_, free) = self.earliest(available);
        let free = if factor != self.factor && free > now && free != u64::MAX {
            let ahead = (free - now) as f64 * (factor / self.factor);
            now.saturating_add(ahead as u64)
        } else {
            free
        };
        free.max(now)
    }

    /// How long a call arriving at `now` would wait, given the workers the last call could use.
    pub(crate) fn wait(&self, now: u64) -> u64 {
        self.earliest(self.available).1.saturating_sub(now)
    }

    /// The number of workers still busy at `now` (O(c): for tests and reports, not per call).
    #[cfg(test)]
    pub(crate) fn busy(&self, now: u64) -> usize {
        self.tree[self.width..self.width + self.workers]
            .iter()
            .filter(|&&free| free > now)
            .count()
    }

    fn set(&mut self, worker: usize, free: u64) {
        let mut j = self.width + worker;
        self.tree[j] = free;
        while j > 1 {
            j /= 2;
            self.tree[j] = self.tree[2 * j].min(self.tree[2 * j + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree agrees with a linear scan of the free times, for every worker count and
    /// every prefix, over random work.
    #[test]
    fn the_tree_finds_the_first_free_worker_like_a_scan() {
        let mut rng = fastrand::Rng::with_seed(3);
        for workers in [1, 2, 3, 5, 8, 13] {
            let mut host = Host::new(workers);
            let mut free = vec![0u64; workers];
            let mut now = 0;
            for _ in 0..2_000 {
                now += rng.u64(0..50);
                let available = rng.usize(1..=workers);
                let service = rng.u64(0..400);
                let (worker, at) = (0..available)
                    .map(|w| (w, free[w]))
                    .min_by_key(|&(w, at)| (at, w))
                    .unwrap();
                assert_eq!(host.earliest(available), (worker, at));
                let max_wait = rng.bool().then(|| rng.u64(0..200));
                let start = host.enqueue(now, available, service, max_wait);
                let expected = at.max(now);
                if max_wait.is_some_and(|m| expected - now > m) {
                    assert_eq!(start, Err(expected));
                } else {
                    assert_eq!(start, Ok(expected));
                    free[worker] = expected + service;
                }
                let wait = (0..available).map(|w| free[w]).min().unwrap();
                assert_eq!(host.wait(now), wait.saturating_sub(now));
            }
        }
    }

    /// `start_if_called` is what `slow_to` then `enqueue` give, without changing the host,
    /// over random work, speeds and worker limits.
    #[test]
    fn a_call_not_made_starts_where_a_call_made_would() {
        let mut rng = fastrand::Rng::with_seed(5);
        for workers in [1, 2, 3, 8] {
            let mut host = Host::new(workers);
            let mut now = 0;
            for _ in 0..2_000 {
                now += rng.u64(0..80);
                let available = rng.usize(1..=workers);
                let factor = [1.0, 1.0, 3.0, 0.5, 30.0][rng.usize(..5)];
                let service = rng.u64(0..400);
                let before = host.clone();
                let asked = host.start_if_called(now, available, factor);
                assert_eq!(host.tree, before.tree, "asking changes nothing");
                host.slow_to(now, factor);
                assert_eq!(host.enqueue(now, available, service, None), Ok(asked));
            }
        }
    }

    #[test]
    fn a_change_of_speed_stretches_the_work_ahead() {
        let mut host = Host::new(2);
        let _ = host.enqueue(0, 2, 100, None);
        let _ = host.enqueue(0, 2, 300, None);
        let _ = host.enqueue(0, 2, 100, None); // worker 0: 0..100, 100..200; worker 1: 0..300
        host.slow_to(50, 10.0);
        assert_eq!(host.earliest(2), (0, 50 + 1_500));
        assert_eq!(host.wait(50), 1_500);
        host.slow_to(1_000, 1.0); // worker 0: 1550 -> 1055; worker 1: 2550 -> 1155
        assert_eq!(host.earliest(2), (0, 1_055));
        host.slow_to(2_000, 30.0); // all idle: nothing to stretch
        assert_eq!(host.wait(2_000), 0);
    }
}

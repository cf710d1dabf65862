//! The order in which one request asks a cluster's hosts: round-robin's host first, then the
//! other hosts that serve, then the rest.
//!
//! When round-robin's host refuses (its breaker is open), the request goes to the first of the
//! others that admits. Which one that is must not depend on where the refusing hosts sit in
//! the list: with the others asked in a fixed rotation, a host right after two ejected
//! neighbours came first two times in three and took 7/12 of four hosts' traffic against
//! the other survivor's 5/12. So the others are asked in two groups: those whose breaker reads
//! closed at the request's start (one atomic load each, [`Breaker::peek`](cutout::Breaker::peek))
//! first, then the rest, each group starting at its `turn % size`-th member, where `turn`
//! counts how often round-robin came back to the same first host. Each refusing host's share
//! then goes to every serving host in turn, exactly evenly over every cycle of tickets,
//! wherever the refusing ones sit (DESIGN §8: an ejected host's share spread evenly over the
//! healthy hosts). A host whose break ended is asked first by its own round-robin tickets,
//! which are its probes, as before. No allocation: the groups are bit sets.
//!
//! Clusters of more than [`MOST_GROUPED`] hosts fall back to the rotation alone: even for one
//! ejected host, within a few hosts of even for several.

/// The most hosts whose others are grouped (the bit sets' width).
pub const MOST_GROUPED: usize = 128;

/// The hosts of an `n`-host cluster in the order request `ticket` asks them, where `serving`
/// says whether host `k`'s breaker reads closed (see the module docs). Yields each host once.
pub fn order(n: usize, ticket: usize, serving: impl Fn(usize) -> bool) -> Order {
    let first = ticket % n.max(1);
    let turn = ticket / n.max(1);
    let others = if n > MOST_GROUPED {
        Others::Rotation { k: 0 }
    } else {
        let (mut closed, mut rest) = (0u128, 0u128);
        for host in (0..n).filter(|&h| h != first) {
            if serving(host) {
                closed |= 1 << host;
            } else {
                rest |= 1 << host;
            }
        }
        Others::Grouped { closed, rest }
    };
    Order {
        n,
        first,
        turn,
        asked_first: n == 0,
        others,
    }
}

/// An iterator over a cluster's hosts (see [`order`]).
#[derive(Debug, Clone)]
pub struct Order {
    n: usize,
    first: usize,
    turn: usize,
    asked_first: bool,
    others: Others,
}

#[derive(Debug, Clone)]
enum Others {
    /// The others not yet asked: those that read closed, then the rest.
    Grouped { closed: u128, rest: u128 },
    /// The others rotated by one more each turn; `k` of them asked.
    Rotation { k: usize },
}

impl Iterator for Order {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if !self.asked_first {
            self.asked_first = true;
            return Some(self.first);
        }
        match &mut self.others {
            Others::Grouped { closed, rest } => {
                let group = if *closed != 0 { closed } else { rest };
                take(group, self.turn)
            }
            Others::Rotation { k } => {
                if *k + 1 >= self.n {
                    return None;
                }
                let other = (self.turn + *k) % (self.n - 1);
                *k += 1;
                Some((self.first + 1 + other) % self.n)
            }
        }
    }
}

/// Takes the `turn % size`-th host of `group` out of it (None when it is empty).
fn take(group: &mut u128, turn: usize) -> Option<usize> {
    let size = group.count_ones() as usize;
    if size == 0 {
        return None;
    }
    let mut left = *group;
    for _ in 0..turn % size {
        left &= left - 1;
    }
    let host = left.trailing_zeros() as usize;
    *group &= !(1u128 << host);
    Some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which host serves each of `tickets` requests when the hosts in `refusing` refuse (and
    /// read open).
    fn served(n: usize, refusing: &[usize], tickets: usize) -> Vec<usize> {
        let mut counts = vec![0; n];
        for ticket in 0..tickets {
            let host = order(n, ticket, |h| !refusing.contains(&h))
                .find(|h| !refusing.contains(h))
                .expect("a host admits");
            counts[host] += 1;
        }
        counts
    }

    #[test]
    fn every_host_is_asked_once() {
        for n in [1, 2, 3, 7, 64, 127, 128, 129, 300] {
            for ticket in [0, 1, 5, 1_000_003] {
                let mut seen: Vec<usize> = order(n, ticket, |h| h % 3 != 0).collect();
                assert_eq!(seen[0], ticket % n, "round-robin's host first");
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n} ticket {ticket}");
            }
        }
    }

    #[test]
    fn refusing_neighbours_share_evenly_wherever_they_sit() {
        // Two ejected neighbours of four: the host after them used to take 7/12 against 5/12.
        assert_eq!(served(4, &[0, 1], 480), [0, 0, 240, 240]);
        // Three of seven, bunched and spread: every healthy host serves the same.
        for refusing in [[0, 1, 2], [1, 3, 5], [4, 5, 6]] {
            let counts = served(7, &refusing, 7 * 4 * 60);
            for host in (0..7).filter(|h| !refusing.contains(h)) {
                assert_eq!(counts[host], 7 * 60, "{refusing:?}: {counts:?}");
            }
        }
    }

    #[test]
    fn a_host_that_reads_closed_is_asked_before_one_that_does_not() {
        // Host 1 open, 2 closed: a request whose first host is 0 asks 2 before 1.
        let order: Vec<usize> = order(3, 0, |h| h != 1).collect();
        assert_eq!(order, [0, 2, 1]);
    }

    #[test]
    fn with_every_host_admitting_round_robin_decides() {
        assert_eq!(served(5, &[], 5_000), [1_000; 5]);
    }
}

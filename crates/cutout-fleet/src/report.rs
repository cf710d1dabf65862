//! What a pod publishes for a breaker, and the ring of time buckets in Redis that sums every
//! pod's report (the bytes, the sums, and the script's twin in Rust).
//!
//! The layout and its consistency are described in the `store` module, next to the script
//! that writes it; this module holds what both the task and the lab's model of Redis share:
//! what a pod publishes ([`Local`]), what it asks the script ([`Request`]), what it holds in
//! the ring ([`Ledger`]), the ring's bytes and sums ([`Ring`]), and [`apply`], which does to
//! a key's bytes what the script does (the lab's store; a test holds it to the script against
//! a real `redis-server`).

use cutout::{Snapshot, State};

use crate::recovery;

/// The first word of every ring: `CTFL` and the layout's version (1), little-endian. A value
/// under the key that does not start with it is another program's, and is left alone.
pub(crate) const MAGIC: i64 = 0x0001_4C46_5443;
/// Bytes of the header: magic, bucket length (ms), window (buckets), birth (µs on Redis's
/// clock), each a little-endian `i64`.
pub(crate) const HEADER: usize = 32;
/// Bytes of a bucket: epoch, calls, failures, slow, pods, open, each a little-endian `i64`.
pub(crate) const BUCKET: usize = 48;
/// Buckets a read sums: the staleness bound is cut in this many.
pub(crate) const WINDOW: i64 = 4;
/// The most buckets a window may have (a ring written by another version is refused beyond).
pub(crate) const MAX_WINDOW: i64 = 64;

/// What this pod publishes for one breaker, taken from its snapshot.
///
/// Counts are published while the breaker is closed (its trip window's), and for a short
/// grace after it trips from closed: open, it still shows the window that tripped it,
/// frozen, and the other pods should see that evidence even if they read only after this
/// pod has opened (otherwise every pod that opens withdraws its failures, and the last pods
/// of a fleet may never reach the fleet's minimum). After the grace, and in every other
/// state (half-open and recovering show the probes' or the ramp's counts), it publishes
/// zeros and the flag: a pod serving a long break must not hold an outage that is over up
/// for everyone, or every pod that closes after its probes would be re-opened by the fleet
/// until the last one had probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Local {
    /// Whether the breaker is closed: the only state a fleet trip opens, and the only one
    /// that may claim an open slot under a cap (a disabled breaker never can).
    pub(crate) closed: bool,
    /// Whether the breaker holds an open slot: open, half-open, recovering or isolated (the
    /// states in which it does not serve every call). Closed and disabled do not.
    pub(crate) open: bool,
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
}

impl Local {
    /// `tripped_lately`: the breaker was seen closed and is now open, within the grace.
    pub(crate) fn of(snapshot: &Snapshot, tripped_lately: bool) -> Local {
        let counts = Local {
            closed: false,
            open: false,
            calls: snapshot.calls,
            // A snapshot never shows more failures or slow calls than calls; clamp anyway,
            // so that the ring's sums keep failures and slow calls within the calls.
            failures: snapshot.failures.min(snapshot.calls),
            slow: snapshot.slow.min(snapshot.calls),
        };
        match snapshot.state {
            State::Closed => Local {
                closed: true,
                ..counts
            },
            State::Disabled => Local::default(),
            State::Open if tripped_lately => Local {
                open: true,
                ..counts
            },
            _ => Local {
                open: true,
                ..Local::default()
            },
        }
    }

    /// What this pod's share of the ring is to be.
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            calls: self.calls,
            failures: self.failures,
            slow: self.slow,
            open: self.open,
        }
    }
}

/// One pod's share of a bucket (besides the 1 it adds to the bucket's pods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
    pub(crate) open: bool,
}

/// What this pod holds in a key's ring, as far as it knows for sure: its share, in which
/// bucket, in which life of the key (the key's birth: a key deleted, expired or lost with a
/// restart and written anew is another life, in which this pod holds nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ledger {
    pub(crate) born: u64,
    pub(crate) epoch: i64,
    pub(crate) counts: Counts,
}

/// The ring's geometry and expiry a pod asks for (a new key takes them; an existing key
/// keeps its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) bucket_ms: u64,
    pub(crate) window: i64,
    pub(crate) ttl_ms: u64,
}

impl Geometry {
    /// The staleness bound cut in [`WINDOW`] buckets (rounded up, at least 1 ms), the key
    /// kept for `retention` after the last bucket a writer opened.
    pub(crate) fn new(staleness_ms: u64, retention_ms: u64) -> Geometry {
        Geometry {
            bucket_ms: staleness_ms.div_ceil(WINDOW as u64).max(1),
            window: WINDOW,
            ttl_ms: retention_ms.max(1),
        }
    }
}

/// One call of the script: this pod's share to be, where it holds one now, and whether this
/// is a claim of an open slot under a cap.
///
/// Opaque outside the crate (cutout-lab and cutout-bench hand it from a
/// [`Publisher`](crate::sim::Publisher) to a [`Store`](crate::sim::Store) or a
/// [`Connection`](crate::sim::Connection)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub(crate) geometry: Geometry,
    /// 0: publish. Otherwise a claim: write (with the open flag set) only if fewer than
    /// `cap` other pods hold an open slot in the window.
    pub(crate) cap: u32,
    pub(crate) report: Counts,
    pub(crate) ledger: Option<Ledger>,
    /// Whether the breaker was closed when the report was taken (never sent: for the reply).
    pub(crate) closed: bool,
    /// What the round asks of the breaker's recovery key (fleet recovery; see the
    /// `recovery` module).
    pub(crate) recovery: recovery::Args,
}

impl Request {
    /// The script's `ARGV`, in its order: 14, or 18 for a round that asks anything of the
    /// recovery key (a closed pod's round, the common one, sends and parses 4 fewer).
    pub(crate) fn args(&self) -> Vec<String> {
        let (born, epoch, held) = match self.ledger {
            Some(ledger) => (ledger.born.to_string(), ledger.epoch, ledger.counts),
            None => (String::new(), 0, Counts::default()),
        };
        let text = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
        let ask = self.recovery.ask;
        let mut args = vec![
            self.geometry.bucket_ms.to_string(),
            self.geometry.window.to_string(),
            self.geometry.ttl_ms.to_string(),
            self.cap.to_string(),
            self.report.calls.to_string(),
            self.report.failures.to_string(),
            self.report.slow.to_string(),
            u8::from(self.report.open).to_string(),
            born,
            epoch.to_string(),
            held.calls.to_string(),
            held.failures.to_string(),
            held.slow.to_string(),
            u8::from(held.open).to_string(),
        ];
        if self.recovery.any() {
            args.extend([
                text(self.recovery.publish_age_ms),
                text(ask.map(|ask| ask.opened_age_ms)),
                text(ask.map(|ask| ask.remaining_ms)),
                text(ask.map(|ask| ask.spacing_us)),
            ]);
        }
        args
    }

    /// What this pod holds after the script answered `outcome`: the share it wrote, or (a
    /// refused claim wrote nothing) what it held before.
    pub(crate) fn ledger_after(&self, outcome: &Outcome) -> Option<Ledger> {
        if !outcome.wrote {
            return self.ledger;
        }
        Some(Ledger {
            born: outcome.born,
            epoch: outcome.epoch,
            counts: Counts {
                open: self.report.open || self.cap > 0,
                ..self.report
            },
        })
    }
}

/// What the script answers besides the ring: Redis's clock, the bucket it wrote in, whether
/// it wrote, and the key's birth; and, for a round that asked the recovery key anything,
/// Redis's clock in µs, the latest recovery's date and the slot granted (µs; 0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) now_ms: u64,
    pub(crate) epoch: i64,
    pub(crate) wrote: bool,
    pub(crate) born: u64,
    pub(crate) now_us: u64,
    pub(crate) recovered_us: u64,
    pub(crate) slot_us: u64,
}

/// A key's value, read: the header and every bucket, `[epoch, calls, failures, slow, pods,
/// open]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ring {
    pub(crate) bucket_ms: u64,
    pub(crate) window: i64,
    pub(crate) born: u64,
    pub(crate) buckets: Vec<[i64; 6]>,
}

/// The sums of a ring's window, and the pods that left it lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sums {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
    pub(crate) pods: u64,
    pub(crate) open: u64,
    /// Pods in the buckets of the window before this one: their last report left the
    /// window less than a window ago.
    pub(crate) gone: u64,
}

fn word(bytes: &[u8], at: usize) -> Option<i64> {
    let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(i64::from_le_bytes(raw))
}

impl Ring {
    /// Reads a key's value; `None` for anything but a ring of this layout (another program's
    /// string, another version's).
    pub(crate) fn parse(bytes: &[u8]) -> Option<Ring> {
        let (magic, bucket_ms, window, born) = (
            word(bytes, 0)?,
            word(bytes, 8)?,
            word(bytes, 16)?,
            word(bytes, 24)?,
        );
        if magic != MAGIC || bucket_ms < 1 || !(1..=MAX_WINDOW).contains(&window) || born < 0 {
            return None;
        }
        let slots = usize::try_from(2 * window).ok()?;
        if bytes.len() != HEADER + slots * BUCKET {
            return None;
        }
        let buckets = (0..slots)
            .map(|slot| {
                let at = HEADER + slot * BUCKET;
                let mut bucket = [0; 6];
                for (i, value) in bucket.iter_mut().enumerate() {
                    *value = word(bytes, at + 8 * i).unwrap_or_default();
                }
                bucket
            })
            .collect();
        Some(Ring {
            bucket_ms: bucket_ms.unsigned_abs(),
            window,
            born: born.unsigned_abs(),
            buckets,
        })
    }

    /// The bucket of `epoch` (the ring holds two windows' worth).
    fn slot(&self, epoch: i64) -> usize {
        let slots = 2 * self.window;
        usize::try_from(epoch.rem_euclid(slots)).unwrap_or_default()
    }

    /// The counts of `epoch`'s bucket, if the ring still holds that epoch there.
    fn bucket(&self, epoch: i64) -> Option<&[i64; 6]> {
        self.buckets
            .get(self.slot(epoch))
            .filter(|bucket| bucket[0] == epoch)
    }

    /// The sums of the window that ends with the bucket of `epoch`, and the pods of the window
    /// before it. A bucket that holds another epoch than its place in the ring asks for is
    /// an old one not yet reused: it counts for nothing. Negative counts (none of this
    /// layout's writes makes one) count as zero.
    pub(crate) fn sums(&self, epoch: i64) -> Sums {
        let mut sums = Sums::default();
        let count = |value: i64| value.max(0).unsigned_abs();
        for k in (epoch - self.window + 1)..=epoch {
            if let Some(bucket) = self.bucket(k) {
                sums.calls = sums.calls.saturating_add(count(bucket[1]));
                sums.failures = sums.failures.saturating_add(count(bucket[2]));
                sums.slow = sums.slow.saturating_add(count(bucket[3]));
                sums.pods = sums.pods.saturating_add(count(bucket[4]));
                sums.open = sums.open.saturating_add(count(bucket[5]));
            }
        }
        for k in (epoch - 2 * self.window + 1)..=(epoch - self.window) {
            if let Some(bucket) = self.bucket(k) {
                sums.gone = sums.gone.saturating_add(count(bucket[4]));
            }
        }
        sums
    }
}

/// What [`apply`] did besides answering: whether the key's expiry was (re)set to the
/// request's time to live (the key was created, or a bucket was opened for a new epoch), and
/// whether the recovery key was written (its expiry set to the time to live too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) outcome: Outcome,
    pub(crate) expiry: bool,
    pub(crate) recovery_written: bool,
}

/// A recovery key's value, read: the latest recovery's date and the next free slot (µs on
/// Redis's clock); `None` for anything but a value of this layout.
pub(crate) fn parse_recovery(bytes: &[u8]) -> Option<(i64, i64)> {
    let (magic, recovered, next) = (word(bytes, 0)?, word(bytes, 8)?, word(bytes, 16)?);
    (bytes.len() == recovery::BYTES && magic == recovery::MAGIC && recovered >= 0 && next >= 0)
        .then_some((recovered, next))
}

fn put(bytes: &mut [u8], at: usize, words: &[i64]) {
    for (i, value) in words.iter().enumerate() {
        if let Some(slot) = bytes.get_mut(at + 8 * i..at + 8 * i + 8) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
    }
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The script, in Rust: does to a key's value (`None`: no key) what [`SCRIPT`] does with
/// `request` at `now_us` on Redis's clock, step for step, and answers what it answers.
/// `None` where the script answers `CUTOUT_FOREIGN_KEY string` (and writes nothing).
///
/// [`SCRIPT`]: crate::store::SCRIPT
pub(crate) fn apply(
    value: &mut Option<Vec<u8>>,
    recovered: &mut Option<Vec<u8>>,
    request: &Request,
    now_us: u64,
) -> Option<Applied> {
    let now_ms = now_us / 1000;
    let mut expiry = false;
    if let Some(bytes) = value.as_deref() {
        Ring::parse(bytes)?;
    }
    let args = request.recovery;
    let (mut recovered_us, mut next_us) = (0, 0);
    if args.any()
        && let Some(bytes) = recovered.as_deref()
    {
        (recovered_us, next_us) = parse_recovery(bytes)?;
    }
    if value.is_none() {
        let geometry = request.geometry;
        let slots = usize::try_from(2 * geometry.window).ok()?;
        let mut bytes = vec![0; HEADER + slots * BUCKET];
        put(
            &mut bytes,
            0,
            &[
                MAGIC,
                signed(geometry.bucket_ms),
                geometry.window,
                signed(now_us),
            ],
        );
        expiry = true;
        *value = Some(bytes);
    }
    let bytes = value.as_mut()?;
    // The recovery key: publish a recovery (the latest date wins), grant a slot.
    let now = signed(now_us);
    let micros = |ms: u64| signed(ms).saturating_mul(1000);
    let mut written = false;
    let mut slot = 0;
    if let Some(age) = args.publish_age_ms {
        let at = now.saturating_sub(micros(age));
        if at > recovered_us {
            recovered_us = at;
            written = true;
        }
    }
    if let Some(ask) = args.ask {
        let opened = now.saturating_sub(micros(ask.opened_age_ms));
        if recovered_us > 0 && recovered_us > opened {
            let at = next_us.max(now);
            if at < now.saturating_add(micros(ask.remaining_ms)) {
                slot = at;
                next_us = at.saturating_add(signed(ask.spacing_us));
                written = true;
            }
        }
    }
    if written {
        let mut value = vec![0; recovery::BYTES];
        put(&mut value, 0, &[recovery::MAGIC, recovered_us, next_us]);
        *recovered = Some(value);
    }
    let answer = |epoch, wrote, born| Outcome {
        now_ms,
        epoch,
        wrote,
        born,
        now_us,
        recovered_us: if args.any() {
            recovered_us.unsigned_abs()
        } else {
            0
        },
        slot_us: slot.unsigned_abs(),
    };
    let (bucket_ms, window, born) = (
        word(bytes, 8)?.max(1),
        word(bytes, 16)?,
        word(bytes, 24)?.unsigned_abs(),
    );
    let epoch = signed(now_ms) / bucket_ms;
    let slots = 2 * window;
    let offset =
        |e: i64| HEADER + usize::try_from(e.rem_euclid(slots)).unwrap_or_default() * BUCKET;
    let read = |bytes: &[u8], e: i64| -> [i64; 6] {
        let mut bucket = [0; 6];
        for (i, value) in bucket.iter_mut().enumerate() {
            *value = word(bytes, offset(e) + 8 * i).unwrap_or_default();
        }
        bucket
    };
    let at = offset(epoch);
    let mut current = read(bytes, epoch);
    let reset = current[0] != epoch;
    if reset {
        current = [epoch, 0, 0, 0, 0, 0];
    }
    let held = request.ledger.filter(|ledger| ledger.born == born);
    let mut open = i64::from(request.report.open);
    if request.cap > 0 {
        let mut others: i64 = ((epoch - window + 1)..=epoch)
            .filter_map(|k| {
                let bucket = read(bytes, k);
                (bucket[0] == k).then_some(bucket[5])
            })
            .sum();
        if let Some(ledger) = held
            && ledger.epoch > epoch - window
            && ledger.epoch <= epoch
            && read(bytes, ledger.epoch)[0] == ledger.epoch
        {
            others -= i64::from(ledger.counts.open);
        }
        if others >= i64::from(request.cap) {
            return Some(Applied {
                outcome: answer(epoch, false, born),
                expiry,
                recovery_written: written,
            });
        }
        open = 1;
    }
    let withdraw = |bucket: &mut [i64; 6], counts: &Counts| {
        let shares = [
            signed(counts.calls),
            signed(counts.failures),
            signed(counts.slow),
            1,
            i64::from(counts.open),
        ];
        for (value, share) in bucket[1..].iter_mut().zip(shares) {
            *value -= (*value).min(share);
        }
    };
    match held {
        // Its share is in this bucket, unless the bucket was just reset for this epoch.
        Some(ledger) if ledger.epoch == epoch && !reset => {
            withdraw(&mut current, &ledger.counts);
        }
        Some(ledger) if ledger.epoch != epoch => {
            let mut prior = read(bytes, ledger.epoch);
            if prior[0] == ledger.epoch {
                withdraw(&mut prior, &ledger.counts);
                put(bytes, offset(ledger.epoch), &prior);
            }
        }
        _ => {}
    }
    let report = request.report;
    current[1] += signed(report.calls);
    current[2] += signed(report.failures);
    current[3] += signed(report.slow);
    current[4] += 1;
    current[5] += open;
    put(bytes, at, &current);
    Some(Applied {
        outcome: answer(epoch, true, born),
        expiry: expiry || reset,
        recovery_written: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEOMETRY: Geometry = Geometry {
        bucket_ms: 250,
        window: 4,
        ttl_ms: 60_000,
    };

    fn request(calls: u64, failures: u64, ledger: Option<Ledger>) -> Request {
        Request {
            geometry: GEOMETRY,
            cap: 0,
            report: Counts {
                calls,
                failures,
                slow: 0,
                open: false,
            },
            ledger,
            closed: true,
            recovery: recovery::Args::default(),
        }
    }

    /// One pod's rounds: each request carries what the pod learnt from the last reply.
    fn round(
        value: &mut Option<Vec<u8>>,
        ledger: &mut Option<Ledger>,
        request: Request,
        at_ms: u64,
    ) -> Sums {
        let request = Request {
            ledger: *ledger,
            ..request
        };
        let applied = apply(value, &mut None, &request, at_ms * 1000).expect("a ring");
        *ledger = request.ledger_after(&applied.outcome);
        Ring::parse(value.as_ref().unwrap())
            .unwrap()
            .sums(applied.outcome.epoch)
    }

    #[test]
    fn a_pod_counts_once_however_often_it_publishes_and_moves() {
        let mut value = None;
        let (mut a, mut b) = (None, None);
        let start = 1_700_000_000_000;
        // Both pods publish every 250 ms for 3 s: each moves its share to the newest bucket.
        for tick in 0..12 {
            let now = start + tick * 250;
            let sums = round(&mut value, &mut a, request(10 + tick, 5, None), now);
            assert_eq!(
                (sums.pods, sums.calls),
                (
                    1 + u64::from(tick > 0),
                    10 + tick + if tick > 0 { 20 } else { 0 }
                )
            );
            let sums = round(&mut value, &mut b, request(20, 20, None), now + 100);
            assert_eq!((sums.pods, sums.calls, sums.failures), (2, 30 + tick, 25));
            assert_eq!(sums.gone, 0);
        }
        // Within a bucket, a new report replaces the last one.
        let now = start + 12 * 250;
        round(&mut value, &mut a, request(1, 0, None), now);
        let sums = round(&mut value, &mut a, request(2, 1, None), now + 10);
        assert_eq!((sums.pods, sums.calls, sums.failures), (2, 22, 21));
    }

    #[test]
    fn a_departed_pod_leaves_the_window_within_the_staleness_bound() {
        let mut value = None;
        let (mut gone, mut live) = (None, None);
        let start = 1_700_000_000_000;
        round(&mut value, &mut gone, request(40, 40, None), start);
        // 4 buckets of 250 ms: `gone` counts while its bucket is one of the last 4.
        let mut left = None;
        for ms in (0..2_000).step_by(50) {
            let sums = round(&mut value, &mut live, request(1, 0, None), start + ms);
            if sums.pods == 1 && left.is_none() {
                left = Some(ms);
                assert_eq!(sums.gone, 1, "gone lately");
            }
        }
        let left = left.expect("it left");
        assert!((750..=1_000).contains(&left), "left after {left} ms");
    }

    #[test]
    fn what_a_pod_does_not_know_it_holds_is_never_taken_from_the_others() {
        let mut value = None;
        let (mut a, mut b) = (None, None);
        let start = 1_700_000_000_000;
        round(&mut value, &mut a, request(10, 10, None), start);
        round(&mut value, &mut b, request(30, 0, None), start + 1);
        // `a`'s reply is lost: it forgets what it holds, and adds anew without taking
        // anything away: its share counts twice until the older copy leaves the window.
        a = None;
        let sums = round(&mut value, &mut a, request(12, 12, None), start + 300);
        assert_eq!((sums.pods, sums.calls, sums.failures), (3, 52, 22));
        // A ledger of another life of the key (deleted and written anew) takes nothing.
        let mut stale = a.map(|ledger| Ledger {
            born: ledger.born + 1,
            ..ledger
        });
        let sums = round(&mut value, &mut stale, request(1, 1, None), start + 310);
        assert_eq!((sums.pods, sums.calls), (4, 53));
        // A withdrawal never goes below zero, nor reaches into another bucket.
        let held = stale.unwrap();
        let mut lying = Some(Ledger {
            counts: Counts {
                calls: 1_000,
                failures: 1_000,
                slow: 1_000,
                open: true,
            },
            ..held
        });
        let sums = round(&mut value, &mut lying, request(0, 0, None), start + 320);
        assert_eq!((sums.calls, sums.failures, sums.open), (40, 10, 0));
        let ring = Ring::parse(value.as_ref().unwrap()).unwrap();
        assert!(ring.buckets.iter().flatten().all(|&v| v >= 0), "{ring:?}");
    }

    #[test]
    fn a_claim_takes_a_slot_only_while_fewer_than_the_cap_are_open() {
        let mut value = None;
        let start = 1_700_000_000_000;
        let mut ledgers = [None; 4];
        for (pod, ledger) in ledgers.iter_mut().enumerate() {
            round(
                &mut value,
                ledger,
                request(10, 10, None),
                start + pod as u64,
            );
        }
        let mut claimed = 0;
        for ledger in &mut ledgers {
            let claim = Request {
                cap: 2,
                ledger: *ledger,
                ..request(10, 10, None)
            };
            let applied = apply(&mut value, &mut None, &claim, (start + 10) * 1000).unwrap();
            *ledger = claim.ledger_after(&applied.outcome);
            claimed += usize::from(applied.outcome.wrote);
        }
        assert_eq!(claimed, 2);
        let sums = Ring::parse(value.as_ref().unwrap())
            .unwrap()
            .sums(i64::try_from((start + 10) / 250).unwrap());
        assert_eq!((sums.pods, sums.open, sums.calls), (4, 2, 40));
        assert_eq!(ledgers.iter().filter(|l| l.unwrap().counts.open).count(), 2);
    }

    #[test]
    fn other_values_are_not_rings() {
        let mut value = None;
        apply(&mut value, &mut None, &request(1, 0, None), 5_000_000).unwrap();
        let ring = value.clone().unwrap();
        assert!(Ring::parse(&ring).is_some());
        for bad in [
            Vec::new(),
            b"not a ring".to_vec(),
            ring[..ring.len() - 1].to_vec(),
            [ring.as_slice(), &[0]].concat(),
            [&[0u8; 8][..], &ring[8..]].concat(),
        ] {
            assert_eq!(Ring::parse(&bad), None);
            let mut foreign = Some(bad.clone());
            assert_eq!(
                apply(&mut foreign, &mut None, &request(1, 0, None), 5_000_000),
                None
            );
            assert_eq!(foreign, Some(bad), "left as it was");
        }
    }

    #[test]
    fn what_is_published_follows_the_state() {
        let local = Local {
            closed: true,
            open: false,
            calls: 40,
            failures: 12,
            slow: 3,
        };
        assert_eq!(
            local.counts(),
            Counts {
                calls: 40,
                failures: 12,
                slow: 3,
                open: false
            }
        );
        let args = request(40, 12, None).args();
        assert_eq!(
            args[..9],
            ["250", "4", "60000", "0", "40", "12", "0", "0", ""]
        );
    }
}

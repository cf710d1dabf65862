//! A full listener's fair share: the idle connection of the source holding the most that a
//! newcomer from another source takes the place of.
//!
//! Without it, one client holding `max-connections` silent connections refuses every other
//! client until `header-read-timeout` closes them (a review held 150 silent connections
//! against `max-connections = 100` and no one else got in). A static per-source cap would stop
//! that, at the price of every deployment whose clients come through one address (a load
//! balancer, a sidecar, a NAT), which it would hold to a fraction of the listener. So no source
//! is capped while there is room. When the listener is full, a connection from source *B*
//! asks an idle connection (no request in flight) of the source *A* holding the most to close,
//! if *A* holds at least two more than *B* would: one that never sent a request first, then
//! one on which no byte moved for [`QUIET`], else the one accepted first. The asked one
//! shuts down as hyper's graceful shutdown does (a response still in hyper's buffer is
//! flushed first, so none is cut; its socket then closes as a finished one does). The asked one is
//! marked, so a burst of newcomers asks as many connections as it has members; one that turns
//! out busy when its task looks (a request just began) declines and the newcomer asks another,
//! for up to a second, then is closed as a full listener's newcomer always was. One client
//! alone can fill the listener; it cannot keep another out; two clients end up sharing it
//! about evenly.
//!
//! Not covered (each a limit of this rule, not of a bug): a client holding its connections
//! with requests in flight (an upload trickled a byte at a time) is never asked, since closing
//! one cuts a request; `request-timeout` bounds each. A client spread over many sources (many
//! IPv4 addresses, or IPv6 prefixes wider than a /64) holding one or two connections each is
//! never the largest by two.
//!
//! A source is an IPv4 address, or an IPv6 /64 (one host's usual allocation: its addresses
//! are one client); an IPv4-mapped IPv6 address is its IPv4 one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Who a connection is from, for the fair share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// An IPv4 address (or an IPv4-mapped IPv6 one).
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6([u8; 8]),
}

impl Source {
    /// The source of a peer at `ip`.
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4.octets()),
                None => {
                    let octets = v6.octets();
                    let mut prefix = [0; 8];
                    prefix.copy_from_slice(&octets[..8]);
                    Source::V6(prefix)
                }
            },
        }
    }
}

impl std::fmt::Display for Source {
    /// `10.0.0.7`, or `2001:db8:1:2::/64`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::V4(octets) => write!(f, "{}", std::net::Ipv4Addr::from(*octets)),
            Source::V6(prefix) => {
                let mut octets = [0; 16];
                octets[..8].copy_from_slice(prefix);
                write!(f, "{}/64", std::net::Ipv6Addr::from(octets))
            }
        }
    }
}

/// How long no byte must have moved on a connection (either way) for it to be asked to
/// close before connections that moved some (a client between requests).
pub const QUIET: Duration = Duration::from_millis(100);

/// One open connection, as the share sees it.
///
/// # Orderings
/// `in_flight`, `served` and `last` are written by the connection's own task (its service and
/// its stream run inside the connection's future) and read, `Relaxed`, by the accept loop
/// picking a connection to ask. A stale read can only pick a connection that has just become
/// busy; its task checks again before it closes (in the same task as the service and the
/// stream, so that check is exact), and declines. `asked` is a flag the accept loop sets with
/// a compare-exchange (so two newcomers never ask one connection) and the task clears when it
/// declines; it guards nothing else. `h2` is written and read by the connection's own task
/// only.
#[derive(Debug)]
pub struct Conn {
    /// Requests received whose response body has not been sent (or dropped) yet.
    in_flight: AtomicUsize,
    /// Requests received on it so far.
    served: AtomicU64,
    /// When it was accepted.
    since: Instant,
    /// Nanoseconds from `since` to the last read or write that moved bytes.
    last: AtomicU64,
    /// Whether a newcomer has asked it to close and it has not declined.
    asked: AtomicBool,
    /// Told when it should close to make room.
    evict: Notify,
    /// Whether it speaks HTTP/2 (its first bytes were the client preface, or ALPN chose
    /// `h2`).
    h2: AtomicBool,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            since: Instant::now(),
            last: AtomicU64::new(0),
            asked: AtomicBool::new(false),
            evict: Notify::new(),
            h2: AtomicBool::new(false),
        }
    }

    /// It speaks HTTP/2.
    pub fn mark_h2(&self) {
        self.h2.store(true, Ordering::Relaxed);
    }

    /// Whether it speaks HTTP/2.
    pub fn is_h2(&self) -> bool {
        self.h2.load(Ordering::Relaxed)
    }

    /// Bytes moved on it now.
    pub fn touch(&self) {
        let nanos = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(nanos, Ordering::Relaxed);
    }

    /// When bytes last moved on it (when it was accepted, if never).
    pub fn last_moved(&self) -> Instant {
        self.since + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }

    /// Whether no byte moved on it for [`QUIET`]: preferred when one is asked to close.
    pub fn quiet(&self) -> bool {
        self.last_moved().elapsed() >= QUIET
    }

    /// It was asked to close but is not idle (its task found a request begun, or bytes
    /// moving): it may be asked again later.
    pub fn decline(&self) {
        self.asked.store(false, Ordering::Relaxed);
    }

    /// A request arrived: until the returned guard is dropped (with its response body), the
    /// connection is not closed for a newcomer.
    pub fn request(self: &Arc<Self>) -> InFlight {
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self), before == 0)
    }

    /// Whether a request is in flight.
    pub fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
    }

    /// Resolves when the connection is asked to close for a newcomer.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

/// A request in flight on a [`Conn`] (see [`Conn::request`]), and whether no other was in
/// flight on it when it began (then it is the one its connection's slot stands for:
/// [`crate::budget`]).
#[derive(Debug)]
pub struct InFlight(Arc<Conn>, bool);

impl InFlight {
    /// Whether no other request was in flight on its connection when it began: at most one
    /// such request is in flight on a connection at a time.
    pub fn alone(&self) -> bool {
        self.1
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A listener's open connections by source.
#[derive(Debug, Default)]
pub struct Book {
    by_source: Mutex<HashMap<Source, Vec<Arc<Conn>>>>,
}

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Source, Vec<Arc<Conn>>>> {
        self.by_source
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Enters a connection from `source`; it leaves the book when the entry is dropped.
    pub fn enter(self: &Arc<Self>, source: Source) -> Entry {
        let conn = Arc::new(Conn::new());
        self.lock()
            .entry(source)
            .or_default()
            .push(Arc::clone(&conn));
        Entry {
            book: Arc::clone(self),
            source,
            conn,
        }
    }

    /// How many connections `source` holds.
    pub fn held_by(&self, source: Source) -> usize {
        self.lock().get(&source).map_or(0, Vec::len)
    }

    /// For a newcomer from `source` at a full listener: asks an idle connection of the source
    /// holding the most to close, if that source holds at least two more than `source` would
    /// with the newcomer. Which one: among its idle connections no other newcomer has asked,
    /// one that has not sent a request yet (the oldest of them), else the one accepted first.
    /// The source asked, if one was.
    pub fn make_room(&self, source: Source) -> Option<Source> {
        let book = self.lock();
        let own = book.get(&source).map_or(0, Vec::len);
        let (&largest, conns) = book
            .iter()
            .filter(|(s, _)| **s != source)
            .max_by_key(|(_, conns)| conns.len())?;
        if conns.len() < own + 1 + 2 {
            return None;
        }
        let mut idle: Vec<&Arc<Conn>> = conns
            .iter()
            .filter(|conn| !conn.busy() && !conn.asked.load(Ordering::Relaxed))
            .collect();
        idle.sort_by_key(|conn| {
            (
                conn.served.load(Ordering::Relaxed) > 0,
                !conn.quiet(),
                conn.since,
            )
        });
        let victim = idle.into_iter().find(|conn| {
            conn.asked
                .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        })?;
        victim.evict.notify_one();
        Some(largest)
    }
}

/// A connection in the [`Book`], removed when dropped.
#[derive(Debug)]
pub struct Entry {
    book: Arc<Book>,
    source: Source,
    conn: Arc<Conn>,
}

impl Entry {
    /// The connection.
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut book = self.book.lock();
        if let Some(conns) = book.get_mut(&self.source) {
            conns.retain(|conn| !Arc::ptr_eq(conn, &self.conn));
            if conns.is_empty() {
                book.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn v4(last: u8) -> Source {
        Source::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn an_ipv6_slash_64_is_one_source_and_a_mapped_ipv4_is_its_ipv4() {
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Source::of(a.into()), Source::of(b.into()));
        assert_ne!(Source::of(a.into()), Source::of(c.into()));
        let mapped: Ipv6Addr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(Source::of(mapped.into()), v4(7));
    }

    #[test]
    fn a_newcomer_takes_the_place_of_an_idle_connection_of_the_largest_source() {
        let book = Arc::new(Book::default());
        let hog: Vec<Entry> = (0..4).map(|_| book.enter(v4(1))).collect();
        std::thread::sleep(QUIET);
        // A request in flight on the first two: they are kept.
        let _busy = [hog[0].conn().request(), hog[1].conn().request()];
        // The third served a request that finished: idle, but the fourth never sent one.
        drop(hog[2].conn().request());
        assert_eq!(book.make_room(v4(2)), Some(v4(1)));
        // The one asked is the one that never sent a request.
        let asked = tokio_test_notified(hog[3].conn());
        assert!(asked, "the silent connection was asked to close");
        assert!(!tokio_test_notified(hog[2].conn()));
    }

    #[test]
    fn a_source_is_never_asked_to_make_room_for_itself_or_for_a_near_equal() {
        let book = Arc::new(Book::default());
        let a: Vec<Entry> = (0..3).map(|_| book.enter(v4(1))).collect();
        std::thread::sleep(QUIET);
        assert_eq!(book.make_room(v4(1)), None, "not for itself");
        let b: Vec<Entry> = (0..2).map(|_| book.enter(v4(2))).collect();
        // B would hold 3 with the newcomer, A holds 3: no.
        assert_eq!(book.make_room(v4(2)), None);
        // C would hold 1; A holds 3: yes.
        assert_eq!(book.make_room(v4(3)), Some(v4(1)));
        drop((a, b));
        assert_eq!(book.held_by(v4(1)), 0);
        assert!(
            book.lock().is_empty(),
            "sources leave with their last connection"
        );
    }

    #[test]
    fn busy_connections_are_never_asked() {
        let book = Arc::new(Book::default());
        let a: Vec<Entry> = (0..5).map(|_| book.enter(v4(1))).collect();
        let _busy: Vec<InFlight> = a.iter().map(|e| e.conn().request()).collect();
        assert_eq!(book.make_room(v4(2)), None);
    }

    #[test]
    fn a_burst_asks_as_many_connections_as_it_has_members_and_a_decline_frees_one() {
        let book = Arc::new(Book::default());
        let a: Vec<Entry> = (0..6).map(|_| book.enter(v4(1))).collect();
        std::thread::sleep(QUIET);
        for _ in 0..3 {
            assert_eq!(book.make_room(v4(2)), Some(v4(1)));
        }
        let asked = a.iter().filter(|e| tokio_test_notified(e.conn())).count();
        assert_eq!(asked, 3, "three newcomers, three connections asked");
        // A request in flight: never asked.
        let _busy = a[5].conn().request();
        assert_eq!(
            book.make_room(v4(2)),
            Some(v4(1)),
            "the fourth is still idle"
        );
        assert_eq!(book.make_room(v4(2)), Some(v4(1)), "the fifth too");
        assert_eq!(book.make_room(v4(2)), None, "the sixth is busy");
        // One that declines can be asked again.
        let declined = a
            .iter()
            .find(|e| e.conn().asked.load(Ordering::Relaxed))
            .unwrap();
        declined.conn().decline();
        assert_eq!(book.make_room(v4(2)), Some(v4(1)));
    }

    /// Whether `conn` was asked to close (its notification is stored until awaited).
    fn tokio_test_notified(conn: &Conn) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut evicted = std::pin::pin!(conn.evicted());
        evicted.as_mut().poll(&mut cx).is_ready()
    }
}

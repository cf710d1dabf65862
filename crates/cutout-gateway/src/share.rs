//! A full listener's fair share: the idle connection of the source holding the most that a
//! newcomer from another source takes the place of.
//!
//! Without it, one client holding `max-connections` silent connections refuses every other
//! client until `header-read-timeout` closes them (a review held 150 silent connections
//! against `max-connections = 100` and no one else got in). A static per-source cap would stop
//! that, at the price of every deployment whose clients come through one address (a load
//! balancer, a sidecar, a NAT), which it would hold to a fraction of the listener. So no source
//! is capped while there is room. When the listener is full, a connection from source *B*
//! closes an idle connection (no request in flight: one that never sent a head first, else the
//! one idle the longest) of the source *A* holding the most, if *A* holds at least two more
//! than *B* would; the newcomer takes the slot it frees. Otherwise it is refused as before.
//! One client alone can fill the listener; it cannot keep another out; two clients end up
//! sharing it about evenly.
//!
//! A source is an IPv4 address, or an IPv6 /64 (one host's usual allocation: its addresses
//! are one client); an IPv4-mapped IPv6 address is its IPv4 one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

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

/// One open connection, as the share sees it.
///
/// # Orderings
/// `in_flight` and `served` are written by the connection's own task (its service runs inside
/// the connection's future) and read, `Relaxed`, by the accept loop picking a connection to
/// close. A stale read can only pick a connection whose request has just begun; the
/// connection's task checks `in_flight` again before it closes (in the same task as the
/// service, so that check is exact), and keeps a connection whose request has begun.
#[derive(Debug)]
pub struct Conn {
    /// Requests received whose response body has not been sent (or dropped) yet.
    in_flight: AtomicUsize,
    /// Requests received on it so far.
    served: AtomicU64,
    /// When it was accepted.
    since: Instant,
    /// Told when it should close to make room.
    evict: Notify,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            since: Instant::now(),
            evict: Notify::new(),
        }
    }

    /// A request arrived: until the returned guard is dropped (with its response body), the
    /// connection is not closed for a newcomer.
    pub fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
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

/// A request in flight on a [`Conn`] (see [`Conn::request`]).
#[derive(Debug)]
pub struct InFlight(Arc<Conn>);

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
    /// with the newcomer. Which one: a connection that has not sent a request yet (the oldest
    /// of them), else the one accepted first among the idle ones. The source it was taken
    /// from, if one was asked.
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
        let victim = conns
            .iter()
            .filter(|conn| !conn.busy())
            .min_by_key(|conn| (conn.served.load(Ordering::Relaxed) > 0, conn.since))?;
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

    /// Whether `conn` was asked to close (its notification is stored until awaited).
    fn tokio_test_notified(conn: &Conn) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut evicted = std::pin::pin!(conn.evicted());
        evicted.as_mut().poll(&mut cx).is_ready()
    }
}

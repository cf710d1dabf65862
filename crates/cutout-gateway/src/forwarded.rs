//! `X-Forwarded-For` and `Forwarded` as the gateway passes them on, by `trusted-hops`: how many
//! proxies in front of the gateway (load balancers, CDNs) are trusted to say who the client is.
//!
//! With `trusted-hops = 0` (the default: the gateway is the edge) a client's own
//! `X-Forwarded-For` and `Forwarded` are claims anyone can make, so they are dropped: the
//! upstream sees `X-Forwarded-For: <peer>`. With `trusted-hops = N`, the last `N` addresses of
//! the received `X-Forwarded-For` (every header line of it, in order) were written by the
//! trusted proxies and are kept, the rest (written by the client) dropped, and the peer is
//! appended; the client is the address the outermost trusted proxy saw, `N` from the right,
//! which the per-source rate limit then keys on. `Forwarded` is then passed on as received
//! (the gateway adds no element to it).

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, HeaderValue};

/// The largest `trusted-hops` accepted.
pub const MAX_TRUSTED_HOPS: usize = 16;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The addresses of every `X-Forwarded-For` line of `headers`, in order.
fn received(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(&X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|entry| entry.trim().to_owned())
        .filter(|entry| !entry.is_empty())
        .collect()
}

/// The client of a request from `peer` behind `trusted_hops` trusted proxies: the address
/// `trusted_hops` from the right of its `X-Forwarded-For`; the peer's when there are none,
/// when the header holds fewer, or when that entry is not an address.
pub fn client(headers: &HeaderMap, peer: IpAddr, trusted_hops: usize) -> IpAddr {
    if trusted_hops == 0 {
        return peer;
    }
    let received = received(headers);
    received
        .len()
        .checked_sub(trusted_hops)
        .and_then(|at| address(&received[at]))
        .unwrap_or(peer)
}

/// Rewrites `headers`' `X-Forwarded-For` (and `Forwarded`) for a request from `peer` behind
/// `trusted_hops` trusted proxies: their entries kept, the client's dropped, the peer
/// appended.
pub fn rewrite(headers: &mut HeaderMap, peer: IpAddr, trusted_hops: usize) {
    let received = received(headers);
    headers.remove(&X_FORWARDED_FOR);
    if trusted_hops == 0 {
        headers.remove(http::header::FORWARDED);
    }
    let kept = &received[received.len().saturating_sub(trusted_hops)..];
    let mut value = kept.join(", ");
    if !value.is_empty() {
        value.push_str(", ");
    }
    value.push_str(&peer.to_string());
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(X_FORWARDED_FOR, value);
    }
}

/// The address of an `X-Forwarded-For` entry: `1.2.3.4`, `2001:db8::1`, or with a port as
/// some proxies write it (`1.2.3.4:5678`, `[2001:db8::1]:5678`).
fn address(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    if let Ok(addr) = entry.parse::<std::net::SocketAddr>() {
        return Some(addr.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(ip, _)| ip.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append(X_FORWARDED_FOR, HeaderValue::from_str(v).unwrap());
        }
        h.insert(
            http::header::FORWARDED,
            HeaderValue::from_static("for=6.6.6.6"),
        );
        h
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    #[test]
    fn at_the_edge_a_client_s_claims_are_dropped() {
        let mut h = headers(&["6.6.6.6, 7.7.7.7"]);
        assert_eq!(client(&h, PEER, 0), PEER);
        rewrite(&mut h, PEER, 0);
        assert_eq!(h[X_FORWARDED_FOR], "10.0.0.1");
        assert!(!h.contains_key(http::header::FORWARDED));
    }

    #[test]
    fn behind_trusted_proxies_their_entries_are_kept_and_the_client_is_theirs() {
        // The client forged 6.6.6.6; the load balancer saw 203.0.113.9 and wrote it.
        let mut h = headers(&["6.6.6.6", "203.0.113.9"]);
        assert_eq!(
            client(&h, PEER, 1),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        rewrite(&mut h, PEER, 1);
        assert_eq!(h[X_FORWARDED_FOR], "203.0.113.9, 10.0.0.1");
        assert!(
            h.contains_key(http::header::FORWARDED),
            "passed on as received"
        );
        // Two hops: a CDN (which saw the client) and a load balancer (which saw the CDN).
        let mut h = headers(&["6.6.6.6, 198.51.100.7:4711, 192.0.2.3"]);
        assert_eq!(
            client(&h, PEER, 2),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        rewrite(&mut h, PEER, 2);
        assert_eq!(h[X_FORWARDED_FOR], "198.51.100.7:4711, 192.0.2.3, 10.0.0.1");
    }

    #[test]
    fn fewer_entries_than_hops_or_garbage_leave_the_peer_as_the_client() {
        let mut h = headers(&[]);
        assert_eq!(client(&h, PEER, 2), PEER);
        rewrite(&mut h, PEER, 2);
        assert_eq!(h[X_FORWARDED_FOR], "10.0.0.1");
        let mut h = headers(&["not-an-address"]);
        assert_eq!(client(&h, PEER, 1), PEER);
        rewrite(&mut h, PEER, 1);
        assert_eq!(h[X_FORWARDED_FOR], "not-an-address, 10.0.0.1");
        assert_eq!(address("[2001:db8::1]:80"), "2001:db8::1".parse().ok());
    }
}

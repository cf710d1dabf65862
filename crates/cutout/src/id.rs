//! [`BreakerId`]: a breaker's name, copied into every refusal without touching shared memory.

use std::fmt;
use std::sync::Arc;

const INLINE: usize = 47;

/// A breaker's name.
///
/// Names of up to 47 bytes (service names, `https://host:port` keys) are stored inline, so
/// cloning one — which every [`Rejected`](crate::Rejected) does — is a plain copy: no
/// allocation and no reference count bumped on a line other threads are reading. Longer names
/// are shared behind an `Arc`. (`smol_str` does the same with 23 inline bytes, too few for
/// per-host keys.)
#[derive(Clone)]
pub struct BreakerId(Repr);

#[derive(Clone)]
enum Repr {
    Inline(Inline),
    Shared(Arc<str>),
}

/// An inline name: 48 bytes aligned to 8, after the enum's tag, so that a copy moves whole
/// words. (A `u8` length right after the tag left a 7-byte run that the compiler copied with
/// overlapping 4-byte loads and stores, a store-forwarding stall on every refusal.)
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Inline {
    bytes: [u8; INLINE],
    len: u8,
}

impl BreakerId {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(Inline { bytes, len }) => {
                // The bytes were copied from a `&str` whole, so they are valid UTF-8; the empty
                // fallback is unreachable and only avoids a panic path.
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Repr::Shared(name) => name,
        }
    }
}

impl From<&str> for BreakerId {
    fn from(name: &str) -> Self {
        if name.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..name.len()].copy_from_slice(name.as_bytes());
            BreakerId(Repr::Inline(Inline {
                // Fits: INLINE < 256.
                len: name.len() as u8,
                bytes,
            }))
        } else {
            BreakerId(Repr::Shared(Arc::from(name)))
        }
    }
}

impl From<String> for BreakerId {
    fn from(name: String) -> Self {
        BreakerId::from(name.as_str())
    }
}

impl std::ops::Deref for BreakerId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for BreakerId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for BreakerId {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for BreakerId {}

impl PartialEq<str> for BreakerId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for BreakerId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for BreakerId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for BreakerId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BreakerId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Debug for BreakerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for BreakerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_names_round_trip() {
        let short = BreakerId::from("payments");
        assert!(matches!(short.0, Repr::Inline(_)));
        assert_eq!(short, "payments");
        let edge = "é".repeat(23);
        assert_eq!(BreakerId::from(edge.as_str()).as_str(), edge);
        let long = "x".repeat(INLINE + 1);
        let id = BreakerId::from(long.clone());
        assert!(matches!(id.0, Repr::Shared(_)));
        assert_eq!(id.as_str(), long);
        assert_eq!(id.clone(), id);
    }
}

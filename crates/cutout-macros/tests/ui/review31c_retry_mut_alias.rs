//! Hostile review (rev31c): a `&mut` parameter spelled through a type alias is not seen as
//! one (a macro reads syntax, not what an alias names), so a retried method's `Buf<'_>` is
//! cloned, and `&mut Vec<u8>: Clone` does not hold. The docs say so: write `&mut` out.

use cutout::Rejected;

#[derive(Debug, PartialEq)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

pub type Buf<'a> = &'a mut Vec<u8>;

#[cutout::resilient]
pub trait Reader {
    #[breaker(consecutive_failures = 5, retry(attempts = 2))]
    fn read_into(&self, buf: Buf<'_>) -> Result<usize, E>;
}

struct Backend;
impl Reader for Backend {
    fn read_into(&self, buf: Buf<'_>) -> Result<usize, E> {
        buf.push(1);
        if buf.len() < 2 { Err(E) } else { Ok(buf.len()) }
    }
}

fn main() {}

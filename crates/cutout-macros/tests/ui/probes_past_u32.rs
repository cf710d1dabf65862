// half_open_probes past u32: the file says CUT-CFG-010 (the value cannot be read); so must the
// attribute (a first version said CUT-CFG-006, the range's code).
use cutout::Rejected;

#[derive(Debug)]
pub struct E;
impl From<Rejected> for E {
    fn from(_: Rejected) -> Self {
        E
    }
}

#[cutout::resilient]
pub trait Api {
    #[breaker(half_open_probes = 4294967296)]
    fn get(&self) -> Result<u8, E>;
}

fn main() {}

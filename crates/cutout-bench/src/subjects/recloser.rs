//! recloser 1.4: an epoch-managed state pointer and a spin-locked ring buffer, driven through
//! `Recloser::call`.

use std::sync::Arc;

use super::{LONG_BREAK, WARM_UP_CALLS, feed, trip};
use crate::{Call, Outcome, Subject};

/// A recloser; it is not `Clone`, so handles share it through an `Arc`.
pub struct Recloser(Arc<recloser::Recloser>);

/// One thread's handle on a [`Recloser`].
pub struct Handle(Arc<recloser::Recloser>);

impl Subject for Recloser {
    type Handle = Handle;
    fn handle(&self) -> Handle {
        Handle(Arc::clone(&self.0))
    }
}

impl Call for Handle {
    #[inline(always)]
    fn call(&mut self, fail: bool) -> Outcome {
        match self.0.call(|| if fail { Err(()) } else { Ok(()) }) {
            Ok(()) => Outcome::Ok,
            Err(recloser::Error::Rejected) => Outcome::Rejected,
            Err(recloser::Error::Inner(())) => Outcome::Failed,
        }
    }
}

/// Count window of 100 calls, failure rate 0.5 (recloser has no consecutive rule and no time
/// window). These are also its defaults. Warmed up so the ring is full.
pub fn count_window() -> Recloser {
    let subject = Recloser(Arc::new(
        recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(100)
            .build(),
    ));
    feed(&subject, WARM_UP_CALLS, false);
    subject
}

/// Opened by failures once its ring of 100 has filled (the 101st call is the first judged),
/// with a one-hour wait.
pub fn open() -> Recloser {
    let subject = Recloser(Arc::new(
        recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(100)
            .open_wait(LONG_BREAK)
            .build(),
    ));
    trip(&subject, 200);
    subject
}

//! [`KeyedService`]: routes each call through its key's breaker.

use std::fmt;
use std::hash::Hash;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::classify::Classify;
use tower_service::Service;

use super::{KeyFn, KeyedBreakers};
use crate::error::{BoxError, Error};
use crate::future::ResponseFuture;

/// A service with one breaker per key of its requests.
///
/// The key is only known at `call`, so `poll_ready` is the inner service's. At `call` the key's
/// breaker is asked: a refusal returns a failing future and the inner service is not called; an
/// admitted call holds the permit (and keeps its key from eviction) until its future finishes
/// or is dropped.
pub struct KeyedService<S, K, F, C> {
    inner: S,
    breakers: KeyedBreakers<K>,
    key_fn: F,
    classifier: C,
    pause: Option<Duration>,
}

impl<S, K, F, C> KeyedService<S, K, F, C> {
    /// Guards `inner` with one breaker of `breakers` per `key_fn(request)`, `classifier`
    /// deciding outcomes, waiting `pause` before refusals when set.
    pub fn new(
        inner: S,
        breakers: KeyedBreakers<K>,
        key_fn: F,
        classifier: C,
        pause: Option<Duration>,
    ) -> Self {
        KeyedService {
            inner,
            breakers,
            key_fn,
            classifier,
            pause,
        }
    }

    /// The map of breakers.
    pub fn breakers(&self) -> &KeyedBreakers<K> {
        &self.breakers
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// Clones share the map of breakers.
impl<S: Clone, K, F: Clone, C: Clone> Clone for KeyedService<S, K, F, C> {
    fn clone(&self) -> Self {
        KeyedService {
            inner: self.inner.clone(),
            breakers: self.breakers.clone(),
            key_fn: self.key_fn.clone(),
            classifier: self.classifier.clone(),
            pause: self.pause,
        }
    }
}

impl<S, K, F, C, Req> Service<Req> for KeyedService<S, K, F, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    F: KeyFn<Req, Key = K>,
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error;
    type Future = ResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx).map_err(Error::inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let classifier = self.classifier.clone();
        let key = self.key_fn.key(&request);
        let Some(guard) = self.breakers.enter(&key) else {
            // The map is full of keys that cannot be evicted: go through unguarded (counted).
            return ResponseFuture::called(self.inner.call(request), classifier, None, None);
        };
        match guard.breaker().try_acquire_owned() {
            Ok(permit) => ResponseFuture::called(
                self.inner.call(request),
                classifier,
                Some(permit),
                Some(guard),
            ),
            Err(rejected) => ResponseFuture::refused(rejected, self.pause, classifier),
        }
    }
}

impl<S: fmt::Debug, K, F, C> fmt::Debug for KeyedService<S, K, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedService")
            .field("inner", &self.inner)
            .field("breakers", &self.breakers)
            .finish_non_exhaustive()
    }
}

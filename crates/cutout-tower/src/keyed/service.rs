//! [`KeyedService`]: routes each call through its key's breaker.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cutout::Rejected;
use cutout::classify::Classify;
use http_body::Body;
use tower_service::Service;

use super::{KeyFn, KeyedBreakers};
use crate::body::{ClassifyResponse, WholeResponseFuture};
use crate::error::{BoxError, Error};
use crate::future::ResponseFuture;

/// A service with one breaker per key of its requests.
///
/// The key is only known at `call`, so `poll_ready` is the inner service's. At `call` the key's
/// breaker is asked: a refusal returns a failing future and the inner service is not called; an
/// admitted call holds the permit (and keeps its key from eviction) until its future finishes
/// or is dropped.
///
/// # Whole responses
/// [`call_whole_response`](Self::call_whole_response) and
/// [`try_call_whole_response`](Self::try_call_whole_response) are the keyed variant of
/// [`WholeResponseService`](crate::WholeResponseService): the verdict may wait for the end of
/// the response body (see [`crate::body`]), and the key stays in use (not evicted) until then.
/// The second takes the key from its caller and hands the request back when the key's breaker
/// refuses, so that a load balancer can try another host: one dead host of a pool is skipped
/// instead of failing the request.
pub struct KeyedService<S, K, F, C> {
    inner: S,
    breakers: KeyedBreakers<K>,
    key_fn: F,
    classifier: C,
    pause: Option<Duration>,
    label: Arc<str>,
}

/// What a keyed refusal is called before people outside when no label was given.
pub(crate) const DEFAULT_LABEL: &str = "the upstream";

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
            label: Arc::from(DEFAULT_LABEL),
        }
    }

    /// What this service's refusals are called before people outside (default
    /// `"the upstream"`): a refusal's error carries it ([`Error::public_label`]) and
    /// [`respond::error_response`](crate::respond::error_response) names it in the 503 body,
    /// never the key's id, which for [`HostKey`](super::HostKey) is the upstream's internal
    /// `scheme://host:port`. The error's `Display`, for logs, still names the key.
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.label = label.into();
        self
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
            label: Arc::clone(&self.label),
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
        let guard = self.breakers.enter(&key);
        match guard.breaker().try_acquire_owned() {
            Ok(permit) => ResponseFuture::called(
                self.inner.call(request),
                classifier,
                Some(permit),
                Some(guard),
            ),
            Err(rejected) => ResponseFuture::refused(
                rejected,
                self.pause,
                Some(Arc::clone(&self.label)),
                classifier,
            ),
        }
    }
}

impl<S, K, F, C> KeyedService<S, K, F, C>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    /// [`call`](Service::call) with the verdict waiting for the response body's end: the key
    /// of `request` (the key function's) picks the breaker; a refused call's future fails with
    /// the refusal (after the refusal pause) without calling the inner service; an admitted
    /// one is classified by `C` as a [`ClassifyResponse`] (its headers now, or its body's end
    /// through the response's [`BreakerBody`](crate::body::BreakerBody)), and its key is kept
    /// from eviction until the verdict is recorded. Drive [`poll_ready`](Service::poll_ready)
    /// first, as for `call`.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use cutout::Settings;
    /// use cutout_tower::HttpClassifier;
    /// use cutout_tower::keyed::{ByHost, KeyedBreakers, KeyedService};
    /// use http_body_util::{BodyExt, Full};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let hosts = KeyedBreakers::builder(Settings::default()).build();
    /// let inner = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::io::Error>(http::Response::new(Full::new(Bytes::from("ok"))))
    /// });
    /// let mut service = KeyedService::new(inner, hosts.clone(), ByHost, HttpClassifier::new(), None);
    /// let request = http::Request::get("http://a.example/").body(())?;
    /// let response = service.call_whole_response(request).await?;
    /// assert!(response.body().awaits_end());
    /// response.into_body().collect().await?;
    /// let key = hosts.keys().pop().unwrap();
    /// assert_eq!(hosts.snapshot(&key).unwrap().breaker.calls, 1, "recorded at the body's end");
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_whole_response<Req, B>(&mut self, request: Req) -> WholeResponseFuture<S::Future, C>
    where
        S: Service<Req, Response = http::Response<B>>,
        S::Error: Into<BoxError>,
        F: KeyFn<Req, Key = K>,
        B: Body,
        C: ClassifyResponse<B, S::Error> + Clone,
    {
        let key = self.key_fn.key(&request);
        match self.try_call_whole_response(&key, request) {
            Ok(future) => future,
            Err((request, rejected)) => {
                drop(request);
                WholeResponseFuture::refused(
                    rejected,
                    self.pause,
                    Some(Arc::clone(&self.label)),
                    self.classifier.clone(),
                )
            }
        }
    }

    /// Asks `key`'s breaker (created if new) for `request`, the verdict waiting for the
    /// response body's end as in [`call_whole_response`](Self::call_whole_response). Admitted:
    /// the inner service is called and its future returned. Refused: `Err` with the request
    /// untouched and the refusal, the inner service not called, so the caller may try another
    /// key (the readiness driven for this request is still unused: the inner service was
    /// never called). The key function is not used. When the map is full of keys that cannot
    /// be evicted, the key is created beyond `max_keys` (counted in
    /// [`KeyedStats::over_capacity`](super::KeyedStats::over_capacity)). No refusal pause:
    /// the caller decides what a refusal leads to.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use cutout::Settings;
    /// use cutout_tower::HttpClassifier;
    /// use cutout_tower::keyed::{ByHost, KeyedBreakers, KeyedService};
    /// use http_body_util::Full;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let hosts = KeyedBreakers::<String>::builder(Settings::default()).build();
    /// hosts.isolate(&"a".to_owned());
    /// let inner = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::io::Error>(http::Response::new(Full::new(Bytes::from("ok"))))
    /// });
    /// let mut service = KeyedService::new(inner, hosts, ByHost, HttpClassifier::new(), None);
    /// let request = http::Request::new(());
    /// // "a" refuses: the request comes back, and goes to "b".
    /// let (request, refused) = service.try_call_whole_response(&"a".to_owned(), request).unwrap_err();
    /// assert_eq!(refused.breaker().as_str(), "a");
    /// let response = service.try_call_whole_response(&"b".to_owned(), request).ok().unwrap().await?;
    /// assert_eq!(response.status(), 200);
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn try_call_whole_response<Req, B>(
        &mut self,
        key: &K,
        request: Req,
    ) -> Result<WholeResponseFuture<S::Future, C>, (Req, Rejected)>
    where
        S: Service<Req, Response = http::Response<B>>,
        S::Error: Into<BoxError>,
        B: Body,
        C: ClassifyResponse<B, S::Error> + Clone,
    {
        let classifier = self.classifier.clone();
        let guard = self.breakers.enter(key);
        match guard.breaker().try_acquire_owned() {
            Ok(permit) => Ok(WholeResponseFuture::called(
                self.inner.call(request),
                classifier,
                Some(permit),
                Some(guard),
            )),
            Err(rejected) => Err((request, rejected)),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use cutout::clock::ManualClock;
    use cutout::{Jitter, Settings, State};
    use http_body::Frame;
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;
    use crate::HttpClassifier;
    use crate::keyed::ByHost;

    fn hosts(clock: &ManualClock) -> KeyedBreakers<String> {
        let settings = Settings::builder()
            .consecutive_failures(Some(2))
            .jitter(Jitter::None)
            .adaptive(false)
            .build()
            .unwrap();
        KeyedBreakers::builder(settings)
            .clock(clock.clone())
            .idle_after(Duration::from_millis(1))
            .build()
    }

    type Frames = Vec<Result<Frame<Bytes>, std::io::Error>>;
    type Streamed =
        StreamBody<tokio_stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>>;
    type ByBody = fn(&http::Request<String>) -> String;

    /// Every host answers 200; the body of host `cut` breaks after its first frame.
    fn service(
        hosts: KeyedBreakers<String>,
    ) -> KeyedService<
        impl Service<http::Request<String>, Response = http::Response<Streamed>, Error = std::io::Error>
        + Clone,
        String,
        ByBody,
        HttpClassifier,
    > {
        let inner = tower::service_fn(|request: http::Request<String>| async move {
            let mut frames: Frames = vec![Ok(Frame::data(Bytes::from_static(b"part")))];
            if request.body() == "cut" {
                frames.push(Err(std::io::Error::other("connection reset")));
            }
            Ok::<_, std::io::Error>(http::Response::new(StreamBody::new(tokio_stream::iter(
                frames,
            ))))
        });
        let key: ByBody = |r| r.body().clone();
        KeyedService::new(inner, hosts, key, HttpClassifier::new(), None)
    }

    #[tokio::test]
    async fn a_broken_body_fails_its_key_and_the_key_is_kept_until_the_end() {
        let clock = ManualClock::new();
        let hosts = hosts(&clock);
        let mut service = service(hosts.clone());
        for n in 0..2 {
            let response = service
                .call_whole_response(http::Request::new("cut".to_owned()))
                .await
                .unwrap();
            assert_eq!(
                hosts.snapshot(&"cut".to_owned()).unwrap().breaker.calls,
                n,
                "nothing is decided before the body's end"
            );
            // Idle past `idle_after` while the body is unread: still in use, not evicted.
            clock.advance(Duration::from_secs(1));
            assert_eq!(hosts.evict_idle(), 0);
            assert_eq!(hosts.snapshot(&"cut".to_owned()).unwrap().in_flight, 1);
            assert!(response.into_body().collect().await.is_err());
        }
        let cut = hosts.snapshot(&"cut".to_owned()).unwrap();
        assert_eq!((cut.breaker.failures, cut.breaker.state), (2, State::Open));
        assert_eq!(cut.in_flight, 0);
        // Refused: the future fails without calling the inner service.
        let refused = service
            .call_whole_response(http::Request::new("cut".to_owned()))
            .await
            .unwrap_err();
        assert!(refused.is_rejected());
        // A whole body is a success of its own key.
        let response = service
            .call_whole_response(http::Request::new("whole".to_owned()))
            .await
            .unwrap();
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            "part"
        );
        let whole = hosts.snapshot(&"whole".to_owned()).unwrap();
        assert_eq!((whole.breaker.calls, whole.breaker.failures), (1, 0));
    }

    #[tokio::test]
    async fn a_refused_try_hands_the_request_back_for_another_key() {
        let clock = ManualClock::new();
        let hosts = hosts(&clock);
        hosts.isolate(&"a".to_owned());
        let mut service = service(hosts.clone());
        let request = http::Request::new("cut".to_owned());
        let (request, refused) = service
            .try_call_whole_response(&"a".to_owned(), request)
            .err()
            .unwrap();
        assert_eq!(request.body(), "cut", "untouched");
        assert_eq!(refused.breaker().as_str(), "a");
        let response = service
            .try_call_whole_response(&"b".to_owned(), request)
            .ok()
            .unwrap()
            .await
            .unwrap();
        assert!(response.into_body().collect().await.is_err());
        let b = hosts.snapshot(&"b".to_owned()).unwrap();
        assert_eq!((b.breaker.calls, b.breaker.failures), (1, 1), "b's failure");
        assert_eq!(hosts.snapshot(&"a".to_owned()).unwrap().breaker.calls, 0);
        // Unused key functions are fine: a plain `Full` body is decided at its end too.
        let mut plain = KeyedService::new(
            tower::service_fn(|_: http::Request<()>| async {
                Ok::<_, std::io::Error>(http::Response::new(Full::new(Bytes::from("x"))))
            }),
            hosts.clone(),
            ByHost,
            HttpClassifier::new(),
            None,
        );
        let response = plain
            .try_call_whole_response(&"c".to_owned(), http::Request::new(()))
            .ok()
            .unwrap()
            .await
            .unwrap();
        drop(response);
        assert_eq!(
            hosts.snapshot(&"c".to_owned()).unwrap().breaker.calls,
            0,
            "a body dropped before its end records nothing"
        );
    }
}

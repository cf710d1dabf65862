//! [`WholeResponseLayer`]: adds a [`WholeResponseService`].

use std::time::Duration;

use cutout::Breaker;
use tower_layer::Layer;

use super::WholeResponseService;
use crate::{HttpClassifier, Readiness};

/// Wraps services in a [`WholeResponseService`] guarded by one [`Breaker`]: the verdict on a
/// call may wait for the end of its response body (see the [module docs](crate::body)).
///
/// Placed like [`BreakerLayer`](crate::BreakerLayer): inside a retry layer and outside the
/// attempt timeout. Note that a timeout layer bounds the time to the headers only; a body that
/// stalls afterwards is bounded by the caller (a deadline, a gRPC timeout).
///
/// ```
/// use cutout::{Breaker, Settings};
/// use cutout_tower::{HttpClassifier, WholeResponseLayer};
/// use tower::ServiceBuilder;
///
/// let breaker = Breaker::new("search", Settings::default());
/// let layer = WholeResponseLayer::new(breaker)
///     .classifier(HttpClassifier::new().honor_retry_after(true));
/// let service = ServiceBuilder::new().layer(layer).service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::new(String::from("found")))
/// });
/// # let _ = service;
/// ```
#[derive(Debug)]
pub struct WholeResponseLayer<C = HttpClassifier> {
    breaker: Breaker,
    classifier: C,
    pause: Option<Duration>,
    readiness: Readiness,
}

impl WholeResponseLayer {
    /// A layer guarding services with `breaker`, classifying with [`HttpClassifier::new`].
    pub fn new(breaker: Breaker) -> Self {
        WholeResponseLayer {
            breaker,
            classifier: HttpClassifier::new(),
            pause: None,
            readiness: Readiness::FailInCall,
        }
    }
}

impl<C> WholeResponseLayer<C> {
    /// Uses `classifier` (a [`ClassifyResponse`](crate::body::ClassifyResponse)) to decide each
    /// verdict: [`HttpClassifier`], or for gRPC `GrpcClassifier` (feature `grpc`).
    pub fn classifier<C2>(self, classifier: C2) -> WholeResponseLayer<C2> {
        WholeResponseLayer {
            breaker: self.breaker,
            classifier,
            pause: self.pause,
            readiness: self.readiness,
        }
    }

    /// Waits `pause` (at most the refusal's retry-after) before a refused call fails, so that
    /// tight polling loops do not spin (default: no pause; needs a tokio timer).
    pub fn refusal_pause(mut self, pause: Duration) -> Self {
        self.pause = Some(pause);
        self
    }

    /// What `poll_ready` answers while the breaker refuses (default
    /// [`Readiness::FailInCall`]); see [`Readiness`].
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = readiness;
        self
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

/// Clones share the breaker.
impl<C: Clone> Clone for WholeResponseLayer<C> {
    fn clone(&self) -> Self {
        WholeResponseLayer {
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            pause: self.pause,
            readiness: self.readiness,
        }
    }
}

impl<S, C: Clone> Layer<S> for WholeResponseLayer<C> {
    type Service = WholeResponseService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let service = WholeResponseService::with_classifier(
            inner,
            self.breaker.clone(),
            self.classifier.clone(),
        )
        .readiness(self.readiness);
        match self.pause {
            Some(pause) => service.refusal_pause(pause),
            None => service,
        }
    }
}

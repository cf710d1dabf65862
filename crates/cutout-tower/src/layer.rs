//! [`BreakerLayer`] and the [`ServiceBuilderExt`] method that adds it.

use std::time::Duration;

use cutout::Breaker;
use cutout::classify::DefaultClassifier;
use tower::ServiceBuilder;
use tower::layer::util::Stack;
use tower_layer::Layer;

use crate::service::{BreakerService, Readiness};

/// Wraps services in a [`BreakerService`] guarded by one [`Breaker`].
///
/// Put it inside a retry layer and outside the attempt timeout (retry → breaker → timeout):
/// every attempt then goes through the breaker, a timed-out attempt counts as a failure, and a
/// refusal stops the retries. See the crate documentation for a stack.
#[derive(Debug)]
pub struct BreakerLayer<C = DefaultClassifier> {
    breaker: Breaker,
    classifier: C,
    pause: Option<Duration>,
    readiness: Readiness,
}

impl BreakerLayer {
    /// A layer guarding services with `breaker`; `Ok` is a success and `Err` a failure.
    pub fn new(breaker: Breaker) -> Self {
        BreakerLayer {
            breaker,
            classifier: DefaultClassifier,
            pause: None,
            readiness: Readiness::FailInCall,
        }
    }
}

impl<C> BreakerLayer<C> {
    /// Uses `classifier` to decide what each result means (for HTTP:
    /// [`HttpClassifier`](crate::HttpClassifier)).
    pub fn classifier<C2>(self, classifier: C2) -> BreakerLayer<C2> {
        BreakerLayer {
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
    /// [`Readiness::FailInCall`]: `Ready`, and the call fails with the refusal;
    /// [`Readiness::WaitForBreak`]: `Pending` until the break's end, for a breaker per
    /// endpoint inside tower's p2c `Balance`). See [`Readiness`] for the trade-off.
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
impl<C: Clone> Clone for BreakerLayer<C> {
    fn clone(&self) -> Self {
        BreakerLayer {
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            pause: self.pause,
            readiness: self.readiness,
        }
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let service =
            BreakerService::with_classifier(inner, self.breaker.clone(), self.classifier.clone())
                .readiness(self.readiness);
        match self.pause {
            Some(pause) => service.refusal_pause(pause),
            None => service,
        }
    }
}

/// Adds breaker layers to a [`ServiceBuilder`].
///
/// ```
/// use std::time::Duration;
/// use cutout::{Breaker, Settings};
/// use cutout_tower::ServiceBuilderExt;
/// use tower::ServiceBuilder;
///
/// let breaker = Breaker::new("rates", Settings::default());
/// let service = ServiceBuilder::new()
///     .breaker(breaker)
///     .timeout(Duration::from_secs(2))
///     .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
/// # let _ = service;
/// ```
pub trait ServiceBuilderExt<L>: Sized {
    /// Guards the services below with `breaker` (`Ok` success, `Err` failure).
    fn breaker(self, breaker: Breaker) -> ServiceBuilder<Stack<BreakerLayer, L>>;

    /// Guards the services below with `breaker`, with `classifier` deciding outcomes.
    fn breaker_with<C>(
        self,
        breaker: Breaker,
        classifier: C,
    ) -> ServiceBuilder<Stack<BreakerLayer<C>, L>>;
}

impl<L> ServiceBuilderExt<L> for ServiceBuilder<L> {
    fn breaker(self, breaker: Breaker) -> ServiceBuilder<Stack<BreakerLayer, L>> {
        self.layer(BreakerLayer::new(breaker))
    }

    fn breaker_with<C>(
        self,
        breaker: Breaker,
        classifier: C,
    ) -> ServiceBuilder<Stack<BreakerLayer<C>, L>> {
        self.layer(BreakerLayer::new(breaker).classifier(classifier))
    }
}

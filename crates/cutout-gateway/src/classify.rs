//! [`GatewayClassifier`]: what an attempt's outcome means to a breaker, on the response's head or at the end of its body.
//!
//! | the attempt | verdict |
//! |---|---|
//! | a 5xx (but 503 with `Retry-After`), a connection error, an attempt timeout | failure |
//! | a 429, a 503 with `Retry-After` | ignored, or open for the time asked with `honor-retry-after` |
//! | another 4xx | ignored |
//! | a 2xx / 3xx | decided at the body's end: a success when it ends whole |
//! | the body broke, was cut short by the upstream, or stalled past the attempt timeout | failure |
//! | the client's fault ([`ClientFault`]: its upload broke, stalled, was too large) | ignored |
//! | the gateway's `request-timeout` passed ([`DeadlinePassed`]) | ignored |
//! | every host of the cluster refused ([`AllEjected`]) | ignored (for the cluster breaker) |
//!
//! A client that left is not in this table: its attempt runs on detached and is classified by
//! its own outcome, as if the client had stayed, or is cancelled and classified by nobody
//! (see [`crate::attempt`]).
//!
//! At the cluster level of a cluster with host breakers, a failure (or an open-for) of a host
//! that [`Hosts::absorbs`] (ejection deals with it, or another host is serving) is ignored: it
//! is the host breaker's to judge. The cluster level sees a request's final attempt only: a
//! connect failure or a reset retried on another host is judged by the retry's outcome
//! ([`crate::hosts`]).

use std::error::Error as StdError;
use std::sync::Arc;

use cutout::classify::{Classify, Outcome, Verdict};
use cutout_tower::body::{Classified, ClassifyEnd, ClassifyResponse, HttpBodyEnd};
use cutout_tower::{BoxError, HttpClassifier};
use http::{HeaderMap, Response};
use http_body::Body;

use crate::attempt::{DeadlinePassed, find};
use crate::error::ClientFault;
use crate::hosts::{AllEjected, HostError, Hosts, Panicked, ServedBy};

/// A breaker's classifier in the gateway (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct GatewayClassifier {
    http: HttpClassifier,
    absorb: Option<Arc<Hosts>>,
}

impl GatewayClassifier {
    /// Classifies with `http`, putting the client's faults and the gateway's deadline aside.
    pub fn new(http: HttpClassifier) -> GatewayClassifier {
        GatewayClassifier { http, absorb: None }
    }

    /// The cluster level's classifier over `hosts`: failures that ejection absorbs are
    /// ignored.
    pub fn absorbing(mut self, hosts: Arc<Hosts>) -> GatewayClassifier {
        self.absorb = Some(hosts);
        self
    }

    /// `verdict` of an attempt at host `host` (its index, and whether it went around the
    /// host's breaker in a panic), as this level counts it.
    fn at_host(&self, verdict: Verdict, host: Option<(usize, bool)>) -> Verdict {
        match (verdict, &self.absorb, host) {
            (Verdict::Failure | Verdict::OpenFor(_), Some(hosts), Some((host, panic)))
                if hosts.absorbs(host, panic) =>
            {
                Verdict::Ignored
            }
            _ => verdict,
        }
    }

    /// The host that answered `response`, and whether in a panic.
    fn served_by<B>(response: &Response<B>) -> Option<(usize, bool)> {
        let host = response.extensions().get::<ServedBy>()?.0;
        Some((host, response.extensions().get::<Panicked>().is_some()))
    }

    /// Whether `error` says nothing about the upstream.
    fn not_the_upstream(error: &(dyn StdError + 'static)) -> bool {
        find::<ClientFault>(error).is_some()
            || find::<DeadlinePassed>(error).is_some()
            || find::<AllEjected>(error).is_some()
    }

    fn error_verdict(&self, error: &(dyn StdError + 'static)) -> Verdict {
        if GatewayClassifier::not_the_upstream(error) {
            return Verdict::Ignored;
        }
        let verdict = Classify::<Response<()>, ()>::verdict(&self.http, &Err(()));
        self.at_host(verdict, find::<HostError>(error).map(|e| (e.host, e.panic)))
    }
}

impl<B> Classify<Response<B>, BoxError> for GatewayClassifier {
    fn classify(&self, result: &Result<Response<B>, BoxError>) -> Outcome {
        self.verdict(result).outcome()
    }

    fn verdict(&self, result: &Result<Response<B>, BoxError>) -> Verdict {
        match result {
            Err(error) => self.error_verdict(&**error),
            Ok(response) => self.at_host(
                self.http.verdict_of(response.status(), response.headers()),
                GatewayClassifier::served_by(response),
            ),
        }
    }
}

/// What [`GatewayClassifier`] decides at a body's end: a success when it ends, a failure when
/// it breaks or stalls (unless the client's fault broke it).
#[derive(Debug, Clone)]
pub struct GatewayEnd {
    http: HttpBodyEnd,
    classifier: GatewayClassifier,
    host: Option<(usize, bool)>,
}

impl<E: StdError + 'static> ClassifyEnd<E> for GatewayEnd {
    fn end(self, trailers: Option<&HeaderMap>) -> Verdict {
        ClassifyEnd::<E>::end(self.http, trailers)
    }

    fn body_error(self, error: &E) -> Verdict {
        if GatewayClassifier::not_the_upstream(error) {
            return Verdict::Ignored;
        }
        let verdict = self.http.body_error(error);
        self.classifier.at_host(verdict, self.host)
    }
}

impl<B> ClassifyResponse<B, BoxError> for GatewayClassifier
where
    B: Body,
    B::Error: StdError + 'static,
{
    type AtEnd = GatewayEnd;

    fn classify_response(&self, result: &Result<Response<B>, BoxError>) -> Classified<GatewayEnd> {
        match result {
            Err(error) => Classified::Now(self.error_verdict(&**error)),
            Ok(response) => {
                let host = GatewayClassifier::served_by(response);
                match ClassifyResponse::<B, BoxError>::classify_response(&self.http, result) {
                    Classified::Now(verdict) => Classified::Now(self.at_host(verdict, host)),
                    Classified::AtEnd(http) => Classified::AtEnd(GatewayEnd {
                        http,
                        classifier: self.clone(),
                        host,
                    }),
                }
            }
        }
    }
}

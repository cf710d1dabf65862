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
//! | the gateway's own exhaustion: out of descriptors, … ([`crate::exhaustion`]) | ignored |
//!
//! A gRPC response (`content-type: application/grpc…`) is judged by its `grpc-status`, not its
//! HTTP status, with cutout-tower's [`GrpcClassifier`]: from the headers of a trailers-only
//! response, else from the trailers at the body's end (none: `UNKNOWN`); `UNAVAILABLE`,
//! `DEADLINE_EXCEEDED`, `INTERNAL`, `UNKNOWN` and `DATA_LOSS` fail, `RESOURCE_EXHAUSTED` and
//! the caller's errors (`INVALID_ARGUMENT`, `NOT_FOUND`, …) are ignored, `OK` succeeds (see
//! its table). The rest of this table (errors, the client's faults, the deadline, ejection)
//! holds for gRPC too.
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
use cutout_tower::grpc::{Code, GrpcBodyEnd, GrpcClassifier};
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
    grpc: GrpcClassifier,
    absorb: Option<Arc<Hosts>>,
}

/// Whether `response` is a gRPC response (its `content-type` is `application/grpc` or
/// `application/grpc+…`).
pub fn is_grpc<B>(response: &Response<B>) -> bool {
    crate::grpc_answer::is_grpc_content(response.headers())
}

impl GatewayClassifier {
    /// Classifies with `http`, putting the client's faults and the gateway's deadline aside.
    pub fn new(http: HttpClassifier) -> GatewayClassifier {
        GatewayClassifier {
            http,
            grpc: GrpcClassifier::new(),
            absorb: None,
        }
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
            || crate::exhaustion::is_exhausted(error)
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
            Ok(response) if is_grpc(response) => {
                // On the head alone: a trailers-only status, else the HTTP status's code.
                let code = Code::in_headers(response.headers())
                    .unwrap_or_else(|| Code::from_http_status(response.status()));
                self.at_host(
                    self.grpc.verdict_of(code),
                    GatewayClassifier::served_by(response),
                )
            }
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
    end: End,
    classifier: GatewayClassifier,
    host: Option<(usize, bool)>,
}

/// Who decides at the end: the HTTP classifier, or gRPC's (the trailers' `grpc-status`).
#[derive(Debug, Clone)]
enum End {
    Http(HttpBodyEnd),
    Grpc(GrpcBodyEnd),
}

impl<E: StdError + 'static> ClassifyEnd<E> for GatewayEnd {
    fn end(self, trailers: Option<&HeaderMap>) -> Verdict {
        let verdict = match self.end {
            End::Http(http) => ClassifyEnd::<E>::end(http, trailers),
            End::Grpc(grpc) => ClassifyEnd::<E>::end(grpc, trailers),
        };
        self.classifier.at_host(verdict, self.host)
    }

    fn body_error(self, error: &E) -> Verdict {
        if GatewayClassifier::not_the_upstream(error) {
            return Verdict::Ignored;
        }
        let verdict = match self.end {
            End::Http(http) => http.body_error(error),
            End::Grpc(grpc) => grpc.body_error(error),
        };
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
                let classified = if is_grpc(response) {
                    match ClassifyResponse::<B, BoxError>::classify_response(&self.grpc, result) {
                        Classified::Now(verdict) => Classified::Now(verdict),
                        Classified::AtEnd(grpc) => Classified::AtEnd(End::Grpc(grpc)),
                    }
                } else {
                    match ClassifyResponse::<B, BoxError>::classify_response(&self.http, result) {
                        Classified::Now(verdict) => Classified::Now(verdict),
                        Classified::AtEnd(http) => Classified::AtEnd(End::Http(http)),
                    }
                };
                match classified {
                    Classified::Now(verdict) => Classified::Now(self.at_host(verdict, host)),
                    Classified::AtEnd(end) => Classified::AtEnd(GatewayEnd {
                        end,
                        classifier: self.clone(),
                        host,
                    }),
                }
            }
        }
    }
}

//! What a finished call means to the breaker: [`Outcome`], [`ErrorClass`] and classifiers.
//!
//! ```
//! use cutout::classify::{self, ErrorClass, Outcome, Classify};
//!
//! #[derive(Debug)]
//! enum ApiError { Timeout, TooManyRequests, BadRequest }
//!
//! // Errors decide by class; an `Ok` is a success.
//! let by_class = classify::by_error(|e: &ApiError| match e {
//!     ApiError::Timeout => ErrorClass::Transient,
//!     ApiError::TooManyRequests => ErrorClass::Throttled,
//!     ApiError::BadRequest => ErrorClass::Permanent,
//! });
//! assert_eq!(by_class.classify(&Err::<(), _>(ApiError::Timeout)), Outcome::Failure);
//! assert_eq!(by_class.classify(&Err::<(), _>(ApiError::BadRequest)), Outcome::Ignored);
//!
//! // A classifier that also sees `Ok` values: an HTTP 500 inside `Ok` is a failure.
//! let by_status = |r: &Result<u16, ApiError>| match r {
//!     Ok(status) if *status >= 500 => Outcome::Failure,
//!     Ok(_) => Outcome::Success,
//!     Err(_) => Outcome::Failure,
//! };
//! assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
//! ```

/// What a finished call counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency served the call.
    Success,
    /// Evidence that the dependency is failing.
    Failure,
    /// Evidence of nothing: touches no count, and in half-open gives the probe slot back.
    Ignored,
}

/// The class of an error, for classifiers that sort errors rather than decide outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The dependency failed and may recover: a [`Outcome::Failure`].
    Transient,
    /// The dependency is up and defending itself (429, 503 with Retry-After):
    /// [`Outcome::Ignored`].
    Throttled,
    /// The caller's fault (a bad request): [`Outcome::Ignored`].
    Permanent,
}

impl From<ErrorClass> for Outcome {
    fn from(class: ErrorClass) -> Self {
        match class {
            ErrorClass::Transient => Outcome::Failure,
            ErrorClass::Throttled | ErrorClass::Permanent => Outcome::Ignored,
        }
    }
}

/// Decides the [`Outcome`] of a call's result.
///
/// Any `Fn(&Result<T, E>) -> Outcome` is a classifier.
pub trait Classify<T, E> {
    /// The outcome of `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

/// A classifier from an error-class function: `Ok` is a success, `Err(e)` is `class(e)`.
pub fn by_error<E, F>(class: F) -> ByError<F>
where
    F: Fn(&E) -> ErrorClass,
{
    ByError(class)
}

/// See [`by_error`].
#[derive(Debug, Clone, Copy)]
pub struct ByError<F>(F);

impl<T, E, F> Classify<T, E> for ByError<F>
where
    F: Fn(&E) -> ErrorClass,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(error) => (self.0)(error).into(),
        }
    }
}

/// A classifier from a predicate: `Ok` is a success, an error matching `counts` a failure,
/// any other error ignored (resilience4j's `recordOn` / `ignoreOn`).
pub fn failure_when<E, F>(counts: F) -> FailureWhen<F>
where
    F: Fn(&E) -> bool,
{
    FailureWhen(counts)
}

/// See [`failure_when`].
#[derive(Debug, Clone, Copy)]
pub struct FailureWhen<F>(F);

impl<T, E, F> Classify<T, E> for FailureWhen<F>
where
    F: Fn(&E) -> bool,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(error) if (self.0)(error) => Outcome::Failure,
            Err(_) => Outcome::Ignored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_outcomes() {
        assert_eq!(Outcome::from(ErrorClass::Transient), Outcome::Failure);
        assert_eq!(Outcome::from(ErrorClass::Throttled), Outcome::Ignored);
        assert_eq!(Outcome::from(ErrorClass::Permanent), Outcome::Ignored);
    }

    #[test]
    fn predicate_records_only_matching_errors() {
        let classifier = failure_when(|e: &i32| *e >= 500);
        assert_eq!(classifier.classify(&Ok::<(), i32>(())), Outcome::Success);
        assert_eq!(classifier.classify(&Err::<(), i32>(503)), Outcome::Failure);
        assert_eq!(classifier.classify(&Err::<(), i32>(404)), Outcome::Ignored);
        assert_eq!(
            DefaultClassifier.classify(&Err::<(), i32>(404)),
            Outcome::Failure
        );
    }
}

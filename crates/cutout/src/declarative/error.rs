//! [`DeclareError`]: why a generated wrapper's `new` failed.

use std::fmt;

use crate::config::LoadError;
use crate::{ErrorCode, RegistryError};

/// A generated wrapper's `new` failed: a shared name is taken with other settings
/// (`CUT-REG-001`, naming both methods), or the attribute's settings merged with the
/// registry's configuration are invalid (the configuration's `CUT-CFG-*` code).
pub struct DeclareError(Box<Kind>);

enum Kind {
    Conflict {
        error: RegistryError,
        existing: Option<String>,
        requested: String,
    },
    Settings(LoadError),
}

impl DeclareError {
    pub(crate) fn conflict(
        error: RegistryError,
        existing: Option<String>,
        requested: &str,
    ) -> Self {
        DeclareError(Box::new(Kind::Conflict {
            error,
            existing,
            requested: requested.to_owned(),
        }))
    }

    pub(crate) fn settings(error: LoadError) -> Self {
        DeclareError(Box::new(Kind::Settings(error)))
    }

    /// The stable code: [`ErrorCode::SettingsConflict`] or a settings code.
    pub fn code(&self) -> ErrorCode {
        match &*self.0 {
            Kind::Conflict { error, .. } => error.code(),
            Kind::Settings(error) => error.code(),
        }
    }

    /// Whether a shared breaker already exists with other settings (`CUT-REG-001`).
    pub fn is_conflict(&self) -> bool {
        matches!(&*self.0, Kind::Conflict { .. })
    }

    /// Whether the declared settings are invalid once merged with the configuration.
    pub fn is_invalid_settings(&self) -> bool {
        matches!(&*self.0, Kind::Settings(_))
    }

    /// For a conflict, the registry's error (which names the differing keys).
    pub fn registry_error(&self) -> Option<&RegistryError> {
        match &*self.0 {
            Kind::Conflict { error, .. } => Some(error),
            Kind::Settings(_) => None,
        }
    }

    /// For a conflict, the method that declared the existing breaker (`None`: it was made in
    /// code) and the one whose settings differ, as `<Trait>#<method>(<parameter types>)`.
    pub fn methods(&self) -> Option<(Option<&str>, &str)> {
        match &*self.0 {
            Kind::Conflict {
                existing,
                requested,
                ..
            } => Some((existing.as_deref(), requested)),
            Kind::Settings(_) => None,
        }
    }
}

impl fmt::Display for DeclareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Kind::Conflict {
                error,
                existing: Some(existing),
                requested,
            } => write!(
                f,
                "{error}; declared by {existing} (existing) and by {requested} (requested)"
            ),
            Kind::Conflict {
                error,
                existing: None,
                requested,
            } => write!(
                f,
                "{error}; the existing breaker was made in code, requested by {requested}"
            ),
            Kind::Settings(error) => fmt::Display::fmt(error, f),
        }
    }
}

impl fmt::Debug for DeclareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeclareError")
            .field("code", &self.code())
            .field("message", &self.to_string())
            .finish()
    }
}

impl std::error::Error for DeclareError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            Kind::Conflict { error, .. } => Some(error),
            Kind::Settings(error) => Some(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declare_error_is_send_sync_and_small() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<DeclareError>();
        assert_eq!(
            std::mem::size_of::<DeclareError>(),
            std::mem::size_of::<usize>()
        );
    }
}

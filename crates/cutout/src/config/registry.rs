//! The registry glue: [`Config::register`] creates a document's breakers in a [`Registry`].

use super::Config;
use crate::{Breaker, Registry, RegistryError};

impl Config {
    /// Creates (or finds) a breaker in `registry` for every instance, in id order. Fails with
    /// `CUT-REG-001` if the registry already holds one of the ids with other settings; the
    /// breakers created before the failing id stay in the registry.
    pub fn register(&self, registry: &Registry) -> Result<Vec<Breaker>, RegistryError> {
        self.instances()
            .map(|(id, settings)| registry.breaker(id, settings.clone()))
            .collect()
    }
}

//! [`LoadError`]: what a document that cannot be loaded reports, and how its message reads.
//!
//! One error, the first in a fixed order, with a stable code, the section, the key, its value
//! as written and what the key accepts, so a message can be acted on without the docs and a
//! program can match on [`LoadError::code`]. The codes are listed in the
//! [module docs](crate::config#error-codes) and in [`ErrorCode`].

use std::fmt;

use crate::error::{ConfigError, ErrorCode};

/// A configuration document could not be loaded: the stable code, where, the key, its value
/// as written and what the key accepts. See the [module docs](crate::config) for the table of codes.
pub struct LoadError(Box<LoadInner>);

struct LoadInner {
    code: ErrorCode,
    section: String,
    key: String,
    value: Option<String>,
    detail: Option<String>,
    allowed: Option<String>,
    suggestion: Option<String>,
    /// How to show the suggestion: keys bare, values quoted.
    quote_suggestion: bool,
    note: Option<String>,
    settings: Option<ConfigError>,
    /// Read outside a document (`section` is then empty and not shown): the format that
    /// carries the error says where.
    alone: Option<Alone>,
}

/// What was read outside a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alone {
    /// A settings table: [`Settings`](crate::Settings)'s `Deserialize`.
    Table,
    /// One value: the [`duration`](mod@super::duration) helpers. The key is then the kind of value (`"duration"`).
    Value,
}

impl LoadError {
    pub(super) fn new(
        code: ErrorCode,
        section: &str,
        key: &str,
        value: Option<String>,
    ) -> LoadError {
        LoadError(Box::new(LoadInner {
            code,
            section: section.to_owned(),
            key: key.to_owned(),
            value,
            detail: None,
            allowed: None,
            suggestion: None,
            quote_suggestion: true,
            note: None,
            settings: None,
            alone: None,
        }))
    }

    /// Marks an error found outside a document.
    pub(super) fn alone(mut self, alone: Alone) -> Self {
        self.0.alone = Some(alone);
        self
    }

    pub(super) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.0.detail = Some(detail.into());
        self
    }

    pub(super) fn allowed(mut self, allowed: impl Into<String>) -> Self {
        self.0.allowed = Some(allowed.into());
        self
    }

    pub(super) fn suggest(mut self, suggestion: Option<&str>, quoted: bool) -> Self {
        self.0.suggestion = suggestion.map(str::to_owned);
        self.0.quote_suggestion = quoted;
        self
    }

    /// The settings error this one reports, and where its value came from when that is not
    /// the section at fault (`"merged into [instances.<id>]"`, `"built-in default"`).
    pub(super) fn behind(mut self, settings: ConfigError, note: Option<String>) -> Self {
        self.0.note = note;
        self.0.settings = Some(settings);
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The section the value was written in, as a dotted path (`"instances.payments"`,
    /// `"defaults"`); empty for the top level and for malformed documents.
    pub fn section(&self) -> &str {
        &self.0.section
    }

    /// The key at fault, in kebab-case as written (`"failure-ratio"`); a top-level section
    /// name for an unknown section; empty for a malformed document.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The value as written in the document (strings quoted), when there is one.
    pub fn value(&self) -> Option<&str> {
        self.0.value.as_deref()
    }

    /// What the key accepts.
    pub fn allowed_values(&self) -> Option<&str> {
        self.0.allowed.as_deref()
    }

    /// The nearest known key, choice, config name or section, when one is close.
    pub fn suggestion(&self) -> Option<&str> {
        self.0.suggestion.as_deref()
    }

    /// The settings error behind a `CUT-CFG-001`…`006` or `012`…`015`, as the builder
    /// reported it.
    pub fn settings_error(&self) -> Option<&ConfigError> {
        self.0.settings.as_ref()
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &*self.0;
        write!(f, "{}: ", e.code)?;
        if e.code == ErrorCode::Syntax {
            // "malformed document at line 2, column 5: …", or "malformed document: …" when
            // the format gave no position.
            f.write_str("malformed document")?;
            return match e.detail.as_deref() {
                Some(detail) if detail.starts_with("at ") => write!(f, " {detail}"),
                Some(detail) => write!(f, ": {detail}"),
                None => Ok(()),
            };
        } else {
            let headline = match e.code {
                ErrorCode::UnknownKey => "unknown key",
                ErrorCode::WrongType => "wrong type for",
                ErrorCode::UnknownBaseConfig => "unknown",
                _ => "invalid",
            };
            // A settings table that is not a table has no key at fault: the table is.
            let subject = match (e.alone, e.key.is_empty()) {
                (Some(Alone::Table), true) => "settings",
                _ => e.key.as_str(),
            };
            write!(f, "{headline} {subject}")?;
            match (&e.value, e.alone) {
                (Some(value), Some(Alone::Value)) => write!(f, " {value}")?,
                (Some(value), _) => write!(f, " = {value}")?,
                (None, _) => f.write_str(" (not set)")?,
            }
            match e.alone {
                Some(_) => {}
                None if e.section.is_empty() => f.write_str(" at the top level")?,
                None => write!(f, " in [{}]", e.section)?,
            }
            if let Some(note) = &e.note {
                write!(f, " ({note})")?;
            }
        }
        let mut sep = ": ";
        if let Some(detail) = &e.detail {
            write!(f, "{sep}{detail}")?;
            sep = "; ";
        }
        // An unknown key with a close match only needs the match, not the whole key list.
        let show_allowed = !(e.code == ErrorCode::UnknownKey && e.suggestion.is_some());
        if let (true, Some(allowed)) = (show_allowed, &e.allowed) {
            write!(f, "{sep}allowed {allowed}")?;
            sep = "; ";
        }
        if let Some(suggestion) = &e.suggestion {
            if e.quote_suggestion {
                write!(f, "{sep}did you mean {suggestion:?}?")?;
            } else {
                write!(f, "{sep}did you mean {suggestion}?")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadError")
            .field("code", &self.0.code)
            .field("message", &self.to_string())
            .finish()
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .settings
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub(super) fn syntax_toml(text: &str, error: &toml::de::Error) -> LoadError {
    let message = error.message().trim().to_owned();
    let detail = match error.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            format!("at line {line}, column {column}: {message}")
        }
        None => message,
    };
    LoadError::new(ErrorCode::Syntax, "", "", None)
        .detail(detail)
        .allowed("a TOML document")
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é=", 2), (1, 2));
    }
}

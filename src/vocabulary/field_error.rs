//! The error shape every settings sub-parser returns, so that the parsers of mirrors,
//! platforms, custom kinds and lookup scope need not know the settings that call them.

use std::fmt;

/// The error of a parser that settings delegate a field to: it names the offending part
/// relative to that field (`[0].prefix`), and `within` makes it a
/// [`SettingsError`](crate::settings::SettingsError).
pub trait FieldError: fmt::Display {
    /// The offending part, relative to the field handed to the parser: `[2]`, `.kind`,
    /// `[0].mirrors[1].location`.
    fn field(&self) -> String;
}

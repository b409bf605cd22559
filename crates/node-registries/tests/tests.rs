//! The integration tests, one binary: each suite a module beside this file.

mod chains;
mod refusals;

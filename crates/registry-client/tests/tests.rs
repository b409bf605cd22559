//! The integration tests, one binary: each suite a module beside this file, sharing `common`.

mod common;

mod challenges;
mod tags;

//! The fuzz targets' properties as plain functions of the input bytes, so that one body serves
//! two runners: cargo-fuzz's coverage-guided search (`fuzz_targets/`, `make fuzz`) and the
//! corpus replay that `cargo test` runs on every check (`tests/replay.rs`), which needs no
//! instrumented build of its own.

pub mod docker_config;
pub mod json_extent;
pub mod keyring;
pub mod reference;
pub mod settings;
pub mod validate;

/// A target's property, run on one input: it panics where the property does not hold.
pub type Target = fn(&[u8]);

/// Every target by the name of its corpus directory (`fuzz/corpus/<name>`, `fuzz/seed.sh`).
pub const TARGETS: [(&str, Target); 6] = [
    ("reference", reference::run),
    ("docker_config", docker_config::run),
    ("keyring", keyring::run),
    ("settings", settings::run),
    ("validate", validate::run),
    ("json_extent", json_extent::run),
];

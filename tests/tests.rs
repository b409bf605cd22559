//! The integration tests, one binary: each suite a module beside this file, sharing `common`
//! and `fixtures/`.

mod common;

mod broker;
mod broker_all;
mod certainty;
mod credential_loop;
mod credential_providers;
mod custom_kinds;
mod image_volumes;
mod mirrors;
mod node_rules;
mod pinning;
mod platforms;
mod policy;
mod pull_secrets;
mod ui_questions;
mod warning_causes;

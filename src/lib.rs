//! resolvable-images-policy: a Kubewarden policy that rejects Pods and workloads whose images
//! will certainly fail to pull, and warns about those it could not verify.
//!
//! Every decision is pure and testable natively; only [`host::WapcHost`] touches the waPC
//! boundary, and only the `wasm32` entry points below use it. A request is decided in four
//! steps ([`evaluate::evaluate`]): [`plan`] what to check, [`lookup`] the registries,
//! [`judge`] what the answers mean, and answer with the configured actions ([`report`]).
//!
//! # Glossary
//! - **image**: a container's image string (or an image volume's `reference`) as written
//!   ([`workload::ContainerImage`]).
//! - **reference**: an image parsed and normalised as the kubelet does
//!   ([`reference::ImageReference`]).
//! - **object**: the request's `object` or `oldObject`, kept as the JSON the API server sent
//!   and read only as far as needed ([`object::Object`]).
//! - **pod**: one pod spec of the request (a custom kind may hold several), with its pull
//!   secrets and its images to check ([`plan::Pod`], [`plan::Check`]).
//! - **location**: a place a node may pull an image from, a mirror or the primary; a **chain**
//!   is the locations a node tries, in order ([`mirrors::Location`]).
//! - **lookup**: asking one location whether a manifest exists, with the policy server's
//!   credentials or, in a batch, with the pod's ([`lookup::Lookups`]). "Resolve" appears only
//!   in the name of the proposed capability `oci/v1/resolve_images`.
//! - **failure**: why an image will not pull, or could not be verified; its **kind** is one
//!   row of the table in [`failure::FailureKind`] (setting key, certainty, default action);
//!   the README calls the kinds "verdicts", the word operators configure them by.
//! - **finding**: a failure with its subject, a container or a pull secret ([`finding::Finding`]).
//! - **action**: what the operator wants done with a kind of failure: reject, warn or allow
//!   ([`action::Action`]).
//! - **decision**: the answer to the admission request ([`report::Decision`]).
//! - **host error**: a failed host call, classified once from its text ([`host::HostError`]).

#![forbid(unsafe_code)]

// The modules, bottom-up: each depends only on those above it in this list
// (`scripts/import-cycles.py`, run by `make check`, fails on any cycle between files).

// Shared vocabulary: leaves that every step may name.
pub mod action;
pub mod failure;
pub mod field_error;
pub mod globs;
pub mod object;
pub mod platform;
pub mod reference;
pub mod text;

// The host boundary and the kubelet's credential rules.
pub mod budget;
pub mod host;
/// The kubelet's pull credentials, in a crate of their own that the lookup broker shares.
pub use kubelet_credentials as credentials;

// Reading the request, as the API server, the scheduler and the nodes read it.
pub mod custom_kinds;
pub mod lookup_scope;
pub mod mirrors;
pub mod node_images;
pub mod platforms;
pub mod pull_secrets;
pub mod scheduling;
pub mod short_names;
pub mod workload;

// What the operator configured.
pub mod broker_settings;
pub mod settings;
pub mod ui_form;

// The payload of `validate`: the admission request, and the settings read on the way.
pub mod admission;

// The four steps, in order.
// 1. Plan: which images of which pods to check, with which credentials and locations.
pub mod finding;
pub mod plan;

// 2. Lookup: ask the registries, each location at most once per request (through the lookup
// broker where it is configured).
pub mod broker;
pub mod credential_attempts;
pub mod lookup;

// 3. Judge: what the answers mean for a node, findings per image.
pub mod judge;

// 4. Answer: the configured action per finding, the messages, the patch.
pub mod audit;
pub mod report;

// One request through the four steps; the module's exports (`wasm/`) call it.
pub mod evaluate;

/// Builders of Secrets and base64 shared by the unit tests, `tests/` and `fuzz/` (the `testing`
/// feature); never part of the policy.
#[cfg(feature = "testing")]
pub use kubelet_credentials::testing;

#[cfg(test)]
mod fixtures;

//! resolvable-images-policy: a Kubewarden policy that rejects Pods and workloads whose images
//! will certainly fail to pull, and warns about those it could not verify.
//!
//! Every decision is pure and testable natively; only [`host::WapcHost`] touches the waPC
//! boundary, and only the `wasm32` entry points (`wasm/`) use it. A request is decided in four
//! steps ([`evaluate::evaluate`]), each a folder: [`plan`] what to check, [`lookup`] the
//! registries, [`judge`] what the answers mean, and [`answer`] with the configured actions.
//!
//! # Glossary
//! One word per concept, in the code, the messages and the documentation; this is the only
//! glossary (`docs/design/architecture.md` points here), kept beside the code so that rustdoc
//! resolves every type it names.
//! - **image**: a container's image string (or an image volume's `reference`) as written
//!   ([`vocabulary::workload::ContainerImage`]).
//! - **reference**: an image parsed and normalised as the kubelet does
//!   ([`vocabulary::reference::ImageReference`]).
//! - **object**: the request's `object` or `oldObject`, kept as the JSON the API server sent
//!   and read only as far as needed ([`vocabulary::object::Object`]).
//! - **pod**: one pod spec of the request (a custom kind may hold several), with its pull
//!   secrets and its images to check ([`plan::Pod`]).
//! - **check**: one image of a pod that the policy will look up and judge: the image, its
//!   reference and chain ([`plan::Check`]). Also the verb: to check an image is to plan it,
//!   look it up and judge it; "not checked in time" is a check the time budget cut short.
//! - **location**: a place a node may pull an image from, a mirror or the primary; a **chain**
//!   is the locations a node tries, in order, without those a blocked rule makes the node
//!   **refuse** ([`settings::mirrors::Location`], [`settings::mirrors::Chain`]).
//! - **lookup**: asking one location whether a manifest exists, with the policy server's
//!   credentials or, in a batch, with the pod's ([`lookup::Lookups`]). "Resolve" appears only
//!   in the name of the proposed capability `oci/v1/resolve_images`.
//! - **failure**: why an image will not pull, or could not be verified
//!   ([`vocabulary::failure::Failure`]); its **detail** is the one-line explanation, in the
//!   words of the registry or the parser, never secret.
//! - **verdict**: a failure's kind, one row of the table in
//!   [`vocabulary::failure::FailureKind`] (setting key, certainty, default action); the word
//!   operators configure them by (`actions.<verdict>`), which the code still calls a kind.
//! - **finding**: a failure with its subject, a container or a pull secret
//!   ([`plan::finding::Finding`]).
//! - **action**: what the operator wants done with a verdict: reject, warn or allow
//!   ([`vocabulary::action::Action`]).
//! - **decision**: the answer to the admission request ([`answer::Decision`]).
//! - **host error**: a failed host call, classified once from its text ([`host::HostError`]).

#![forbid(unsafe_code)]

// The layers, bottom-up, one folder each: a module names only modules of its own folder or of
// the folders above it in this list. `scripts/import-cycles.py` (`make cycles`) fails on any
// cycle between files or between these folders.

// Shared vocabulary: what every layer may name (images, references, objects, failures).
pub mod vocabulary;

// The host boundary: every call out of the sandbox, and the time budget they spend.
pub mod host;
/// The kubelet's pull credentials, in a crate of their own that the lookup broker shares.
pub use kubelet_credentials as credentials;

// What the operator configured, with the rules of the nodes each setting describes (mirrors,
// short names, platforms) and of the custom kinds and lookup scope.
pub mod settings;

// The four steps, in order.
// 1. Plan: the admission request, and which images of which pods to check, with which
// credentials and locations.
pub mod plan;

// 2. Lookup: ask the registries, each location at most once per request (through the lookup
// broker where it is configured).
pub mod lookup;

// 3. Judge: what the answers mean for a node, findings per image.
pub mod judge;

// 4. Answer: the configured action per finding, the messages, the patch; the audit's answer.
pub mod answer;

// One request through the four steps; the module's exports (`wasm/`) call it.
pub mod evaluate;

/// Builders of Secrets and base64 shared by the unit tests, `tests/` and `fuzz/` (the `testing`
/// feature); never part of the policy.
#[cfg(feature = "testing")]
pub use kubelet_credentials::testing;

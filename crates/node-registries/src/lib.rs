//! A node's registry configuration, read as the node reads it, written as the policy's
//! `registries` setting: containerd 2's `certs.d` directories ([`containerd`]), a
//! `registries.conf` as CRI-O and Podman read it ([`registries_conf`]), and OpenShift's
//! `ImageDigestMirrorSet` / `ImageTagMirrorSet` ([`openshift`]).
//!
//! The translation is exact or refused: what the policy's rules cannot say the way the node
//! does it (a host the node never pulls from, credentials, a path the registry API does not
//! have) is a [`Refusal`] naming the file and the line, never a setting that predicts another
//! chain than the node's.

pub mod containerd;
pub mod openshift;
pub mod registries_conf;
pub mod rules;

pub use rules::{Mirror, PullFromMirror, Refusal, Rule, Translation, Where};

//! The nodes' kubelet credential provider plugins and the kubelet's verification of cached
//! images, as the kubelet's own configuration writes them (docs/credential-providers.md):
//!
//! - `credentialProviders`: the `CredentialProviderConfig` object of the kubelet's
//!   `--image-credential-provider-config`, parsed and checked by the crate the lookup broker
//!   runs the plugins with (`crates/credential-provider`): one declaration of the format;
//! - `imagePullCredentialsVerificationPolicy` and `preloadedImagesVerificationAllowlist`: the
//!   kubelet configuration fields of KEP-2535 (ensure secret pulled images), which decide
//!   when a node re-checks a pod's credentials before it runs an image it holds.

use std::fmt;

use serde::Deserialize;

pub use credential_provider::config::Skipped;
pub use credential_provider::{CredentialProviderConfig, Provider, TokenAttributes};

use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::reference::ImageReference;

/// The kubelet's `imagePullCredentialsVerificationPolicy`: which images a node hands to a pod
/// without first checking the pod's own credentials against the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum VerificationPolicy {
    /// Every image the node holds, for every pod (the kubelet's behaviour before KEP-2535).
    NeverVerify,
    /// The kubelet's default: images the kubelet did not pull itself (preloaded).
    NeverVerifyPreloadedImages,
    /// Only images of `preloadedImagesVerificationAllowlist`.
    NeverVerifyAllowlistedImages,
    /// None: each image's records are checked.
    AlwaysVerify,
}

impl VerificationPolicy {
    /// Its name in the kubelet configuration.
    pub fn name(self) -> &'static str {
        match self {
            VerificationPolicy::NeverVerify => "NeverVerify",
            VerificationPolicy::NeverVerifyPreloadedImages => "NeverVerifyPreloadedImages",
            VerificationPolicy::NeverVerifyAllowlistedImages => "NeverVerifyAllowlistedImages",
            VerificationPolicy::AlwaysVerify => "AlwaysVerify",
        }
    }
}

impl fmt::Display for VerificationPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `preloadedImagesVerificationAllowlist` entry: a repository as the kubelet normalises it
/// (`docker.io/library/nginx`, no tag or digest), or a prefix of path segments ending in `/*`
/// (`registry.example/team/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowlistEntry {
    /// Exactly this repository.
    Repository(String),
    /// Every repository starting with this text (which ends with `/`).
    Prefix(String),
}

impl AllowlistEntry {
    /// The entry `text`, checked as the kubelet checks it when it starts; the problem when it
    /// would refuse it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim() != text {
            return Err("leading or trailing spaces are not allowed".into());
        }
        if let Some(prefix) = text.strip_suffix('*') {
            if !prefix.ends_with('/') {
                return Err("the only wildcard allowed is a trailing \"/*\"".into());
            }
            if prefix.contains('*') || prefix.len() < 2 {
                return Err(
                    "a wildcard entry is a registry host or repository prefix followed by \"/*\""
                        .into(),
                );
            }
            return Ok(AllowlistEntry::Prefix(prefix.to_owned()));
        }
        if text.contains('*') {
            return Err("the only wildcard allowed is a trailing \"/*\"".into());
        }
        let reference =
            ImageReference::parse(text).map_err(|e| format!("not an image repository: {e}"))?;
        let name = reference.name();
        if name != text {
            return Err(format!(
                "write the repository as the kubelet normalises it, without tag or digest: {name:?}"
            ));
        }
        Ok(AllowlistEntry::Repository(name))
    }

    /// Whether a kubelet from 1.36 allowlists the image: it compares `name`, the normalised
    /// repository (`registry/path`, no tag), since kubernetes/kubernetes#137629.
    pub fn matches(&self, name: &str) -> bool {
        self.covers(name)
    }

    /// Whether a kubelet of 1.33 to 1.35 allowlists the image the Pod writes as `written`: it
    /// compares the field as written, tag included and not normalised
    /// (`imageMatches` in pkg/kubelet/images/pullmanager/image_pull_policies.go before
    /// #137629), so an exact entry never covers `registry.k8s.io/pause:3.10` nor `nginx`,
    /// and a `/*` entry covers what starts with it.
    pub fn matches_written(&self, written: &str) -> bool {
        self.covers(written)
    }

    fn covers(&self, text: &str) -> bool {
        match self {
            AllowlistEntry::Repository(repository) => repository == text,
            AllowlistEntry::Prefix(prefix) => text.starts_with(prefix.as_str()),
        }
    }
}

impl fmt::Display for AllowlistEntry {
    /// The entry as written in the kubelet configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowlistEntry::Repository(repository) => f.write_str(repository),
            AllowlistEntry::Prefix(prefix) => write!(f, "{prefix}*"),
        }
    }
}

/// A problem with one of these settings, at its path within the setting.
#[derive(Debug)]
pub struct Problem {
    field: String,
    problem: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problem)
    }
}

impl FieldError for Problem {
    fn field(&self) -> String {
        self.field.clone()
    }
}

/// The providers whose `matchImages` cover `name` (a normalised repository): those the
/// kubelet asks about it.
pub fn covering<'a>(
    providers: &'a [Provider],
    name: &'a str,
) -> impl Iterator<Item = &'a Provider> + 'a {
    providers
        .iter()
        .filter(move |provider| provider.matches(name))
}

/// `credentialProviders`, checked as the kubelet checks its file (nothing when not written).
pub fn providers(config: Option<CredentialProviderConfig>) -> Result<Vec<Provider>, Problem> {
    match config {
        None => Ok(Vec::new()),
        Some(config) => config.check().map_err(|problem| Problem {
            field: String::new(),
            problem: problem.to_string(),
        }),
    }
}

/// `preloadedImagesVerificationAllowlist`, each entry checked.
pub fn allowlist(entries: Vec<String>) -> Result<Vec<AllowlistEntry>, Problem> {
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            AllowlistEntry::parse(entry).map_err(|problem| Problem {
                field: format!("[{i}]"),
                problem,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_entries_are_repositories_or_segment_prefixes() {
        let exact = AllowlistEntry::parse("docker.io/library/nginx").expect("valid");
        assert!(exact.matches("docker.io/library/nginx"));
        assert!(!exact.matches("docker.io/library/nginx-extra"));
        let prefix = AllowlistEntry::parse("registry.example/team/*").expect("valid");
        assert!(prefix.matches("registry.example/team/app"));
        assert!(prefix.matches("registry.example/team/sub/app"));
        assert!(!prefix.matches("registry.example/teams/app"));
        let host = AllowlistEntry::parse("registry.example/*").expect("valid");
        assert!(host.matches("registry.example/app"));
        assert_eq!(host.to_string(), "registry.example/*");
        for bad in [
            "nginx",
            "docker.io/library/nginx:1.25",
            "registry.example/team*",
            "registry.example/*/app",
            "/*",
            " registry.example/*",
            "Registry.example/App",
        ] {
            assert!(AllowlistEntry::parse(bad).is_err(), "{bad}");
        }
    }

    /// The kubelet's `imageMatches` (pkg/kubelet/images/pullmanager/image_pull_policies.go):
    /// 1.33 to 1.35 compare the Pod's image field as written; 1.36 its normalised name
    /// (kubernetes/kubernetes#137629).
    #[test]
    fn an_exact_entry_does_not_allowlist_a_tagged_image_before_1_36_a_prefix_does() {
        let exact = AllowlistEntry::parse("registry.k8s.io/pause").expect("valid");
        let prefix = AllowlistEntry::parse("registry.k8s.io/*").expect("valid");
        let written = "registry.k8s.io/pause:3.10";
        assert!(!exact.matches_written(written));
        assert!(prefix.matches_written(written));
        assert!(
            exact.matches("registry.k8s.io/pause"),
            "1.36 compares the name"
        );
        let library = AllowlistEntry::parse("docker.io/library/nginx").expect("valid");
        assert!(
            !library.matches_written("nginx"),
            "not normalised before 1.36"
        );
        assert!(library.matches("docker.io/library/nginx"));
    }
}

//! The nodes' kubelet credential provider plugins (`credentialProviders`): after a pod's pull
//! secrets and the node's own credentials, the kubelet asks every provider whose `matchImages`
//! covers an image, and tries every credential it gets. The policy cannot run them, so a
//! refused lookup of an image a provider covers may still pull on the node: it is never
//! `uncoveredRegistry`, and never more than a warning. A provider with `tokenAttributes` is
//! run only for a pod whose ServiceAccount has every `requiredServiceAccountAnnotationKeys`
//! key (and only for a pod with a ServiceAccount when `requireServiceAccount`): skipped, it
//! gives the pod nothing, which a refusal's message then says.

use std::collections::HashMap;

use serde_json::Value;

use crate::host::budget::Budget;
use crate::host::{Host, ResourceRequest};
use crate::settings::credential_providers::{covering, Provider, Skipped};
use crate::vocabulary::reference::ImageReference;

/// The ServiceAccount fields a provider's rule reads.
const SERVICE_ACCOUNT_FIELDS: &[&str] = &["metadata.annotations"];

/// What the nodes' providers give one pod for one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// No provider's `matchImages` covers the image.
    None,
    /// The kubelet runs these providers for the pod (or may: its ServiceAccount could not be
    /// read), so the pod may get credentials the policy cannot see.
    Runs(Vec<String>),
    /// Every provider covering the image is skipped for the pod, each with why: they give it
    /// nothing.
    Skipped(Vec<String>),
}

/// A ServiceAccount's annotation keys, or why they are not known.
#[derive(Debug, Clone)]
enum Account {
    Annotations(Vec<String>),
    Missing,
    Unreadable,
}

/// Predicts which of the nodes' providers cover an image for a pod (the policy runs none),
/// reading the ServiceAccounts it needs at most once each per request.
pub struct ProviderCoverage<'a, H: Host> {
    providers: &'a [Provider],
    host: &'a H,
    budget: &'a Budget,
    accounts: HashMap<(String, String), Account>,
}

impl<'a, H: Host> ProviderCoverage<'a, H> {
    /// Nothing is read until a coverage is asked of a provider with `tokenAttributes`.
    pub fn new(providers: &'a [Provider], host: &'a H, budget: &'a Budget) -> Self {
        ProviderCoverage {
            providers,
            host,
            budget,
            accounts: HashMap::new(),
        }
    }

    /// Whether some provider's `matchImages` covers `image`.
    pub fn cover(&self, image: &ImageReference) -> bool {
        covering(self.providers, &image.name()).next().is_some()
    }

    /// What the providers give a pod of `namespace` running as `account` (`None`: no
    /// ServiceAccount) for `image`.
    pub fn coverage(
        &mut self,
        namespace: &str,
        account: Option<&str>,
        image: &ImageReference,
    ) -> Coverage {
        let name = image.name();
        let matching: Vec<&Provider> = covering(self.providers, &name).collect();
        if matching.is_empty() {
            return Coverage::None;
        }
        let (mut runs, mut skipped) = (Vec::new(), Vec::new());
        for provider in matching {
            let Some(attributes) = &provider.token_attributes else {
                runs.push(provider.name.clone());
                continue;
            };
            let read = account.map(|account| self.account(namespace, account));
            let skip = match &read {
                None | Some(Account::Missing) => attributes.skipped_for(None),
                Some(Account::Unreadable) => None,
                Some(Account::Annotations(keys)) => {
                    let has = |key: &str| keys.iter().any(|k| k == key);
                    attributes.skipped_for(Some(&has))
                }
            };
            let account = account.unwrap_or_default();
            match skip {
                None => runs.push(provider.name.clone()),
                // each the cause of a warning, kept whole within its 256 bytes: the namespace
                // is the request's, said elsewhere
                Some(Skipped::NoServiceAccount) => skipped.push(format!(
                    "credential provider {} requires a ServiceAccount and {account} does not exist in the namespace",
                    provider.name
                )),
                Some(Skipped::MissingAnnotation(key)) => skipped.push(format!(
                    "credential provider {} is skipped by the kubelet: ServiceAccount {account} lacks the annotation {key} it requires",
                    provider.name
                )),
            }
        }
        if runs.is_empty() {
            Coverage::Skipped(skipped)
        } else {
            Coverage::Runs(runs)
        }
    }

    /// The annotation keys of `namespace/name`, read once.
    fn account(&mut self, namespace: &str, name: &str) -> Account {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(account) = self.accounts.get(&key) {
            return account.clone();
        }
        let (host, budget) = (self.host, self.budget);
        let request =
            ResourceRequest::core("ServiceAccount", namespace, name, SERVICE_ACCOUNT_FIELDS);
        let account = match budget.outside(host, || host.get_resource(&request)) {
            Ok(object) => Account::Annotations(annotation_keys(&object)),
            Err(error) if error.is_not_found() => Account::Missing,
            Err(_) => Account::Unreadable,
        };
        self.accounts.insert(key, account.clone());
        account
    }
}

/// The keys of an object's `metadata.annotations`.
fn annotation_keys(object: &Value) -> Vec<String> {
    object["metadata"]["annotations"]
        .as_object()
        .map(|annotations| annotations.keys().cloned().collect())
        .unwrap_or_default()
}

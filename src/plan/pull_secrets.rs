//! Which pull secrets the kubelet will use for a pod, read through the host the way the
//! ServiceAccount admission plugin and the kubelet see them.
//!
//! A Pod reaching the policy has already been through the ServiceAccount plugin: its
//! `imagePullSecrets` are final. A pod template has not, so the plugin is emulated: the
//! template's own secrets, else those of its ServiceAccount (`default` when unnamed).

use crate::host::{Host, ResourceRequest};
use crate::vocabulary::failure::{Failure, FailureKind};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::workload::PodSpecView;
use kubelet_credentials::{
    distinct_names, parse_pull_secret, service_account_secret_names, Keyring, SecretSource,
};

/// A problem with one pull secret (or with the ServiceAccount that lists them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFinding {
    /// How messages name it: `pull secret "team-a/regcred" (from ServiceAccount "default")`.
    pub description: String,
    /// What is wrong; the detail never carries secret content.
    pub failure: Failure,
}

/// The credentials a pod's pulls will use, and what was wrong on the way.
#[derive(Debug, Default)]
pub struct PullSecrets {
    /// The kubelet's keyring built from every usable secret, in order.
    pub keyring: Keyring,
    /// Missing, mistyped and malformed secrets.
    pub findings: Vec<SecretFinding>,
    /// Why secrets could not be read at all (`None` when they were consulted).
    pub unavailable: Option<String>,
    /// True when the host was asked for a ServiceAccount or a Secret: time the policy's
    /// budget must not charge to its first lookup. A Pod that lists no secret asks nothing.
    pub asked_the_cluster: bool,
}

impl PullSecrets {
    /// True when the secrets were read, so "no secret covers this registry" is a fact.
    pub fn consulted(&self) -> bool {
        self.unavailable.is_none()
    }

    /// A refused lookup of `reference` means more once the pod's secrets are known: no secret
    /// covering the registry is its own failure; a covering secret the lookup could not use is
    /// said so. `pod_credentials` tells whether the lookup used these secrets.
    pub fn explain_refusal(
        &self,
        failure: Failure,
        reference: &ImageReference,
        namespace: &str,
        pod_credentials: bool,
    ) -> Failure {
        if !self.consulted() || failure.kind != FailureKind::Unauthorized {
            return failure;
        }
        let registry = reference.registry();
        let detail = failure.detail;
        if !self.keyring.covers(&reference.name()) {
            Failure::new(
                FailureKind::UncoveredRegistry,
                format!("no pull secret in namespace {namespace} covers {registry}; {detail}"),
            )
        } else if pod_credentials {
            Failure::new(
                FailureKind::Unauthorized,
                format!("the pod's pull secrets for {registry} were refused: {detail}"),
            )
        } else {
            Failure::new(
                FailureKind::Unauthorized,
                format!(
                    "the pod's pull secrets cover {registry} but this check used the policy server's credentials; {detail}"
                ),
            )
        }
    }
}

/// Fields the policy needs from each object: nothing else crosses the boundary.
const SERVICE_ACCOUNT_FIELDS: &[&str] = &["imagePullSecrets"];
const SECRET_FIELDS: &[&str] = &["type", "data"];

/// Reads the pull secrets the kubelet would use for pods of `spec` in `namespace`.
pub fn read(spec: &PodSpecView, namespace: &str, host: &impl Host) -> PullSecrets {
    let mut result = PullSecrets::default();
    let origin = spec.secret_source();
    let names = match &origin {
        SecretSource::PodSpec => spec.image_pull_secrets.clone(),
        SecretSource::ServiceAccount(account) => {
            match service_account_names(namespace, account, host, &mut result) {
                Some(names) => names,
                None => return result,
            }
        }
    };

    for name in distinct_names(names.iter().map(String::as_str)) {
        let object = format!("{namespace}/{name}");
        let finding = |kind, detail: String| SecretFinding {
            description: format!("pull secret {object:?} (from {origin})"),
            failure: Failure::new(kind, detail),
        };
        result.asked_the_cluster = true;
        match host.get_resource(&ResourceRequest::core(
            "Secret",
            namespace,
            name,
            SECRET_FIELDS,
        )) {
            Ok(secret) => match parse_pull_secret(&object, &secret) {
                Ok(entries) => entries.into_iter().for_each(|(key, credential)| {
                    result
                        .keyring
                        .add(&key, credential.with_source(object.as_str()))
                }),
                Err(error) if error.is_wrong_type() => result.findings.push(finding(
                    FailureKind::WrongPullSecretType,
                    format!("{error}; the kubelet ignores it"),
                )),
                Err(error) => result.findings.push(finding(
                    FailureKind::MalformedPullSecret,
                    format!("{error}; the kubelet fails every pull of the pod"),
                )),
            },
            Err(error) if error.is_not_found() => result.findings.push(finding(
                FailureKind::MissingPullSecret,
                format!("secret {object} does not exist; the kubelet skips it"),
            )),
            Err(error) => {
                result.unavailable = Some(error.summary());
                return result;
            }
        }
    }
    result
}

/// The secret names the ServiceAccount `account` lists, recording a missing account as a
/// finding; `None` when the cluster could not answer (recorded as `unavailable`).
fn service_account_names(
    namespace: &str,
    account: &str,
    host: &impl Host,
    result: &mut PullSecrets,
) -> Option<Vec<String>> {
    let request =
        ResourceRequest::core("ServiceAccount", namespace, account, SERVICE_ACCOUNT_FIELDS);
    result.asked_the_cluster = true;
    match host.get_resource(&request) {
        Ok(service_account) => Some(service_account_secret_names(&service_account)),
        Err(error) if error.is_not_found() => {
            result.findings.push(SecretFinding {
                description: format!("ServiceAccount \"{namespace}/{account}\""),
                failure: Failure::new(
                    FailureKind::MissingPullSecret,
                    format!("ServiceAccount {namespace}/{account} does not exist: pods of this template will be refused until it is created"),
                ),
            });
            Some(Vec::new())
        }
        Err(error) => {
            result.unavailable = Some(error.summary());
            None
        }
    }
}

//! The node's image credential provider plugins in a lookup (`--image-credential-provider-config`
//! and `--image-credential-provider-bin-dir`, the kubelet's flags): after the pod's pull
//! secrets, the credentials the plugins matching the image give it, as the kubelet's keyring
//! puts them after the pull secrets' (`pkg/credentialprovider/secrets`).
//!
//! What the kubelet would get is uncertain when a plugin fails, hangs, or needs what the
//! broker cannot know (the pod's ServiceAccount when the sealed name gives pull secrets): such
//! a plugin is a [`Given::Failed`] entry, an attempt without a definitive answer, so the
//! lookup can be found by another credential but is never a certain failure. A plugin the
//! kubelet would not run (a required ServiceAccount annotation missing) gives nothing, as on
//! the node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use broker_reference::Credentials;
use credential_provider::{Account, Auth, ConfigError, Plugin, Plugins};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kubelet_credentials::{Credential, Keyring};

use crate::cluster::{Cluster, Fetched};
use crate::token_binding;

/// The shortest lifetime the API server grants a token, asked for since the token is used at
/// once.
const TOKEN_SECONDS: i64 = 600;

/// One credential of the node's plugins for a lookup, or why a plugin gave none.
pub enum Given {
    /// A credential of a plugin's answer that covers the image.
    Credential(Credential),
    /// A plugin that may give the kubelet credentials the broker did not get.
    Failed(String),
}

/// The configured plugins.
pub struct NodeProviders {
    plugins: Plugins,
}

impl NodeProviders {
    /// The plugins of the config file `config`, run from `bin_dir`; like the kubelet, refuses
    /// a bin directory or a plugin that does not exist.
    pub fn load(config: &Path, bin_dir: &Path) -> Result<Self, ConfigError> {
        let providers = credential_provider::load(config)?;
        let invalid = |problem: String| ConfigError::Invalid {
            path: config.to_owned(),
            problem,
        };
        if !bin_dir.is_dir() {
            return Err(invalid(format!(
                "plugin directory {} does not exist",
                bin_dir.display()
            )));
        }
        if let Some(missing) = providers.iter().find(|p| !bin_dir.join(&p.name).is_file()) {
            return Err(invalid(format!(
                "plugin {} is not in {}",
                missing.name,
                bin_dir.display()
            )));
        }
        Ok(NodeProviders {
            plugins: Plugins::new(PathBuf::from(bin_dir), providers),
        })
    }

    /// Whether a plugin is asked about `image` (a repository without tag).
    pub fn cover(&self, image: &str) -> bool {
        self.plugins.matching(image).next().is_some()
    }

    /// What the plugins give `image` for a pod of `namespace` whose sealed name says
    /// `credentials`: their credentials that cover it, in the keyring's order, then the
    /// plugins that failed.
    pub async fn credentials(
        &self,
        cluster: &Cluster,
        namespace: &str,
        credentials: &Credentials,
        image: &str,
    ) -> Vec<Given> {
        let mut keyring = Keyring::new();
        let mut failed = Vec::new();
        for plugin in self.plugins.matching(image) {
            let name = &plugin.provider().name;
            match self
                .one(plugin, cluster, namespace, credentials, image)
                .await
            {
                Ok(Some(auth)) => {
                    for (key, entry) in auth.iter() {
                        let credential = Credential::new(&entry.username, &entry.password)
                            .with_source(format!("credential provider {name}"));
                        keyring.add(key, credential);
                    }
                }
                Ok(None) => {}
                Err(reason) => failed.push(Given::Failed(format!(
                    "credential provider {name}: {reason}"
                ))),
            }
        }
        let mut given: Vec<Given> = keyring
            .lookup(image)
            .into_iter()
            .cloned()
            .map(Given::Credential)
            .collect();
        given.extend(failed);
        given
    }

    /// One plugin's answer; `None` when the kubelet would not run it.
    async fn one(
        &self,
        plugin: &Plugin,
        cluster: &Cluster,
        namespace: &str,
        credentials: &Credentials,
        image: &str,
    ) -> Result<Option<Auth>, String> {
        let Some(attributes) = &plugin.provider().token_attributes else {
            let none = BTreeMap::new();
            let auth = self
                .plugins
                .credentials(plugin, image, None, None, &none)
                .await?;
            return Ok(Some(auth));
        };
        let Credentials::ServiceAccount(name) = credentials else {
            return Err("it needs the pod's ServiceAccount, which the lookup does not name".into());
        };
        let account = service_account(cluster, namespace, name).await?;
        let Ok(annotations) = plugin.annotations(&account) else {
            // a required annotation missing: the kubelet does not run it
            return Ok(None);
        };
        let token = token(cluster, namespace, name, &attributes.audience).await?;
        let auth = self
            .plugins
            .credentials(plugin, image, Some(&account), Some(&token), &annotations)
            .await?;
        Ok(Some(auth))
    }
}

/// The ServiceAccount `namespace/name`: its UID and annotations.
async fn service_account(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Result<Account, String> {
    let object = match cluster.get::<ServiceAccount>(namespace, name).await {
        Ok(Fetched::Object(object)) => object,
        Ok(Fetched::Missing) => return Err(format!("ServiceAccount {namespace}/{name} not found")),
        Err(error) => return Err(error.to_string()),
    };
    let metadata = &object["metadata"];
    let annotations = metadata["annotations"]
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Account {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: metadata["uid"].as_str().unwrap_or_default().to_owned(),
        annotations,
    })
}

/// A token of the ServiceAccount for `audience` (TokenRequest), living the shortest time the
/// API server grants and bound to the namespace's binding Secret (crate::token_binding).
async fn token(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    audience: &str,
) -> Result<String, String> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.to_owned()]),
            expiration_seconds: Some(TOKEN_SECONDS),
            bound_object_ref: Some(token_binding::bound_object()),
        }),
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(cluster.client(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|error| format!("TokenRequest for ServiceAccount {namespace}/{name}: {error}"))?;
    answer
        .status
        .and_then(|status| status.token)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| format!("TokenRequest for ServiceAccount {namespace}/{name}: no token"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use credential_provider::testing::install_executable;

    const IMAGE: &str = "registry.test/team/app";

    /// A plugin directory with executables `answers` (answering `robot` and a password for
    /// registry.test) and `fails` (exiting 1), and a config whose providers are `providers`
    /// (YAML list entries).
    fn plugins(providers: &str) -> (tempfile::TempDir, NodeProviders) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("the bin directory");
        let answer = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","auth":{"registry.test":{"username":"robot","password":"unit-Plugin-Pw-5x2c"}}}"#;
        for (name, body) in [
            (
                "answers",
                format!("#!/bin/sh\ncat >/dev/null\necho '{answer}'\n"),
            ),
            ("fails", "#!/bin/sh\ncat >/dev/null\nexit 1\n".to_owned()),
        ] {
            install_executable(&bin.join(name), &body);
        }
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n{providers}"
            ),
        )
        .expect("a config");
        let loaded = NodeProviders::load(&config, &bin).expect("a valid config");
        (dir, loaded)
    }

    fn provider(name: &str, extra: &str) -> String {
        format!(
            "  - name: {name}\n    matchImages: [\"registry.test\"]\n    defaultCacheDuration: 0s\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n{extra}"
        )
    }

    fn describe(given: &[Given]) -> Vec<String> {
        given
            .iter()
            .map(|g| match g {
                Given::Credential(c) => format!("credential {}", c.username()),
                Given::Failed(reason) => format!("failed: {reason}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn credentials_come_before_failed_plugins_whatever_the_config_order() {
        let config = provider("fails", "") + &provider("answers", "");
        let (_dir, providers) = plugins(&config);
        assert!(providers.cover(IMAGE));
        assert!(!providers.cover("other.test/team/app"));
        let given = providers
            .credentials(
                &Cluster::unreachable_for_tests(),
                "team-a",
                &Credentials::PullSecrets(vec![]),
                IMAGE,
            )
            .await;
        let described = describe(&given);
        assert_eq!(described.len(), 2, "{described:?}");
        assert_eq!(described[0], "credential robot");
        assert!(
            described[1].starts_with("failed: credential provider fails"),
            "{described:?}"
        );
    }

    #[tokio::test]
    async fn a_failing_plugin_is_an_attempt_without_an_answer_never_nothing() {
        let (_dir, providers) = plugins(&provider("fails", ""));
        let given = providers
            .credentials(
                &Cluster::unreachable_for_tests(),
                "team-a",
                &Credentials::PullSecrets(vec![]),
                IMAGE,
            )
            .await;
        assert!(
            matches!(given.as_slice(), [Given::Failed(_)]),
            "{:?}",
            describe(&given)
        );
    }

    #[tokio::test]
    async fn a_token_plugin_without_the_pods_service_account_is_uncertain() {
        let attributes = "    tokenAttributes:\n      serviceAccountTokenAudience: registry.test\n      requireServiceAccount: true\n";
        let (_dir, providers) = plugins(&provider("answers", attributes));
        let given = providers
            .credentials(
                &Cluster::unreachable_for_tests(),
                "team-a",
                &Credentials::PullSecrets(vec!["regcred".into()]),
                IMAGE,
            )
            .await;
        let described = describe(&given);
        assert_eq!(described.len(), 1, "{described:?}");
        assert!(
            described[0].contains("needs the pod's ServiceAccount"),
            "{described:?}"
        );
    }

    #[tokio::test]
    async fn no_reason_quotes_the_plugins_password() {
        let config = provider("answers", "") + &provider("fails", "");
        let (_dir, providers) = plugins(&config);
        let given = providers
            .credentials(
                &Cluster::unreachable_for_tests(),
                "team-a",
                &Credentials::PullSecrets(vec![]),
                IMAGE,
            )
            .await;
        for reason in given.iter().filter_map(|g| match g {
            Given::Failed(reason) => Some(reason),
            Given::Credential(_) => None,
        }) {
            assert!(!reason.contains("unit-Plugin-Pw"), "{reason}");
        }
    }

    #[test]
    fn a_missing_plugin_or_bin_directory_is_refused_at_start() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n{}",
                provider("absent", "")
            ),
        )
        .expect("a config");
        let no_dir = NodeProviders::load(&config, &dir.path().join("nowhere"));
        assert!(matches!(no_dir, Err(ConfigError::Invalid { .. })));
        let no_plugin = NodeProviders::load(&config, dir.path());
        let Err(ConfigError::Invalid { problem, .. }) = no_plugin else {
            panic!("a config naming a plugin that is not there was accepted");
        };
        assert!(problem.contains("plugin absent"), "{problem}");
    }
}

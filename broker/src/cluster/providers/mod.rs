//! The node's image credential provider plugins in a lookup (`--image-credential-provider-config`
//! and `--image-credential-provider-bin-dir`, the kubelet's flags): after the pod's pull
//! secrets, the credentials the plugins matching the image give it, as the kubelet's keyring
//! puts them after the pull secrets' (`pkg/credentialprovider/secrets`).
//!
//! What the kubelet would get is uncertain when a plugin fails, hangs, or needs what the
//! broker cannot know (the pod's ServiceAccount when the sealed name gives pull secrets), or is
//! not run for the lookup's namespace (crate::cluster::providers::served): such a plugin is a
//! [`Given::Failed`] entry, an attempt without a definitive answer, so the lookup can be found
//! by another credential but is never a certain failure. A plugin the kubelet would not run (a
//! required ServiceAccount annotation missing) gives nothing, as on the node.
//!
//! Runs are shared fairly (`credential_provider::RunLimits`: one per cache key, a namespace's
//! share, a key silenced after a run that failed or outlived its lookup), and tokens are reused
//! as the kubelet reuses them (crate::cluster::providers::tokens).

mod served;
mod tokens;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use broker_reference::Credentials;
use credential_provider::{
    Account, Ask, Auth, ConfigError, Plugin, PluginError, Plugins, RunLimits,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kubelet_credentials::{Credential, Keyring};
use tokio::time::Instant as Deadline;

use crate::cluster::token_binding;
use crate::cluster::{Cluster, ClusterError, Fetched};
pub use served::ServedError;
use served::{Rule, Served};
use tokens::{TokenKey, Tokens};

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

/// Why a plugin gave a lookup no answer; the kubelet may still get one, so the lookup stays
/// uncertain ([`Given::Failed`] carries these words).
#[derive(Debug, thiserror::Error)]
pub enum Unasked {
    /// `--provider-namespaces` does not give the plugin this namespace.
    #[error("not run for namespace {0}, which --provider-namespaces does not give it")]
    NotServed(String),
    /// A plugin with `tokenAttributes`, and the sealed name gives pull secrets, not a
    /// ServiceAccount.
    #[error("it needs the pod's ServiceAccount, which the lookup does not name")]
    NoServiceAccount,
    /// The ServiceAccount the sealed name gives does not exist.
    #[error("ServiceAccount {namespace}/{name} not found")]
    ServiceAccountMissing {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Namespace or ServiceAccount could not be read.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The API server refused the TokenRequest.
    #[error("TokenRequest for ServiceAccount {namespace}/{name}: {source}")]
    TokenRequest {
        /// The ServiceAccount's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: Box<kube::Error>,
    },
    /// The TokenRequest's answer held no token.
    #[error("TokenRequest for ServiceAccount {namespace}/{name}: no token")]
    NoToken {
        /// The ServiceAccount's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The plugin ran and failed, or could not run in time.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// Runs the node's configured credential provider plugins for lookups.
pub struct ProviderRunner {
    plugins: Plugins,
    served: Served,
    tokens: Tokens,
}

/// One lookup's question to the plugins.
pub struct Question<'a> {
    /// The lookup's namespace.
    pub namespace: &'a str,
    /// What its sealed name says to use.
    pub credentials: &'a Credentials,
    /// The repository, without tag.
    pub image: &'a str,
    /// When the lookup stops waiting.
    pub deadline: Deadline,
}

impl ProviderRunner {
    /// The plugins of the config file `config`, run from `bin_dir`; like the kubelet, refuses
    /// a bin directory or a plugin that does not exist. Until [`ProviderRunner::serving`], the
    /// providers without `tokenAttributes` serve no namespace.
    pub fn load(config: &Path, bin_dir: &Path) -> Result<Self, ConfigError> {
        let providers = credential_provider::load(config)?;
        if !bin_dir.is_dir() {
            return Err(ConfigError::NoPluginDirectory {
                path: config.to_owned(),
                dir: bin_dir.to_owned(),
            });
        }
        if let Some(missing) = providers.iter().find(|p| !bin_dir.join(&p.name).is_file()) {
            return Err(ConfigError::MissingPlugin {
                path: config.to_owned(),
                plugin: missing.name.clone(),
                dir: bin_dir.to_owned(),
            });
        }
        Ok(ProviderRunner {
            plugins: Plugins::new(PathBuf::from(bin_dir), providers),
            served: Served::default(),
            tokens: Tokens::default(),
        })
    }

    /// The providers, with the namespaces each serves (`--provider-namespaces` entries,
    /// crate::cluster::providers::served) and their runs within `limits`.
    pub fn serving(mut self, entries: &[String], limits: RunLimits) -> Result<Self, ServedError> {
        let names = self
            .plugins
            .all()
            .iter()
            .map(|p| p.provider().name.as_str());
        self.served = Served::parse(entries, names)?;
        for provider in self.plugins.all().iter().map(Plugin::provider) {
            let token = provider.token_attributes.is_some();
            if self.served.rule(&provider.name, token) == Rule::None {
                // an upgrade from a broker that ran it for every namespace says so once
                tracing::warn!(
                    msg = "providerServesNoNamespace",
                    provider = provider.name.as_str(),
                    hint = "name it in --provider-namespaces",
                );
            }
        }
        self.plugins = self.plugins.limited(limits);
        Ok(self)
    }

    /// Whether a plugin is asked about `image` (a repository without tag).
    pub fn cover(&self, image: &str) -> bool {
        self.plugins.matching(image).next().is_some()
    }

    /// What the plugins give `question`: their credentials that cover its image, in the
    /// keyring's order, then the plugins that failed or were not run for its namespace.
    pub async fn credentials(&self, cluster: &Cluster, question: &Question<'_>) -> Vec<Given> {
        let mut keyring = Keyring::new();
        let mut failed = Vec::new();
        for plugin in self.plugins.matching(question.image) {
            let name = &plugin.provider().name;
            match self.one(plugin, cluster, question).await {
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
            .lookup(question.image)
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
        question: &Question<'_>,
    ) -> Result<Option<Auth>, Unasked> {
        let namespace = question.namespace;
        self.served(plugin, cluster, namespace).await?;
        let none = BTreeMap::new();
        let mut ask = Ask {
            namespace,
            image: question.image,
            account: None,
            token: None,
            annotations: &none,
            deadline: question.deadline,
        };
        let Some(attributes) = &plugin.provider().token_attributes else {
            return Ok(Some(self.plugins.credentials(plugin, &ask).await?));
        };
        let Credentials::ServiceAccount(name) = question.credentials else {
            return Err(Unasked::NoServiceAccount);
        };
        let account = service_account(cluster, namespace, name).await?;
        let Ok(annotations) = plugin.annotations(&account) else {
            // a required annotation missing: the kubelet does not run it
            return Ok(None);
        };
        let key = TokenKey {
            namespace: namespace.to_owned(),
            name: name.clone(),
            uid: account.uid.clone(),
            audience: attributes.audience.clone(),
        };
        let lifetime = Duration::from_secs(TOKEN_SECONDS.unsigned_abs());
        let minted = token(cluster, namespace, name, &attributes.audience);
        let token = self.tokens.get(&key, lifetime, minted).await?;
        ask.account = Some(&account);
        ask.token = Some(&token);
        ask.annotations = &annotations;
        Ok(Some(self.plugins.credentials(plugin, &ask).await?))
    }

    /// Whether `plugin` serves `namespace`: `Err` saying why not.
    async fn served(
        &self,
        plugin: &Plugin,
        cluster: &Cluster,
        namespace: &str,
    ) -> Result<(), Unasked> {
        let provider = plugin.provider();
        let rule = self
            .served
            .rule(&provider.name, provider.token_attributes.is_some());
        let labels = match rule {
            Rule::Every => return Ok(()),
            Rule::None => BTreeMap::new(),
            Rule::Matching(_) => namespace_labels(cluster, namespace).await?,
        };
        if rule.serves(&labels) {
            return Ok(());
        }
        Err(Unasked::NotServed(namespace.to_owned()))
    }
}

/// The labels of Namespace `namespace` (none when it does not exist).
async fn namespace_labels(
    cluster: &Cluster,
    namespace: &str,
) -> Result<BTreeMap<String, String>, ClusterError> {
    let object = cluster.namespace(namespace).await?;
    Ok(object
        .as_ref()
        .and_then(|object| object.pointer("/metadata/labels"))
        .and_then(|labels| labels.as_object())
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default())
}

/// The ServiceAccount `namespace/name`: its UID and annotations.
async fn service_account(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Result<Account, Unasked> {
    let object = match cluster.get::<ServiceAccount>(namespace, name).await? {
        Fetched::Object(object) => object,
        Fetched::Missing => {
            return Err(Unasked::ServiceAccountMissing {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        }
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
/// API server grants and bound to the namespace's binding Secret (crate::cluster::token_binding).
async fn token(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    audience: &str,
) -> Result<String, Unasked> {
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
        .map_err(|source| Unasked::TokenRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: Box::new(source),
        })?;
    answer
        .status
        .and_then(|status| status.token)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| Unasked::NoToken {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use credential_provider::testing::install_executable;

    const IMAGE: &str = "registry.test/team/app";

    /// A plugin directory with executables `answers` (answering `robot` and a password for
    /// registry.test) and `fails` (exiting 1), and a config whose providers are `providers`
    /// (YAML list entries).
    fn plugins(providers: &str) -> (tempfile::TempDir, ProviderRunner) {
        let every: Vec<&str> = ["answers", "fails"]
            .into_iter()
            .filter(|name| providers.contains(&format!("name: {name}\n")))
            .map(|name| {
                if name == "answers" {
                    "answers="
                } else {
                    "fails="
                }
            })
            .collect();
        plugins_serving(providers, &every)
    }

    /// As [`plugins`], with these `--provider-namespaces` entries; `answers` records its runs
    /// in the directory's `record`.
    fn plugins_serving(providers: &str, entries: &[&str]) -> (tempfile::TempDir, ProviderRunner) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("the bin directory");
        let answer = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","auth":{"registry.test":{"username":"robot","password":"unit-Plugin-Pw-5x2c"}}}"#;
        for (name, body) in [
            (
                "answers",
                format!(
                    "#!/bin/sh\ncat >>'{}'\necho >>'{0}'\necho '{answer}'\n",
                    dir.path().join("record").display()
                ),
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
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        let loaded = ProviderRunner::load(&config, &bin)
            .expect("a valid config")
            .serving(&entries, RunLimits::default())
            .expect("valid entries");
        (dir, loaded)
    }

    fn provider(name: &str, extra: &str) -> String {
        format!(
            "  - name: {name}\n    matchImages: [\"registry.test\"]\n    defaultCacheDuration: 0s\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n{extra}"
        )
    }

    /// A question of team-a about [`IMAGE`].
    fn question(credentials: &Credentials) -> Question<'_> {
        Question {
            namespace: "team-a",
            credentials,
            image: IMAGE,
            deadline: Deadline::now() + Duration::from_secs(20),
        }
    }

    /// What `providers` give team-a's lookup of [`IMAGE`] naming `credentials`.
    async fn given_to(providers: &ProviderRunner, credentials: Credentials) -> Vec<Given> {
        providers
            .credentials(&Cluster::unreachable_for_tests(), &question(&credentials))
            .await
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
        let given = given_to(&providers, Credentials::PullSecrets(vec![])).await;
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
        let given = given_to(&providers, Credentials::PullSecrets(vec![])).await;
        assert!(
            matches!(given.as_slice(), [Given::Failed(_)]),
            "{:?}",
            describe(&given)
        );
    }

    #[tokio::test]
    async fn a_token_plugin_without_the_pods_service_account_is_uncertain() {
        let attributes = "    tokenAttributes:\n      serviceAccountTokenAudience: registry.test\n      requireServiceAccount: true\n      cacheType: ServiceAccount\n";
        let (_dir, providers) = plugins(&provider("answers", attributes));
        let given = given_to(&providers, Credentials::PullSecrets(vec!["regcred".into()])).await;
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
        let given = given_to(&providers, Credentials::PullSecrets(vec![])).await;
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
        let no_dir = ProviderRunner::load(&config, &dir.path().join("nowhere"));
        assert!(matches!(no_dir, Err(ConfigError::NoPluginDirectory { .. })));
        let no_plugin = ProviderRunner::load(&config, dir.path());
        let Err(error @ ConfigError::MissingPlugin { .. }) = no_plugin else {
            panic!("a config naming a plugin that is not there was accepted");
        };
        assert!(
            error.to_string().contains("plugin absent is not in"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_provider_not_named_for_the_namespace_is_not_run_and_leaves_it_uncertain() {
        let mut loaded = None;
        let lines = crate::telemetry::logs::capture::lines(|| {
            loaded = Some(plugins_serving(&provider("answers", ""), &[]));
        });
        let (dir, providers) = loaded.expect("loaded");
        assert!(
            lines
                .iter()
                .any(|l| l["msg"] == "providerServesNoNamespace" && l["provider"] == "answers"),
            "{lines:?}"
        );
        let given = given_to(&providers, Credentials::PullSecrets(vec![])).await;
        let described = describe(&given);
        assert_eq!(described.len(), 1, "{described:?}");
        assert!(
            described[0].contains("not run for namespace team-a"),
            "{described:?}"
        );
        let record = std::fs::read_to_string(dir.path().join("record")).unwrap_or_default();
        assert!(record.is_empty(), "the plugin ran: {record}");
        let named = plugins_serving(&provider("answers", ""), &["answers=team=blue"]);
        // the namespace's labels cannot be read here: uncertain, and still not run
        let given = given_to(&named.1, Credentials::PullSecrets(vec![])).await;
        assert!(matches!(given.as_slice(), [Given::Failed(_)]));
        let record = std::fs::read_to_string(named.0.path().join("record")).unwrap_or_default();
        assert!(record.is_empty(), "the plugin ran: {record}");
    }
}

//! `CredentialProviderConfig` (`kubelet.config.k8s.io/v1`), the file of the kubelet's
//! `--image-credential-provider-config`, read and checked as the kubelet checks it
//! (<https://github.com/kubernetes/kubernetes/blob/master/pkg/credentialprovider/plugin/config.go>):
//! unknown fields refused, every provider named once, with `matchImages` that Go's `url.Parse`
//! reads, a `defaultCacheDuration` and a known `apiVersion`; `tokenAttributes` only for `v1`
//! plugins, with a `cacheType` (required since Kubernetes 1.34, the newest minor's rule).
//!
//! The broker reads it from the kubelet's file or directory ([`load`], feature `plugins`),
//! as `readCredentialProviderConfig` does since 1.34; the policy reads
//! the same object from its settings ([`CredentialProviderConfig`], through any serde format),
//! and both check it with [`CredentialProviderConfig::check`].

use std::collections::HashSet;
#[cfg(feature = "plugins")]
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::duration::parse_go_duration;

/// The `apiVersion`s of the config file the kubelet reads.
const CONFIG_API_VERSIONS: [&str; 3] = [
    "kubelet.config.k8s.io/v1",
    "kubelet.config.k8s.io/v1beta1",
    "kubelet.config.k8s.io/v1alpha1",
];
/// The `apiVersion`s of the exec protocol a provider may speak.
const PLUGIN_API_VERSIONS: [&str; 3] = [
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
];

/// Why a config file cannot be used; the broker does not start with it, as the kubelet does not.
#[cfg(feature = "plugins")]
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a `CredentialProviderConfig`.
    #[error("{}: not a CredentialProviderConfig: {source}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A directory without a `.json`, `.yaml` or `.yml` file, which the kubelet refuses.
    #[error("no .json, .yaml or .yml file in the directory {}", path.display())]
    NoFiles {
        /// The directory.
        path: PathBuf,
    },
    /// The document parsed but breaks a rule the kubelet enforces.
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which rule, naming the provider.
        problem: ConfigProblem,
    },
    /// The bin directory does not exist (the kubelet refuses it too).
    #[error("{}: plugin directory {} does not exist", path.display(), dir.display())]
    NoPluginDirectory {
        /// The config file.
        path: PathBuf,
        /// The bin directory.
        dir: PathBuf,
    },
    /// A provider's plugin is not in the bin directory.
    #[error("{}: plugin {plugin} is not in {}", path.display(), dir.display())]
    MissingPlugin {
        /// The config file.
        path: PathBuf,
        /// The provider's name.
        plugin: String,
        /// The bin directory.
        dir: PathBuf,
    },
}

/// A rule of the kubelet's that a `CredentialProviderConfig` breaks, as a kind that can be
/// matched (the policy's settings and the broker report it in their own words around it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    /// The config's or a provider's `apiVersion` is not one the kubelet knows.
    #[error("unknown apiVersion {0:?}")]
    UnknownApiVersion(String),
    /// The document is of another kind.
    #[error("kind {0:?} is not CredentialProviderConfig")]
    WrongKind(String),
    /// `providers` is empty.
    #[error("at least one provider is required")]
    NoProviders,
    /// Two providers share a name.
    #[error("provider {0:?} is named twice")]
    NamedTwice(String),
    /// A rule one provider breaks.
    #[error("provider {name:?}: {problem}")]
    Provider {
        /// The provider.
        name: String,
        /// The rule.
        problem: Box<ConfigProblem>,
    },
    /// The name is not a plain file name.
    #[error("name must be a file name of the bin directory, without spaces")]
    BadName,
    /// `matchImages` is empty.
    #[error("matchImages is required")]
    NoMatchImages,
    /// A `matchImages` entry Go's `url.Parse` refuses.
    #[error("matchImages entry {0:?} is not a URL the kubelet can parse (as https://{0})")]
    MatchImageNotUrl(String),
    /// `defaultCacheDuration` is missing.
    #[error("defaultCacheDuration is required")]
    NoDefaultCacheDuration,
    /// `defaultCacheDuration` is not a Go duration.
    #[error("defaultCacheDuration {0:?} is not a duration")]
    BadDefaultCacheDuration(String),
    /// `tokenAttributes` with an older plugin `apiVersion`.
    #[error("tokenAttributes need apiVersion credentialprovider.kubelet.k8s.io/v1")]
    TokenAttributesNeedV1,
    /// `serviceAccountTokenAudience` is blank.
    #[error("tokenAttributes.serviceAccountTokenAudience is required")]
    NoAudience,
    /// `requireServiceAccount` is missing.
    #[error("tokenAttributes.requireServiceAccount is required")]
    NoRequireServiceAccount,
    /// Required annotation keys without `requireServiceAccount`.
    #[error("requiredServiceAccountAnnotationKeys need requireServiceAccount")]
    RequiredKeysNeedServiceAccount,
    /// An annotation key listed twice (required and optional together).
    #[error("annotation key {0:?} is listed twice")]
    AnnotationKeyTwice(String),
    /// `cacheType` is missing.
    #[error("tokenAttributes.cacheType (Token or ServiceAccount) is required: kubelets since Kubernetes 1.34 refuse the provider without it")]
    NoCacheType,
}

/// A `CredentialProviderConfig` as written, field for field (unknown fields refused): checked
/// by [`CredentialProviderConfig::check`] into [`Provider`]s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialProviderConfig {
    api_version: String,
    kind: String,
    #[serde(default)]
    providers: Vec<ProviderFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProviderFile {
    name: String,
    #[serde(default)]
    match_images: Vec<String>,
    default_cache_duration: Option<String>,
    api_version: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<EnvVar>,
    token_attributes: Option<TokenAttributesFile>,
}

/// One `env` entry of a provider: set for the plugin over the broker's own environment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TokenAttributesFile {
    service_account_token_audience: String,
    require_service_account: Option<bool>,
    #[serde(default)]
    required_service_account_annotation_keys: Vec<String>,
    #[serde(default)]
    optional_service_account_annotation_keys: Vec<String>,
    cache_type: Option<TokenCacheType>,
}

/// How credentials got with a ServiceAccount token are cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TokenCacheType {
    /// Per token: a credential is reused only while the same token is.
    Token,
    /// Per ServiceAccount (namespace, name, UID and the annotations passed).
    ServiceAccount,
}

/// A provider's `tokenAttributes`: the plugin gets a token of the pod's ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAttributes {
    /// The audience the token is requested for.
    pub audience: String,
    /// Without a ServiceAccount the plugin is not run (else it runs without a token).
    pub require_service_account: bool,
    /// Annotations of the ServiceAccount the plugin needs: one missing, and it is not run.
    pub required_annotations: Vec<String>,
    /// Annotations passed when the ServiceAccount has them.
    pub optional_annotations: Vec<String>,
    /// How its answers are cached.
    pub cache_type: TokenCacheType,
}

/// One configured provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// The executable's name in the bin directory.
    pub name: String,
    /// The images it is asked about (keyring globs).
    pub match_images: Vec<String>,
    /// How long an answer without `cacheDuration` is kept (zero: not kept).
    pub default_cache_duration: Duration,
    /// The protocol version it speaks, sent as the request's `apiVersion`.
    pub api_version: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its extra environment.
    pub env: Vec<EnvVar>,
    /// Whether it gets a ServiceAccount token.
    pub token_attributes: Option<TokenAttributes>,
}

/// Reads and checks the config at `path`: one file, or (since Kubernetes 1.34) a directory
/// whose `.json`, `.yaml` and `.yml` files are read in lexical order and their providers
/// merged, a provider name given twice across them refused, as the kubelet's
/// `readCredentialProviderConfig` does (pkg/credentialprovider/plugin/config.go).
#[cfg(feature = "plugins")]
pub fn load(path: &Path) -> Result<Vec<Provider>, ConfigError> {
    let read_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ConfigError::Read { path, source }
    };
    let files = if std::fs::metadata(path).map_err(read_error(path))?.is_dir() {
        config_files(path)?
    } else {
        vec![path.to_owned()]
    };
    let mut providers = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(read_error(file))?;
        let config: CredentialProviderConfig =
            serde_yaml::from_str(&text).map_err(|source| ConfigError::Syntax {
                path: file.clone(),
                source,
            })?;
        config
            .check_header()
            .map_err(|problem| ConfigError::Invalid {
                path: file.clone(),
                problem,
            })?;
        providers.extend(config.providers);
    }
    check_providers(providers).map_err(|problem| ConfigError::Invalid {
        path: path.to_owned(),
        problem,
    })
}

/// The config files of a directory, in the kubelet's (lexical) order; subdirectories and
/// other extensions are left out.
#[cfg(feature = "plugins")]
fn config_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_error = |source| ConfigError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let path = entry.path();
        let config = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("json" | "yaml" | "yml")
        );
        if config && !entry.file_type().map_err(read_error)?.is_dir() {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(ConfigError::NoFiles {
            path: dir.to_owned(),
        });
    }
    Ok(files)
}

impl CredentialProviderConfig {
    /// The providers, checked as the kubelet checks them; the rule broken, naming the provider.
    pub fn check(self) -> Result<Vec<Provider>, ConfigProblem> {
        self.check_header()?;
        check_providers(self.providers)
    }

    /// The document's `apiVersion` and `kind`, which each file of a directory must have.
    fn check_header(&self) -> Result<(), ConfigProblem> {
        if !CONFIG_API_VERSIONS.contains(&self.api_version.as_str()) {
            return Err(ConfigProblem::UnknownApiVersion(self.api_version.clone()));
        }
        if self.kind != "CredentialProviderConfig" {
            return Err(ConfigProblem::WrongKind(self.kind.clone()));
        }
        Ok(())
    }
}

impl Provider {
    /// Whether the kubelet asks this provider about `image` (a repository without tag, as
    /// `registry/path`): one of its `matchImages` globs matches it as a keyring key does.
    pub fn matches(&self, image: &str) -> bool {
        self.match_images
            .iter()
            .any(|glob| kubelet_credentials::url_matches(glob, image))
    }
}

impl TokenAttributes {
    /// Why the kubelet does not run the provider for a pod, or `None` when it does:
    /// `account` is the pod's ServiceAccount, as whether it has an annotation (`None` when the
    /// pod has none). The kubelet skips a provider that requires a ServiceAccount the pod
    /// lacks, and one whose required annotation the ServiceAccount lacks; the provider then
    /// gives the pod nothing.
    pub fn skipped_for(&self, account: Option<&dyn Fn(&str) -> bool>) -> Option<Skipped<'_>> {
        match account {
            None if self.require_service_account => Some(Skipped::NoServiceAccount),
            None => None,
            Some(has) => self
                .required_annotations
                .iter()
                .find(|key| !has(key))
                .map(|key| Skipped::MissingAnnotation(key)),
        }
    }
}

/// Why the kubelet does not run a provider with `tokenAttributes` for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped<'a> {
    /// `requireServiceAccount`, and the pod has no ServiceAccount.
    NoServiceAccount,
    /// The ServiceAccount lacks this `requiredServiceAccountAnnotationKeys` entry.
    MissingAnnotation(&'a str),
}

/// The providers of one config (or of a directory's files, merged), checked.
fn check_providers(providers: Vec<ProviderFile>) -> Result<Vec<Provider>, ConfigProblem> {
    if providers.is_empty() {
        return Err(ConfigProblem::NoProviders);
    }
    let mut names = HashSet::new();
    providers
        .into_iter()
        .map(|provider| {
            let name = provider.name.clone();
            if !names.insert(name.clone()) {
                return Err(ConfigProblem::NamedTwice(name));
            }
            check_provider(provider).map_err(|problem| ConfigProblem::Provider {
                name,
                problem: Box::new(problem),
            })
        })
        .collect()
}

fn check_provider(provider: ProviderFile) -> Result<Provider, ConfigProblem> {
    let name = provider.name;
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', ' ']) {
        return Err(ConfigProblem::BadName);
    }
    if provider.match_images.is_empty() {
        return Err(ConfigProblem::NoMatchImages);
    }
    let unparsed = |entry: &&String| !kubelet_credentials::parses_as_schemeless_url(entry);
    if let Some(bad) = provider.match_images.iter().find(unparsed) {
        return Err(ConfigProblem::MatchImageNotUrl(bad.clone()));
    }
    let default_cache_duration = provider
        .default_cache_duration
        .as_deref()
        .ok_or(ConfigProblem::NoDefaultCacheDuration)?;
    let default_cache_duration = parse_go_duration(default_cache_duration)
        .ok_or_else(|| ConfigProblem::BadDefaultCacheDuration(default_cache_duration.into()))?;
    if !PLUGIN_API_VERSIONS.contains(&provider.api_version.as_str()) {
        return Err(ConfigProblem::UnknownApiVersion(provider.api_version));
    }
    let token_attributes = provider
        .token_attributes
        .map(|attributes| check_token_attributes(attributes, &provider.api_version))
        .transpose()?;
    Ok(Provider {
        name,
        match_images: provider.match_images,
        default_cache_duration,
        api_version: provider.api_version,
        args: provider.args,
        env: provider.env,
        token_attributes,
    })
}

fn check_token_attributes(
    attributes: TokenAttributesFile,
    api_version: &str,
) -> Result<TokenAttributes, ConfigProblem> {
    if api_version != PLUGIN_API_VERSIONS[0] {
        return Err(ConfigProblem::TokenAttributesNeedV1);
    }
    if attributes.service_account_token_audience.trim().is_empty() {
        return Err(ConfigProblem::NoAudience);
    }
    let require_service_account = attributes
        .require_service_account
        .ok_or(ConfigProblem::NoRequireServiceAccount)?;
    let required = &attributes.required_service_account_annotation_keys;
    let optional = &attributes.optional_service_account_annotation_keys;
    if !require_service_account && !required.is_empty() {
        return Err(ConfigProblem::RequiredKeysNeedServiceAccount);
    }
    let mut seen = HashSet::new();
    if let Some(key) = required.iter().chain(optional).find(|k| !seen.insert(*k)) {
        return Err(ConfigProblem::AnnotationKeyTwice(key.clone()));
    }
    let cache_type = attributes.cache_type.ok_or(ConfigProblem::NoCacheType)?;
    Ok(TokenAttributes {
        audience: attributes.service_account_token_audience,
        require_service_account,
        required_annotations: attributes.required_service_account_annotation_keys,
        optional_annotations: attributes.optional_service_account_annotation_keys,
        cache_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why a test's document is refused: its syntax, or a rule of the kubelet's.
    #[derive(Debug, thiserror::Error)]
    enum Refused {
        #[cfg(feature = "plugins")]
        #[error("{0}")]
        Yaml(#[from] serde_yaml::Error),
        #[error("{0}")]
        Json(#[from] serde_json::Error),
        #[error("{0}")]
        Rule(#[from] ConfigProblem),
    }

    impl Refused {
        fn contains(&self, words: &str) -> bool {
            self.to_string().contains(words)
        }
    }

    #[cfg(feature = "plugins")]
    fn parse(yaml: &str) -> Result<Vec<Provider>, Refused> {
        let file: CredentialProviderConfig = serde_yaml::from_str(yaml)?;
        Ok(file.check()?)
    }

    /// The format read as JSON, as the policy's settings carry it.
    fn parse_json(json: serde_json::Value) -> Result<Vec<Provider>, Refused> {
        let file: CredentialProviderConfig = serde_json::from_value(json)?;
        Ok(file.check()?)
    }

    #[test]
    fn json_reads_as_yaml_does_and_matches_images() {
        let providers = parse_json(serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [{
                "name": "p",
                "matchImages": ["*.registry.test", "other.test:5000/team"],
                "defaultCacheDuration": "90s",
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "tokenAttributes": {
                    "serviceAccountTokenAudience": "a",
                    "requireServiceAccount": true,
                    "requiredServiceAccountAnnotationKeys": ["example.test/role"],
                    "cacheType": "ServiceAccount"
                }
            }]
        }))
        .expect("valid");
        let p = &providers[0];
        assert_eq!(p.default_cache_duration, Duration::from_secs(90));
        assert!(p.matches("eu.registry.test/app"));
        assert!(!p.matches("registry.test/app"));
        assert!(p.matches("other.test:5000/team/app"));
        assert!(!p.matches("other.test/team/app"));
        let t = p.token_attributes.as_ref().expect("tokenAttributes");
        assert_eq!(t.skipped_for(None), Some(Skipped::NoServiceAccount));
        let none = |_: &str| false;
        assert_eq!(
            t.skipped_for(Some(&none)),
            Some(Skipped::MissingAnnotation("example.test/role"))
        );
        let all = |_: &str| true;
        assert_eq!(t.skipped_for(Some(&all)), None);
        let typo = parse_json(serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [{"name": "p", "matchImage": ["r.test"]}]
        }))
        .expect_err("typo");
        assert!(typo.contains("matchImage"), "{typo}");
    }

    #[cfg(feature = "plugins")]
    const ECR_LIKE: &str = "
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages: ['*.dkr.ecr.*.amazonaws.com', '*.dkr.ecr.*.amazonaws.com.cn']
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [get-credentials]
    env: [{name: AWS_PROFILE, value: node}]
";

    #[cfg(feature = "plugins")]
    #[test]
    fn a_cloud_config_reads_whole() {
        let providers = parse(ECR_LIKE).expect("valid");
        assert_eq!(providers.len(), 1);
        let p = &providers[0];
        assert_eq!(p.name, "ecr-credential-provider");
        assert_eq!(p.match_images.len(), 2);
        assert_eq!(p.default_cache_duration, Duration::from_secs(12 * 3600));
        assert_eq!(p.args, ["get-credentials"]);
        assert_eq!(p.env[0].name, "AWS_PROFILE");
        assert_eq!(p.token_attributes, None);
    }

    #[cfg(feature = "plugins")]
    #[test]
    fn token_attributes_read_with_their_keys() {
        let yaml = "
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: p
    matchImages: [registry.example.test]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    tokenAttributes:
      serviceAccountTokenAudience: registry.example.test
      requireServiceAccount: true
      requiredServiceAccountAnnotationKeys: [example.test/role]
      optionalServiceAccountAnnotationKeys: [example.test/scope]
      cacheType: Token
";
        let t = parse(yaml).expect("valid")[0]
            .token_attributes
            .clone()
            .expect("tokenAttributes");
        assert_eq!(t.audience, "registry.example.test");
        assert!(t.require_service_account);
        assert_eq!(t.required_annotations, ["example.test/role"]);
        assert_eq!(t.optional_annotations, ["example.test/scope"]);
        assert_eq!(t.cache_type, TokenCacheType::Token);
    }

    #[cfg(feature = "plugins")]
    #[test]
    fn what_the_kubelet_refuses_is_refused_with_the_rule() {
        let base = |provider: &str| {
            format!(
                "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n{provider}"
            )
        };
        let ok = "  - {name: p, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n";
        let cases = [
            ("  - {name: p, defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "matchImages is required"),
            ("  - {name: p, matchImages: [r.test], apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "defaultCacheDuration is required"),
            ("  - {name: p, matchImages: [r.test], defaultCacheDuration: 1d, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "is not a duration"),
            ("  - {name: ../p, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "file name"),
            ("  - {name: p, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v9}\n", "unknown apiVersion"),
            ("  - {name: p, matchImages: ['r.test:port'], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "not a URL the kubelet can parse"),
            ("  - {name: 'my plugin', matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n", "without spaces"),
            ("  - {name: p, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1beta1, tokenAttributes: {serviceAccountTokenAudience: a, requireServiceAccount: true}}\n", "need apiVersion"),
            ("  - {name: p, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1, tokenAttributes: {serviceAccountTokenAudience: a}}\n", "requireServiceAccount is required"),
        ];
        for (provider, problem) in cases {
            let error = parse(&base(provider)).expect_err(provider);
            assert!(error.contains(problem), "{provider}: {error}");
        }
        let twice = parse(&base(&format!("{ok}{ok}"))).expect_err("twice");
        assert!(
            matches!(&twice, Refused::Rule(ConfigProblem::NamedTwice(name)) if name == "p"),
            "{twice}"
        );
        let no_images = parse(&base(cases[0].0)).expect_err("no matchImages");
        let Refused::Rule(ConfigProblem::Provider { name, problem }) = no_images else {
            panic!("not a provider's rule: {no_images}");
        };
        assert_eq!(
            (name.as_str(), *problem),
            ("p", ConfigProblem::NoMatchImages)
        );
        let unknown = parse(&base(
            "  - {name: p, matchImage: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n",
        ))
        .expect_err("unknown field");
        assert!(unknown.contains("matchImage"), "{unknown}");
        assert!(parse(&base(ok)).is_ok());
    }

    /// One provider with the single `matchImages` entry `entry`, read as the policy's settings.
    fn with_match_image(entry: &str) -> Result<Vec<Provider>, Refused> {
        parse_json(serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [{
                "name": "p",
                "matchImages": [entry],
                "defaultCacheDuration": "1m",
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1"
            }]
        }))
    }

    /// The kubelet checks a `matchImages` entry only with `ParseSchemelessURL` (Go's
    /// `url.Parse` of `https://` + entry) in `validateCredentialProviderConfig`
    /// (<https://github.com/kubernetes/kubernetes/blob/master/pkg/credentialprovider/plugin/config.go>);
    /// beside each form, the kubelet's answer and, for those accepted, an image it matches.
    #[test]
    fn match_images_forms_as_validate_credential_provider_config_answers() {
        let cases: [(&str, bool, Option<&str>); 7] = [
            // a second scheme reads as the host "https:" and the path "//registry…"
            ("https://registry.example.com", true, None),
            // `*` in a path is a literal character: no image path holds it
            ("registry.example.com/*/team", true, None),
            (
                "registry.example.com:5000",
                true,
                Some("registry.example.com:5000/app"),
            ),
            (
                "*.registry.example.com",
                true,
                Some("eu.registry.example.com/app"),
            ),
            // the query is dropped, as the keyring drops it
            (
                "registry.example.com/team?x=1",
                true,
                Some("registry.example.com/team/app"),
            ),
            // url.Parse: invalid character " " in host name
            ("bad host.example.com", false, None),
            // url.Parse: invalid port ":port" after host
            ("registry.example.com:port", false, None),
        ];
        for (entry, kubelet_accepts, matched) in cases {
            let read = with_match_image(entry);
            assert_eq!(read.is_ok(), kubelet_accepts, "{entry}: {read:?}");
            let Ok(providers) = read else {
                let error = read.expect_err("refused");
                assert!(
                    error.contains(entry),
                    "the refusal names the entry: {error}"
                );
                continue;
            };
            let provider = &providers[0];
            match matched {
                Some(image) => assert!(provider.matches(image), "{entry} matches {image}"),
                None => {
                    for image in [
                        "registry.example.com/x/team/app",
                        "registry.example.com/app",
                    ] {
                        assert!(!provider.matches(image), "{entry} never matches {image}");
                    }
                }
            }
        }
    }

    /// Since Kubernetes 1.34 (kubernetes/kubernetes#132617) `validateCredentialProviderConfig`
    /// refuses `tokenAttributes` without `cacheType`; the refusal names the field and the minor.
    #[test]
    fn token_attributes_without_cache_type_are_refused_naming_field_and_minor() {
        let error = parse_json(serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [{
                "name": "p",
                "matchImages": ["r.test"],
                "defaultCacheDuration": "1m",
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "tokenAttributes": {"serviceAccountTokenAudience": "a", "requireServiceAccount": false}
            }]
        }))
        .expect_err("no cacheType");
        assert!(error.contains("tokenAttributes.cacheType"), "{error}");
        assert!(error.contains("1.34"), "{error}");
        assert!(error.contains("provider \"p\""), "{error}");
    }

    /// A provider file of one provider named `name`.
    #[cfg(feature = "plugins")]
    fn provider_file(name: &str) -> String {
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - {{name: {name}, matchImages: [r.test], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}}\n"
        )
    }

    /// `readCredentialProviderConfig` (pkg/credentialprovider/plugin/config.go, Kubernetes
    /// 1.34): a directory's `.json`, `.yaml` and `.yml` files in lexical order, providers
    /// merged, other files and subdirectories skipped, a name given twice refused.
    #[cfg(feature = "plugins")]
    #[test]
    fn a_directory_merges_its_files_in_lexical_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text);
        write("20-b.yaml", &provider_file("b")).expect("write");
        write("10-a.yml", &provider_file("a")).expect("write");
        write("30-c.json", &provider_file("c")).expect("write");
        write("README.md", "not a config").expect("write");
        std::fs::create_dir(dir.path().join("99-dir.yaml")).expect("subdirectory");
        let names: Vec<String> = load(dir.path())
            .expect("valid directory")
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);

        write("40-again.yaml", &provider_file("a")).expect("write");
        let twice = load(dir.path()).expect_err("a provider in two files");
        assert!(
            twice.to_string().contains("\"a\" is named twice"),
            "{twice}"
        );

        let empty = tempfile::tempdir().expect("tempdir");
        let none = load(empty.path()).expect_err("no config file");
        assert!(matches!(none, ConfigError::NoFiles { .. }), "{none}");
    }
}

//! `test-host run`: the `kwctl run` replacement.
//!
//! Order of work, as kwctl: load the policy and its metadata, build the host
//! capabilities (live, recording or replaying), validate the settings, then
//! evaluate the request and print the AdmissionResponse.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::allow_list::{HostCapabilitiesAllowList, KubernetesAccess};
use crate::artifact::load_policy;
use crate::capabilities::{Backend, HostCapabilities};
use crate::cli::RunArgs;
use crate::cluster::ClusterStore;
use crate::live::LiveBackend;
use crate::metadata::Metadata;
use crate::oci::docker_config::DockerConfig;
use crate::oci::sources::Sources;
use crate::oci::RegistryClient;
use crate::runtime::PolicyRuntime;
use crate::session::{Recorder, Replayer};

/// Starts the line `run` (and `bench`) print when the guest refuses its settings. Kept word
/// for word: it is kwctl's, and the e2e suites, which run on kwctl too, look for it on stderr.
pub const SETTINGS_REFUSED: &str = "Provided settings are not valid: ";

/// Outcome of `run`, mapped to the process exit code by `main`.
pub enum RunOutcome {
    /// A response was printed (accepted or rejected): exit 0.
    Evaluated,
    /// The guest rejected its settings: exit 1.
    InvalidSettings,
}

/// Parse a JSON or YAML document (YAML is a superset of JSON).
fn parse_document(text: &str) -> Result<Value> {
    Ok(serde_yaml::from_str::<Value>(text)?)
}

/// The AdmissionRequest of a file holding an AdmissionReview or a bare request.
pub fn read_request(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read request file {}", path.display()))?;
    let doc = parse_document(&text)
        .with_context(|| format!("request file {} is neither JSON nor YAML", path.display()))?;
    Ok(match doc.get("request") {
        Some(request) if request.is_object() => request.clone(),
        _ => doc,
    })
}

fn read_settings(args: &RunArgs) -> Result<Value> {
    read_settings_from(args.settings_json.as_deref(), args.settings_path.as_deref())
}

/// Settings from `--settings-json` or `--settings-path`, `{}` when neither is given.
pub fn read_settings_from(json: Option<&str>, path: Option<&Path>) -> Result<Value> {
    let settings = if let Some(json) = json {
        parse_document(json).context("invalid --settings-json")?
    } else if let Some(path) = path {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read settings file {}", path.display()))?;
        parse_document(&text)
            .with_context(|| format!("invalid settings file {}", path.display()))?
    } else {
        Value::Object(Default::default())
    };
    // An empty file or `null` means "no settings", as with kwctl.
    Ok(if settings.is_null() {
        Value::Object(Default::default())
    } else {
        settings
    })
}

fn kubernetes_access(args: &RunArgs, metadata: Option<&Metadata>) -> KubernetesAccess {
    if !args.allow_context_aware {
        if metadata.is_some_and(|m| !m.context_aware_resources.is_empty()) {
            eprintln!(
                "test-host: the policy requires access to Kubernetes resources; pass --allow-context-aware to grant it"
            );
        }
        return KubernetesAccess::Denied;
    }
    match metadata {
        Some(m) => KubernetesAccess::Resources(
            m.context_aware_resources
                .iter()
                .map(|r| (r.api_version.clone(), r.kind.clone()))
                .collect::<BTreeSet<_>>(),
        ),
        None => {
            eprintln!(
                "test-host: no policy metadata found, Kubernetes reads are not restricted by contextAwareResources"
            );
            KubernetesAccess::All
        }
    }
}

/// Build the registry client shared by policy pulls and `oci/*` calls.
pub fn registry_client(
    sources_path: Option<&Path>,
    docker_config_dir: Option<&Path>,
    timeout_secs: u64,
) -> Result<RegistryClient> {
    let sources = match sources_path {
        Some(p) => Sources::from_path(p)?,
        None => Sources::default(),
    };
    let docker_config = match docker_config_dir {
        Some(d) => DockerConfig::from_dir(d)?,
        None => DockerConfig::default(),
    };
    Ok(RegistryClient::new(
        sources,
        docker_config,
        Duration::from_secs(timeout_secs),
    ))
}

/// Evaluate one request; prints the AdmissionResponse on stdout.
pub fn run(args: &RunArgs, runtime: &Runtime) -> Result<RunOutcome> {
    let registry = registry_client(
        args.sources_path.as_deref(),
        args.docker_config_json_path.as_deref(),
        args.oci_timeout_secs,
    )?;
    let module = load_policy(&args.policy, runtime, &registry)?;
    let metadata = match &args.metadata_path {
        Some(path) => Some(Metadata::from_yaml_path(path)?),
        None => Metadata::from_wasm(&module)?,
    };
    let settings = read_settings(args)?;
    let request = read_request(&args.request_path)?;

    let backend: Box<dyn Backend> =
        if let Some(source) = &args.replay_host_capabilities_interactions {
            Box::new(Replayer::from_path(source)?)
        } else {
            let cluster = match &args.cluster_dir {
                Some(dir) => Some(ClusterStore::from_dir(dir)?),
                None => None,
            };
            let live = Box::new(
                LiveBackend::new(runtime.handle().clone(), registry, cluster)
                    .with_resolve_concurrency(usize::from(args.resolve_images_concurrency)),
            );
            match &args.record_host_capabilities_interactions {
                Some(destination) => Box::new(Recorder::new(live, destination.clone())),
                None => live,
            }
        };
    let capabilities = Arc::new(
        HostCapabilities::new(
            HostCapabilitiesAllowList::parse(&args.host_capabilities),
            kubernetes_access(args, metadata.as_ref()),
            backend,
        )
        .with_resolve_images(args.enable_resolve_images),
    );

    let policy = PolicyRuntime::new(&module, capabilities.clone())?;

    let settings_validation = policy.validate_settings(&settings);
    if !settings_validation.valid {
        eprintln!(
            "{SETTINGS_REFUSED}{}",
            settings_validation.message.unwrap_or_default()
        );
        capabilities.finish()?;
        return Ok(RunOutcome::InvalidSettings);
    }

    let response = policy.validate(&settings, &request);
    capabilities.finish()?;
    let answer = serde_json::to_string(&response)?;
    // A reader that stops early (`| head -c 1`) closes the pipe: the answer is then nobody's,
    // which is no failure of the run (println! would panic on it).
    match writeln!(std::io::stdout().lock(), "{answer}") {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.context("writing the answer to stdout")?,
    }
    Ok(RunOutcome::Evaluated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_from_review_or_bare() {
        let dir = tempfile::tempdir().expect("tempdir");
        let review = dir.path().join("review.json");
        std::fs::write(
            &review,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","object":{}}}"#,
        )
        .expect("write");
        assert_eq!(read_request(&review).expect("read")["uid"], "u1");
        let bare = dir.path().join("bare.yaml");
        std::fs::write(&bare, "uid: u2\noperation: CREATE\n").expect("write");
        assert_eq!(read_request(&bare).expect("read")["uid"], "u2");
    }
}

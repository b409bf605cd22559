//! Command line interface of `test-host`.
//!
//! The flag names mirror `kwctl run` / `kwctl annotate` / `kwctl push` so that
//! bats tests written against this host read like tests written against kwctl.
//! They are a contract with the e2e suite: do not rename them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// A Kubewarden-compatible test host for waPC policies.
#[derive(Debug, Parser)]
#[command(name = "test-host", version, about)]
pub struct Cli {
    /// The operation to perform.
    #[command(subcommand)]
    pub command: Command,
}

/// The sub-commands of `test-host`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate an admission request with a policy, like `kwctl run`.
    Run(Box<RunArgs>),
    /// Embed policy metadata into a wasm custom section, like `kwctl annotate`.
    Annotate(AnnotateArgs),
    /// Push a policy to an OCI registry as a Kubewarden artifact, like `kwctl push`.
    Push(PushArgs),
    /// Time `validate` on one request with host calls answered from memory (JSON stats).
    Bench(BenchArgs),
}

/// Options of `test-host run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Path to a .wasm file, or registry://HOST[:PORT]/REPO[:TAG|@DIGEST].
    pub policy: String,

    /// AdmissionReview (its .request is used) or bare AdmissionRequest, JSON or YAML.
    #[arg(long = "request-path", short = 'r')]
    pub request_path: PathBuf,

    /// Policy settings as a JSON document.
    #[arg(long = "settings-json", conflicts_with = "settings_path")]
    pub settings_json: Option<String>,

    /// File holding the policy settings, JSON or YAML.
    #[arg(long = "settings-path", short = 's')]
    pub settings_path: Option<PathBuf>,

    /// Allow the policy to read Kubernetes resources (`kubernetes/*` capabilities).
    #[arg(long = "allow-context-aware")]
    pub allow_context_aware: bool,

    /// policy-metadata.yml; defaults to the `io.kubewarden.metadata` custom section.
    #[arg(long = "metadata-path", short = 'm')]
    pub metadata_path: Option<PathBuf>,

    /// Comma-separated allow-list of host capabilities (`*`, `oci/*`, `oci/v1/*`, exact).
    #[arg(long = "host-capabilities", default_value = "*")]
    pub host_capabilities: String,

    /// Directory holding a Docker `config.json` used for registry authentication.
    #[arg(long = "docker-config-json-path")]
    pub docker_config_json_path: Option<PathBuf>,

    /// kwctl `sources.yaml`: insecure sources and custom certificate authorities.
    #[arg(long = "sources-path")]
    pub sources_path: Option<PathBuf>,

    /// Directory of YAML/JSON manifests standing for the cluster's objects.
    #[arg(long = "cluster-dir")]
    pub cluster_dir: Option<PathBuf>,

    /// Per-lookup timeout for registry operations, in seconds.
    #[arg(long = "oci-timeout-secs", default_value_t = 10)]
    pub oci_timeout_secs: u64,

    /// Offer `oci/v1/resolve_images` (docs/design/credentialed-lookups.md); without
    /// it the host answers `unknown operation` like a stock policy server.
    #[arg(long = "enable-resolve-images")]
    pub enable_resolve_images: bool,

    /// Most lookups of one `oci/v1/resolve_images` call running at the same
    /// time against one registry (all of them start at once otherwise).
    #[arg(long = "resolve-images-concurrency", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub resolve_images_concurrency: u16,

    /// Record every host capability exchange into this session file.
    #[arg(
        long = "record-host-capabilities-interactions",
        conflicts_with = "replay_host_capabilities_interactions"
    )]
    pub record_host_capabilities_interactions: Option<PathBuf>,

    /// Answer host capability calls from this recorded session file.
    #[arg(long = "replay-host-capabilities-interactions")]
    pub replay_host_capabilities_interactions: Option<PathBuf>,
}

/// Options of `test-host annotate`.
#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// policy-metadata.yml to embed.
    #[arg(long = "metadata-path", short = 'm')]
    pub metadata_path: PathBuf,

    /// README whose contents become the `io.kubewarden.policy.usage` annotation.
    #[arg(long = "usage-path", short = 'u')]
    pub usage_path: Option<PathBuf>,

    /// Where to write the annotated module.
    #[arg(long = "output-path", short = 'o')]
    pub output_path: PathBuf,

    /// The module to annotate.
    pub wasm_path: PathBuf,
}

/// Options of `test-host push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The module to push.
    pub wasm_path: PathBuf,

    /// Destination, registry://HOST[:PORT]/REPO:TAG.
    pub destination: String,

    /// kwctl `sources.yaml`: insecure sources and custom certificate authorities.
    #[arg(long = "sources-path")]
    pub sources_path: Option<PathBuf>,

    /// Directory holding a Docker `config.json` used for registry authentication.
    #[arg(long = "docker-config-json-path")]
    pub docker_config_json_path: Option<PathBuf>,

    /// Per-request timeout for registry operations, in seconds.
    #[arg(long = "oci-timeout-secs", default_value_t = 60)]
    pub oci_timeout_secs: u64,
}

/// Options of `test-host bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The module (.wasm file) to measure.
    pub policy: PathBuf,

    /// AdmissionReview (its .request is used) or bare AdmissionRequest, JSON or YAML.
    #[arg(long = "request-path", short = 'r')]
    pub request_path: PathBuf,

    /// Policy settings as a JSON document.
    #[arg(long = "settings-json", conflicts_with = "settings_path")]
    pub settings_json: Option<String>,

    /// File holding the policy settings, JSON or YAML.
    #[arg(long = "settings-path", short = 's')]
    pub settings_path: Option<PathBuf>,

    /// Timed evaluations.
    #[arg(long = "iterations", short = 'n', default_value_t = 200)]
    pub iterations: usize,

    /// Untimed evaluations first (JIT, allocator and caches warm up).
    #[arg(long = "warmup", default_value_t = 10)]
    pub warmup: usize,

    /// Directory of YAML/JSON manifests `kubernetes/get_resource` answers from (the lookup
    /// broker's key Secret, ServiceAccounts); without it every object is an empty one.
    #[arg(long = "cluster-dir")]
    pub cluster_dir: Option<PathBuf>,

    /// The digest every `oci/v1/manifest_digest` lookup answers.
    #[arg(
        long = "digest",
        default_value = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    )]
    pub digest: String,

    /// Offer `oci/v1/resolve_images` (every image found), as `run` does.
    #[arg(long = "enable-resolve-images")]
    pub enable_resolve_images: bool,

    /// Time every evaluation on a new instance (instantiation, `wapc_init`,
    /// `validate`), as policy-server 1.36 runs each request, instead of
    /// `validate` alone on one long-lived instance.
    #[arg(long = "fresh-instances")]
    pub fresh_instances: bool,

    /// Bound each timed guest call as policy-server's `--policy-timeout` does (seconds, its
    /// default 2): the guest's code is then compiled with the same epoch checks as on the
    /// server. 0: no bound, no checks.
    #[arg(long = "policy-timeout", default_value_t = 2)]
    pub policy_timeout: u64,

    /// Skip the second and third passes (peak linear memory, wasm
    /// instructions, each on an engine that meters it), so that a profiler
    /// counts only evaluations on the standard engine; their figures are then
    /// `null`.
    #[arg(long = "skip-memory-pass")]
    pub skip_memory_pass: bool,
}

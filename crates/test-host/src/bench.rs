//! `test-host bench`: the guest's own cost per request.
//!
//! Loads a policy once, answers host calls from memory (every image exists
//! with one canned digest; every Kubernetes object asked for exists, empty),
//! validates the settings, then calls `validate` on one request N times and
//! prints JSON statistics: time per evaluation, host calls and bytes crossing
//! the guest boundary per request, and the guest's peak linear memory.
//! With `--fresh-instances` every evaluation gets a new instance (store, WASI
//! context, instantiation, `wapc_init`), as on policy-server 1.36, where the
//! guest's code runs cold every time; without it, `validate` runs warm.
//!
//! Timing runs on the standard engine (compilation cache, guard pages), as
//! `run` does, with policy-server's time-out (`--policy-timeout`, whose epoch
//! checks the compiled guest carries); memory is measured in a second pass on
//! an engine whose linear memories report their size (`guest_memory`), which
//! is slower to run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::allow_list::{HostCapabilitiesAllowList, KubernetesAccess};
use crate::call_meter::{CallCounts, CallMeter};
use crate::callback_requests::CallbackRequestType;
use crate::capabilities::{Backend, HostCapabilities};
use crate::cli::BenchArgs;
use crate::cluster::{apply_field_masks, ClusterStore};
use crate::guest_memory::{MemoryMeter, WASM_PAGE};
use crate::run::{read_request, read_settings_from};
use crate::runtime::{fuel_engine, PolicyPre, PolicyRuntime};

/// Answers every request from memory, without any I/O.
struct MemoryBackend {
    digest: String,
    cluster: Option<ClusterStore>,
}

impl Backend for MemoryBackend {
    fn evaluate(&mut self, request: &CallbackRequestType) -> Result<Vec<u8>> {
        let value = match request {
            CallbackRequestType::OciManifestDigest { .. } => json!({ "digest": self.digest }),
            CallbackRequestType::OciResolveImages { lookups, .. } => json!({
                "results": lookups.iter().map(|l| json!({
                    "image": l.image,
                    "outcome": "found",
                    "digest": self.digest,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                })).collect::<Vec<_>>()
            }),
            CallbackRequestType::KubernetesGetResource {
                api_version,
                kind,
                name,
                namespace,
                field_masks,
                ..
            } => match &self.cluster {
                Some(cluster) => apply_field_masks(
                    &cluster.get(api_version, kind, name, namespace.as_deref())?,
                    field_masks.as_ref(),
                ),
                None => json!({
                    "apiVersion": api_version,
                    "kind": kind,
                    "metadata": { "name": name, "namespace": namespace },
                }),
            },
            CallbackRequestType::KubernetesListResourceNamespace {
                api_version, kind, ..
            }
            | CallbackRequestType::KubernetesListResourceAll {
                api_version, kind, ..
            } => json!({
                "apiVersion": api_version,
                "kind": format!("{kind}List"),
                "metadata": { "resourceVersion": "" },
                "items": [],
            }),
            CallbackRequestType::OciManifest { .. }
            | CallbackRequestType::OciManifestAndConfig { .. } => {
                bail!("test-host bench answers manifest digests only")
            }
        };
        Ok(serde_json::to_vec(&value)?)
    }
}

/// The host capabilities of a bench: everything granted, answered from memory (objects from
/// `cluster`, when given).
fn capabilities(
    args: &BenchArgs,
    cluster: Option<&ClusterStore>,
    meter: Arc<CallMeter>,
) -> Arc<HostCapabilities> {
    Arc::new(
        HostCapabilities::new(
            HostCapabilitiesAllowList::parse("*"),
            KubernetesAccess::All,
            Box::new(MemoryBackend {
                digest: args.digest.clone(),
                cluster: cluster.cloned(),
            }),
        )
        .with_resolve_images(args.enable_resolve_images)
        .with_meter(meter),
    )
}

/// Loads the policy and accepts the settings, or says why not.
fn load(
    module: &[u8],
    capabilities: Arc<HostCapabilities>,
    engine: Option<wasmtime::Engine>,
    timeout: Option<Duration>,
    settings: &Value,
    fresh: bool,
) -> Result<Evaluations> {
    let pre = PolicyPre::with_engine(module, capabilities, engine, timeout)?;
    let policy = pre.instantiate()?;
    let validation = policy.validate_settings(settings);
    if !validation.valid {
        bail!(
            "{}{}",
            crate::run::SETTINGS_REFUSED,
            validation.message.unwrap_or_default()
        );
    }
    Ok(if fresh {
        Evaluations::Fresh(Box::new(pre))
    } else {
        Evaluations::Warm(policy)
    })
}

/// Where each measured `validate` runs.
enum Evaluations {
    /// One instance for every call, its heap and lazy statics warm.
    Warm(PolicyRuntime),
    /// A new instance per call, as policy-server makes one per request.
    Fresh(Box<PolicyPre>),
}

impl Evaluations {
    /// One `validate` with `payload`; a separate function (never inlined) so
    /// that a profiler can count exactly one evaluation, e.g. callgrind's
    /// `--toggle-collect='*Evaluations*validate*'`.
    #[inline(never)]
    fn validate(&self, payload: &[u8]) -> Result<Vec<u8>> {
        match self {
            Self::Warm(policy) => policy.call("validate", payload),
            Self::Fresh(pre) => pre.instantiate()?.call("validate", payload),
        }
    }
}

impl Evaluations {
    /// One `validate` on an engine that counts instructions ([`fuel_engine`]): how many it
    /// executed, the fresh instance's initialisation included.
    fn instructions(&self, payload: &[u8]) -> Result<u64> {
        let count = match self {
            Self::Warm(policy) => {
                let before = policy.instructions_executed();
                policy.call("validate", payload)?;
                policy
                    .instructions_executed()
                    .zip(before)
                    .map(|(after, before)| after - before)
            }
            Self::Fresh(pre) => {
                let policy = pre.instantiate()?;
                policy.call("validate", payload)?;
                policy.instructions_executed()
            }
        };
        count.ok_or_else(|| anyhow!("the engine counts no instructions"))
    }
}

/// Mean, median, 95th percentile, min and max of `samples`, in microseconds.
fn time_stats(samples: &mut [Duration]) -> Value {
    samples.sort_unstable();
    let n = samples.len();
    let us = |d: Duration| (d.as_secs_f64() * 1e6 * 10.0).round() / 10.0;
    let total: Duration = samples.iter().sum();
    let percentile = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    };
    json!({
        "mean_us": us(total / n as u32),
        "median_us": us(median),
        "p95_us": us(percentile(0.95)),
        "min_us": us(samples[0]),
        "max_us": us(samples[n - 1]),
    })
}

fn per_request(total: u64, iterations: usize) -> f64 {
    (total as f64 / iterations as f64 * 10.0).round() / 10.0
}

/// Pass 2 of [`bench`]: the peak linear memory, in pages, on the metered engine, with the
/// same calls.
fn peak_memory_pages(args: &BenchArgs, inputs: &Inputs) -> Result<usize> {
    let memory = MemoryMeter::default();
    let metered = load(
        &inputs.module,
        capabilities(
            args,
            inputs.cluster.as_ref(),
            Arc::new(CallMeter::default()),
        ),
        Some(memory.engine()?),
        None,
        &inputs.settings,
        args.fresh_instances,
    )?;
    let mut peak = 0;
    for _ in 0..args.warmup + args.iterations {
        metered.validate(inputs.payload.as_bytes())?;
        peak = peak.max(memory.peak_bytes() / WASM_PAGE);
    }
    Ok(peak)
}

/// Pass 3 of [`bench`]: the wasm instructions one evaluation executes, on an engine that
/// counts them. With `--fresh-instances` that is the instance's initialisation (`_start`,
/// `wapc_init`) and `validate`, as policy-server pays per request; else `validate` alone on a
/// warm instance. The guest's work hardly varies between calls: the median of five is given.
fn wasm_instructions(args: &BenchArgs, inputs: &Inputs) -> Result<u64> {
    let metered = load(
        &inputs.module,
        capabilities(
            args,
            inputs.cluster.as_ref(),
            Arc::new(CallMeter::default()),
        ),
        Some(fuel_engine()?),
        None,
        &inputs.settings,
        args.fresh_instances,
    )?;
    let mut counts = (0..5)
        .map(|_| metered.instructions(inputs.payload.as_bytes()))
        .collect::<Result<Vec<u64>>>()?;
    counts.sort_unstable();
    Ok(counts[counts.len() / 2])
}

/// What every pass evaluates: the module, its settings, the payload the host hands the guest
/// (built once) and the objects `kubernetes/get_resource` answers from.
struct Inputs {
    module: Vec<u8>,
    settings: Value,
    payload: String,
    cluster: Option<ClusterStore>,
}

impl Inputs {
    fn read(args: &BenchArgs) -> Result<Self> {
        let module = std::fs::read(&args.policy)
            .with_context(|| format!("cannot read {}", args.policy.display()))?;
        let settings =
            read_settings_from(args.settings_json.as_deref(), args.settings_path.as_deref())?;
        let request = read_request(&args.request_path)?;
        let cluster = match &args.cluster_dir {
            Some(dir) => Some(ClusterStore::from_dir(dir)?),
            None => None,
        };
        let payload = json!({ "request": request, "settings": settings }).to_string();
        Ok(Inputs {
            module,
            settings,
            payload,
            cluster,
        })
    }
}

/// Runs the benchmark and prints one JSON object on stdout.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if args.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let inputs = Inputs::read(args)?;
    let payload = &inputs.payload;

    // Pass 1: time, host calls and bytes, on the standard engine.
    let meter = Arc::new(CallMeter::default());
    let policy = load(
        &inputs.module,
        capabilities(args, inputs.cluster.as_ref(), meter.clone()),
        None,
        (args.policy_timeout > 0).then(|| Duration::from_secs(args.policy_timeout)),
        &inputs.settings,
        args.fresh_instances,
    )?;
    let mut response = Vec::new();
    for _ in 0..args.warmup {
        response = policy.validate(payload.as_bytes())?;
    }
    let before = meter.read();
    let mut samples = Vec::with_capacity(args.iterations);
    for _ in 0..args.iterations {
        let start = Instant::now();
        response = policy.validate(payload.as_bytes())?;
        samples.push(start.elapsed());
    }
    let after = meter.read();
    let calls = CallCounts {
        calls: after.calls - before.calls,
        to_host: after.to_host - before.to_host,
        to_guest: after.to_guest - before.to_guest,
    };
    let answer: Value = serde_json::from_slice(&response)
        .map_err(|e| anyhow!("the policy's answer is not JSON: {e}"))?;

    // Passes 2 and 3, unless skipped.
    let (peak_pages_after_call, instructions) = if args.skip_memory_pass {
        (None, None)
    } else {
        (
            Some(peak_memory_pages(args, &inputs)?),
            Some(wasm_instructions(args, &inputs)?),
        )
    };

    let mut stats = json!({
        "policy": args.policy.display().to_string(),
        "request": args.request_path.display().to_string(),
        "iterations": args.iterations,
        "warmup": args.warmup,
        "fresh_instances": args.fresh_instances,
        "accepted": answer.get("accepted").cloned().unwrap_or(Value::Null),
        "host_calls_per_request": per_request(calls.calls, args.iterations),
        "host_call_bytes_to_host_per_request": per_request(calls.to_host, args.iterations),
        "host_call_bytes_to_guest_per_request": per_request(calls.to_guest, args.iterations),
        "wasm_instructions_per_request": instructions,
        "validate_request_bytes": payload.len(),
        "validate_response_bytes": response.len(),
        "peak_memory_pages": peak_pages_after_call,
        "peak_memory_bytes": peak_pages_after_call.map(|pages| pages * WASM_PAGE),
    });
    if let (Value::Object(out), Value::Object(times)) = (&mut stats, time_stats(&mut samples)) {
        out.extend(times);
    }
    println!("{}", serde_json::to_string(&stats)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_known_samples() {
        let mut samples: Vec<Duration> = (1..=20).rev().map(Duration::from_micros).collect();
        let stats = time_stats(&mut samples);
        assert_eq!(stats["min_us"], 1.0);
        assert_eq!(stats["max_us"], 20.0);
        assert_eq!(stats["median_us"], 10.5);
        assert_eq!(stats["mean_us"], 10.5);
        assert_eq!(stats["p95_us"], 19.0);
    }

    #[test]
    fn memory_backend_answers_lookups_and_reads() {
        let mut backend = MemoryBackend {
            digest: "sha256:abc".into(),
            cluster: None,
        };
        let digest = backend
            .evaluate(&CallbackRequestType::OciManifestDigest {
                image: "127.0.0.1:5000/a:b".into(),
            })
            .expect("digest");
        assert_eq!(digest, br#"{"digest":"sha256:abc"}"#);
        assert!(backend
            .evaluate(&CallbackRequestType::OciManifest { image: "x".into() })
            .is_err());
    }

    #[test]
    fn memory_backend_reads_objects_from_a_cluster_directory() {
        let mut cluster = ClusterStore::default();
        cluster
            .add_documents(
                "apiVersion: v1\nkind: Secret\nmetadata: {name: key, namespace: kw}\ndata: {key: a2V5, other: b3RoZXI=}\n",
            )
            .expect("a manifest");
        let mut backend = MemoryBackend {
            digest: "sha256:abc".into(),
            cluster: Some(cluster),
        };
        let get = |name: &str| CallbackRequestType::KubernetesGetResource {
            api_version: "v1".into(),
            kind: "Secret".into(),
            name: name.into(),
            namespace: Some("kw".into()),
            disable_cache: false,
            field_masks: Some(["data.key".to_owned()].into()),
        };
        let secret: Value =
            serde_json::from_slice(&backend.evaluate(&get("key")).expect("the Secret"))
                .expect("JSON");
        // the field masks apply, as on policy-server
        assert_eq!(secret["data"], json!({ "key": "a2V5" }));
        let missing = backend.evaluate(&get("other")).expect_err("no such Secret");
        assert!(missing.to_string().contains("Cannot find"), "{missing}");
    }
}

//! The waPC guest: loading the module with wasmtime (WASI enabled, the guest
//! is wasm32-wasip1) and calling its `validate_settings`, `validate` and
//! `protocol_version` functions the way policy-evaluator's waPC runtime does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use wapc::WapcHost;
use wasmtime_provider::WasmtimeEngineProviderBuilder;

use crate::capabilities::HostCapabilities;
use crate::response::{AdmissionResponse, PolicyValidationResponse, SettingsValidationResponse};

/// Where wasmtime caches compiled modules, like kwctl does: compiling a
/// policy with cranelift dominates a run's time, and the e2e suite runs the
/// same module dozens of times. `POLICY_HOST_WASMTIME_CACHE` overrides the
/// directory, or disables the cache with `off`.
fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("POLICY_HOST_WASMTIME_CACHE") {
        Some(v) if v == "off" || v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("policy-host").join("wasmtime")),
    }
}

/// `POLICY_HOST_PERF_MAP=1`: wasmtime writes `/tmp/perf-PID.map`, naming the
/// address range of every compiled guest function, so that a profiler that
/// sees the JIT code as anonymous memory (perf, callgrind) can be read by
/// function (docs/performance.md). Only on the default, cached engine.
fn perf_map_requested() -> bool {
    std::env::var_os("POLICY_HOST_PERF_MAP").is_some_and(|v| v == "1")
}

/// The compiled form of `module`, from `dir` when it holds one for this
/// module and this wasmtime, else compiled and stored there.
///
/// Why not wasmtime's own cache: it stores compiled code zstd-compressed and
/// decompresses and copies it on every load, which cost a real policy about
/// 10 ms per run, more than its evaluation. Here the artifact is stored as
/// wasmtime serializes it and mapped from the file, so a load costs hashing
/// the module and mapping the file. The name carries the module's SHA-256 and
/// wasmtime's compatibility hash (version and engine settings), so a stale or
/// foreign artifact is never picked; writes go through a temporary file and
/// a rename, so a reader never sees half a file.
fn precompiled(engine: &wasmtime::Engine, module: &[u8], dir: &Path) -> Result<wasmtime::Module> {
    use sha2::Digest as _;
    use std::hash::{Hash, Hasher};
    let mut compat = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compat);
    let name = format!(
        "{:x}-{:016x}.cwasm",
        sha2::Sha256::digest(module),
        compat.finish()
    );
    let path = dir.join(&name);
    if path.exists() {
        // SAFETY: the file was written by `precompile_module` below for exactly
        // these module bytes and this engine (both are in its name), in a
        // directory only this user writes, as wasmtime's own cache trusts it.
        if let Ok(loaded) = unsafe { wasmtime::Module::deserialize_file(engine, &path) } {
            return Ok(loaded);
        }
    }
    let bytes = engine
        .precompile_module(module)
        .map_err(|e| anyhow!("{e}"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, &path)?;
    // SAFETY: `bytes` was produced by `precompile_module` on this engine just now.
    unsafe { wasmtime::Module::deserialize(engine, &bytes) }.map_err(|e| anyhow!("{e}"))
}

/// A compiled policy from which fresh instances are made, as policy-server
/// does for every evaluation (`rehydrate`: a new store, WASI context and
/// instance, then `wapc_init`), so that `bench --fresh-instances` measures
/// what a server pays per request, not only the warm `validate`.
pub struct PolicyPre {
    pre: wasmtime_provider::WasmtimeEngineProviderPre,
    capabilities: Arc<HostCapabilities>,
}

impl PolicyPre {
    /// Compile `module` (on `engine` without the compilation cache, else on
    /// wasmtime-provider's own engine settings with it).
    pub fn with_engine(
        module: &[u8],
        capabilities: Arc<HostCapabilities>,
        engine: Option<wasmtime::Engine>,
    ) -> Result<Self> {
        let mut builder =
            WasmtimeEngineProviderBuilder::new().wasi_params(wapc::WasiParams::default());
        if let Some(engine) = engine {
            builder = builder.engine(engine).module_bytes(module);
        } else if let Some(dir) = cache_dir() {
            // wasmtime-provider's own engine settings: the defaults, cranelift
            let mut config = wasmtime::Config::default();
            config.strategy(wasmtime::Strategy::Cranelift);
            if perf_map_requested() {
                config.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
            let engine = wasmtime::Engine::new(&config).map_err(|e| anyhow!("{e}"))?;
            let compiled = precompiled(&engine, module, &dir)
                .map_err(|e| anyhow!("cannot load the policy: {e}"))?;
            builder = builder.engine(engine).module(compiled);
        } else {
            builder = builder.module_bytes(module);
        }
        let pre = builder
            .build_pre()
            .map_err(|e| anyhow!("cannot load the policy: {e}"))?;
        Ok(Self { pre, capabilities })
    }

    /// A new instance, initialised (`wapc_init`), with host calls going to
    /// the capabilities this was made with.
    pub fn instantiate(&self) -> Result<PolicyRuntime> {
        let engine = self
            .pre
            .rehydrate(None)
            .map_err(|e| anyhow!("cannot instantiate the policy: {e}"))?;
        let capabilities = self.capabilities.clone();
        let callback =
            move |_id: u64, binding: &str, namespace: &str, operation: &str, payload: &[u8]| {
                capabilities.host_callback(binding, namespace, operation, payload)
            };
        let host = WapcHost::new(Box::new(engine), Some(Box::new(callback)))
            .map_err(|e| anyhow!("cannot instantiate the waPC host: {e}"))?;
        Ok(PolicyRuntime { host })
    }
}

/// A loaded policy, wired to the host capabilities.
pub struct PolicyRuntime {
    host: WapcHost,
}

impl PolicyRuntime {
    /// Compile and instantiate `module`; host calls go to `capabilities`.
    pub fn new(module: &[u8], capabilities: Arc<HostCapabilities>) -> Result<Self> {
        PolicyPre::with_engine(module, capabilities, None)?.instantiate()
    }

    /// Call the guest's `validate_settings`. A failed call counts as invalid
    /// settings, with upstream's message.
    pub fn validate_settings(&self, settings: &Value) -> SettingsValidationResponse {
        let payload = settings.to_string();
        match self.host.call("validate_settings", payload.as_bytes()) {
            Ok(res) => {
                serde_json::from_slice(&res).unwrap_or_else(|e| SettingsValidationResponse {
                    valid: false,
                    message: Some(format!("error: {e:?}")),
                })
            }
            Err(err) => SettingsValidationResponse {
                valid: false,
                message: Some(format!(
                    "Error invoking settings validation callback: {err:?}"
                )),
            },
        }
    }

    /// Call the guest's `validate` with `{"request":…,"settings":…}` and turn
    /// the outcome into an AdmissionResponse; a guest error becomes a 500.
    pub fn validate(&self, settings: &Value, request: &Value) -> AdmissionResponse {
        let uid = request
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let req_obj = request.get("object");
        let params = json!({ "request": request, "settings": settings });
        match self.host.call("validate", params.to_string().as_bytes()) {
            Ok(res) => serde_json::from_slice::<PolicyValidationResponse>(&res)
                .map_err(|e| anyhow!("cannot deserialize policy validation response: {e}"))
                .and_then(|r| {
                    AdmissionResponse::from_policy_validation_response(uid.clone(), req_obj, &r)
                })
                .unwrap_or_else(|e| {
                    AdmissionResponse::reject_internal_server_error(uid.clone(), e.to_string())
                }),
            Err(e) => AdmissionResponse::reject_internal_server_error(uid, e.to_string()),
        }
    }

    /// Call a guest function with a raw payload and return its raw answer.
    pub fn call(&self, function: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.host
            .call(function, payload)
            .map_err(|e| anyhow!("guest call {function} failed: {e}"))
    }

    /// Call the guest's `protocol_version` (a JSON string such as `"v1"`).
    pub fn protocol_version(&self) -> Result<String> {
        let res = self
            .host
            .call("protocol_version", &[])
            .map_err(|e| anyhow!("cannot invoke protocol_version: {e}"))?;
        serde_json::from_slice::<String>(&res).with_context(|| {
            format!(
                "invalid protocol_version answer: {}",
                String::from_utf8_lossy(&res)
            )
        })
    }
}

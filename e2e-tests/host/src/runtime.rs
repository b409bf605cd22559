//! The waPC guest: loading the module with wasmtime (WASI enabled, the guest
//! is wasm32-wasip1) and calling its `validate_settings`, `validate` and
//! `protocol_version` functions the way policy-evaluator's waPC runtime
//! (`wapc` on `wasmtime-provider`) does; the protocol is `runtime/wapc.rs`,
//! WASI `runtime/wasi.rs`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use wasmtime::{
    Config, Engine, InstancePre, Linker, Module, ProfilingStrategy, Store, Strategy, TypedFunc,
};

mod wapc;
mod wasi;

use self::wapc::{HasWapc, WapcState};
use self::wasi::{Exit, HasWasi, WasiState};
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

/// The store's data of one instance: its waPC conversation and WASI state.
struct Guest {
    wapc: WapcState,
    wasi: WasiState,
}

impl HasWapc for Guest {
    fn wapc(&mut self) -> &mut WapcState {
        &mut self.wapc
    }
}

impl HasWasi for Guest {
    fn wasi(&mut self) -> &mut WasiState {
        &mut self.wasi
    }
}

/// An engine that counts the wasm instructions its guests execute: wasmtime's fuel, one
/// unit per operator executed. The count does not move with the machine's load, which makes
/// it the figure to compare two settings documents or two builds by; the code runs slower
/// than on the standard engine, so it is not for timing.
pub fn fuel_engine() -> Result<Engine> {
    let mut config = Config::default();
    config.strategy(Strategy::Cranelift).consume_fuel(true);
    Engine::new(&config).map_err(|e| anyhow!("cannot build the metered engine: {e}"))
}

/// A compiled and linked policy from which fresh instances are made, as
/// policy-server does for every evaluation (`rehydrate`: a new store, WASI
/// context and instance, then `wapc_init`), so that `bench --fresh-instances`
/// measures what a server pays per request, not only the warm `validate`.
pub struct PolicyPre {
    pre: InstancePre<Guest>,
    engine: Engine,
    capabilities: Arc<HostCapabilities>,
}

impl PolicyPre {
    /// Compile `module` (on `engine` without the compilation cache, else on
    /// the default engine, cranelift, with it).
    pub fn with_engine(
        module: &[u8],
        capabilities: Arc<HostCapabilities>,
        engine: Option<Engine>,
    ) -> Result<Self> {
        let (engine, compiled) = match engine {
            Some(engine) => {
                let compiled = Module::new(&engine, module)
                    .map_err(|e| anyhow!("cannot load the policy: {e}"))?;
                (engine, compiled)
            }
            None => {
                let mut config = Config::default();
                config.strategy(Strategy::Cranelift);
                if perf_map_requested() {
                    config.profiler(ProfilingStrategy::PerfMap);
                }
                let engine = Engine::new(&config).map_err(|e| anyhow!("{e}"))?;
                let compiled = match cache_dir() {
                    Some(dir) => precompiled(&engine, module, &dir),
                    None => Module::new(&engine, module).map_err(|e| anyhow!("{e}")),
                }
                .map_err(|e| anyhow!("cannot load the policy: {e}"))?;
                (engine, compiled)
            }
        };
        let link = || -> wasmtime::Result<InstancePre<Guest>> {
            let mut linker = Linker::new(&engine);
            wapc::add_to_linker(&mut linker)?;
            wasi::add_to_linker(&mut linker)?;
            // An import neither names traps when called, as in a WASI host
            // that lacks it, instead of refusing the module.
            linker.define_unknown_imports_as_traps(&compiled)?;
            linker.instantiate_pre(&compiled)
        };
        let pre = link().map_err(|e| anyhow!("cannot load the policy: {e}"))?;
        Ok(Self {
            pre,
            engine,
            capabilities,
        })
    }

    /// A new instance, initialised (`_start`, then `wapc_init`, where the
    /// module exports them), with host calls going to the capabilities this
    /// was made with.
    pub fn instantiate(&self) -> Result<PolicyRuntime> {
        let guest = Guest {
            wapc: WapcState::new(self.capabilities.clone()),
            wasi: WasiState::default(),
        };
        let mut store = Store::new(&self.engine, guest);
        if self.engine.get_consume_fuel() {
            store
                .set_fuel(u64::MAX)
                .map_err(|e| anyhow!("cannot meter the policy: {e}"))?;
        }
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| anyhow!("cannot instantiate the policy: {e}"))?;
        for start in ["_start", "wapc_init"] {
            let Ok(init) = instance.get_typed_func::<(), ()>(&mut store, start) else {
                continue;
            };
            if let Err(error) = init.call(&mut store, ()) {
                // A module whose `main` exits 0 (TinyGo) has initialised.
                if matches!(error.downcast_ref::<Exit>(), Some(Exit(0))) {
                    continue;
                }
                return Err(anyhow!(
                    "cannot instantiate the waPC host: Initialization failed: {error}"
                ));
            }
        }
        let guest_call = instance
            .get_typed_func::<(i32, i32), i32>(&mut store, "__guest_call")
            .map_err(|e| anyhow!("cannot instantiate the waPC host: {e}"))?;
        Ok(PolicyRuntime {
            store: RefCell::new(store),
            guest_call,
        })
    }
}

/// A failed guest call, with the words and `Debug` form of
/// `wapc::errors::Error::GuestCallFailure`, which the messages below keep.
#[derive(Debug)]
struct GuestCallFailure(String);

impl std::fmt::Display for GuestCallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Guest call failure: {}", self.0)
    }
}

/// A loaded policy, wired to the host capabilities.
pub struct PolicyRuntime {
    store: RefCell<Store<Guest>>,
    guest_call: TypedFunc<(i32, i32), i32>,
}

impl PolicyRuntime {
    /// Compile and instantiate `module`; host calls go to `capabilities`.
    pub fn new(module: &[u8], capabilities: Arc<HostCapabilities>) -> Result<Self> {
        PolicyPre::with_engine(module, capabilities, None)?.instantiate()
    }

    /// One waPC guest call: `__guest_call` with the operation and payload's
    /// lengths, the guest fetching them with `__guest_request`. A trap fails
    /// the call with the trap's text.
    fn guest_call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, GuestCallFailure> {
        let mut store = self.store.borrow_mut();
        store.data_mut().wapc.begin(operation, payload);
        let lengths = (
            i32::try_from(operation.len()).unwrap_or(i32::MAX),
            i32::try_from(payload.len()).unwrap_or(i32::MAX),
        );
        let result = match self.guest_call.call(&mut *store, lengths) {
            Ok(result) => result,
            Err(error) => {
                store.data_mut().wapc.fail(error.to_string());
                0
            }
        };
        store
            .data_mut()
            .wapc
            .outcome(result)
            .map_err(GuestCallFailure)
    }

    /// Call the guest's `validate_settings`. A failed call counts as invalid
    /// settings, with upstream's message.
    pub fn validate_settings(&self, settings: &Value) -> SettingsValidationResponse {
        let payload = settings.to_string();
        match self.guest_call("validate_settings", payload.as_bytes()) {
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
        match self.guest_call("validate", params.to_string().as_bytes()) {
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

    /// The wasm instructions this instance has executed so far (wasmtime's fuel: one unit
    /// per operator), `None` on an engine that does not count them ([`fuel_engine`]).
    pub fn instructions_executed(&self) -> Option<u64> {
        let left = self.store.borrow().get_fuel().ok()?;
        Some(u64::MAX - left)
    }

    /// Call a guest function with a raw payload and return its raw answer.
    pub fn call(&self, function: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.guest_call(function, payload)
            .map_err(|e| anyhow!("guest call {function} failed: {e}"))
    }

    /// Call the guest's `protocol_version` (a JSON string such as `"v1"`).
    pub fn protocol_version(&self) -> Result<String> {
        let res = self
            .guest_call("protocol_version", &[])
            .map_err(|e| anyhow!("cannot invoke protocol_version: {e}"))?;
        serde_json::from_slice::<String>(&res).with_context(|| {
            format!(
                "invalid protocol_version answer: {}",
                String::from_utf8_lossy(&res)
            )
        })
    }
}

//! The waPC guest: loading the module with wasmtime (WASI enabled, the guest
//! is wasm32-wasip1) and calling its `validate_settings`, `validate` and
//! `protocol_version` functions the way policy-evaluator's waPC runtime
//! (`wapc` on `wasmtime-provider`) does; the protocol is `runtime/wapc.rs`,
//! WASI `runtime/wasi.rs`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use wasmtime::{
    Config, Engine, InstancePre, Linker, Module, ProfilingStrategy, Store, Strategy, Trap,
    TypedFunc,
};

mod wapc;
mod wasi;

use self::wapc::{HasWapc, WapcState};
use self::wasi::{Exit, HasWasi, WasiState};
use crate::capabilities::HostCapabilities;
use crate::response::{AdmissionResponse, GuestVerdict, Reply, SettingsVerdict};

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
            .map(|base| base.join("test-host").join("wasmtime")),
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

/// How often the clock of a time-limited engine ([`PolicyPre::with_engine`]) advances: a
/// guest call runs at most one tick past its time-out.
const EPOCH_TICK: Duration = Duration::from_millis(100);

/// What policy-server answers when an evaluation ran past `--policy-timeout`, word for word:
/// `bench` reports a call past its time-out as the server would, and the README quotes it.
pub const INTERRUPTED: &str =
    "Policy execution interrupted because it exceeded the allowed execution time";

/// A clock for `engine`'s epoch deadlines: a thread that advances it every [`EPOCH_TICK`]
/// until the engine is dropped.
fn start_epoch_clock(engine: &Engine) {
    let engine = engine.weak();
    std::thread::spawn(move || loop {
        std::thread::sleep(EPOCH_TICK);
        match engine.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => break,
        }
    });
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
    /// Each guest call's deadline in epoch ticks, on a time-limited engine.
    deadline: Option<u64>,
}

impl PolicyPre {
    /// Compile `module` (on `engine` without the compilation cache, else on
    /// the default engine, cranelift, with it).
    ///
    /// `timeout` bounds each guest call (initialisation, then each call) on the default
    /// engine as policy-server's `--policy-timeout` does: wasmtime's epoch interruption, whose
    /// checks at every loop and call are compiled into the guest's code (a quarter more
    /// native instructions for the policy), so a host that times the guest must have them
    /// to time what the server runs. A call past it fails with [`INTERRUPTED`].
    pub fn with_engine(
        module: &[u8],
        capabilities: Arc<HostCapabilities>,
        engine: Option<Engine>,
        timeout: Option<Duration>,
    ) -> Result<Self> {
        let mut deadline = None;
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
                config.epoch_interruption(timeout.is_some());
                let engine = Engine::new(&config).map_err(|e| anyhow!("{e}"))?;
                if let Some(timeout) = timeout {
                    let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1);
                    deadline = Some(u64::try_from(ticks).unwrap_or(u64::MAX));
                    start_epoch_clock(&engine);
                }
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
            deadline,
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
        if let Some(ticks) = self.deadline {
            store.set_epoch_deadline(ticks);
        }
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
            deadline: self.deadline,
        })
    }
}

/// A guest call that gave no answer: it failed (an error the guest reported, or a trap), or
/// it was stopped at its deadline.
#[derive(Debug)]
enum GuestCallFailure {
    Failed(String),
    Interrupted,
}

impl std::fmt::Display for GuestCallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // `Guest call failure: ` is the wapc crate's text, which policy-server puts in its
            // answer to a failing guest; `tests/host.bats` and the README pin it.
            Self::Failed(reason) => write!(f, "Guest call failure: {reason}"),
            Self::Interrupted => f.write_str(INTERRUPTED),
        }
    }
}

/// A loaded policy, wired to the host capabilities.
pub struct PolicyRuntime {
    store: RefCell<Store<Guest>>,
    guest_call: TypedFunc<(i32, i32), i32>,
    deadline: Option<u64>,
}

impl PolicyRuntime {
    /// Compile and instantiate `module`; host calls go to `capabilities`.
    pub fn new(module: &[u8], capabilities: Arc<HostCapabilities>) -> Result<Self> {
        PolicyPre::with_engine(module, capabilities, None, None)?.instantiate()
    }

    /// One waPC guest call: `__guest_call` with the operation and payload's
    /// lengths, the guest fetching them with `__guest_request`. A trap fails
    /// the call with the trap's text.
    fn guest_call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, GuestCallFailure> {
        let mut store = self.store.borrow_mut();
        if let Some(ticks) = self.deadline {
            store.set_epoch_deadline(ticks);
        }
        store.data_mut().wapc.begin(operation, payload);
        let lengths = (
            i32::try_from(operation.len()).unwrap_or(i32::MAX),
            i32::try_from(payload.len()).unwrap_or(i32::MAX),
        );
        let result = match self.guest_call.call(&mut *store, lengths) {
            Ok(result) => result,
            Err(error) if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {
                return Err(GuestCallFailure::Interrupted)
            }
            Err(error) => {
                store.data_mut().wapc.fail(error.to_string());
                0
            }
        };
        store
            .data_mut()
            .wapc
            .outcome(result)
            .map_err(GuestCallFailure::Failed)
    }

    /// Asks the guest whether it takes `settings`. Settings are taken only on the guest's
    /// own `valid: true`: a call that fails, or an answer that is not a settings verdict,
    /// refuses them, the message saying which.
    pub fn validate_settings(&self, settings: &Value) -> SettingsVerdict {
        let refused = |message: String| SettingsVerdict {
            valid: false,
            message: Some(message),
        };
        match self.guest_call("validate_settings", settings.to_string().as_bytes()) {
            Ok(answer) => serde_json::from_slice(&answer).unwrap_or_else(|e| {
                refused(format!(
                    "the guest's validate_settings answer is not a settings verdict: {e}"
                ))
            }),
            Err(failure) => refused(format!(
                "the guest's validate_settings call failed: {failure}"
            )),
        }
    }

    /// Calls the guest's `validate` with `{"request":…,"settings":…}`; its verdict becomes
    /// the AdmissionResponse ([`Reply::verdict`]), and a call that gives none a 500
    /// ([`Reply::failure`]).
    pub fn validate(&self, settings: &Value, request: &Value) -> AdmissionResponse {
        let reply = Reply::to(request);
        let params = json!({ "request": request, "settings": settings });
        match self.guest_call("validate", params.to_string().as_bytes()) {
            Ok(answer) => match serde_json::from_slice::<GuestVerdict>(&answer) {
                Ok(verdict) => reply.verdict(&verdict),
                Err(e) => reply.failure(format_args!(
                    "the guest's validate answer is not a verdict: {e}"
                )),
            },
            Err(failure) => reply.failure(failure),
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::allow_list::{HostCapabilitiesAllowList, KubernetesAccess};
    use crate::callback_requests::CallbackRequestType;
    use crate::capabilities::Backend;

    struct NoBackend;

    impl Backend for NoBackend {
        fn evaluate(&mut self, _: &CallbackRequestType) -> Result<Vec<u8>> {
            Err(anyhow!("no host calls in this test"))
        }
    }

    /// `(module (func (export "__guest_call") (param i32 i32) (result i32)
    /// (loop (br 0)) unreachable))`: a guest that never answers.
    const SPINNING_GUEST: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type (i32 i32) -> i32
        0x03, 0x02, 0x01, 0x00, // one function of that type
        0x07, 0x10, 0x01, 0x0c, b'_', b'_', b'g', b'u', b'e', b's', b't', b'_', b'c', b'a', b'l',
        b'l', 0x00, 0x00, // exported as __guest_call
        0x0a, 0x0a, 0x01, 0x08, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x00, 0x0b, // its body
    ];

    fn capabilities() -> Arc<HostCapabilities> {
        Arc::new(HostCapabilities::new(
            HostCapabilitiesAllowList::parse("*"),
            KubernetesAccess::All,
            Box::new(NoBackend),
        ))
    }

    #[test]
    fn settings_are_refused_when_the_guest_gives_no_verdict() {
        let timeout = Some(Duration::from_millis(100));
        let pre = PolicyPre::with_engine(SPINNING_GUEST, capabilities(), None, timeout)
            .expect("the module loads");
        let policy = pre.instantiate().expect("the module instantiates");
        let verdict = policy.validate_settings(&json!({"exemptImages": ["team-a/*"]}));
        assert!(!verdict.valid);
        assert_eq!(
            verdict.message,
            Some(format!(
                "the guest's validate_settings call failed: {INTERRUPTED}"
            ))
        );
    }

    #[test]
    fn a_guest_call_past_its_time_out_is_interrupted_with_policy_servers_words() {
        let timeout = Duration::from_millis(300);
        let pre = PolicyPre::with_engine(SPINNING_GUEST, capabilities(), None, Some(timeout))
            .expect("the module loads");
        let policy = pre.instantiate().expect("the module instantiates");
        let started = Instant::now();
        let error = policy
            .call("validate", b"{}")
            .expect_err("a guest that never answers is stopped");
        assert!(error.to_string().ends_with(INTERRUPTED), "{error}");
        // the clock may tick once right after the deadline is set, never sooner
        assert!(
            started.elapsed() >= timeout - EPOCH_TICK,
            "{:?}",
            started.elapsed()
        );
        // each call gets the whole time-out again
        let started = Instant::now();
        let response = policy.validate(&json!({}), &json!({"uid": "u"}));
        assert!(
            started.elapsed() >= timeout - EPOCH_TICK,
            "{:?}",
            started.elapsed()
        );
        let status = response.status.expect("a refusal carries a status");
        let expected = format!("internal server error: {INTERRUPTED}");
        assert_eq!(status.message, Some(expected));
        assert_eq!((response.allowed, status.code), (false, Some(500)));
    }
}

//! The waPC conversation between host and guest, on wasmtime: the `wapc`
//! module's nine imports and the `__guest_call` export, with the words and
//! outcomes of the `wapc` and `wasmtime-provider` crates that policy-evaluator
//! runs (a host-call error is the guest's `__host_error`; a trap during a
//! guest call is a failed call carrying the trap's text).
//!
//! Why not those crates: `wasmtime-provider` turns on most of wasmtime's
//! features (garbage collection, the component model, threads, profiling,
//! coredumps, a compressed cache) whatever its user asks for, and its WASI
//! needs the component model; together they were about a third of compiling
//! the whole workspace. The protocol itself is this file.

use std::sync::Arc;

use wasmtime::{Caller, Extern, Linker, Memory};

use crate::capabilities::HostCapabilities;

/// The import module of the waPC host functions.
const HOST_NAMESPACE: &str = "wapc";

/// What one instance's waPC conversation holds between the calls of a
/// request, as `wapc::ModuleState` does.
pub struct WapcState {
    /// The host calls' backend.
    capabilities: Arc<HostCapabilities>,
    /// The operation and payload of the guest call in progress.
    guest_request: Option<(String, Vec<u8>)>,
    guest_response: Option<Vec<u8>>,
    guest_error: Option<String>,
    host_response: Option<Vec<u8>>,
    host_error: Option<String>,
}

impl WapcState {
    /// A conversation whose host calls go to `capabilities`.
    pub fn new(capabilities: Arc<HostCapabilities>) -> Self {
        Self {
            capabilities,
            guest_request: None,
            guest_response: None,
            guest_error: None,
            host_response: None,
            host_error: None,
        }
    }

    /// Starts a guest call: the request the guest will fetch, every earlier
    /// answer forgotten.
    pub fn begin(&mut self, operation: &str, payload: &[u8]) {
        self.guest_request = Some((operation.to_owned(), payload.to_vec()));
        self.guest_response = None;
        self.guest_error = None;
        self.host_response = None;
        self.host_error = None;
    }

    /// A trap ended the guest call: its text is the call's error.
    pub fn fail(&mut self, error: String) {
        self.guest_error = Some(error);
    }

    /// The outcome of the guest call that `__guest_call` answered with
    /// `result`, in `wapc::WapcHost::call`'s words.
    pub fn outcome(&mut self, result: i32) -> Result<Vec<u8>, String> {
        let error = self.guest_error.take();
        if result == 0 {
            return Err(error.unwrap_or_else(|| "No error message set for call failure".into()));
        }
        match (self.guest_response.take(), error) {
            (Some(response), _) => Ok(response),
            (None, Some(error)) => Err(error),
            (None, None) => Err("No error message OR response set for call success".into()),
        }
    }

    /// `__host_call`: runs the host capability; 1 with a response, 0 with an error.
    fn host_call(
        &mut self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> i32 {
        self.host_response = None;
        self.host_error = None;
        match self
            .capabilities
            .host_callback(binding, namespace, operation, payload)
        {
            Ok(response) => {
                self.host_response = Some(response);
                1
            }
            Err(error) => {
                self.host_error = Some(error.to_string());
                0
            }
        }
    }
}

/// The store's data of a guest: the waPC conversation and WASI's state.
pub trait HasWapc {
    /// The waPC conversation.
    fn wapc(&mut self) -> &mut WapcState;
}

/// The guest's exported memory.
pub fn memory<T>(caller: &mut Caller<'_, T>) -> wasmtime::Result<Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(wasmtime::format_err!("the guest exports no memory")),
    }
}

/// `len` bytes of guest memory at `ptr`; a range outside it is a trap.
pub fn read<T>(caller: &mut Caller<'_, T>, ptr: i32, len: i32) -> wasmtime::Result<Vec<u8>> {
    let memory = memory(caller)?;
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    let mut bytes = vec![0; len];
    memory
        .read(&*caller, start, &mut bytes)
        .map_err(|_| wasmtime::format_err!("guest memory out of bounds at {start}+{len}"))?;
    Ok(bytes)
}

/// Writes `bytes` into guest memory at `ptr`; a range outside it is a trap.
pub fn write<T>(caller: &mut Caller<'_, T>, ptr: i32, bytes: &[u8]) -> wasmtime::Result<()> {
    let memory = memory(caller)?;
    let start = ptr as u32 as usize;
    memory
        .write(&mut *caller, start, bytes)
        .map_err(|_| wasmtime::format_err!("guest memory out of bounds at {start}+{}", bytes.len()))
}

/// Text the guest passed; not UTF-8 is a trap, as in wasmtime-provider.
fn text<T>(caller: &mut Caller<'_, T>, what: &str, ptr: i32, len: i32) -> wasmtime::Result<String> {
    String::from_utf8(read(caller, ptr, len)?)
        .map_err(|e| wasmtime::format_err!("host_call: cannot convert {what} to UTF8: {e:?}"))
}

/// The byte length the guest reads before fetching an answer.
fn length(bytes: Option<&[u8]>) -> i32 {
    bytes.map_or(0, |b| i32::try_from(b.len()).unwrap_or(i32::MAX))
}

/// Adds the `wapc` module's functions to `linker`.
pub fn add_to_linker<T: HasWapc + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    add_guest_call(linker)?;
    add_host_call(linker)
}

/// What a guest call uses: fetching the request, answering or failing.
fn add_guest_call<T: HasWapc + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap(
        HOST_NAMESPACE,
        "__guest_request",
        |mut caller: Caller<'_, T>, op_ptr: i32, ptr: i32| {
            if let Some((operation, payload)) = caller.data_mut().wapc().guest_request.clone() {
                write(&mut caller, ptr, &payload)?;
                write(&mut caller, op_ptr, operation.as_bytes())?;
            }
            Ok(())
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__guest_response",
        |mut caller: Caller<'_, T>, ptr: i32, len: i32| {
            let bytes = read(&mut caller, ptr, len)?;
            caller.data_mut().wapc().guest_response = Some(bytes);
            Ok(())
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__guest_error",
        |mut caller: Caller<'_, T>, ptr: i32, len: i32| {
            let bytes = read(&mut caller, ptr, len)?;
            caller.data_mut().wapc().guest_error = Some(String::from_utf8_lossy(&bytes).into());
            Ok(())
        },
    )?;
    Ok(())
}

/// What a host call uses: the call, its answer or error, and the log. The import's
/// signature is the waPC ABI's, which every guest is compiled against: binding,
/// namespace, operation and payload, each as a pointer and a length into guest memory.
fn add_host_call<T: HasWapc + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap(
        HOST_NAMESPACE,
        "__host_call",
        |mut caller: Caller<'_, T>,
         bd_ptr: i32,
         bd_len: i32,
         ns_ptr: i32,
         ns_len: i32,
         op_ptr: i32,
         op_len: i32,
         ptr: i32,
         len: i32| {
            let payload = read(&mut caller, ptr, len)?;
            let binding = text(&mut caller, "bd", bd_ptr, bd_len)?;
            let namespace = text(&mut caller, "ns", ns_ptr, ns_len)?;
            let operation = text(&mut caller, "op", op_ptr, op_len)?;
            Ok(caller
                .data_mut()
                .wapc()
                .host_call(&binding, &namespace, &operation, &payload))
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__host_response_len",
        |mut caller: Caller<'_, T>| length(caller.data_mut().wapc().host_response.as_deref()),
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__host_response",
        |mut caller: Caller<'_, T>, ptr: i32| {
            if let Some(response) = caller.data_mut().wapc().host_response.clone() {
                write(&mut caller, ptr, &response)?;
            }
            Ok(())
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__host_error_len",
        |mut caller: Caller<'_, T>| {
            length(
                caller
                    .data_mut()
                    .wapc()
                    .host_error
                    .as_deref()
                    .map(str::as_bytes),
            )
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__host_error",
        |mut caller: Caller<'_, T>, ptr: i32| {
            if let Some(error) = caller.data_mut().wapc().host_error.clone() {
                write(&mut caller, ptr, error.as_bytes())?;
            }
            Ok(())
        },
    )?;
    linker.func_wrap(
        HOST_NAMESPACE,
        "__console_log",
        |mut caller: Caller<'_, T>, ptr: i32, len: i32| {
            // wapc logs it at info level; this host has no logger, so stderr.
            let message = read(&mut caller, ptr, len)?;
            eprintln!("guest: {}", String::from_utf8_lossy(&message));
            Ok(())
        },
    )?;
    Ok(())
}

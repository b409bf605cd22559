//! The part of WASI preview 1 a waPC policy uses, as policy-evaluator's
//! WASI context provides it: no arguments, no environment, no preopened
//! directory, standard output and error passed through, the host's clocks
//! and random bytes. What a Rust `wasm32-wasip1` guest imports is
//! `fd_write`, `environ_get`, `environ_sizes_get`, `clock_time_get`,
//! `random_get` and `proc_exit`; the few others std may reach are answered
//! as a WASI host without files answers them. Any other import a module
//! names traps when called ([`super::PolicyPre`] links them so).

use std::io::{Read, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, Linker};

use super::wapc::{read, write};

const MODULE: &str = "wasi_snapshot_preview1";
const SUCCESS: i32 = 0;
/// `badf`: no such file descriptor.
const EBADF: i32 = 8;
/// `inval`: an argument the host cannot take.
const EINVAL: i32 = 28;
/// `io`: the host could not do it.
const EIO: i32 = 29;

/// A guest's WASI state: the origin of its monotonic clock.
pub struct WasiState {
    started: Instant,
}

impl Default for WasiState {
    fn default() -> Self {
        Self {
            started: Instant::now(),
        }
    }
}

/// The store's data of a guest that has WASI.
pub trait HasWasi {
    /// The WASI state.
    fn wasi(&mut self) -> &mut WasiState;
}

/// The guest called `proc_exit`: the call ends with this error, as a
/// wasmtime-wasi `I32Exit` does.
#[derive(Debug)]
pub struct Exit(pub i32);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Exited with i32 exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// `fd_write` to standard output or error: the iovecs' bytes, in order.
fn fd_write<T>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    iovs: i32,
    count: i32,
    written: i32,
) -> wasmtime::Result<i32> {
    if fd != 1 && fd != 2 {
        return Ok(EBADF);
    }
    let table = read(caller, iovs, count.saturating_mul(8))?;
    let mut bytes = Vec::new();
    for iov in table.chunks_exact(8) {
        let ptr = i32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
        let len = i32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
        bytes.extend(read(caller, ptr, len)?);
    }
    let outcome = if fd == 1 {
        std::io::stdout().write_all(&bytes)
    } else {
        std::io::stderr().write_all(&bytes)
    };
    if outcome.is_err() {
        return Ok(EIO);
    }
    let total = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    write(caller, written, &total.to_le_bytes())?;
    Ok(SUCCESS)
}

/// `clock_time_get`: realtime (0) since the epoch, the others since the
/// instance started, in nanoseconds.
fn clock_time_get<T: HasWasi>(
    caller: &mut Caller<'_, T>,
    id: i32,
    time: i32,
) -> wasmtime::Result<i32> {
    let nanos = match id {
        0 => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        1..=3 => caller.data_mut().wasi().started.elapsed().as_nanos(),
        _ => return Ok(EINVAL),
    };
    let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
    write(caller, time, &nanos.to_le_bytes())?;
    Ok(SUCCESS)
}

/// `random_get`: bytes from the host's `/dev/urandom`.
fn random_get<T>(caller: &mut Caller<'_, T>, buf: i32, len: i32) -> wasmtime::Result<i32> {
    let mut bytes = vec![0; len as u32 as usize];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        return Ok(EIO);
    }
    write(caller, buf, &bytes)?;
    Ok(SUCCESS)
}

/// Adds the WASI functions to `linker`.
pub fn add_to_linker<T: HasWasi + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "fd_write",
        |mut caller: Caller<'_, T>, fd: i32, iovs: i32, count: i32, written: i32| {
            fd_write(&mut caller, fd, iovs, count, written)
        },
    )?;
    linker.func_wrap(
        MODULE,
        "clock_time_get",
        |mut caller: Caller<'_, T>, id: i32, _precision: i64, time: i32| {
            clock_time_get(&mut caller, id, time)
        },
    )?;
    linker.func_wrap(
        MODULE,
        "clock_res_get",
        |mut caller: Caller<'_, T>, _id: i32, resolution: i32| {
            write(&mut caller, resolution, &1u64.to_le_bytes())?;
            Ok(SUCCESS)
        },
    )?;
    linker.func_wrap(
        MODULE,
        "random_get",
        |mut caller: Caller<'_, T>, buf: i32, len: i32| random_get(&mut caller, buf, len),
    )?;
    // No environment and no arguments: both lists are empty.
    for (list, sizes) in [
        ("environ_get", "environ_sizes_get"),
        ("args_get", "args_sizes_get"),
    ] {
        linker.func_wrap(MODULE, list, |_: Caller<'_, T>, _: i32, _: i32| SUCCESS)?;
        linker.func_wrap(
            MODULE,
            sizes,
            |mut caller: Caller<'_, T>, count: i32, size: i32| {
                write(&mut caller, count, &0u32.to_le_bytes())?;
                write(&mut caller, size, &0u32.to_le_bytes())?;
                Ok(SUCCESS)
            },
        )?;
    }
    linker.func_wrap(
        MODULE,
        "proc_exit",
        |_: Caller<'_, T>, code: i32| -> wasmtime::Result<()> { Err(Exit(code).into()) },
    )?;
    linker.func_wrap(MODULE, "sched_yield", |_: Caller<'_, T>| SUCCESS)?;
    // No preopened directory and no file but the standard streams.
    linker.func_wrap(
        MODULE,
        "fd_prestat_get",
        |_: Caller<'_, T>, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(MODULE, "fd_close", |_: Caller<'_, T>, _: i32| EBADF)?;
    Ok(())
}

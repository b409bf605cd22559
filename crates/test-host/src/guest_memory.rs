//! Measuring a guest's linear memory from outside, for `test-host bench`.
//!
//! wapc hides the wasmtime store, so the guest's `memory` export cannot be
//! read after a call. Instead the engine is given a [`MemoryCreator`] whose
//! memories are plain heap allocations that publish their size: a wasm memory
//! never shrinks, so its current size after a call is the peak so far.
//!
//! The engine this builds has no guard pages (wasmtime then bounds-checks
//! every access) and memories that move when they grow: fine to measure
//! memory, not to measure speed, so `bench` times with a standard engine.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

/// A wasm page: 64 KiB.
pub const WASM_PAGE: usize = 65536;

/// Largest byte size reached by any memory created through a [`MemoryMeter`].
#[derive(Debug, Default, Clone)]
pub struct MemoryMeter {
    peak: Arc<AtomicUsize>,
}

impl MemoryMeter {
    /// The largest size any guest memory has had, in bytes.
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// A wasmtime engine whose linear memories report their size to this meter.
    pub fn engine(&self) -> Result<wasmtime::Engine> {
        let mut config = wasmtime::Config::new();
        // No reservation and no guard region: memories are ours to allocate.
        config
            .memory_reservation(0)
            .memory_guard_size(0)
            .memory_reservation_for_growth(0)
            .guard_before_linear_memory(false)
            .memory_may_move(true)
            // copy-on-write initialisation needs mmap-based memories
            .memory_init_cow(false)
            .with_host_memory(Arc::new(self.clone()));
        wasmtime::Engine::new(&config).map_err(|e| anyhow!("cannot build the metered engine: {e}"))
    }
}

// SAFETY: the memories returned are zero-filled, owned allocations of at least
// `minimum` bytes, and no reservation or guard region is requested (enforced below).
unsafe impl MemoryCreator for MemoryMeter {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        if reserved_size_in_bytes.is_some_and(|r| r > 0) || guard_size_in_bytes > 0 {
            return Err("the metered engine supports neither reservations nor guard pages".into());
        }
        let mut memory = HeapMemory {
            ptr: std::ptr::null_mut(),
            size: 0,
            capacity: 0,
            maximum,
            peak: self.peak.clone(),
        };
        memory.grow_to(minimum).map_err(|e| e.to_string())?;
        Ok(Box::new(memory))
    }
}

/// A linear memory on the heap, page aligned, reallocated (and moved) on growth.
struct HeapMemory {
    ptr: *mut u8,
    size: usize,
    capacity: usize,
    maximum: Option<usize>,
    peak: Arc<AtomicUsize>,
}

// SAFETY: the allocation is owned by this value and only touched through wasmtime,
// which serialises access to a store's memories.
unsafe impl Send for HeapMemory {}
unsafe impl Sync for HeapMemory {}

fn layout(capacity: usize) -> wasmtime::Result<Layout> {
    Layout::from_size_align(capacity, WASM_PAGE)
        .map_err(|e| wasmtime::format_err!("bad memory layout: {e}"))
}

// SAFETY: `as_ptr` is valid for `byte_capacity` zero-initialised-or-written bytes.
unsafe impl LinearMemory for HeapMemory {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        if self.maximum.is_some_and(|max| new_size > max) {
            wasmtime::bail!("memory maximum exceeded");
        }
        if new_size > self.capacity || self.ptr.is_null() {
            // Double, so that growing page by page stays linear overall; at least one page,
            // so a memory of size 0 still has a valid, aligned pointer.
            let capacity = new_size
                .max(self.capacity.saturating_mul(2))
                .max(WASM_PAGE)
                .next_multiple_of(WASM_PAGE);
            let capacity = self.maximum.map_or(capacity, |max| {
                capacity.min(max.next_multiple_of(WASM_PAGE).max(WASM_PAGE))
            });
            let new_layout = layout(capacity)?;
            // SAFETY: non-zero size, valid layout.
            let ptr = unsafe { alloc_zeroed(new_layout) };
            if ptr.is_null() {
                wasmtime::bail!("out of memory growing a guest memory to {capacity} bytes");
            }
            if !self.ptr.is_null() {
                // SAFETY: both allocations hold at least `self.size` bytes and are distinct.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.ptr, ptr, self.size);
                    dealloc(self.ptr, layout(self.capacity)?);
                }
            }
            self.ptr = ptr;
            self.capacity = capacity;
        }
        self.size = new_size;
        self.peak.fetch_max(new_size, Ordering::Relaxed);
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for HeapMemory {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            if let Ok(layout) = layout(self.capacity) {
                // SAFETY: allocated in `grow_to` with this very layout.
                unsafe { dealloc(self.ptr, layout) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_sees_initial_size_and_growth() {
        let meter = MemoryMeter::default();
        let engine = meter.engine().expect("engine");
        // Two pages at start; `grow` adds three and writes to the last byte of the last page:
        // (module
        //   (memory (export "memory") 2)
        //   (func (export "grow")
        //     (drop (memory.grow (i32.const 3)))
        //     (i32.store8 (i32.const 327679) (i32.const 7))))
        // in the binary format (the engine is built without a WAT parser).
        const GROW: &[u8] = &[
            0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
            0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // types: () -> ()
            0x03, 0x02, 0x01, 0x00, // functions: one of type 0
            0x05, 0x03, 0x01, 0x00, 0x02, // memories: min 2 pages
            0x07, 0x11, 0x02, // exports: two
            0x06, b'm', b'e', b'm', b'o', b'r', b'y', 0x02, 0x00, // "memory": memory 0
            0x04, b'g', b'r', b'o', b'w', 0x00, 0x00, // "grow": function 0
            0x0a, 0x12, 0x01, 0x10, 0x00, // code: one body of 16 bytes, no locals
            0x41, 0x03, 0x40, 0x00, 0x1a, // i32.const 3, memory.grow, drop
            0x41, 0xff, 0xff, 0x13, 0x41, 0x07, // i32.const 327679, i32.const 7
            0x3a, 0x00, 0x00, 0x0b, // i32.store8, end
        ];
        let module = wasmtime::Module::new(&engine, GROW).expect("module");
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instance");
        assert_eq!(meter.peak_bytes(), 2 * WASM_PAGE);
        let grow = instance
            .get_typed_func::<(), ()>(&mut store, "grow")
            .expect("grow");
        grow.call(&mut store, ()).expect("call");
        assert_eq!(meter.peak_bytes(), 5 * WASM_PAGE);
        let memory = instance.get_memory(&mut store, "memory").expect("memory");
        assert_eq!(memory.data(&store)[5 * WASM_PAGE - 1], 7);
        assert_eq!(memory.data(&store)[0], 0, "memory starts zeroed");
    }
}

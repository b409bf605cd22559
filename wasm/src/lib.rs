//! The WebAssembly module Kubewarden loads: the waPC exports, and nothing else. Every decision
//! is made by `resolvable_images_policy`, which forbids unsafe code; exporting `wapc_init` by
//! its unmangled name is an unsafe attribute, so the exports live in this crate of their own.
//! Natively it is empty: it is tested through the policy's tests and the e2e suites, which load
//! the module `make policy.wasm` builds (exports `wapc_init`, `validate`, `validate_settings`,
//! `protocol_version`).

#[cfg(target_arch = "wasm32")]
mod exports {
    use std::sync::atomic::AtomicU8;

    use kubewarden_policy_sdk::wapc_guest as guest;
    use resolvable_images_policy::{evaluate, host::WapcHost, settings};

    /// A page of writable data no code touches, placed first among the module's writable
    /// statics (this crate's objects come first), so that the others (the policy's, std's, the
    /// dependencies') start on a page boundary and share one page. A fresh instance first
    /// reads that page and then writes it: the kernel copies it and flushes the TLBs of every
    /// CPU running the server, once per page, so statics straddling two pages pay that twice
    /// per request. `scripts/writable-page.py` (`make lint`) holds the layout to one page.
    #[repr(C, align(4096))]
    struct WritablePage(AtomicU8);

    #[used]
    static WRITABLE_PAGE: WritablePage = WritablePage(AtomicU8::new(1));

    /// The waPC guest's entry point: the host calls it once, before any function.
    // SAFETY: no other symbol of the module, its dependencies or wasi-libc is named
    // `wapc_init`; the waPC host looks the export up by this name.
    #[no_mangle]
    pub extern "C" fn wapc_init() {
        guest::register_function("validate", validate);
        guest::register_function("validate_settings", validate_settings);
        guest::register_function(
            "protocol_version",
            kubewarden_policy_sdk::protocol_version_guest,
        );
    }

    fn validate(payload: &[u8]) -> guest::CallResult {
        Ok(evaluate::validate_payload(payload, &WapcHost))
    }

    fn validate_settings(payload: &[u8]) -> guest::CallResult {
        Ok(settings::validate_settings_payload(payload))
    }
}

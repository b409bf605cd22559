//! resolvable-images-policy: a Kubewarden policy that rejects Pods and workloads whose images
//! will certainly fail to pull, and warns about those it could not verify.
//!
//! The crate is split so that every decision is pure and testable natively; only
//! [`host::WapcHost`] touches the waPC boundary, and only the `wasm32` entry points below use it.

pub mod admission;
pub mod credentials;
pub mod custom_kinds;
pub mod evaluate;
pub mod host;
pub mod mirrors;
pub mod platforms;
pub mod pull_secrets;
pub mod reference;
pub mod registry;
pub mod report;
pub mod settings;
/// Builders of Secrets and base64 shared by the unit tests, `tests/` and `fuzz/` (the `testing`
/// feature); never part of the policy.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod verdict;
pub mod workload;

#[cfg(target_arch = "wasm32")]
mod entry {
    use kubewarden_policy_sdk::wapc_guest as guest;

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
        Ok(crate::evaluate::validate_payload(
            payload,
            &crate::host::WapcHost,
        ))
    }

    fn validate_settings(payload: &[u8]) -> guest::CallResult {
        Ok(crate::settings::validate_settings_payload(payload))
    }
}

//! accept-all: the benchmark baseline. It registers the same waPC functions as the policy
//! (`validate`, `validate_settings`, `protocol_version`) and accepts every request and every
//! settings document, after parsing the `validate` payload as the SDK's policies do.

use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest as guest;
use serde::Deserialize;

/// No settings: any object is accepted (unknown fields are ignored).
#[derive(Debug, Default, Deserialize)]
struct Settings {}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The `validate` payload, read as a generic JSON document so the baseline pays for parsing
/// the request just as any policy does.
#[derive(Deserialize)]
struct Payload {
    #[allow(dead_code)]
    request: serde_json::Value,
}

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
    let _: Payload = serde_json::from_slice(payload)?;
    kubewarden_policy_sdk::accept_request()
}

fn validate_settings(payload: &[u8]) -> guest::CallResult {
    kubewarden_policy_sdk::validate_settings::<Settings>(payload)
}

//! lookup-baseline: the benchmark baseline that makes the policy's unavoidable host calls. It parses the
//! `validate` payload, collects the distinct images of a Pod's containers, init containers and
//! ephemeral containers, asks `oci/v1/manifest_digest` for each, and accepts whatever the
//! answers (a failed lookup is ignored: the baseline measures cost, not decisions).

use std::collections::BTreeSet;

use kubewarden_policy_sdk::host_capabilities::oci::get_manifest_digest;
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

/// The `validate` payload, read as a generic JSON document as accept-all reads it.
#[derive(Deserialize)]
struct Payload {
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

/// The distinct images of a Pod object's containers of every kind.
fn images(request: &serde_json::Value) -> BTreeSet<&str> {
    let spec = &request["object"]["spec"];
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|kind| spec[*kind].as_array())
        .flatten()
        .filter_map(|container| container["image"].as_str())
        .collect()
}

fn validate(payload: &[u8]) -> guest::CallResult {
    let payload: Payload = serde_json::from_slice(payload)?;
    for image in images(&payload.request) {
        let _ = get_manifest_digest(image);
    }
    kubewarden_policy_sdk::accept_request()
}

fn validate_settings(payload: &[u8]) -> guest::CallResult {
    kubewarden_policy_sdk::validate_settings::<Settings>(payload)
}

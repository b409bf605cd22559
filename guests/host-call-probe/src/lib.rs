//! A waPC guest whose behaviour is chosen by its settings, so the host can be
//! exercised without the real policy:
//!
//! - settings `{"invalid": "why"}`: `validate_settings` rejects with `why`;
//! - settings `{"calls": [{"binding","namespace","operation","payload"}]}`:
//!   `validate` performs these host calls in order (`binding` defaults to
//!   `kubewarden`; `payload` is any JSON value, sent serialized);
//! - settings `{"images": true}`: also calls `oci/v1/manifest_digest` for every
//!   `request.object.spec.containers[].image`;
//! - settings `{"fail": "msg"}`: `validate` returns a guest error;
//! - settings `{"mutate_image": "x"}`: answers with the first container's image
//!   replaced by `x` (a mutation);
//! - settings `{"log": "msg"}`: sends a `tracing/log` event first;
//! - settings `{"first_call_only": true}`: rejects every `validate` but the
//!   instance's first, so a host that makes a new instance per evaluation
//!   can be told from one that keeps it.
//!
//! The answer rejects when any host call failed (unless `"accept": true`)
//! and its message is a JSON array with one `{"ok": payload}` or
//! `{"err": "text the guest saw"}` per call.

use serde_json::{json, Value};
use wapc_guest::prelude::*;

#[no_mangle]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", protocol_version);
}

fn protocol_version(_: &[u8]) -> CallResult {
    Ok(b"\"v1\"".to_vec())
}

fn validate_settings(payload: &[u8]) -> CallResult {
    let settings: Value = serde_json::from_slice(payload)?;
    let answer = match settings.get("invalid").and_then(Value::as_str) {
        Some(msg) => json!({"valid": false, "message": msg}),
        None => json!({"valid": true}),
    };
    Ok(serde_json::to_vec(&answer)?)
}

fn call(binding: &str, namespace: &str, operation: &str, payload: &Value) -> Value {
    let bytes = serde_json::to_vec(payload).unwrap_or_default();
    match host_call(binding, namespace, operation, &bytes) {
        Ok(res) => json!({"ok": String::from_utf8_lossy(&res)}),
        Err(e) => json!({"err": e.to_string()}),
    }
}

/// `validate` calls this instance has run.
static VALIDATE_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn validate(payload: &[u8]) -> CallResult {
    let earlier_calls = VALIDATE_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let input: Value = serde_json::from_slice(payload)?;
    let settings = &input["settings"];
    let request = &input["request"];
    if let Some(msg) = settings.get("fail").and_then(Value::as_str) {
        return Err(msg.to_string().into());
    }
    if let Some(msg) = settings.get("log").and_then(Value::as_str) {
        let event = json!({"level": "info", "msg": msg, "policy": "host-call-probe"});
        let _ = host_call("kubewarden", "tracing", "log", &serde_json::to_vec(&event)?);
    }
    let mut results = Vec::new();
    if let Some(calls) = settings.get("calls").and_then(Value::as_array) {
        for c in calls {
            results.push(call(
                c.get("binding")
                    .and_then(Value::as_str)
                    .unwrap_or("kubewarden"),
                c.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                c.get("operation")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                c.get("payload").unwrap_or(&Value::Null),
            ));
        }
    }
    if settings.get("images").and_then(Value::as_bool) == Some(true) {
        if let Some(containers) = request["object"]["spec"]["containers"].as_array() {
            for c in containers {
                let image = c["image"].clone();
                results.push(call("kubewarden", "oci", "v1/manifest_digest", &image));
            }
        }
    }
    let failed = results.iter().any(|r| r.get("err").is_some());
    let repeated =
        earlier_calls > 0 && settings.get("first_call_only").and_then(Value::as_bool) == Some(true);
    let accepted = !repeated
        && settings
            .get("accept")
            .and_then(Value::as_bool)
            .unwrap_or(!failed);
    let mut answer = json!({"accepted": accepted});
    if !results.is_empty() {
        answer["message"] = Value::String(serde_json::to_string(&results)?);
    }
    if !accepted {
        answer["code"] = json!(400);
    }
    if let Some(image) = settings.get("mutate_image") {
        let mut object = request["object"].clone();
        object["spec"]["containers"][0]["image"] = image.clone();
        answer["mutated_object"] = object;
    }
    Ok(serde_json::to_vec(&answer)?)
}

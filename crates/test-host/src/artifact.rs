//! Policies as files or as Kubewarden OCI artifacts: loading a policy for
//! `run` (local path or `registry://`) and `test-host push`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use tokio::runtime::Runtime;

use crate::metadata::Metadata;
use crate::oci::RegistryClient;

/// Read a policy: `registry://…` is pulled, anything else (optionally
/// `file://`) is a local path.
pub fn load_policy(policy: &str, runtime: &Runtime, registry: &RegistryClient) -> Result<Vec<u8>> {
    if policy.starts_with("registry://") {
        let bytes = runtime
            .block_on(registry.pull_policy(policy))
            .map_err(anyhow::Error::from)
            .with_context(|| format!("the policy {policy} could not be downloaded"))?;
        return Ok(bytes);
    }
    let path = policy.strip_prefix("file://").unwrap_or(policy);
    let bytes = std::fs::read(Path::new(path))
        .with_context(|| format!("cannot read policy file {path}"))?;
    if !bytes.starts_with(b"\0asm") {
        bail!("{path} is not a wasm module");
    }
    Ok(bytes)
}

/// OCI manifest annotations for a policy: its metadata annotations, minus
/// multi-line values (the README in `io.kubewarden.policy.usage`), which do
/// not belong in a manifest.
pub fn manifest_annotations(module: &[u8]) -> Result<Option<BTreeMap<String, String>>> {
    let Some(metadata) = Metadata::from_wasm(module)? else {
        return Ok(None);
    };
    let annotations: BTreeMap<String, String> = metadata
        .annotations
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| !v.contains('\n'))
        .collect();
    Ok(if annotations.is_empty() {
        None
    } else {
        Some(annotations)
    })
}

/// Push `wasm_path` to `destination`; prints the digest on stdout and the
/// immutable reference on stderr.
pub fn push(
    wasm_path: &Path,
    destination: &str,
    runtime: &Runtime,
    registry: &RegistryClient,
) -> Result<()> {
    let module = std::fs::read(wasm_path)
        .with_context(|| format!("cannot read policy file {}", wasm_path.display()))?;
    if !module.starts_with(b"\0asm") {
        bail!("{} is not a wasm module", wasm_path.display());
    }
    let annotations = manifest_annotations(&module)?;
    let (immutable, digest) = runtime
        .block_on(registry.push(&module, destination, annotations))
        .map_err(anyhow::Error::from)
        .context("could not push policy")?;
    eprintln!("Policy successfully pushed: {immutable}");
    println!("{digest}");
    Ok(())
}

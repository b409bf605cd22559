//! `test-host annotate`: embed metadata in a module, like `kwctl annotate`.
//!
//! The module's sections are copied byte for byte, except any existing
//! `io.kubewarden.metadata` custom section, and a new one is appended. Doing
//! it at the byte level keeps everything else (names, producers, code)
//! untouched, which is what a reviewer diffing two modules expects.

use anyhow::{anyhow, bail, Result};

use crate::metadata::{Metadata, METADATA_SECTION};

/// Annotation naming the tool that annotated the module.
pub const KWCTL_ANNOTATION: &str = "io.kubewarden.kwctl";
/// Annotation holding the policy's README.
pub const USAGE_ANNOTATION: &str = "io.kubewarden.policy.usage";

fn read_leb_u32(bytes: &[u8], pos: &mut usize) -> Result<u32> {
    let mut result: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *bytes
            .get(*pos)
            .ok_or_else(|| anyhow!("truncated LEB128 at offset {pos}"))?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            bail!("LEB128 value too large at offset {pos}");
        }
    }
    u32::try_from(result).map_err(|_| anyhow!("LEB128 value out of range"))
}

fn write_leb_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let mut byte = (value & 0x7f) as u8;
        value >>= 7;
        if value != 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if value == 0 {
            break;
        }
    }
}

/// Copy `module`, dropping custom sections named `name`, then append a new
/// custom section `name` holding `data`.
pub fn replace_custom_section(module: &[u8], name: &str, data: &[u8]) -> Result<Vec<u8>> {
    if module.len() < 8 || &module[0..4] != b"\0asm" {
        bail!("not a wasm module (bad magic number)");
    }
    let mut out = module[0..8].to_vec();
    let mut pos = 8;
    while pos < module.len() {
        let start = pos;
        let id = module[pos];
        pos += 1;
        let size = read_leb_u32(module, &mut pos)? as usize;
        let content_start = pos;
        let end = content_start
            .checked_add(size)
            .filter(|e| *e <= module.len())
            .ok_or_else(|| anyhow!("section at offset {start} runs past the end of the module"))?;
        let mut keep = true;
        if id == 0 {
            let mut p = content_start;
            let name_len = read_leb_u32(module, &mut p)? as usize;
            let section_name = module
                .get(p..p + name_len)
                .ok_or_else(|| anyhow!("custom section name past its section"))?;
            keep = section_name != name.as_bytes();
        }
        if keep {
            out.extend_from_slice(&module[start..end]);
        }
        pos = end;
    }
    let name_len = u32::try_from(name.len())?;
    let mut content = Vec::new();
    write_leb_u32(&mut content, name_len);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(data);
    out.push(0);
    write_leb_u32(&mut out, u32::try_from(content.len())?);
    out.extend_from_slice(&content);
    Ok(out)
}

/// Build the metadata kwctl would embed: the given metadata plus
/// `protocolVersion`, `io.kubewarden.kwctl` and, when a README is given,
/// `io.kubewarden.policy.usage`.
pub fn annotated_metadata(
    mut metadata: Metadata,
    protocol_version: String,
    usage: Option<String>,
) -> Metadata {
    metadata.protocol_version = Some(protocol_version);
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(
        KWCTL_ANNOTATION.to_owned(),
        format!("test-host {}", env!("CARGO_PKG_VERSION")),
    );
    if let Some(usage) = usage {
        annotations.insert(USAGE_ANNOTATION.to_owned(), usage);
    }
    metadata
}

/// Write `metadata` as JSON into the module's metadata section.
pub fn annotate_module(module: &[u8], metadata: &Metadata) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(metadata)?;
    replace_custom_section(module, METADATA_SECTION, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with a type section and an old metadata section.
    fn sample_module() -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        // type section: one func type () -> ()
        m.extend_from_slice(&[1, 4, 1, 0x60, 0, 0]);
        let with_old =
            replace_custom_section(&m, METADATA_SECTION, b"{\"old\":true}").expect("old");
        replace_custom_section(&with_old, "producers-like", b"keep me").expect("other")
    }

    fn custom_sections(module: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(module) {
            if let wasmparser::Payload::CustomSection(r) = payload.expect("valid wasm") {
                out.push((r.name().to_owned(), r.data().to_vec()));
            }
        }
        out
    }

    #[test]
    fn writes_and_replaces_the_metadata_section() {
        let metadata: Metadata = serde_yaml::from_str(
            "rules:\n- apiGroups: ['']\n  apiVersions: [v1]\n  resources: [pods]\n  operations: [CREATE]\nmutating: false\ncontextAwareResources:\n- apiVersion: v1\n  kind: Secret\nannotations:\n  io.kubewarden.policy.title: test\n",
        )
        .expect("metadata");
        let annotated = annotated_metadata(metadata, "v1".into(), Some("# README\n".into()));
        let module = annotate_module(&sample_module(), &annotated).expect("annotate");

        wasmparser::Validator::new()
            .validate_all(&module)
            .expect("still a valid module");
        let sections = custom_sections(&module);
        let meta: Vec<_> = sections
            .iter()
            .filter(|(n, _)| n == METADATA_SECTION)
            .collect();
        assert_eq!(meta.len(), 1, "old section replaced, not duplicated");
        assert!(sections
            .iter()
            .any(|(n, d)| n == "producers-like" && d == b"keep me"));

        let json: serde_json::Value = serde_json::from_slice(&meta[0].1).expect("json");
        assert_eq!(json["protocolVersion"], "v1");
        assert_eq!(json["mutating"], false);
        assert_eq!(json["backgroundAudit"], true);
        assert_eq!(json["executionMode"], "kubewarden-wapc");
        assert_eq!(json["contextAwareResources"][0]["kind"], "Secret");
        assert_eq!(
            json["annotations"]["io.kubewarden.policy.usage"],
            "# README\n"
        );
        assert_eq!(json["annotations"]["io.kubewarden.policy.title"], "test");
        assert!(json["annotations"]["io.kubewarden.kwctl"].is_string());

        let back = Metadata::from_wasm(&module)
            .expect("read")
            .expect("present");
        assert_eq!(back, annotated);
    }

    #[test]
    fn rejects_non_wasm() {
        assert!(replace_custom_section(b"not wasm", METADATA_SECTION, b"{}").is_err());
    }
}

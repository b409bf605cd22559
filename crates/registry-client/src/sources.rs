//! kwctl's `sources.yaml`: which registries are insecure and which extra
//! certificate authorities to trust, keyed by `host[:port]`.
//!
//! Accepted shape (the one policy-fetcher reads):
//! ```yaml
//! insecure_sources: ["127.0.0.1:5000"]
//! source_authorities:
//!   "127.0.0.1:5443":
//!     - type: Path
//!       path: /tmp/ca.pem
//!     - type: Data
//!       data: "-----BEGIN CERTIFICATE-----\n..."
//! ```

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ConfigError;

/// A certificate authority, PEM or DER encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Certificate {
    /// PEM text.
    Pem(Vec<u8>),
    /// DER bytes.
    Der(Vec<u8>),
}

impl Certificate {
    fn from_bytes(bytes: Vec<u8>) -> Self {
        if bytes
            .windows(b"-----BEGIN".len())
            .any(|w| w == b"-----BEGIN")
        {
            Certificate::Pem(bytes)
        } else {
            Certificate::Der(bytes)
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum RawSourceAuthority {
    Data { data: String },
    Path { path: PathBuf },
}

#[derive(Debug, Default, Deserialize)]
struct RawSources {
    #[serde(default)]
    insecure_sources: HashSet<String>,
    #[serde(default)]
    source_authorities: HashMap<String, Vec<RawSourceAuthority>>,
}

/// Parsed `sources.yaml`.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    insecure_sources: HashSet<String>,
    source_authorities: HashMap<String, Vec<Certificate>>,
}

impl Sources {
    /// Read and parse a sources file, loading `type: Path` certificates eagerly
    /// so a missing CA file is reported before any evaluation starts.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        const WHAT: &str = "sources file";
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            what: WHAT,
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|e| e.in_file(WHAT, path.to_owned()))
    }

    /// Parse the YAML (or JSON) text of a sources file.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawSources = if text.trim().is_empty() {
            RawSources::default()
        } else {
            serde_yaml::from_str(text)?
        };
        let mut source_authorities = HashMap::new();
        for (host, authorities) in raw.source_authorities {
            let mut certs = Vec::new();
            for authority in authorities {
                let bytes = match authority {
                    RawSourceAuthority::Data { data } => data.into_bytes(),
                    RawSourceAuthority::Path { path } => std::fs::read(&path)
                        .map_err(|source| ConfigError::Certificate { path, source })?,
                };
                certs.push(Certificate::from_bytes(bytes));
            }
            source_authorities.insert(host, certs);
        }
        Ok(Self {
            insecure_sources: raw.insecure_sources,
            source_authorities,
        })
    }

    /// Is `host_and_port` listed under `insecure_sources`?
    pub fn is_insecure_source(&self, host_and_port: &str) -> bool {
        self.insecure_sources.contains(host_and_port)
    }

    /// Extra CAs to trust for `host_and_port`, if any.
    pub fn source_authority(&self, host_and_port: &str) -> Option<&[Certificate]> {
        self.source_authorities
            .get(host_and_port)
            .map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_authority_shapes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let yaml = format!(
            "insecure_sources: [\"127.0.0.1:5000\"]\nsource_authorities:\n  \"127.0.0.1:5443\":\n    - type: Path\n      path: {}\n    - type: Data\n      data: \"-----BEGIN CERTIFICATE-----\\nBBBB\\n-----END CERTIFICATE-----\\n\"\n",
            ca.display()
        );
        let s = Sources::from_yaml(&yaml).expect("parse");
        assert!(s.is_insecure_source("127.0.0.1:5000"));
        assert!(!s.is_insecure_source("127.0.0.1:5443"));
        let certs = s.source_authority("127.0.0.1:5443").expect("certs");
        assert_eq!(certs.len(), 2);
        assert!(matches!(certs[0], Certificate::Pem(_)));
    }
}

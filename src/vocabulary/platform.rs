//! An OCI platform and containerd's rules for which platform serves which: the vocabulary the
//! platform checks and the scheduling rules share, with no knowledge of either.

use std::fmt;

use serde_json::Value;

/// An OCI platform, normalised as containerd normalises it (`aarch64` is `arm64`, `arm` is
/// `arm/v7`, `arm64/v8` is `arm64`, `amd64/v1` is `amd64`), so that equal platforms compare
/// equal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    /// `linux`, `windows`, …
    pub os: String,
    /// `amd64`, `arm64`, …
    pub architecture: String,
    /// `v7`, `v3`, `v8.2`, … when it is not the architecture's baseline.
    pub variant: Option<String>,
    /// Windows' `os.version` (`10.0.17763` or longer); a requirement with one is served only by
    /// images of that build.
    pub os_version: Option<String>,
}

impl Platform {
    /// Parses containerd's specifier `os[(os.version)]/architecture[/variant]`.
    pub fn parse(text: &str) -> Result<Self, PlatformError> {
        let error = || PlatformError {
            entry: text.to_owned(),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        };
        let parts: Vec<&str> = text.split('/').collect();
        let (os_part, architecture, variant) = match parts.as_slice() {
            [os, architecture] => (*os, *architecture, None),
            [os, architecture, variant] => (*os, *architecture, Some(*variant)),
            _ => return Err(error()),
        };
        let (os, os_version) = match os_part.split_once('(') {
            Some((os, rest)) => {
                let version = rest.strip_suffix(')').ok_or_else(error)?;
                (
                    os,
                    Some(version)
                        .filter(|v| valid(v))
                        .ok_or_else(error)
                        .map(Some)?,
                )
            }
            None => (os_part, None),
        };
        if !valid(os) || !valid(architecture) || variant.is_some_and(|v| !valid(v)) {
            return Err(error());
        }
        Ok(Platform::new(os, architecture, variant, os_version))
    }

    /// A normalised platform.
    pub fn new(
        os: &str,
        architecture: &str,
        variant: Option<&str>,
        os_version: Option<&str>,
    ) -> Self {
        let (architecture, variant) = normalize_arch(architecture, variant.unwrap_or(""));
        Platform {
            os: os.to_ascii_lowercase().replace("macos", "darwin"),
            architecture,
            variant: Some(variant).filter(|v| !v.is_empty()),
            os_version: os_version.filter(|v| !v.is_empty()).map(str::to_owned),
        }
    }

    /// True when a node of this platform runs an image built for `available`, as containerd's
    /// `platforms.Only(self).Match(available)` decides: the same OS, and the architecture and
    /// variant of one of the platforms it is compatible with (an `arm/v7` node runs `arm/v6`
    /// and `arm/v5`, an `arm64` node `arm/v8` to `arm/v5`, an `amd64/v3` node `amd64/v2`,
    /// `amd64` and `386`; never the reverse). Windows images must also be of the node's build.
    pub fn is_served_by(&self, available: &Platform) -> bool {
        self.compatible().iter().any(|p| {
            p.os == available.os
                && p.architecture == available.architecture
                && p.variant == available.variant
        }) && self.os_version_served_by(available)
    }

    /// Exact matching, as containerd's `OnlyStrict`: no older variants, no `386` for `amd64`.
    pub fn is_served_strictly_by(&self, available: &Platform) -> bool {
        self.os == available.os
            && self.architecture == available.architecture
            && self.variant == available.variant
            && self.os_version_served_by(available)
    }

    /// True for the attestation entries of an index (`unknown/unknown`), which no node runs.
    pub fn is_attestation(&self) -> bool {
        self.os == "unknown" || self.architecture == "unknown"
    }

    /// A build-specific requirement (`windows(10.0.17763)`) is served by images of that build
    /// (`10.0.17763.xxxx`) or of none.
    fn os_version_served_by(&self, available: &Platform) -> bool {
        match (&self.os_version, &available.os_version) {
            (Some(wanted), Some(offered)) => {
                offered == wanted
                    || offered.starts_with(&format!("{wanted}."))
                    || wanted.starts_with(&format!("{offered}."))
            }
            _ => true,
        }
    }

    /// The platforms a node of this platform runs, most preferred first: containerd's
    /// `platformVector`.
    fn compatible(&self) -> Vec<Platform> {
        let variant_number = |prefix: &str| {
            self.variant
                .as_deref()
                .unwrap_or(prefix)
                .trim_start_matches('v')
                .parse::<u32>()
                .ok()
        };
        let mut vector = vec![self.clone()];
        let with = |architecture: &str, variant: String| {
            Platform::new(&self.os, architecture, Some(&variant), None)
        };
        match self.architecture.as_str() {
            "amd64" => {
                let level = variant_number("v1").unwrap_or(1);
                vector.extend((1..level).rev().map(|v| with("amd64", format!("v{v}"))));
                vector.push(with("386", String::new()));
            }
            "arm" => {
                if let Some(version) = variant_number("v7").filter(|v| *v > 5) {
                    vector.extend((5..version).rev().map(|v| with("arm", format!("v{v}"))));
                }
            }
            "arm64" => vector.extend(self.arm64_compatible()),
            _ => {}
        }
        vector
    }

    /// `arm64/v9.x` runs `v9.{x-1..0}` and `v8.{x+5..0}`; `arm64/v8.x` runs `v8.{x-1..0}`; both
    /// run `arm/v8` to `arm/v5`.
    fn arm64_compatible(&self) -> Vec<Platform> {
        let variant = self.variant.as_deref().unwrap_or("v8");
        let (major, minor) = match variant.trim_start_matches('v').split_once('.') {
            Some((major, minor)) => (major.parse::<u32>().ok(), minor.parse::<u32>().unwrap_or(0)),
            None => (variant.trim_start_matches('v').parse::<u32>().ok(), 0),
        };
        let with = |variant: String| Platform::new(&self.os, "arm64", Some(&variant), None);
        let named = |major: u32, minor: u32| {
            if minor == 0 {
                format!("v{major}")
            } else {
                format!("v{major}.{minor}")
            }
        };
        let mut vector = Vec::new();
        let Some(mut major) = major.filter(|m| *m >= 8) else {
            return vector;
        };
        let mut minor = minor;
        if major == 9 {
            vector.extend((0..minor).rev().map(|m| with(named(9, m))));
            minor += 5;
            major = 8;
            vector.push(with(format!("v8.{minor}")));
        }
        vector.extend((0..minor).rev().map(|m| with(named(major, m))));
        vector.extend(Platform::new(&self.os, "arm", Some("v8"), None).compatible());
        vector
    }

    /// Reads `{os, architecture, variant, os.version}` as OCI indexes and image configs write it.
    pub fn from_json(value: &Value) -> Option<Self> {
        let os = value["os"].as_str()?;
        let architecture = value["architecture"].as_str()?;
        Some(Platform::new(
            os,
            architecture,
            value["variant"].as_str(),
            value["os.version"].as_str(),
        ))
    }
}

/// containerd's `normalizeArch`, with `arm64/v8.0` as `arm64` and `arm64/v9.0` as `arm64/v9`.
fn normalize_arch(architecture: &str, variant: &str) -> (String, String) {
    let (architecture, variant) = (
        architecture.to_ascii_lowercase(),
        variant.to_ascii_lowercase(),
    );
    match architecture.as_str() {
        "i386" => ("386".into(), String::new()),
        "x86_64" | "x86-64" | "amd64" => {
            let variant = if variant == "v1" {
                String::new()
            } else {
                variant
            };
            ("amd64".into(), variant)
        }
        "aarch64" | "arm64" => {
            let variant = match variant.as_str() {
                "8" | "v8" | "v8.0" => String::new(),
                "9" | "9.0" | "v9.0" => "v9".into(),
                _ => variant,
            };
            ("arm64".into(), variant)
        }
        "armhf" => ("arm".into(), "v7".into()),
        "armel" => ("arm".into(), "v6".into()),
        "arm" => {
            let variant = match variant.as_str() {
                "" | "7" => "v7".into(),
                "5" | "6" | "8" => format!("v{variant}"),
                _ => variant,
            };
            ("arm".into(), variant)
        }
        _ => (architecture, variant),
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.os)?;
        if let Some(version) = &self.os_version {
            write!(f, "({version})")?;
        }
        write!(f, "/{}", self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

/// A platform that is not `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{entry:?} is not os[(os.version)]/architecture[/variant], e.g. linux/arm64/v8 or windows(10.0.17763)/amd64"
)]
pub struct PlatformError {
    /// The entry as written.
    pub entry: String,
}

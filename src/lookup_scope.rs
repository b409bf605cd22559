//! Which registries the policy may ask. Any user who can create a Pod chooses the host its
//! image names, and a lookup is a request the policy server sends there: to a registry that
//! never answers (which wedges the stock policy server's lookups), to an internal service, or
//! to a cloud metadata endpoint. Operators list the registries worth asking
//! (`lookupRegistries`), and some addresses are never asked (`deniedLookupNetworks`).

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::failure::{Failure, FailureKind};
use crate::field_error::FieldError;
use crate::globs::Glob;
use crate::reference::ImageReference;

/// The networks lookups are never sent to unless the operator says otherwise: link-local
/// (cloud metadata endpoints such as 169.254.169.254 live there) and the unspecified addresses.
pub const DEFAULT_DENIED_NETWORKS: [&str; 4] =
    ["169.254.0.0/16", "fe80::/10", "0.0.0.0/32", "::/128"];

/// [`DEFAULT_DENIED_NETWORKS`], built without parsing: settings are compiled for every request
/// on policy-server 1.36, which makes a fresh instance for each.
const DEFAULT_DENIED: [Network; 4] = [
    Network {
        address: IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)),
        prefix: 16,
    },
    Network {
        address: IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)),
        prefix: 10,
    },
    Network {
        address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        prefix: 32,
    },
    Network {
        address: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        prefix: 128,
    },
];

/// The registries lookups may go to; their patterns borrowed from the settings' text when a
/// request reads them.
#[derive(Debug, Clone)]
pub struct LookupScope<'a> {
    registries: Vec<Glob<'a>>,
    denied: Vec<Network>,
}

impl Default for LookupScope<'_> {
    fn default() -> Self {
        LookupScope {
            registries: Vec::new(),
            denied: DEFAULT_DENIED.to_vec(),
        }
    }
}

impl<'a> LookupScope<'a> {
    /// Compiles `lookupRegistries` (globs; empty means every registry; a request's borrowed
    /// from the settings' text) and `deniedLookupNetworks` (CIDRs; `None`, not written, means
    /// the defaults).
    pub fn new(
        registries: Vec<impl Into<Cow<'a, str>>>,
        denied: Option<&[String]>,
    ) -> Result<Self, ScopeError> {
        let registries = registries
            .into_iter()
            .enumerate()
            .map(|(index, pattern)| {
                compile_registry_pattern(pattern)
                    .map_err(|problem| ScopeError::Registry { index, problem })
            })
            .collect::<Result<_, _>>()?;
        let denied = match denied {
            None => DEFAULT_DENIED.to_vec(),
            Some(denied) => denied
                .iter()
                .enumerate()
                .map(|(index, cidr)| {
                    Network::parse(cidr).map_err(|problem| ScopeError::Network { index, problem })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(LookupScope { registries, denied })
    }

    /// Why `reference`'s registry is not asked, or `None` when it may be.
    pub fn refusal(&self, reference: &ImageReference) -> Option<Failure> {
        let registry = reference.registry();
        let host = host_of(registry);
        if let Some(network) = host
            .parse::<IpAddr>()
            .ok()
            .and_then(|ip| self.denied.iter().find(|network| network.contains(ip)))
        {
            return Some(Failure::new(
                FailureKind::NotLookedUp,
                format!("not looked up: {registry} is in {network}, a network lookups are never sent to (deniedLookupNetworks; link-local addresses serve cloud metadata)"),
            ));
        }
        let listed = self.registries.is_empty()
            || self
                .registries
                .iter()
                .any(|pattern| pattern.matches(registry) || pattern.matches(host));
        (!listed).then(|| {
            Failure::new(
                FailureKind::NotLookedUp,
                format!("not looked up: registry {registry} is not in lookupRegistries"),
            )
        })
    }
}

/// `registry.example:5000` → `registry.example`; `[fe80::1]:5000` → `fe80::1`.
fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// A registry glob: `*.corp.example`, `docker.io`, `registry.internal:5000`.
fn compile_registry_pattern<'a>(pattern: impl Into<Cow<'a, str>>) -> Result<Glob<'a>, String> {
    let pattern = pattern.into();
    if pattern.is_empty() || pattern.contains('/') || pattern.chars().any(char::is_whitespace) {
        return Err(format!(
            "{pattern:?} is not a registry pattern such as *.corp.example or docker.io"
        ));
    }
    Glob::new(pattern)
}

/// An IP network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    fn parse(cidr: &str) -> Result<Self, String> {
        let problem = || format!("{cidr:?} is not a network such as 169.254.0.0/16 or fe80::/10");
        let (address, prefix) = cidr.split_once('/').ok_or_else(problem)?;
        let address: IpAddr = address.parse().map_err(|_| problem())?;
        let prefix: u8 = prefix.parse().map_err(|_| problem())?;
        let bits = if address.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(problem());
        }
        Ok(Network { address, prefix })
    }

    /// True when `ip` is in the network; an IPv4-mapped IPv6 address counts as its IPv4 one.
    fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (network, ip, bits) = match (self.address, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                (u128::from(u32::from(n)), u128::from(u32::from(i)), 32)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || network >> shift == ip >> shift
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// A refused `lookupRegistries` or `deniedLookupNetworks` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A `lookupRegistries` entry.
    #[error("{problem}")]
    Registry {
        /// Its position.
        index: usize,
        /// What is wrong.
        problem: String,
    },
    /// A `deniedLookupNetworks` entry.
    #[error("{problem}")]
    Network {
        /// Its position.
        index: usize,
        /// What is wrong.
        problem: String,
    },
}

impl FieldError for ScopeError {
    fn field(&self) -> String {
        match self {
            ScopeError::Registry { index, .. } => format!("lookupRegistries[{index}]"),
            ScopeError::Network { index, .. } => format!("deniedLookupNetworks[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(scope: &LookupScope, image: &str) -> Option<String> {
        scope
            .refusal(&ImageReference::parse(image).unwrap())
            .map(|failure| failure.detail)
    }

    #[test]
    fn the_built_default_networks_are_the_documented_ones() {
        let parsed: Vec<Network> = DEFAULT_DENIED_NETWORKS
            .iter()
            .map(|cidr| Network::parse(cidr).unwrap())
            .collect();
        assert_eq!(parsed, DEFAULT_DENIED);
        let written: Vec<String> = DEFAULT_DENIED.iter().map(Network::to_string).collect();
        assert_eq!(written, DEFAULT_DENIED_NETWORKS);
    }

    #[test]
    fn link_local_and_unspecified_addresses_are_never_asked_by_default() {
        let scope = LookupScope::default();
        for image in [
            "169.254.169.254/latest/meta:1",
            "169.254.169.254:80/a:1",
            "[fe80::1]:5000/a:1",
            "0.0.0.0:5000/a:1",
            "[::]:5000/a:1",
            "[::ffff:a9fe:a9fe]:80/a:1",
        ] {
            let detail = refusal(&scope, image).unwrap_or_else(|| panic!("{image} was allowed"));
            assert!(detail.contains("deniedLookupNetworks"), "{detail}");
        }
        for image in [
            "127.0.0.1:5000/a:1",
            "[::1]:5000/a:1",
            "nginx",
            "10.0.0.1:5000/a:1",
        ] {
            assert_eq!(refusal(&scope, image), None, "{image}");
        }
    }

    #[test]
    fn lookup_registries_limit_what_is_asked() {
        let scope = LookupScope::new(vec!["*.corp.example", "docker.io"], Some(&[])).unwrap();
        assert_eq!(refusal(&scope, "nginx:1"), None);
        assert_eq!(refusal(&scope, "registry.corp.example:5000/a:1"), None);
        assert_eq!(refusal(&scope, "registry.corp.example/a:1"), None);
        assert_eq!(
            refusal(&scope, "ghcr.io/org/a:1").as_deref(),
            Some("not looked up: registry ghcr.io is not in lookupRegistries")
        );
        assert!(refusal(&scope, "corp.example/a:1").is_some());
        let open = LookupScope::new(Vec::<String>::new(), Some(&[])).unwrap();
        assert_eq!(
            refusal(&open, "169.254.169.254/a:1"),
            None,
            "an empty deny list asks anything"
        );
    }

    #[test]
    fn bad_entries_name_their_field() {
        let error = LookupScope::new(vec!["ok.io", "a/b"], Some(&[])).unwrap_err();
        assert_eq!(error.field(), "lookupRegistries[1]");
        for bad in ["10.0.0.0", "10.0.0.0/33", "fe80::/129", "x/8", ""] {
            let error = LookupScope::new(Vec::<String>::new(), Some(&[bad.into()])).unwrap_err();
            assert_eq!(error.field(), "deniedLookupNetworks[0]", "{bad}");
        }
        assert!(LookupScope::new(Vec::<String>::new(), Some(&["0.0.0.0/0".into()])).is_ok());
    }

    #[test]
    fn networks_contain_their_addresses() {
        let net = Network::parse("169.254.0.0/16").unwrap();
        assert!(net.contains("169.254.1.2".parse().unwrap()));
        assert!(!net.contains("169.255.0.1".parse().unwrap()));
        assert!(!net.contains("fe80::1".parse().unwrap()));
        let all = Network::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        let v6 = Network::parse("fe80::/10").unwrap();
        assert!(v6.contains("febf::1".parse().unwrap()));
        assert!(!v6.contains("fec0::1".parse().unwrap()));
    }
}

//! Which registries the policy may ask. Any user who can create a Pod chooses the host its
//! image names, and a lookup is a request the policy server sends there: to a registry that
//! never answers (which wedges the stock policy server's lookups), to an internal service, or
//! to a cloud metadata endpoint. Operators list the registries worth asking
//! (`lookupRegistries`), and some addresses are never asked (`deniedLookupNetworks`).

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::vocabulary::failure::{Failure, FailureKind};
use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::globs::Glob;
use crate::vocabulary::reference::ImageReference;
use json_extent::{each_plain_string, each_plain_string_starting, has_string};

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

    /// [`Scope::refusal`] answered from the settings' text without compiling either list:
    /// `registries` is the text of `lookupRegistries` and `denied` that of
    /// `deniedLookupNetworks` (`None`: not written), both free of the Kubewarden UI's blanks.
    /// Only the entries that can concern `reference` are read: the networks of its address's
    /// family when its host is an address, the patterns starting with its registry's first
    /// byte or a wildcard. `None` when the text cannot answer (an escape, such an entry that
    /// does not parse): the compiled scope then answers, or names the entry. An entry of
    /// neither kind is not checked here; `validate_settings` refused it when the policy was
    /// loaded.
    pub fn refusal_from_text(
        reference: &ImageReference,
        registries: Option<&str>,
        denied: Option<&str>,
    ) -> Option<Option<Failure>> {
        let registry = reference.registry();
        let host = host_of(registry);
        if let Ok(ip) = host.parse::<IpAddr>() {
            let network = match denied {
                None => DEFAULT_DENIED.iter().copied().find(|n| n.contains(ip)),
                Some(text) => denying_network(text, ip)?,
            };
            if let Some(network) = network {
                return Some(Some(denied_failure(registry, network)));
            }
        }
        // not written, or an empty list: every registry
        let Some(text) = registries.filter(|text| text.contains('"')) else {
            return Some(None);
        };
        // an entry written as the registry or its host is a pattern matching it (unless the
        // registry's `[` would be read as a wildcard's), found without reading the others
        let written = |name: &str| has_string(text, name) == Some(true);
        if (!registry.contains('[') && written(registry)) || (host != registry && written(host)) {
            return Some(None);
        }
        let first = registry.as_bytes().first().copied()?;
        let host_first = host.as_bytes().first().copied()?;
        // a glob whose first byte is a literal other than the registry's or the host's matches
        // neither (they differ only for `[v6]:port`, whose `[` is also a wildcard's)
        let firsts = if first == b'[' {
            [first, host_first, b'*', b'?']
        } else {
            [first, b'*', b'?', b'[']
        };
        let (mut listed, mut unreadable) = (false, false);
        let complete = each_plain_string_starting(text, firsts, |pattern| {
            if listed || unreadable {
                return;
            }
            match compile_registry_pattern(pattern) {
                Ok(glob) => listed = glob.matches(registry) || glob.matches(host),
                Err(_) => unreadable = true,
            }
        });
        if !complete || unreadable {
            return None;
        }
        Some((!listed).then(|| not_listed_failure(registry)))
    }
}

/// Whether a location's registry may be asked: the compiled [`LookupScope`], or the settings
/// answering from the text the host sent when a request has not compiled it.
pub trait Scope: fmt::Debug {
    /// Why `reference`'s registry is not asked, or `None` when it may be.
    fn refusal(&self, reference: &ImageReference) -> Option<Failure>;
}

impl Scope for LookupScope<'_> {
    fn refusal(&self, reference: &ImageReference) -> Option<Failure> {
        let registry = reference.registry();
        let host = host_of(registry);
        if let Some(network) = host
            .parse::<IpAddr>()
            .ok()
            .and_then(|ip| self.denied.iter().find(|network| network.contains(ip)))
        {
            return Some(denied_failure(registry, *network));
        }
        let listed = self.registries.is_empty()
            || self
                .registries
                .iter()
                .any(|pattern| pattern.matches(registry) || pattern.matches(host));
        (!listed).then(|| not_listed_failure(registry))
    }
}

/// The first network of the list `text` holding `ip`, reading only the networks of its
/// family (an IPv4-mapped address counts as IPv4, as [`Network::contains`] says); `None` when
/// the text cannot answer (an escape, such a network that does not parse).
fn denying_network(text: &str, ip: IpAddr) -> Option<Option<Network>> {
    let v6 = matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none());
    let (mut found, mut unreadable) = (None, false);
    let complete = each_plain_string(text, |cidr| {
        if found.is_some() || unreadable || cidr.contains(':') != v6 {
            return;
        }
        match Network::parse(cidr) {
            Ok(network) => found = network.contains(ip).then_some(network),
            Err(_) => unreadable = true,
        }
    });
    (complete && !unreadable).then_some(found)
}

/// A lookup refused for its address.
fn denied_failure(registry: &str, network: Network) -> Failure {
    Failure::new(
        FailureKind::NotLookedUp,
        format!("not looked up: {registry} is in {network}, a network lookups are never sent to (deniedLookupNetworks; link-local addresses serve cloud metadata)"),
    )
}

/// A lookup refused for a registry `lookupRegistries` does not list.
fn not_listed_failure(registry: &str) -> Failure {
    Failure::new(
        FailureKind::NotLookedUp,
        format!("not looked up: registry {registry} is not in lookupRegistries"),
    )
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

    #[test]
    fn the_text_answers_as_the_compiled_scope() {
        let registries = [
            None,
            Some(r#"[]"#),
            Some(r#"["*.corp.example", "docker.io", "127.0.0.1:5000"]"#),
            Some(r#"["registry.corp.example:5000", "?uay.io", "[gq]hcr.io", "fe80::1"]"#),
            Some(r#"["r*", "[::1]:5000"]"#),
        ];
        let denied = [
            None,
            Some(r#"[]"#),
            Some(r#"["169.254.0.0/16", "fe80::/10", "127.0.0.0/8", "100.64.0.0/10"]"#),
            Some(r#"["::/0"]"#),
        ];
        let images = [
            "nginx",
            "quay.io/a/b:1",
            "ghcr.io/a:1",
            "registry.corp.example:5000/a:1",
            "registry.corp.example/a:1",
            "127.0.0.1:5000/a:1",
            "100.64.1.1/a:1",
            "169.254.169.254/a:1",
            "[fe80::1]:5000/a:1",
            "[::1]:5000/a:1",
            "[::ffff:7f00:1]:5000/a:1",
        ];
        for registries in registries {
            for denied in denied {
                let strings = |text: Option<&str>| -> Option<Vec<String>> {
                    text.map(|text| serde_json::from_str(text).unwrap())
                };
                let denied_list = strings(denied);
                let compiled = LookupScope::new(
                    strings(registries).unwrap_or_default(),
                    denied_list.as_deref(),
                )
                .unwrap();
                for image in images {
                    let reference = ImageReference::parse(image).unwrap();
                    let from_text = LookupScope::refusal_from_text(&reference, registries, denied)
                        .unwrap_or_else(|| panic!("{image} {registries:?} {denied:?}"));
                    assert_eq!(
                        from_text.map(|failure| failure.detail),
                        compiled.refusal(&reference).map(|failure| failure.detail),
                        "{image} {registries:?} {denied:?}"
                    );
                }
            }
        }
        // an entry that does not parse, or an escape, is left to the compiled scope
        let reference = ImageReference::parse("127.0.0.1:5000/a:1").unwrap();
        assert!(LookupScope::refusal_from_text(&reference, Some(r#"["1/2"]"#), None).is_none());
        assert!(LookupScope::refusal_from_text(&reference, None, Some(r#"["1.2.3/8"]"#)).is_none());
        assert!(LookupScope::refusal_from_text(&reference, Some(r#"["\u0031*"]"#), None).is_none());
    }
}

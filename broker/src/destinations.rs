//! Where the broker may send a request. A Pod author chooses the registry an image names, and
//! a registry chooses its token realm and redirects, so every destination is checked: by name
//! (the broker's own host, metadata names), by literal address, and at connect time by every
//! address a name resolves to (so a name that resolves to a refused address is refused, even
//! if it changes between the check and the connection).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Networks refused unless allowed (`--allow-destination`): loopback, link-local (cloud
/// metadata endpoints such as 169.254.169.254 live there), unspecified, carrier-grade NAT
/// (Alibaba's metadata at 100.100.100.200, and the pod ranges of some clusters), Azure's
/// platform address, IPv6 unique-local (AWS's metadata at fd00:ec2::254) and NAT64 (which
/// reaches any IPv4 address, refused ones included). The cluster's own pod and service ranges
/// differ per cluster: `--deny-destination` adds them (deploy/broker.yaml).
pub const DEFAULT_DENIED: [&str; 10] = [
    "127.0.0.0/8",
    "::1/128",
    "169.254.0.0/16",
    "fe80::/10",
    "0.0.0.0/8",
    "::/128",
    "100.64.0.0/10",
    "168.63.129.16/32",
    "fc00::/7",
    "64:ff9b::/96",
];

/// Host names of metadata services, refused whatever they resolve to.
const METADATA_NAMES: [&str; 2] = ["metadata.google.internal", "metadata"];

/// A `--deny-destination` or `--allow-destination` that is not an IP network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNetwork {
    /// The part before `/` is not an IP address.
    #[error("{0:?} is not an IP network")]
    NotAnAddress(String),
    /// The prefix length is not a number up to the address's bits.
    #[error("{0:?} has an invalid prefix length")]
    Prefix(String),
}

/// An IP network (`addr/prefix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    /// Parses `a.b.c.d/n` or `x::y/n` (an address alone is a single host).
    pub fn parse(text: &str) -> Result<Self, InvalidNetwork> {
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| InvalidNetwork::NotAnAddress(text.to_owned()))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| InvalidNetwork::Prefix(text.to_owned()))?,
            None => max,
        };
        Ok(Network { address, prefix })
    }

    /// True when `ip` is in the network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let (a, b, bits) = match (self.address, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (u32::from(n) as u128, u32::from(i) as u128, 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            _ => return false,
        };
        let shift = bits - u32::from(self.prefix);
        shift >= bits || (a >> shift) == (b >> shift)
    }
}

/// The destination rules of one broker.
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    denied: Vec<Network>,
    allowed: Vec<Network>,
    own_hosts: Vec<String>,
}

impl Destinations {
    /// `denied` networks except `allowed` ones; `own_hosts` are the broker's own names.
    pub fn new(denied: Vec<Network>, allowed: Vec<Network>, own_hosts: Vec<String>) -> Self {
        Destinations {
            denied,
            allowed,
            own_hosts,
        }
    }

    /// The broker's own names (`--own-host`): never asked, and the hosts a seal may name.
    pub fn own_hosts(&self) -> &[String] {
        &self.own_hosts
    }

    /// Why an address may not be connected to, or `None`.
    pub fn refuses_ip(&self, ip: IpAddr) -> Option<String> {
        if self.allowed.iter().any(|n| n.contains(ip)) {
            return None;
        }
        self.denied
            .iter()
            .any(|n| n.contains(ip))
            .then(|| format!("{ip} is in a refused network"))
    }

    /// Why a registry (`host[:port]`, as in an image) may not be asked, judged by its name
    /// and literal address; resolved names are checked by [`Destinations::resolver`].
    pub fn refuses_registry(&self, registry: &str) -> Option<String> {
        if self
            .own_hosts
            .iter()
            .any(|own| broker_reference::is_broker_host(registry, own))
        {
            return Some("the registry is the broker itself".into());
        }
        self.refuses_host(host_of(registry))
    }

    fn refuses_host(&self, host: &str) -> Option<String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let bare = bare.split('%').next().unwrap_or(bare);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.refuses_ip(ip);
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if METADATA_NAMES.contains(&name.as_str()) {
            return Some(format!("{name} is a metadata service"));
        }
        if name == "localhost" || name.ends_with(".localhost") {
            return self.refuses_ip(IpAddr::from([127, 0, 0, 1]));
        }
        None
    }

    /// Whether a URL the registry client is about to request may be.
    pub fn allows_url(&self, url: &reqwest::Url) -> bool {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.refuses_ip(IpAddr::V4(ip)).is_none(),
            Some(url::Host::Ipv6(ip)) => self.refuses_ip(IpAddr::V6(ip)).is_none(),
            Some(url::Host::Domain(name)) => {
                let authority = match url.port() {
                    Some(port) => format!("{name}:{port}"),
                    None => name.to_owned(),
                };
                self.refuses_registry(&authority).is_none()
            }
            None => false,
        }
    }

    /// A resolver that drops refused addresses, failing when none is left.
    pub fn resolver(self: &Arc<Self>) -> Arc<dyn reqwest::dns::Resolve> {
        Arc::new(GuardedResolver(self.clone()))
    }
}

/// The host part of `host[:port]` (IPv6 in brackets kept whole).
fn host_of(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry
            .split_once(']')
            .map_or(registry, |(h, _)| &registry[..=h.len()]);
    }
    registry.split(':').next().unwrap_or(registry)
}

struct GuardedResolver(Arc<Destinations>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rules = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            if let Some(reason) = rules.refuses_host(&host) {
                return Err(reason.into());
            }
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| rules.refuses_ip(a.ip()).is_none())
                .collect();
            if resolved.is_empty() {
                return Err(format!("{host} resolves only to refused addresses").into());
            }
            Ok(Box::new(resolved.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The default denied networks, parsed.
pub fn default_denied() -> Vec<Network> {
    DEFAULT_DENIED
        .iter()
        .filter_map(|n| Network::parse(n).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allowed: &[&str]) -> Destinations {
        Destinations::new(
            default_denied(),
            allowed
                .iter()
                .map(|n| Network::parse(n).expect("network"))
                .collect(),
            vec!["broker.kw.svc:8443".into()],
        )
    }

    #[test]
    fn networks_contain_what_they_should() {
        let n = Network::parse("10.0.0.0/8").expect("net");
        assert!(n.contains("10.1.2.3".parse().expect("ip")));
        assert!(!n.contains("11.0.0.1".parse().expect("ip")));
        assert!(n.contains("::ffff:10.0.0.1".parse().expect("ip")));
        assert!(Network::parse("::/0")
            .expect("net")
            .contains("fe80::1".parse().expect("ip")));
        assert!(Network::parse("0.0.0.0/0")
            .expect("net")
            .contains("1.2.3.4".parse().expect("ip")));
        for bad in ["10.0.0.0/33", "x/8", "::/129", ""] {
            assert!(Network::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refuses_loopback_link_local_metadata_and_itself_by_default() {
        let r = rules(&[]);
        for registry in [
            "127.0.0.1:5000",
            "[::1]:5000",
            "169.254.169.254",
            "[fe80::1%25eth0]:80",
            "localhost:5000",
            "metadata.google.internal",
            "Metadata.Google.Internal.",
            "broker.kw.svc:8443",
            "BROKER.kw.svc:8443",
            "broker.kw.svc.:8443",
            "[::ffff:127.0.0.1]:5000",
            "0.0.0.0:5000",
            "100.100.100.200",
            "100.64.0.1:5000",
            "168.63.129.16",
            "[fd00:ec2::254]",
            "[fd12:3456::1]:5000",
            "[64:ff9b::a9fe:a9fe]",
        ] {
            assert!(r.refuses_registry(registry).is_some(), "{registry}");
        }
        for registry in [
            "registry.example:5000",
            "10.0.0.1:5000",
            "docker.io",
            "[2001:db8::1]:443",
        ] {
            assert_eq!(r.refuses_registry(registry), None, "{registry}");
        }
    }

    #[test]
    fn allowed_networks_win_for_tests() {
        let r = rules(&["127.0.0.0/8"]);
        assert_eq!(r.refuses_registry("127.0.0.1:5000"), None);
        assert_eq!(r.refuses_registry("localhost:5000"), None);
        assert!(r.refuses_registry("169.254.169.254").is_some());
        assert!(r.refuses_registry("broker.kw.svc:8443").is_some());
    }

    #[test]
    fn urls_are_checked_by_literal_address_and_name() {
        let r = rules(&[]);
        let url = |u: &str| reqwest::Url::parse(u).expect("url");
        assert!(!r.allows_url(&url("http://169.254.169.254/token")));
        assert!(!r.allows_url(&url("http://[::1]:5000/v2/")));
        assert!(!r.allows_url(&url("https://broker.kw.svc:8443/v2/")));
        assert!(!r.allows_url(&url("http://100.100.100.200/latest/meta-data/")));
        assert!(!r.allows_url(&url("http://[64:ff9b::7f00:1]/")));
        assert!(r.allows_url(&url("https://auth.example/token")));
    }

    #[test]
    fn the_clusters_own_ranges_can_be_added() {
        let mut denied = default_denied();
        denied.push(Network::parse("10.96.0.0/12").expect("net"));
        let r = Destinations::new(denied, Vec::new(), Vec::new());
        assert!(r.refuses_registry("10.96.0.10:5000").is_some());
        assert_eq!(r.refuses_registry("10.244.0.5:5000"), None);
    }
}

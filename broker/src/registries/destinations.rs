//! Where the broker may send a request. A Pod author chooses the registry an image names, and
//! a registry chooses its token realm and redirects, so every destination is checked: by name
//! (the broker's own host, metadata names), by literal address, and at connect time by every
//! address a name resolves to (so a name that resolves to a refused address is refused, even
//! if it changes between the check and the connection).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Networks refused unless allowed (`--allow-destination`, or a registry allowed by name with
/// `--allow-registry`): loopback, link-local (cloud metadata endpoints such as 169.254.169.254
/// live there), unspecified and "this network", the private ranges of RFC 1918 (a tenant who
/// writes a pull secret for an internal host must not learn which hosts and ports answer),
/// carrier-grade NAT (Alibaba's metadata at 100.100.100.200, and the pod ranges of some
/// clusters), the IETF protocol and benchmarking ranges, multicast and broadcast, Azure's
/// platform address, IPv4-compatible IPv6, IPv6 unique-local (AWS's metadata at fd00:ec2::254)
/// and site-local, and NAT64 (which reaches any IPv4 address, refused ones included). The
/// cluster's own pod and service ranges, when public, are added with `--deny-destination`
/// (deploy/broker.yaml).
pub const DEFAULT_DENIED: [&str; 23] = [
    "127.0.0.0/8",
    "::1/128",
    "169.254.0.0/16",
    "fe80::/10",
    "0.0.0.0/8",
    "::/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "192.0.0.0/24",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "168.63.129.16/32",
    "::/96",
    "fc00::/7",
    "fec0::/10",
    "ff00::/8",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "2001:db8::/32",
    "100::/64",
];

/// Host names of metadata services, refused whatever they resolve to.
const METADATA_NAMES: [&str; 4] = [
    "metadata.google.internal",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

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

/// An `--allow-registry` that is not `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a registry host[:port]")]
pub struct InvalidRegistryName(pub String);

/// A registry allowed by name (`--allow-registry host[:port]`): the operator vouches for
/// that name, so it is asked whatever it resolves to (an internal mirror on a private
/// address). With a port, only that port (an image without one is port 443); without,
/// any port of that name. Its token realms and redirects are held to the same rules: a realm
/// on another name is judged on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedRegistry {
    /// The host, lower case, without a trailing dot (IPv6 in brackets).
    host: String,
    /// The only port allowed, `None` for any.
    port: Option<u16>,
}

impl AllowedRegistry {
    /// Parses `host[:port]` (`[v6]:port` for an IPv6 address).
    pub fn parse(text: &str) -> Result<Self, InvalidRegistryName> {
        let invalid = || InvalidRegistryName(text.to_owned());
        let host = host_of(text);
        let port = match &text[host.len()..] {
            "" => None,
            rest => Some(
                rest.strip_prefix(':')
                    .and_then(|p| p.parse::<u16>().ok())
                    .ok_or_else(invalid)?,
            ),
        };
        let host = normal_host(host);
        let plain = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
        if host.is_empty() || !plain {
            return Err(invalid());
        }
        Ok(AllowedRegistry { host, port })
    }

    /// Whether `host` (any spelling) on `port` (`None`: the image named none) is this one.
    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        normal_host(host) == self.host
            && self
                .port
                .is_none_or(|allowed| port.unwrap_or(443) == allowed)
    }
}

/// A host as the allow-list compares it: lower case, no trailing dot.
fn normal_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
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
    allowed_registries: Vec<AllowedRegistry>,
    own_hosts: Vec<String>,
}

impl Destinations {
    /// `denied` networks except `allowed` ones; `own_hosts` are the broker's own names.
    pub fn new(denied: Vec<Network>, allowed: Vec<Network>, own_hosts: Vec<String>) -> Self {
        Destinations {
            denied,
            allowed,
            allowed_registries: Vec::new(),
            own_hosts,
        }
    }

    /// The broker's own names (`--own-host`): never asked, and the hosts a seal may name.
    pub fn own_hosts(&self) -> &[String] {
        &self.own_hosts
    }

    /// These rules, with `registries` asked whatever their names resolve to.
    pub fn allowing_registries(mut self, registries: Vec<AllowedRegistry>) -> Self {
        self.allowed_registries = registries;
        self
    }

    /// Whether `host` on `port` is allowed by name (`--allow-registry`).
    fn allowed_by_name(&self, host: &str, port: Option<u16>) -> bool {
        self.allowed_registries
            .iter()
            .any(|allowed| allowed.matches(host, port))
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
        let host = host_of(registry);
        let port = registry[host.len()..]
            .strip_prefix(':')
            .and_then(|p| p.parse().ok());
        if self.allowed_by_name(host, port) {
            return None;
        }
        if self
            .allowed_registries
            .iter()
            .any(|allowed| normal_host(host) == allowed.host)
        {
            // the resolver lets the name reach any address: its other ports stay closed
            return Some(format!("{host} is allowed on another port only"));
        }
        self.refuses_host(host)
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
        if let Some(host) = url.host_str() {
            let own = self
                .own_hosts
                .iter()
                .any(|own| broker_reference::is_broker_host(&authority(url, host), own));
            if !own && self.allowed_by_name(host, url.port_or_known_default()) {
                return true;
            }
        }
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.refuses_ip(IpAddr::V4(ip)).is_none(),
            Some(url::Host::Ipv6(ip)) => self.refuses_ip(IpAddr::V6(ip)).is_none(),
            Some(url::Host::Domain(name)) => self.refuses_registry(&authority(url, name)).is_none(),
            None => false,
        }
    }

    /// A resolver that drops refused addresses, failing when none is left.
    pub fn resolver(self: &Arc<Self>) -> Arc<dyn reqwest::dns::Resolve> {
        Arc::new(GuardedResolver(self.clone()))
    }
}

/// `host[:port]` of a URL, the port only when the URL spells it.
fn authority(url: &reqwest::Url, host: &str) -> String {
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
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
            // a name allowed on some port: the port is checked per URL (allows_url)
            let by_name = rules
                .allowed_registries
                .iter()
                .any(|allowed| normal_host(&host) == allowed.host);
            if !by_name {
                if let Some(reason) = rules.refuses_host(&host) {
                    return Err(reason.into());
                }
            }
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| by_name || rules.refuses_ip(a.ip()).is_none())
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
            "8.8.8.8:5000",
            "docker.io",
            "[2606:4700::1111]:443",
        ] {
            assert_eq!(r.refuses_registry(registry), None, "{registry}");
        }
    }

    /// Every default range, by an address inside it and one just outside (the check is on
    /// the address alone: nothing is resolved, nothing connected to).
    #[test]
    fn every_default_range_is_refused_and_its_neighbours_are_not() {
        let r = rules(&[]);
        let cases = [
            ("loopback", "127.0.0.9", "128.0.0.1"),
            ("IPv6 loopback", "::1", "::2:0:0"),
            ("link-local", "169.254.169.254", "169.255.0.1"),
            ("IPv6 link-local", "fe80::1", "fe7f::1"),
            ("this network", "0.1.2.3", "1.0.0.1"),
            ("unspecified", "::", "2a00::"),
            ("private 10/8", "10.96.0.10", "11.0.0.1"),
            ("private 172.16/12", "172.31.255.254", "172.32.0.1"),
            ("private 172.16/12, low end", "172.16.0.1", "172.15.255.254"),
            ("private 192.168/16", "192.168.1.1", "192.169.0.1"),
            ("carrier-grade NAT", "100.100.100.200", "100.128.0.1"),
            ("IETF protocol assignments", "192.0.0.170", "192.0.1.1"),
            ("benchmarking", "198.19.0.1", "198.20.0.1"),
            ("multicast", "239.255.255.250", "223.255.255.254"),
            ("reserved and broadcast", "255.255.255.255", "223.1.1.1"),
            ("Azure platform", "168.63.129.16", "168.63.129.17"),
            ("IPv4-compatible IPv6", "::10.0.0.1", "1::10.0.0.1"),
            ("unique-local", "fd00:ec2::254", "fe00::1"),
            ("site-local", "fec0::1", "2001:4860::2"),
            ("IPv6 multicast", "ff02::1", "2001:4860::1"),
            ("NAT64", "64:ff9b::a9fe:a9fe", "64:ff9c::1"),
            ("local NAT64", "64:ff9b:1::a00:1", "64:ff9b:2::1"),
            ("documentation", "2001:db8::1", "2001:db9::1"),
            ("discard", "100::1", "100:0:0:1::1"),
            (
                "IPv4-mapped private",
                "::ffff:192.168.0.1",
                "::ffff:8.8.8.8",
            ),
        ];
        for (range, inside, outside) in cases {
            let ip = |text: &str| text.parse::<IpAddr>().expect(range);
            assert!(r.refuses_ip(ip(inside)).is_some(), "{range}: {inside}");
            assert_eq!(r.refuses_ip(ip(outside)), None, "{range}: {outside}");
        }
        assert_eq!(default_denied().len(), DEFAULT_DENIED.len());
    }

    #[test]
    fn metadata_names_are_refused_by_name() {
        let r = rules(&[]);
        for name in [
            "metadata",
            "metadata.google.internal:80",
            "instance-data",
            "INSTANCE-DATA.ec2.internal.",
        ] {
            assert!(r.refuses_registry(name).is_some(), "{name}");
        }
    }

    #[test]
    fn a_registry_allowed_by_name_is_asked_whatever_it_resolves_to_on_its_port_only() {
        let allowed = ["registry.internal:5000", "mirror.internal", "10.1.2.3:443"]
            .iter()
            .map(|text| AllowedRegistry::parse(text).expect("allowed"))
            .collect();
        let r = rules(&[]).allowing_registries(allowed);
        for registry in [
            "registry.internal:5000",
            "Registry.Internal.:5000",
            "mirror.internal",
            "mirror.internal:8443",
            "10.1.2.3",
            "10.1.2.3:443",
        ] {
            assert_eq!(r.refuses_registry(registry), None, "{registry}");
        }
        for registry in [
            "registry.internal",
            "registry.internal:22",
            "10.1.2.3:22",
            "10.1.2.4",
        ] {
            assert!(r.refuses_registry(registry).is_some(), "{registry}");
        }
        let url = |u: &str| reqwest::Url::parse(u).expect("url");
        assert!(r.allows_url(&url("http://registry.internal:5000/v2/")));
        assert!(r.allows_url(&url("https://mirror.internal/token")));
        assert!(r.allows_url(&url("https://10.1.2.3/v2/")));
        assert!(!r.allows_url(&url("http://registry.internal:6379/")));
        assert!(!r.allows_url(&url("https://registry.internal/token")));
        // a realm on an address of its own is judged on its own
        assert!(!r.allows_url(&url("http://10.1.2.4/token")));
        assert!(!r.allows_url(&url("http://127.0.0.1:5000/token")));
    }

    #[test]
    fn the_broker_itself_stays_refused_even_when_allowed_by_name() {
        let allowed = vec![AllowedRegistry::parse("broker.kw.svc").expect("allowed")];
        let r = rules(&[]).allowing_registries(allowed);
        assert!(r.refuses_registry("broker.kw.svc:8443").is_some());
        let url = reqwest::Url::parse("https://broker.kw.svc:8443/v2/").expect("url");
        assert!(!r.allows_url(&url));
    }

    #[test]
    fn allowed_registry_names_are_host_and_port_only() {
        for bad in [
            "",
            "reg:",
            "reg:port",
            "reg:70000",
            "reg/path",
            "user@reg",
            "reg:1:2",
        ] {
            assert!(AllowedRegistry::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            AllowedRegistry::parse("[fd00::5]:5000").expect("v6"),
            AllowedRegistry {
                host: "[fd00::5]".into(),
                port: Some(5000)
            }
        );
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
        denied.push(Network::parse("203.0.113.0/24").expect("net"));
        let r = Destinations::new(denied, Vec::new(), Vec::new());
        assert!(r.refuses_registry("203.0.113.10:5000").is_some());
        assert_eq!(r.refuses_registry("203.0.114.5:5000"), None);
    }
}

//! The `lookupBroker` setting, apart from the rewrite it drives (`broker`), so that settings
//! can parse it without depending on the lookup step.

use serde::Deserialize;

/// Which lookups go through the broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BrokerUse {
    /// Only lookups the pod's pull secrets cover (the others are the policy server's own).
    #[default]
    Credentialed,
    /// Every lookup of an image of a pod (bounded time-outs for every registry).
    All,
}

/// Where the key that seals brokered names is: a Secret only this policy is granted to read
/// (`contextAwareResources`), so that no other module on the policy server can write a name
/// the broker answers (docs/broker.md, "Threat model").
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeySecret {
    /// The Secret's namespace (the broker's, usually `kubewarden`).
    pub namespace: String,
    /// The Secret's name; its `data.key` is the key (at least 32 bytes).
    pub name: String,
}

/// The `lookupBroker` setting.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokerSettings {
    /// The broker's `host[:port]`, as in the policy server's `imagePullSecret` entry.
    pub host: String,
    /// The Secret holding the key shared with the broker.
    pub key_secret: KeySecret,
    /// Which lookups go through it.
    #[serde(default, rename = "use")]
    pub usage: BrokerUse,
}

impl BrokerSettings {
    /// Why the setting cannot work, as the field at fault and the problem, or `None`.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if !broker_reference::is_valid_broker_host(&self.host) {
            return Some((
                "lookupBroker.host",
                format!(
                    "{:?} is not a lowercase host name or IPv4 address with an optional port",
                    self.host
                ),
            ));
        }
        let KeySecret { namespace, name } = &self.key_secret;
        if !broker_reference::is_dns_label(namespace) {
            return Some((
                "lookupBroker.keySecret.namespace",
                format!("{namespace:?} is not a namespace name"),
            ));
        }
        if !broker_reference::is_dns_subdomain(name) {
            return Some((
                "lookupBroker.keySecret.name",
                format!("{name:?} is not a Secret name"),
            ));
        }
        None
    }
}

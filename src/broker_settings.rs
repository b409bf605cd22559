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

/// The `lookupBroker` setting.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokerSettings {
    /// The broker's `host[:port]`, as in the policy server's `imagePullSecret` entry.
    pub host: String,
    /// Which lookups go through it.
    #[serde(default, rename = "use")]
    pub usage: BrokerUse,
}

impl BrokerSettings {
    /// Why the setting cannot work, or `None`.
    pub fn problem(&self) -> Option<String> {
        (!broker_reference::is_valid_broker_host(&self.host)).then(|| {
            format!(
                "{:?} is not a lowercase host name or IPv4 address with an optional port",
                self.host
            )
        })
    }
}

//! The `lookupBroker` setting, apart from the rewrite it drives (`lookup::broker`), so that
//! settings can parse it without depending on the lookup step.

use serde::Deserialize;

use json_extent::Scanner;

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

impl BrokerUse {
    /// The value as written in the settings.
    fn from_text(text: &str) -> Option<Self> {
        match text {
            "credentialed" => Some(BrokerUse::Credentialed),
            "all" => Some(BrokerUse::All),
            _ => None,
        }
    }
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

impl KeySecret {
    /// The object at `scanner`, read as [`BrokerSettings::from_text`] reads the setting.
    fn from_scanner(scanner: &mut Scanner<'_>) -> Option<Self> {
        let (mut namespace, mut name) = (None, None);
        scanner.enter_object().ok()?;
        let mut first = true;
        while let Some(key) = scanner.next_key(std::mem::take(&mut first)).ok()? {
            let slot = match key {
                "namespace" => &mut namespace,
                "name" => &mut name,
                _ => return None,
            };
            if slot.replace(scanner.string().ok()?.into_owned()).is_some() {
                return None;
            }
        }
        Some(KeySecret {
            namespace: namespace?,
            name: name?,
        })
    }
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
    /// The setting read from its JSON text as the host wrote it, without serde (a request reads
    /// it on every evaluation); `None` for anything but the plain form (an unknown or repeated
    /// field, an escape in a name, a value of another type), which serde then reads or
    /// explains.
    pub fn from_text(text: &str) -> Option<Self> {
        let mut scanner = Scanner::new(text);
        let (mut host, mut key_secret, mut usage) = (None, None, None);
        scanner.enter_object().ok()?;
        let mut first = true;
        while let Some(key) = scanner.next_key(std::mem::take(&mut first)).ok()? {
            let slot_taken = match key {
                "host" => host.replace(scanner.string().ok()?.into_owned()).is_some(),
                "use" => usage
                    .replace(BrokerUse::from_text(&scanner.string().ok()?)?)
                    .is_some(),
                "keySecret" => key_secret
                    .replace(KeySecret::from_scanner(&mut scanner)?)
                    .is_some(),
                _ => return None,
            };
            if slot_taken {
                return None;
            }
        }
        scanner.at_end().then_some(BrokerSettings {
            host: host?,
            key_secret: key_secret?,
            usage: usage.unwrap_or_default(),
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_reads_as_serde_reads_or_not_at_all() {
        let key = r#""keySecret": {"namespace": "kubewarden", "name": "k"}"#;
        let read = [
            format!(r#"{{"host": "b.svc:8443", {key}, "use": "all"}}"#),
            format!(r#"{{ "use" : "credentialed" , {key} , "host" : "b.svc" }}"#),
            format!(r#"{{"host": "b.svc", {key}}}"#),
        ];
        for text in read {
            let serde: BrokerSettings = serde_json::from_str(&text).unwrap();
            assert_eq!(BrokerSettings::from_text(&text), Some(serde), "{text}");
        }
        // what serde refuses, or reads with an escape, is left to serde
        let left = [
            format!(r#"{{"host": "b.svc", {key}, "extra": 1}}"#),
            format!(r#"{{"host": "b.svc", "host": "c.svc", {key}}}"#),
            format!(r#"{{"host": "b.svc", {key}, "use": "some"}}"#),
            format!(r#"{{"host": 1, {key}}}"#),
            format!(r#"{{{key}}}"#),
            r#"{"host": "b.svc", "keySecret": {"namespace": "n"}}"#.to_owned(),
            r#"{"host": "b.svc", "keySecret": {"namespace": "n", "name": "k", "x": ""}}"#
                .to_owned(),
            format!(r#"{{"h\u006fst": "b.svc", {key}}}"#),
            format!(r#"{{"host": "b.svc", {key}}} trailing"#),
            "[]".to_owned(),
        ];
        for text in left {
            assert_eq!(BrokerSettings::from_text(&text), None, "{text}");
        }
        // an escape in a value is decoded
        let escaped = format!(r#"{{"host": "b.sv\u0063", {key}}}"#);
        let read = BrokerSettings::from_text(&escaped).unwrap();
        assert_eq!(read.host, "b.svc");
    }
}

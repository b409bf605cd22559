//! The `mirrors` of the CRI plugin's `registry` table in containerd's `config.toml`: the
//! containerd 1.x way, deprecated in 2.x and refused beside `config_path`
//! (`ValidateImageConfig` in internal/cri/config/config.go). For a registry, the endpoints of
//! its own entry, or of `"*"`, are asked in order, then the registry itself unless an
//! endpoint is that host (`registryEndpoints` in internal/cri/server/images/image_pull.go);
//! every endpoint resolves tags and pulls digests, and its URL path is the API root as
//! written (`/v2` when there is none).

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::rules::{line_of, Mirror, Refusal, Rule, Translation, Where};

/// The CRI plugin's registry table in a version 2 and a version 3 `config.toml`.
const PLUGINS: [(i64, &str); 2] = [
    (2, "io.containerd.grpc.v1.cri"),
    (3, "io.containerd.cri.v1.images"),
];

/// The entry for every registry without one of its own.
const ANY_REGISTRY: &str = "*";

type Value<'i> = Spanned<DeValue<'i>>;

/// The rules for the `mirrors` of `text`, the `config.toml` at `file`; `"*"` is written out
/// for each of `default_for`.
pub fn translate(file: &str, text: &str, default_for: &[String]) -> Result<Translation, Refusal> {
    let document = DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        Refusal::at_offset(file, text, offset, e.message().to_owned())
    })?;
    let refuse = |offset: usize, problem: String| Refusal::at_offset(file, text, offset, problem);
    let root = document.get_ref();
    let version = match root.get("version").map(|v| v.get_ref()) {
        Some(DeValue::Integer(version)) => version.as_str().parse::<i64>().unwrap_or(0),
        _ => 1,
    };
    let Some((_, plugin)) = PLUGINS.iter().find(|(v, _)| *v == version) else {
        return Err(refuse(
            0,
            format!("config.toml version {version}: versions 2 and 3 are read"),
        ));
    };
    let registry = table(root, "plugins")
        .and_then(|plugins| table(plugins, plugin))
        .and_then(|cri| table(cri, "registry"));
    let Some(registry) = registry else {
        return Ok(Translation::default());
    };
    for (key, value) in registry {
        match key.get_ref().as_ref() {
            "mirrors" | "config_path" => {}
            "configs" => check_configs(file, text, value)?,
            other => {
                return Err(refuse(key.span().start, format!(
                    "`{other}` (which may carry credentials) is the node's alone: the policy's lookups never send it"
                )))
            }
        }
    }
    let entries = mirror_entries(file, text, registry)?;
    let config_path = registry
        .iter()
        .find(|(key, _)| key.get_ref().as_ref() == "config_path");
    if let Some((key, value)) = config_path {
        let written = value.get_ref().as_str().unwrap_or_default();
        if !written.is_empty() {
            let problem = if entries.is_empty() {
                format!("`config_path` is {written:?}: translate those directories with `certs-d`")
            } else {
                "`mirrors` beside `config_path`: the CRI plugin refuses this configuration, and the node pulls no image at all".to_owned()
            };
            return Err(refuse(key.span().start, problem));
        }
    }
    rules(file, &entries, default_for)
}

/// `name`'s table in `table`, if it is one.
fn table<'a, 'i>(table: &'a DeTable<'i>, name: &str) -> Option<&'a DeTable<'i>> {
    table
        .iter()
        .find(|(key, _)| key.get_ref().as_ref() == name)
        .and_then(|(_, value)| match value.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => None,
        })
}

/// `configs."<host>"`: `tls` is the node's transport; `auth` carries credentials.
fn check_configs(file: &str, text: &str, value: &Value<'_>) -> Result<(), Refusal> {
    let DeValue::Table(hosts) = value.get_ref() else {
        return Ok(());
    };
    for (_, host) in hosts {
        let DeValue::Table(fields) = host.get_ref() else {
            continue;
        };
        for (field, _) in fields {
            if field.get_ref().as_ref() != "tls" {
                return Err(Refusal::at_offset(file, text, field.span().start, format!(
                    "`{}` (credentials; values not shown) is the node's alone: the policy's lookups never send it",
                    field.get_ref()
                )));
            }
        }
    }
    Ok(())
}

/// Each `mirrors."<registry>".endpoint`, with its line.
fn mirror_entries(
    file: &str,
    text: &str,
    registry: &DeTable<'_>,
) -> Result<BTreeMap<String, (usize, Vec<String>)>, Refusal> {
    let mut entries = BTreeMap::new();
    let Some(mirrors) = table(registry, "mirrors") else {
        return Ok(entries);
    };
    for (name, entry) in mirrors {
        let line = line_of(text, name.span().start);
        let mistyped = || Refusal {
            file: file.to_owned(),
            at: Where::Line(line),
            problem: "a mirror entry is `endpoint = [\"https://…\", …]`".into(),
        };
        let DeValue::Table(fields) = entry.get_ref() else {
            return Err(mistyped());
        };
        let mut endpoints = Vec::new();
        for (field, value) in fields {
            let DeValue::Array(items) = value.get_ref() else {
                return Err(mistyped());
            };
            if field.get_ref().as_ref() != "endpoint" {
                return Err(mistyped());
            }
            for item in items.iter() {
                endpoints.push(item.get_ref().as_str().ok_or_else(mistyped)?.to_owned());
            }
        }
        entries.insert(name.get_ref().to_string(), (line, endpoints));
    }
    Ok(entries)
}

/// A rule per registry entry, and per registry of `default_for` from `"*"`.
fn rules(
    file: &str,
    entries: &BTreeMap<String, (usize, Vec<String>)>,
    default_for: &[String],
) -> Result<Translation, Refusal> {
    let mut translation = Translation::default();
    let any = entries.get(ANY_REGISTRY);
    if let (Some((line, _)), true) = (any, default_for.is_empty()) {
        return Err(Refusal {
            file: file.to_owned(),
            at: Where::Line(*line),
            problem: "`\"*\"` applies to every registry without an entry of its own, and the policy's rules name registries: pass --default-for REGISTRY for each registry the cluster pulls from".into(),
        });
    }
    let mut registries: Vec<(&str, &(usize, Vec<String>))> = entries
        .iter()
        .filter(|(name, _)| name.as_str() != ANY_REGISTRY)
        .map(|(name, entry)| (name.as_str(), entry))
        .collect();
    if let Some(any) = any {
        for registry in default_for {
            if !entries.contains_key(registry) {
                registries.push((registry.as_str(), any));
            }
        }
    }
    for (registry, (line, endpoints)) in registries {
        let refuse = |problem: String| Refusal {
            file: file.to_owned(),
            at: Where::Line(*line),
            problem,
        };
        let mut mirrors = Vec::new();
        let mut source_listed = false;
        for endpoint in endpoints {
            if source_listed {
                return Err(refuse(format!(
                    "{registry} is asked before {:?}: the policy asks a registry after its mirrors",
                    without_credentials(endpoint)
                )));
            }
            let (location, insecure) =
                endpoint_location(endpoint).map_err(|p| refuse(p.to_string()))?;
            if location == registry
                || (registry == "docker.io" && location == "registry-1.docker.io")
            {
                source_listed = true;
                continue;
            }
            mirrors.push(Mirror {
                location,
                insecure,
                pull_from_mirror: Default::default(),
            });
        }
        if !mirrors.is_empty() {
            translation.rules.push(Rule {
                prefix: registry.to_owned(),
                location: None,
                blocked: false,
                mirrors,
            });
        }
    }
    Ok(translation.sorted())
}

/// Why an endpoint of the legacy `mirrors` table has no location the policy can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum EndpointProblem {
    /// It does not parse (quoted without any `user:password@`).
    #[error("{endpoint:?} is not a URL: {source}")]
    NotAUrl {
        /// The endpoint, credentials cut.
        endpoint: String,
        /// Why.
        source: url::ParseError,
    },
    /// It carries credentials, which the policy never sends.
    #[error("an endpoint carries credentials (not shown): the policy never sends them")]
    Credentials,
    /// It has no host.
    #[error("{0:?} has no host")]
    NoHost(String),
    /// Its path is an API root other than `/v2`.
    #[error("containerd asks {authority}{root}/<repository>/…, an API root the policy cannot address (it asks {authority}/v2/…)")]
    ApiRoot {
        /// Its host and port.
        authority: String,
        /// Its path.
        root: String,
    },
}

/// `endpoint` without what comes before an `@` (credentials, which are never shown).
fn without_credentials(endpoint: &str) -> String {
    match endpoint.rsplit_once('@') {
        Some((_, rest)) => format!("<credentials>@{rest}"),
        None => endpoint.to_owned(),
    }
}

/// An endpoint as the policy's location: its path is the API root as written, which must be
/// `/v2` or start with `/v2/`.
fn endpoint_location(endpoint: &str) -> Result<(String, bool), EndpointProblem> {
    let with_scheme = if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("https://{endpoint}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|source| EndpointProblem::NotAUrl {
        endpoint: without_credentials(endpoint),
        source,
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EndpointProblem::Credentials);
    }
    let host = url
        .host_str()
        .ok_or_else(|| EndpointProblem::NoHost(endpoint.to_owned()))?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let raw_path = with_scheme
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    let root = if raw_path.is_empty() { "/v2" } else { raw_path };
    match root.strip_prefix("/v2") {
        Some(path) if path.is_empty() || (path.starts_with('/') && !path.ends_with('/')) => {
            Ok((format!("{authority}{path}"), url.scheme() == "http"))
        }
        _ => Err(EndpointProblem::ApiRoot {
            authority,
            root: root.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_refused_by_kind_without_its_credentials() {
        let bad_port = endpoint_location("https://user:s3cret-Pw@mirror.test:99999");
        let Err(error @ EndpointProblem::NotAUrl { .. }) = bad_port else {
            panic!("an endpoint with a bad port was accepted: {bad_port:?}");
        };
        assert!(!error.to_string().contains("s3cret"), "{error}");
        assert_eq!(
            endpoint_location("https://user:s3cret-Pw@mirror.test"),
            Err(EndpointProblem::Credentials)
        );
        assert!(matches!(
            endpoint_location("mirror.test/api"),
            Err(EndpointProblem::ApiRoot { .. })
        ));
        assert_eq!(
            endpoint_location("http://mirror.test:5000/v2"),
            Ok(("mirror.test:5000".to_owned(), true))
        );
    }
}

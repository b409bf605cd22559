//! containerd 2's registry hosts: the `certs.d` directories that `config_path` lists, as
//! the CRI plugin finds and reads them (`hostDirFromRoots` in
//! internal/cri/server/images/image_pull.go, `HostDirFromRoot` and `ConfigureHosts` in
//! core/remotes/docker/config).
//!
//! For a registry `host[:port]`, each directory of `config_path` in turn is searched for
//! `host_port_`, then `host:port` (or `host`), then `_default`; the first found is the
//! registry's, even a `_default` of an earlier directory before the registry's own directory
//! in a later one. Its `hosts.toml` lists the hosts tried in order, then `server` (by default
//! the registry itself, `registry-1.docker.io` for `docker.io`). A tag is resolved by the hosts
//! with both `pull` and `resolve`, a digest by those with `pull`
//! (`dockerResolver.Resolve` in core/remotes/docker/resolver.go).

pub mod hosts_file;
pub mod legacy_mirrors;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::registries_conf::blocked_location;
use crate::rules::{Mirror, PullFromMirror, Refusal, Rule, Translation, Where};
use hosts_file::{Endpoint, HostsFile};

/// The directory that applies to every registry without a directory of its own.
const DEFAULT_DIRECTORY: &str = "_default";

/// The rules for the registries of `roots` (in `config_path`'s order), and for each of
/// `default_for`, which `_default` directories may cover.
pub fn translate(roots: &[PathBuf], default_for: &[String]) -> Result<Translation, Refusal> {
    let mut registries: BTreeSet<String> = default_for.iter().cloned().collect();
    let mut has_default = None;
    for root in roots {
        for name in directories(root)? {
            if name == DEFAULT_DIRECTORY {
                let hosts = root.join(&name).join("hosts.toml");
                if hosts.exists() && has_default.is_none() {
                    has_default = Some(hosts);
                }
            } else {
                registries.insert(registry_of_directory(&name));
            }
        }
    }
    if let (Some(hosts), true) = (has_default, default_for.is_empty()) {
        return Err(Refusal {
            file: hosts.display().to_string(),
            at: Where::File,
            problem: "`_default` applies to every registry without a directory of its own, and the policy's rules name registries: pass --default-for REGISTRY for each registry the cluster pulls from".into(),
        });
    }
    let mut translation = Translation::default();
    for registry in &registries {
        let Some(directory) = host_directory(roots, registry) else {
            continue;
        };
        if let Some(rule) = registry_rule(registry, &directory, &mut translation.notes)? {
            if !rule.prefix.contains(':') {
                // the policy's literal prefix also covers the host on any port
                translation.notes.push(format!(
                    "{}: the policy applies this rule to {registry}:<port> too, where containerd reads {registry}_<port>_ or _default",
                    directory.display()
                ));
            }
            translation.rules.push(rule);
        }
    }
    unblock_contacted(&mut translation);
    Ok(translation.sorted())
}

/// containerd has no `blocked`: it asks every host of a registry's `hosts.toml`, whatever
/// other directory names it. The policy refuses a location a blocked rule covers, so a rule
/// whose prefix covers a location containerd asks is left unblocked (noted): the policy may
/// then admit an image of that registry the node would not find, never reject one it pulls.
fn unblock_contacted(translation: &mut Translation) {
    while let Some(location) = blocked_location(&translation.rules) {
        let covering = translation
            .rules
            .iter_mut()
            .filter(|rule| rule.blocked && covers(&rule.prefix, &location))
            .max_by_key(|rule| rule.prefix.len());
        let Some(rule) = covering else {
            return;
        };
        rule.blocked = false;
        translation.notes.push(format!(
            "{}: written without `blocked`, since containerd asks {location:?}, which it covers; the policy also asks {} itself",
            rule.prefix, rule.prefix
        ));
    }
}

/// Whether `prefix` covers `location` or a name under it.
fn covers(prefix: &str, location: &str) -> bool {
    let under = |longer: &str, shorter: &str| {
        longer
            .strip_prefix(shorter)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', ':']))
    };
    under(location, prefix) || under(prefix, location)
}

/// The subdirectories of `root`, by name, sorted.
fn directories(root: &Path) -> Result<Vec<String>, Refusal> {
    let unreadable = |e: std::io::Error| Refusal {
        file: root.display().to_string(),
        at: Where::File,
        problem: format!("cannot read the directory: {e}"),
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(root).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// `host_port_` names `host:port`; any other name is the registry as written.
fn registry_of_directory(name: &str) -> String {
    if let Some((host, port)) = name
        .strip_suffix('_')
        .and_then(|rest| rest.rsplit_once('_'))
    {
        if !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            return format!("{host}:{port}");
        }
    }
    name.to_owned()
}

/// The directory containerd reads for `registry`, if any.
fn host_directory(roots: &[PathBuf], registry: &str) -> Option<PathBuf> {
    let mut names = Vec::new();
    if let Some((host, port)) = registry.rsplit_once(':') {
        names.push(format!("{host}_{port}_"));
    }
    names.push(registry.to_owned());
    names.push(DEFAULT_DIRECTORY.to_owned());
    roots
        .iter()
        .flat_map(|root| names.iter().map(move |name| root.join(name)))
        .find(|path| path.exists())
}

/// The rule for `registry` from `directory`; `None` when the node pulls from the registry
/// alone (no `hosts.toml`, or one that says just that).
fn registry_rule(
    registry: &str,
    directory: &Path,
    notes: &mut Vec<String>,
) -> Result<Option<Rule>, Refusal> {
    let path = directory.join("hosts.toml");
    let file = path.display().to_string();
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Refusal {
                file,
                at: Where::File,
                problem: format!("cannot read: {e}"),
            })
        }
    };
    if text.is_empty() {
        return Ok(None);
    }
    let hosts = hosts_file::parse(&file, &text)?;
    notes.extend(hosts.notes.iter().cloned());
    if directory.ends_with(DEFAULT_DIRECTORY) {
        notes.push(format!("{file}: read for {registry}"));
    }
    chain_rule(registry, &file, &hosts, notes)
}

/// The rule whose chain is the one containerd builds from `hosts` for `registry`.
fn chain_rule(
    registry: &str,
    file: &str,
    hosts: &HostsFile,
    notes: &mut Vec<String>,
) -> Result<Option<Rule>, Refusal> {
    let mut rule = Rule {
        prefix: registry.to_owned(),
        location: None,
        blocked: false,
        mirrors: Vec::new(),
    };
    for host in &hosts.hosts {
        let (location, insecure) = endpoint_location(file, host)?;
        let Some(pull_from_mirror) = served(file, host)? else {
            continue;
        };
        rule.mirrors.push(Mirror {
            location,
            insecure,
            pull_from_mirror,
        });
    }
    if let Some(server) = &hosts.server {
        let (location, insecure) = endpoint_location(file, server)?;
        let is_source = is_registry_itself(registry, &location);
        let capabilities = server.fields.capabilities;
        let pull_from_mirror = match (capabilities.pull, capabilities.resolve) {
            (true, true) if is_source => None,
            (true, true) => Some(PullFromMirror::All),
            (true, false) if is_source => return Err(refusal(file, server.line, "the registry itself serves digests only (`capabilities` without `resolve`): the policy's primary location serves tags too")),
            (true, false) => Some(PullFromMirror::DigestOnly),
            (false, _) => {
                rule.blocked = true;
                None
            }
        };
        if let Some(pull_from_mirror) = pull_from_mirror {
            // another server: the registry itself is never contacted, the server is the
            // chain's last mirror (its credentials are the image's, as for any mirror)
            rule.blocked = true;
            rule.mirrors.push(Mirror {
                location,
                insecure,
                pull_from_mirror,
            });
        }
        if insecure {
            notes.push(format!(
                "{file}:{}: `server` is plain HTTP or unverified TLS on the node; the policy's lookups use the policy server's transport",
                server.line
            ));
        }
    }
    let plain = rule.location.is_none() && !rule.blocked && rule.mirrors.is_empty();
    Ok((!plain).then_some(rule))
}

/// Which references `host` serves in the policy's terms, or `None` when a pull never asks
/// it... which is refused: a host listed for pulls that cannot serve them is a mistake the
/// policy would hide.
fn served(file: &str, host: &Endpoint) -> Result<Option<PullFromMirror>, Refusal> {
    let capabilities = host.fields.capabilities;
    match (capabilities.pull, capabilities.resolve) {
        (true, true) => Ok(Some(PullFromMirror::All)),
        (true, false) => Ok(Some(PullFromMirror::DigestOnly)),
        (false, _) => Err(refusal(
            file,
            host.line,
            format!(
                "{:?} has no `pull` capability: containerd never pulls from it (neither tags nor digests), so it is no mirror; remove it or give it `pull`",
                host.url
            ),
        )),
    }
}

/// Whether `location` is the registry's own default host.
fn is_registry_itself(registry: &str, location: &str) -> bool {
    location == registry || (registry == "docker.io" && location == "registry-1.docker.io")
}

fn refusal(file: &str, line: usize, problem: impl Into<String>) -> Refusal {
    Refusal {
        file: file.to_owned(),
        at: Where::Line(line),
        problem: problem.into(),
    }
}

/// The policy's `host[:port][/path]` for an endpoint, and whether the node reaches it over
/// plain HTTP or without verifying TLS. containerd asks `<scheme>://<host><root>/<repository>`
/// where the root is the URL's path (cleaned), with `/v2` appended unless it ends so or
/// `override_path` is set; the policy asks `<host>/v2/<path>/<repository>`, so the root must
/// be `/v2` or start with `/v2/`.
fn endpoint_location(file: &str, endpoint: &Endpoint) -> Result<(String, bool), Refusal> {
    let refuse = |problem: String| refusal(file, endpoint.line, problem);
    let written = &endpoint.url;
    let with_scheme = if written.starts_with("http") {
        written.clone()
    } else {
        format!("https://{written}")
    };
    let url = url::Url::parse(&with_scheme)
        .map_err(|e| refuse(format!("{written:?} is not a URL: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "the URL carries credentials (not shown): the policy never sends them".into(),
        ));
    }
    let http = match url.scheme() {
        "https" => false,
        "http" => true,
        other => {
            return Err(refuse(format!(
                "scheme {other:?}: containerd speaks http or https"
            )))
        }
    };
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refuse(format!(
            "{written:?}: a query or fragment has no place in a registry endpoint"
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| refuse(format!("{written:?} has no host")))?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let raw_path = with_scheme
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    let root = api_root(raw_path, endpoint.fields.override_path);
    let Some(path) = root
        .strip_prefix("/v2")
        .filter(|p| p.is_empty() || p.starts_with('/'))
    else {
        return Err(refuse(format!(
            "containerd asks {authority}{root}/<repository>/…, an API root the policy cannot address (it asks {authority}/v2/…): write the path as /v2/… with override_path = true"
        )));
    };
    Ok((
        format!("{authority}{path}"),
        http || endpoint.fields.skip_verify,
    ))
}

/// The API root containerd uses for a URL path.
fn api_root(raw_path: &str, override_path: bool) -> String {
    if raw_path.is_empty() {
        return if override_path {
            String::new()
        } else {
            "/v2".into()
        };
    }
    let cleaned = clean(raw_path);
    if cleaned.ends_with("/v2") || override_path {
        cleaned
    } else {
        format!("{cleaned}/v2")
    }
}

/// Go's `path.Clean` for a rooted path: no empty or `.` segments, `..` removes one.
fn clean(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str, override_path: bool) -> Endpoint {
        Endpoint {
            url: url.into(),
            line: 3,
            fields: hosts_file::Fields {
                override_path,
                ..Default::default()
            },
        }
    }

    /// A URL, its `override_path`, and the location and insecurity it becomes (`None`:
    /// refused).
    type EndpointCase = (&'static str, bool, Option<(&'static str, bool)>);

    #[test]
    fn endpoint_paths_become_locations_or_are_refused() {
        #[rustfmt::skip]
        let cases: &[EndpointCase] = &[
            ("https://mirror.internal.test", false, Some(("mirror.internal.test", false))),
            ("mirror.internal.test:5000", false, Some(("mirror.internal.test:5000", false))),
            ("http://mirror.internal.test:8080", false, Some(("mirror.internal.test:8080", true))),
            ("https://mirror.internal.test/v2", false, Some(("mirror.internal.test", false))),
            ("https://mirror.internal.test/v2/hub", true, Some(("mirror.internal.test/hub", false))),
            ("https://mirror.internal.test/v2/hub/", true, Some(("mirror.internal.test/hub", false))),
            // without override_path, /v2 is appended: /hub/v2 is no root the policy can ask,
            // /v2/hub/v2 is (the same URLs as a location ending in /hub/v2)
            ("https://mirror.internal.test/hub", false, None),
            ("https://mirror.internal.test/v2/hub", false, Some(("mirror.internal.test/hub/v2", false))),
            // override_path without /v2, or no path at all
            ("https://mirror.internal.test/api", true, None),
            ("https://mirror.internal.test", true, None),
            // a trailing slash alone: containerd asks //v2
            ("https://mirror.internal.test/", false, None),
            ("https://user:secret@mirror.internal.test", false, None),
        ];
        for (url, override_path, expected) in cases {
            let got = endpoint_location("hosts.toml", &endpoint(url, *override_path));
            let got = got.as_ref().ok().map(|(l, i)| (l.as_str(), *i));
            assert_eq!(got, *expected, "{url} override_path={override_path}");
        }
    }

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        let refusal = endpoint_location(
            "hosts.toml",
            &endpoint("https://robot:s3cr3t-token@mirror.internal.test", false),
        )
        .expect_err("credentials are refused");
        let message = refusal.to_string();
        assert!(message.starts_with("hosts.toml:3: "), "{message}");
        assert!(
            !message.contains("s3cr3t") && !message.contains("robot"),
            "{message}"
        );
    }

    #[test]
    fn port_directories_name_the_registry_with_its_port() {
        assert_eq!(
            registry_of_directory("registry.example.test_5000_"),
            "registry.example.test:5000"
        );
        assert_eq!(
            registry_of_directory("registry.example.test:5000"),
            "registry.example.test:5000"
        );
        assert_eq!(registry_of_directory("docker.io"), "docker.io");
        assert_eq!(registry_of_directory("odd_name_"), "odd_name_");
    }
}

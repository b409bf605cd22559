//! For each image of the docs' tables, the policy's chain under the translated settings is
//! the chain the node builds, written out by hand from the runtime's rules: containerd 2's
//! `certs.d` (docs/containerd.md), CRI-O's `registries.conf` (docs/cri-o.md) and OpenShift's
//! mirror sets (docs/openshift.md). The policy's chain is the policy crate's own
//! (`Settings::locations`), from the YAML the tool prints.

use std::path::{Path, PathBuf};

use node_registries::{containerd, openshift, registries_conf, Translation};
use resolvable_images_policy::settings::Settings;
use resolvable_images_policy::vocabulary::reference::ImageReference;

/// Stands for a digest in the tables.
const DIGEST: &str = "sha256:0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d";

/// An image, and the locations the node asks for it, in order (`@D` is [`DIGEST`]); none
/// when the node refuses the pull without asking anything.
type Row = (&'static str, &'static [&'static str]);

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
}

fn read(paths: &[&str]) -> Vec<(String, String)> {
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(fixture(path)).expect(path);
            (path.to_string(), text)
        })
        .collect()
}

/// The settings as an operator pastes them: the printed YAML, read by the policy.
fn settings_text(translation: &Translation) -> serde_json::Value {
    let yaml = translation.to_yaml().expect("YAML");
    serde_yaml::from_str(&yaml).expect("the printed YAML reads back")
}

/// Every row whose policy chain differs from the node's, named.
fn check(translation: &Translation, rows: &[Row]) {
    let value = settings_text(translation);
    let settings = Settings::from_value(&value)
        .unwrap_or_else(|e| panic!("the policy refuses the settings: {e:?}\n{value:#}"));
    let mut failures = Vec::new();
    for (image, node) in rows {
        let image = image.replace("@D", &format!("@{DIGEST}"));
        let reference = ImageReference::parse(&image).expect("a valid image");
        let policy: Vec<String> = settings
            .locations(&reference)
            .into_iter()
            .map(|location| location.reference.lookup_reference())
            .collect();
        let node: Vec<String> = node
            .iter()
            .map(|l| l.replace("@D", &format!("@{DIGEST}")))
            .collect();
        if policy != node {
            failures.push(format!("{image}\n  node:   {node:?}\n  policy: {policy:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "rows that differ:\n{}",
        failures.join("\n")
    );
}

/// containerd 2 with `config_path = "certs.d:docker-certs.d"`, `_default` read for
/// quay.io and registry.k8s.io.
#[rustfmt::skip]
const CONTAINERD: &[Row] = &[
    // a mirror whose path is the API root (override_path), then server = Docker Hub itself
    ("nginx:1.27", &["mirror.internal.test:5000/dockerhub/library/nginx:1.27", "docker.io/library/nginx:1.27"]),
    ("docker.io/library/nginx@D", &["mirror.internal.test:5000/dockerhub/library/nginx@D", "docker.io/library/nginx@D"]),
    // server is a mirror: the registry is never contacted
    ("registry.example.test/team/app:2", &["registry-mirror.internal.test/team/app:2"]),
    ("registry.example.test/team/app@D", &["registry-mirror.internal.test/team/app@D"]),
    // the same host on another port has a directory of its own
    ("registry.example.test:5000/tools/lint:1", &["plain.internal.test:8080/tools/lint:1", "registry.example.test:5000/tools/lint:1"]),
    // a host with `pull` only serves digests, before the host that resolves tags too
    ("ghcr.io/org/tool:v1", &["ghcr-cache.internal.test/org/tool:v1", "ghcr.io/org/tool:v1"]),
    ("ghcr.io/org/tool@D", &["pinned.internal.test/ghcr/org/tool@D", "ghcr-cache.internal.test/org/tool@D", "ghcr.io/org/tool@D"]),
    // _default of the first directory, before quay.io's directory in the second
    ("quay.io/org/operator:1", &["cache.internal.test/org/operator:1", "quay.io/org/operator:1"]),
    ("registry.k8s.io/pause:3.10", &["cache.internal.test/pause:3.10", "registry.k8s.io/pause:3.10"]),
    // a directory without hosts.toml: the registry alone, _default does not apply
    ("plain.example.test/app:1", &["plain.example.test/app:1"]),
    // server with `pull` only: digests from it, tags from nowhere
    ("sealed.example.test/app:1", &[]),
    ("sealed.example.test/app@D", &["vault.internal.test/sealed/app@D"]),
];

#[test]
fn containerd_certs_d_chains_are_the_nodes() {
    let roots = [fixture("certs.d"), fixture("docker-certs.d")];
    let default_for = ["quay.io".to_owned(), "registry.k8s.io".to_owned()];
    let translation = containerd::translate(&roots, &default_for).expect("a translation");
    check(&translation, CONTAINERD);
    // the policy's portless prefix also covers other ports: said, for the operator
    assert!(
        translation
            .notes
            .iter()
            .any(|n| n.contains("registry.example.test:<port>")),
        "{:?}",
        translation.notes
    );
}

/// containerd 1.x `mirrors` in containerd-1.x-config.toml, `"*"` read for quay.io.
#[rustfmt::skip]
const CONTAINERD_1X: &[Row] = &[
    // the endpoints in order; the registry listed last is asked once
    ("nginx:1.27", &["mirror.internal.test:5000/dockerhub/library/nginx:1.27", "docker.io/library/nginx:1.27"]),
    // the registry itself appended after the endpoints, tags and digests alike
    ("registry.example.test/team/app:2", &["plain.internal.test:8080/team/app:2", "backup.internal.test/team/app:2", "registry.example.test/team/app:2"]),
    ("registry.example.test/team/app@D", &["plain.internal.test:8080/team/app@D", "backup.internal.test/team/app@D", "registry.example.test/team/app@D"]),
    // `"*"` for a registry without an entry
    ("quay.io/org/operator:1", &["cache.internal.test/org/operator:1", "quay.io/org/operator:1"]),
];

#[test]
fn containerd_1x_mirror_chains_are_the_nodes() {
    let (name, text) = &read(&["containerd-1.x-config.toml"])[0];
    let translation = containerd::legacy_mirrors::translate(name, text, &["quay.io".to_owned()])
        .expect("a translation");
    check(&translation, CONTAINERD_1X);
}

/// CRI-O with registries.conf and the drop-in registries.conf.d/50-moved.conf.
#[rustfmt::skip]
const CRI_O: &[Row] = &[
    // mirrors in order, the digest-only one for digests only, the primary last
    ("docker.io/library/nginx:1.27", &["mirror.internal.test/hub/library/nginx:1.27", "docker.io/library/nginx:1.27"]),
    ("docker.io/library/nginx@D", &["mirror.internal.test/hub/library/nginx@D", "pinned.internal.test/hub/library/nginx@D", "docker.io/library/nginx@D"]),
    // mirror-by-digest-only: every mirror for digests only
    ("registry.example.test/team/api:3", &["registry.example.test/team/api:3"]),
    ("registry.example.test/team/api@D", &["mirror.internal.test/team/api@D", "backup.internal.test/team/api@D", "registry.example.test/team/api@D"]),
    ("registry.example.test/other/api:3", &["registry.example.test/other/api:3"]),
    // blocked without mirrors: refused
    ("forbidden.example.test/app:1", &[]),
    // blocked with a digest-only mirror: digests from the mirror, tags from nowhere
    ("quay.io/org/operator:1", &[]),
    ("quay.io/org/operator@D", &["mirror.internal.test/quay-org/operator@D"]),
    ("quay.io/other/app:1", &["quay.io/other/app:1"]),
    // the drop-in: a location elsewhere, a tag-only mirror
    ("legacy.example.test/app:1", &["mirror.internal.test/legacy/app:1", "registry.example.test/legacy/app:1"]),
    ("legacy.example.test/app@D", &["registry.example.test/legacy/app@D"]),
];

#[test]
fn registries_conf_chains_are_the_nodes() {
    let files = read(&["registries.conf", "registries.conf.d/50-moved.conf"]);
    let translation = registries_conf::translate(&files).expect("a translation");
    check(&translation, CRI_O);
}

/// OpenShift with the three mirror sets of mirror-sets.yaml.
#[rustfmt::skip]
const OPENSHIFT: &[Row] = &[
    // NeverContactSource with digest mirrors: tags cannot be pulled
    ("registry.example.test/release/ocp:4.18", &[]),
    ("registry.example.test/release/ocp@D", &["mirror.internal.test/release/ocp@D"]),
    // AllowContactingSource: digest mirrors, then the source; tag mirrors for tags
    ("quay.io/org/operator:1", &["tags.internal.test/quay-org/operator:1", "quay.io/org/operator:1"]),
    ("quay.io/org/operator@D", &["mirror.internal.test/quay-org/operator@D", "backup.internal.test/quay-org/operator@D", "quay.io/org/operator@D"]),
    ("quay.io/other/app:1", &["quay.io/other/app:1"]),
];

#[test]
fn openshift_mirror_set_chains_are_the_nodes() {
    let files = read(&["mirror-sets.yaml"]);
    let translation = openshift::translate(&files).expect("a translation");
    check(&translation, OPENSHIFT);
    // the same objects as `oc get -o yaml` prints them: one List
    let documents: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&files[0].1)
        .map(|document| serde::Deserialize::deserialize(document).expect("a document"))
        .collect();
    let list = serde_yaml::to_string(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": documents,
    }))
    .expect("YAML");
    let listed = openshift::translate(&[("list.yaml".into(), list)]).expect("a translation");
    assert_eq!(listed.rules, translation.rules);
}

//! What the translator refuses: each refusal names the file and the line, never shows a
//! secret, and the command exits nonzero without printing settings.

use std::fs;
use std::path::Path;
use std::process::Command;

use node_registries::{containerd, openshift, registries_conf, Refusal, Where};

/// A certs.d tree with one registry directory holding `hosts`.
fn certs_d(registry: &str, hosts: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("a temporary directory");
    let directory = root.path().join(registry);
    fs::create_dir_all(&directory).expect("the registry's directory");
    fs::write(directory.join("hosts.toml"), hosts).expect("hosts.toml");
    root
}

fn containerd_refusal(hosts: &str) -> Refusal {
    let root = certs_d("registry.example.test", hosts);
    containerd::translate(&[root.path().to_owned()], &[]).expect_err(hosts)
}

#[test]
fn hosts_the_policy_cannot_follow_are_refused_by_line() {
    #[rustfmt::skip]
    let cases: &[(&str, usize, &str)] = &[
        // containerd never pulls from a host without `pull`
        ("[host.\"https://push.internal.test\"]\n  capabilities = [\"push\"]\n", 1, "no `pull`"),
        ("\n[host.\"https://r.internal.test\"]\n  capabilities = [\"resolve\"]\n", 2, "no `pull`"),
        // containerd ignores a file it cannot read: refused rather than translated as nothing
        ("[host.\"https://m.internal.test\"]\n  capabilities = [\"pull\", \"fetch\"]\n", 2, "unknown capability"),
        ("server = \"https://m.internal.test\"\nskip_verify = \"yes\"\n", 2, "true or false"),
        // client certificates and headers are the node's alone
        ("[host.\"https://m.internal.test\"]\n  client = \"/etc/certs/client.pem\"\n", 2, "`client`"),
        // an API root the policy cannot ask
        ("[host.\"https://m.internal.test/cache\"]\n", 1, "API root"),
        // the registry itself serving digests only
        ("server = \"https://registry.example.test\"\ncapabilities = [\"pull\"]\n", 1, "digests only"),
        // a field this translator does not know
        ("server = \"https://m.internal.test\"\nretries = 3\n", 2, "`retries`"),
    ];
    for (hosts, line, says) in cases {
        let refusal = containerd_refusal(hosts);
        assert_eq!(refusal.at, Where::Line(*line), "{hosts}: {refusal}");
        assert!(
            refusal.file.ends_with("registry.example.test/hosts.toml"),
            "{refusal}"
        );
        assert!(refusal.problem.contains(says), "{hosts}: {refusal}");
    }
}

#[test]
fn a_header_is_refused_without_its_value() {
    let hosts = "[host.\"https://m.internal.test\"]\n  capabilities = [\"pull\", \"resolve\"]\n  \
                 [host.\"https://m.internal.test\".header]\n    Authorization = \"Basic c2VjcmV0LXZhbHVl\"\n";
    let message = containerd_refusal(hosts).to_string();
    assert!(message.contains("hosts.toml:3: `header`"), "{message}");
    assert!(
        !message.contains("c2VjcmV0LXZhbHVl") && !message.contains("Basic"),
        "{message}"
    );
}

#[test]
fn default_needs_the_registries_it_applies_to() {
    let root = certs_d("_default", "[host.\"https://cache.internal.test\"]\n");
    let refusal = containerd::translate(&[root.path().to_owned()], &[]).expect_err("_default");
    assert!(refusal.problem.contains("--default-for"), "{refusal}");
    let named = containerd::translate(&[root.path().to_owned()], &["quay.io".to_owned()])
        .expect("a registry named");
    assert_eq!(named.rules.len(), 1);
    assert_eq!(named.rules[0].prefix, "quay.io");
    assert_eq!(named.rules[0].mirrors[0].location, "cache.internal.test");
}

#[test]
fn a_host_under_a_registry_that_is_never_contacted_unblocks_it() {
    // containerd asks sealed.example.test/cache, which the policy would refuse as blocked:
    // the rule is written unblocked (the policy may then miss a failure, never reject a pull
    // that works), and the note says so
    let root = certs_d(
        "sealed.example.test",
        "server = \"https://vault.internal.test\"\ncapabilities = [\"pull\"]\n\
         [host.\"https://sealed.example.test/v2/cache\"]\n  override_path = true\n",
    );
    let translation = containerd::translate(&[root.path().to_owned()], &[]).expect("translated");
    assert_eq!(translation.rules.len(), 1);
    assert!(!translation.rules[0].blocked);
    assert_eq!(
        translation.rules[0].mirrors[0].location,
        "sealed.example.test/cache"
    );
    assert!(
        translation
            .notes
            .iter()
            .any(|n| n.contains("without `blocked`")),
        "{:?}",
        translation.notes
    );
}

#[test]
fn mirror_sets_the_policy_cannot_merge_are_refused_by_field() {
    let set = |mirrors: &str| {
        format!("apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nspec:\n  imageDigestMirrors:\n  - source: quay.io/org\n    mirrors: [{mirrors}]\n")
    };
    let two = format!(
        "{}---\n{}",
        set("a.internal.test/org"),
        set("b.internal.test/org")
    );
    let refusal = openshift::translate(&[("sets.yaml".into(), two)]).expect_err("two orders");
    assert_eq!(
        refusal.at,
        Where::Field("document 2: spec.imageDigestMirrors[0]".into())
    );
    // the same mirrors twice are one set
    let same = format!(
        "{}---\n{}",
        set("a.internal.test/org"),
        set("a.internal.test/org")
    );
    assert!(openshift::translate(&[("sets.yaml".into(), same)]).is_ok());
    let icsp = "apiVersion: operator.openshift.io/v1alpha1\nkind: ImageContentSourcePolicy\n";
    let refusal = openshift::translate(&[("icsp.yaml".into(), icsp.into())]).expect_err("ICSP");
    assert!(refusal.problem.contains("oc adm migrate icsp"), "{refusal}");
    let policy = set("a.internal.test/org").replace(
        "    mirrors:",
        "    mirrorSourcePolicy: Sometimes\n    mirrors:",
    );
    assert!(openshift::translate(&[("sets.yaml".into(), policy)]).is_err());
}

#[test]
fn a_set_of_the_source_alone_is_no_mirror_set() {
    let text = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nspec:\n  imageDigestMirrors:\n  - source: quay.io/org\n    mirrors: [quay.io/org]\n    mirrorSourcePolicy: NeverContactSource\n";
    let translation = openshift::translate(&[("sets.yaml".into(), text.into())]).expect("valid");
    assert!(translation.rules.is_empty(), "{:?}", translation.rules);
}

#[test]
fn a_registries_conf_refusal_names_the_line() {
    let text = "[[registry]]\nlocation = \"a.test\"\n\n[[registry.mirror]]\nlocation = \"https://m.test\"\n";
    let refusal = registries_conf::translate(&[("registries.conf".into(), text.into())])
        .expect_err("a scheme");
    assert_eq!(
        refusal.to_string().split(": ").next(),
        Some("registries.conf:4")
    );
}

fn tool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resolvable-images-registries"))
}

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

#[test]
fn the_command_prints_settings_or_refuses_with_status_one() {
    let output = tool()
        .args(["mirror-sets", &fixture("mirror-sets.yaml")])
        .output()
        .expect("the tool runs");
    assert!(output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.starts_with("registries:\n- prefix: quay.io/org\n"),
        "{printed}"
    );

    let output = tool()
        .args(["certs-d", &fixture("certs.d")])
        .output()
        .expect("the tool runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "no settings on a refusal");
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("refused: ") && error.contains("_default/hosts.toml"),
        "{error}"
    );
}

#[test]
fn containerd_1x_mirrors_the_policy_cannot_follow_are_refused() {
    let config = |registry: &str| {
        format!("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n{registry}")
    };
    #[rustfmt::skip]
    let cases: &[(&str, usize, &str)] = &[
        // both: the CRI plugin does not load
        ("  config_path = \"/etc/containerd/certs.d\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"a.test\"]\n  endpoint = [\"https://m.test\"]\n", 3, "pulls no image"),
        ("  config_path = \"/etc/containerd/certs.d\"\n", 3, "certs-d"),
        // the registry asked between mirrors
        ("[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"a.test\"]\n  endpoint = [\"https://a.test\", \"https://m.test\"]\n", 3, "before"),
        // an API root the policy cannot ask
        ("[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"a.test\"]\n  endpoint = [\"https://m.test/cache\"]\n", 3, "API root"),
        // credentials
        ("[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"a.test\".auth]\n  password = \"hunter2-secret\"\n", 3, "credentials"),
        // "*" without the registries it stands for
        ("[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"*\"]\n  endpoint = [\"https://m.test\"]\n", 3, "--default-for"),
    ];
    for (registry, line, says) in cases {
        let text = config(registry);
        let refusal =
            containerd::legacy_mirrors::translate("config.toml", &text, &[]).expect_err(&text);
        assert_eq!(refusal.at, Where::Line(*line), "{text}: {refusal}");
        assert!(refusal.problem.contains(says), "{text}: {refusal}");
        assert!(!refusal.to_string().contains("hunter2"), "{refusal}");
    }
}

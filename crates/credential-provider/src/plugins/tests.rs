//! Real plugins: shell scripts in a temporary bin directory, run through the exec protocol.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::TokenAttributes;
use crate::testing::install_executable;

const V1: &str = "credentialprovider.kubelet.k8s.io/v1";

/// A plugin that appends its request to `record` and answers `answer`, or exits 1 when
/// `answer` is empty.
fn script(dir: &Path, name: &str, record: &Path, answer: &str) {
    let exit = if answer.is_empty() { "exit 1" } else { "" };
    let text = format!(
        "#!/bin/sh\ncat >>'{}'\necho >>'{}'\n{exit}\nprintf '%s' '{answer}'\n",
        record.display(),
        record.display()
    );
    install_executable(&dir.join(name), &text);
}

fn provider(name: &str, match_images: &[&str]) -> Provider {
    Provider {
        name: name.into(),
        match_images: match_images.iter().map(|m| (*m).to_owned()).collect(),
        default_cache_duration: Duration::from_secs(60),
        api_version: V1.into(),
        args: Vec::new(),
        env: Vec::new(),
        token_attributes: None,
    }
}

fn answer(key_type: &str, duration: &str) -> String {
    let duration = if duration.is_empty() {
        String::new()
    } else {
        format!(r#", "cacheDuration": "{duration}""#)
    };
    format!(
        r#"{{"apiVersion": "{V1}", "kind": "CredentialProviderResponse", "cacheKeyType": "{key_type}"{duration}, "auth": {{"*.example.test": {{"username": "robot", "password": "pw"}}}}}}"#
    )
}

fn runs(record: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).expect("request JSON"))
        .collect()
}

async fn ask(plugins: &Plugins, image: &str) -> Result<Auth, String> {
    let plugin = plugins.matching(image).next().expect("a plugin matches");
    plugins
        .credentials(plugin, image, None, None, &BTreeMap::new())
        .await
}

#[tokio::test]
async fn a_registry_answer_serves_its_registry_and_the_plugin_gets_the_repository() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    script(dir.path(), "p", &record, &answer("Registry", ""));
    let plugins = Plugins::new(dir.path().into(), vec![provider("p", &["*.example.test"])]);
    let auth = ask(&plugins, "r.example.test/team/app")
        .await
        .expect("credentials");
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0].1.username, "robot");
    ask(&plugins, "r.example.test/team/other")
        .await
        .expect("cached");
    assert_eq!(runs(&record).len(), 1, "one run for the registry");
    assert_eq!(runs(&record)[0]["image"], "r.example.test/team/app");
    assert_eq!(runs(&record)[0]["kind"], "CredentialProviderRequest");
    assert!(runs(&record)[0].get("serviceAccountToken").is_none());
    ask(&plugins, "s.example.test/team/app")
        .await
        .expect("another registry");
    assert_eq!(runs(&record).len(), 2, "another registry, another run");
}

#[tokio::test]
async fn an_image_answer_serves_that_image_only_and_zero_is_never_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let (image, zero) = (dir.path().join("image.log"), dir.path().join("zero.log"));
    script(dir.path(), "image", &image, &answer("Image", ""));
    script(dir.path(), "zero", &zero, &answer("Global", "0s"));
    let plugins = Plugins::new(
        dir.path().into(),
        vec![
            provider("image", &["a.example.test"]),
            provider("zero", &["b.example.test"]),
        ],
    );
    for repository in [
        "a.example.test/one",
        "a.example.test/one",
        "a.example.test/two",
    ] {
        ask(&plugins, repository).await.expect("credentials");
    }
    assert_eq!(runs(&image).len(), 2, "one run per image");
    for _ in 0..2 {
        ask(&plugins, "b.example.test/one")
            .await
            .expect("credentials");
    }
    assert_eq!(runs(&zero).len(), 2, "cacheDuration 0: a run per lookup");
}

#[tokio::test]
async fn concurrent_lookups_wait_for_one_run() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    script(dir.path(), "p", &record, &answer("Global", ""));
    let plugins = Plugins::new(dir.path().into(), vec![provider("p", &["*.example.test"])]);
    let (a, b, c) = tokio::join!(
        ask(&plugins, "a.example.test/x"),
        ask(&plugins, "b.example.test/y"),
        ask(&plugins, "c.example.test/z"),
    );
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(runs(&record).len(), 1);
}

#[tokio::test]
async fn a_failing_plugin_is_an_error_and_is_asked_again() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    script(dir.path(), "p", &record, "");
    let plugins = Plugins::new(dir.path().into(), vec![provider("p", &["*.example.test"])]);
    let error = ask(&plugins, "a.example.test/x").await.expect_err("failed");
    assert!(error.contains("failed"), "{error}");
    ask(&plugins, "a.example.test/x").await.expect_err("failed");
    assert_eq!(runs(&record).len(), 2, "a failure is not cached");
    let missing = Plugins::new(
        dir.path().into(),
        vec![provider("absent", &["*.example.test"])],
    );
    let error = ask(&missing, "a.example.test/x")
        .await
        .expect_err("no binary");
    assert!(error.contains("cannot start"), "{error}");
}

#[tokio::test]
async fn a_hanging_plugin_is_killed_when_the_lookup_stops_waiting() {
    let dir = tempfile::tempdir().expect("dir");
    let pid = dir.path().join("pid");
    let path = dir.path().join("hang");
    install_executable(
        &path,
        &format!("#!/bin/sh\necho $$ >'{}'\nexec sleep 30\n", pid.display()),
    );
    let plugins = Plugins::new(
        dir.path().into(),
        vec![provider("hang", &["*.example.test"])],
    );
    let started = Instant::now();
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        ask(&plugins, "a.example.test/x"),
    )
    .await;
    assert!(waited.is_err(), "still running at the deadline");
    assert!(started.elapsed() < Duration::from_secs(2));
    let pid = std::fs::read_to_string(&pid).expect("it started");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = std::fs::read_to_string(Path::new("/proc").join(pid.trim()).join("stat"))
        .unwrap_or_default();
    // gone, or a zombie waiting to be reaped: not running
    assert!(state.is_empty() || state.contains(") Z"), "{state}");
}

fn account(annotations: &[(&str, &str)]) -> Account {
    Account {
        namespace: "team-a".into(),
        name: "builder".into(),
        uid: "uid-1".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn token_provider(cache_type: TokenCacheType) -> Provider {
    Provider {
        token_attributes: Some(TokenAttributes {
            audience: "registry.example.test".into(),
            require_service_account: true,
            required_annotations: vec!["example.test/role".into()],
            optional_annotations: vec!["example.test/scope".into()],
            cache_type,
        }),
        ..provider("p", &["*.example.test"])
    }
}

#[test]
fn annotations_passed_are_the_required_and_the_optional_present() {
    let plugin = Plugin::new(token_provider(TokenCacheType::ServiceAccount));
    let all = account(&[
        ("example.test/role", "r"),
        ("example.test/scope", "s"),
        ("other", "o"),
    ]);
    let passed = plugin.annotations(&all).expect("required present");
    assert_eq!(passed.len(), 2);
    assert_eq!(passed["example.test/scope"], "s");
    let no_optional = plugin
        .annotations(&account(&[("example.test/role", "r")]))
        .expect("required present");
    assert_eq!(no_optional.len(), 1);
    let missing = plugin.annotations(&account(&[("example.test/scope", "s")]));
    assert_eq!(missing, Err("example.test/role".into()));
}

#[tokio::test]
async fn token_answers_are_kept_per_service_account_or_per_token() {
    for (cache_type, expected_runs) in [
        (TokenCacheType::ServiceAccount, 1),
        (TokenCacheType::Token, 2),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let record = dir.path().join("record");
        script(dir.path(), "p", &record, &answer("Registry", ""));
        let plugins = Plugins::new(dir.path().into(), vec![token_provider(cache_type)]);
        let plugin = plugins
            .matching("r.example.test/app")
            .next()
            .expect("match");
        let sa = account(&[("example.test/role", "r")]);
        let annotations = plugin.annotations(&sa).expect("present");
        for token in ["token-1", "token-2"] {
            plugins
                .credentials(
                    plugin,
                    "r.example.test/app",
                    Some(&sa),
                    Some(token),
                    &annotations,
                )
                .await
                .expect("credentials");
        }
        let requests = runs(&record);
        assert_eq!(requests.len(), expected_runs, "{cache_type:?}");
        assert_eq!(requests[0]["serviceAccountToken"], "token-1");
        assert_eq!(
            requests[0]["serviceAccountAnnotations"]["example.test/role"],
            "r"
        );
        // another ServiceAccount never reads this one's answer
        let other = Account {
            name: "other".into(),
            ..sa.clone()
        };
        plugins
            .credentials(
                plugin,
                "r.example.test/app",
                Some(&other),
                Some("token-1"),
                &annotations,
            )
            .await
            .expect("credentials");
        assert_eq!(runs(&record).len(), expected_runs + 1, "{cache_type:?}");
    }
}

#[test]
fn match_images_pick_the_plugins_in_order() {
    let plugins = Plugins::new(
        PathBuf::new(),
        vec![
            provider("ecr", &["*.dkr.ecr.*.amazonaws.com"]),
            provider("local", &["127.0.0.1:5000", "*.example.test"]),
        ],
    );
    let names = |image| {
        plugins
            .matching(image)
            .map(|p| p.provider().name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names("1234.dkr.ecr.eu-west-1.amazonaws.com/app"), ["ecr"]);
    assert_eq!(names("127.0.0.1:5000/app"), ["local"]);
    assert!(names("127.0.0.1:5001/app").is_empty());
    assert!(names("docker.io/library/busybox").is_empty());
}

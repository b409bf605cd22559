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

const NO_ANNOTATIONS: &BTreeMap<String, String> = &BTreeMap::new();

/// A question of `namespace` about `image` with no ServiceAccount, answered within `within`.
fn question<'a>(namespace: &'a str, image: &'a str, within: Duration) -> Ask<'a> {
    Ask {
        namespace,
        image,
        account: None,
        token: None,
        annotations: NO_ANNOTATIONS,
        deadline: Deadline::now() + within,
    }
}

async fn ask_in(plugins: &Plugins, namespace: &str, image: &str) -> Result<Auth, PluginError> {
    let plugin = plugins.matching(image).next().expect("a plugin matches");
    let ask = question(namespace, image, Duration::from_secs(20));
    plugins.credentials(plugin, &ask).await
}

async fn ask(plugins: &Plugins, image: &str) -> Result<Auth, PluginError> {
    ask_in(plugins, "team-a", image).await
}

/// Plugins that are never silenced, so that every failure runs again.
fn unsilenced(dir: &Path, providers: Vec<Provider>) -> Plugins {
    let limits = RunLimits {
        silence: Duration::ZERO,
        ..RunLimits::default()
    };
    Plugins::with_limits(dir.into(), providers, limits)
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
    // one key (the image: the answer's cacheKeyType is not known before it), one run
    let (a, b, c) = tokio::join!(
        ask(&plugins, "a.example.test/x"),
        ask_in(&plugins, "team-b", "a.example.test/x"),
        ask(&plugins, "a.example.test/x"),
    );
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(runs(&record).len(), 1);
}

#[tokio::test]
async fn a_failing_plugin_is_an_error_and_is_asked_again() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    script(dir.path(), "p", &record, "");
    let plugins = unsilenced(dir.path(), vec![provider("p", &["*.example.test"])]);
    let error = ask(&plugins, "a.example.test/x").await.expect_err("failed");
    assert!(error.to_string().contains("failed"), "{error}");
    ask(&plugins, "a.example.test/x").await.expect_err("failed");
    assert_eq!(runs(&record).len(), 2, "a failure is not cached");
    let missing = unsilenced(dir.path(), vec![provider("absent", &["*.example.test"])]);
    let error = ask(&missing, "a.example.test/x")
        .await
        .expect_err("no binary");
    assert!(error.to_string().contains("cannot start"), "{error}");
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
    let plugin = plugins.all().first().expect("a plugin");
    let waited = plugins
        .credentials(
            plugin,
            &question("team-a", "a.example.test/x", Duration::from_millis(500)),
        )
        .await;
    assert_eq!(
        waited.err(),
        Some(PluginError::NoAnswer),
        "still running at the deadline"
    );
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

fn token_question<'a>(
    account: &'a Account,
    token: &'a str,
    annotations: &'a BTreeMap<String, String>,
) -> Ask<'a> {
    Ask {
        account: Some(account),
        token: Some(token),
        annotations,
        ..question(
            &account.namespace,
            "r.example.test/app",
            Duration::from_secs(20),
        )
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
    assert_eq!(missing, Err(MissingAnnotation("example.test/role".into())));
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
                .credentials(plugin, &token_question(&sa, token, &annotations))
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
            .credentials(plugin, &token_question(&other, "token-1", &annotations))
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

/// A plugin answering `answer` that first writes its pid to `started` and, for an image
/// naming "slow", sleeps 30 s.
fn slow_for_slow_images(dir: &Path, name: &str, started: &Path, answer: &str) {
    let text = format!(
        "#!/bin/sh\nrequest=$(cat)\necho $$ >>'{}'\ncase \"$request\" in *slow*) exec sleep 30;; esac\nprintf '%s' '{answer}'\n",
        started.display()
    );
    install_executable(&dir.join(name), &text);
}

/// Waits (at most 10 s) until `path` has a line; its first.
async fn first_line(path: &Path) -> String {
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = text.lines().next() {
            return line.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never written", path.display());
}

#[tokio::test]
async fn another_namespaces_lookups_are_answered_while_a_slow_run_goes_on() {
    let dir = tempfile::tempdir().expect("dir");
    let started = dir.path().join("started");
    slow_for_slow_images(dir.path(), "p", &started, &answer("Image", "0s"));
    let plugins = Plugins::new(dir.path().into(), vec![provider("p", &["*.example.test"])]);
    let plugin = plugins.all().first().expect("a plugin");
    let slow_ask = question("team-slow", "r.example.test/slow", Duration::from_secs(20));
    let slow = plugins.credentials(plugin, &slow_ask);
    tokio::pin!(slow);
    let fast = async {
        let pid = first_line(&started).await;
        for _ in 0..3 {
            ask_in(&plugins, "team-fast", "r.example.test/fast")
                .await
                .expect("answered");
        }
        pid
    };
    // the slow run never ends within the test: only the fast lookups can finish the select
    let pid = tokio::select! {
        pid = fast => pid,
        _ = &mut slow => panic!("the slow run answered"),
    };
    let state = std::fs::read_to_string(Path::new("/proc").join(pid.trim()).join("stat"))
        .unwrap_or_default();
    assert!(
        !state.is_empty() && !state.contains(") Z"),
        "the slow run is still going: {state}"
    );
}

#[tokio::test]
async fn a_key_whose_run_outlived_its_lookup_is_answered_at_once_then_asked_again() {
    let dir = tempfile::tempdir().expect("dir");
    let started = dir.path().join("started");
    slow_for_slow_images(dir.path(), "p", &started, &answer("Image", "0s"));
    let limits = RunLimits {
        silence: Duration::from_secs(60),
        ..RunLimits::default()
    };
    let plugins = Plugins::with_limits(
        dir.path().into(),
        vec![provider("p", &["*.example.test"])],
        limits,
    );
    let plugin = plugins.all().first().expect("a plugin");
    // a second: time for the script to start and say so on a loaded machine
    let head = question("team-a", "r.example.test/slow", Duration::from_secs(1));
    assert_eq!(
        plugins.credentials(plugin, &head).await.err(),
        Some(PluginError::NoAnswer)
    );
    // the GET of the pair: answered without a run, whatever time it is given
    let get = question("team-a", "r.example.test/slow", Duration::from_secs(20));
    let error = plugins.credentials(plugin, &get).await.expect_err("silent");
    assert_eq!(error, PluginError::Silenced(Duration::from_secs(60)));
    assert!(error.to_string().contains("not run again yet"), "{error}");
    assert_eq!(runs_started(&started), 1, "one run for the pair");
    // another namespace, and another image of the same namespace, still run it
    let other = question("team-b", "r.example.test/slow", Duration::from_secs(1));
    assert_eq!(
        plugins.credentials(plugin, &other).await.err(),
        Some(PluginError::NoAnswer)
    );
    ask(&plugins, "r.example.test/fast")
        .await
        .expect("another image");
    assert_eq!(runs_started(&started), 3);
}

#[tokio::test]
async fn a_failed_run_silences_its_key_for_its_namespace() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    script(dir.path(), "p", &record, "");
    let plugins = Plugins::new(dir.path().into(), vec![provider("p", &["*.example.test"])]);
    let first = ask(&plugins, "a.example.test/x").await.expect_err("failed");
    assert!(matches!(first, PluginError::Failed(_)), "{first:?}");
    let second = ask(&plugins, "a.example.test/x").await.expect_err("silent");
    assert!(matches!(second, PluginError::Silenced(_)), "{second:?}");
    assert_eq!(runs(&record).len(), 1);
    ask_in(&plugins, "team-b", "a.example.test/x")
        .await
        .expect_err("failed");
    assert_eq!(runs(&record).len(), 2, "team-b is not silenced by team-a");
}

#[tokio::test]
async fn a_namespace_cannot_take_every_run() {
    let dir = tempfile::tempdir().expect("dir");
    let started = dir.path().join("started");
    slow_for_slow_images(dir.path(), "p", &started, &answer("Image", "0s"));
    let limits = RunLimits {
        total: 2,
        per_namespace: 1,
        silence: Duration::ZERO,
    };
    let plugins = Plugins::with_limits(
        dir.path().into(),
        vec![provider("p", &["*.example.test"])],
        limits,
    );
    let plugin = plugins.all().first().expect("a plugin");
    let slow_one = question(
        "team-slow",
        "r.example.test/slow-1",
        Duration::from_secs(20),
    );
    let slow_two = question(
        "team-slow",
        "r.example.test/slow-2",
        Duration::from_millis(400),
    );
    let (one, two) = (
        plugins.credentials(plugin, &slow_one),
        plugins.credentials(plugin, &slow_two),
    );
    tokio::pin!(one);
    let fast = async {
        first_line(&started).await;
        // team-slow's second lookup waits for its share and gives up...
        assert_eq!(two.await.err(), Some(PluginError::Busy));
        // ...while team-fast finds the other run free
        ask_in(&plugins, "team-fast", "r.example.test/fast").await
    };
    let answered = tokio::select! {
        answered = fast => answered,
        _ = &mut one => panic!("the slow run answered"),
    };
    answered.expect("team-fast answered");
    assert_eq!(
        runs_started(&started),
        2,
        "slow-1 and fast ran, slow-2 did not"
    );
}

#[tokio::test]
async fn two_lookups_of_one_token_run_a_token_plugin_once() {
    let dir = tempfile::tempdir().expect("dir");
    let record = dir.path().join("record");
    // not kept ("0s"): the second lookup takes the answer of the run it waited for
    script(dir.path(), "p", &record, &answer("Registry", "0s"));
    let plugins = Plugins::new(
        dir.path().into(),
        vec![token_provider(TokenCacheType::Token)],
    );
    let plugin = plugins.all().first().expect("a plugin");
    let sa = account(&[("example.test/role", "r")]);
    let annotations = plugin.annotations(&sa).expect("present");
    let ask = token_question(&sa, "token-1", &annotations);
    let (a, b) = tokio::join!(
        plugins.credentials(plugin, &ask),
        plugins.credentials(plugin, &ask)
    );
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(runs(&record).len(), 1);
}

fn runs_started(started: &Path) -> usize {
    std::fs::read_to_string(started)
        .unwrap_or_default()
        .lines()
        .count()
}

use super::*;

/// A sha256 digest of the tests' own (any 64 lowercase hex digits).
const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn normalised(image: &str) -> String {
    ImageReference::parse(image)
        .unwrap_or_else(|e| panic!("{image}: {e}"))
        .to_string()
}

fn error(image: &str) -> ReferenceError {
    ImageReference::parse(image).expect_err(image)
}

/// Each `(image, normalised form)` parses to that form.
fn assert_normalised(cases: &[(&str, &str)]) {
    for (image, expected) in cases {
        assert_eq!(normalised(image), *expected, "{image:?}");
    }
}

/// Each `(image, error)` is refused with that error.
fn assert_refused(cases: &[(String, ReferenceError)]) {
    for (image, expected) in cases {
        assert_eq!(&error(image), expected, "{image:?}");
    }
}

/// `n` lowercase hex digits.
fn hex(n: usize) -> String {
    "0123456789abcdef".chars().cycle().take(n).collect()
}

#[test]
fn has_uppercase_agrees_with_lowercasing() {
    for s in [
        "nginx",
        "Nginx",
        "library/app",
        "É",
        "é",
        "ǅ",
        "Σ",
        "aΣ",
        "İ",
        "ß",
        "ｱ",
        "",
    ] {
        assert_eq!(has_uppercase(s), s.to_lowercase() != s, "{s:?}");
    }
}

/// The first component is the registry when it has a `.`, a `:`, an uppercase letter, or
/// is exactly `localhost`, and a `/` follows it; anything else is a Docker Hub name.
#[test]
fn the_first_component_is_a_registry_only_when_it_looks_like_one() {
    assert_normalised(&[
        // a dot
        (
            "registry.example.test/team-a/app",
            "registry.example.test/team-a/app:latest",
        ),
        ("10.20.30.40/app:1", "10.20.30.40/app:1"),
        // a port
        ("mirror:5000/app", "mirror:5000/app:latest"),
        (
            "registry.example.test:5000/team-a/app",
            "registry.example.test:5000/team-a/app:latest",
        ),
        // localhost, with or without a port
        ("localhost/app", "localhost/app:latest"),
        (
            "localhost:5000/team-a/app:2.0",
            "localhost:5000/team-a/app:2.0",
        ),
        // an uppercase letter
        ("Mirror/app", "Mirror/app:latest"),
        ("MIRROR/team-a/app:1", "MIRROR/team-a/app:1"),
        // none of these: a Docker Hub namespace
        ("team-a/app", "docker.io/team-a/app:latest"),
        ("mirror/app", "docker.io/mirror/app:latest"),
        (
            "localhost-mirror/app",
            "docker.io/localhost-mirror/app:latest",
        ),
        // no `/` after it: a Docker Hub repository, and `:` starts its tag
        ("app:5000", "docker.io/library/app:5000"),
        ("localhost:5000", "docker.io/library/localhost:5000"),
        ("localhost", "docker.io/library/localhost:latest"),
        (
            "registry.example.test:5000",
            "docker.io/library/registry.example.test:5000",
        ),
    ]);
}

/// Docker Hub is `docker.io`, also when written `index.docker.io`, and its one-component
/// names live under `library/`.
#[test]
fn docker_hub_names_get_their_registry_and_library_prefix() {
    assert_normalised(&[
        ("app", "docker.io/library/app:latest"),
        ("app:3.1", "docker.io/library/app:3.1"),
        ("docker.io/app", "docker.io/library/app:latest"),
        ("docker.io/library/app:3.1", "docker.io/library/app:3.1"),
        ("docker.io/team-a/app", "docker.io/team-a/app:latest"),
        ("index.docker.io/app:3.1", "docker.io/library/app:3.1"),
        ("index.docker.io/team-a/app", "docker.io/team-a/app:latest"),
        ("team-a/app/worker", "docker.io/team-a/app/worker:latest"),
        // only Docker Hub's exact spellings are Docker Hub
        (
            "registry.example.test/app",
            "registry.example.test/app:latest",
        ),
        ("Docker.IO/app", "Docker.IO/app:latest"),
        ("docker.io:443/app", "docker.io:443/app:latest"),
    ]);
    let legacy = ImageReference::parse("index.docker.io/app").expect("valid");
    assert_eq!(legacy.registry(), "docker.io");
    assert_eq!(legacy.repository(), "library/app");
}

/// The repository path is lowercase; the registry and the tag may have capitals.
#[test]
fn the_repository_path_is_lowercase() {
    assert_normalised(&[
        (
            "registry.example.test/team-a/app:V1.0-RC",
            "registry.example.test/team-a/app:V1.0-RC",
        ),
        (
            "Registry.Example.Test/team-a/app",
            "Registry.Example.Test/team-a/app:latest",
        ),
    ]);
    let upper = |component: &str| ReferenceError::Uppercase(component.into());
    assert_refused(&[
        ("registry.example.test/Team-A/app".into(), upper("Team-A")),
        ("registry.example.test/team-a/App:1".into(), upper("App")),
        ("App".into(), upper("App")),
        ("team-a/App".into(), upper("App")),
        ("docker.io/Team-A/app".into(), upper("Team-A")),
        ("Mirror/App".into(), upper("App")),
        ("registry.example.test/ÄPP".into(), upper("ÄPP")),
        (
            format!("registry.example.test/Team-A/app@{SHA}"),
            upper("Team-A"),
        ),
    ]);
}

/// Components of lowercase letters and digits, joined inside by one `.`, one or two `_`,
/// or any number of `-`; components joined by single `/`s.
#[test]
fn path_components_follow_the_component_grammar() {
    assert_normalised(&[
        (
            "registry.example.test/team_a/app.v2/app__x/app-y/app--z",
            "registry.example.test/team_a/app.v2/app__x/app-y/app--z:latest",
        ),
        (
            "registry.example.test/0/42",
            "registry.example.test/0/42:latest",
        ),
        ("team-a/a", "docker.io/team-a/a:latest"),
    ]);
    let component = |c: &str| ReferenceError::PathComponent(c.into());
    let empty = ReferenceError::EmptyPathComponent;
    assert_refused(&[
        ("registry.example.test/team-a//app".into(), empty.clone()),
        ("registry.example.test/team-a/app/".into(), empty.clone()),
        ("registry.example.test/".into(), empty.clone()),
        ("/team-a/app".into(), empty.clone()),
        (":1.0".into(), empty.clone()),
        (format!("@{SHA}"), empty),
        ("team-a/.app".into(), component(".app")),
        ("team-a/app.".into(), component("app.")),
        ("team-a/app..x".into(), component("app..x")),
        ("team-a/app___x".into(), component("app___x")),
        ("team-a/app_-x".into(), component("app_-x")),
        ("team-a/-app".into(), component("-app")),
        ("team-a/app-".into(), component("app-")),
        ("team-a/app+x".into(), component("app+x")),
        ("team a/app".into(), component("team a")),
        (" app".into(), component(" app")),
        ("app\n".into(), component("app\n")),
        ("registry.example.test/tëam".into(), component("tëam")),
        // a bracketed host needs a path after it, else it is read as a Hub name
        ("[fd00::7]".into(), component("[fd00:")),
    ]);
}

/// At most 255 characters of repository path, `library/` included; the registry and the
/// tag do not count.
#[test]
fn the_path_alone_is_limited_to_255_characters() {
    let path = |n: usize| "a".repeat(n);
    for image in [
        format!("registry.example.test:5000/{}", path(255)),
        format!("team-a/{}", path(248)),
        path(247),
        format!("registry.example.test/{}:{}", path(255), "t".repeat(128)),
        format!("registry.example.test/{}", ["abc"; 64].join("/")),
    ] {
        assert!(ImageReference::parse(&image).is_ok(), "{image}");
    }
    assert_refused(&[
        (
            format!("registry.example.test/{}", path(256)),
            ReferenceError::NameTooLong(256),
        ),
        (path(248), ReferenceError::NameTooLong(256)),
        (
            format!("registry.example.test/abcd/{}", ["abc"; 63].join("/")),
            ReferenceError::NameTooLong(256),
        ),
        (
            format!("{}/app@{SHA}", "x".repeat(300)),
            ReferenceError::NameTooLong(304),
        ),
    ]);
}

/// A registry is dot-separated labels of letters, digits and inner dashes, or an IPv6
/// address in brackets, with an optional numeric port.
#[test]
fn registries_are_host_names_or_ip_addresses_with_an_optional_port() {
    for image in [
        "registry.example.test:5000/app",
        "10.0.0.7:30500/team-a/app:1",
        "[fd00::7]:5000/team-a/app:1",
        "[fd00::7]/app",
        "[::1]/app",
        "my-registry.example.test/app",
        "Registry.Example.Test:443/app",
        "a.b-c.d/app",
    ] {
        let expected = if image.ends_with(":1") {
            image.to_owned()
        } else {
            format!("{image}:latest")
        };
        assert_eq!(normalised(image), expected, "{image}");
    }
    let reference = ImageReference::parse("[fd00::7]:5000/team-a/app:1").expect("valid");
    assert_eq!(reference.registry(), "[fd00::7]:5000");
    let registry = |r: &str| ReferenceError::Registry(r.into());
    assert_refused(&[
        ("[fd00::7/app".into(), registry("[fd00::7")),
        (
            "[fd00::7%eth0]:5000/app".into(),
            registry("[fd00::7%eth0]:5000"),
        ),
        ("[fd00::g]:5000/app".into(), registry("[fd00::g]:5000")),
        ("[]:5000/app".into(), registry("[]:5000")),
        ("fd00::7/app".into(), registry("fd00::7")),
        (
            "registry.example.test:http/app".into(),
            registry("registry.example.test:http"),
        ),
        (
            "registry.example.test:/app".into(),
            registry("registry.example.test:"),
        ),
        (
            "registry.example.test:5000:6000/app".into(),
            registry("registry.example.test:5000:6000"),
        ),
        (
            "registry_a.example.test/app".into(),
            registry("registry_a.example.test"),
        ),
        (
            "-registry.example.test/app".into(),
            registry("-registry.example.test"),
        ),
        (
            "registry-.example.test/app".into(),
            registry("registry-.example.test"),
        ),
        (
            "registry..example.test/app".into(),
            registry("registry..example.test"),
        ),
        (".example.test/app".into(), registry(".example.test")),
    ]);
}

/// A tag is a letter, digit or `_`, then up to 127 letters, digits, `_`, `.` or `-`.
#[test]
fn tags_follow_the_tag_grammar() {
    let longest = "t".repeat(TAG_LENGTH_MAX);
    for tag in ["v1.2.3", "_build", "1", "RC-1_final", "a.-_b", &longest] {
        let image = format!("registry.example.test/app:{tag}");
        let reference = ImageReference::parse(&image).expect(&image);
        assert_eq!(reference.tag(), Some(tag));
    }
    let tag = |t: &str| ReferenceError::Tag(t.into());
    assert_refused(&[
        ("registry.example.test/app:-v1".into(), tag("-v1")),
        ("registry.example.test/app:.v1".into(), tag(".v1")),
        ("registry.example.test/app:".into(), tag("")),
        ("registry.example.test/app:v1+build".into(), tag("v1+build")),
        ("registry.example.test/app:v1/x".into(), tag("v1/x")),
        ("registry.example.test/app:vé".into(), tag("vé")),
        (
            format!("registry.example.test/app:{longest}x"),
            ReferenceError::TagTooLong(129),
        ),
        // only the last `:` starts the tag
        (
            "registry.example.test/app:v1:v2".into(),
            ReferenceError::PathComponent("app:v1".into()),
        ),
    ]);
}

/// `sha256:` and 64, `sha384:` and 96, or `sha512:` and 128 lowercase hex digits; the
/// digest wins over a tag for the pull.
#[test]
fn digests_name_their_algorithm_and_exact_length() {
    for (algorithm, digits) in [("sha256", 64), ("sha384", 96), ("sha512", 128)] {
        let digest = format!("{algorithm}:{}", hex(digits));
        let image = format!("registry.example.test/team-a/app@{digest}");
        assert_eq!(normalised(&image), image);
        let reference = ImageReference::parse(&image).expect(&image);
        assert_eq!(
            reference.digest().map(Digest::as_str),
            Some(digest.as_str())
        );
    }
    let image = |digest: &str| format!("registry.example.test/app@{digest}");
    let length = |algorithm, expected, found| ReferenceError::DigestLength {
        algorithm,
        expected,
        found,
    };
    let malformed = |digest: &str| ReferenceError::Digest(quote(digest));
    assert_refused(&[
        (
            image(&format!("sha256:{}", hex(63))),
            length("sha256", 64, 63),
        ),
        (
            image(&format!("sha256:{}", hex(65))),
            length("sha256", 64, 65),
        ),
        (
            image(&format!("sha384:{}", hex(64))),
            length("sha384", 96, 64),
        ),
        (
            image(&format!("sha512:{}", hex(64))),
            length("sha512", 128, 64),
        ),
        (
            image(&format!("sha256:{}", hex(64).to_uppercase())),
            ReferenceError::DigestCase("sha256"),
        ),
        (
            image(&format!("md5:{}", hex(32))),
            ReferenceError::UnsupportedDigest("md5".into()),
        ),
        (
            image(&format!("blake3:{}", hex(64))),
            ReferenceError::UnsupportedDigest("blake3".into()),
        ),
        (
            image(&format!("sha256:{}", hex(31))),
            malformed(&format!("sha256:{}", hex(31))),
        ),
        (
            image(&format!("sha256:{}", "g".repeat(64))),
            malformed(&format!("sha256:{}", "g".repeat(64))),
        ),
        (image("sha256"), malformed("sha256")),
        (image(""), malformed("")),
        (
            image(&format!("256:{}", hex(64))),
            malformed(&format!("256:{}", hex(64))),
        ),
    ]);
}

/// The empty string, and a bare 64-hex string (an image ID), are no references; 64 hex
/// digits anywhere else make an ordinary name.
#[test]
fn empty_and_image_id_strings_are_refused() {
    assert_refused(&[
        (String::new(), ReferenceError::Empty),
        (hex(64), ReferenceError::HexIdentifier),
        (
            hex(64).to_uppercase(),
            ReferenceError::Uppercase(hex(64).to_uppercase()),
        ),
    ]);
    for image in [
        hex(63),
        hex(65),
        format!("{}:1", hex(64)),
        format!("team-a/{}", hex(64)),
        format!("registry.example.test/{}", hex(64)),
    ] {
        assert!(ImageReference::parse(&image).is_ok(), "{image}");
    }
}

/// `name:tag@digest` keeps both; without a tag or a digest the tag is `latest`.
#[test]
fn a_tag_and_a_digest_are_both_kept_and_no_tag_means_latest() {
    let both = format!("registry.example.test:5000/team-a/app:1.4@{SHA}");
    let reference = ImageReference::parse(&both).expect("valid");
    assert_eq!(reference.to_string(), both);
    assert_eq!(reference.tag(), Some("1.4"));
    assert_eq!(
        reference.lookup_reference(),
        format!("registry.example.test:5000/team-a/app@{SHA}")
    );
    let untagged = ImageReference::parse("registry.example.test/team-a/app").expect("valid");
    assert_eq!(untagged.tag(), None);
    assert_eq!(
        untagged.to_string(),
        "registry.example.test/team-a/app:latest"
    );
    assert_eq!(
        normalised(&format!("team-a/app@{SHA}")),
        format!("docker.io/team-a/app@{SHA}")
    );
}

/// A refusal names the part at fault, cut short when it is long.
#[test]
fn refusals_name_the_part_at_fault_briefly() {
    let text = |image: &str| error(image).to_string();
    assert!(text("registry.example.test/Team-A/app").contains("\"Team-A\""));
    assert!(text("registry_a.example.test/app").contains("\"registry_a.example.test\""));
    assert!(text("registry.example.test/app:-v1").contains("\"-v1\""));
    assert_eq!(
        text(&format!("registry.example.test/app@sha256:{}", hex(63))),
        "sha256 digest has 63 hex digits; it needs exactly 64"
    );
    for image in [
        format!("registry.example.test/{}$", "a".repeat(10_000)),
        format!("registry.example.test/app:-{}", "t".repeat(10_000)),
        format!("{}_/app", "r.".repeat(10_000)),
        format!("app@sha256:{}", "g".repeat(10_000)),
    ] {
        let message = error(&image).to_string();
        assert!(message.len() < 200 && message.contains('…'), "{message}");
    }
}

/// The one-pass reading of plain images gives what the grammar gives, for every string
/// of a quarter million made of the pieces where the two could part (separators, ports,
/// Docker Hub's names, uppercase, digests, non-ASCII), and takes the common shapes.
#[test]
fn plain_images_read_in_one_pass_as_the_grammar_reads_them() {
    const PIECES: [&str; 30] = [
        "a",
        "z",
        "0",
        "9",
        "B",
        ".",
        "..",
        "_",
        "__",
        "___",
        "-",
        "--",
        "/",
        "//",
        ":",
        ":5000",
        ":x",
        "@",
        "@sha256:",
        "localhost",
        "docker.io",
        "index.docker.io",
        "127.0.0.1",
        "[::1]",
        "é",
        " ",
        "latest",
        "v1.2",
        "Tag",
        "library",
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const REGISTRIES: [&str; 14] = [
        "a.b",
        "127.0.0.1",
        "a.b:5000",
        "localhost:5000",
        "docker.io",
        "index.docker.io",
        "localhost",
        "A.b",
        "a-.b",
        "a..b",
        "a.b:",
        "[::1]:5000",
        "x",
        "a-b.c-d:1",
    ];
    const COMPONENTS: [&str; 13] = [
        "a", "a.b", "a__b", "a___b", "a-b", "a--b", "a_-b", "-a", "a-", "", "B", "é", "0_9",
    ];
    const TAGS: [&str; 8] = ["", ":1.0", ":Tag_1", ":-x", ":", ":a:b", "@sha256:0", ":é"];
    let mut pick = |from: &[&'static str]| from[(next() % from.len() as u64) as usize];
    let mut plain = 0;
    for round in 0..250_000 {
        let image: String = if round % 2 == 0 {
            let mut image = pick(&REGISTRIES).to_owned();
            for _ in 0..1 + round % 3 {
                image.push('/');
                image.push_str(pick(&COMPONENTS));
            }
            image + pick(&TAGS)
        } else {
            (0..1 + round % 9).map(|_| pick(&PIECES)).collect()
        };
        let by_grammar = ImageReference::parse_by_grammar(&image);
        if let Some(reference) = parse_plain(&image) {
            assert_eq!(Ok(&reference), by_grammar.as_ref(), "{image:?}");
            plain += 1;
        }
        assert_eq!(ImageReference::parse(&image), by_grammar, "{image:?}");
    }
    assert!(plain > 1_000, "only {plain} plain images drawn");
    for image in [
        "127.0.0.1:5000/bench/img-0:1.0",
        "ghcr.io/org/app:v1.2.3",
        "registry.k8s.io/pause:3.10",
        "quay.io/a__b/c-d.e_f/g---h",
        "localhost:5000/x",
        "my-registry.example.com:443/team/app:RC_1",
    ] {
        let reference = parse_plain(image).unwrap_or_else(|| panic!("{image}"));
        assert_eq!(reference.to_string().trim_end_matches(":latest"), image);
    }
    for image in [
        "docker.io/library/nginx:1",
        "nginx",
        "a.b/x@sha256:00",
        "A.b/x",
    ] {
        assert!(parse_plain(image).is_none(), "{image}");
    }
}

#[test]
fn accepts_sha512_digests() {
    let image = format!("repo@sha512:{}", "a".repeat(128));
    assert!(ImageReference::parse(&image).is_ok());
}

#[test]
fn lookup_reference_prefers_digest_and_defaults_latest() {
    let parse = |s: &str| ImageReference::parse(s).expect(s);
    assert_eq!(
        parse("nginx").lookup_reference(),
        "docker.io/library/nginx:latest"
    );
    assert_eq!(
        parse("docker.io/library/nginx:latest").lookup_reference(),
        parse("nginx").lookup_reference()
    );
    assert_eq!(
        parse(&format!("ghcr.io/a/b:1@{SHA}")).lookup_reference(),
        format!("ghcr.io/a/b@{SHA}")
    );
    assert_eq!(parse("a.io/b:2").lookup_reference(), "a.io/b:2");
}

#[test]
fn latest_resolution_follows_kubelet_defaulting() {
    let latest = |s: &str| ImageReference::parse(s).expect(s).resolves_latest();
    assert!(latest("nginx"));
    assert!(latest("nginx:latest"));
    assert!(latest(&format!("nginx:latest@{SHA}")));
    assert!(!latest("nginx:1.25"));
    assert!(!latest(&format!("nginx@{SHA}")));
}

#[test]
fn accessors_expose_the_parts() {
    let reference = ImageReference::parse(&format!("[::1]:5000/team/app:v1@{SHA}")).unwrap();
    assert_eq!(reference.registry(), "[::1]:5000");
    assert_eq!(reference.repository(), "team/app");
    assert_eq!(reference.tag(), Some("v1"));
    assert_eq!(reference.digest().map(Digest::as_str), Some(SHA));
    assert_eq!(reference.name(), "[::1]:5000/team/app");
}

/// A string field of a vector case, `None` when null or absent.
fn field<'a>(case: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    case.get(name).and_then(serde_json::Value::as_str)
}

/// Cases of `reference-normalize.json` this module answers differently, with the reason.
/// The vectors give the kubelet's answers, so an entry here is a known divergence.
const NORMALIZE_EXCEPTIONS: &[(&str, &str)] = &[];

/// Where this module's answer for a `reference-normalize.json` case differs, if it does.
fn normalize_disagreement(case: &serde_json::Value) -> Option<String> {
    let input = field(case, "input").expect("input");
    let valid = case["valid"].as_bool().expect("valid");
    let parsed = ImageReference::parse(input);
    let reference = match (&parsed, valid) {
        (Ok(reference), true) => reference,
        (Err(_), false) => return None,
        (Ok(reference), false) => return Some(format!("accepted as {reference}")),
        (Err(e), true) => return Some(format!("refused: {e}")),
    };
    let expected = field(case, "normalized").expect("normalized");
    let expected_full = field(case, "normalized_with_tag").unwrap_or(expected);
    let ours = [
        ("normalized", Some(reference.lookup_reference())),
        ("normalized_with_tag", Some(reference.to_string())),
        ("domain", Some(reference.registry().to_owned())),
        ("path", Some(reference.repository().to_owned())),
        ("tag", reference.tag().map(str::to_owned)),
        ("digest", reference.digest().map(|d| d.as_str().to_owned())),
    ];
    ours.into_iter()
        .find(|(name, ours)| {
            let theirs = match *name {
                "normalized_with_tag" => Some(expected_full),
                _ => field(case, name),
            };
            ours.as_deref() != theirs
        })
        .map(|(name, ours)| format!("{name} is {ours:?}, expected {:?}", field(case, name)))
}

/// Every case of the shared `reference-normalize.json` (the kubelet's answers for the
/// inputs of upstream tests) gets the same validity and normalised parts here.
#[test]
fn agrees_with_the_shared_normalisation_vectors() {
    let Some(cases) = crate::testing::shared_vectors("reference-normalize.json") else {
        return;
    };
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        let input = field(case, "input").expect("input");
        let disagreement = normalize_disagreement(case);
        match NORMALIZE_EXCEPTIONS.iter().find(|(i, _)| *i == input) {
            Some(_) if disagreement.is_none() => {
                failures.push(format!("{input:?}: listed as an exception, yet agrees"))
            }
            Some(_) => {}
            None => failures.extend(disagreement.map(|d| format!("{input:?}: {d}"))),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `[registry/]path` by this module's grammar, the registry taken when it can be one: the
/// shape of a name without tag or digest, before normalisation.
fn is_name(name: &str) -> bool {
    let with_registry = name
        .split_once('/')
        .is_some_and(|(registry, path)| is_valid_domain(registry) && check_path(path).is_ok());
    with_registry || check_path(name).is_ok()
}

/// Where this module's answer for a `reference-regexp.json` case differs, if it does;
/// `None` too for kinds that do not map onto this module.
fn regexp_disagreement(case: &serde_json::Value) -> Option<String> {
    let input = field(case, "input").expect("input");
    let matches = case["match"].as_bool().expect("match");
    let ours = match field(case, "kind").expect("kind") {
        "domain_regexp" => is_valid_domain(input),
        "anchored_name_regexp" => is_name(input),
        "anchored_identifier_regexp" => {
            ImageReference::parse(input) == Err(ReferenceError::HexIdentifier)
        }
        "reference_regexp" => return reference_disagreement(case, input, matches),
        _ => return None,
    };
    (ours != matches).then(|| format!("ours {ours}, expected {matches}"))
}

/// A `reference_regexp` case: valid as expected, and the same name, tag and digest.
fn reference_disagreement(case: &serde_json::Value, input: &str, matches: bool) -> Option<String> {
    let parsed = ImageReference::parse(input);
    let reference = match (parsed, matches) {
        (Ok(reference), true) => reference,
        (Err(_), false) => return None,
        (parsed, _) => return Some(format!("ours {parsed:?}, expected match {matches}")),
    };
    let subs: Vec<&str> = case["subs"]
        .as_array()
        .expect("subs")
        .iter()
        .map(|sub| sub.as_str().expect("a string"))
        .collect();
    let name = ImageReference::parse(subs[0]).map(|name| name.name());
    let tag = Some(subs[1]).filter(|tag| !tag.is_empty());
    let digest = Some(subs[2]).filter(|digest| !digest.is_empty());
    let agrees = name.as_ref() == Ok(&reference.name())
        && reference.tag() == tag
        && reference.digest().map(Digest::as_str) == digest;
    (!agrees).then(|| format!("ours {reference:?}, expected parts {subs:?}"))
}

/// Cases of `reference-regexp.json` this module answers differently, with the reason.
const REGEXP_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// The shared `reference-regexp.json` cases that map onto this module: registries,
/// `[registry/]path` names, image IDs, and whole references split into their parts.
#[test]
fn agrees_with_the_shared_grammar_vectors() {
    let Some(cases) = crate::testing::shared_vectors("reference-regexp.json") else {
        return;
    };
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        let input = field(case, "input").expect("input");
        let kind = field(case, "kind").expect("kind");
        let disagreement = regexp_disagreement(case);
        let excepted = REGEXP_EXCEPTIONS
            .iter()
            .any(|(k, i, _)| *k == kind && *i == input);
        match (excepted, disagreement) {
            (true, None) => failures.push(format!(
                "{kind} {input:?}: listed as an exception, yet agrees"
            )),
            (false, Some(d)) => failures.push(format!("{kind} {input:?}: {d}")),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

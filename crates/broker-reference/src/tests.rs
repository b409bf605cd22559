//! Round trips, limits, refusals, and property-style checks over generated inputs (a small
//! deterministic generator: no dependencies beyond std).

use super::*;

fn name(
    namespace: &str,
    credentials: Credentials,
    registry: &str,
    repository: &str,
) -> BrokeredName {
    BrokeredName {
        namespace: namespace.into(),
        credentials,
        registry: registry.into(),
        repository: repository.into(),
    }
}

fn secrets(names: &[&str]) -> Credentials {
    Credentials::PullSecrets(names.iter().map(|s| s.to_string()).collect())
}

#[test]
fn encodes_the_documented_examples() {
    let lookup = name(
        "team-a",
        secrets(&["regcred", "backup.cred"]),
        "registry.example:5000",
        "app/web",
    );
    assert_eq!(
        lookup.encode().unwrap(),
        "r1/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web"
    );
    let sa = name(
        "default",
        Credentials::ServiceAccount("builder".into()),
        "docker.io",
        "library/busybox",
    );
    assert_eq!(
        sa.encode().unwrap(),
        "r1/default/a.builder/d.docker.io/library/busybox"
    );
    let anonymous = name("ns", secrets(&[]), "[::1]:5000", "a");
    assert_eq!(
        anonymous.encode().unwrap(),
        "r1/ns/n/x.5b3a3a315d3a35303030/a"
    );
    assert_eq!(
        reference("broker.kw.svc:8443", &lookup, Some("v1"), None).unwrap(),
        "broker.kw.svc:8443/r1/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web:v1"
    );
    let digest = format!("sha256:{}", "a".repeat(64));
    assert_eq!(
        reference("b", &sa, Some("1.0"), Some(&digest)).unwrap(),
        format!("b/r1/default/a.builder/d.docker.io/library/busybox:1.0@{digest}")
    );
}

#[test]
fn round_trips() {
    let cases = [
        name("a", secrets(&[]), "localhost", "x"),
        name(
            "kube-system",
            secrets(&["a", "b", "a"]),
            "127.0.0.1:5000",
            "a/b/c",
        ),
        name(
            "n-1",
            Credentials::ServiceAccount("sa.with.dots".into()),
            "Registry.Example.COM",
            "a__b/c-d",
        ),
        name("z", secrets(&["x-y.z"]), "[fe80::1%25eth0]:443", "p.q_r"),
        name("z", secrets(&["x"]), "host-with-hyphen.example", "c--d"),
    ];
    for case in cases {
        let encoded = case.encode().unwrap();
        assert!(
            is_repository(&encoded),
            "{encoded} must be valid path components"
        );
        assert_eq!(BrokeredName::decode(&encoded).unwrap(), case, "{encoded}");
    }
}

#[test]
fn refuses_what_cannot_exist_or_parse() {
    let ok = || name("ns", secrets(&["s"]), "r.example", "repo");
    let mut bad = ok();
    bad.namespace = "Team".into();
    assert_eq!(bad.encode(), Err(Refusal::Namespace));
    bad.namespace = "-a".into();
    assert_eq!(bad.encode(), Err(Refusal::Namespace));
    bad.namespace = "a".repeat(64);
    assert_eq!(bad.encode(), Err(Refusal::Namespace));
    bad.namespace = "a.b".into();
    assert_eq!(bad.encode(), Err(Refusal::Namespace));
    for secret in ["", "Upper", "under_score", "a..b", "a/b", ".a", "a-"] {
        let mut bad = ok();
        bad.credentials = secrets(&["fine", secret]);
        assert_eq!(bad.encode(), Err(Refusal::ObjectName), "{secret:?}");
        bad.credentials = Credentials::ServiceAccount(secret.into());
        assert_eq!(bad.encode(), Err(Refusal::ObjectName), "{secret:?}");
    }
    for registry in ["", "a/b", "a b", "a@b", "é.example", "a:b:c\n"] {
        let mut bad = ok();
        bad.registry = registry.into();
        assert_eq!(bad.encode(), Err(Refusal::Registry), "{registry:?}");
    }
    for repository in [
        "", "Upper", "a//b", "/a", "a/", "a..b", "a___b", "-a", "a:b",
    ] {
        let mut bad = ok();
        bad.repository = repository.into();
        assert_eq!(bad.encode(), Err(Refusal::Repository), "{repository:?}");
    }
    assert_eq!(reference("b", &ok(), Some(".bad"), None), Err(Refusal::Tag));
    assert_eq!(
        reference("b", &ok(), Some(&"t".repeat(129)), None),
        Err(Refusal::Tag)
    );
    assert_eq!(reference("b", &ok(), None, None), Err(Refusal::Tag));
    assert_eq!(
        reference("b", &ok(), None, Some("sha256:short")),
        Err(Refusal::Digest)
    );
    assert_eq!(
        reference("B", &ok(), Some("t"), None),
        Err(Refusal::BrokerHost)
    );
    assert_eq!(
        reference("b/c", &ok(), Some("t"), None),
        Err(Refusal::BrokerHost)
    );
}

#[test]
fn limits_the_whole_name_to_255_characters() {
    let host = "broker.kw.svc:8443";
    let fixed = format!("{host}/r1/ns/n/d.r/").len();
    let mut lookup = name(
        "ns",
        secrets(&[]),
        "r",
        &"a".repeat(NAME_TOTAL_LENGTH_MAX - fixed),
    );
    let exact = reference(host, &lookup, Some("t"), None).unwrap();
    assert_eq!(exact.len() - ":t".len(), NAME_TOTAL_LENGTH_MAX);
    lookup.repository.push('a');
    assert_eq!(
        reference(host, &lookup, Some("t"), None),
        Err(Refusal::TooLong)
    );
    assert_eq!(
        BrokeredName::decode(&format!("r1/ns/n/d.r/{}", "a".repeat(300))),
        Err(Refusal::TooLong)
    );
}

#[test]
fn decodes_strictly() {
    let refused = [
        "",
        "r1",
        "r1/ns/n/d.r",
        "r2/ns/n/d.r/a",
        "R1/ns/n/d.r/a",
        "r1/NS/n/d.r/a",
        "r1/ns/q/d.r/a",
        "r1/ns/s./d.r/a",
        "r1/ns/s.a___b/d.r/a",
        "r1/ns/n/r/a",
        "r1/ns/n/d.r_/a",
        "r1/ns/n/d.r_123456/a",
        // the hex form of a name the plain form can write is not canonical
        "r1/ns/n/x.72/a",
        "r1/ns/n/x.7/a",
        "r1/ns/n/x.zz/a",
        "r1/ns/n/x.2f/a",
        "r1/ns/n/d.r/a/",
        "r1/ns/n/d.r//a",
        "/r1/ns/n/d.r/a",
        "r1/ns/n/d.r/A",
    ];
    for name in refused {
        assert!(BrokeredName::decode(name).is_err(), "{name:?} decoded");
    }
}

#[test]
fn the_namespace_is_the_second_component_whatever_the_repository_says() {
    // A repository that mimics an encoding does not change whose secrets are used.
    let hostile = name(
        "attacker",
        secrets(&[]),
        "r.example",
        "r1/kube-system/s.admin/d.r.example/x",
    );
    let decoded = BrokeredName::decode(&hostile.encode().unwrap()).unwrap();
    assert_eq!(decoded.namespace, "attacker");
    assert_eq!(decoded.credentials, secrets(&[]));
    assert_eq!(decoded.repository, "r1/kube-system/s.admin/d.r.example/x");
}

#[test]
fn recognises_the_broker_host_however_written() {
    for registry in [
        "broker.kw.svc:8443",
        "BROKER.kw.svc:8443",
        "broker.kw.svc.:8443",
    ] {
        assert!(is_broker_host(registry, "broker.kw.svc:8443"), "{registry}");
    }
    assert!(!is_broker_host("broker.kw.svc:8444", "broker.kw.svc:8443"));
    assert!(!is_broker_host("broker.kw.svc", "broker.kw.svc:8443"));
    assert!(is_broker_host("[::1]:5000", "[::1]:5000"));
}

#[test]
fn parses_manifest_references() {
    let digest = format!("sha256:{}", "0".repeat(64));
    assert_eq!(
        ManifestReference::parse("v1.2_3-x"),
        Ok(ManifestReference::Tag("v1.2_3-x".into()))
    );
    assert_eq!(
        ManifestReference::parse(&digest),
        Ok(ManifestReference::Digest(digest.clone()))
    );
    for bad in [
        "",
        ".x",
        "a/b",
        "..",
        "sha256:xyz",
        "a b",
        "%2e",
        "sha256:../../x",
    ] {
        assert!(ManifestReference::parse(bad).is_err(), "{bad:?}");
    }
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn string(&mut self, alphabet: &[u8], max: usize) -> String {
        let len = self.below(max + 1);
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())] as char)
            .collect()
    }
}

const ALPHABET: &[u8] = b"abz09-._:/[]%A_@ ";

fn random_name(rng: &mut Rng) -> BrokeredName {
    let credentials = match rng.below(3) {
        0 => Credentials::ServiceAccount(rng.pick(&["default", "a.b", "x-1", "Bad", ""]).into()),
        _ => Credentials::PullSecrets(
            (0..rng.below(4))
                .map(|_| {
                    rng.pick(&["regcred", "a.b-c", "z", "x__y", "Up"])
                        .to_owned()
                })
                .collect(),
        ),
    };
    BrokeredName {
        namespace: rng
            .pick(&["default", "kube-system", "a", "team-b", "Bad", "a.b"])
            .into(),
        credentials,
        registry: if rng.below(2) == 0 {
            rng.pick(&[
                "docker.io",
                "localhost:5000",
                "[::1]:5000",
                "R.example",
                "a_b",
                "127.0.0.1:1",
            ])
            .into()
        } else {
            rng.string(ALPHABET, 12)
        },
        repository: if rng.below(2) == 0 {
            rng.pick(&[
                "library/busybox",
                "a/b/c",
                "a__b",
                "r1/kube-system/s.x/d.r/y",
                "A",
            ])
            .into()
        } else {
            rng.string(ALPHABET, 12)
        },
    }
}

#[test]
fn property_every_encoding_decodes_to_itself_and_is_valid() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut encoded_count = 0;
    let mut seen = std::collections::HashMap::new();
    for _ in 0..20_000 {
        let lookup = random_name(&mut rng);
        if let Ok(encoded) = lookup.encode() {
            encoded_count += 1;
            assert!(is_repository(&encoded), "{encoded}");
            assert_eq!(BrokeredName::decode(&encoded).as_ref(), Ok(&lookup));
            // injective: one encoding, one lookup
            if let Some(previous) = seen.insert(encoded.clone(), lookup.clone()) {
                assert_eq!(previous, lookup, "{encoded} encodes two lookups");
            }
        }
    }
    assert!(
        encoded_count > 1_000,
        "the generator must produce valid lookups ({encoded_count})"
    );
}

#[test]
fn property_decoding_random_and_mutated_names_never_panics_and_is_canonical() {
    let mut rng = Rng(42);
    let valid = name(
        "team-a",
        secrets(&["regcred", "b"]),
        "localhost:5000",
        "app/web",
    )
    .encode()
    .unwrap();
    for _ in 0..50_000 {
        let candidate = if rng.below(2) == 0 {
            let mut bytes = valid.clone().into_bytes();
            let at = rng.below(bytes.len());
            bytes[at] = ALPHABET[rng.below(ALPHABET.len())];
            String::from_utf8(bytes).unwrap()
        } else {
            format!("r1/{}", rng.string(ALPHABET, 30))
        };
        if let Ok(decoded) = BrokeredName::decode(&candidate) {
            assert_eq!(decoded.encode().as_deref(), Ok(candidate.as_str()));
        }
    }
}

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

/// The key of the tests (any 32 bytes).
fn key() -> SealingKey {
    SealingKey::new(*b"0123456789abcdef0123456789abcdef").unwrap()
}

/// `body` sealed with the tests' key, as the encoder would.
fn sealed(body: &str) -> String {
    format!("{VERSION}/{}/{body}", key().seal(body))
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
    // the seal as `openssl dgst -sha256 -hmac <key>` computes it (docs/design/broker-encoding.md)
    assert_eq!(
        lookup.encode(&key()).unwrap(),
        "r2/6fd13fe02cafffbec37c830e78d5a831/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web"
    );
    let sa = name(
        "default",
        Credentials::ServiceAccount("builder".into()),
        "docker.io",
        "library/busybox",
    );
    assert_eq!(
        sa.encode(&key()).unwrap(),
        sealed("default/a.builder/d.docker.io/library/busybox")
    );
    let anonymous = name("ns", secrets(&[]), "[::1]:5000", "a");
    assert_eq!(
        anonymous.encode(&key()).unwrap(),
        sealed("ns/n/x.5b3a3a315d3a35303030/a")
    );
    assert_eq!(
        reference("broker.kw.svc:8443", &lookup, &key(), Some("v1"), None).unwrap(),
        format!(
            "broker.kw.svc:8443/{}:v1",
            sealed("team-a/s.regcred__backup.cred/d.registry.example_5000/app/web")
        )
    );
    let digest = format!("sha256:{}", "a".repeat(64));
    assert_eq!(
        reference("b", &sa, &key(), Some("1.0"), Some(&digest)).unwrap(),
        format!(
            "b/{}:1.0@{digest}",
            sealed("default/a.builder/d.docker.io/library/busybox")
        )
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
        let encoded = case.encode(&key()).unwrap();
        assert!(
            is_repository(&encoded),
            "{encoded} must be valid path components"
        );
        assert_eq!(
            BrokeredName::decode(&encoded, &[key()]).unwrap(),
            case,
            "{encoded}"
        );
    }
}

#[test]
fn refuses_what_cannot_exist_or_parse() {
    let ok = || name("ns", secrets(&["s"]), "r.example", "repo");
    let mut bad = ok();
    bad.namespace = "Team".into();
    assert_eq!(bad.encode(&key()), Err(Refusal::Namespace));
    bad.namespace = "-a".into();
    assert_eq!(bad.encode(&key()), Err(Refusal::Namespace));
    bad.namespace = "a".repeat(64);
    assert_eq!(bad.encode(&key()), Err(Refusal::Namespace));
    bad.namespace = "a.b".into();
    assert_eq!(bad.encode(&key()), Err(Refusal::Namespace));
    for secret in ["", "Upper", "under_score", "a..b", "a/b", ".a", "a-"] {
        let mut bad = ok();
        bad.credentials = secrets(&["fine", secret]);
        assert_eq!(bad.encode(&key()), Err(Refusal::ObjectName), "{secret:?}");
        bad.credentials = Credentials::ServiceAccount(secret.into());
        assert_eq!(bad.encode(&key()), Err(Refusal::ObjectName), "{secret:?}");
    }
    for registry in ["", "a/b", "a b", "a@b", "é.example", "a:b:c\n"] {
        let mut bad = ok();
        bad.registry = registry.into();
        assert_eq!(bad.encode(&key()), Err(Refusal::Registry), "{registry:?}");
    }
    for repository in [
        "", "Upper", "a//b", "/a", "a/", "a..b", "a___b", "-a", "a:b",
    ] {
        let mut bad = ok();
        bad.repository = repository.into();
        assert_eq!(
            bad.encode(&key()),
            Err(Refusal::Repository),
            "{repository:?}"
        );
    }
    assert_eq!(
        reference("b", &ok(), &key(), Some(".bad"), None),
        Err(Refusal::Tag)
    );
    assert_eq!(
        reference("b", &ok(), &key(), Some(&"t".repeat(129)), None),
        Err(Refusal::Tag)
    );
    assert_eq!(reference("b", &ok(), &key(), None, None), Err(Refusal::Tag));
    assert_eq!(
        reference("b", &ok(), &key(), None, Some("sha256:short")),
        Err(Refusal::Digest)
    );
    assert_eq!(
        reference("B", &ok(), &key(), Some("t"), None),
        Err(Refusal::BrokerHost)
    );
    assert_eq!(
        reference("b/c", &ok(), &key(), Some("t"), None),
        Err(Refusal::BrokerHost)
    );
}

#[test]
fn limits_the_whole_name_to_255_characters() {
    let host = "broker.kw.svc:8443";
    let fixed = format!("{host}/{}", sealed("ns/n/d.r/")).len();
    let mut lookup = name(
        "ns",
        secrets(&[]),
        "r",
        &"a".repeat(NAME_TOTAL_LENGTH_MAX - fixed),
    );
    let exact = reference(host, &lookup, &key(), Some("t"), None).unwrap();
    assert_eq!(exact.len() - ":t".len(), NAME_TOTAL_LENGTH_MAX);
    lookup.repository.push('a');
    assert_eq!(
        reference(host, &lookup, &key(), Some("t"), None),
        Err(Refusal::TooLong)
    );
    assert_eq!(
        BrokeredName::decode(&sealed(&format!("ns/n/d.r/{}", "a".repeat(300))), &[key()]),
        Err(Refusal::TooLong)
    );
}

#[test]
fn decodes_strictly() {
    // whatever is not the layout, sealed or not
    for name in [
        "",
        "r2",
        "r1/ns/n/d.r/a",
        "R2/x/ns/n/d.r/a",
        "/r2/x/ns/n/d.r/a",
    ] {
        assert_eq!(
            BrokeredName::decode(name, &[key()]),
            Err(Refusal::NotEncoded),
            "{name:?}"
        );
    }
    let short_seal = format!("r2/{}/ns/n/d.r/a", &key().seal("ns/n/d.r/a")[..31]);
    let upper_seal = format!("r2/{}/ns/n/d.r/a", key().seal("ns/n/d.r/a").to_uppercase());
    for name in [short_seal, upper_seal] {
        assert_eq!(
            BrokeredName::decode(&name, &[key()]),
            Err(Refusal::NotEncoded)
        );
    }
    // sealed by a key holder, yet not what the encoder writes
    let refused = [
        "ns/n/d.r",
        "NS/n/d.r/a",
        "ns/q/d.r/a",
        "ns/s./d.r/a",
        "ns/s.a___b/d.r/a",
        "ns/n/r/a",
        "ns/n/d.r_/a",
        "ns/n/d.r_123456/a",
        // the hex form of a name the plain form can write is not canonical
        "ns/n/x.72/a",
        "ns/n/x.7/a",
        "ns/n/x.zz/a",
        "ns/n/x.2f/a",
        "ns/n/d.r/a/",
        "ns/n/d.r//a",
        "ns/n/d.r/A",
    ];
    for body in refused {
        let name = sealed(body);
        let refusal = BrokeredName::decode(&name, &[key()]);
        assert!(
            refusal.is_err() && refusal != Err(Refusal::Unsealed),
            "{name:?}: {refusal:?}"
        );
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
    let decoded = BrokeredName::decode(&hostile.encode(&key()).unwrap(), &[key()]).unwrap();
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
    assert!(is_broker_host("broker.kw.svc:443", "broker.kw.svc"));
}

#[test]
fn the_broker_host_is_the_registry_with_the_same_key() {
    let spellings = [
        "docker.io",
        "Docker.IO.",
        "docker.io:443",
        "docker.io:4430",
        "reg.example:5000",
        "REG.example.:5000",
        "[::1]:5000",
        "[::1]",
        "[::1]:443",
        "localhost",
        "localhost:",
        ":5000",
        "a:b:5000",
        "",
    ];
    for a in spellings {
        for b in spellings {
            assert_eq!(
                is_broker_host(a, b),
                registry_key(a) == registry_key(b),
                "{a} and {b}"
            );
        }
    }
}

#[test]
fn one_key_per_registry_however_spelled() {
    for spelling in [
        "docker.io",
        "Docker.IO",
        "docker.io.",
        "docker.io:443",
        "DOCKER.io.:443",
    ] {
        assert_eq!(registry_key(spelling), "docker.io", "{spelling}");
    }
    assert_eq!(registry_key("reg.example:5000"), "reg.example:5000");
    assert_eq!(registry_key("Reg.Example.:5000"), "reg.example:5000");
    assert_eq!(registry_key("[::1]:5000"), "[::1]:5000");
    assert_eq!(registry_key("[::1]"), "[::1]");
    assert_ne!(
        registry_key("reg.example:4430"),
        registry_key("reg.example")
    );
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
        if let Ok(encoded) = lookup.encode(&key()) {
            encoded_count += 1;
            assert!(is_repository(&encoded), "{encoded}");
            assert_eq!(
                BrokeredName::decode(&encoded, &[key()]).as_ref(),
                Ok(&lookup)
            );
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
    .encode(&key())
    .unwrap();
    let body = valid[VERSION.len() + 1 + SEAL_LENGTH + 1..].to_owned();
    for _ in 0..50_000 {
        let mut bytes = body.clone().into_bytes();
        let at = rng.below(bytes.len());
        bytes[at] = ALPHABET[rng.below(ALPHABET.len())];
        let mutated = String::from_utf8(bytes).unwrap();
        // the old seal on a changed body: refused, whatever the body says
        let resealed = format!("{}{mutated}", &valid[..VERSION.len() + 1 + SEAL_LENGTH + 1]);
        if mutated != body {
            assert_eq!(
                BrokeredName::decode(&resealed, &[key()]),
                Err(Refusal::Unsealed),
                "{resealed}"
            );
        }
        // sealed anew (as only a key holder can): decoded only when canonical
        for candidate in [sealed(&mutated), sealed(&rng.string(ALPHABET, 30))] {
            if let Ok(decoded) = BrokeredName::decode(&candidate, &[key()]) {
                assert_eq!(decoded.encode(&key()).as_deref(), Ok(candidate.as_str()));
            }
        }
    }
}

#[test]
fn only_a_holder_of_the_key_writes_a_name_the_broker_answers() {
    let lookup = name("team-a", secrets(&["regcred"]), "r.example", "app");
    let other = SealingKey::new(vec![7u8; 32]).unwrap();
    let encoded = lookup.encode(&key()).unwrap();
    assert_eq!(
        BrokeredName::decode(&encoded, std::slice::from_ref(&other)),
        Err(Refusal::Unsealed)
    );
    // a broker holding both keys (a key being rotated) accepts either
    assert_eq!(
        BrokeredName::decode(&encoded, &[other.clone(), key()]),
        Ok(lookup.clone())
    );
    assert_eq!(BrokeredName::decode(&encoded, &[]), Err(Refusal::Unsealed));
    // another namespace under the same seal, or no seal at all
    let swapped = encoded.replace("team-a", "team-b");
    assert_eq!(
        BrokeredName::decode(&swapped, &[key()]),
        Err(Refusal::Unsealed)
    );
    let zeros = format!(
        "{VERSION}/{}/team-a/s.regcred/d.r.example/app",
        "0".repeat(32)
    );
    assert_eq!(
        BrokeredName::decode(&zeros, &[key()]),
        Err(Refusal::Unsealed)
    );
    for unsealed in [
        "r1/team-a/s.regcred/d.r.example/app",
        "r2/team-a/s.regcred/d.r.example/app",
    ] {
        assert_eq!(
            BrokeredName::decode(unsealed, &[key()]),
            Err(Refusal::NotEncoded)
        );
    }
    // keys too short to be one, and a key that never prints
    assert_eq!(
        SealingKey::new(vec![1u8; 31]).map(|_| ()),
        Err(Refusal::ShortKey)
    );
    assert_eq!(format!("{:?}", key()), "SealingKey(..)");
}

#[test]
fn the_seal_is_hmac_sha256_of_the_name_truncated_to_128_bits() {
    // RFC 4231 test case 2 (key "Jefe" is too short for a sealing key, so check the MAC
    // construction directly), then the seal: the left 16 bytes of the HMAC of "r2/<body>"
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
    mac.update(b"what do ya want for nothing?");
    let tag: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        tag,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    let body = "team-a/n/d.r/app";
    let mut full = <Hmac<Sha256> as Mac>::new_from_slice(&key().0).unwrap();
    full.update(format!("r2/{body}").as_bytes());
    let full: String = full
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(key().seal(body), full[..SEAL_LENGTH]);
}

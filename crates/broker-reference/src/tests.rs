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

/// The broker host of the tests.
const HOST: &str = "broker.kw.svc:8443";
/// The tests' clock: 2026-01-01T00:00:00Z, on a window's boundary.
const NOW: u64 = 1_767_225_600;
/// The expiry the policy writes at [`NOW`].
const EXPIRES: u64 = NOW + EXPIRY_WINDOW_SECONDS;

fn tag(tag: &str) -> ManifestReference {
    ManifestReference::Tag(tag.into())
}

/// A broker reached as [`HOST`], holding `keys`, at `now`.
fn broker<'a>(keys: &'a [SealingKey], hosts: &'a [String], now: u64) -> Unsealing<'a> {
    Unsealing {
        keys,
        own_hosts: hosts,
        now,
    }
}

fn hosts() -> Vec<String> {
    vec![HOST.to_owned()]
}

/// Decodes `name` asked for tag `t1` by a broker holding the tests' key at [`NOW`].
fn decode(name: &str) -> Result<BrokeredName, Refusal> {
    BrokeredName::decode(name, &tag("t1"), &broker(&[key()], &hosts(), NOW))
}

/// `body` sealed with the tests' key for [`HOST`], tag `t1` and [`EXPIRES`], as the encoder
/// would.
fn sealed(body: &str) -> String {
    let expires = EXPIRES.to_string();
    let seal = key().seal(&seal_message(HOST, &expires, body, &tag("t1")));
    format!("{VERSION}/{seal}/{expires}/{body}")
}

fn secrets(names: &[&str]) -> Credentials {
    Credentials::PullSecrets(names.iter().map(|s| s.to_string()).collect())
}

fn encode(lookup: &BrokeredName) -> Result<String, Refusal> {
    lookup.encode(&key(), HOST, &tag("t1"), EXPIRES)
}

#[test]
fn encodes_the_documented_examples() {
    let lookup = name(
        "team-a",
        secrets(&["regcred", "backup.cred"]),
        "registry.example:5000",
        "app/web",
    );
    // the seal as `b3sum` computes it (the `spec` module's recipe)
    assert_eq!(
        reference(HOST, &lookup, &key(), Some("v1"), None, EXPIRES).unwrap(),
        "broker.kw.svc:8443/r4/e1fda409a977e3be7258871d63178dcd/1767225900/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web:v1"
    );
    let sa = name(
        "default",
        Credentials::ServiceAccount("builder".into()),
        "docker.io",
        "library/busybox",
    );
    assert_eq!(
        encode(&sa).unwrap(),
        sealed("default/a.builder/d.docker.io/library/busybox")
    );
    let anonymous = name("ns", secrets(&[]), "[::1]:5000", "a");
    assert_eq!(
        encode(&anonymous).unwrap(),
        sealed("ns/n/x.5b3a3a315d3a35303030/a")
    );
    // a tag and a digest: sealed for the digest, which the manifest URL carries
    let digest = format!("sha256:{}", "a".repeat(64));
    let by_digest = sa
        .encode(
            &key(),
            "b",
            &ManifestReference::Digest(digest.clone()),
            EXPIRES,
        )
        .unwrap();
    assert_eq!(
        reference("b", &sa, &key(), Some("1.0"), Some(&digest), EXPIRES).unwrap(),
        format!("b/{by_digest}:1.0@{digest}")
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
        let encoded = encode(&case).unwrap();
        assert!(
            is_repository(&encoded),
            "{encoded} must be valid path components"
        );
        assert_eq!(decode(&encoded).unwrap(), case, "{encoded}");
    }
}

#[test]
fn refuses_what_cannot_exist_or_parse() {
    let ok = || name("ns", secrets(&["s"]), "r.example", "repo");
    let mut bad = ok();
    bad.namespace = "Team".into();
    assert_eq!(encode(&bad), Err(Refusal::Namespace));
    bad.namespace = "-a".into();
    assert_eq!(encode(&bad), Err(Refusal::Namespace));
    bad.namespace = "a".repeat(64);
    assert_eq!(encode(&bad), Err(Refusal::Namespace));
    bad.namespace = "a.b".into();
    assert_eq!(encode(&bad), Err(Refusal::Namespace));
    for secret in ["", "Upper", "under_score", "a..b", "a/b", ".a", "a-"] {
        let mut bad = ok();
        bad.credentials = secrets(&["fine", secret]);
        assert_eq!(encode(&bad), Err(Refusal::ObjectName), "{secret:?}");
        bad.credentials = Credentials::ServiceAccount(secret.into());
        assert_eq!(encode(&bad), Err(Refusal::ObjectName), "{secret:?}");
    }
    for registry in ["", "a/b", "a b", "a@b", "é.example", "a:b:c\n"] {
        let mut bad = ok();
        bad.registry = registry.into();
        assert_eq!(encode(&bad), Err(Refusal::Registry), "{registry:?}");
    }
    for repository in [
        "", "Upper", "a//b", "/a", "a/", "a..b", "a___b", "-a", "a:b",
    ] {
        let mut bad = ok();
        bad.repository = repository.into();
        assert_eq!(encode(&bad), Err(Refusal::Repository), "{repository:?}");
    }
    let refs = |tag: Option<&str>, digest: Option<&str>| {
        reference("b", &ok(), &key(), tag, digest, EXPIRES)
    };
    assert_eq!(refs(Some(".bad"), None), Err(Refusal::Tag));
    assert_eq!(refs(Some(&"t".repeat(129)), None), Err(Refusal::Tag));
    assert_eq!(refs(None, None), Err(Refusal::Tag));
    assert_eq!(refs(None, Some("sha256:short")), Err(Refusal::Digest));
    for host in ["B", "b/c", ""] {
        assert_eq!(
            reference(host, &ok(), &key(), Some("t"), None, EXPIRES),
            Err(Refusal::BrokerHost),
            "{host:?}"
        );
    }
}

#[test]
fn limits_the_whole_name_to_255_characters() {
    // the seal and a ten-digit expiry take 47 characters of the 255
    let fixed = format!("{HOST}/{}", sealed("ns/n/d.r/")).len();
    assert_eq!(
        fixed,
        HOST.len() + 1 + "r4/".len() + SEAL_LENGTH + 1 + 11 + "ns/n/d.r/".len()
    );
    let mut lookup = name(
        "ns",
        secrets(&[]),
        "r",
        &"a".repeat(NAME_TOTAL_LENGTH_MAX - fixed),
    );
    let exact = reference(HOST, &lookup, &key(), Some("t"), None, EXPIRES).unwrap();
    assert_eq!(exact.len() - ":t".len(), NAME_TOTAL_LENGTH_MAX);
    // a digest does not count: it follows the name
    let digest = format!("sha256:{}", "0".repeat(64));
    assert!(reference(HOST, &lookup, &key(), None, Some(&digest), EXPIRES).is_ok());
    lookup.repository.push('a');
    assert_eq!(
        reference(HOST, &lookup, &key(), Some("t"), None, EXPIRES),
        Err(Refusal::TooLong)
    );
    assert_eq!(
        decode(&sealed(&format!("ns/n/d.r/{}", "a".repeat(300)))),
        Err(Refusal::TooLong)
    );
}

#[test]
fn decodes_strictly() {
    // whatever is not the layout, sealed or not
    for name in [
        "",
        "r4",
        "r1/ns/n/d.r/a",
        "R4/x/1/ns/n/d.r/a",
        "/r4/x/1/ns/n/d.r/a",
    ] {
        assert_eq!(decode(name), Err(Refusal::NotEncoded), "{name:?}");
    }
    let good = sealed("ns/n/d.r/a");
    let seal = &good[3..3 + SEAL_LENGTH];
    let short_seal = good.replace(seal, &seal[..31]);
    let upper_seal = good.replace(seal, &seal.to_uppercase());
    // an expiry the encoder never writes, sealed or not
    let expiry_text = EXPIRES.to_string();
    let zero_led = good.replace(&expiry_text, &format!("0{expiry_text}"));
    let signed = good.replace(&expiry_text, &format!("+{expiry_text}"));
    let huge = good.replace(&expiry_text, &"9".repeat(21));
    for name in [short_seal, upper_seal, zero_led, signed, huge] {
        assert_eq!(decode(&name), Err(Refusal::NotEncoded), "{name}");
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
        let refusal = decode(&name);
        assert!(
            refusal.is_err() && refusal != Err(Refusal::Unsealed),
            "{name:?}: {refusal:?}"
        );
    }
}

#[test]
fn a_seal_is_good_for_one_tag_or_digest() {
    let lookup = name("team-a", secrets(&["regcred"]), "r.example", "app");
    let keys = [key()];
    let hosts = hosts();
    let at_now = broker(&keys, &hosts, NOW);
    let v1 = lookup.encode(&key(), HOST, &tag("v1"), EXPIRES).unwrap();
    assert_eq!(
        BrokeredName::decode(&v1, &tag("v1"), &at_now),
        Ok(lookup.clone())
    );
    // the name copied for another tag of the same repository
    for other in ["v2", "V1", "v1.0", "latest"] {
        assert_eq!(
            BrokeredName::decode(&v1, &tag(other), &at_now),
            Err(Refusal::Unsealed),
            "{other}"
        );
    }
    let digest = |c: &str| ManifestReference::Digest(format!("sha256:{}", c.repeat(64)));
    let by_a = lookup.encode(&key(), HOST, &digest("a"), EXPIRES).unwrap();
    assert_eq!(
        BrokeredName::decode(&by_a, &digest("a"), &at_now),
        Ok(lookup.clone())
    );
    assert_eq!(
        BrokeredName::decode(&by_a, &digest("b"), &at_now),
        Err(Refusal::Unsealed)
    );
    // neither does a tag's seal serve a digest, nor the other way round
    assert_eq!(
        BrokeredName::decode(&by_a, &tag("v1"), &at_now),
        Err(Refusal::Unsealed)
    );
    assert_eq!(
        BrokeredName::decode(&v1, &digest("a"), &at_now),
        Err(Refusal::Unsealed)
    );
}

#[test]
fn a_seal_is_good_for_the_broker_host_it_names() {
    let lookup = name("team-a", secrets(&["regcred"]), "r.example", "app");
    let keys = [key()];
    let encoded = lookup.encode(&key(), HOST, &tag("v1"), EXPIRES).unwrap();
    let at = |hosts: &[&str]| {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        BrokeredName::decode(&encoded, &tag("v1"), &broker(&keys, &hosts, NOW))
    };
    // another broker holding the same key, or this one under other names only
    assert_eq!(at(&["other-broker.kw.svc:8443"]), Err(Refusal::Unsealed));
    assert_eq!(
        at(&["broker.kw.svc:8444", "broker.kw.svc"]),
        Err(Refusal::Unsealed)
    );
    assert_eq!(at(&[]), Err(Refusal::Unsealed));
    // any of the broker's names, spelled as hosts are compared
    assert_eq!(at(&["broker", HOST]), Ok(lookup.clone()));
    assert_eq!(at(&["BROKER.kw.svc.:8443"]), Ok(lookup.clone()));
    let default_port = lookup
        .encode(&key(), "broker.kw.svc", &tag("v1"), EXPIRES)
        .unwrap();
    let hosts = vec!["broker.kw.svc:443".to_owned()];
    assert_eq!(
        BrokeredName::decode(&default_port, &tag("v1"), &broker(&keys, &hosts, NOW)),
        Ok(lookup)
    );
}

#[test]
fn a_seal_is_good_until_its_expiry_and_never_long_ahead() {
    let lookup = name("team-a", secrets(&["regcred"]), "r.example", "app");
    let keys = [key()];
    let hosts = hosts();
    let encoded = lookup.encode(&key(), HOST, &tag("v1"), EXPIRES).unwrap();
    let at = |now: u64| BrokeredName::decode(&encoded, &tag("v1"), &broker(&keys, &hosts, now));
    assert_eq!(at(EXPIRES - 1), Ok(lookup.clone()));
    assert_eq!(at(EXPIRES), Err(Refusal::Expired));
    assert_eq!(at(EXPIRES + 1), Err(Refusal::Expired));
    // a broker whose clock is behind: accepted up to the maximum ahead, not one second more
    assert_eq!(at(EXPIRES - EXPIRES_AHEAD_MAX_SECONDS), Ok(lookup.clone()));
    assert_eq!(
        at(EXPIRES - EXPIRES_AHEAD_MAX_SECONDS - 1),
        Err(Refusal::ExpiresTooLate)
    );
    // a key holder who writes a lifetime of its own choosing
    let long = lookup
        .encode(
            &key(),
            HOST,
            &tag("v1"),
            NOW + EXPIRES_AHEAD_MAX_SECONDS + 1,
        )
        .unwrap();
    assert_eq!(
        BrokeredName::decode(&long, &tag("v1"), &broker(&keys, &hosts, NOW)),
        Err(Refusal::ExpiresTooLate)
    );
    // the expiry is sealed: moved forward under the old seal, it is unsealed
    let moved = encoded.replace(&EXPIRES.to_string(), &(EXPIRES + 300).to_string());
    assert_eq!(
        BrokeredName::decode(&moved, &tag("v1"), &broker(&keys, &hosts, NOW)),
        Err(Refusal::Unsealed)
    );
}

#[test]
fn the_policys_expiry_keeps_references_stable_within_a_window() {
    // on a boundary: one window ahead; just after: the end of the next window
    assert_eq!(expiry(NOW), NOW + 300);
    assert_eq!(expiry(NOW + 1), NOW + 600);
    assert_eq!(expiry(NOW + 299), NOW + 600);
    assert_eq!(expiry(NOW + 300), NOW + 600);
    assert_eq!(expiry(NOW + 301), NOW + 900);
    for now in NOW..NOW + 2 * EXPIRY_WINDOW_SECONDS {
        let expires = expiry(now);
        // lives at least a window, and the broker at `now` accepts it with any allowed skew
        assert!(expires >= now + EXPIRY_WINDOW_SECONDS, "{now}");
        assert!(
            expires - now + CLOCK_SKEW_MAX_SECONDS <= EXPIRES_AHEAD_MAX_SECONDS,
            "{now}"
        );
        assert_eq!(expires % EXPIRY_WINDOW_SECONDS, 0);
    }
    assert_eq!(expiry(u64::MAX), u64::MAX);
}

#[test]
fn the_retired_r2_and_r3_encodings_are_refused() {
    // names of the previous encodings, laid out as they were (r2: no host, tag nor expiry;
    // r3: the layout of r4 under HMAC-SHA256), whatever their seal
    let body = "team-a/s.regcred/d.r.example/app";
    let seal = key().seal(&format!("r2/{body}"));
    assert_eq!(
        decode(&format!("r2/{seal}/{body}")),
        Err(Refusal::NotEncoded)
    );
    let r4 = sealed(body);
    assert_eq!(
        decode(&r4.replacen("r4/", "r3/", 1)),
        Err(Refusal::NotEncoded)
    );
    assert!(decode(&r4).is_ok());
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
    let decoded = decode(&encode(&hostile).unwrap()).unwrap();
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
        if let Ok(encoded) = encode(&lookup) {
            encoded_count += 1;
            assert!(is_repository(&encoded), "{encoded}");
            assert_eq!(decode(&encoded).as_ref(), Ok(&lookup));
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
    let valid = encode(&name(
        "team-a",
        secrets(&["regcred", "b"]),
        "localhost:5000",
        "app/web",
    ))
    .unwrap();
    let head = VERSION.len() + 1 + SEAL_LENGTH + 1 + EXPIRES.to_string().len() + 1;
    let body = valid[head..].to_owned();
    for _ in 0..50_000 {
        let mut bytes = body.clone().into_bytes();
        let at = rng.below(bytes.len());
        bytes[at] = ALPHABET[rng.below(ALPHABET.len())];
        let mutated = String::from_utf8(bytes).unwrap();
        // the old seal on a changed body: refused, whatever the body says
        let resealed = format!("{}{mutated}", &valid[..head]);
        if mutated != body {
            assert_eq!(decode(&resealed), Err(Refusal::Unsealed), "{resealed}");
        }
        // sealed anew (as only a key holder can): decoded only when canonical
        for candidate in [sealed(&mutated), sealed(&rng.string(ALPHABET, 30))] {
            if let Ok(decoded) = decode(&candidate) {
                assert_eq!(encode(&decoded).as_deref(), Ok(candidate.as_str()));
            }
        }
    }
}

#[test]
fn only_a_holder_of_the_key_writes_a_name_the_broker_answers() {
    let lookup = name("team-a", secrets(&["regcred"]), "r.example", "app");
    let other = SealingKey::new(vec![7u8; 32]).unwrap();
    let hosts = hosts();
    let with = |keys: &[SealingKey], name: &str| {
        BrokeredName::decode(name, &tag("t1"), &broker(keys, &hosts, NOW))
    };
    let encoded = encode(&lookup).unwrap();
    assert_eq!(
        with(std::slice::from_ref(&other), &encoded),
        Err(Refusal::Unsealed)
    );
    // a broker holding both keys (a key being rotated) accepts either
    assert_eq!(with(&[other.clone(), key()], &encoded), Ok(lookup.clone()));
    let by_other = lookup.encode(&other, HOST, &tag("t1"), EXPIRES).unwrap();
    assert_eq!(with(&[other.clone(), key()], &by_other), Ok(lookup.clone()));
    // once the old key is gone, its names are refused
    assert_eq!(with(&[key()], &by_other), Err(Refusal::Unsealed));
    assert_eq!(with(&[], &encoded), Err(Refusal::Unsealed));
    // another namespace under the same seal, or no seal at all
    let swapped = encoded.replace("team-a", "team-b");
    assert_eq!(decode(&swapped), Err(Refusal::Unsealed));
    let zeros = format!(
        "{VERSION}/{}/{EXPIRES}/team-a/s.regcred/d.r.example/app",
        "0".repeat(32)
    );
    assert_eq!(decode(&zeros), Err(Refusal::Unsealed));
    for unsealed in [
        "r1/team-a/s.regcred/d.r.example/app",
        "r4/team-a/s.regcred/d.r.example/app",
        "r4/1767225900/team-a/s.regcred/d.r.example/app",
    ] {
        assert_eq!(decode(unsealed), Err(Refusal::NotEncoded), "{unsealed}");
    }
    // keys too short to be one, and a key that never prints
    assert_eq!(
        SealingKey::new(vec![1u8; 31]).map(|_| ()),
        Err(Refusal::ShortKey)
    );
    assert_eq!(format!("{:?}", key()), "SealingKey(..)");
}

#[test]
fn the_seal_is_the_keyed_blake3_hash_of_the_reference_truncated_to_128_bits() {
    // the construction the `spec` module gives, written out: the key derived from the
    // Secret's bytes, then the first 16 bytes of the keyed hash of the reference with the seal
    // left out
    let lookup = name("team-a", secrets(&[]), "r", "app");
    let digest = format!("sha256:{}", "c".repeat(64));
    let encoded = lookup
        .encode(
            &key(),
            HOST,
            &ManifestReference::Digest(digest.clone()),
            EXPIRES,
        )
        .unwrap();
    let derived = blake3::derive_key(KEY_CONTEXT, b"0123456789abcdef0123456789abcdef");
    let message = format!("{HOST}/r4/{EXPIRES}/team-a/n/d.r/app@{digest}");
    let full = blake3::keyed_hash(&derived, message.as_bytes()).to_hex();
    assert_eq!(
        encoded,
        format!("r4/{}/{EXPIRES}/team-a/n/d.r/app", &full[..SEAL_LENGTH])
    );
    // a seal of another length is never a match, however it begins
    let parts = SealedParts {
        host_key: HOST,
        expires: &EXPIRES.to_string(),
        body: "team-a/n/d.r/app",
        asked: Asked::Digest(&digest),
    };
    let bytes = key().mac(&parts);
    assert!(key().verifies(&bytes.as_bytes()[..16], &parts));
    assert!(!key().verifies(&bytes.as_bytes()[..15], &parts));
    assert!(!key().verifies(&bytes.as_bytes()[..], &parts));
}

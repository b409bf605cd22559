//! What a registry lookup established about one image, and how the host's error texts map onto
//! it. The host reports failures only as text, so classification is by recognised substrings;
//! anything unrecognised is "unreachable", never "absent": only a registry that was allowed to
//! see the repository and answered 404 proves an image cannot be pulled.

use std::fmt;

use serde::Deserialize;

/// The outcome of checking one normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The registry has the manifest; the pull will find it.
    Resolved {
        /// The manifest digest the registry answered.
        digest: String,
    },
    /// The image will not be pulled as written, or could not be verified.
    Failed(Failure),
}

/// Why an image failed, or could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The class of failure, which selects the configured action.
    pub kind: FailureKind,
    /// A one-line explanation taken from the registry or the parser; never secret material.
    pub detail: String,
}

impl Failure {
    /// A failure of `kind` explained by `detail`.
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
        }
    }
}

/// The classes of failure operators give actions to. The names are the setting keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// The registry said the tag, digest or repository does not exist: the pull will fail.
    Absent,
    /// The image string is not a reference the kubelet can parse (`InvalidImageName`).
    InvalidReference,
    /// The registry refused the lookup (401/403): the image may exist but is private.
    Unauthorized,
    /// The registry could not be asked or gave no usable answer (network, 5xx, 429, time-out).
    Unreachable,
    /// The policy host refused the lookup itself (capability not granted or not implemented).
    HostRefused,
    /// A pull secret (or the ServiceAccount that should supply them) does not exist; the
    /// kubelet skips it and pulls with whatever else matches.
    MissingPullSecret,
    /// A pull secret is not of a docker-config type; the kubelet ignores it.
    WrongPullSecretType,
    /// A pull secret does not decode; the kubelet then fails every pull of the pod.
    MalformedPullSecret,
    /// The registry refused the lookup and no pull secret of the pod covers that registry.
    UncoveredRegistry,
    /// The image exists but has no manifest for a platform its pods must run on.
    MissingPlatform,
}

impl FailureKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [FailureKind; 10] = [
        FailureKind::Absent,
        FailureKind::InvalidReference,
        FailureKind::Unauthorized,
        FailureKind::Unreachable,
        FailureKind::HostRefused,
        FailureKind::MissingPullSecret,
        FailureKind::WrongPullSecretType,
        FailureKind::MalformedPullSecret,
        FailureKind::UncoveredRegistry,
        FailureKind::MissingPlatform,
    ];

    /// True when the failure proves the pull will fail, as opposed to "could not verify".
    pub fn is_certain(self) -> bool {
        matches!(
            self,
            FailureKind::Absent
                | FailureKind::InvalidReference
                | FailureKind::MalformedPullSecret
                | FailureKind::MissingPlatform
        )
    }

    /// The setting key, as operators write it.
    pub fn setting_key(self) -> &'static str {
        match self {
            FailureKind::Absent => "absent",
            FailureKind::InvalidReference => "invalidReference",
            FailureKind::Unauthorized => "unauthorized",
            FailureKind::Unreachable => "unreachable",
            FailureKind::HostRefused => "hostRefused",
            FailureKind::MissingPullSecret => "missingPullSecret",
            FailureKind::WrongPullSecretType => "wrongPullSecretType",
            FailureKind::MalformedPullSecret => "malformedPullSecret",
            FailureKind::UncoveredRegistry => "uncoveredRegistry",
            FailureKind::MissingPlatform => "missingPlatform",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Absent => "not found",
            FailureKind::InvalidReference => "invalid image reference",
            FailureKind::Unauthorized => "not authorized",
            FailureKind::Unreachable => "registry unreachable",
            FailureKind::HostRefused => "lookup refused by the policy host",
            FailureKind::MissingPullSecret => "missing pull secret",
            FailureKind::WrongPullSecretType => "pull secret of the wrong type",
            FailureKind::MalformedPullSecret => "malformed pull secret",
            FailureKind::UncoveredRegistry => "not authorized",
            FailureKind::MissingPlatform => "no manifest for a required platform",
        })
    }
}

/// Longest detail quoted from a host error, so one odd registry cannot flood a message.
const DETAIL_MAX: usize = 300;

/// Substrings that identify each class, matched case-insensitively, checked in this order.
/// The host's own refusals come first (they can quote any operation); authorisation comes
/// before absence because some registries say "denied" with a 404-looking body.
const PATTERNS: [(FailureKind, &[&str]); 4] = [
    (
        FailureKind::HostRefused,
        &[
            "has not been granted access",
            "unknown binding",
            "unknown namespace",
            "unknown operation",
        ],
    ),
    (
        FailureKind::InvalidReference,
        &[
            "invalid reference format",
            "repository name must be lowercase",
        ],
    ),
    (
        FailureKind::Unauthorized,
        &[
            "not authorized",
            "code: 401",
            "code: 403",
            "oci api error: denied",
            "oci api error: unauthorized",
            "authentication required",
        ],
    ),
    (
        FailureKind::Absent,
        &[
            "manifest unknown",
            "repository name not known",
            "oci api error: name unknown",
            "image manifest not found",
            "code: 404",
        ],
    ),
];

/// Classifies the error text of a failed `oci/v1/manifest_digest` call.
pub fn classify_host_error(text: &str) -> Failure {
    let lower = text.to_ascii_lowercase();
    let matches = |kind: FailureKind| {
        PATTERNS
            .iter()
            .filter(|(k, _)| *k == kind)
            .any(|(_, needles)| needles.iter().any(|needle| lower.contains(needle)))
    };
    // The host's own refusal first; then the HTTP status when the text has one, since the
    // body it quotes is the registry's (a 503 may quote an upstream's "manifest unknown");
    // then the recognised phrases of bodies without a status.
    let kind = if matches(FailureKind::HostRefused) {
        FailureKind::HostRefused
    } else if let Some(kind) = http_status(&lower).and_then(kind_of_status) {
        kind
    } else {
        PATTERNS
            .iter()
            .find(|(_, needles)| needles.iter().any(|needle| lower.contains(needle)))
            .map_or(FailureKind::Unreachable, |(kind, _)| *kind)
    };
    Failure::new(kind, summarise(text))
}

/// The status of oci-client's `Server error: url …, code: NNN, message: …`.
fn http_status(lower: &str) -> Option<u16> {
    let (_, after) = lower.split_once(", code: ")?;
    after.get(..3)?.parse().ok()
}

/// What a status says on its own, when it says something.
fn kind_of_status(status: u16) -> Option<FailureKind> {
    match status {
        401 | 403 => Some(FailureKind::Unauthorized),
        404 => Some(FailureKind::Absent),
        408 | 429 | 500..=599 => Some(FailureKind::Unreachable),
        _ => None,
    }
}

/// The useful part of a host error: the innermost message of the first line, plus the root
/// cause of a live host's "Caused by:" chain (e.g. `Connection refused (os error 111)`).
pub fn summarise(text: &str) -> String {
    const PREFIXES: [&str; 4] = [
        "Fail to interact with OCI registry: ",
        "Callback evaluation failure: ",
        "Host error: ",
        "error invoking host capability ",
    ];
    let first_line = text.lines().next().unwrap_or_default().trim();
    let message = PREFIXES
        .iter()
        .filter_map(|prefix| first_line.rfind(prefix).map(|i| i + prefix.len()))
        .max()
        .map_or(first_line, |start| &first_line[start..]);
    let root_cause = text
        .split_once("Caused by:")
        .and_then(|(_, chain)| chain.lines().rev().map(str::trim).find(|l| !l.is_empty()))
        .map(strip_chain_number)
        .filter(|cause| !message.contains(cause));
    let summary = match root_cause {
        Some(cause) => format!("{message} ({cause})"),
        None => message.to_owned(),
    };
    truncate(&summary, DETAIL_MAX)
}

/// `3: Connection refused` → `Connection refused`.
fn strip_chain_number(line: &str) -> &str {
    match line.split_once(": ") {
        Some((number, rest)) if number.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => line,
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let ellipsis = '…';
    let mut end = max.saturating_sub(ellipsis.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str =
        "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: ";

    /// The live form: first line, then an anyhow "Caused by:" chain.
    fn live(detail: &str, chain: &[&str]) -> String {
        let mut text = format!("{PREFIX}{detail}\n\nCaused by:\n");
        for (i, line) in chain.iter().enumerate() {
            if chain.len() == 1 {
                text.push_str(&format!("    {line}\n"));
            } else {
                text.push_str(&format!("    {i}: {line}\n"));
            }
        }
        text
    }

    /// The replayed form: only the first line.
    fn replayed(detail: &str) -> String {
        format!("{PREFIX}{detail}")
    }

    #[test]
    fn every_reference_doc_text_is_classified() {
        let manifest_unknown = "Registry error: url http://127.0.0.1:5000/v2/test/app/manifests/does-not-exist, envelope: OCI API errors: [OCI API error: manifest unknown]";
        let name_unknown = "Registry error: url https://r.example/v2/x/manifests/1, envelope: OCI API errors: [OCI API error: repository name not known to registry]";
        let denied = "Registry error: url https://r.example/v2/x/manifests/1, envelope: OCI API errors: [OCI API error: denied]";
        let unauthorized = "Not authorized: url http://127.0.0.1:5001/v2/test/app/manifests/v1";
        let not_found_no_body =
            "Server error: url https://r.example/v2/x/manifests/1, code: 404, message: ";
        let forbidden_no_body =
            "Server error: url https://r.example/v2/x/manifests/1, code: 403, message: ";
        let server_error = "Server error: url https://r.example/v2/x/manifests/1, code: 503, message: Service Unavailable";
        let too_many = "Server error: url https://r.example/v2/x/manifests/1, code: 429, message: TOOMANYREQUESTS";
        let down = "error sending request for url (http://127.0.0.1:5999/v2/test/app/manifests/v1)";
        let cases: [(String, FailureKind); 14] = [
            (live(manifest_unknown, &[manifest_unknown]), FailureKind::Absent),
            (replayed(manifest_unknown), FailureKind::Absent),
            (replayed(name_unknown), FailureKind::Absent),
            (replayed(not_found_no_body), FailureKind::Absent),
            (live(unauthorized, &[unauthorized]), FailureKind::Unauthorized),
            (replayed(unauthorized), FailureKind::Unauthorized),
            (replayed(denied), FailureKind::Unauthorized),
            (replayed(forbidden_no_body), FailureKind::Unauthorized),
            (
                live(
                    down,
                    &[down, "client error (Connect)", "tcp connect error", "Connection refused (os error 111)"],
                ),
                FailureKind::Unreachable,
            ),
            (replayed(down), FailureKind::Unreachable),
            (replayed(server_error), FailureKind::Unreachable),
            (replayed(too_many), FailureKind::Unreachable),
            (
                "error invoking host capability oci.manifest_digest: Host error: Policy has not been granted access to the 'oci/v1/manifest_digest' host capability. The violation has been reported.".into(),
                FailureKind::HostRefused,
            ),
            (
                "error invoking host capability oci.manifest_digest: Host error: unknown operation: v2/manifest_digest".into(),
                FailureKind::HostRefused,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(classify_host_error(&text).kind, expected, "{text}");
        }
    }

    #[test]
    fn a_status_outweighs_the_body_it_quotes() {
        let cases = [
            ("Server error: url https://m/v2/a/manifests/1, code: 503, message: {\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest unknown\"}]}", FailureKind::Unreachable),
            ("Server error: url https://m/v2/a/manifests/1, code: 502, message: not authorized upstream", FailureKind::Unreachable),
            ("Server error: url https://m/v2/a/manifests/1, code: 429, message: manifest unknown", FailureKind::Unreachable),
            ("Server error: url https://m/v2/a/manifests/1, code: 404, message: denied", FailureKind::Absent),
            ("Server error: url https://m/v2/a/manifests/1, code: 418, message: manifest unknown", FailureKind::Absent),
        ];
        for (detail, expected) in cases {
            assert_eq!(
                classify_host_error(&replayed(detail)).kind,
                expected,
                "{detail}"
            );
        }
    }

    #[test]
    fn unknown_texts_are_unreachable_never_absent() {
        for text in [
            "",
            "something odd happened",
            "received corrupt message of type InvalidContentType",
        ] {
            assert_eq!(classify_host_error(text).kind, FailureKind::Unreachable);
        }
    }

    #[test]
    fn invalid_reference_from_the_host() {
        let failure = classify_host_error(&replayed("invalid reference format"));
        assert_eq!(failure.kind, FailureKind::InvalidReference);
    }

    #[test]
    fn summary_keeps_the_registry_message_and_root_cause() {
        let down = "error sending request for url (http://127.0.0.1:5999/v2/test/app/manifests/v1)";
        let text = live(
            down,
            &[
                down,
                "client error (Connect)",
                "tcp connect error",
                "Connection refused (os error 111)",
            ],
        );
        assert_eq!(
            summarise(&text),
            format!("{down} (Connection refused (os error 111))")
        );
        let unknown = "Registry error: url http://h/v2/a/manifests/b, envelope: OCI API errors: [OCI API error: manifest unknown]";
        assert_eq!(summarise(&live(unknown, &[unknown])), unknown);
        assert_eq!(summarise(&replayed(unknown)), unknown);
    }

    #[test]
    fn summary_is_bounded() {
        let text = "é".repeat(1000);
        let summary = summarise(&text);
        assert!(summary.len() <= DETAIL_MAX);
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn certainty_matches_the_mission() {
        let certain: Vec<_> = FailureKind::ALL
            .into_iter()
            .filter(|k| k.is_certain())
            .collect();
        assert_eq!(
            certain,
            [
                FailureKind::Absent,
                FailureKind::InvalidReference,
                FailureKind::MalformedPullSecret,
                FailureKind::MissingPlatform
            ]
        );
    }
}

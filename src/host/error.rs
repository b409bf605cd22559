//! Host errors: the host reports a failed call only as text, so it is classified here, once,
//! by recognised substrings of the capability that failed. Anything unrecognised is
//! "unreachable", never "not found": only a registry that was allowed to see the repository
//! and answered 404 proves an image cannot be pulled.

use crate::vocabulary::failure::{Failure, FailureKind, Observed};
use crate::vocabulary::text::truncate;

/// What a failed host call means, as far as its text tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostErrorKind {
    /// The host refused the call itself: capability not granted, unknown operation.
    Refused,
    /// The host could not parse the image reference it was given.
    InvalidReference,
    /// The registry refused the lookup (401/403, `denied`).
    Unauthorized,
    /// The registry, or the API server, said the thing asked for does not exist.
    NotFound,
    /// Anything else: network, 5xx, 429, an unreadable answer, an unknown text.
    Unreachable,
}

/// A failed host call: the host's text and what it means. Its text is [`HostError::summary`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.summary())]
pub struct HostError {
    kind: HostErrorKind,
    text: String,
    /// An [`HostErrorKind::Unauthorized`] whose registry said `DENIED` (it refused the
    /// credential it was sent), as opposed to a bare 401 asking for one.
    denied: bool,
    /// Whether the text carries an HTTP answer (a status, an OCI error), as opposed to a
    /// request that never got one (refused connection, time-out, TLS).
    answered: bool,
}

/// Longest detail quoted from a host error, so one odd registry cannot flood a message.
const DETAIL_MAX: usize = 300;

/// Substrings that identify each class of registry error, matched case-insensitively, checked
/// in this order. The host's own refusals come first (they can quote any operation);
/// authorisation comes before absence because some registries say "denied" with a
/// 404-looking body.
const LOOKUP_PATTERNS: [(HostErrorKind, &[&str]); 4] = [
    (HostErrorKind::Refused, REFUSALS),
    (
        HostErrorKind::InvalidReference,
        // The host's reference parsers' words (oci-client's, kwctl's), matched as they say
        // them; the policy's own parser words its refusals differently.
        &[
            "invalid reference format",
            "repository name must be lowercase",
        ],
    ),
    (
        HostErrorKind::Unauthorized,
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
        HostErrorKind::NotFound,
        &[
            "manifest unknown",
            "repository name not known",
            "oci api error: name unknown",
            "image manifest not found",
            "code: 404",
        ],
    ),
];

/// The host's own refusals, whatever the capability.
const REFUSALS: &[&str] = &[
    "has not been granted access",
    "unknown binding",
    "unknown namespace",
    "unknown operation",
];

/// How the host says a Kubernetes object does not exist (as opposed to a refused read).
const OBJECT_NOT_FOUND: &[&str] = &["Cannot find", "NotFound", " not found"];

impl HostError {
    /// An error of a registry capability (`oci/…`).
    pub fn lookup(text: impl Into<String>) -> Self {
        let text = text.into();
        let kind = classify_lookup(&text);
        let denied =
            kind == HostErrorKind::Unauthorized && text.to_ascii_lowercase().contains("denied");
        let lower = text.to_ascii_lowercase();
        let answered = kind != HostErrorKind::Unreachable
            || http_status(&lower).is_some()
            || lower.contains("oci api error");
        HostError {
            kind,
            text,
            denied,
            answered,
        }
    }

    /// An error of a Kubernetes capability (`kubernetes/…`).
    pub fn kubernetes(text: impl Into<String>) -> Self {
        let text = text.into();
        let lower = text.to_ascii_lowercase();
        let kind = if REFUSALS.iter().any(|needle| lower.contains(needle)) {
            HostErrorKind::Refused
        } else if OBJECT_NOT_FOUND.iter().any(|needle| text.contains(needle)) {
            HostErrorKind::NotFound
        } else {
            HostErrorKind::Unreachable
        };
        HostError {
            kind,
            text,
            denied: false,
            answered: kind != HostErrorKind::Unreachable,
        }
    }

    /// The host's text, whole.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// What the error means.
    pub fn kind(&self) -> HostErrorKind {
        self.kind
    }

    /// True when the registry refused the credential it was sent (`DENIED`), rather than
    /// asking for one (a bare 401): the lookup broker's refusal of every pod credential, not
    /// its refusal of the policy server.
    pub fn registry_denied(&self) -> bool {
        self.denied
    }

    /// The words of an OCI `DENIED` error after its `denied: `, when the text has one: what
    /// the lookup broker says of a pod's pull secrets (it writes every `DENIED` it sends).
    pub fn denied_words(&self) -> Option<&str> {
        const MARK: &str = "oci api error: denied: ";
        if !self.denied {
            return None;
        }
        let at = self.text.to_ascii_lowercase().find(MARK)? + MARK.len();
        let rest = self.text[at..].lines().next().unwrap_or_default();
        Some(rest.trim_end().trim_end_matches(']'))
    }

    /// True when a server answered (with a status or an OCI error): the lookup reached
    /// whoever it asked. False for a connection that failed or timed out.
    pub fn got_an_answer(&self) -> bool {
        self.answered
    }

    /// `CODE: message` when the text is a server error whose body is in the OCI error format:
    /// the words of whoever answered, without the URL and status (the lookup broker's reason,
    /// in the room a warning has).
    pub fn answer_words(&self) -> Option<String> {
        let head = self.text.split("\n\nCaused by:").next()?;
        http_status(&head.to_ascii_lowercase())?;
        let (_, body) = head.split_once(", message: ")?;
        envelope_words(body)
    }

    /// True when the registry or the API server said the thing does not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind == HostErrorKind::NotFound
    }

    /// The error as a registry failure, with the useful part of the text as its detail. The
    /// policy validated the reference before asking, so a host that cannot parse it only says
    /// the host cannot look that form up: the kubelet may well pull it.
    pub fn failure(&self) -> Failure {
        let kind = match self.kind {
            HostErrorKind::Refused => FailureKind::HostRefused,
            HostErrorKind::Unauthorized => FailureKind::Unauthorized,
            HostErrorKind::NotFound => FailureKind::Absent,
            HostErrorKind::InvalidReference | HostErrorKind::Unreachable => {
                FailureKind::Unreachable
            }
        };
        let summary = self.summary();
        match self.kind {
            HostErrorKind::InvalidReference => Failure::observed(
                kind,
                Observed::HostCannotParse,
                format!("no request sent; the kubelet pulls it: {summary}"),
            ),
            _ => Failure::new(kind, summary),
        }
    }

    /// The useful part of the text: the innermost message of the first line, plus the root
    /// cause of a live host's "Caused by:" chain (e.g. `Connection refused (os error 111)`).
    /// Only what a registry says in the OCI error format is quoted: any other response body is
    /// described by its size, since an image may name any HTTP service of the cluster and its
    /// pages must not be read back to whoever created the Pod.
    pub fn summary(&self) -> String {
        summarise(&describe_bodies(&self.text))
    }
}

/// Classifies the text of a failed registry lookup.
fn classify_lookup(text: &str) -> HostErrorKind {
    let lower = text.to_ascii_lowercase();
    let matches = |needles: &[&str]| needles.iter().any(|needle| lower.contains(needle));
    // The host's own refusal first; then the HTTP status when the text has one, since the
    // body it quotes is the registry's (a 503 may quote an upstream's "manifest unknown");
    // then the recognised phrases of bodies without a status.
    if matches(REFUSALS) {
        return HostErrorKind::Refused;
    }
    if let Some(kind) = http_status(&lower).and_then(kind_of_status) {
        return kind;
    }
    LOOKUP_PATTERNS
        .iter()
        .find(|(_, needles)| matches(needles))
        .map_or(HostErrorKind::Unreachable, |(kind, _)| *kind)
}

/// The status of oci-client's `Server error: url …, code: NNN, message: …`.
fn http_status(lower: &str) -> Option<u16> {
    let (_, after) = lower.split_once(", code: ")?;
    after.get(..3)?.parse().ok()
}

/// What a status says on its own, when it says something.
fn kind_of_status(status: u16) -> Option<HostErrorKind> {
    match status {
        401 | 403 => Some(HostErrorKind::Unauthorized),
        404 => Some(HostErrorKind::NotFound),
        408 | 429 | 500..=599 => Some(HostErrorKind::Unreachable),
        _ => None,
    }
}

/// `text` with the response body of oci-client's `Server error: url …, code: NNN, message:
/// BODY` replaced by its size, and every other quoted string outside an OCI error envelope
/// (parsers quote what they could not read) by its size. A live host repeats the body in its
/// "Caused by:" chain, which is then dropped.
fn describe_bodies(text: &str) -> String {
    const MESSAGE: &str = ", message: ";
    let head = text.split("\n\nCaused by:").next().unwrap_or(text);
    if let Some(status_at) = head.find(", code: ") {
        if let Some(body_at) = head[status_at..].find(MESSAGE).map(|i| status_at + i) {
            let body = &head[body_at + MESSAGE.len()..];
            let description = if body.trim().is_empty() {
                "an empty body".to_owned()
            } else if let Some(said) = envelope_words(body) {
                said
            } else {
                format!("a non-registry body of {} bytes", body.len())
            };
            return format!("{}, {description}", &head[..body_at]);
        }
    }
    if text.contains("OCI API errors:") {
        return text.to_owned();
    }
    describe_quotes(text)
}

/// What a body in the OCI error format says (`CODE: message` of its first error): a registry's
/// own words, quoted as the "OCI API errors:" of a 4xx are, where a 5xx carries them (the
/// lookup broker's 503 says why it had no answer).
fn envelope_words(body: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<OciError>,
    }
    #[derive(serde::Deserialize)]
    struct OciError {
        code: String,
        #[serde(default)]
        message: String,
    }
    let envelope = serde_json::Deserializer::from_str(body)
        .into_iter::<Envelope>()
        .next()?
        .ok()?;
    let first = envelope.errors.first()?;
    Some(match first.message.trim() {
        "" => first.code.clone(),
        message => format!("{}: {message}", first.code),
    })
}

/// Replaces each `"…"` and `` `…` `` in `text` by the size of what it quoted.
fn describe_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(['"', '`']) {
        let quote = &rest[open..=open];
        let Some(len) = rest[open + 1..].find(quote) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&format!("<{len} bytes>"));
        rest = &rest[open + 1 + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The useful part of a host error text; see [`HostError::summary`].
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
            assert_eq!(
                HostError::lookup(text.as_str()).failure().kind,
                expected,
                "{text}"
            );
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
                HostError::lookup(replayed(detail)).failure().kind,
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
            assert_eq!(
                HostError::lookup(text).failure().kind,
                FailureKind::Unreachable
            );
        }
    }

    #[test]
    fn a_reference_the_host_cannot_parse_is_unverified_never_invalid() {
        // The policy parsed it first; only the host's client refuses (e.g. a bracketed IPv6
        // registry), so the kubelet may still pull it.
        let error = HostError::lookup(replayed("invalid reference format"));
        assert_eq!(error.kind(), HostErrorKind::InvalidReference);
        let failure = error.failure();
        assert_eq!(failure.kind, FailureKind::Unreachable);
        assert_eq!(failure.observed, Observed::HostCannotParse);
        assert_eq!(failure.label(), "cannot be parsed by the policy server");
        assert_eq!(
            failure.detail,
            "no request sent; the kubelet pulls it: invalid reference format"
        );
    }

    #[test]
    fn bodies_that_are_not_registry_errors_are_described_not_quoted() {
        let page = "<html><body>Internal admin console: user list …</body></html>";
        let status = format!(
            "Server error: url http://10.0.0.7:8080/v2/a/manifests/1, code: 404, message: {page}"
        );
        for text in [live(&status, &[&status]), replayed(&status)] {
            let error = HostError::lookup(text.as_str());
            let failure = error.failure();
            assert_eq!(
                failure.kind,
                FailureKind::Absent,
                "the status still decides"
            );
            assert!(
                !failure.detail.contains("admin console"),
                "{}",
                failure.detail
            );
            assert_eq!(
                failure.detail,
                format!(
                    "Server error: url http://10.0.0.7:8080/v2/a/manifests/1, code: 404, a non-registry body of {} bytes",
                    page.len()
                )
            );
        }
        let multi_line = replayed("Server error: url http://h/v2/a/manifests/1, code: 502, message: <html>\nsecret\n</html>");
        let detail = HostError::lookup(multi_line).failure().detail;
        assert!(
            detail.ends_with("code: 502, a non-registry body of 21 bytes"),
            "{detail}"
        );
        let empty = replayed("Server error: url http://h/v2/a/manifests/1, code: 500, message: ");
        assert!(HostError::lookup(empty)
            .failure()
            .detail
            .ends_with("code: 500, an empty body"));
        let parse = replayed("Failed to parse manifest: invalid type: string \"internal secret page\", expected struct at line 1 column 22");
        let detail = HostError::lookup(parse).failure().detail;
        assert!(!detail.contains("secret page"), "{detail}");
        assert!(
            detail.contains("invalid type: string <20 bytes>, expected struct"),
            "{detail}"
        );
    }

    #[test]
    fn registry_errors_in_the_oci_format_are_quoted() {
        let envelope = "Registry error: url http://h/v2/a/manifests/1, envelope: OCI API errors: [OCI API error: manifest unknown to \"team\"]";
        assert_eq!(
            HostError::lookup(replayed(envelope)).failure().detail,
            envelope
        );
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
    fn kubernetes_errors_tell_missing_objects_from_refused_reads() {
        let missing = HostError::kubernetes(
            "error invoking host capability kubernetes.get_resource: Host error: Cannot find v1/Secret named 'regcred' inside of namespace 'Some(\"team-a\")'",
        );
        assert!(missing.is_not_found());
        let refused = HostError::kubernetes(
            "Policy has not been granted access to Kubernetes v1/Secret resources. The violation has been reported.",
        );
        assert_eq!(refused.kind(), HostErrorKind::Refused);
        let down = HostError::kubernetes("error sending request: connection refused");
        assert_eq!(down.kind(), HostErrorKind::Unreachable);
        assert!(!down.is_not_found());
    }

    #[test]
    fn a_lookup_text_saying_not_found_is_not_a_missing_object() {
        // A DNS failure mentions "not found" but proves nothing about the image.
        let dns = HostError::lookup(
            "error sending request for url (https://typo.example/v2/): dns error: host not found",
        );
        assert_eq!(dns.failure().kind, FailureKind::Unreachable);
    }
}

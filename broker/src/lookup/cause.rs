//! Why a lookup got no definitive answer, in words the caller may read. The registry is a
//! Pod author's choice and may be an internal host: its status line, body and the addresses
//! it leads to stay in the broker's log (for the operator), and the caller (the policy, whose
//! warning the Pod author reads) gets one of these classes only, so that a tenant who writes a
//! pull secret for an internal host learns nothing of which hosts and ports answer.

use registry_client::credential_loop::Unanswered;

/// The class of an attempt without a definitive answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Nothing came back in time.
    Timeout,
    /// The connection could not be opened, or broke.
    ConnectionFailed,
    /// The TLS handshake failed (certificate, protocol).
    TlsFailed,
    /// A 5xx.
    ServerError,
    /// A 429.
    RateLimited,
    /// The registry, its token realm or a redirect leads where the broker may not connect.
    RefusedDestination,
    /// A redirect to another host, or from HTTPS to HTTP.
    RefusedRedirect,
    /// A plain-HTTP token realm of an HTTPS registry, which credentials are not sent to.
    InsecureRealm,
    /// An answer larger than the broker reads.
    TooLarge,
    /// A credential the broker cannot send (an identity token alone).
    UnusableCredential,
    /// The lookup's time ran out with credentials left untried.
    Incomplete,
    /// Any other answer that settles nothing (an unknown error code, an unreadable answer).
    Unexpected,
}

/// Words of the registry client's reasons, lower case, for each class, checked in order: the
/// broker's own refusals first (they can wrap a transport error), TLS before the connection
/// (a failed handshake is also a failed request).
const PATTERNS: [(Cause, &[&str]); 9] = [
    (
        Cause::RefusedDestination,
        &[
            "refused by policy",
            "refused network",
            "refused addresses",
            "metadata service",
            "allowed on another port",
            "the broker itself",
        ],
    ),
    (Cause::RefusedRedirect, &["redirect"]),
    (Cause::InsecureRealm, &["not sent in clear"]),
    (Cause::TooLarge, &["larger than"]),
    (
        Cause::RateLimited,
        &["code: 429", "toomanyrequests", "too many requests"],
    ),
    (Cause::ServerError, &[", code: 5"]),
    (
        Cause::TlsFailed,
        &["certificate", "tls", "handshake", "ssl", "x509"],
    ),
    (Cause::Timeout, &["timed out", "timeout", "deadline"]),
    (
        Cause::ConnectionFailed,
        &[
            "connect",
            "dns error",
            "error sending request",
            "broken pipe",
            "reset",
            "connection closed",
        ],
    ),
];

impl Cause {
    /// The class of `reason`.
    pub fn of(reason: &Unanswered) -> Cause {
        let text = match reason {
            Unanswered::NoAnswer { .. } => return Cause::Timeout,
            Unanswered::UnusableCredential => return Cause::UnusableCredential,
            Unanswered::Indefinite(text) => text.to_ascii_lowercase(),
        };
        if text.contains("not every credential was tried") {
            return Cause::Incomplete;
        }
        PATTERNS
            .iter()
            .find(|(_, needles)| needles.iter().any(|needle| text.contains(needle)))
            .map_or(Cause::Unexpected, |(cause, _)| *cause)
    }

    /// What the caller is told: the class, and for a time-out the broker's own time.
    pub fn words(self, reason: &Unanswered) -> String {
        let class = match self {
            Cause::Timeout => match reason {
                Unanswered::NoAnswer { .. } => return format!("timeout: {reason}"),
                _ => "timeout",
            },
            Cause::ConnectionFailed => "connection failed",
            Cause::TlsFailed => "TLS failed",
            Cause::ServerError => "server error (5xx)",
            Cause::RateLimited => "rate limited (429)",
            Cause::RefusedDestination => {
                "refused destination: the registry, its token realm or a redirect leads where the broker does not connect"
            }
            Cause::RefusedRedirect => "redirect refused (another host, or HTTPS to HTTP)",
            Cause::InsecureRealm => {
                "token realm refused: credentials are not sent in clear to a plain-HTTP realm"
            }
            Cause::TooLarge => "answer larger than the broker reads",
            Cause::UnusableCredential => return reason.to_string(),
            Cause::Incomplete => "the lookup time ran out before every credential was tried",
            Cause::Unexpected => "unexpected answer",
        };
        class.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn indefinite(text: &str) -> Unanswered {
        Unanswered::Indefinite(text.into())
    }

    /// The registry client's texts (a few real shapes of each) and their classes; the words
    /// the caller gets never quote the registry's status line, body or the address.
    #[test]
    fn each_reason_gets_its_class_and_the_caller_none_of_its_text() {
        let cases = [
            ("Fail to interact with OCI registry: Server error: url http://10.0.0.7:6379/v2/a/manifests/1, code: 502, message: <html>redis says hi</html>", Cause::ServerError),
            ("Fail to interact with OCI registry: Server error: url http://r/v2/a/manifests/1, code: 429, message: slow down", Cause::RateLimited),
            ("Fail to interact with OCI registry: Registry error: url http://r/v2/, envelope: OCI API errors: [OCI API error: toomanyrequests]", Cause::RateLimited),
            ("Fail to interact with OCI registry: Generic error: Some(\"destination refused by policy: http://169.254.169.254/token\")", Cause::RefusedDestination),
            ("error sending request for url (http://internal.example:22/v2/): client error (Connect): dns error: internal.example resolves only to refused addresses", Cause::RefusedDestination),
            ("error following redirect for url (http://r/v2/): redirect to another host or from HTTPS to HTTP refused", Cause::RefusedRedirect),
            ("Generic error: Some(\"credentials are not sent in clear to http://r/token\")", Cause::InsecureRealm),
            ("Generic error: Some(\"a token answer from http://r/token is larger than 1024 KiB, more than is read\")", Cause::TooLarge),
            ("error sending request for url (https://r/v2/): client error (Connect): invalid peer certificate: UnknownIssuer", Cause::TlsFailed),
            ("error sending request for url (http://10.0.0.8:5432/v2/): client error (Connect): tcp connect error: Connection refused (os error 111)", Cause::ConnectionFailed),
            ("error sending request for url (http://r/v2/): operation timed out", Cause::Timeout),
            ("Fail to interact with OCI registry: Registry error: url http://r/v2/, envelope: OCI API errors: [OCI API error: unsupported: internal words]", Cause::Unexpected),
            ("not every credential was tried", Cause::Incomplete),
        ];
        for (text, expected) in cases {
            let reason = indefinite(text);
            let cause = Cause::of(&reason);
            assert_eq!(cause, expected, "{text}");
            let words = cause.words(&reason);
            for leak in [
                "10.0.0", "6379", "5432", "redis", "169.254", "internal", "http",
            ] {
                assert!(!words.contains(leak), "{words} quotes {leak}");
            }
        }
    }

    #[test]
    fn a_time_out_keeps_the_brokers_own_time_and_a_credential_its_reason() {
        let silent = Unanswered::NoAnswer {
            within: Duration::from_millis(700),
            lookup_deadline: false,
        };
        assert_eq!(Cause::of(&silent), Cause::Timeout);
        assert_eq!(
            Cause::of(&silent).words(&silent),
            "timeout: no answer within 700 ms"
        );
        let unusable = Unanswered::UnusableCredential;
        assert!(Cause::of(&unusable)
            .words(&unusable)
            .contains("identity tokens"));
    }
}

//! What the credentials tests share, on top of [`crate::testing`]: the secret `team-a/regcred`
//! holding a given document, parsing it, a keyring of parsed secrets, and the credential no
//! text may show.

use serde_json::Value;

use super::{parse_pull_secret, Credential, Keyring, SecretError};
use crate::testing::{b64, config_json_secret, dockercfg_secret};

/// The user of the credential that must never be printed.
pub(super) const SECRET_USER: &str = "us3r-n4me";
/// The password of the credential that must never be printed.
pub(super) const SECRET_PASSWORD: &str = "s3cr3t-pa55";

/// Fails when `text` shows the secret credential: its user, its password, the `auth` holding
/// both, or the password in base64.
pub(super) fn assert_shows_no_secret(text: &str) {
    let auth = b64(format!("{SECRET_USER}:{SECRET_PASSWORD}"));
    let encoded_password = b64(SECRET_PASSWORD);
    for secret in [SECRET_USER, SECRET_PASSWORD, &auth, &encoded_password] {
        assert!(!text.contains(secret), "{text:?} contains {secret:?}");
    }
}

/// A `kubernetes.io/dockerconfigjson` secret `regcred` holding `payload`.
pub(super) fn config_json(payload: &str) -> Value {
    config_json_secret("regcred", payload)
}

/// A `kubernetes.io/dockercfg` secret `regcred` holding `payload`.
pub(super) fn dockercfg(payload: &str) -> Value {
    dockercfg_secret("regcred", payload)
}

/// `secret` parsed as `team-a/regcred`.
pub(super) fn parse(secret: &Value) -> Result<Vec<(String, Credential)>, SecretError> {
    parse_pull_secret("team-a/regcred", secret)
}

/// The keyring of `secrets`, added in order.
pub(super) fn keyring_of(secrets: &[Value]) -> Keyring {
    let mut keyring = Keyring::new();
    for secret in secrets {
        for (key, credential) in parse(secret).unwrap() {
            keyring.add(&key, credential);
        }
    }
    keyring
}

/// A lookup's credentials, owned, to compare with expected ones.
pub(super) fn owned(found: Vec<&Credential>) -> Vec<Credential> {
    found.into_iter().cloned().collect()
}

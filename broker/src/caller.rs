//! Who may ask: only the policy server, with the Basic credential it holds for the broker's
//! host (its `imagePullSecret` entry). Compared in constant time, on digests of the whole
//! `username:password`, so neither the content nor the length leaks through timing.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::StartupError;

/// The expected caller credential, kept only as a digest.
pub struct Caller {
    expected: [u8; 32],
}

impl Caller {
    /// The caller that sends `username` and `password`.
    pub fn new(username: &str, password: &str) -> Self {
        Caller {
            expected: digest(format!("{username}:{password}").as_bytes()),
        }
    }

    /// Reads `username` and `password` from a directory (a mounted `kubernetes.io/basic-auth`
    /// Secret); trailing newlines are ignored. Errors name the file, never its content.
    pub fn from_dir(dir: &std::path::Path) -> Result<Self, StartupError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
                .map_err(|source| StartupError::Read { path, source })
        };
        let (username, password) = (read("username")?, read("password")?);
        if username.is_empty() || password.is_empty() {
            return Err(StartupError::EmptyCaller {
                dir: dir.to_owned(),
            });
        }
        Ok(Caller::new(&username, &password))
    }

    /// True when `authorization` (the header's value) carries the expected Basic credential.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(encoded) = authorization.and_then(|v| {
            let (scheme, rest) = std::str::from_utf8(v).ok()?.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("basic")
                .then(|| rest.trim().to_owned())
        }) else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            return false;
        };
        constant_time_eq(&digest(&decoded), &self.expected)
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Equality that looks at every byte whatever differs.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(s: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
        .into_bytes()
    }

    #[test]
    fn admits_only_the_expected_credential() {
        let caller = Caller::new("policy-server", "s3cret");
        assert!(caller.admits(Some(&basic("policy-server:s3cret"))));
        assert!(caller.admits(Some(b"basic cG9saWN5LXNlcnZlcjpzM2NyZXQ=")));
        for wrong in [
            "policy-server:s3cre",
            "policy-server:s3cret ",
            "other:s3cret",
            ":",
            "",
        ] {
            assert!(!caller.admits(Some(&basic(wrong))), "{wrong:?}");
        }
        assert!(!caller.admits(None));
        assert!(!caller.admits(Some(b"Bearer cG9saWN5LXNlcnZlcjpzM2NyZXQ=")));
        assert!(!caller.admits(Some(b"Basic !!!")));
        assert!(!caller.admits(Some(b"\xff\xfe")));
    }

    #[test]
    fn reads_a_basic_auth_secret_mount() {
        let dir = std::env::temp_dir().join(format!("broker-caller-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("username"), "u\n").expect("write");
        std::fs::write(dir.join("password"), "p").expect("write");
        assert!(Caller::from_dir(&dir)
            .expect("caller")
            .admits(Some(&basic("u:p"))));
        std::fs::write(dir.join("password"), "").expect("write");
        let error = Caller::from_dir(&dir).err().expect("refused").to_string();
        assert!(error.ends_with(": empty username or password"), "{error}");
        assert!(!error.contains("u:"), "{error}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}

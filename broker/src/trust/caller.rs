//! Who may ask: only the policy server, with the Basic credential it holds for the broker's
//! host (its `imagePullSecret` entry). Compared in constant time, on digests of the whole
//! `username:password`, so neither the content nor the length leaks through timing.
//!
//! The credential can be rotated without a restart and without a lookup refused: the mounted
//! Secret is read again on the reload period (crate::telemetry::reloading), and besides
//! `password` every `*-password` key
//! (`next-password` during a switch) is accepted too (docs/broker.md, "Rotating the caller
//! credential"). A reading that fails keeps what was held, and is loud (a warning naming the
//! file, `broker_reload_failures_total{what="callers"}`, `/readyz` false after the grace), as
//! for the keys (crate::trust::keys). A password shorter than [`MIN_PASSWORD_BYTES`] is refused, at
//! start-up and at a reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::telemetry::metrics::{Metrics, Reloaded};
use crate::telemetry::reloading::Reloading;
use crate::trust::error::StartupError;

/// The shortest caller password accepted: 16 bytes, 128 bits when random (the install
/// instructions make 32 random bytes); the credential is all that stands between the
/// network and the broker's lookups.
pub const MIN_PASSWORD_BYTES: usize = 16;

/// The accepted caller credentials, kept only as digests.
pub struct Caller {
    dir: PathBuf,
    held: Reloading<Vec<[u8; 32]>>,
}

impl Caller {
    /// The caller that sends `username` and `password`.
    #[cfg(test)]
    pub fn new(username: &str, password: &str) -> Self {
        let accepted = vec![digest(format!("{username}:{password}").as_bytes())];
        Caller {
            dir: PathBuf::new(),
            // no directory to read again
            held: Reloading::new(Reloaded::Callers, accepted).every(Duration::MAX, Arc::default()),
        }
    }

    /// Reads `username` and `password` (and any `*-password`) from a directory (a mounted
    /// `kubernetes.io/basic-auth` Secret); trailing newlines are ignored. Errors name the file,
    /// never its content.
    pub fn from_dir(dir: &Path) -> Result<Self, StartupError> {
        let accepted = read_dir(dir)?;
        Ok(Caller {
            dir: dir.to_owned(),
            held: Reloading::new(Reloaded::Callers, accepted),
        })
    }

    /// This caller, read again every `every`, its failed readings counted in `metrics`.
    pub fn reloading(mut self, every: Duration, metrics: Arc<Metrics>) -> Self {
        self.held = self.held.every(every, metrics);
        self
    }

    /// Reads the directory again if the reload period has passed (the broker's periodic
    /// reload, so that a failure is seen without a lookup).
    pub fn refresh(&self) {
        let _ = self.accepted();
    }

    /// The accepted digests, read again first when older than the reload period; a reading
    /// that fails (a mount caught mid-update) keeps the credentials already held.
    fn accepted(&self) -> Arc<Vec<[u8; 32]>> {
        self.held
            .current(|| read_dir(&self.dir))
            .unwrap_or_default()
    }

    /// True when `authorization` (the header's value) carries an accepted Basic credential.
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
        let offered = digest(&decoded);
        // every digest compared, so the time says nothing of which one matched
        self.accepted().iter().fold(false, |found, expected| {
            constant_time_eq(&offered, expected) | found
        })
    }
}

/// The digests of `username` with `password` and with every `*-password` of `dir`.
fn read_dir(dir: &Path) -> Result<Vec<[u8; 32]>, StartupError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
            .map_err(|source| StartupError::Read { path, source })
    };
    let (username, password) = (read("username")?, read("password")?);
    let mut passwords = vec![("password".to_owned(), password)];
    let entries = std::fs::read_dir(dir).map_err(|source| StartupError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut others: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with("-password") && !name.starts_with('.'))
        .collect();
    others.sort();
    for name in others {
        let password = read(&name)?;
        passwords.push((name, password));
    }
    if username.is_empty() || passwords.iter().any(|(_, p)| p.is_empty()) {
        return Err(StartupError::EmptyCaller {
            dir: dir.to_owned(),
        });
    }
    if let Some((name, _)) = passwords.iter().find(|(_, p)| p.len() < MIN_PASSWORD_BYTES) {
        return Err(StartupError::ShortPassword {
            path: dir.join(name),
            min: MIN_PASSWORD_BYTES,
        });
    }
    Ok(passwords
        .iter()
        .map(|(_, password)| digest(format!("{username}:{password}").as_bytes()))
        .collect())
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
    use crate::telemetry::logs::capture;
    use crate::telemetry::reloading::RELOAD_AFTER;

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
        std::fs::write(dir.join("password"), "p".repeat(16)).expect("write");
        assert!(Caller::from_dir(&dir)
            .expect("caller")
            .admits(Some(&basic(&format!("u:{}", "p".repeat(16))))));
        std::fs::write(dir.join("password"), "p".repeat(15)).expect("write");
        let error = Caller::from_dir(&dir).err().expect("short").to_string();
        assert!(
            error.contains("password") && error.contains("at least 16 bytes"),
            "{error}"
        );
        assert!(!error.contains("ppp"), "{error}");
        std::fs::write(dir.join("password"), "").expect("write");
        let error = Caller::from_dir(&dir).err().expect("refused").to_string();
        assert!(error.ends_with(": empty username or password"), "{error}");
        assert!(!error.contains("u:"), "{error}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_rotation_accepts_both_passwords_then_only_the_new_one() {
        let dir = tempfile::tempdir().expect("dir");
        const OLD: &str = "old-password-0123456";
        const NEW: &str = "new-password-0123456";
        std::fs::write(dir.path().join("username"), "u").expect("write");
        std::fs::write(dir.path().join("password"), OLD).expect("write");
        std::fs::write(dir.path().join("next-password"), format!("{NEW}\n")).expect("write");
        let metrics = Arc::new(Metrics::default());
        metrics.set_ready();
        let caller = Caller::from_dir(dir.path())
            .expect("caller")
            .reloading(RELOAD_AFTER, metrics.clone());
        assert!(caller.admits(Some(&basic(&format!("u:{OLD}")))));
        assert!(caller.admits(Some(&basic(&format!("u:{NEW}")))));
        assert!(!caller.admits(Some(&basic("u:next"))));
        // the switch done: `password` is the new one, `next-password` gone
        std::fs::write(dir.path().join("password"), NEW).expect("write");
        std::fs::remove_file(dir.path().join("next-password")).expect("remove");
        caller.held.age_by(RELOAD_AFTER);
        assert!(caller.admits(Some(&basic(&format!("u:{NEW}")))));
        assert!(!caller.admits(Some(&basic(&format!("u:{OLD}")))));
        // a mount caught mid-update keeps what was held, and says so
        std::fs::remove_file(dir.path().join("password")).expect("remove");
        caller.held.age_by(RELOAD_AFTER);
        let lines = capture::lines(|| assert!(caller.admits(Some(&basic(&format!("u:{NEW}"))))));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["what"], "callers");
        assert!(
            lines[0]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("password"),
            "{}",
            lines[0]
        );
        assert!(!lines[0].to_string().contains(NEW), "{}", lines[0]);
        assert!(metrics
            .render()
            .contains("broker_reload_failures_total{what=\"callers\"} 1\n"));
        // a password too short, written in a reload, is refused the same way
        std::fs::write(dir.path().join("password"), "short").expect("write");
        caller.held.age_by(RELOAD_AFTER);
        assert!(caller.admits(Some(&basic(&format!("u:{NEW}")))));
        assert!(!caller.admits(Some(&basic("u:short"))));
        assert!(metrics
            .render()
            .contains("broker_reload_failures_total{what=\"callers\"} 2\n"));
    }
}

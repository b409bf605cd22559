//! The keys a brokered name may be sealed with (`crates/broker-reference`): every file of a
//! mounted Secret, so that a key can be rotated (the new one added, the policy switched to it,
//! the old one removed) without a restart. The kubelet updates a mounted Secret in place, so the
//! directory is read again when a lookup arrives and the last reading is older than
//! the reload period (crate::telemetry::reloading; the broker also reads it on that period
//! when no lookup comes). A reading that fails keeps the keys already held, and is loud: a
//! warning naming the file (never a byte of it), `broker_reload_failures_total{what="keys"}`,
//! and `/readyz` false once it has failed for the grace (crate::telemetry::metrics).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use broker_reference::SealingKey;

use crate::telemetry::metrics::{Metrics, Reloaded};
use crate::telemetry::reloading::Reloading;
use crate::trust::error::StartupError;

/// The sealing keys the broker accepts.
pub struct Keys {
    dir: PathBuf,
    held: Reloading<Vec<SealingKey>>,
}

impl Keys {
    /// Reads the keys of `dir`; the broker does not start without one.
    pub fn from_dir(dir: &Path) -> Result<Self, StartupError> {
        let keys = read_dir(dir)?;
        Ok(Keys {
            dir: dir.to_owned(),
            held: Reloading::new(Reloaded::Keys, keys),
        })
    }

    /// These keys, read again every `every`, their failed readings counted in `metrics`.
    pub fn reloading(mut self, every: Duration, metrics: Arc<Metrics>) -> Self {
        self.held = self.held.every(every, metrics);
        self
    }

    /// The keys held, read again first when they are older than the reload period (a
    /// directory caught mid-update, or emptied, keeps the keys already held).
    pub fn current(&self) -> Arc<Vec<SealingKey>> {
        self.held
            .current(|| read_dir(&self.dir))
            .unwrap_or_default()
    }
}

/// Every regular file of `dir` (a Secret mount's `..data` entries skipped) as a key. Errors
/// name the file, never its content.
fn read_dir(dir: &Path) -> Result<Vec<SealingKey>, StartupError> {
    let read_error = |path: &Path| {
        let path = path.to_owned();
        move |source| StartupError::Read { path, source }
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error(dir))?
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    let mut keys = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = std::fs::read(&path).map_err(read_error(&path))?;
        let key = SealingKey::from_secret(&bytes)
            .map_err(|refusal| StartupError::Key { path, refusal })?;
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(StartupError::NoKey {
            dir: dir.to_owned(),
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::logs::capture;
    use crate::telemetry::reloading::RELOAD_AFTER;

    #[test]
    fn reads_every_key_of_a_secret_mount_and_refuses_weak_ones() {
        let dir = tempfile::tempdir().expect("dir");
        let error = Keys::from_dir(dir.path())
            .err()
            .expect("no key")
            .to_string();
        assert!(error.ends_with(": no sealing key"), "{error}");
        std::fs::write(dir.path().join("key"), "k".repeat(32) + "\n").expect("write");
        std::fs::create_dir(dir.path().join("..data")).expect("mount dir");
        std::fs::write(dir.path().join("..data/key"), "short").expect("write");
        assert_eq!(Keys::from_dir(dir.path()).expect("keys").current().len(), 1);
        std::fs::write(dir.path().join("previous"), "s3cret-but-short").expect("write");
        let error = Keys::from_dir(dir.path()).err().expect("short").to_string();
        assert!(
            error.contains("previous") && error.contains("32 bytes"),
            "{error}"
        );
        assert!(!error.contains("s3cret"), "{error}");
    }

    #[test]
    fn keeps_its_keys_when_the_mount_is_emptied_and_says_so() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("key"), "k".repeat(40)).expect("write");
        let metrics = Arc::new(Metrics::default());
        metrics.set_ready();
        let keys = Keys::from_dir(dir.path())
            .expect("keys")
            .reloading(Duration::ZERO, metrics.clone());
        std::fs::write(dir.path().join("key"), "s3cret-but-short").expect("write");
        let lines = capture::lines(|| assert_eq!(keys.current().len(), 1));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["msg"], "reloadFailed");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["what"], "keys");
        let error = lines[0]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("key") && error.contains("32 bytes"),
            "{error}"
        );
        assert!(!lines[0].to_string().contains("s3cret"), "{}", lines[0]);
        assert!(metrics
            .render()
            .contains("broker_reload_failures_total{what=\"keys\"} 1\n"));
        // past the grace (0 here), not ready until a reading succeeds
        assert!(!metrics.is_ready());
        std::fs::remove_file(dir.path().join("key")).expect("remove");
        assert_eq!(keys.current().len(), 1);
        std::fs::write(dir.path().join("key"), "n".repeat(40)).expect("write");
        assert_eq!(keys.current().len(), 1);
        assert!(metrics.is_ready());
    }

    #[test]
    fn reads_a_rotated_key_after_its_reload_period() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("key"), "a".repeat(32)).expect("write");
        let keys = Keys::from_dir(dir.path()).expect("keys");
        std::fs::write(dir.path().join("next"), "b".repeat(32)).expect("write");
        assert_eq!(keys.current().len(), 1, "read again too early");
        keys.held.age_by(RELOAD_AFTER);
        assert_eq!(keys.current().len(), 2);
    }

    /// A rotation as docs/broker.md describes it, seen by the decoder: while both keys are in
    /// the mount, names sealed with either are answered; once the old one is removed, names
    /// it sealed are refused, those of the new one still answered.
    #[test]
    fn a_rotation_accepts_both_keys_then_refuses_the_removed_one() {
        use broker_reference::{BrokeredName, Credentials, ManifestReference, Refusal, Unsealing};
        let (old, new) = ("o".repeat(40), "n".repeat(40));
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("key"), format!("{old}\n")).expect("write");
        let keys = Keys::from_dir(dir.path()).expect("keys");
        let age = |keys: &Keys| {
            keys.held.age_by(RELOAD_AFTER);
        };
        let lookup = BrokeredName {
            namespace: "team-a".into(),
            credentials: Credentials::PullSecrets(vec!["regcred".into()]),
            registry: "registry.example".into(),
            repository: "app".into(),
        };
        let host = "broker.kw.svc:8443";
        let asked = ManifestReference::Tag("v1".into());
        let now = 1_767_225_600;
        let expires = broker_reference::expiry(now);
        let sealed_with = |key: &str| {
            let key = SealingKey::from_secret(key.as_bytes()).expect("a key");
            lookup
                .encode(&key, host, &asked, expires)
                .expect("encodable")
        };
        let (by_old, by_new) = (sealed_with(&old), sealed_with(&new));
        let hosts = [host.to_owned()];
        let decode = |keys: &Keys, name: &str| {
            let held = keys.current();
            let broker = Unsealing {
                keys: &held,
                own_hosts: &hosts,
                now,
            };
            BrokeredName::decode(name, &asked, &broker)
        };
        assert_eq!(decode(&keys, &by_old), Ok(lookup.clone()));
        assert_eq!(decode(&keys, &by_new), Err(Refusal::Unsealed));
        // the new key added beside the old one: both answered
        std::fs::write(dir.path().join("next"), &new).expect("write");
        age(&keys);
        assert_eq!(decode(&keys, &by_old), Ok(lookup.clone()));
        assert_eq!(decode(&keys, &by_new), Ok(lookup.clone()));
        // the new key made `key`, the old one `previous`, then removed
        std::fs::write(dir.path().join("previous"), &old).expect("write");
        std::fs::write(dir.path().join("key"), &new).expect("write");
        std::fs::remove_file(dir.path().join("next")).expect("remove");
        age(&keys);
        assert_eq!(decode(&keys, &by_old), Ok(lookup.clone()));
        std::fs::remove_file(dir.path().join("previous")).expect("remove");
        age(&keys);
        assert_eq!(decode(&keys, &by_old), Err(Refusal::Unsealed));
        assert_eq!(decode(&keys, &by_new), Ok(lookup));
    }
}

//! The broker's TLS certificate, read again while it runs: cert-manager (or an operator)
//! renews the mounted Secret in place, and a broker that kept its first certificate would
//! fail every handshake once it expired. The files are read again at a handshake when the
//! last reading is older than the reload period (crate::telemetry::reloading; the broker also
//! reads them on that period when no handshake comes). A reading that fails (a mount caught
//! mid-update, a key that does not match) keeps the certificate already held, and is loud like
//! a failed key reload (crate::trust::keys): a warning naming the file, never a byte of it,
//! `broker_reload_failures_total{what="certificate"}`, and `/readyz` false once it has failed
//! for the grace, since an expiring certificate would otherwise be noticed only when every
//! handshake fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::telemetry::metrics::{Metrics, Reloaded};
use crate::telemetry::reloading::Reloading;
#[cfg(test)]
use crate::telemetry::reloading::RELOAD_AFTER;
use crate::trust::error::StartupError;

/// The certificate chain and key of `--tls-cert` and `--tls-key`, kept current.
pub struct ReloadingCertificate {
    cert: PathBuf,
    key: PathBuf,
    held: Reloading<CertifiedKey>,
}

impl std::fmt::Debug for ReloadingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCertificate")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ReloadingCertificate {
    /// Reads `cert` and `key` (PEM); the broker does not start without a usable pair.
    pub fn new(cert: &Path, key: &Path) -> Result<Self, StartupError> {
        let certified = load(cert, key)?;
        Ok(ReloadingCertificate {
            cert: cert.to_owned(),
            key: key.to_owned(),
            held: Reloading::new(Reloaded::Certificate, certified),
        })
    }

    /// This pair, read again every `every`, its failed readings counted in `metrics`.
    pub fn reloading(mut self, every: Duration, metrics: Arc<Metrics>) -> Self {
        self.held = self.held.every(every, metrics);
        self
    }

    /// The certificate held, read again first when older than the reload period.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.held.current(|| load(&self.cert, &self.key))
    }

    #[cfg(test)]
    fn age_by(&self, by: Duration) {
        self.held.age_by(by);
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// The chain of `cert` with the key of `key`, checked to belong together.
fn load(cert: &Path, key: &Path) -> Result<CertifiedKey, StartupError> {
    let pem = |path: &Path| {
        let path = path.to_owned();
        move |source| StartupError::Pem { path, source }
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(pem(cert))?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(pem(key))?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(certs, private, &provider).map_err(StartupError::Tls)?;
    Ok(certified)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key for `name`, written by openssl into `dir`.
    fn self_signed(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
        let (cert, key) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        let made = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .ok()?;
        made.status.success().then_some((cert, key))
    }

    #[test]
    fn a_renewed_certificate_is_served_after_the_reload_period() {
        let dir = tempfile::tempdir().expect("dir");
        let Some((first_cert, first_key)) = self_signed(dir.path(), "first") else {
            eprintln!("skipped: no openssl to make certificates");
            return;
        };
        let (second_cert, second_key) = self_signed(dir.path(), "second").expect("second");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::copy(&first_cert, &cert).expect("copy");
        std::fs::copy(&first_key, &key).expect("copy");
        let reloading = ReloadingCertificate::new(&cert, &key).expect("loads");
        let served = |r: &ReloadingCertificate| r.current().expect("held").cert[0].to_vec();
        let first = served(&reloading);

        std::fs::copy(&second_cert, &cert).expect("copy");
        std::fs::copy(&second_key, &key).expect("copy");
        assert_eq!(
            served(&reloading),
            first,
            "read again only after the period"
        );
        reloading.age_by(RELOAD_AFTER);
        let second = served(&reloading);
        assert_ne!(second, first, "the renewed certificate is served");

        // a mount caught mid-update (the new certificate with the old key) keeps the last pair
        std::fs::copy(&first_cert, &cert).expect("copy");
        reloading.age_by(RELOAD_AFTER);
        assert_eq!(served(&reloading), second);
    }

    /// A reading that fails is loud as a key reload's is: a warning naming the file (not its
    /// bytes), a counted failure, and `/readyz` false past the grace until a reading succeeds.
    #[test]
    fn a_failed_reload_is_logged_counted_and_shown_on_readyz() {
        use crate::telemetry::logs::capture;
        let dir = tempfile::tempdir().expect("dir");
        let Some((cert, key)) = self_signed(dir.path(), "tls") else {
            eprintln!("skipped: no openssl to make certificates");
            return;
        };
        let metrics = Arc::new(Metrics::default());
        metrics.set_ready();
        let reloading = ReloadingCertificate::new(&cert, &key)
            .expect("loads")
            .reloading(Duration::ZERO, metrics.clone());
        let first = reloading.current().expect("held").cert[0].to_vec();
        let good_key = std::fs::read(&key).expect("the key");
        std::fs::write(&key, "e2e-not-a-key-4k9w").expect("write");
        let lines = capture::lines(|| {
            let served = reloading.current().expect("held").cert[0].to_vec();
            assert_eq!(served, first, "the pair held is still served");
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["msg"], "reloadFailed");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["what"], "certificate");
        let error = lines[0]["error"].as_str().unwrap_or_default();
        assert!(error.contains("tls.key"), "{error}");
        assert!(!lines[0].to_string().contains("4k9w"), "{}", lines[0]);
        assert!(metrics
            .render()
            .contains("broker_reload_failures_total{what=\"certificate\"} 1\n"));
        // the grace is 0 here: not ready until a reading succeeds
        assert!(!metrics.is_ready());
        std::fs::write(&key, good_key).expect("write");
        reloading.current().expect("held");
        assert!(metrics.is_ready());
    }

    #[test]
    fn the_broker_does_not_start_without_a_usable_pair() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, "not a certificate").expect("write");
        std::fs::write(&key, "not a key").expect("write");
        let error = ReloadingCertificate::new(&cert, &key)
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("tls.crt") || error.contains("tls.key"),
            "{error}"
        );
    }
}

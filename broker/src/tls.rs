//! The broker's TLS certificate, read again while it runs: cert-manager (or an operator)
//! renews the mounted Secret in place, and a broker that kept its first certificate would
//! fail every handshake once it expired. The files are read again at a handshake when the
//! last reading is older than [`RELOAD_AFTER`]; a reading that fails (a mount caught
//! mid-update, a key that does not match) keeps the certificate already held.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::error::StartupError;
use crate::keys::RELOAD_AFTER;

/// The certificate chain and key of `--tls-cert` and `--tls-key`, kept current.
pub struct ReloadingCertificate {
    cert: PathBuf,
    key: PathBuf,
    held: Mutex<(Instant, Arc<CertifiedKey>)>,
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
            held: Mutex::new((Instant::now(), Arc::new(certified))),
        })
    }

    /// The certificate held, read again first when older than [`RELOAD_AFTER`].
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut held = self.held.lock().ok()?;
        if held.0.elapsed() >= RELOAD_AFTER {
            if let Ok(certified) = load(&self.cert, &self.key) {
                held.1 = Arc::new(certified);
            }
            held.0 = Instant::now();
        }
        Some(held.1.clone())
    }

    #[cfg(test)]
    fn age_by(&self, by: std::time::Duration) {
        if let Ok(mut held) = self.held.lock() {
            held.0 -= by;
        }
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

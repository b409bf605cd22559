//! Registry access: the registry client shared with the lookup broker
//! (`crates/registry-client`), and the tests of its pool against this host's
//! `oci/v1/resolve_images`.

pub use registry_client::*;

#[cfg(test)]
mod pool_tests;
#[cfg(test)]
pub(crate) mod test_registry;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_error_reads_like_a_transport_error() {
        let e = anyhow::Error::from(RegistryError::Timeout(RequestTimeout::new(
            "http://127.0.0.1:1/v2/a/manifests/b",
        )));
        assert_eq!(
            crate::capabilities::error_chain(&e),
            "Fail to interact with OCI registry: error sending request for url (http://127.0.0.1:1/v2/a/manifests/b)\n\nCaused by:\n    0: error sending request for url (http://127.0.0.1:1/v2/a/manifests/b)\n    1: operation timed out"
        );
    }
}

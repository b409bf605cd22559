//! What the ServiceAccount tokens the broker mints for `tokenAttributes` plugins are bound to.
//!
//! The kubelet binds such a token to the pod being started. The broker has no pod of the
//! tenant's, and the TokenRequest API binds a token only to a Pod or Secret in the
//! ServiceAccount's own namespace (a Pod only when it runs as that ServiceAccount), or to a
//! Node: never to the broker's own Pod in its namespace
//! (`pkg/registry/core/serviceaccount/storage/token.go` in kubernetes/kubernetes). So each token
//! is bound to a Secret the namespace creates when it opts in to tokens,
//! [`TOKEN_BINDING_SECRET`]: the API server refuses a token once that Secret is deleted, so the
//! namespace can revoke, at once, every token the broker ever minted for it (a Node binding
//! would outlive any incident, and needs a feature gate on Kubernetes 1.30). Without that
//! Secret no token is minted: the plugin's attempt has no answer (a warning, never a denial).

use k8s_openapi::api::authentication::v1::BoundObjectReference;

/// The Secret, in each namespace whose ServiceAccounts' tokens plugins may receive, that the
/// broker's tokens are bound to (docs/broker.md, "Installing").
pub const TOKEN_BINDING_SECRET: &str = "resolvable-images-broker-token-binding";

/// The `boundObjectRef` of every TokenRequest the broker makes: the namespace's binding Secret,
/// by name (the API server records its UID in the token).
pub fn bound_object() -> BoundObjectReference {
    BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Secret".into()),
        name: Some(TOKEN_BINDING_SECRET.into()),
        uid: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound_to_the_namespaces_binding_secret() {
        let bound = serde_json::to_value(bound_object()).expect("JSON");
        assert_eq!(
            bound,
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "name": TOKEN_BINDING_SECRET})
        );
    }
}

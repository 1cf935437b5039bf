//! What `install` reads from the cluster: the webhook's TLS Secret, to keep
//! its certificates. Every call has a deadline.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::certificates::{Certificates, SECRET};

/// The deadline of each call to the API server.
pub const API_TIMEOUT: Duration = Duration::from_secs(20);

/// The certificates of the Secret in `namespace`; `None` when there is no
/// Secret (or no namespace). A Secret missing a file reads as empty text,
/// which [`super::certificates::keep_or_renew`] replaces.
pub async fn tls_secret(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<Option<Certificates>> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = tokio::time::timeout(API_TIMEOUT, api.get_opt(SECRET))
        .await
        .with_context(|| format!("no answer within {}s", API_TIMEOUT.as_secs()))?
        .with_context(|| format!("reading the Secret {namespace}/{SECRET}"))?;
    Ok(secret.map(|secret| {
        let data = secret.data.unwrap_or_default();
        let file = |key: &str| {
            data.get(key)
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
                .unwrap_or_default()
        };
        Certificates {
            cert: file("tls.crt"),
            key: file("tls.key"),
            ca_bundle: file("ca.crt"),
        }
    }))
}

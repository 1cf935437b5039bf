//! What `install` reads from the cluster: its namespace, to take only one of
//! its own, the webhook's TLS Secret, to keep its certificates, and the API
//! server's addresses, to admit only it to the webhook's port. Every call has
//! a deadline.

use std::time::Duration;

use anyhow::Context as _;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;

use super::super::ownership;
use super::certificates::{Certificates, Existing, SECRET};

/// The deadline of each call to the API server.
pub const API_TIMEOUT: Duration = Duration::from_secs(20);

/// Whose the extension's namespace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceState {
    /// It does not exist: `install` makes it, marked.
    Absent,
    /// It carries the mark: the extension's own.
    Ours,
    /// It exists without the mark: someone else's.
    Foreign,
    /// It is being deleted.
    Deleting,
}

/// Whose the namespace `name` is.
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<NamespaceState> {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace = tokio::time::timeout(API_TIMEOUT, api.get_opt(name))
        .await
        .with_context(|| format!("no answer within {}s", API_TIMEOUT.as_secs()))?
        .with_context(|| format!("reading the Namespace {name}"))?;
    Ok(match namespace {
        None => NamespaceState::Absent,
        Some(ns) if ns.metadata.deletion_timestamp.is_some() => NamespaceState::Deleting,
        Some(ns) => {
            let annotations = ns.metadata.annotations.unwrap_or_default();
            match ownership::marked(annotations.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
                true => NamespaceState::Ours,
                false => NamespaceState::Foreign,
            }
        }
    })
}

/// The Secret in `namespace`; `None` when there is none. A Secret missing a
/// file reads as empty text, which [`super::certificates::keep_or_renew`]
/// replaces.
pub async fn tls_secret(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<Option<Existing>> {
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
        Existing {
            labels: secret.metadata.labels.unwrap_or_default(),
            type_: secret.type_,
            certs: Certificates {
                cert: file("tls.crt"),
                key: file("tls.key"),
                ca_bundle: file("ca.crt"),
            },
        }
    }))
}

/// The API server's addresses, as it lists them in the EndpointSlice `default/kubernetes`
/// (the `kubernetes` Service's), the ready ones, sorted as text (as the chart's `sortAlpha`
/// sorts them); none when there is no such slice.
pub async fn api_server_addresses(client: &kube::Client) -> anyhow::Result<Vec<IpAddr>> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice = tokio::time::timeout(API_TIMEOUT, api.get_opt("kubernetes"))
        .await
        .with_context(|| format!("no answer within {}s", API_TIMEOUT.as_secs()))??;
    let mut addresses: Vec<IpAddr> = (slice.into_iter())
        .flat_map(|slice| slice.endpoints.into_iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| e.addresses)
        .filter_map(|a| a.parse().ok())
        .collect();
    addresses.sort_by_key(IpAddr::to_string);
    addresses.dedup();
    Ok(addresses)
}

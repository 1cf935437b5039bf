//! `linkerd multus uninstall`: what `kubectl delete -f -` needs to remove the
//! extension, found by its label [`EXTENSION_LABEL`]`=multus`: the webhook
//! configuration first (no pod creation waits on a webhook going away), the
//! cluster-scoped rights, the Roles and bindings `install` put in other
//! namespaces (the CNI namespace's), and the extension's Namespaces last,
//! which take the namespaced objects with them. Never a
//! NetworkAttachmentDefinition: those in Git or made by users are theirs, and
//! the NAD controller's own are removed by their label (docs/extension.md).

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::ListParams;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::client::Target;
use super::{EXTENSION_LABEL, NAME};
use crate::yaml::{Node, emit_stream};

/// The deadline of each call to the API server.
pub const API_TIMEOUT: Duration = Duration::from_secs(20);

/// Why `uninstall` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster could not be read.
    #[error(
        "reading the cluster for linkerd-multus's objects: {0:#}; pass --kubeconfig or --context for the cluster it is installed in"
    )]
    Cluster(anyhow::Error),
}

/// One object to delete.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Object {
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace, for a namespaced object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// The extension's objects in the target's cluster, in the order to delete them.
pub async fn objects(target: &Target) -> Result<Vec<Object>, Error> {
    let client = target.client().await.map_err(Error::Cluster)?;
    find(&client).await.map_err(Error::Cluster)
}

async fn find(client: &kube::Client) -> anyhow::Result<Vec<Object>> {
    let namespaces = list::<Namespace>(client).await?;
    let ours: BTreeSet<&str> = namespaces.iter().map(|o| o.name.as_str()).collect();
    let outside = |objects: Vec<Object>| -> Vec<Object> {
        objects
            .into_iter()
            .filter(|o| !o.namespace.as_deref().is_some_and(|ns| ours.contains(ns)))
            .collect()
    };
    let mut out = list::<MutatingWebhookConfiguration>(client).await?;
    out.extend(list::<ClusterRoleBinding>(client).await?);
    out.extend(list::<ClusterRole>(client).await?);
    out.extend(outside(list::<RoleBinding>(client).await?));
    out.extend(outside(list::<Role>(client).await?));
    out.extend(namespaces);
    Ok(out)
}

/// The objects of kind `K` labelled as the extension's, in every namespace, sorted.
async fn list<K>(client: &kube::Client) -> anyhow::Result<Vec<Object>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let params = ListParams::default().labels(&format!("{EXTENSION_LABEL}={NAME}"));
    let kind = K::kind(&());
    let list = tokio::time::timeout(API_TIMEOUT, api.list(&params))
        .await
        .with_context(|| {
            format!(
                "listing {kind}: no answer within {}s",
                API_TIMEOUT.as_secs()
            )
        })?
        .with_context(|| format!("listing {kind}"))?;
    let mut objects: Vec<Object> = list
        .items
        .iter()
        .map(|o| Object {
            api_version: K::api_version(&()).into_owned(),
            kind: kind.to_string(),
            namespace: o.namespace(),
            name: o.name_any(),
        })
        .collect();
    objects.sort();
    Ok(objects)
}

/// The objects as YAML for `kubectl delete -f -`.
pub fn manifests(objects: &[Object]) -> String {
    let nodes: Vec<Node> = objects
        .iter()
        .map(|o| {
            let mut metadata = vec![("name", Node::string(o.name.as_str()))];
            if let Some(ns) = &o.namespace {
                metadata.push(("namespace", Node::string(ns.as_str())));
            }
            Node::mapping([
                ("apiVersion", Node::string(o.api_version.as_str())),
                ("kind", Node::string(o.kind.as_str())),
                ("metadata", Node::mapping(metadata)),
            ])
        })
        .collect();
    emit_stream(&nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_name_each_object() {
        let object = |api: &str, kind: &str, ns: Option<&str>, name: &str| Object {
            api_version: api.into(),
            kind: kind.into(),
            namespace: ns.map(str::to_string),
            name: name.into(),
        };
        let text = manifests(&[
            object("rbac.authorization.k8s.io/v1", "Role", Some("cni"), "r"),
            object("v1", "Namespace", None, "linkerd-multus"),
        ]);
        assert_eq!(
            text,
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n  namespace: cni\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-multus\n"
        );
        assert_eq!(manifests(&[]), "");
    }
}

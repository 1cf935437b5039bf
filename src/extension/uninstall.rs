//! `linkerd multus uninstall`: what `kubectl delete -f -` needs to remove the
//! extension, found by its label [`EXTENSION_LABEL`]`=multus` and by the
//! names `install` gives its objects: the webhook configuration first (no pod
//! creation waits on a webhook going away), the cluster-scoped rights (and
//! the policy that narrows the restarts', after them), the
//! namespaced objects outside the namespaces it deletes (the Roles and
//! bindings `install` put in the CNI namespace and in `default`), and the
//! extension's Namespaces last, which take their objects with them.
//!
//! A Namespace is printed only when it is the extension's own (its mark, and
//! not [`reserved`](super::ownership::reserved)): one labelled but not marked
//! (labelled by an older `install`, or marked by hand where it must not be)
//! keeps everything but the extension's objects, which are printed one by
//! one. Never a NetworkAttachmentDefinition: those in Git or made by users
//! are theirs, and the NAD controller's own are removed by their label
//! (docs/extension.md).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, ResourceExt};

use super::client::{Target, anyhow_text};
use super::install::{certificates, options::Options, packages};
use super::ownership::{self, MARK, MARK_VALUE};
use super::{EXTENSION_LABEL, NAME};
use crate::yaml::{Node, emit_stream};

/// The deadline of each call to the API server.
pub const API_TIMEOUT: Duration = Duration::from_secs(20);

/// The kinds `install` makes, in the order to delete them; the Namespace last.
const ORDER: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ClusterRoleBinding",
    "ClusterRole",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "Deployment",
    "PodDisruptionBudget",
    "Service",
    "NetworkPolicy",
    "Certificate",
    "Issuer",
    "PrometheusRule",
    "ServiceMonitor",
    "Secret",
    "ConfigMap",
    "ServiceAccount",
    "RoleBinding",
    "Role",
    "Namespace",
];

/// Why `uninstall` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster could not be read.
    #[error(
        "reading the cluster for linkerd-multus's objects: {}; pass --kubeconfig or --context for the cluster it is installed in",
        anyhow_text(.0)
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

/// What removes the extension, and what to tell the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// The objects, in the order to delete them.
    pub objects: Vec<Object>,
    /// Namespaces left in place, and why.
    pub notes: Vec<String>,
}

/// The extension's objects in the target's cluster; `linkerd_namespace` is
/// never deleted, whatever marks it carries.
pub async fn objects(target: &Target, linkerd_namespace: &str) -> Result<Removal, Error> {
    let client = target.client().await.map_err(Error::Cluster)?;
    find(&client, linkerd_namespace)
        .await
        .map_err(Error::Cluster)
}

/// A kind `install` makes, and the names it gives objects of that kind.
struct Kind {
    api_version: String,
    kind: String,
    namespaced: bool,
    names: BTreeSet<String>,
}

/// The kinds and names of every object `install` may print, whatever the options.
fn made_by_install() -> anyhow::Result<Vec<Kind>> {
    let mut objects = packages::objects(&packages::all(), &Options::default())?;
    let certs = certificates::Certificates {
        cert: String::new(),
        key: String::new(),
        ca_bundle: String::new(),
    };
    let monitoring = Options {
        monitoring: true,
        ..Options::default()
    };
    objects.extend(super::install::objects(
        &monitoring,
        Some(&certs),
        &super::install::callers::Callers::unread(&Options::default()),
    )?);
    let mut kinds: Vec<Kind> = Vec::new();
    for object in &objects {
        let text = |path: &[&str]| {
            object
                .get_path(path)
                .and_then(Node::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (kind, name) = (text(&["kind"]), text(&["metadata", "name"]));
        match kinds.iter_mut().find(|k| k.kind == kind) {
            Some(known) => {
                known.names.insert(name);
            }
            None => kinds.push(Kind {
                api_version: text(&["apiVersion"]),
                namespaced: object.get_path(&["metadata", "namespace"]).is_some(),
                kind,
                names: BTreeSet::from([name]),
            }),
        }
    }
    kinds.sort_by_key(|k| ORDER.iter().position(|o| *o == k.kind));
    Ok(kinds)
}

async fn find(client: &kube::Client, linkerd_namespace: &str) -> anyhow::Result<Removal> {
    let mut removal = Removal::default();
    let namespaces = labelled_namespaces(client).await?;
    let mut deleted = BTreeSet::new();
    for namespace in &namespaces {
        let name = namespace.name_any();
        let annotations = namespace.annotations();
        let marked = ownership::marked(annotations.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let why_kept = match (
            ownership::reserved(&name, linkerd_namespace, "linkerd-cni"),
            marked,
        ) {
            (Some(whose), _) => Some(format!("it is {whose}")),
            (None, false) => Some(format!(
                "linkerd-multus did not make it (it lacks the annotation {MARK}={MARK_VALUE})"
            )),
            (None, true) => None,
        };
        match why_kept {
            None => {
                deleted.insert(name);
            }
            Some(why) => removal.notes.push(format!(
                "namespace {name} is not deleted: {why}; its linkerd-multus objects are listed one by one instead, and it keeps its label (kubectl label namespace {name} {EXTENSION_LABEL}-)"
            )),
        }
    }
    for kind in made_by_install()? {
        if kind.kind == "Namespace" {
            continue;
        }
        for object in list(client, &kind).await? {
            let inside = object
                .namespace
                .as_ref()
                .is_some_and(|ns| deleted.contains(ns));
            if !inside && kind.names.contains(&object.name) {
                removal.objects.push(object);
            }
        }
    }
    removal
        .objects
        .extend(deleted.into_iter().map(|name| Object {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name,
        }));
    Ok(removal)
}

fn selector() -> ListParams {
    ListParams::default().labels(&format!("{EXTENSION_LABEL}={NAME}"))
}

async fn labelled_namespaces(client: &kube::Client) -> anyhow::Result<Vec<Namespace>> {
    let api: Api<Namespace> = Api::all(client.clone());
    let list = tokio::time::timeout(API_TIMEOUT, api.list(&selector()))
        .await
        .with_context(|| {
            format!(
                "listing Namespaces: no answer within {}s",
                API_TIMEOUT.as_secs()
            )
        })?
        .context("listing Namespaces")?;
    Ok(list.items)
}

/// The objects of `kind` labelled as the extension's, in every namespace,
/// sorted; none when the API server does not serve the kind (cert-manager's,
/// without cert-manager).
async fn list(client: &kube::Client, kind: &Kind) -> anyhow::Result<Vec<Object>> {
    let (group, version) = kind
        .api_version
        .split_once('/')
        .unwrap_or(("", &kind.api_version));
    let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &packages::plural(&kind.kind));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = match tokio::time::timeout(API_TIMEOUT, api.list(&selector()))
        .await
        .with_context(|| {
            format!(
                "listing {}: no answer within {}s",
                kind.kind,
                API_TIMEOUT.as_secs()
            )
        })? {
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
        result => result.with_context(|| format!("listing {}", kind.kind))?,
    };
    let mut objects: Vec<Object> = list
        .items
        .iter()
        .map(|o| Object {
            api_version: kind.api_version.clone(),
            kind: kind.kind.clone(),
            namespace: o.namespace().filter(|_| kind.namespaced),
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

    /// Every kind `install` makes is known, in the order to delete them, with
    /// the names it gives them.
    #[test]
    fn the_kinds_install_makes_are_deleted_in_order() {
        let kinds = made_by_install().unwrap();
        let order: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(order, ORDER);
        let roles = kinds.iter().find(|k| k.kind == "Role").unwrap();
        assert_eq!(
            roles.names.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "linkerd-multus-nad-controller",
                "linkerd-multus-nad-controller-events",
                "linkerd-multus-nad-controller-lease"
            ]
        );
        let secrets = kinds.iter().find(|k| k.kind == "Secret").unwrap();
        assert!(secrets.namespaced && secrets.names.contains(certificates::SECRET));
        let configuration = kinds
            .iter()
            .find(|k| k.kind == "MutatingWebhookConfiguration")
            .unwrap();
        assert!(!configuration.namespaced);
    }
}

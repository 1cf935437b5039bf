//! The reads of `check`: each kind listed once, in pages of [`PAGE`] with
//! continue tokens, metadata only where labels and annotations are enough
//! (Namespaces), and every object cut down as it is read to what the checks
//! look at (a pod to its metadata, container names, proxy UID and the
//! validator's exit codes; `managedFields` never kept). Every call has a
//! deadline ([`CALL_TIMEOUT`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::ListParams;
use kube::core::Request;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::extension::client::error_text;
use crate::k8s::namespace::{INJECT_ANNOTATION, MULTUS_ANNOTATION};
use crate::linkerd_cni::attach::{CONTROL_PLANE_LABEL, PROXY_UID_ANNOTATION};
use crate::linkerd_cni::opt_ins::{self, Whose};
use crate::linkerd_cni::restarts::{Key, Kind, Subject};
use crate::linkerd_cni::rollout::HASH_ANNOTATION;
use crate::linkerd_cni::skip_subnets::{self, PluginSettings};
use crate::multus::ipam::{self, Ipam, IpamError};
use crate::multus::nad::{self, Maker};
use crate::multus::networks::NETWORKS_ANNOTATION;

/// Objects a page of a list holds.
pub const PAGE: u32 = 500;

/// How long one API call may take: a get, a page of a list, a review.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A read that failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server refused it, or the connection failed: printed as the
    /// API server's message, once ([`error_text`]).
    #[error("{}", error_text(.0))]
    Api(#[from] kube::Error),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The request could not be made.
    #[error("{0}")]
    Request(String),
}

impl ReadError {
    /// Whether the API server answered 404 Not Found.
    pub fn not_found(&self) -> bool {
        matches!(self, ReadError::Api(kube::Error::Api(s)) if s.code == 404)
    }
}

/// Runs `request` with [`CALL_TIMEOUT`].
pub async fn call<T>(request: impl Future<Output = kube::Result<T>>) -> Result<T, ReadError> {
    match tokio::time::timeout(CALL_TIMEOUT, request).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(ReadError::Timeout(CALL_TIMEOUT)),
    }
}

/// Runs a get, `None` when the object does not exist.
pub async fn get_opt<T>(
    request: impl Future<Output = kube::Result<T>>,
) -> Result<Option<T>, ReadError> {
    match call(request).await {
        Ok(object) => Ok(Some(object)),
        Err(e) if e.not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The metadata `check` reads of any object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Meta {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<String>,
    /// `metadata.ownerReferences`.
    pub owner_references: Vec<OwnerReference>,
}

/// An owner of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OwnerReference {
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Whether it is the object's controller.
    pub controller: Option<bool>,
}

impl Meta {
    /// The workload that controls this pod: a StatefulSet, a DaemonSet, or the Deployment of
    /// its ReplicaSet (the ReplicaSet's name less the pod's `pod-template-hash`); `None` for
    /// another owner or none.
    pub fn workload(&self) -> Option<Subject> {
        let owner = self
            .owner_references
            .iter()
            .find(|r| r.controller == Some(true))?;
        let kind = match owner.kind.as_str() {
            "StatefulSet" => Kind::StatefulSet,
            "DaemonSet" => Kind::DaemonSet,
            "ReplicaSet" => Kind::Deployment,
            _ => return None,
        };
        let name = match kind {
            Kind::Deployment => {
                let hash = self.labels.get(POD_TEMPLATE_HASH)?;
                owner.name.strip_suffix(hash)?.strip_suffix('-')?
            }
            _ => owner.name.as_str(),
        };
        Some(Subject::Workload(Key {
            kind,
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        }))
    }
}

#[derive(Deserialize)]
struct List<T> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ListMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize)]
struct WithMeta {
    #[serde(default)]
    metadata: Meta,
}

/// Lists `path` page by page, handing each item to `each`; `metadata_only`
/// asks for `PartialObjectMetadata`.
pub async fn list_pages<T: DeserializeOwned>(
    client: &Client,
    path: &str,
    params: ListParams,
    metadata_only: bool,
    mut each: impl FnMut(T),
) -> Result<(), ReadError> {
    let mut params = params.limit(PAGE);
    loop {
        let request = Request::new(path);
        let request = match metadata_only {
            true => request.list_metadata(&params),
            false => request.list(&params),
        }
        .map_err(|e| ReadError::Request(e.to_string()))?;
        let page: List<T> = call(client.request(request)).await?;
        page.items.into_iter().for_each(&mut each);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Every Namespace's metadata, sorted by name.
pub async fn namespaces(client: &Client) -> Result<Vec<Meta>, ReadError> {
    let mut all = Vec::new();
    list_pages(
        client,
        "/api/v1/namespaces",
        ListParams::default(),
        true,
        |n: WithMeta| all.push(n.metadata),
    )
    .await?;
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(all)
}

/// A NAD of the Linkerd-CNI name, as the checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nad {
    /// Who holds it, by its marks and managedFields ([`nad::Record::holder`], the
    /// controller's rule).
    pub maker: Maker,
    /// Its `spec.config`.
    pub config: Option<String>,
    /// Linkerd-CNI's own settings in that config, read once (the data-plane checks ask for
    /// them for every pod of the namespace).
    pub plugin: PluginSettings,
}

impl Nad {
    /// A NAD made by `maker` with `config`.
    pub fn new(maker: Maker, config: Option<String>) -> Self {
        let plugin = config
            .as_deref()
            .map(skip_subnets::plugin_settings)
            .unwrap_or_default();
        Nad {
            maker,
            config,
            plugin,
        }
    }
}

/// The IPAM of each NAD, by `(namespace, name)`.
pub type Ipams = BTreeMap<(String, String), Result<Ipam, IpamError>>;

#[derive(Deserialize)]
struct NadDoc {
    #[serde(default)]
    metadata: NadMeta,
    #[serde(default)]
    spec: NadSpec,
}

/// A NAD's metadata: what any object's is, and who wrote it (read for [`nad::Record`],
/// then dropped).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct NadMeta {
    #[serde(flatten)]
    meta: Meta,
    managed_fields: Vec<ManagedField>,
}

/// An entry of `metadata.managedFields`: who wrote, and how.
#[derive(Default, Deserialize)]
#[serde(default)]
struct ManagedField {
    manager: String,
    operation: String,
}

#[derive(Default, Deserialize)]
struct NadSpec {
    config: Option<String>,
}

impl NadDoc {
    /// Its namespace, name and what the checks see of it.
    fn read(self) -> (String, String, Nad) {
        let NadMeta {
            meta,
            managed_fields,
        } = self.metadata;
        let writes = managed_fields
            .iter()
            .map(|f| (f.manager.as_str(), f.operation.as_str()));
        let client_side = meta.annotations.contains_key(nad::LAST_APPLIED_ANNOTATION);
        let record = nad::Record::read(&meta.labels, writes, client_side);
        // The Go operator's NAD is the controller's to adopt; until it has, check judges it
        // as another's (by what it runs), not as the controller's with an older config.
        let maker = match record.go_operators() {
            true => Maker::Other,
            false => record.holder(),
        };
        let namespace = meta.namespace.unwrap_or_default();
        (namespace, meta.name, Nad::new(maker, self.spec.config))
    }
}

/// The API path of every NAD.
fn nads_path() -> String {
    let resource = nad::api_resource();
    format!(
        "/apis/{}/{}/{}",
        resource.group, resource.version, resource.plural
    )
}

/// The NADs named `name` in every namespace, by namespace.
pub async fn nads(client: &Client, name: &str) -> Result<BTreeMap<String, Nad>, ReadError> {
    let mut all = BTreeMap::new();
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    list_pages(client, &nads_path(), params, false, |n: NadDoc| {
        let (namespace, _, nad) = n.read();
        all.insert(namespace, nad);
    })
    .await?;
    Ok(all)
}

/// In one list of every NAD: those named `name`, by namespace (as [`nads`] gives them), and
/// the IPAM of each (the secondary-networks check; the IPAM only is kept, not the config).
pub async fn nads_and_ipams(
    client: &Client,
    name: &str,
) -> Result<(BTreeMap<String, Nad>, Ipams), ReadError> {
    let mut named = BTreeMap::new();
    let mut ipams = Ipams::new();
    list_pages(
        client,
        &nads_path(),
        ListParams::default(),
        false,
        |n: NadDoc| {
            let (namespace, nad_name, nad) = n.read();
            let ipam = ipam::read(nad.config.as_deref().unwrap_or("{}"));
            ipams.insert((namespace.clone(), nad_name.clone()), ipam);
            if nad_name == name {
                named.insert(namespace, nad);
            }
        },
    )
    .await?;
    Ok((named, ipams))
}

/// The proxy container Linkerd injects.
pub const PROXY_CONTAINER: &str = "linkerd-proxy";
/// Linkerd's network validator (CNI mode): an init container that checks
/// the pod's iptables redirect and exits with [`VALIDATOR_FAILED`] when it is not there.
pub const VALIDATOR_CONTAINER: &str = "linkerd-network-validator";
/// The validator's exit code when the traffic is not redirected.
pub const VALIDATOR_FAILED: i32 = 95;

/// A meshed pod (one with a [`PROXY_CONTAINER`]), as the data-plane checks see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// Its metadata.
    pub meta: Meta,
    /// The proxy container's `securityContext.runAsUser`.
    pub proxy_uid: Option<i64>,
    /// Whether the validator ended with [`VALIDATOR_FAILED`] (now or last time).
    pub validator_failed: bool,
    /// Its opt-in annotations written wrong ([`opt_ins::problems`]), read before the others
    /// are dropped.
    pub opt_in_problems: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodDoc {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PodSpec {
    containers: Vec<Container>,
    init_containers: Vec<Container>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: String,
    security_context: Option<SecurityContext>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecurityContext {
    run_as_user: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PodStatus {
    container_statuses: Vec<ContainerStatus>,
    init_container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerStatus {
    name: String,
    state: Option<State>,
    last_state: Option<State>,
}

#[derive(Deserialize)]
struct State {
    terminated: Option<Terminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Terminated {
    exit_code: i32,
}

/// The label a Deployment's ReplicaSets give their pods, which [`Meta::workload`] strips
/// from the ReplicaSet's name to name the Deployment.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The pod annotations the data-plane checks read; the others are dropped
/// as each pod is read (50,000 pods keep a few MiB).
const POD_ANNOTATIONS: &[&str] = &[
    NETWORKS_ANNOTATION,
    HASH_ANNOTATION,
    skip_subnets::ANNOTATION,
    skip_subnets::ADDED_ANNOTATION,
    INJECT_ANNOTATION,
    MULTUS_ANNOTATION,
    PROXY_UID_ANNOTATION,
];

impl PodDoc {
    /// The pod as the checks see it, `None` when it is not meshed.
    fn meshed(self) -> Option<Pod> {
        let proxy = self
            .spec
            .containers
            .iter()
            .chain(&self.spec.init_containers)
            .find(|c| c.name == PROXY_CONTAINER)?;
        let proxy_uid = proxy.security_context.as_ref().and_then(|s| s.run_as_user);
        let exit = |s: &Option<State>| {
            s.as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
        };
        let validator_failed = self
            .status
            .init_container_statuses
            .iter()
            .chain(&self.status.container_statuses)
            .filter(|c| c.name == VALIDATOR_CONTAINER)
            .any(|c| {
                exit(&c.state) == Some(VALIDATOR_FAILED)
                    || exit(&c.last_state) == Some(VALIDATOR_FAILED)
            });
        let mut meta = self.metadata;
        let pairs = meta
            .annotations
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        let opt_in_problems = opt_ins::problems(pairs, Whose::Pod, "metadata.annotations.")
            .into_iter()
            .map(|p| p.message)
            .collect();
        meta.annotations
            .retain(|k, _| POD_ANNOTATIONS.contains(&k.as_str()));
        meta.labels
            .retain(|k, _| k == CONTROL_PLANE_LABEL || k == POD_TEMPLATE_HASH);
        Some(Pod {
            meta,
            proxy_uid,
            validator_failed,
            opt_in_problems,
        })
    }
}

/// Hands each meshed pod of `namespace` (every namespace when `None`) to
/// `each` as its page is read, so that only a page is held at once; pods
/// without a proxy are dropped.
pub async fn meshed_pods(
    client: &Client,
    namespace: Option<&str>,
    mut each: impl FnMut(Pod),
) -> Result<(), ReadError> {
    let path = match namespace {
        Some(ns) => format!("/api/v1/namespaces/{ns}/pods"),
        None => "/api/v1/pods".to_string(),
    };
    list_pages(client, &path, ListParams::default(), false, |p: PodDoc| {
        p.meshed().into_iter().for_each(&mut each)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_is_cut_down_to_what_the_checks_read() {
        let pod = |proxy_in_init: bool, exit: i32| {
            let proxy = json!({"name": "linkerd-proxy", "securityContext": {"runAsUser": 2102}});
            let app = json!({"name": "app"});
            let (containers, init) = match proxy_in_init {
                true => (json!([app]), json!([proxy])),
                false => (json!([app, proxy]), json!([])),
            };
            serde_json::from_value::<PodDoc>(json!({
                "metadata": {"name": "web", "namespace": "demo",
                             "managedFields": [{"manager": "kubectl"}]},
                "spec": {"containers": containers, "initContainers": init},
                "status": {"initContainerStatuses": [{"name": "linkerd-network-validator",
                    "lastState": {"terminated": {"exitCode": exit}}}]}
            }))
            .unwrap()
            .meshed()
            .unwrap()
        };
        for (in_init, exit, failed) in [(false, 95, true), (true, 0, false), (true, 95, true)] {
            let p = pod(in_init, exit);
            assert_eq!(p.proxy_uid, Some(2102));
            assert_eq!(p.validator_failed, failed, "{in_init} {exit}");
            assert_eq!(p.meta.name, "web");
        }
        let owned: PodDoc = serde_json::from_value(json!({
            "metadata": {"name": "web-5d8f-x2k", "namespace": "demo",
                         "labels": {"pod-template-hash": "5d8f", "app": "web"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f", "controller": true}]},
            "spec": {"containers": [{"name": "linkerd-proxy"}]}
        }))
        .unwrap();
        let owned = owned.meshed().unwrap();
        assert_eq!(
            owned.meta.workload(),
            Some(Subject::Workload(Key {
                kind: Kind::Deployment,
                namespace: "demo".into(),
                name: "web".into()
            })),
            "the Deployment is named from the pod as the checks keep it"
        );
        assert!(!owned.meta.labels.contains_key("app"));
        let unmeshed: PodDoc = serde_json::from_value(
            json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "app"}]}}),
        )
        .unwrap();
        assert!(unmeshed.meshed().is_none());
    }

    /// A NAD's holder is read from its labels and managedFields, as the controller reads it.
    #[test]
    fn a_nad_s_holder_is_read_as_the_controller_reads_it() {
        let nad = |labels: serde_json::Value, managers: serde_json::Value| {
            serde_json::from_value::<NadDoc>(json!({
                "metadata": {"name": "linkerd-cni", "namespace": "demo", "labels": labels,
                             "managedFields": managers},
                "spec": {"config": "{}"}
            }))
            .unwrap()
            .read()
            .2
            .maker
        };
        let created = json!({"app.kubernetes.io/created-by": "linkerd-multus-controller"});
        let controller = json!({"manager": "linkerd-multus-controller", "operation": "Update"});
        let argo = json!({"manager": "argocd-controller", "operation": "Apply"});
        assert_eq!(nad(created.clone(), json!([controller])), Maker::Controller);
        assert_eq!(
            nad(created.clone(), json!([controller, argo])),
            Maker::Other
        );
        assert_eq!(
            nad(
                json!({"app.kubernetes.io/managed-by": "linkerd-multus", "app.kubernetes.io/created-by": "linkerd-multus-controller"}),
                json!([controller, argo])
            ),
            Maker::Rendered
        );
        // The Go operator's, not adopted yet: judged as another's, not as the controller's.
        let operator = json!({"manager": "manager", "operation": "Update"});
        assert_eq!(nad(json!({}), json!([operator])), Maker::Other);
        assert_eq!(
            nad(created, json!([operator, controller])),
            Maker::Controller
        );
    }
}

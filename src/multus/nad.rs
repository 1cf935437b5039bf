//! The NetworkAttachmentDefinition the function generates, and how it tells
//! its own NADs from the user's.

use crate::k8s::namespace::Lookup;
use crate::k8s::resource::{FileRef, INDEX_ANNOTATIONS, PATH_ANNOTATIONS, ResourceRef};
use crate::yaml::{Map, Node};

/// The NAD API group.
pub const GROUP: &str = "k8s.cni.cncf.io";
/// The NAD apiVersion.
pub const API_VERSION: &str = "k8s.cni.cncf.io/v1";
/// The NAD kind.
pub const KIND: &str = "NetworkAttachmentDefinition";
/// The label marking the NADs the function renders (the render's mark), so Git holds them.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value on the NADs the function renders (the render label).
pub const MANAGED_BY: &str = "linkerd-multus";
/// The NAD controller's name (`linkerd-multus controller`): the value of
/// [`CREATED_BY_LABEL`] on the NADs it makes in the cluster (never written into Git, never
/// touched by the function), its field manager and its Events' reporter. Its earlier
/// releases wrote it as the [`MANAGED_BY_LABEL`] value, which a render's apply conflicts
/// with; it relabels those.
pub const CONTROLLER_MANAGED_BY: &str = "linkerd-multus-controller";
/// The label marking the NADs the controller made: a key no render sets, so Git's
/// server-side apply of a rendered NAD over the controller's takes it without a conflict.
pub const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
/// What a client-side apply (`kubectl apply`, Argo CD's default sync) leaves on an object.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The operation a server-side apply records in `metadata.managedFields`.
pub const APPLY_OPERATION: &str = "Apply";
/// The field manager of the Go operator this project replaces (Linkerd Multus Network Attach
/// Operator): controller-runtime names its writes after its binary, `manager`. Its NADs carry
/// no label and no apply: a create and updates by this manager are all the cluster records.
pub const GO_OPERATOR_FIELD_MANAGER: &str = "manager";
/// Argo CD's sync-wave annotation: lower waves are applied first.
pub const ARGOCD_SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";

/// Who holds a NAD: read from its [`MANAGED_BY_LABEL`] in a package, and in the cluster
/// from what [`Record`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maker {
    /// Rendered by the function, from Git.
    Rendered,
    /// Made by the controller in the cluster.
    Controller,
    /// Anyone else: a user, another tool.
    Other,
}

/// What the cluster records of who wrote a live NAD: its marks and the appliers among its
/// `metadata.managedFields`. [`Record::holder`] reads who holds it, one rule for the
/// controller, `check` and the webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its [`MANAGED_BY_LABEL`].
    pub managed_by: Option<&'a str>,
    /// Its [`CREATED_BY_LABEL`].
    pub created_by: Option<&'a str>,
    /// A field manager other than the controller that applied it (a server-side apply:
    /// `kubectl`, `argocd-controller`, `kustomize-controller`), or [`CLIENT_SIDE_APPLY`]
    /// when a client-side apply left its [`LAST_APPLIED_ANNOTATION`].
    pub applied_by: Option<&'a str>,
    /// Whether every write its managedFields record (one at least) is an update by the Go
    /// operator's [`GO_OPERATOR_FIELD_MANAGER`].
    pub go_operator_writes: bool,
}

/// [`Record::applied_by`] for a NAD a client-side apply wrote.
pub const CLIENT_SIDE_APPLY: &str = "a client-side apply";

impl<'a> Record<'a> {
    /// The record of a NAD with `labels`, whose managedFields hold `writes` (each entry's
    /// manager and operation), with [`LAST_APPLIED_ANNOTATION`] or not.
    pub fn read(
        labels: &'a dyn Lookup,
        writes: impl IntoIterator<Item = (&'a str, &'a str)>,
        client_side_applied: bool,
    ) -> Self {
        let writes: Vec<(&str, &str)> = writes.into_iter().collect();
        let go_operator_writes = !writes.is_empty()
            && writes.iter().all(|(manager, operation)| {
                *manager == GO_OPERATOR_FIELD_MANAGER && *operation != APPLY_OPERATION
            });
        let applied_by = writes
            .into_iter()
            .find(|(manager, operation)| {
                *operation == APPLY_OPERATION && *manager != CONTROLLER_MANAGED_BY
            })
            .map(|(manager, _)| manager)
            .or(client_side_applied.then_some(CLIENT_SIDE_APPLY));
        Record {
            managed_by: labels.lookup(MANAGED_BY_LABEL),
            created_by: labels.lookup(CREATED_BY_LABEL),
            applied_by,
            go_operator_writes,
        }
    }

    /// Who holds the NAD. The render's mark makes it Git's ([`Maker::Rendered`]); any other
    /// [`MANAGED_BY_LABEL`] value, or an apply by another field manager, someone else's; the
    /// controller's mark (or its earlier releases') otherwise makes it the controller's, and
    /// so does being the Go operator's ([`Record::go_operators`]): the controller adopts it.
    pub fn holder(&self) -> Maker {
        match self.managed_by {
            Some(MANAGED_BY) => Maker::Rendered,
            Some(CONTROLLER_MANAGED_BY) | None if self.applied_by.is_some() => Maker::Other,
            Some(CONTROLLER_MANAGED_BY) => Maker::Controller,
            None if self.created_by == Some(CONTROLLER_MANAGED_BY) => Maker::Controller,
            None if self.created_by.is_none() && self.go_operator_writes => Maker::Controller,
            _ => Maker::Other,
        }
    }

    /// Whether it is a NAD the Go operator made, as it makes them: no mark of anyone's (no
    /// `managed-by`, no `created-by`), never applied, written only by the operator's
    /// [`GO_OPERATOR_FIELD_MANAGER`]. A user's `kubectl create`, `label` or `edit` records
    /// another manager, and makes it the user's.
    pub fn go_operators(&self) -> bool {
        self.managed_by.is_none()
            && self.created_by.is_none()
            && self.applied_by.is_none()
            && self.go_operator_writes
    }

    /// Whether it carries a mark the controller replaces with its [`CREATED_BY_LABEL`]: its
    /// earlier releases' `app.kubernetes.io/managed-by: linkerd-multus-controller`, or none at
    /// all on the Go operator's NAD it adopts ([`Record::go_operators`]).
    pub fn legacy(&self) -> bool {
        self.managed_by == Some(CONTROLLER_MANAGED_BY) || self.go_operators()
    }
}

/// Whether a resource is a NAD.
pub fn is_nad(r: &ResourceRef) -> bool {
    r.kind == KIND && r.group() == GROUP
}

/// Whether a NAD was generated by this function.
pub fn is_generated(item: &Node) -> bool {
    item.get_path(&["metadata", "labels"])
        .and_then(Node::as_map)
        .and_then(|l| l.get_text(MANAGED_BY_LABEL))
        == Some(MANAGED_BY)
}

/// A NAD's `spec.config`.
pub fn config(item: &Node) -> Option<&str> {
    item.get_path(&["spec", "config"]).and_then(Node::as_text)
}

/// Replaces a generated NAD's `spec.config`.
pub fn set_config(item: &mut Node, config: &str) {
    if let Some(spec) = item.as_map_mut().and_then(|m| m.map_entry("spec")) {
        spec.insert("config", Node::literal(config));
    }
}

/// Sets (or, with `None`, removes) an annotation of a generated NAD; says
/// whether it changed. An annotations map left empty is removed.
pub fn set_annotation(item: &mut Node, key: &str, value: Option<&str>) -> bool {
    let Some(meta) = item.as_map_mut().and_then(|m| m.map_entry("metadata")) else {
        return false;
    };
    let current = meta
        .get("annotations")
        .and_then(Node::as_map)
        .and_then(|a| a.get_text(key));
    if current == value {
        return false;
    }
    match value {
        Some(value) => {
            if let Some(annotations) = meta.map_entry("annotations") {
                annotations.insert(key, Node::string(value));
            }
        }
        None => {
            if let Some(annotations) = meta.get_mut("annotations").and_then(Node::as_map_mut) {
                annotations.remove(key);
                if annotations.is_empty() {
                    meta.remove("annotations");
                }
            }
        }
    }
    true
}

/// The file a new NAD goes to: beside its Namespace's file, or in a folder
/// named after the namespace when its Namespace is not in the input.
pub fn file_path(namespace: Option<&str>, name: &str, namespace_file: Option<&str>) -> String {
    let file = match namespace {
        Some(ns) => format!("networkattachmentdefinition_{ns}_{name}.yaml"),
        None => format!("networkattachmentdefinition_{name}.yaml"),
    };
    let dir = match (namespace_file, namespace) {
        (Some(path), _) => path.rsplit_once('/').map(|(dir, _)| dir),
        (None, Some(ns)) => Some(ns),
        (None, None) => None,
    };
    match dir {
        Some(dir) => format!("{dir}/{file}"),
        None => file,
    }
}

/// A new NAD, labelled with its maker's `label` (key and value: the render's
/// [`MANAGED_BY_LABEL`], the controller's [`CREATED_BY_LABEL`]) and carrying
/// `annotations` (and the host's file annotations, with `file`).
pub fn new(
    name: &str,
    namespace: Option<&str>,
    config: &str,
    label: (&str, &str),
    annotations: &[(&str, &str)],
    file: Option<&FileRef>,
) -> Node {
    let mut meta = Map::default();
    meta.insert("name", Node::string(name));
    if let Some(ns) = namespace {
        meta.insert("namespace", Node::string(ns));
    }
    let mut labels = Map::default();
    labels.insert(label.0, Node::string(label.1));
    meta.insert("labels", labels.into());
    if file.is_some() || !annotations.is_empty() {
        let mut map = Map::default();
        for (key, value) in annotations {
            map.insert(key, Node::string(*value));
        }
        meta.insert("annotations", map.into());
    }
    if let Some(file) = file {
        let annotations = meta
            .map_entry("annotations")
            .expect("the annotations were just inserted");
        let index = file.index.unwrap_or(0).to_string();
        for (path_key, index_key) in PATH_ANNOTATIONS.iter().zip(INDEX_ANNOTATIONS) {
            annotations.insert(path_key, Node::string(file.path.as_str()));
            annotations.insert(index_key, Node::string(index.as_str()));
        }
    }
    let mut spec = Map::default();
    spec.insert("config", Node::literal(config));
    let mut nad = Map::default();
    nad.insert("apiVersion", Node::string(API_VERSION));
    nad.insert("kind", Node::string(KIND));
    nad.insert("metadata", meta.into());
    nad.insert("spec", spec.into());
    nad.into()
}

/// CNI spec versions a NAD may declare.
pub const CNI_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// The NetworkAttachmentDefinition resource, for kube's dynamic API: what
/// the webhook's caches and the NAD controller watch.
#[cfg(feature = "webhook")]
pub fn api_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(GROUP, "v1", KIND),
        "network-attachment-definitions",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::emit_document;

    #[test]
    fn file_paths() {
        for (ns, ns_file, want) in [
            (
                Some("demo"),
                Some("namespaces/demo.yaml"),
                "namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml",
            ),
            (
                Some("demo"),
                Some("demo.yaml"),
                "networkattachmentdefinition_demo_linkerd-cni.yaml",
            ),
            (
                Some("demo"),
                None,
                "demo/networkattachmentdefinition_demo_linkerd-cni.yaml",
            ),
            (None, None, "networkattachmentdefinition_linkerd-cni.yaml"),
        ] {
            assert_eq!(file_path(ns, "linkerd-cni", ns_file), want);
        }
    }

    #[test]
    fn annotations_of_a_generated_nad_are_set_and_removed() {
        let mut nad = new(
            "linkerd-cni",
            Some("demo"),
            "{}",
            (MANAGED_BY_LABEL, MANAGED_BY),
            &[],
            None,
        );
        assert!(set_annotation(&mut nad, ARGOCD_SYNC_WAVE, Some("-1")));
        assert!(!set_annotation(&mut nad, ARGOCD_SYNC_WAVE, Some("-1")));
        assert!(
            emit_document(&nad)
                .contains("  annotations:\n    argocd.argoproj.io/sync-wave: \"-1\"\n")
        );
        assert!(set_annotation(&mut nad, ARGOCD_SYNC_WAVE, None));
        assert!(!set_annotation(&mut nad, ARGOCD_SYNC_WAVE, None));
        assert!(!emit_document(&nad).contains("annotations"));
    }

    /// Who holds a live NAD, from its labels and the appliers its managedFields record.
    #[test]
    fn holders_by_marks_and_appliers() {
        use std::collections::BTreeMap;
        let controller = (CONTROLLER_MANAGED_BY, "Update");
        let controller_applied = (CONTROLLER_MANAGED_BY, APPLY_OPERATION);
        let rendered = [(MANAGED_BY_LABEL, MANAGED_BY)];
        let created = [(CREATED_BY_LABEL, CONTROLLER_MANAGED_BY)];
        let legacy = [(MANAGED_BY_LABEL, CONTROLLER_MANAGED_BY)];
        let git_over_created = [
            (MANAGED_BY_LABEL, MANAGED_BY),
            (CREATED_BY_LABEL, CONTROLLER_MANAGED_BY),
        ];
        let helm = [(MANAGED_BY_LABEL, "Helm")];
        let go_operator = (GO_OPERATOR_FIELD_MANAGER, "Update");
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            bool,
            Maker,
        );
        let cases: &[Case] = &[
            (&created, &[controller], false, Maker::Controller),
            (
                &created,
                &[controller, controller_applied],
                false,
                Maker::Controller,
            ),
            (
                &created,
                &[controller, ("kubectl-edit", "Update")],
                false,
                Maker::Controller,
            ),
            (&legacy, &[controller], false, Maker::Controller),
            (
                &rendered,
                &[("argocd-controller", APPLY_OPERATION)],
                false,
                Maker::Rendered,
            ),
            (
                &git_over_created,
                &[controller, ("kubectl", APPLY_OPERATION)],
                false,
                Maker::Rendered,
            ),
            (
                &created,
                &[controller, ("kustomize-controller", APPLY_OPERATION)],
                false,
                Maker::Other,
            ),
            (
                &legacy,
                &[controller, ("kubectl", APPLY_OPERATION)],
                false,
                Maker::Other,
            ),
            (
                &created,
                &[controller, ("argocd-controller", "Update")],
                true,
                Maker::Other,
            ),
            (&helm, &[("helm", "Update")], false, Maker::Other),
            (&[], &[("tests", APPLY_OPERATION)], false, Maker::Other),
            (&[], &[("kubectl-create", "Update")], false, Maker::Other),
            // The Go operator's: created and updated by its `manager`, nothing else.
            (&[], &[go_operator], false, Maker::Controller),
            (&[], &[go_operator, go_operator], false, Maker::Controller),
            // Touched by a user since, applied, or marked by someone: not the operator's.
            (
                &[],
                &[go_operator, ("kubectl-label", "Update")],
                false,
                Maker::Other,
            ),
            (&[], &[go_operator], true, Maker::Other),
            (
                &[],
                &[(GO_OPERATOR_FIELD_MANAGER, APPLY_OPERATION)],
                false,
                Maker::Other,
            ),
            (&helm, &[go_operator], false, Maker::Other),
            (&[], &[], false, Maker::Other),
        ];
        for (labels, writes, client_side, want) in cases {
            let labels: BTreeMap<String, String> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let record = Record::read(&labels, writes.iter().copied(), *client_side);
            assert_eq!(
                record.holder(),
                *want,
                "{labels:?} {writes:?} {client_side}"
            );
        }
        let labels: BTreeMap<String, String> = legacy
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(Record::read(&labels, [controller], false).legacy());
        let none = BTreeMap::<String, String>::new();
        let operator = Record::read(&none, [go_operator], false);
        assert!(operator.go_operators() && operator.legacy());
        let created: BTreeMap<String, String> = created
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let adopted = Record::read(&created, [go_operator, controller], false);
        assert!(!adopted.go_operators() && !adopted.legacy());
    }

    #[test]
    fn writes_a_labelled_nad_with_its_file() {
        let file = FileRef {
            path: "ns/nad.yaml".into(),
            index: None,
        };
        let nad = new(
            "linkerd-cni",
            Some("demo"),
            "{\n  \"a\": 1\n}",
            (MANAGED_BY_LABEL, MANAGED_BY),
            &[],
            Some(&file),
        );
        assert!(is_generated(&nad));
        assert_eq!(config(&nad), Some("{\n  \"a\": 1\n}"));
        assert_eq!(
            emit_document(&nad),
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: demo\n  labels:\n    app.kubernetes.io/managed-by: linkerd-multus\n  annotations:\n    internal.config.kubernetes.io/path: ns/nad.yaml\n    internal.config.kubernetes.io/index: \"0\"\n    config.kubernetes.io/path: ns/nad.yaml\n    config.kubernetes.io/index: \"0\"\nspec:\n  config: |-\n    {\n      \"a\": 1\n    }\n"
        );
    }
}

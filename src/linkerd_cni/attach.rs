//! Which pods get Linkerd-CNI, and how a pod template changes: the original
//! webhook's rules, shared by every front.
//!
//! A pod (template) is attached when `linkerd.io/multus` is `enabled` and
//! `linkerd.io/inject` is `enabled` or `ingress` (each read from the pod, else
//! from its namespace), or when it is a control-plane pod: in the Linkerd
//! namespace with a non-empty `linkerd.io/control-plane-component` label.
//! Attached pods that are not control-plane pods get `config.linkerd.io/proxy-uid`
//! from the namespace's OpenShift UID range when they have none.

use std::fmt;

use crate::k8s::namespace::{INJECT_ANNOTATION, Lookup, MULTUS_ANNOTATION};
use crate::k8s::resource;
use crate::k8s::workload::{
    WorkloadKind, metadata_is_a_map, remove_annotation, set_annotation, template_annotations,
    template_labels,
};
use crate::linkerd_cni::settings::Settings;
use crate::multus::interface_name;
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks, NetworksError, Selection};
use crate::yaml::{Map, Node};

/// Records on a workload what the function added to it.
pub const OWNED_ANNOTATION: &str = "multus.linkerd.io/owned";
/// Linkerd's proxy UID override.
pub const PROXY_UID_ANNOTATION: &str = "config.linkerd.io/proxy-uid";
/// Marks Linkerd control-plane pods.
pub const CONTROL_PLANE_LABEL: &str = "linkerd.io/control-plane-component";

/// What the rules want for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Whether the NAD is attached.
    pub attach: bool,
    /// Whether it is a control-plane pod.
    pub control_plane: bool,
    /// The proxy UID the namespace's range asks for.
    pub proxy_uid: Option<u64>,
    /// Why the namespace's UID range could not be used, if it could not.
    pub range_problem: Option<String>,
}

/// Applies the rules to a pod's annotations and labels and its namespace's annotations.
pub fn decide(
    settings: &Settings,
    pod_namespace: &str,
    annotations: &dyn Lookup,
    labels: &dyn Lookup,
    namespace: &dyn Lookup,
) -> Decision {
    // As in the original webhook, an empty value on the pod counts as unset.
    let get = |key| {
        annotations
            .lookup(key)
            .filter(|v| !v.is_empty())
            .or_else(|| namespace.lookup(key))
    };
    let enabled = get(MULTUS_ANNOTATION) == Some("enabled")
        && matches!(get(INJECT_ANNOTATION), Some("enabled" | "ingress"));
    let control_plane = pod_namespace == settings.linkerd_namespace
        && labels
            .lookup(CONTROL_PLANE_LABEL)
            .is_some_and(|v| !v.is_empty());
    let mut decision = Decision {
        attach: enabled || control_plane,
        control_plane,
        ..Decision::default()
    };
    if decision.attach
        && !control_plane
        && let Some(range) = namespace.lookup(&settings.uid_range_annotation)
    {
        match proxy_uid(range, settings.proxy_uid_offset) {
            Ok(uid) => decision.proxy_uid = Some(uid),
            Err(problem) => {
                decision.range_problem = Some(format!(
                    "annotation {}: {problem}; no proxy UID is set",
                    settings.uid_range_annotation
                ))
            }
        }
    }
    decision
}

/// `first + offset` for a range `first/size`.
fn proxy_uid(range: &str, offset: u64) -> Result<u64, String> {
    let parsed = range
        .split_once('/')
        .and_then(|(first, size)| Some((first.parse::<u64>().ok()?, size.parse::<u64>().ok()?)));
    let Some((first, size)) = parsed else {
        return Err(format!("{range:?} is not a range like 1000000000/10000"));
    };
    if offset >= size {
        return Err(format!(
            "proxy UID offset {offset} is outside the range {range:?}"
        ));
    }
    first
        .checked_add(offset)
        .filter(|uid| *uid <= u64::from(u32::MAX))
        .ok_or_else(|| format!("{range:?} plus the offset {offset} is not a valid UID"))
}

/// How the function came to own the networks entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkOwnership {
    /// It created the annotation.
    Created,
    /// It appended its entry to the user's annotation.
    Appended,
}

/// What the function added to a workload, as recorded in [`OWNED_ANNOTATION`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    /// The networks entry.
    pub network: Option<NetworkOwnership>,
    /// The proxy UID value it set.
    pub proxy_uid: Option<String>,
}

impl Owned {
    /// Reads the record; `None` when absent.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut owned = Owned::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("network", "created")) => owned.network = Some(NetworkOwnership::Created),
                Some(("network", "appended")) => owned.network = Some(NetworkOwnership::Appended),
                Some(("proxy-uid", v)) if !v.is_empty() => owned.proxy_uid = Some(v.to_string()),
                _ => {
                    return Err(format!(
                        "{part:?} is not one of network=created, network=appended, proxy-uid=<uid>; the function writes this annotation, remove it to start afresh"
                    ));
                }
            }
        }
        Ok(owned)
    }

    /// Whether nothing is owned.
    pub fn is_empty(&self) -> bool {
        self.network.is_none() && self.proxy_uid.is_none()
    }
}

impl fmt::Display for Owned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let network = match self.network {
            Some(NetworkOwnership::Created) => Some("network=created"),
            Some(NetworkOwnership::Appended) => Some("network=appended"),
            None => None,
        };
        if let Some(network) = network {
            f.write_str(network)?;
        }
        if let Some(uid) = &self.proxy_uid {
            let comma = if network.is_some() { "," } else { "" };
            write!(f, "{comma}proxy-uid={uid}")?;
        }
        Ok(())
    }
}

/// One change made to a pod template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The NAD was added to the networks annotation.
    Attached,
    /// The entry the function had added was removed.
    Detached,
    /// The proxy UID was set.
    ProxyUidSet(String),
    /// The proxy UID the function had set was removed.
    ProxyUidRemoved,
    /// The proxy UID the function had set was edited by hand: it is the user's now.
    ProxyUidReleased,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Attached => write!(f, "attached to {NETWORKS_ANNOTATION}"),
            Change::Detached => write!(f, "removed from {NETWORKS_ANNOTATION}"),
            Change::ProxyUidSet(v) => write!(f, "set {PROXY_UID_ANNOTATION} to {v}"),
            Change::ProxyUidRemoved => write!(f, "removed {PROXY_UID_ANNOTATION}"),
            Change::ProxyUidReleased => write!(
                f,
                "{PROXY_UID_ANNOTATION} was edited by hand; it is left to the user from now on"
            ),
        }
    }
}

/// Why a pod template cannot be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The networks annotation does not parse.
    #[error("annotation {NETWORKS_ANNOTATION}: {0}")]
    Networks(#[from] NetworksError),
    /// A field has the wrong shape.
    #[error("{0}")]
    Shape(String),
}

/// The result of [`apply`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// What the function now owns on the workload.
    pub owned: Owned,
    /// What changed.
    pub changes: Vec<Change>,
    /// Things the user should know.
    pub warnings: Vec<String>,
    /// The selections of the NAD left in the networks annotation after the change.
    pub references: Vec<NadReference>,
}

/// A selection of the NAD in a pod's networks annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NadReference {
    /// The namespace it names, if it names one; else the pod's own.
    pub namespace: Option<String>,
    /// Whether it is the entry the function added.
    pub owned: bool,
}

/// Whether a selection is the entry the function adds for `nad`: plain, or exactly
/// `nad@<its deterministic interface name>` as interface naming leaves it.
fn own_entry(nad: &str) -> impl Fn(&Selection) -> bool + '_ {
    // The name is a hash: made only for a selection that could be it.
    let named = std::cell::OnceCell::new();
    move |s| {
        s.name == nad
            && (s.is_plain()
                || s.interface.is_some()
                    && s.is_exactly(
                        nad,
                        named.get_or_init(|| interface_name::deterministic(nad)),
                    ))
    }
}

/// One annotation the rules change: its key, and its new value (`None`
/// removes it).
pub type Edit = (&'static str, Option<String>);

/// Brings a pod template to what `decision` wants, given what the function owned
/// before. Nothing changes when an error is returned.
pub fn apply(
    template: &mut Map,
    settings: &Settings,
    pod_namespace: &str,
    decision: &Decision,
    before: &Owned,
) -> Result<Applied, AttachError> {
    let annotations = template_annotations(template);
    metadata_is_a_map(template).map_err(AttachError::Shape)?;
    let networks = match annotations.and_then(|a| a.get(NETWORKS_ANNOTATION)) {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => Some(n.as_str().ok_or_else(|| not_a_string(n.kind_name()))?),
    };
    let current = Current {
        networks,
        proxy_uid: annotations.and_then(|a| a.get_text(PROXY_UID_ANNOTATION)),
    };
    let (applied, edits) = plan(current, settings, pod_namespace, decision, before)?;
    for (key, value) in edits {
        match value {
            Some(v) => set_annotation(template, key, v).map_err(AttachError::Shape)?,
            None => remove_annotation(template, key),
        }
    }
    Ok(applied)
}

/// The error of a networks annotation that is not a string.
pub fn not_a_string(kind: &str) -> AttachError {
    AttachError::Shape(format!(
        "annotation {NETWORKS_ANNOTATION} is {kind}, not a string"
    ))
}

/// The annotations of a pod template the rules change, as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Current<'a> {
    /// The networks annotation.
    pub networks: Option<&'a str>,
    /// The proxy UID annotation.
    pub proxy_uid: Option<&'a str>,
}

/// What `decision` changes on a pod template whose annotations are `current`,
/// given what the function owned before: the outcome, and the annotation
/// edits in the order they are written (networks, then proxy UID).
pub fn plan(
    current: Current<'_>,
    settings: &Settings,
    pod_namespace: &str,
    decision: &Decision,
    before: &Owned,
) -> Result<(Applied, Vec<Edit>), AttachError> {
    let nad = settings.nad_name.as_str();
    let Current {
        networks: text,
        proxy_uid: current_uid,
    } = current;
    let networks = text.map(Networks::parse).transpose()?;

    let own = own_entry(nad);
    let mut out = Applied::default();
    let mut new_networks: Option<Option<String>> = None;
    let referenced = networks
        .as_ref()
        .is_some_and(|n| n.references(nad, pod_namespace));
    if decision.attach {
        if !referenced {
            let appended = match &networks {
                Some(n) => n.with_appended(nad),
                None => nad.to_string(),
            };
            new_networks = Some(Some(appended));
            out.owned.network = Some(match text {
                Some(_) => NetworkOwnership::Appended,
                None => NetworkOwnership::Created,
            });
            out.changes.push(Change::Attached);
        } else if before.network.is_some()
            && networks
                .as_ref()
                .is_some_and(|n| n.selections().iter().any(&own))
        {
            out.owned.network = before.network;
        }
    } else if let Some(how) = before.network {
        match networks.as_ref().and_then(|n| n.without_first(&own)) {
            Some(rest) => {
                let remove_key = how == NetworkOwnership::Created && rest.trim().is_empty();
                new_networks = Some((!remove_key).then_some(rest));
                out.changes.push(Change::Detached);
            }
            None => out.warnings.push(format!(
                "the {nad} entry this function added to {NETWORKS_ANNOTATION} is gone or was edited; the annotation is left as it is"
            )),
        }
    }

    // As in the Go operator (and for Linkerd's injector), an empty proxy UID is none: the
    // range's UID replaces it, and undoing that removes the annotation.
    let current_uid = current_uid.filter(|v| !v.is_empty());
    let user_uid = current_uid.filter(|v| before.proxy_uid.as_deref() != Some(*v));
    if before.proxy_uid.is_some() && user_uid.is_some() {
        out.changes.push(Change::ProxyUidReleased);
    }
    let mut new_uid: Option<Option<String>> = None;
    match decision.proxy_uid.filter(|_| user_uid.is_none()) {
        Some(uid) => {
            let uid = uid.to_string();
            if current_uid != Some(uid.as_str()) {
                out.changes.push(Change::ProxyUidSet(uid.clone()));
                new_uid = Some(Some(uid.clone()));
            }
            out.owned.proxy_uid = Some(uid);
        }
        None => {
            if before.proxy_uid.is_some() && user_uid.is_none() && current_uid.is_some() {
                out.changes.push(Change::ProxyUidRemoved);
                new_uid = Some(None);
            }
        }
    }

    let edited = match &new_networks {
        Some(Some(t)) => Some(Networks::parse(t)?),
        _ => None,
    };
    let after = match &new_networks {
        Some(Some(_)) => edited.as_ref(),
        Some(None) => None,
        None => networks.as_ref(),
    };
    let mut own_entry_left = out.owned.network.is_some();
    out.references = after
        .map(Networks::selections)
        .unwrap_or_default()
        .iter()
        .filter(|s| s.name == nad)
        .map(|s| {
            let owned = own_entry_left && own(s);
            own_entry_left &= !owned;
            NadReference {
                namespace: s.namespace.clone().filter(|n| !n.is_empty()),
                owned,
            }
        })
        .collect();
    let edits = [
        (NETWORKS_ANNOTATION, new_networks),
        (PROXY_UID_ANNOTATION, new_uid),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key, value?)))
    .collect();
    Ok((out, edits))
}

/// The edit of the record of what the function owns, when it changes.
fn record_edit(before: &Owned, after: &Owned) -> Option<Edit> {
    (after != before).then(|| {
        let value = (!after.is_empty()).then(|| after.to_string());
        (OWNED_ANNOTATION, value)
    })
}

/// What [`workload`] did with one workload object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadOutcome {
    /// The object has no pod template (an Argo Rollout with a `workloadRef`, say).
    NoTemplate,
    /// The rules want the NAD attached but the caller said it cannot be: the
    /// object is left as it is.
    Held(Decision),
    /// The rules were applied; on error nothing changed.
    Decided {
        /// What the rules want.
        decision: Decision,
        /// What changed, or why the pod template could not be changed.
        applied: Result<Applied, AttachError>,
    },
}

/// A workload object the rules cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The record of what the function added does not parse.
    #[error("annotation {OWNED_ANNOTATION}: {0}")]
    Owned(String),
    /// The object, its metadata or its pod template is not a mapping.
    #[error("{0}")]
    Shape(String),
}

/// Brings one workload object (a Pod, or a resource holding a pod template) in
/// line with the rules: reads what the function owned on it, decides on the pod
/// template's annotations and labels and its namespace's annotations, applies
/// the decision and records what it now owns. `may_attach` is asked only when
/// the rules want the NAD attached. The KRM function, the renderer and the
/// webhook all call this.
pub fn workload(
    object: &mut Node,
    kind: &WorkloadKind,
    settings: &Settings,
    pod_namespace: &str,
    namespace: &dyn Lookup,
    may_attach: impl FnOnce() -> bool,
) -> Result<WorkloadOutcome, WorkloadError> {
    let Some(map) = object.as_map() else {
        return Err(WorkloadError::Shape(format!(
            "the object is {}, not a mapping",
            object.kind_name()
        )));
    };
    metadata_is_a_map(map).map_err(WorkloadError::Shape)?;
    let before = resource::annotation(object, OWNED_ANNOTATION)
        .map(Owned::parse)
        .transpose()
        .map_err(WorkloadError::Owned)?
        .unwrap_or_default();
    let Some(template) = kind
        .pod_template_mut(object)
        .map_err(WorkloadError::Shape)?
    else {
        return Ok(WorkloadOutcome::NoTemplate);
    };
    let decision = decide(
        settings,
        pod_namespace,
        &template_annotations(template),
        &template_labels(template),
        namespace,
    );
    if decision.attach && !may_attach() {
        return Ok(WorkloadOutcome::Held(decision));
    }
    let applied = apply(template, settings, pod_namespace, &decision, &before);
    if let Ok(applied) = &applied
        && let Some((key, value)) = record_edit(&before, &applied.owned)
    {
        let object = object.as_map_mut().expect("checked above");
        match value {
            Some(v) => set_annotation(object, key, v)
                .expect("metadata is a mapping or absent: checked above"),
            None => remove_annotation(object, key),
        }
    }
    Ok(WorkloadOutcome::Decided { decision, applied })
}

/// What the rules change on a pod read by [`pod`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodChange {
    /// What the rules want.
    pub decision: Decision,
    /// What changed.
    pub applied: Applied,
    /// The annotation edits, in the order [`workload`] writes them on a Pod
    /// object: networks, proxy UID, then the record.
    pub edits: Vec<Edit>,
}

/// Why the rules cannot act on a pod read by [`pod`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// The record does not parse.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The annotations cannot be changed.
    #[error(transparent)]
    Attach(#[from] AttachError),
}

/// [`workload`] on a Pod read as lookups of its annotations and labels rather
/// than as a tree: the webhook's way, which writes the edits as a JSONPatch.
/// `networks` is the networks annotation, `Err` with its kind when it is not a
/// string; `annotations` holds the string values only.
pub fn pod(
    annotations: &dyn Lookup,
    networks: Result<Option<&str>, &str>,
    labels: &dyn Lookup,
    settings: &Settings,
    pod_namespace: &str,
    namespace: &dyn Lookup,
) -> Result<PodChange, PodError> {
    let before = annotations
        .lookup(OWNED_ANNOTATION)
        .map(Owned::parse)
        .transpose()
        .map_err(WorkloadError::Owned)?
        .unwrap_or_default();
    let decision = decide(settings, pod_namespace, annotations, labels, namespace);
    let current = Current {
        networks: networks.map_err(not_a_string)?,
        proxy_uid: annotations.lookup(PROXY_UID_ANNOTATION),
    };
    let (applied, mut edits) = plan(current, settings, pod_namespace, &decision, &before)?;
    edits.extend(record_edit(&before, &applied.owned));
    Ok(PodChange {
        decision,
        applied,
        edits,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::yaml::{emit_document, parse_document};

    fn lookup(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn decision_table() {
        let s = Settings::default();
        let on = [
            (MULTUS_ANNOTATION, "enabled"),
            (INJECT_ANNOTATION, "enabled"),
        ];
        let range = [("openshift.io/sa.scc.uid-range", "1000000000/10000")];
        let cp = [(CONTROL_PLANE_LABEL, "destination")];
        #[allow(clippy::type_complexity)]
        let cases: &[(
            &str,
            &str,
            &[(&str, &str)],
            &[(&str, &str)],
            &[(&str, &str)],
            bool,
            Option<u64>,
        )] = &[
            ("namespace enables", "demo", &[], &[], &on, true, None),
            ("pod enables", "demo", &on, &[], &[], true, None),
            (
                "ingress counts",
                "demo",
                &[
                    (MULTUS_ANNOTATION, "enabled"),
                    (INJECT_ANNOTATION, "ingress"),
                ],
                &[],
                &[],
                true,
                None,
            ),
            (
                "pod overrides namespace",
                "demo",
                &[(MULTUS_ANNOTATION, "disabled")],
                &[],
                &on,
                false,
                None,
            ),
            (
                "per-key fallback",
                "demo",
                &[(INJECT_ANNOTATION, "enabled")],
                &[],
                &[(MULTUS_ANNOTATION, "enabled")],
                true,
                None,
            ),
            (
                "inject disabled",
                "demo",
                &[(INJECT_ANNOTATION, "disabled")],
                &[],
                &on,
                false,
                None,
            ),
            ("nothing", "demo", &[], &[], &[], false, None),
            ("control plane", "linkerd", &[], &cp, &[], true, None),
            (
                "empty control-plane label",
                "linkerd",
                &[],
                &[(CONTROL_PLANE_LABEL, "")],
                &[],
                false,
                None,
            ),
            (
                "control-plane label elsewhere",
                "demo",
                &[],
                &cp,
                &[],
                false,
                None,
            ),
            (
                "uid range",
                "demo",
                &on,
                &[],
                &range,
                true,
                Some(1_000_002_102),
            ),
            (
                "no uid for control plane",
                "linkerd",
                &[],
                &cp,
                &[range[0], on[0], on[1]],
                true,
                None,
            ),
        ];
        for (name, ns, ann, labels, ns_ann, attach, uid) in cases {
            let mut ns_ann = lookup(ns_ann);
            if *name == "uid range" {
                ns_ann.extend(lookup(&on));
            }
            let d = decide(&s, ns, &lookup(ann), &lookup(labels), &ns_ann);
            assert_eq!((d.attach, d.proxy_uid), (*attach, *uid), "{name}");
        }
    }

    #[test]
    fn bad_ranges_are_explained() {
        for (range, want) in [
            ("1000/x", "is not a range like 1000000000/10000"),
            ("1000", "is not a range"),
            (
                "1000/100",
                "proxy UID offset 2102 is outside the range \"1000/100\"",
            ),
            ("4294967290/10000", "is not a valid UID"),
        ] {
            assert!(
                proxy_uid(range, 2102).unwrap_err().contains(want),
                "{range}"
            );
        }
    }

    #[test]
    fn owned_round_trips() {
        for text in [
            "network=created",
            "network=appended,proxy-uid=1000002102",
            "proxy-uid=5",
            "",
        ] {
            assert_eq!(Owned::parse(text).unwrap().to_string(), text);
        }
        assert!(Owned::parse("network=mine").is_err());
    }

    fn run(src: &str, attach: bool, uid: Option<u64>, before: &str) -> (String, Applied) {
        let mut doc = parse_document(src).unwrap();
        let decision = Decision {
            attach,
            proxy_uid: uid,
            ..Decision::default()
        };
        let applied = apply(
            doc.as_map_mut().unwrap(),
            &Settings::default(),
            "demo",
            &decision,
            &Owned::parse(before).unwrap(),
        )
        .unwrap();
        (emit_document(&doc), applied)
    }

    #[test]
    fn attaching_and_detaching_round_trips() {
        let cases = [
            "spec: {}\n",
            "metadata:\n  labels:\n    app: web\nspec: {}\n",
            "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
            "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\": \"a\", \"ips\": [\"10.0.0.1/24\"]}]'\n",
            "metadata:\n  annotations:\n    x: y1\n",
        ];
        for src in cases {
            let (attached, applied) = run(src, true, Some(1_000_002_102), "");
            assert!(attached.contains("linkerd-cni"), "{attached}");
            assert!(
                attached.contains("config.linkerd.io/proxy-uid: \"1000002102\""),
                "{attached}"
            );
            let owned = applied.owned.to_string();
            let (again, same) = run(&attached, true, Some(1_000_002_102), &owned);
            assert_eq!(again, attached, "not idempotent");
            assert!(same.changes.is_empty());
            assert_eq!(same.owned, applied.owned);
            let (detached, undone) = run(&attached, false, None, &owned);
            assert_eq!(detached, src, "detach did not restore");
            assert_eq!(undone.changes, [Change::Detached, Change::ProxyUidRemoved]);
            assert!(undone.owned.is_empty());
        }
    }

    /// An empty proxy UID counts as none, as in the Go operator: the range's UID
    /// replaces it; a later detach removes the annotation (`""` and none mean the same).
    #[test]
    fn an_empty_proxy_uid_is_none() {
        let src = "metadata:\n  annotations:\n    config.linkerd.io/proxy-uid: \"\"\n";
        let (attached, applied) = run(src, true, Some(1_000_002_102), "");
        assert!(
            attached.contains("config.linkerd.io/proxy-uid: \"1000002102\""),
            "{attached}"
        );
        assert_eq!(
            applied.changes,
            [Change::Attached, Change::ProxyUidSet("1000002102".into())]
        );
        let owned = applied.owned.to_string();
        assert_eq!(owned, "network=created,proxy-uid=1000002102");
        let (again, same) = run(&attached, true, Some(1_000_002_102), &owned);
        assert_eq!((again.as_str(), same.changes.len()), (attached.as_str(), 0));
        let (detached, _) = run(&attached, false, None, &owned);
        assert!(!detached.contains("proxy-uid"), "{detached}");
        // Not attached, or no range: an empty value stays as the user wrote it.
        for (attach, uid) in [(false, None), (true, None)] {
            let (out, applied) = run(src, attach, uid, "");
            assert!(out.contains("config.linkerd.io/proxy-uid: \"\""), "{out}");
            assert_eq!(applied.owned.proxy_uid, None);
        }
        // A user's UID blanked after the function set its own: the range's UID again.
        let (out, applied) = run(src, true, Some(1_000_002_102), "proxy-uid=1000002102");
        assert!(out.contains("\"1000002102\""), "{out}");
        assert_eq!(applied.owned.proxy_uid.as_deref(), Some("1000002102"));
    }

    /// `src` after interface naming has run on its networks annotation.
    fn with_named_interfaces(src: &str) -> String {
        let mut doc = parse_document(src).unwrap();
        let template = doc.as_map_mut().unwrap();
        let text = template_annotations(template)
            .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
            .map(str::to_owned);
        if let Some(named) = text.and_then(|t| interface_name::name_interfaces(&t).unwrap()) {
            set_annotation(template, NETWORKS_ANNOTATION, named).unwrap();
        }
        emit_document(&doc)
    }

    #[test]
    fn the_own_entry_with_its_named_interface_stays_owned() {
        let cases = [
            ("spec: {}\n", "linkerd-cni@net6a72ae7dcd39"),
            (
                "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: a, other/b@net2\n",
                "a@net0cc175b9c0f1, other/b@net2, linkerd-cni@net6a72ae7dcd39",
            ),
            (
                "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\":\"a\",\"ips\":[\"10.0.0.1/24\"]}]'\n",
                r#"[{"name":"a","ips":["10.0.0.1/24"],"interface":"net0cc175b9c0f1"},{"name":"linkerd-cni","interface":"net6a72ae7dcd39"}]"#,
            ),
        ];
        for (src, networks) in cases {
            let (attached, applied) = run(src, true, None, "");
            let named = with_named_interfaces(&attached);
            let mut doc = parse_document(&named).unwrap();
            let value = template_annotations(doc.as_map_mut().unwrap())
                .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
                .map(str::to_owned);
            assert_eq!(value.as_deref(), Some(networks), "{src}");

            let owned = applied.owned.to_string();
            let (again, same) = run(&named, true, None, &owned);
            assert_eq!(again, named, "{src}");
            assert!(same.changes.is_empty(), "{src}: {:?}", same.changes);
            assert_eq!(same.owned, applied.owned, "{src}");
            assert_eq!(
                same.references,
                [NadReference {
                    namespace: None,
                    owned: true
                }],
                "{src}"
            );

            let (detached, undone) = run(&named, false, None, &owned);
            assert_eq!(detached, with_named_interfaces(src), "{src}");
            assert_eq!(undone.changes, [Change::Detached], "{src}");
            assert!(undone.owned.is_empty(), "{src}");
        }
    }

    #[test]
    fn only_the_exact_named_entry_counts_as_own() {
        let template = |networks: &str| {
            format!("metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '{networks}'\n")
        };
        for networks in [
            "a, linkerd-cni@eth1",
            "a, demo/linkerd-cni@net6a72ae7dcd39",
            r#"[{"name": "linkerd-cni", "interface": "net6a72ae7dcd39", "ips": []}]"#,
        ] {
            let src = template(networks);
            let (out, applied) = run(&src, false, None, "network=appended");
            assert_eq!(out, src, "{networks}");
            assert!(applied.changes.is_empty(), "{networks}");
            assert_eq!(applied.warnings.len(), 1, "{networks}");
            let (out, applied) = run(&src, true, None, "network=appended");
            assert_eq!(out, src, "{networks}");
            assert!(applied.owned.is_empty(), "{networks}");
        }
        let src = template("linkerd-cni@net6a72ae7dcd39, b");
        let (out, applied) = run(&src, true, None, "");
        assert_eq!(out, src);
        assert!(applied.owned.is_empty(), "a user's entry is not taken over");
        assert_eq!(
            applied.references,
            [NadReference {
                namespace: None,
                owned: false
            }]
        );
        let (out, applied) = run(&src, false, None, "network=appended");
        assert_eq!(out, template("b"));
        assert_eq!(applied.changes, [Change::Detached]);
    }

    #[test]
    fn user_values_are_never_taken_over() {
        let src = "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: demo/linkerd-cni@eth9\n    config.linkerd.io/proxy-uid: \"7\"\n";
        let (out, applied) = run(src, true, Some(1_000_002_102), "");
        assert_eq!(out, src);
        assert!(applied.owned.is_empty());
        let (out, applied) = run(src, false, None, "network=created,proxy-uid=1000002102");
        assert_eq!(out, src);
        assert_eq!(applied.warnings.len(), 1);
        assert_eq!(applied.changes, [Change::ProxyUidReleased]);
        assert!(applied.owned.is_empty());
    }

    #[test]
    fn a_bad_annotation_changes_nothing() {
        let mut doc =
            parse_document("metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: 'a,,b'\n")
                .unwrap();
        let before = doc.clone();
        let err = apply(
            doc.as_map_mut().unwrap(),
            &Settings::default(),
            "demo",
            &Decision {
                attach: true,
                ..Decision::default()
            },
            &Owned::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("annotation k8s.v1.cni.cncf.io/networks: item 2"),
            "{err}"
        );
        assert_eq!(doc, before);
    }
}

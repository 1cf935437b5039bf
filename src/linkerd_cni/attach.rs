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
use crate::multus::networks::{
    MAX_SELECTIONS, NETWORKS_ANNOTATION, Networks, NetworksError, Selection,
};
use crate::yaml::{Map, Node};
use compact_str::{CompactString, ToCompactString};
use smallvec::{SmallVec, smallvec};

mod owned;

use owned::record_edit;
pub use owned::{NetworkOwnership, OWNED_ANNOTATION, Owned};

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

/// One change made to a pod template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The NAD was added to the networks annotation.
    Attached,
    /// The entry the function had added was removed.
    Detached,
    /// The proxy UID was set.
    ProxyUidSet(CompactString),
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
    /// An annotation at the selections cap, with no room for the NAD.
    #[error(
        "annotation {NETWORKS_ANNOTATION} selects {MAX_SELECTIONS} networks, the most that are read (the selections cap): the Linkerd-CNI NAD {nad} would be one more, so the pod is not attached; select at most {} networks besides it",
        MAX_SELECTIONS - 1
    )]
    Full {
        /// The NAD the rules would add.
        nad: String,
    },
}

/// The result of [`apply`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// What the function now owns on the workload.
    pub owned: Owned,
    /// What changed.
    pub changes: Changes,
    /// Things the user should know.
    pub warnings: Vec<String>,
    /// The selections of the NAD left in the networks annotation after the change.
    pub references: References,
}

/// What the rules change on one workload: one or two things, held inline.
pub type Changes = SmallVec<[Change; 2]>;

/// A pod's selections of the NAD: nearly always one, held inline.
pub type References = SmallVec<[NadReference; 1]>;

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
pub type Edit = (&'static str, Option<CompactString>);

/// The edits the rules make on one pod: the networks, the proxy UID, the record and the
/// config hash at most, held inline.
pub type Edits = SmallVec<[Edit; 4]>;

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
) -> Result<(Applied, Edits), AttachError> {
    let nad = settings.nad_name.as_str();
    let networks = current.networks.map(Networks::parse).transpose()?;
    let full = networks
        .as_ref()
        .is_some_and(|n| n.selections().len() >= MAX_SELECTIONS);
    if decision.attach
        && full
        && !networks
            .as_ref()
            .is_some_and(|n| n.references(nad, pod_namespace))
    {
        return Err(AttachError::Full {
            nad: nad.to_string(),
        });
    }
    let mut out = Applied::default();
    let new_networks = plan_network(
        networks.as_ref(),
        nad,
        pod_namespace,
        decision,
        before,
        &mut out,
    );
    let new_uid = plan_proxy_uid(current.proxy_uid, decision, before, &mut out);
    let owns_entry = out.owned.network.is_some();
    out.references = match &new_networks {
        // The annotation made of the NAD's plain entry alone (most pods): its one reference,
        // the function's own if it owns one, without reading the text back.
        Some(Some(t)) if t == nad => smallvec![NadReference {
            namespace: None,
            owned: owns_entry,
        }],
        Some(Some(t)) => references(Some(&Networks::parse(t)?), nad, owns_entry),
        Some(None) => SmallVec::new(),
        None => references(networks.as_ref(), nad, owns_entry),
    };
    let edits = [
        (NETWORKS_ANNOTATION, new_networks),
        (PROXY_UID_ANNOTATION, new_uid),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key, value?)))
    .collect();
    Ok((out, edits))
}

/// The NAD's entry in the networks annotation: appended when the pod is to be
/// attached and selects no such NAD, removed when it is to be detached and the
/// function added it. The annotation's new value (`Some(None)` removes it), or
/// `None` when it stays as it is.
fn plan_network(
    networks: Option<&Networks>,
    nad: &str,
    pod_namespace: &str,
    decision: &Decision,
    before: &Owned,
    out: &mut Applied,
) -> Option<Option<CompactString>> {
    let own = own_entry(nad);
    let referenced = networks.is_some_and(|n| n.references(nad, pod_namespace));
    if decision.attach {
        if !referenced {
            let appended = match networks {
                Some(n) => n.with_appended(nad).into(),
                None => nad.into(),
            };
            out.owned.network = Some(match networks {
                Some(_) => NetworkOwnership::Appended,
                None => NetworkOwnership::Created,
            });
            out.changes.push(Change::Attached);
            return Some(Some(appended));
        } else if before.network.is_some()
            && networks.is_some_and(|n| n.selections().iter().any(&own))
        {
            out.owned.network = before.network;
        }
    } else if let Some(how) = before.network {
        match networks.and_then(|n| n.without_first(&own)) {
            Some(rest) => {
                let remove_key = how == NetworkOwnership::Created && rest.trim().is_empty();
                out.changes.push(Change::Detached);
                return Some((!remove_key).then(|| rest.into()));
            }
            None => out.warnings.push(format!(
                "the {nad} entry this function added to {NETWORKS_ANNOTATION} is gone or was edited; the annotation is left as it is"
            )),
        }
    }
    None
}

/// The proxy UID annotation: the UID the decision asks for unless the user set
/// one, and removed when the function set it and no longer wants it. Its new
/// value (`Some(None)` removes it), or `None` when it stays as it is.
fn plan_proxy_uid(
    current_uid: Option<&str>,
    decision: &Decision,
    before: &Owned,
    out: &mut Applied,
) -> Option<Option<CompactString>> {
    // As in the Go operator (and for Linkerd's injector), an empty proxy UID is none: the
    // range's UID replaces it, and undoing that removes the annotation.
    let current_uid = current_uid.filter(|v| !v.is_empty());
    let user_uid = current_uid.filter(|v| before.proxy_uid.as_deref() != Some(*v));
    if before.proxy_uid.is_some() && user_uid.is_some() {
        out.changes.push(Change::ProxyUidReleased);
    }
    let mut new_uid: Option<Option<CompactString>> = None;
    match decision.proxy_uid.filter(|_| user_uid.is_none()) {
        Some(uid) => {
            // Ten digits at most: held inline, as are its copies.
            let uid = uid.to_compact_string();
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
    new_uid
}

/// The pod's references to the NAD once the annotation is `after`; the first
/// entry the function owns, if it owns one, is marked as owned.
fn references(after: Option<&Networks>, nad: &str, owns_entry: bool) -> References {
    let own = own_entry(nad);
    let mut own_entry_left = owns_entry;
    after
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
        .collect()
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
    pub edits: Edits,
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
#[path = "attach_tests.rs"]
mod tests;

//! The workloads of a package: each attached or detached, and the config-hash
//! stamp that rolls it out when the NAD config changes.

use std::collections::{BTreeMap, HashSet};

use super::nads::ForeseenConfigs;
use super::skip_subnets::PackageIpams;
use super::{Decided, Need, Renderer, namespace_of};
use crate::k8s::namespace::{
    INJECT_ANNOTATION, Lookup, MULTUS_ANNOTATION, MULTUS_VALUES, Namespace, Source,
};
use crate::k8s::workload::{self, WorkloadKind, WorkloadKinds};
use crate::krm::results::Severity;
use crate::linkerd_cni::attach::{self, WorkloadError, WorkloadOutcome};
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::opt_ins::{self, Whose};
use crate::linkerd_cni::rollout::{self, ConfigRollout};
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::{self, PluginSettings};
use crate::yaml::{Map, Node};

/// The rules that read the NAD config of a workload's namespace after the render: the
/// secondary-network rule and the config-hash stamp, with what they read of the package.
pub(super) struct ConfigRules<'f> {
    /// The config of each namespace after the render, foreseen.
    foreseen: &'f ForeseenConfigs,
    /// The IPAM of the package's NADs, which the secondary-network rule reads.
    ipams: PackageIpams,
    /// What each config gives the rules, by its text: the generated NADs of a package share
    /// one, so it is read once.
    read: BTreeMap<String, ConfigRead>,
}

/// What the rules read of one NAD config.
struct ConfigRead {
    /// Its Linkerd-CNI plugin settings.
    plugin: PluginSettings,
    /// Its hash, unless the `configRollout` setting is off.
    hash: Option<String>,
}

impl<'f> ConfigRules<'f> {
    /// The rules on the package `items`, whose configs after the render are `foreseen`.
    pub(super) fn new(r: &Renderer, items: &[Node], foreseen: &'f ForeseenConfigs) -> Self {
        ConfigRules {
            foreseen,
            ipams: r.package_ipams(items),
            read: BTreeMap::new(),
        }
    }

    /// The config of namespace `ns` after the render: the one foreseen when it `needed` a NAD.
    fn config(&self, needed: bool, ns: &Option<String>) -> Option<&'f str> {
        let foreseen = self.foreseen;
        needed.then(|| foreseen.get(ns)).flatten()
    }

    /// Reads `config` unless it has been read.
    fn read(&mut self, config: &str, mode: ConfigRollout) {
        if !self.read.contains_key(config) {
            let read = ConfigRead {
                plugin: skip_subnets::plugin_settings(config),
                hash: (mode != ConfigRollout::Off).then(|| rollout::config_hash(config)),
            };
            self.read.insert(config.to_string(), read);
        }
    }
}

/// Whether the rules read the NAD config for decided workload `d`, whose pod template is
/// `template` in a namespace with the annotations `namespace`: the stamp of an attached
/// workload, and the secondary-network rule where it reads the plugin's settings.
fn reads_config(settings: &Settings, d: &Decided, template: &Map, namespace: &dyn Lookup) -> bool {
    let annotations = workload::template_annotations(template);
    (d.attached && settings.config_rollout != ConfigRollout::Off)
        || skip_subnets::reads_nads(&annotations, namespace, settings, d.attached)
}

/// The namespaces the function knows, and whether the workloads of a namespace can be
/// attached.
type Scope<'a> = (
    &'a BTreeMap<String, Namespace>,
    &'a dyn Fn(&Option<String>) -> bool,
);

/// What the workloads tell of the namespaces, gathered item by item.
#[derive(Default)]
struct Gathered {
    /// Which namespaces need the NAD, and why.
    needs: BTreeMap<Option<String>, Need>,
    /// The workloads the rules were applied to.
    decided: Vec<Decided>,
    /// The namespaces whose UID-range problem was reported.
    range_reported: HashSet<String>,
    /// Whether a control-plane workload is in the input.
    control_plane_seen: bool,
}

/// A pod template's own `linkerd.io/multus` and `linkerd.io/inject`, read
/// before the rules change it; an empty value counts as unset, as the rules
/// read it.
#[derive(Default)]
struct OwnAnnotations {
    multus: Option<String>,
    inject: Option<String>,
    /// Its opt-in annotations written wrong.
    opt_in_problems: Vec<opt_ins::Problem>,
}

impl OwnAnnotations {
    fn read(item: &Node, kind: &WorkloadKind) -> Self {
        let Ok(Some(template)) = kind.pod_template(item) else {
            return Self::default();
        };
        let annotations = workload::template_annotations(template);
        let get = |key| {
            annotations
                .and_then(|a| a.get_text(key))
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let pairs = annotations
            .into_iter()
            .flat_map(|a| a.entries.iter())
            .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?)));
        let whose = match kind.field("").is_empty() {
            true => Whose::Pod,
            false => Whose::PodTemplate,
        };
        let prefix = kind.field("metadata.annotations.");
        OwnAnnotations {
            multus: get(MULTUS_ANNOTATION),
            inject: get(INJECT_ANNOTATION),
            opt_in_problems: opt_ins::problems(pairs, whose, &prefix),
        }
    }
}

impl Renderer<'_> {
    /// Attaches or detaches every workload; returns which namespaces need the
    /// NAD, and the workloads the rules were applied to.
    pub(super) fn workloads(
        &mut self,
        items: &mut [Node],
        namespaces: &BTreeMap<String, Namespace>,
        can_attach: &dyn Fn(&Option<String>) -> bool,
        rules: &mut ConfigRules<'_>,
    ) -> (BTreeMap<Option<String>, Need>, Vec<Decided>) {
        let settings = self.settings;
        let kinds = WorkloadKinds::new(&settings.workload_kinds);
        let mut gathered = Gathered::default();
        let refs = self.refs;
        for (i, item) in items.iter_mut().enumerate() {
            let r = &refs[i];
            let Some(kind) = kinds.find(r.group(), &r.kind) else {
                continue;
            };
            let scope = (namespaces, can_attach);
            self.workload(i, item, kind, scope, rules, &mut gathered);
        }
        let mut needs = gathered.needs;
        // A Namespace of the input needs the NAD by the controller's rule
        // (enabled, or the control plane's); the control-plane namespace
        // also when a control-plane workload is in the input (below).
        for (name, ns) in namespaces {
            let in_input = matches!(ns.source, Source::Input(_));
            if in_input && cluster::needs_nad(name, &ns.annotations, settings) {
                needs.entry(Some(name.clone())).or_default().managed = true;
            }
        }
        if gathered.control_plane_seen {
            needs
                .entry(Some(settings.linkerd_namespace.clone()))
                .or_default()
                .managed = true;
        }
        (needs, gathered.decided)
    }

    /// Attaches or detaches workload `i`, reports what changed and gathers
    /// which namespaces it needs the NAD in.
    fn workload(
        &mut self,
        i: usize,
        item: &mut Node,
        kind: &WorkloadKind,
        (namespaces, can_attach): Scope<'_>,
        rules: &mut ConfigRules<'_>,
        gathered: &mut Gathered,
    ) {
        let settings = self.settings;
        let ns_name = namespace_of(&self.refs[i], settings);
        let pod_ns = ns_name.unwrap_or("");
        let ns = ns_name.and_then(|n| namespaces.get(n));
        let own_ns = ns_name.map(str::to_string);
        let ns_annotations = ns.map(|n| &n.annotations);
        let mut own = OwnAnnotations::read(item, kind);
        self.opt_in_problems(i, std::mem::take(&mut own.opt_in_problems));
        let outcome = attach::workload(item, kind, settings, pod_ns, &ns_annotations, || {
            can_attach(&own_ns)
        });
        let (decision, applied) = match outcome {
            Ok(WorkloadOutcome::NoTemplate) => return,
            Ok(WorkloadOutcome::Held(decision)) => {
                self.unknown_namespace(i, ns.is_none(), ns_name);
                self.workload_multus(i, kind, &own, ns, ns_name, decision.attach);
                gathered.control_plane_seen |= decision.control_plane;
                // Left as it is; the missing NAD config is reported once, as an error.
                gathered.needs.entry(own_ns).or_default().managed = true;
                return;
            }
            Ok(WorkloadOutcome::Decided { decision, applied }) => (decision, applied),
            Err(e) => {
                let field =
                    matches!(e, WorkloadError::Owned(_)).then(|| "metadata.annotations".into());
                self.report(i, Severity::Error, e.to_string()).field = field;
                return;
            }
        };
        self.unknown_namespace(i, ns.is_none(), ns_name);
        self.workload_multus(i, kind, &own, ns, ns_name, decision.attach);
        gathered.control_plane_seen |= decision.control_plane;
        if let Some(problem) = &decision.range_problem
            && gathered.range_reported.insert(pod_ns.to_string())
        {
            let at = match ns.map(|n| &n.source) {
                Some(Source::Input(n)) => *n,
                _ => i,
            };
            self.report(at, Severity::Warning, problem.clone());
        }
        let field = kind.field("metadata.annotations");
        let applied = match applied {
            Ok(applied) => applied,
            Err(e) => {
                self.report(i, Severity::Error, e.to_string()).field = Some(field);
                return;
            }
        };
        let result = self.report_changes(i, &applied.changes, &field);
        let mut d = Decided {
            index: i,
            attached: decision.attach,
            result,
        };
        for warning in applied.warnings {
            self.report(i, Severity::Warning, warning).field = Some(field.clone());
        }
        for reference in &applied.references {
            let target = reference.namespace.clone().or_else(|| own_ns.clone());
            let need = gathered.needs.entry(target).or_default();
            if reference.owned {
                need.managed = true;
            } else {
                need.user_refs.push(i);
            }
        }
        let Ok(Some(template)) = kind.pod_template_mut(item) else {
            return;
        };
        // A namespace that needs a NAD now needs it after every workload (the needs only
        // grow), so its config after the render is the one foreseen: the rules that read it
        // run now, on the template just rendered, as they do when they read no config.
        let needed = gathered.needs.contains_key(&own_ns);
        if needed || !reads_config(settings, &d, template, &ns_annotations) {
            let config = rules.config(needed, &own_ns);
            self.config_rules(rules, &mut d, (kind, template), namespaces, config);
        } else {
            gathered.decided.push(d);
        }
    }

    /// Reports on workload `i` a `linkerd.io/multus` value on its pod template
    /// that is neither `enabled` nor `disabled` (a warning that fails `diff`),
    /// and a meshed pod template the rules do not attach only because no
    /// `linkerd.io/multus` is set (an info: how to enable it). A meshed
    /// Namespace of the input without the annotation says so itself: its
    /// workloads that are meshed only through it are not reported again.
    fn workload_multus(
        &mut self,
        i: usize,
        kind: &WorkloadKind,
        own: &OwnAnnotations,
        ns: Option<&Namespace>,
        ns_name: Option<&str>,
        attached: bool,
    ) {
        let pod = kind.field("").is_empty();
        if let Some(v) = own.multus.as_deref().filter(|v| !MULTUS_VALUES.contains(v)) {
            let field = kind.field(&format!("metadata.annotations.{MULTUS_ANNOTATION}"));
            let whose = if pod { Whose::Pod } else { Whose::PodTemplate };
            let message = opt_ins::value_message(MULTUS_ANNOTATION, v, whose, &field);
            let result = self.report(i, Severity::Warning, message);
            result.field = Some(field);
            result.fails_diff = true;
            return;
        }
        if attached || own.multus.is_some() {
            return;
        }
        let ns_annotations = ns.map(|n| &n.annotations);
        if ns_annotations.lookup(MULTUS_ANNOTATION).is_some() {
            return;
        }
        let (inject, from_namespace) = match own.inject.as_deref() {
            Some(v) => (v, false),
            None => match ns_annotations.lookup(INJECT_ANNOTATION) {
                Some(v) => (v, true),
                None => return,
            },
        };
        if !matches!(inject, "enabled" | "ingress")
            || (from_namespace && matches!(ns.map(|n| &n.source), Some(Source::Input(_))))
        {
            return;
        }
        let (what, who) = if pod {
            ("the pod", "it is")
        } else {
            ("the pod template", "its pods are")
        };
        let meshed = format!("({INJECT_ANNOTATION}: {inject})");
        let message = match (from_namespace, ns_name) {
            (true, Some(n)) => format!(
                "its namespace {n} is meshed {meshed} but neither it nor {what} has {MULTUS_ANNOTATION}: enabled"
            ),
            (_, Some(n)) => format!(
                "{what} is meshed {meshed} but neither it nor its namespace {n} has {MULTUS_ANNOTATION}: enabled"
            ),
            (_, None) => {
                format!("{what} is meshed {meshed} but has no {MULTUS_ANNOTATION}: enabled")
            }
        };
        let message = format!(
            "{message}, so {who} not attached to Linkerd-CNI; annotate the namespace {MULTUS_ANNOTATION}=enabled to attach Linkerd-CNI"
        );
        let result = self.report(i, Severity::Info, message);
        result.field = Some(kind.field("metadata.annotations"));
        result.to_act = true;
    }

    /// Counts the changes to workload `i` and reports them in one info result;
    /// its index in the results, if there were any.
    fn report_changes(
        &mut self,
        i: usize,
        changes: &[attach::Change],
        field: &str,
    ) -> Option<usize> {
        let mut messages = Vec::with_capacity(changes.len());
        for change in changes {
            match change {
                attach::Change::Attached => self.summary.attached += 1,
                attach::Change::Detached => self.summary.detached += 1,
                attach::Change::ProxyUidReleased => self.summary.released += 1,
                _ => self.summary.uids += 1,
            }
            messages.push(match change {
                attach::Change::Attached | attach::Change::Detached => {
                    format!("{} {change}", self.settings.nad_name)
                }
                _ => change.to_string(),
            });
        }
        if messages.is_empty() {
            return None;
        }
        self.report(i, Severity::Info, messages.join("; ")).field = Some(field.to_string());
        Some(self.results.len() - 1)
    }

    /// Applies the rules that read the NAD config of a namespace after the render to the
    /// decided workloads that could not have them in the workloads' pass: `needs` gives the
    /// namespaces that need a NAD.
    pub(super) fn after_nads(
        &mut self,
        items: &mut [Node],
        decided: &mut [Decided],
        namespaces: &BTreeMap<String, Namespace>,
        needs: &BTreeMap<Option<String>, Need>,
        rules: &mut ConfigRules<'_>,
    ) {
        let settings = self.settings;
        let kinds = WorkloadKinds::new(&settings.workload_kinds);
        let refs = self.refs;
        for d in decided.iter_mut() {
            let r = &refs[d.index];
            let Some(kind) = kinds.find(r.group(), &r.kind) else {
                continue;
            };
            let Ok(Some(template)) = kind.pod_template_mut(&mut items[d.index]) else {
                continue;
            };
            let ns = namespace_of(r, settings).map(str::to_string);
            let config = rules.config(needs.contains_key(&ns), &ns);
            self.config_rules(rules, d, (kind, template), namespaces, config);
        }
    }

    /// The secondary-network rule, then the config-hash stamp, on decided workload `d`, of
    /// `kind`, whose pod template is `template`: `config` is the NAD config of its namespace
    /// after the render.
    fn config_rules(
        &mut self,
        rules: &mut ConfigRules<'_>,
        d: &mut Decided,
        (kind, template): (&WorkloadKind, &mut Map),
        namespaces: &BTreeMap<String, Namespace>,
        config: Option<&str>,
    ) {
        if let Some(config) = config {
            rules.read(config, self.settings.config_rollout);
        }
        let read = config.map(|config| &rules.read[config]);
        let plugin = read.map(|r| &r.plugin);
        self.skip_subnets(&rules.ipams, d, (kind, template), namespaces, plugin);
        self.stamp(d, (kind, template), read.and_then(|r| r.hash.as_deref()));
    }

    /// Brings the config-hash stamp of decided workload `d`, of `kind`, whose pod template is
    /// `template`, in line with the `configRollout` setting and `hash`, that of the config of
    /// the NAD in its namespace.
    fn stamp(
        &mut self,
        d: &mut Decided,
        (kind, template): (&WorkloadKind, &mut Map),
        hash: Option<&str>,
    ) {
        let mode = self.settings.config_rollout;
        let wanted = rollout::wanted(mode, d.attached, &workload::template_labels(template), hash);
        let field = || kind.field("metadata.annotations");
        let change = match rollout::stamp(template, wanted) {
            Ok(Some(change)) => change,
            Ok(None) => return,
            Err(e) => {
                self.report(d.index, Severity::Error, e.to_string()).field = Some(field());
                return;
            }
        };
        match change {
            rollout::Change::Removed(_) => self.summary.unstamped += 1,
            _ => self.summary.stamped += 1,
        }
        self.note(d, &change.to_string(), field);
    }

    /// Adds `change` to the info result of decided workload `d`, or reports it as one
    /// (on `field`), so that each workload's changes read as one line.
    pub(super) fn note(&mut self, d: &mut Decided, change: &str, field: impl FnOnce() -> String) {
        match d.result {
            Some(at) => {
                let message = &mut self.results[at].message;
                message.push_str("; ");
                message.push_str(change);
            }
            None => {
                self.report(d.index, Severity::Info, change).field = Some(field());
                d.result = Some(self.results.len() - 1);
            }
        }
    }
}

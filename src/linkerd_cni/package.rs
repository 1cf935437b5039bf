//! The transformation of a whole package: which namespaces get a NAD, which
//! workloads get attached. Pure code: resources in, resources and results out.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::k8s::namespace::{Lookup, MULTUS_ANNOTATION, MULTUS_VALUES, Namespace, Source};
use crate::k8s::resource::{self, FileRef, ResourceRef, files};
use crate::k8s::workload::{self, WorkloadKinds};
use crate::krm::results::{self, FnResult, Severity, plural};
use crate::linkerd_cni::attach::{self, WorkloadError, WorkloadOutcome};
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::cni_config::{self, CONFIG_MAP_NAME, NETWORK_CONFIG_KEY};
use crate::linkerd_cni::rollout::{self, ConfigRollout};
use crate::linkerd_cni::settings::Settings;
use crate::multus::nad;
use crate::yaml::Node;

/// Why a namespace needs the NAD.
#[derive(Default)]
struct Need {
    /// By a rule of the function: the namespace is enabled, is the control
    /// plane's, or holds a workload the function attached.
    managed: bool,
    /// Workloads (item indices) whose own references need it.
    user_refs: Vec<usize>,
}

/// The NADs of the input: the current one per namespace, and generated ones to remove.
struct ExistingNads {
    current: BTreeMap<Option<String>, usize>,
    removed: HashSet<usize>,
}

/// A workload the rules were applied to, for the config-rollout stamp.
struct Decided {
    /// Its item index.
    index: usize,
    /// Whether the rules attach it.
    attached: bool,
    /// The info result reporting its changes, if any.
    result: Option<usize>,
}

/// What [`Renderer::nads`] decided; applied to the items by [`NadPlan::place`].
struct NadPlan {
    /// Indices of generated NADs to remove.
    removed: HashSet<usize>,
    /// New NADs to place right after the item of that index (their Namespace).
    placed: BTreeMap<usize, Vec<Node>>,
    /// New NADs to place at the end.
    trailing: Vec<Node>,
    /// The `spec.config` of each namespace's NAD after the render.
    configs: BTreeMap<Option<String>, String>,
}

impl NadPlan {
    /// Removes and inserts NADs; the other items keep their order.
    fn place(self, items: &mut Vec<Node>) {
        let NadPlan {
            removed,
            mut placed,
            trailing,
            ..
        } = self;
        if removed.is_empty() && placed.is_empty() && trailing.is_empty() {
            return;
        }
        let old = std::mem::take(items);
        items.reserve(old.len() + trailing.len());
        for (i, item) in old.into_iter().enumerate() {
            if !removed.contains(&i) {
                items.push(item);
            }
            if let Some(new) = placed.remove(&i) {
                items.extend(new);
            }
        }
        items.extend(trailing);
    }
}

/// Counts for the summary result.
#[derive(Default)]
struct Summary {
    attached: usize,
    detached: usize,
    uids: usize,
    released: usize,
    stamped: usize,
    unstamped: usize,
    generated: usize,
    updated: usize,
    removed: usize,
}

/// Renders the package (its items and their identities) in place and
/// returns the results, the summary first.
pub fn render(items: &mut Vec<Node>, refs: &[ResourceRef], settings: &Settings) -> Vec<FnResult> {
    let files = files(items);
    let mut r = Renderer {
        settings,
        refs,
        files: &files,
        results: Vec::new(),
        summary: Summary::default(),
    };
    let namespaces = r.namespaces(items);
    let existing = r.existing_nads(items);
    let mut config = NadConfig::Unread;
    // Without a config, a workload is attached only where a NAD already exists:
    // the output never references a NAD that will not exist.
    let config_ready = config.peek(&mut r, items).is_some();
    let can_attach = |ns: &Option<String>| config_ready || existing.current.contains_key(ns);
    let (needs, decided) = r.workloads(items, &namespaces, &can_attach);
    let plan = r.nads(items, &namespaces, needs, existing, config);
    r.stamp(items, &decided, &plan.configs);
    plan.place(items);
    let mut results = Vec::with_capacity(r.results.len() + 1);
    results.push(FnResult::new(Severity::Info, r.summary_line()));
    results.append(&mut r.results);
    results
}

/// The namespace a resource is in: its own, else the default namespace the
/// host puts it in, if the settings name one.
fn namespace_of<'a>(r: &'a ResourceRef, settings: &'a Settings) -> Option<&'a str> {
    r.namespace
        .as_deref()
        .or(settings.default_namespace.as_deref())
}

struct Renderer<'a> {
    settings: &'a Settings,
    refs: &'a [ResourceRef],
    files: &'a [Option<FileRef>],
    results: Vec<FnResult>,
    summary: Summary,
}

impl Renderer<'_> {
    fn report(
        &mut self,
        index: usize,
        severity: Severity,
        message: impl Into<String>,
    ) -> &mut FnResult {
        self.results.push(
            FnResult::new(severity, message).on(&self.refs[index], self.files[index].as_ref()),
        );
        self.results.last_mut().expect("just pushed")
    }

    /// The namespaces the function knows: Namespace objects and the `namespaces` setting.
    fn namespaces(&mut self, items: &[Node]) -> BTreeMap<String, Namespace> {
        let mut known = BTreeMap::new();
        let refs = self.refs;
        for (i, item) in items.iter().enumerate() {
            let r = &refs[i];
            if r.kind != "Namespace" || r.group() != "" {
                continue;
            }
            let annotations = resource::string_annotations(item);
            if let Some(v) = annotations.lookup(MULTUS_ANNOTATION)
                && !MULTUS_VALUES.contains(&v)
            {
                let message = format!(
                    "annotation {MULTUS_ANNOTATION}: {v:?} is not one of {}; the namespace is treated as not enabled",
                    MULTUS_VALUES.join(", ")
                );
                self.report(i, Severity::Warning, message);
            }
            if known.contains_key(r.name.as_str()) {
                self.report(i, Severity::Error, "the Namespace is in the input twice");
                continue;
            }
            known.insert(
                r.name.to_string(),
                Namespace {
                    annotations,
                    source: Source::Input(i),
                },
            );
        }
        for (name, annotations) in &self.settings.namespaces {
            if let Some(Namespace {
                source: Source::Input(i),
                ..
            }) = known.get(name)
            {
                let message = format!(
                    "namespace {name} is in the input and in the namespaces setting; describe it in one place"
                );
                self.report(*i, Severity::Error, message);
                continue;
            }
            known.insert(
                name.clone(),
                Namespace {
                    annotations: annotations.clone(),
                    source: Source::Settings,
                },
            );
        }
        known
    }

    /// Attaches or detaches every workload; returns which namespaces need the
    /// NAD, and the workloads the rules were applied to.
    fn workloads(
        &mut self,
        items: &mut [Node],
        namespaces: &BTreeMap<String, Namespace>,
        can_attach: &dyn Fn(&Option<String>) -> bool,
    ) -> (BTreeMap<Option<String>, Need>, Vec<Decided>) {
        let settings = self.settings;
        let kinds = WorkloadKinds::new(&settings.workload_kinds);
        let mut needs: BTreeMap<Option<String>, Need> = BTreeMap::new();
        let mut decided = Vec::new();
        let mut range_reported = HashSet::new();
        let mut control_plane_seen = false;
        let refs = self.refs;
        for (i, item) in items.iter_mut().enumerate() {
            let r = &refs[i];
            let Some(kind) = kinds.find(r.group(), &r.kind) else {
                continue;
            };
            let ns_name = namespace_of(r, settings);
            let pod_ns = ns_name.unwrap_or("");
            let ns = ns_name.and_then(|n| namespaces.get(n));
            let own_ns = ns_name.map(str::to_string);
            let ns_annotations = ns.map(|n| &n.annotations);
            let outcome = attach::workload(item, kind, settings, pod_ns, &ns_annotations, || {
                can_attach(&own_ns)
            });
            let (decision, applied) = match outcome {
                Ok(WorkloadOutcome::NoTemplate) => continue,
                Ok(WorkloadOutcome::Held(decision)) => {
                    self.unknown_namespace(i, ns.is_none(), ns_name);
                    control_plane_seen |= decision.control_plane;
                    // Left as it is; the missing NAD config is reported once, as an error.
                    needs.entry(own_ns).or_default().managed = true;
                    continue;
                }
                Ok(WorkloadOutcome::Decided { decision, applied }) => (decision, applied),
                Err(e) => {
                    let field =
                        matches!(e, WorkloadError::Owned(_)).then(|| "metadata.annotations".into());
                    self.report(i, Severity::Error, e.to_string()).field = field;
                    continue;
                }
            };
            self.unknown_namespace(i, ns.is_none(), ns_name);
            control_plane_seen |= decision.control_plane;
            if let Some(problem) = &decision.range_problem
                && range_reported.insert(pod_ns.to_string())
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
                    continue;
                }
            };
            let mut messages = Vec::with_capacity(applied.changes.len());
            for change in &applied.changes {
                match change {
                    attach::Change::Attached => self.summary.attached += 1,
                    attach::Change::Detached => self.summary.detached += 1,
                    attach::Change::ProxyUidReleased => self.summary.released += 1,
                    _ => self.summary.uids += 1,
                }
                messages.push(match change {
                    attach::Change::Attached | attach::Change::Detached => {
                        format!("{} {change}", settings.nad_name)
                    }
                    _ => change.to_string(),
                });
            }
            let mut result = None;
            if !messages.is_empty() {
                self.report(i, Severity::Info, messages.join("; ")).field = Some(field.clone());
                result = Some(self.results.len() - 1);
            }
            decided.push(Decided {
                index: i,
                attached: decision.attach,
                result,
            });
            for warning in applied.warnings {
                self.report(i, Severity::Warning, warning).field = Some(field.clone());
            }
            for reference in &applied.references {
                let target = reference.namespace.clone().or_else(|| own_ns.clone());
                let need = needs.entry(target).or_default();
                if reference.owned {
                    need.managed = true;
                } else {
                    need.user_refs.push(i);
                }
            }
        }
        // A Namespace of the input needs the NAD by the controller's rule
        // (enabled, or the control plane's); the control-plane namespace
        // also when a control-plane workload is in the input (below).
        for (name, ns) in namespaces {
            let in_input = matches!(ns.source, Source::Input(_));
            if in_input && cluster::needs_nad(name, &ns.annotations, settings) {
                needs.entry(Some(name.clone())).or_default().managed = true;
            }
        }
        if control_plane_seen {
            needs
                .entry(Some(settings.linkerd_namespace.clone()))
                .or_default()
                .managed = true;
        }
        (needs, decided)
    }

    /// Brings the config-hash stamp of every decided workload in line with the
    /// `configRollout` setting and the config of the NAD in its namespace.
    fn stamp(
        &mut self,
        items: &mut [Node],
        decided: &[Decided],
        configs: &BTreeMap<Option<String>, String>,
    ) {
        let settings = self.settings;
        let mode = settings.config_rollout;
        let hashes: BTreeMap<Option<&str>, String> = match mode {
            ConfigRollout::Off => BTreeMap::new(),
            _ => configs
                .iter()
                .map(|(ns, config)| (ns.as_deref(), rollout::config_hash(config)))
                .collect(),
        };
        let kinds = WorkloadKinds::new(&settings.workload_kinds);
        let refs = self.refs;
        for d in decided {
            let r = &refs[d.index];
            let Some(kind) = kinds.find(r.group(), &r.kind) else {
                continue;
            };
            let Ok(Some(template)) = kind.pod_template_mut(&mut items[d.index]) else {
                continue;
            };
            let hash = hashes.get(&namespace_of(r, settings)).map(String::as_str);
            let wanted =
                rollout::wanted(mode, d.attached, &workload::template_labels(template), hash);
            let field = || kind.field("metadata.annotations");
            let change = match rollout::stamp(template, wanted) {
                Ok(Some(change)) => change,
                Ok(None) => continue,
                Err(e) => {
                    self.report(d.index, Severity::Error, e.to_string()).field = Some(field());
                    continue;
                }
            };
            match change {
                rollout::Change::Removed(_) => self.summary.unstamped += 1,
                _ => self.summary.stamped += 1,
            }
            match d.result {
                Some(at) => {
                    let message = &mut self.results[at].message;
                    message.push_str("; ");
                    message.push_str(&change.to_string());
                }
                None => {
                    self.report(d.index, Severity::Info, change.to_string())
                        .field = Some(field());
                }
            }
        }
    }

    /// Warns that a workload's namespace is unknown, so only its own annotations count.
    fn unknown_namespace(&mut self, i: usize, unknown: bool, ns_name: Option<&str>) {
        if !unknown {
            return;
        }
        let message = match ns_name {
            Some(n) => format!(
                "namespace {n} is neither in the input nor in the namespaces setting; the workload is decided on its own annotations"
            ),
            None => "the workload has no metadata.namespace; it is decided on its own annotations"
                .to_string(),
        };
        self.report(i, Severity::Warning, message);
    }

    /// Finds the NADs of the input; generated NADs of another name are removed.
    fn existing_nads(&mut self, items: &[Node]) -> ExistingNads {
        let nad_name = self.settings.nad_name.as_str();
        let mut current = BTreeMap::new();
        let mut removed = HashSet::new();
        let refs = self.refs;
        for (i, item) in items.iter().enumerate() {
            let r = &refs[i];
            if !nad::is_nad(r) {
                continue;
            }
            if r.name != nad_name {
                if nad::is_generated(item) {
                    removed.insert(i);
                    self.summary.removed += 1;
                    self.report(
                        i,
                        Severity::Info,
                        format!("removed: generated for another nadName than {nad_name}"),
                    );
                }
                continue;
            }
            if current
                .insert(namespace_of(r, self.settings).map(str::to_string), i)
                .is_some()
            {
                self.report(
                    i,
                    Severity::Error,
                    "the NetworkAttachmentDefinition is in the input twice",
                );
            }
        }
        ExistingNads { current, removed }
    }

    /// Updates NADs and decides which to generate and remove so that exactly
    /// the needed ones exist.
    fn nads(
        &mut self,
        items: &mut [Node],
        namespaces: &BTreeMap<String, Namespace>,
        needs: BTreeMap<Option<String>, Need>,
        existing: ExistingNads,
        mut config: NadConfig,
    ) -> NadPlan {
        let settings = self.settings;
        let nad_name = settings.nad_name.as_str();
        let ExistingNads {
            current: existing,
            mut removed,
        } = existing;
        let mut placed: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
        let mut trailing: Vec<Node> = Vec::new();
        let mut configs = BTreeMap::new();
        let mut used_indices = self.used_file_indices();
        for (ns, need) in &needs {
            let ns_label = ns.as_deref().unwrap_or("(none)");
            match existing.get(ns) {
                Some(&i) if nad::is_generated(&items[i]) => {
                    let Some(text) = config.get(self, items) else {
                        // Left as it is: the missing config is reported as an error.
                        if let Some(old) = nad::config(&items[i]) {
                            configs.insert(ns.clone(), old.to_string());
                        }
                        continue;
                    };
                    if nad::config(&items[i]) != Some(text.as_str()) {
                        nad::set_config(&mut items[i], &text);
                        self.summary.updated += 1;
                        self.report(
                            i,
                            Severity::Info,
                            "updated spec.config from the Linkerd-CNI ConfigMap",
                        )
                        .field = Some("spec.config".into());
                    }
                    let wave = settings.nad_sync_wave.as_deref();
                    if nad::set_annotation(&mut items[i], nad::ARGOCD_SYNC_WAVE, wave) {
                        let message = match wave {
                            Some(wave) => {
                                format!("{} set to {wave:?} (nadSyncWave)", nad::ARGOCD_SYNC_WAVE)
                            }
                            None => {
                                format!("{} removed: nadSyncWave is not set", nad::ARGOCD_SYNC_WAVE)
                            }
                        };
                        self.report(i, Severity::Info, message).field =
                            Some(format!("metadata.annotations.{}", nad::ARGOCD_SYNC_WAVE));
                    }
                    configs.insert(ns.clone(), text);
                }
                Some(&i) => {
                    if let Some(own) = nad::config(&items[i]) {
                        configs.insert(ns.clone(), own.to_string());
                    }
                    if let Some(text) = config.peek(self, items)
                        && !same_json(nad::config(&items[i]), &text)
                    {
                        let message = format!(
                            "this NetworkAttachmentDefinition has no {}: {} label, so it is left as written, but its spec.config differs from the one generated from ConfigMap {}/{CONFIG_MAP_NAME}",
                            nad::MANAGED_BY_LABEL,
                            nad::MANAGED_BY,
                            settings.cni_namespace
                        );
                        self.report(i, Severity::Warning, message).field =
                            Some("spec.config".into());
                    }
                }
                None => {
                    let Some(text) = config.get(self, items) else {
                        continue;
                    };
                    let ns_index = ns.as_ref().and_then(|n| match namespaces.get(n) {
                        Some(Namespace {
                            source: Source::Input(i),
                            ..
                        }) => Some(*i),
                        _ => None,
                    });
                    let file = used_indices.as_mut().map(|used| {
                        let ns_file = ns_index
                            .and_then(|i| self.files[i].as_ref())
                            .map(|f| f.path.as_str());
                        let path = nad::file_path(ns.as_deref(), nad_name, ns_file);
                        let next = used.entry(path.clone()).or_insert(0);
                        let file = FileRef {
                            path,
                            index: Some(*next),
                        };
                        *next += 1;
                        file
                    });
                    let sync_wave = settings.nad_sync_wave.as_deref();
                    let annotations: Vec<_> = sync_wave
                        .map(|wave| (nad::ARGOCD_SYNC_WAVE, wave))
                        .into_iter()
                        .collect();
                    let new = nad::new(
                        nad_name,
                        ns.as_deref(),
                        &text,
                        nad::MANAGED_BY,
                        &annotations,
                        file.as_ref(),
                    );
                    let new_ref =
                        resource::resource_ref(&new).expect("a generated NAD is a resource");
                    self.summary.generated += 1;
                    self.results.push(
                        FnResult::new(
                            Severity::Info,
                            format!("generated for namespace {ns_label}"),
                        )
                        .on(&new_ref, file.as_ref()),
                    );
                    match ns_index {
                        Some(i) => placed.entry(i).or_default().push(new),
                        None => trailing.push(new),
                    }
                    configs.insert(ns.clone(), text);
                }
            }
            if !need.managed
                && let Some(&first) = need.user_refs.first()
            {
                let message = format!(
                    "NetworkAttachmentDefinition {nad_name} in namespace {ns_label} exists only because this workload references it in {}; the namespace does not enable {MULTUS_ANNOTATION}",
                    crate::multus::networks::NETWORKS_ANNOTATION
                );
                self.report(first, Severity::Warning, message);
            }
        }
        for (ns, &i) in &existing {
            if !needs.contains_key(ns) && nad::is_generated(&items[i]) {
                removed.insert(i);
                self.summary.removed += 1;
                let message = format!(
                    "removed: namespace {} no longer needs it",
                    ns.as_deref().unwrap_or("(none)")
                );
                self.report(i, Severity::Info, message);
            }
        }
        NadPlan {
            removed,
            placed,
            trailing,
            configs,
        }
    }

    /// The next free document index of every file, when the host tracks files.
    fn used_file_indices(&self) -> Option<HashMap<String, u32>> {
        if self.files.iter().all(Option::is_none) {
            return None;
        }
        let mut used = HashMap::new();
        for file in self.files.iter().flatten() {
            let next = used.entry(file.path.clone()).or_insert(0);
            *next = (*next).max(file.index.unwrap_or(0) + 1);
        }
        Some(used)
    }

    fn summary_line(&self) -> String {
        let s = &self.summary;
        let mut parts = Vec::new();
        for (n, noun, verb) in [
            (s.attached, "workload", "attached"),
            (s.detached, "workload", "detached"),
            (s.uids, "proxy UID", "set or removed"),
            (s.released, "hand-edited proxy UID", "released"),
            (s.stamped, "config hash", "stamped"),
            (s.unstamped, "config hash", "removed"),
            (s.generated, "NAD", "generated"),
            (s.updated, "NAD", "updated"),
            (s.removed, "NAD", "removed"),
        ] {
            if n > 0 {
                parts.push(format!("{} {verb}", plural(n, noun)));
            }
        }
        if parts.is_empty() {
            parts.push("no changes".into());
        }
        format!(
            "linkerd-multus: {}; {}",
            parts.join(", "),
            results::problems(&self.results)
        )
    }
}

/// The NAD config, read from the ConfigMap at most once.
enum NadConfig {
    Unread,
    Ready(String),
    Failed,
}

impl NadConfig {
    /// The config; reports an error (once) when it cannot be had.
    fn get(&mut self, r: &mut Renderer, items: &[Node]) -> Option<String> {
        self.read(r, items, true)
    }

    /// The config if the ConfigMap is there and valid; silent otherwise.
    fn peek(&mut self, r: &mut Renderer, items: &[Node]) -> Option<String> {
        self.read(r, items, false)
    }

    fn read(&mut self, r: &mut Renderer, items: &[Node], needed: bool) -> Option<String> {
        if let NadConfig::Unread = self {
            *self = match find_config_map(r, items) {
                Ok(Some(i)) => {
                    let data = items[i]
                        .as_map()
                        .and_then(|m| m.get("data"))
                        .and_then(Node::as_map);
                    match cni_config::nad_config(data, r.settings) {
                        Ok(config) => NadConfig::Ready(cni_config::to_text(&config)),
                        Err(e) => {
                            r.report(i, Severity::Error, e.to_string()).field =
                                Some(format!("data.{NETWORK_CONFIG_KEY}"));
                            NadConfig::Failed
                        }
                    }
                }
                Ok(None) if needed => {
                    let missing = ResourceRef {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        name: CONFIG_MAP_NAME.into(),
                        namespace: Some(r.settings.cni_namespace.as_str().into()),
                    };
                    r.results.push(
                        FnResult::new(
                            Severity::Error,
                            "this ConfigMap is not in the input, and a NetworkAttachmentDefinition must be generated from it; add it to the package (annotated config.kubernetes.io/local-config: \"true\" if it is deployed elsewhere)",
                        )
                        .on(&missing, None),
                    );
                    NadConfig::Failed
                }
                Ok(None) => return None,
                Err(()) => NadConfig::Failed,
            };
        }
        match self {
            NadConfig::Ready(text) => Some(text.clone()),
            _ => None,
        }
    }
}

fn find_config_map(r: &mut Renderer, items: &[Node]) -> Result<Option<usize>, ()> {
    let matches: Vec<usize> = (0..items.len())
        .filter(|&i| {
            let x = &r.refs[i];
            x.kind == "ConfigMap"
                && x.group().is_empty()
                && x.name == CONFIG_MAP_NAME
                && x.namespace.as_deref() == Some(r.settings.cni_namespace.as_str())
        })
        .collect();
    match matches.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        [_, rest @ ..] => {
            for &i in rest {
                r.report(
                    i,
                    Severity::Error,
                    "the Linkerd-CNI ConfigMap is in the input twice",
                );
            }
            Err(())
        }
    }
}

/// Whether a NAD's config text means the same JSON as `want`.
fn same_json(have: Option<&str>, want: &str) -> bool {
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).ok();
    match (have.and_then(parse), parse(want)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

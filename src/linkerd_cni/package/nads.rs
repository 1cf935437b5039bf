//! The NADs of a package: the ones of the input found, updated or removed,
//! and the ones the namespaces need generated from the Linkerd-CNI ConfigMap.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Need, Renderer, namespace_of};
use crate::k8s::namespace::{MULTUS_ANNOTATION, Namespace, Source};
use crate::k8s::resource::{self, FileRef, ResourceRef};
use crate::krm::results::{FnResult, Severity};
use crate::linkerd_cni::cni_config::{self, CONFIG_MAP_NAME, NETWORK_CONFIG_KEY, PLUGIN_TYPE};
use crate::multus::nad;
use crate::yaml::Node;

/// The NADs of the input: the current one per namespace, and generated ones to remove.
pub(super) struct ExistingNads {
    /// The NAD of each namespace, by item index.
    pub(super) current: BTreeMap<Option<String>, usize>,
    /// Generated NADs of another name.
    removed: HashSet<usize>,
}
/// What [`Renderer::nads`] decided; applied to the items by [`NadPlan::place`].
pub(super) struct NadPlan {
    /// Indices of generated NADs to remove.
    removed: HashSet<usize>,
    /// New NADs to place right after the item of that index (their Namespace).
    placed: BTreeMap<usize, Vec<Node>>,
    /// New NADs to place at the end.
    trailing: Vec<Node>,
}

/// The Linkerd-CNI NAD config each namespace has after the render, foreseen before the
/// workloads are rendered, so that the rules reading it run in the same visit of a pod
/// template: that of the namespace's NAD in the input (a generated one gets the ConfigMap's
/// config when there is one; someone else's network gives none), else the ConfigMap's.
/// [`Renderer::nads`] leaves exactly these to the namespaces that need a NAD.
pub(super) struct ForeseenConfigs {
    /// The namespaces with a NAD of the rules' name in the input.
    existing: BTreeMap<Option<String>, Option<String>>,
    /// The config generated from the ConfigMap, if it reads.
    generated: Option<String>,
}

impl ForeseenConfigs {
    /// The config of namespace `ns`'s NAD after the render, if it needs one.
    pub(super) fn get(&self, ns: &Option<String>) -> Option<&str> {
        match self.existing.get(ns) {
            Some(config) => config.as_deref(),
            None => self.generated.as_deref(),
        }
    }
}

impl NadPlan {
    /// Removes and inserts NADs; the other items keep their order.
    pub(super) fn place(self, items: &mut Vec<Node>) {
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

impl Renderer<'_> {
    /// Finds the NADs of the input; generated NADs of another name are removed.
    pub(super) fn existing_nads(&mut self, items: &[Node]) -> ExistingNads {
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

    /// Foresees the NAD config of each namespace after the render; `generated` is the config
    /// the ConfigMap gives, if it reads.
    pub(super) fn foresee_configs(
        &self,
        items: &[Node],
        existing: &ExistingNads,
        generated: Option<String>,
    ) -> ForeseenConfigs {
        let existing = existing
            .current
            .iter()
            .map(|(ns, &i)| {
                let own = nad::config(&items[i]);
                let config = if nad::is_generated(&items[i]) {
                    generated.as_deref().or(own)
                } else if own.is_some_and(|c| cni_config::other_network(c).is_some()) {
                    None
                } else {
                    own
                };
                (ns.clone(), config.map(str::to_string))
            })
            .collect();
        ForeseenConfigs {
            existing,
            generated,
        }
    }

    /// Updates NADs and decides which to generate and remove so that exactly
    /// the needed ones exist.
    pub(super) fn nads(
        &mut self,
        items: &mut [Node],
        namespaces: &BTreeMap<String, Namespace>,
        needs: &BTreeMap<Option<String>, Need>,
        existing: ExistingNads,
        mut config: NadConfig,
    ) -> NadPlan {
        let ExistingNads {
            current: existing,
            removed,
        } = existing;
        let mut plan = NadPlan {
            removed,
            placed: BTreeMap::new(),
            trailing: Vec::new(),
        };
        let mut used_indices = self.used_file_indices();
        for (ns, need) in needs {
            match existing.get(ns) {
                Some(&i) if nad::is_generated(&items[i]) => {
                    let Some(text) = config.get(self, items) else {
                        // Left as it is: the missing config is reported as an error.
                        continue;
                    };
                    self.update_nad(i, &mut items[i], &text);
                }
                Some(&i) if self.refuse_foreign_nad(i, &items[i], ns) => continue,
                Some(&i) => self.compare_hand_written_nad(i, items, &mut config),
                None => {
                    let Some(text) = config.get(self, items) else {
                        continue;
                    };
                    self.generate_nad(ns, &text, namespaces, used_indices.as_mut(), &mut plan);
                }
            }
            if !need.managed
                && let Some(&first) = need.user_refs.first()
            {
                self.warn_user_only_need(first, ns);
            }
        }
        self.remove_unneeded(items, &existing, needs, &mut plan.removed);
        plan
    }

    /// Brings generated NAD `i` in line with the config and the `nadSyncWave`
    /// setting.
    fn update_nad(&mut self, i: usize, item: &mut Node, text: &str) {
        if nad::config(item) != Some(text) {
            nad::set_config(item, text);
            self.summary.updated += 1;
            self.report(
                i,
                Severity::Info,
                "updated spec.config from the Linkerd-CNI ConfigMap",
            )
            .field = Some("spec.config".into());
        }
        let wave = self.settings.nad_sync_wave.as_deref();
        if nad::set_annotation(item, nad::ARGOCD_SYNC_WAVE, wave) {
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
    }

    /// Refuses NAD `i`, not labelled as this project's, whose config does not
    /// run Linkerd-CNI: someone else's network holds the name the rules need,
    /// and attaching the namespace's workloads to it would put them on that
    /// network instead. A NAD without `spec.config` (Multus then reads the
    /// node's file of that name) is left as written.
    fn refuse_foreign_nad(&mut self, i: usize, item: &Node, ns: &Option<String>) -> bool {
        let Some(config) = nad::config(item) else {
            return false;
        };
        let Some(runs) = cni_config::other_network(config) else {
            return false;
        };
        let nad_name = self.settings.nad_name.as_str();
        let ns_label = ns.as_deref().unwrap_or("(none)");
        let message = format!(
            "it runs {runs}, not {PLUGIN_TYPE}, yet namespace {ns_label} needs the name {nad_name} for the NAD that attaches Linkerd-CNI: its workloads would join this network instead, so none is attached. Give the rules a name no NAD of the namespace has (the nadName setting, or --nad-name), or rename this network; if it is meant to be Linkerd-CNI's, label it {}: {} and the render writes its spec.config",
            nad::MANAGED_BY_LABEL,
            nad::MANAGED_BY,
        );
        self.report(i, Severity::Error, message).field = Some("spec.config".into());
        true
    }

    /// Warns when NAD `i`, written by hand and so left as it is, has another
    /// config than the generated one.
    fn compare_hand_written_nad(&mut self, i: usize, items: &[Node], config: &mut NadConfig) {
        if let Some(text) = config.peek(self, items)
            && !same_json(nad::config(&items[i]), &text)
        {
            let message = format!(
                "this NetworkAttachmentDefinition has no {}: {} label, so it is left as written, but its spec.config differs from the one generated from ConfigMap {}/{CONFIG_MAP_NAME}",
                nad::MANAGED_BY_LABEL,
                nad::MANAGED_BY,
                self.settings.cni_namespace
            );
            self.report(i, Severity::Warning, message).field = Some("spec.config".into());
        }
    }

    /// Generates the NAD of namespace `ns`, placed after its Namespace when
    /// the input has it, else at the end, in a file of its own when the host
    /// tracks files.
    fn generate_nad(
        &mut self,
        ns: &Option<String>,
        text: &str,
        namespaces: &BTreeMap<String, Namespace>,
        used_indices: Option<&mut HashMap<String, u32>>,
        plan: &mut NadPlan,
    ) {
        let nad_name = self.settings.nad_name.as_str();
        let ns_index = ns.as_ref().and_then(|n| match namespaces.get(n) {
            Some(Namespace {
                source: Source::Input(i),
                ..
            }) => Some(*i),
            _ => None,
        });
        let file = used_indices.map(|used| {
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
        let sync_wave = self.settings.nad_sync_wave.as_deref();
        let annotations: Vec<_> = sync_wave
            .map(|wave| (nad::ARGOCD_SYNC_WAVE, wave))
            .into_iter()
            .collect();
        let new = nad::new(
            nad_name,
            ns.as_deref(),
            text,
            (nad::MANAGED_BY_LABEL, nad::MANAGED_BY),
            &annotations,
            file.as_ref(),
        );
        let new_ref = resource::resource_ref(&new).expect("a generated NAD is a resource");
        self.summary.generated += 1;
        let ns_label = ns.as_deref().unwrap_or("(none)");
        self.results.push(
            FnResult::new(
                Severity::Info,
                format!("generated for namespace {ns_label}"),
            )
            .on(&new_ref, file.as_ref()),
        );
        match ns_index {
            Some(i) => plan.placed.entry(i).or_default().push(new),
            None => plan.trailing.push(new),
        }
    }

    /// Warns, on the first workload that needs it, that the NAD of namespace
    /// `ns` exists only for the workloads' own references.
    fn warn_user_only_need(&mut self, first: usize, ns: &Option<String>) {
        let nad_name = self.settings.nad_name.as_str();
        let ns_label = ns.as_deref().unwrap_or("(none)");
        let message = format!(
            "NetworkAttachmentDefinition {nad_name} in namespace {ns_label} exists only because this workload references it in {}; the namespace does not enable {MULTUS_ANNOTATION}",
            crate::multus::networks::NETWORKS_ANNOTATION
        );
        self.report(first, Severity::Warning, message);
    }

    /// Removes the generated NADs of namespaces that no longer need one.
    fn remove_unneeded(
        &mut self,
        items: &[Node],
        existing: &BTreeMap<Option<String>, usize>,
        needs: &BTreeMap<Option<String>, Need>,
        removed: &mut HashSet<usize>,
    ) {
        for (ns, &i) in existing {
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
}

/// The NAD config, read from the ConfigMap at most once.
pub(super) enum NadConfig {
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
    pub(super) fn peek(&mut self, r: &mut Renderer, items: &[Node]) -> Option<String> {
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
                            let (message, position) = e.located();
                            let result = r.report(i, Severity::Error, message);
                            result.field = Some(format!("data.{NETWORK_CONFIG_KEY}"));
                            result.position = position;
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

/// The index of the Linkerd-CNI ConfigMap, if it is in the input; an error
/// (reported) when it is there twice.
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

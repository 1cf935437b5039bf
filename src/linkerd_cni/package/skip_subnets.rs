//! The secondary-network rule on a package's workloads: each attached pod template that opted
//! in skips the subnets of the networks it selects, read from the package's NADs.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use super::{Decided, Renderer, namespace_of};
use crate::k8s::namespace::Namespace;
use crate::k8s::workload::{self, WorkloadKind, remove_annotation, set_annotation};
use crate::krm::results::Severity;
use crate::linkerd_cni::skip_subnets::{self, Change, Context, NadIpams, PluginSettings};
use crate::multus::ipam::{self, Ipam, IpamError};
use crate::multus::nad;
use crate::multus::networks::NETWORKS_ANNOTATION;
use crate::yaml::{Map, Node};

/// The NADs of the package, by namespace and name: the config of each, its IPAM read the
/// first time a pod asks (a render with the rule off reads none).
#[derive(Default)]
pub(super) struct PackageIpams(BTreeMap<String, BTreeMap<String, PackageNad>>);

/// A NAD of the package: its `spec.config`, and its IPAM once read.
type PackageNad = (Option<String>, OnceCell<IpamRead>);

type IpamRead = Result<Ipam, IpamError>;

impl NadIpams for PackageIpams {
    fn ipam(&self, namespace: &str, name: &str) -> Option<&IpamRead> {
        let (config, read) = self.0.get(namespace)?.get(name)?;
        Some(read.get_or_init(|| match config {
            Some(config) => ipam::read(config),
            None => Ok(Ipam::None),
        }))
    }
}

impl Renderer<'_> {
    /// Applies the secondary-network rule to decided workload `d`, of `kind`, whose pod
    /// template is `template`: `namespaces` gives the namespaces' annotations, `plugin` the
    /// plugin settings of its namespace's Linkerd-CNI NAD config after the render.
    pub(super) fn skip_subnets(
        &mut self,
        ipams: &PackageIpams,
        d: &mut Decided,
        (kind, template): (&WorkloadKind, &mut Map),
        namespaces: &BTreeMap<String, Namespace>,
        plugin: Option<&PluginSettings>,
    ) {
        let settings = self.settings;
        let ns_name = namespace_of(&self.refs[d.index], settings);
        let namespace = ns_name
            .and_then(|n| namespaces.get(n))
            .map(|n| &n.annotations);
        let cx = Context {
            settings,
            pod_namespace: ns_name.unwrap_or(""),
            namespace: &namespace,
            nads: Some(ipams),
            plugin,
        };
        let annotations = workload::template_annotations(template);
        let networks = annotations.and_then(|a| a.get_text(NETWORKS_ANNOTATION));
        let field = || kind.field("metadata.annotations");
        let planned = match skip_subnets::plan(&annotations, networks, d.attached, &cx) {
            Ok(planned) => planned,
            Err(e) => {
                self.report(d.index, Severity::Error, e.to_string()).field = Some(field());
                return;
            }
        };
        for (key, value) in &planned.edits {
            match value {
                Some(value) => {
                    if let Err(e) = set_annotation(template, key, value.clone()) {
                        self.report(d.index, Severity::Error, e).field = Some(field());
                    }
                }
                None => remove_annotation(template, key),
            }
        }
        for warning in planned.warnings {
            self.report(d.index, Severity::Warning, warning).field = Some(field());
        }
        let Some(change) = planned.change else {
            return;
        };
        match change {
            Change::Set(_) => self.summary.skipped += 1,
            Change::TakenBack => self.summary.unskipped += 1,
        }
        self.note(d, &change.to_string(), field);
    }

    /// The IPAM of every NAD of the package that is not Linkerd-CNI's.
    pub(super) fn package_ipams(&self, items: &[Node]) -> PackageIpams {
        let mut ipams = PackageIpams::default();
        for (r, item) in self.refs.iter().zip(items) {
            if !nad::is_nad(r) || nad::is_generated(item) {
                continue;
            }
            let Some(namespace) = namespace_of(r, self.settings) else {
                continue;
            };
            let config = nad::config(item).map(str::to_string);
            ipams
                .0
                .entry(namespace.to_string())
                .or_default()
                .insert(r.name.to_string(), (config, OnceCell::new()));
        }
        ipams
    }
}

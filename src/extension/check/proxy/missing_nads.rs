//! `--proxy`'s NADs gone: the meshed pods whose networks select a NetworkAttachmentDefinition
//! that no longer exists (the Linkerd-CNI one or a secondary network). They run on, but a pod
//! recreated (a restart, an eviction, a node drained) cannot start: Multus finds no such NAD.

use super::Findings;
use crate::extension::check::snapshot::Ipams;
use crate::multus::networks::Networks;

/// What to do about them.
pub(super) const HINT: &str = "make the NADs again (render them from Git and apply them, or let the NAD controller make the Linkerd-CNI one: its namespace annotated linkerd.io/multus=enabled), or remove them from the pods' templates; see which with kubectl get net-attach-def -n NAMESPACE";

/// Records the pod `named` (of namespace `ns`) when `networks` select a NAD that `ipams`,
/// every NAD of the cluster, lacks.
pub(super) fn judge(
    found: &mut Findings,
    named: String,
    networks: &Networks,
    ns: &str,
    ipams: &Ipams,
) {
    let gone: Vec<String> = networks
        .selections()
        .iter()
        .map(|s| (s.namespace_or(ns).to_string(), s.name.clone()))
        .filter(|key| !ipams.contains_key(key))
        .map(|(namespace, name)| format!("{namespace}/{name}"))
        .collect();
    if !gone.is_empty() {
        found
            .missing_nads
            .push(format!("{named} ({})", gone.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::pod;
    use super::super::{Seen, judge};
    use crate::extension::check::snapshot::{Ipams, Meta, Nad};
    use crate::linkerd_cni::settings::Settings;
    use crate::multus::ipam;
    use crate::multus::networks::NETWORKS_ANNOTATION;

    /// A pod whose networks select a NAD that is gone is named with it, when every NAD of the
    /// cluster is known; without that list nothing is said.
    #[test]
    fn pods_selecting_a_nad_that_is_gone_are_named() {
        let ipams: Ipams = [("demo", "linkerd-cni"), ("shared", "data")]
            .into_iter()
            .map(|(ns, name)| ((ns.to_string(), name.to_string()), ipam::read("{}")))
            .collect();
        let pods = [
            pod(
                "ok",
                "demo",
                &[(NETWORKS_ANNOTATION, "linkerd-cni, shared/data@net1")],
            ),
            pod(
                "storage",
                "demo",
                &[(NETWORKS_ANNOTATION, "storage, linkerd-cni")],
            ),
            pod(
                "both",
                "other",
                &[(
                    NETWORKS_ANNOTATION,
                    r#"[{"name": "linkerd-cni"}, {"name": "data", "namespace": "shared"}, {"name": "gone", "namespace": "shared"}]"#,
                )],
            ),
            pod("plain", "demo", &[]),
        ];
        let namespaces: BTreeMap<&str, &Meta> = BTreeMap::new();
        let nads: BTreeMap<String, Nad> = BTreeMap::new();
        let settings = Settings::default();
        let mut seen = Seen {
            namespaces: &namespaces,
            nads: &nads,
            ipams: &ipams,
            every_nad: true,
            settings: &settings,
        };
        assert_eq!(
            judge(&pods, &seen).missing_nads,
            [
                "demo/storage (demo/storage)",
                "other/both (other/linkerd-cni, shared/gone)",
            ]
        );
        seen.every_nad = false;
        assert!(judge(&pods, &seen).missing_nads.is_empty());
    }
}

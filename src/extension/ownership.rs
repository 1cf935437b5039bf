//! Which namespaces the extension may take and give back. `install` puts it
//! only in a namespace of its own, and `uninstall` deletes a namespace only
//! when it is that: marked by [`MARK`] (which `install` sets on a namespace it
//! makes, and keeps on one it made) and not [`reserved`], whatever marks it
//! carries. Deleting a namespace deletes everything in it, so a namespace of
//! someone else's is never emitted for deletion.

/// The annotation that makes a namespace the extension's own.
pub const MARK: &str = "multus.linkerd.io/namespace-owner";

/// The value of [`MARK`].
pub const MARK_VALUE: &str = "linkerd-multus";

/// Namespaces of Linkerd's extensions and add-ons, beside the control
/// plane's and the CNI's (which are named by flags, and by their defaults).
const LINKERD: &[&str] = &[
    "linkerd",
    "linkerd-cni",
    "linkerd-viz",
    "linkerd-jaeger",
    "linkerd-multicluster",
    "linkerd-smi",
    "linkerd-failover",
    "linkerd-buoyant",
];

/// Whose `name` is when the extension may never have it as its namespace
/// (`None` when it may): Kubernetes's (`default` and the `kube-` prefix, which
/// Kubernetes reserves), OpenShift's (`openshift` and its `openshift-`
/// prefix), Linkerd's control plane (`linkerd_namespace`), Linkerd-CNI's
/// (`cni_namespace`), a Linkerd extension's, cert-manager's (which issues the
/// webhook's certificate). Any other namespace that exists is refused by
/// `install` unless it carries [`MARK`]; this list also holds where the
/// cluster is not read, and against a mark set by hand.
pub fn reserved(name: &str, linkerd_namespace: &str, cni_namespace: &str) -> Option<&'static str> {
    if name == "default" || name.starts_with("kube-") {
        Some("Kubernetes's own")
    } else if name == "openshift" || name.starts_with("openshift-") {
        Some("OpenShift's own")
    } else if name == linkerd_namespace || name == "linkerd" {
        Some("the Linkerd control plane's")
    } else if name == cni_namespace || name == "linkerd-cni" {
        Some("Linkerd-CNI's")
    } else if LINKERD.contains(&name) {
        Some("a Linkerd extension's")
    } else if name == "cert-manager" {
        Some("cert-manager's")
    } else {
        None
    }
}

/// Whether `annotations` hold the extension's mark.
pub fn marked<'a>(mut annotations: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
    annotations.any(|(k, v)| k == MARK && v == MARK_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_namespaces_say_whose_they_are() {
        for (name, linkerd, cni, want) in [
            (
                "default",
                "linkerd",
                "linkerd-cni",
                Some("Kubernetes's own"),
            ),
            (
                "kube-system",
                "linkerd",
                "linkerd-cni",
                Some("Kubernetes's own"),
            ),
            (
                "kube-public",
                "linkerd",
                "linkerd-cni",
                Some("Kubernetes's own"),
            ),
            (
                "kube-node-lease",
                "linkerd",
                "linkerd-cni",
                Some("Kubernetes's own"),
            ),
            (
                "kube-anything",
                "linkerd",
                "linkerd-cni",
                Some("Kubernetes's own"),
            ),
            (
                "openshift",
                "linkerd",
                "linkerd-cni",
                Some("OpenShift's own"),
            ),
            (
                "openshift-monitoring",
                "linkerd",
                "linkerd-cni",
                Some("OpenShift's own"),
            ),
            ("linkerd", "l5d", "cni", Some("the Linkerd control plane's")),
            ("l5d", "l5d", "cni", Some("the Linkerd control plane's")),
            ("linkerd-cni", "linkerd", "cni", Some("Linkerd-CNI's")),
            ("cni", "linkerd", "cni", Some("Linkerd-CNI's")),
            (
                "linkerd-viz",
                "linkerd",
                "linkerd-cni",
                Some("a Linkerd extension's"),
            ),
            (
                "cert-manager",
                "linkerd",
                "linkerd-cni",
                Some("cert-manager's"),
            ),
            ("linkerd-multus", "linkerd", "linkerd-cni", None),
            ("mesh-webhook", "linkerd", "linkerd-cni", None),
            ("kube", "linkerd", "linkerd-cni", None),
            ("defaults", "linkerd", "linkerd-cni", None),
        ] {
            assert_eq!(reserved(name, linkerd, cni), want, "{name}");
        }
    }

    #[test]
    fn only_the_exact_mark_marks() {
        for (annotations, want) in [
            (vec![(MARK, MARK_VALUE)], true),
            (vec![("a", "b"), (MARK, MARK_VALUE)], true),
            (vec![(MARK, "someone-else")], false),
            (vec![("linkerd.io/extension", "multus")], false),
            (vec![], false),
        ] {
            assert_eq!(marked(annotations.into_iter()), want);
        }
    }
}

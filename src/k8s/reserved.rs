//! The namespaces that are someone else's own: Kubernetes', OpenShift's,
//! Linkerd's (its control plane's, its extensions'), Linkerd-CNI's and
//! cert-manager's. One list for every use of it: `install` never puts the
//! extension in one (nor `uninstall` deletes one), the NAD controller never
//! restarts a workload or evicts a pod in one, and the ValidatingAdmissionPolicy
//! of `deploy-restarts/` refuses those restarts too (its CEL names the same
//! names and prefixes, held to these by a test).

/// Name prefixes a platform reserves, with whose they are.
pub const PREFIXES: &[(&str, &str)] = &[("kube-", KUBERNETES), ("openshift-", OPENSHIFT)];

/// Names reserved whatever the settings, with whose they are: the platforms'
/// own, Linkerd's and its extensions' default namespaces, cert-manager's (which
/// issues the webhook's certificate).
pub const NAMES: &[(&str, &str)] = &[
    ("default", KUBERNETES),
    ("openshift", OPENSHIFT),
    ("linkerd", CONTROL_PLANE),
    ("linkerd-cni", CNI),
    ("linkerd-viz", EXTENSION),
    ("linkerd-jaeger", EXTENSION),
    ("linkerd-multicluster", EXTENSION),
    ("linkerd-smi", EXTENSION),
    ("linkerd-failover", EXTENSION),
    ("linkerd-buoyant", EXTENSION),
    ("cert-manager", "cert-manager's"),
];

const KUBERNETES: &str = "Kubernetes's own";
const OPENSHIFT: &str = "OpenShift's own";
const CONTROL_PLANE: &str = "the Linkerd control plane's";
const CNI: &str = "Linkerd-CNI's";
const EXTENSION: &str = "a Linkerd extension's";

/// Whose `name` is when it is reserved (`None` when it is not): by
/// [`PREFIXES`], by [`NAMES`], or as the Linkerd control plane's
/// (`linkerd_namespace`) or Linkerd-CNI's (`cni_namespace`) where the settings
/// name others than the defaults.
pub fn reserved(name: &str, linkerd_namespace: &str, cni_namespace: &str) -> Option<&'static str> {
    let prefixed = PREFIXES.iter().find(|(prefix, _)| name.starts_with(prefix));
    let named = NAMES.iter().find(|(reserved, _)| *reserved == name);
    match prefixed.or(named) {
        Some((_, whose)) => Some(whose),
        None if name == linkerd_namespace => Some(CONTROL_PLANE),
        None if name == cni_namespace => Some(CNI),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_namespaces_say_whose_they_are() {
        for (name, linkerd, cni, want) in [
            ("default", "linkerd", "linkerd-cni", Some(KUBERNETES)),
            ("kube-system", "linkerd", "linkerd-cni", Some(KUBERNETES)),
            ("kube-public", "linkerd", "linkerd-cni", Some(KUBERNETES)),
            (
                "kube-node-lease",
                "linkerd",
                "linkerd-cni",
                Some(KUBERNETES),
            ),
            ("kube-anything", "linkerd", "linkerd-cni", Some(KUBERNETES)),
            ("openshift", "linkerd", "linkerd-cni", Some(OPENSHIFT)),
            (
                "openshift-monitoring",
                "linkerd",
                "linkerd-cni",
                Some(OPENSHIFT),
            ),
            ("linkerd", "l5d", "cni", Some(CONTROL_PLANE)),
            ("l5d", "l5d", "cni", Some(CONTROL_PLANE)),
            ("linkerd-cni", "linkerd", "cni", Some(CNI)),
            ("cni", "linkerd", "cni", Some(CNI)),
            ("linkerd-viz", "linkerd", "linkerd-cni", Some(EXTENSION)),
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
            ("openshiftx", "linkerd", "linkerd-cni", None),
        ] {
            assert_eq!(reserved(name, linkerd, cni), want, "{name}");
        }
    }
}

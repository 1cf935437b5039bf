//! The kpt packages, embedded: `deploy/` (the webhook), `deploy-nad-controller/`,
//! `deploy-restarts/` and `deploy-network-resources/`, their files as shipped, with the setters of
//! [`Options`] applied as kpt's `apply-setters` would. They are the one source
//! of what `install` prints.

use std::collections::BTreeMap;

use anyhow::Context as _;

use super::options::{Certs, Options, switch_text};
use super::setters;
use crate::yaml::{Node, parse_stream};

/// One file of a package.
#[derive(Debug, Clone, Copy)]
pub struct File {
    /// Its path in the repository.
    pub path: &'static str,
    /// Its text.
    pub text: &'static str,
}

macro_rules! file {
    ($path:literal) => {
        File {
            path: $path,
            text: include_str!(concat!("../../../", $path)),
        }
    };
}

/// `deploy/`'s files but cert-manager's, the Namespace first; in the order
/// `install` prints them, with the parts around them.
pub const NAMESPACE: File = file!("deploy/namespace.yaml");
/// The webhook's ServiceAccount and read-only rights.
pub const WEBHOOK_RBAC: File = file!("deploy/rbac.yaml");
/// The webhook's workload and configuration, after the rights and certificates.
pub const WEBHOOK: [File; 6] = [
    file!("deploy/service.yaml"),
    file!("deploy/metrics-service.yaml"),
    file!("deploy/networkpolicy.yaml"),
    file!("deploy/poddisruptionbudget.yaml"),
    file!("deploy/deployment.yaml"),
    file!("deploy/mutatingwebhookconfiguration.yaml"),
];
/// cert-manager's Issuers and Certificates.
pub const CERT_MANAGER: File = file!("deploy/cert-manager/certificates.yaml");
/// The NAD controller's ServiceAccount and rights.
pub const NAD_CONTROLLER_RBAC: File = file!("deploy-nad-controller/rbac.yaml");
/// The NAD controller's workload, after the webhook's.
pub const NAD_CONTROLLER: [File; 4] = [
    file!("deploy-nad-controller/metrics-service.yaml"),
    file!("deploy-nad-controller/networkpolicy.yaml"),
    file!("deploy-nad-controller/poddisruptionbudget.yaml"),
    file!("deploy-nad-controller/deployment.yaml"),
];
/// The rights of the NAD controller's restarts of stale workloads, and the
/// ValidatingAdmissionPolicy that cuts them to what the restarts do.
pub const RESTARTS: [File; 2] = [
    file!("deploy-restarts/rbac.yaml"),
    file!("deploy-restarts/policy.yaml"),
];
/// The network-resources rules' rights and settings.
pub const NETWORK_RESOURCES: [File; 2] = [
    file!("deploy-network-resources/rbac.yaml"),
    file!("deploy-network-resources/configmap.yaml"),
];

/// Where the Deployment mounts `deploy-network-resources/`'s settings file.
pub const NETWORK_RESOURCES_FILE: &str =
    "/etc/linkerd-multus/network-resources/network-resources.yaml";

/// The setters `install` sets, with their values for `options`. The
/// packages' other setters (`api-server-cidr`, `api-server-cidr-ipv6`) keep
/// the packages' values: `install` writes the CIDRs it is given as the
/// NetworkPolicy's blocks, one for each, which two setters cannot.
pub fn setter_values(options: &Options) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("namespace", options.namespace.clone()),
        ("replicas", options.replicas.to_string()),
        (
            "failure-policy",
            options.failure_policy.as_str().to_string(),
        ),
        ("priority-class-name", options.priority_class_name.clone()),
        ("linkerd-namespace", options.linkerd_namespace.clone()),
        ("image", options.image.clone()),
        ("missing-nad", options.day2.missing_nad.as_str().to_string()),
        ("cni-namespace", options.cni_namespace.clone()),
        (
            "skip-secondary-subnets",
            switch_text(options.skip_secondary_subnets).to_string(),
        ),
        (
            "cluster-cidrs",
            format!("[{}]", options.cluster_cidrs.join(", ")),
        ),
        (
            "protected-cidrs",
            format!("[{}]", options.protected_cidrs.join(", ")),
        ),
        (
            "metrics-namespaces",
            format!("[{}]", options.metrics_namespaces.join(", ")),
        ),
        (
            "webhook-excluded-namespaces",
            format!("[{}]", options.webhook_excluded_namespaces.join(", ")),
        ),
        (
            "network-resources",
            if options.network_resources {
                NETWORK_RESOURCES_FILE.to_string()
            } else {
                String::new()
            },
        ),
    ])
}

/// The files the options choose, in the order `install` prints them; the
/// Secret of generated certificates goes after the rights (`rights`).
pub fn files(options: &Options) -> (Vec<File>, Vec<File>) {
    let mut rights = vec![NAMESPACE, WEBHOOK_RBAC];
    if options.manage_nads {
        rights.push(NAD_CONTROLLER_RBAC);
    }
    if options.restart_stale_workloads {
        rights.extend(RESTARTS);
    }
    if options.network_resources {
        rights.extend(NETWORK_RESOURCES);
    }
    let mut rest = Vec::new();
    if options.certs == Certs::CertManager {
        rest.push(CERT_MANAGER);
    }
    rest.extend(WEBHOOK);
    if options.manage_nads {
        rest.extend(NAD_CONTROLLER);
    }
    (rights, rest)
}

/// Every file of the packages, whatever the options choose.
pub fn all() -> Vec<File> {
    let mut all = vec![NAMESPACE, WEBHOOK_RBAC, CERT_MANAGER];
    all.extend(WEBHOOK);
    all.push(NAD_CONTROLLER_RBAC);
    all.extend(NAD_CONTROLLER);
    all.extend(RESTARTS);
    all.extend(NETWORK_RESOURCES);
    all
}

/// The resource of `kind` as the API server names it: lower case, plural.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    }
}

/// The objects of `files` with the options' setters applied.
pub fn objects(files: &[File], options: &Options) -> anyhow::Result<Vec<Node>> {
    let values = setter_values(options);
    let mut out = Vec::new();
    for file in files {
        let text = setters::apply(file.text, &values);
        let docs =
            parse_stream(&text).with_context(|| format!("{} after its setters", file.path))?;
        out.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every YAML file of the packages is embedded: one added later is not left out.
    #[test]
    fn every_package_file_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let embedded: Vec<&str> = all().iter().map(|f| f.path).collect();
        for dir in [
            "deploy",
            "deploy-nad-controller",
            "deploy-restarts",
            "deploy-network-resources",
        ] {
            for entry in walkdir::WalkDir::new(root.join(dir)) {
                let path = entry.unwrap().into_path();
                if path.extension().is_some_and(|e| e == "yaml") {
                    let rel = path.strip_prefix(root).unwrap().display().to_string();
                    assert!(embedded.contains(&rel.as_str()), "{rel} is not embedded");
                }
            }
        }
    }

    /// `install` sets every setter of the packages but those that keep their values.
    #[test]
    fn install_knows_every_setter() {
        let values = setter_values(&Options::default());
        let kept = ["api-server-cidr", "api-server-cidr-ipv6"];
        for file in all() {
            for name in setters::names(file.text) {
                assert!(
                    values.contains_key(name.as_str()) || kept.contains(&name.as_str()),
                    "{}: setter {name} unknown to install",
                    file.path
                );
            }
        }
    }

    /// The default options give the packages' own values: the files as shipped.
    #[test]
    fn default_options_are_the_packages_defaults() {
        let values = setter_values(&Options::default());
        for file in all() {
            assert_eq!(
                setters::apply(file.text, &values),
                file.text,
                "{}",
                file.path
            );
        }
    }

    /// The plural of every kind of the packages is the one the API server serves.
    #[test]
    fn plurals_are_the_api_servers() {
        use k8s_openapi::Resource;
        use k8s_openapi::api::{admissionregistration, apps, core, networking, policy, rbac};
        fn of<K: Resource>() -> (&'static str, &'static str) {
            (K::KIND, K::URL_PATH_SEGMENT)
        }
        let known = [
            of::<core::v1::Namespace>(),
            of::<core::v1::ServiceAccount>(),
            of::<core::v1::Secret>(),
            of::<core::v1::Service>(),
            of::<core::v1::ConfigMap>(),
            of::<apps::v1::Deployment>(),
            of::<policy::v1::PodDisruptionBudget>(),
            of::<networking::v1::NetworkPolicy>(),
            of::<rbac::v1::ClusterRole>(),
            of::<rbac::v1::ClusterRoleBinding>(),
            of::<rbac::v1::Role>(),
            of::<rbac::v1::RoleBinding>(),
            of::<admissionregistration::v1::MutatingWebhookConfiguration>(),
            of::<admissionregistration::v1::ValidatingAdmissionPolicy>(),
            of::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(),
            ("Issuer", "issuers"),
            ("Certificate", "certificates"),
        ];
        let objects = objects(&all(), &Options::default()).unwrap();
        for object in &objects {
            let kind = object.get_path(&["kind"]).and_then(Node::as_str).unwrap();
            let (_, want) = known
                .iter()
                .find(|(k, _)| *k == kind)
                .unwrap_or_else(|| panic!("{kind} is not in the table"));
            assert_eq!(plural(kind), *want, "{kind}");
        }
    }

    #[test]
    fn every_object_carries_the_extension_label() {
        let objects = objects(&all(), &Options::default()).unwrap();
        assert!(objects.len() > 10);
        for object in objects {
            assert_eq!(
                object
                    .get_path(&["metadata", "labels", "linkerd.io/extension"])
                    .and_then(Node::as_str),
                Some("multus"),
                "{:?}",
                object.get_path(&["metadata", "name"])
            );
        }
    }
}

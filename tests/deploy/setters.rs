//! The package's kpt setters: every reference to a name they change is covered.

use super::*;

pub(crate) use crate::common::setters::apply_setters;

const NEW: &str = "mesh-webhook";
const SETTERS: [(&str, &str); 15] = [
    (
        "image",
        "mirror.example:5000/linkerd/multus@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    ("webhook-excluded-namespaces", "[openshift, openshift-*]"),
    ("namespace", NEW),
    ("priority-class-name", "webhooks"),
    ("api-server-cidr", "10.0.0.0/24"),
    ("api-server-cidr-ipv6", "fd00::/64"),
    ("metrics-namespaces", "[prometheus, openshift-monitoring]"),
    ("replicas", "3"),
    ("failure-policy", "Ignore"),
    ("linkerd-namespace", "l5d"),
    ("missing-nad", "attach"),
    ("network-resources", "/etc/nr.yaml"),
    ("skip-secondary-subnets", "enabled"),
    ("cluster-cidrs", "[10.244.0.0/16, 10.96.0.0/12]"),
    ("protected-cidrs", "[192.168.0.0/16, 203.0.113.0/24]"),
];

/// `text` with every `# kpt-set:` line set to [`SETTERS`]' values.
fn set(text: &str) -> String {
    apply_setters(text, &SETTERS)
}

/// `kpt fn eval --image apply-setters -- namespace=NEW ...` as the package documents it,
/// done here by applying each `# kpt-set:` comment: afterwards no reference to the old
/// namespace may be left, every reference must name the new one, and each other setter
/// reaches what it names.
#[test]
fn setters_cover_every_reference() {
    let files: Vec<(String, String)> = yaml_files()
        .into_iter()
        .map(|(rel, text)| {
            let t = set(&text);
            (rel, t)
        })
        .collect();
    let pkg = Package::from_files(&files);
    namespace_setter_names_new_everywhere(&pkg);
    other_setters_take_effect(&pkg);

    // The README documents every setter.
    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(readme.contains("gcr.io/kpt-fn/apply-setters:v0.2.0 -- namespace="));
    for (name, _) in SETTERS {
        assert!(readme.contains(&format!("`{name}`")), "{name}");
    }
}

/// The scalars of `node` with the key they are under.
fn walk<'a>(node: &'a Yaml, key: &str, out: &mut Vec<(String, &'a str)>) {
    match node {
        Yaml::Scalar { value, .. } => out.push((key.to_string(), value)),
        Yaml::Seq(items) => items.iter().for_each(|i| walk(i, key, out)),
        Yaml::Map(entries) => {
            for (k, v) in entries {
                walk(v, k.as_str().unwrap_or("?"), out);
            }
        }
    }
}

/// Every scalar that is (or embeds) a namespace now names NEW.
fn namespace_setter_names_new_everywhere(pkg: &Package) {
    for (rel, r) in &pkg.resources {
        let mut scalars = Vec::new();
        walk(r, "", &mut scalars);
        for (key, value) in scalars {
            let old_ns = value == NAMESPACE
                || value.contains(&format!(".{NAMESPACE}."))
                || value.ends_with(&format!(".{NAMESPACE}"))
                || value.starts_with(&format!("{NAMESPACE}/"));
            assert!(
                !old_ns
                    || key == "app.kubernetes.io/part-of"
                    || key == "multus.linkerd.io/namespace-owner",
                "{rel}: {key}: {value:?} still names the namespace {NAMESPACE} after the setter"
            );
        }
    }
    assert_eq!(
        pkg.get("Namespace", NEW).str_at(&["metadata", "name"]),
        Some(NEW)
    );
    for (_, r) in &pkg.resources {
        let kind = r.str_at(&["kind"]).unwrap();
        let namespaced = !matches!(
            kind,
            "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "MutatingWebhookConfiguration"
        );
        let ns = r.str_at(&["metadata", "namespace"]);
        if namespaced {
            assert_eq!(ns, Some(NEW), "{:?}", r.id());
        } else {
            assert_eq!(ns, None, "{:?} is cluster-scoped", r.id());
        }
    }
    let w = pkg.webhook();
    assert_eq!(
        w.str_at(&["clientConfig", "service", "namespace"]),
        Some(NEW)
    );
    assert!(
        strings(
            w.at(&["namespaceSelector", "matchExpressions"])
                .unwrap()
                .seq()[0]
                .get("values")
        )
        .contains(&NEW.to_string())
    );
    assert_eq!(
        pkg.get("MutatingWebhookConfiguration", NAME)
            .annotation("cert-manager.io/inject-ca-from"),
        Some(format!("{NEW}/{NAME}").as_str())
    );
    assert_eq!(
        pkg.get("ClusterRoleBinding", NAME)
            .get("subjects")
            .unwrap()
            .seq()[0]
            .str_at(&["namespace"]),
        Some(NEW)
    );
    let dns = strings(pkg.get("Certificate", NAME).at(&["spec", "dnsNames"]));
    assert!(
        dns.contains(&format!("{NAME}.{NEW}.svc.cluster.local")),
        "{dns:?}"
    );
}

/// The other setters.
fn other_setters_take_effect(pkg: &Package) {
    // The other setters.
    assert_eq!(
        pkg.pod_spec().str_at(&["priorityClassName"]),
        Some("webhooks")
    );
    assert_eq!(pkg.deployment().str_at(&["spec", "replicas"]), Some("3"));
    assert_eq!(pkg.webhook().str_at(&["failurePolicy"]), Some("Ignore"));
    // Every container runs the image of the setter.
    for key in ["containers", "initContainers"] {
        for container in pkg.pod_spec().get(key).map(Yaml::seq).unwrap_or_default() {
            assert_eq!(container.str_at(&["image"]), Some(SETTERS[0].1), "{key}");
        }
    }
    let excluded = pkg
        .webhook()
        .get("matchConditions")
        .unwrap()
        .seq()
        .iter()
        .find(|c| c.str_at(&["name"]) == Some("not-excluded-namespace"))
        .and_then(|c| c.str_at(&["expression"]))
        .unwrap();
    assert!(
        excluded.starts_with("!'[openshift, openshift-*]'.replace("),
        "{excluded}"
    );
    for (flag, value) in [
        ("--linkerd-namespace", "l5d"),
        ("--missing-nad", "attach"),
        ("--network-resources", "/etc/nr.yaml"),
        ("--skip-secondary-subnets", "enabled"),
        ("--cluster-cidrs", "[10.244.0.0/16, 10.96.0.0/12]"),
        ("--protected-cidrs", "[192.168.0.0/16, 203.0.113.0/24]"),
    ] {
        assert_eq!(pkg.arg(flag).as_deref(), Some(value), "{flag}");
    }
    let ingress = pkg
        .get("NetworkPolicy", NAME)
        .at(&["spec", "ingress"])
        .unwrap()
        .seq();
    let blocks: Vec<&str> = ingress[0]
        .get("from")
        .unwrap()
        .seq()
        .iter()
        .map(|f| f.str_at(&["ipBlock", "cidr"]).unwrap())
        .collect();
    assert_eq!(blocks, ["10.0.0.0/24", "fd00::/64"]);
    let selector = &ingress[1].get("from").unwrap().seq()[0]
        .at(&["namespaceSelector", "matchExpressions"])
        .unwrap()
        .seq()[0];
    assert_eq!(
        strings(selector.get("values")),
        ["prometheus", "openshift-monitoring"]
    );
}

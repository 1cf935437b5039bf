//! The opt-in additions to the webhook package: network resources (reading NADs), the
//! NAD controller (its own Deployment and account) and its restarts (their rights, and the
//! policy that cuts them).

use super::*;

// ------------------------------------------------------------------------------------------
// deploy-network-resources/: the opt-in addition for --network-resources.

const NR_NAME: &str = "linkerd-multus-webhook-network-resources";

const NR_CONFIG_MAP: &str = "linkerd-multus-network-resources";

fn network_resources_package() -> Package {
    addition("deploy-network-resources")
}

/// The resources of an opt-in addition to the webhook package: `dir`'s YAML files.
fn addition(dir: &str) -> Package {
    let files: Vec<(String, String)> = snapshot(&repo_path(dir))
        .into_iter()
        .filter(|(rel, _)| rel.ends_with(".yaml"))
        .map(|(rel, bytes)| (rel, String::from_utf8(bytes).expect("UTF-8")))
        .collect();
    Package::from_files(&files)
}

#[test]
fn network_resources_package_reads_nads_and_nothing_more() {
    // The webhook package alone does not run the rules; it reads NADs already
    // (the missing-NAD check), and the addition grants no more than that.
    let base = Package::load();
    assert_eq!(base.arg("--network-resources").as_deref(), Some(""));
    let pkg = network_resources_package();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    assert_eq!(
        ids,
        [
            id("ClusterRole", "", NR_NAME),
            id("ClusterRoleBinding", "", NR_NAME),
            id("ConfigMap", NAMESPACE, NR_CONFIG_MAP),
        ]
        .into_iter()
        .collect()
    );
    let role = pkg.get("ClusterRole", NR_NAME);
    let rules = role.get("rules").expect("rules").seq();
    assert_eq!(rules.len(), 1, "one rule");
    let rule = &rules[0];
    assert_eq!(rule.keys(), vec!["apiGroups", "resources", "verbs"]);
    assert_eq!(strings(rule.get("apiGroups")), ["k8s.cni.cncf.io"]);
    assert_eq!(
        strings(rule.get("resources")),
        ["network-attachment-definitions"]
    );
    assert_eq!(strings(rule.get("verbs")), ["get", "list", "watch"]);
    let binding = pkg.get("ClusterRoleBinding", NR_NAME);
    assert_eq!(binding.str_at(&["roleRef", "kind"]), Some("ClusterRole"));
    assert_eq!(binding.str_at(&["roleRef", "name"]), Some(NR_NAME));
    let subjects = binding.get("subjects").unwrap().seq();
    assert_eq!(subjects.len(), 1);
    // The webhook's own ServiceAccount, as the base package defines it.
    base.get("ServiceAccount", NAME);
    assert_eq!(subjects[0].str_at(&["kind"]), Some("ServiceAccount"));
    assert_eq!(subjects[0].str_at(&["name"]), Some(NAME));
    assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
    for (rel, r) in &pkg.resources {
        assert!(
            round_trip_any(r),
            "deploy-network-resources/{rel}: {:?}",
            r.id()
        );
    }
}

// ------------------------------------------------------------------------------------------
// deploy-nad-controller/: the NAD controller apart from the webhook, with its own account.

/// `items` as owned strings, the way [`rules_of`] gives them.
fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const CONTROLLER: &str = "linkerd-multus-nad-controller";

fn nad_controller_package() -> Package {
    addition("deploy-nad-controller")
}

/// Each rule of a role: API groups, resources, resource names and verbs.
fn rules_of(role: &Yaml) -> Vec<[Vec<String>; 4]> {
    role.get("rules")
        .expect("rules")
        .seq()
        .iter()
        .map(|rule| {
            [
                strings(rule.get("apiGroups")),
                strings(rule.get("resources")),
                strings(rule.get("resourceNames")),
                strings(rule.get("verbs")),
            ]
        })
        .collect()
}

#[test]
fn nad_controller_rights_are_opt_in_its_own_and_exactly_what_it_does() {
    webhook_package_alone_writes_nothing();
    let pkg = nad_controller_package();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    let lease = format!("{CONTROLLER}-lease");
    let events = format!("{CONTROLLER}-events");
    assert_eq!(
        ids,
        BTreeSet::from([
            id("ServiceAccount", NAMESPACE, CONTROLLER),
            id("ClusterRole", "", CONTROLLER),
            id("ClusterRoleBinding", "", CONTROLLER),
            id("Role", "linkerd-cni", CONTROLLER),
            id("RoleBinding", "linkerd-cni", CONTROLLER),
            id("Role", "default", &events),
            id("RoleBinding", "default", &events),
            id("Role", NAMESPACE, &lease),
            id("RoleBinding", NAMESPACE, &lease),
            id("Deployment", NAMESPACE, CONTROLLER),
            id("Service", NAMESPACE, &format!("{CONTROLLER}-metrics")),
            id("NetworkPolicy", NAMESPACE, CONTROLLER),
            id("PodDisruptionBudget", NAMESPACE, CONTROLLER),
        ])
    );
    // Namespaces read and NADs written cluster-wide; Events only where it writes them.
    assert_eq!(
        rules_of(pkg.get("ClusterRole", CONTROLLER)),
        [
            [
                v(&[""]),
                v(&["namespaces"]),
                v(&[]),
                v(&["get", "list", "watch"]),
            ],
            [
                v(&["k8s.cni.cncf.io"]),
                v(&["network-attachment-definitions"]),
                v(&[]),
                v(&["create", "patch", "delete", "get", "list", "watch"]),
            ]
        ]
    );
    roles_read_the_config_map_and_hold_the_lease(&pkg, &lease);
    // Every binding names the controller's own ServiceAccount, never the webhook's.
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for binding in pkg.of_kind(kind) {
            let subjects = binding.get("subjects").unwrap().seq();
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].str_at(&["name"]), Some(CONTROLLER));
            assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
        }
    }
    the_controller_runs_as_its_account_on_its_ops_port_alone(&pkg);
    // The Lease is the one the controller uses by default.
    let out = run(Command::new(bin()).args(["controller", "--help"]));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains(&format!("[default: {CONTROLLER}]")), "{help}");
    for (rel, r) in &pkg.resources {
        assert!(
            round_trip_any(r),
            "deploy-nad-controller/{rel}: {:?}",
            r.id()
        );
    }
}

/// The controller's Deployment: `controller`, as its own ServiceAccount, listening on the
/// ops port alone (which its NetworkPolicy opens to the metrics namespaces only), naming its
/// Lease's namespace and its identity from the downward API.
fn the_controller_runs_as_its_account_on_its_ops_port_alone(pkg: &Package) {
    let deployment = pkg.get("Deployment", CONTROLLER);
    let spec = deployment.at(&["spec", "template", "spec"]).unwrap();
    assert_eq!(spec.str_at(&["serviceAccountName"]), Some(CONTROLLER));
    let containers = spec.get("containers").unwrap().seq();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(
        strings(container.get("args")).first().map(String::as_str),
        Some("controller")
    );
    let ports: Vec<(Option<&str>, Option<&str>)> = container
        .get("ports")
        .unwrap()
        .seq()
        .iter()
        .map(|p| (p.str_at(&["name"]), p.str_at(&["containerPort"])))
        .collect();
    assert_eq!(ports, [(Some("ops"), Some("9090"))]);
    assert!(spec.get("volumes").is_none(), "it mounts nothing");
    let env = container.get("env").expect("env").seq();
    let fields: Vec<(Option<&str>, Option<&str>)> = env
        .iter()
        .map(|e| {
            (
                e.str_at(&["name"]),
                e.str_at(&["valueFrom", "fieldRef", "fieldPath"]),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (Some("POD_NAMESPACE"), Some("metadata.namespace")),
            (Some("POD_NAME"), Some("metadata.name")),
        ]
    );
    let ingress = pkg
        .get("NetworkPolicy", CONTROLLER)
        .at(&["spec", "ingress"])
        .unwrap()
        .seq();
    assert_eq!(ingress.len(), 1);
    assert_eq!(
        ingress[0].get("ports").unwrap().seq()[0].str_at(&["port"]),
        Some("ops")
    );
}

/// The webhook package alone writes nothing and holds no Lease: its account only reads,
/// and a pod it attaches in a namespace without the NAD is denied (`--missing-nad=deny`,
/// `attach` with the NAD controller).
fn webhook_package_alone_writes_nothing() {
    let base = Package::load();
    assert_eq!(base.arg("--missing-nad").as_deref(), Some("deny"));
    assert_eq!(base.arg("--manage-nads"), None);
    for role in base.of_kind("ClusterRole") {
        for [_, _, _, verbs] in rules_of(role) {
            assert_eq!(verbs, v(&["get", "list", "watch"]));
        }
    }
    assert!(base.container().get("env").is_none(), "no Lease to name");
}

/// The Roles: the one ConfigMap read by name, the Events in the two namespaces the
/// controller writes them to (the ConfigMap's, and `default` for those on Namespaces, as
/// src/controller/events.rs places them), and the Lease.
fn roles_read_the_config_map_and_hold_the_lease(pkg: &Package, lease: &str) {
    let events = [
        v(&["events.k8s.io"]),
        v(&["events"]),
        v(&[]),
        v(&["create", "patch"]),
    ];
    // The one ConfigMap by name: a Role in the CNI namespace, not a ClusterRole.
    let config_map_role = pkg
        .of_kind("Role")
        .into_iter()
        .find(|r| r.str_at(&["metadata", "name"]) == Some(CONTROLLER))
        .unwrap();
    assert_eq!(
        rules_of(config_map_role),
        [
            [
                v(&[""]),
                v(&["configmaps"]),
                v(&["linkerd-cni-config"]),
                v(&["get", "list", "watch"]),
            ],
            events.clone(),
        ]
    );
    let events_role = pkg.get("Role", &format!("{CONTROLLER}-events"));
    assert_eq!(
        events_role.str_at(&["metadata", "namespace"]),
        Some("default")
    );
    assert_eq!(rules_of(events_role), [events]);
    let lease_role = pkg
        .of_kind("Role")
        .into_iter()
        .find(|r| r.str_at(&["metadata", "name"]) == Some(lease))
        .unwrap();
    assert_eq!(
        rules_of(lease_role),
        [
            [
                v(&["coordination.k8s.io"]),
                v(&["leases"]),
                v(&[]),
                v(&["create"])
            ],
            [
                v(&["coordination.k8s.io"]),
                v(&["leases"]),
                v(&[CONTROLLER]),
                v(&["get", "update"]),
            ],
        ]
    );
}

/// The ConfigMap holds a settings file the webhook reads, at the path the README's
/// Deployment edit mounts and passes, with a flag the webhook knows.
#[test]
fn network_resources_recipe_agrees_with_the_webhook() {
    let pkg = network_resources_package();
    let config_map = pkg.get("ConfigMap", NR_CONFIG_MAP);
    let file = config_map
        .str_at(&["data", "network-resources.yaml"])
        .expect("data key network-resources.yaml");
    use linkerd_multus::krm::function_config::SettingsKind;
    let settings = linkerd_multus::network_resources::settings::Settings::from_object(
        &linkerd_multus::yaml::parse_document(file).expect("the settings file is YAML"),
    )
    .expect("the settings file is what --network-resources reads");
    assert_eq!(
        settings,
        linkerd_multus::network_resources::settings::Settings::default(),
        "the shipped settings are the defaults, spelled out"
    );
    let readme = std::fs::read_to_string(repo_path("deploy-network-resources/README.md")).unwrap();
    for want in [
        "- --network-resources=/etc/linkerd-multus/network-resources/network-resources.yaml",
        "mountPath: /etc/linkerd-multus/network-resources",
        &format!("name: {NR_CONFIG_MAP}"),
    ] {
        assert!(readme.contains(want), "README.md lacks {want:?}");
    }
    let out = run(Command::new(bin()).args(["webhook", "--help"]));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.split_whitespace().any(|w| w == "--network-resources"),
        "{help}"
    );
    // The Kptfile of the addition is local config, without a pipeline, like the package's.
    let kptfile = parse_yaml(
        &std::fs::read_to_string(repo_path("deploy-network-resources/Kptfile")).unwrap(),
    )
    .expect("Kptfile parses");
    assert!(kptfile.get("pipeline").is_none());
    assert_eq!(
        kptfile.str_at(&[
            "metadata",
            "annotations",
            "config.kubernetes.io/local-config"
        ]),
        Some("true")
    );
}

// ------------------------------------------------------------------------------------------
// deploy-restarts/: the restarts' rights, bound to the controller's account, and the policy
// that cuts them to what the restarts do.

const RESTARTS: &str = "linkerd-multus-restarts";

/// The CEL list literal of `variables.<name>` of the policy: its strings.
fn cel_list(policy: &Yaml, name: &str) -> Vec<String> {
    let expression = policy
        .at(&["spec", "variables"])
        .unwrap()
        .seq()
        .iter()
        .find(|v| v.str_at(&["name"]) == Some(name))
        .and_then(|v| v.str_at(&["expression"]))
        .unwrap_or_else(|| panic!("variable {name}"));
    let inner = expression
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{name} is a list literal: {expression}"));
    inner
        .split(',')
        .map(|item| item.trim().trim_matches('\'').to_string())
        .collect()
}

#[test]
fn restarts_rights_are_the_controller_s_and_the_policy_names_the_reserved_namespaces() {
    let pkg = addition("deploy-restarts");
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str| (k.to_string(), String::new(), RESTARTS.to_string());
    assert_eq!(
        ids,
        BTreeSet::from([
            id("ClusterRole"),
            id("ClusterRoleBinding"),
            id("ValidatingAdmissionPolicy"),
            id("ValidatingAdmissionPolicyBinding"),
        ])
    );
    let subjects = pkg
        .get("ClusterRoleBinding", RESTARTS)
        .get("subjects")
        .unwrap()
        .seq();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].str_at(&["name"]), Some(CONTROLLER));
    let policy = pkg.get("ValidatingAdmissionPolicy", RESTARTS);
    assert_eq!(policy.str_at(&["spec", "failurePolicy"]), Some("Fail"));
    let conditions = policy.at(&["spec", "matchConditions"]).unwrap().seq();
    assert_eq!(
        conditions[0].str_at(&["expression"]),
        Some(
            "request.userInfo.username == 'system:serviceaccount:linkerd-multus:linkerd-multus-nad-controller'"
        ),
        "the controller's account alone"
    );
    // One list with install's refusals: src/k8s/reserved.rs.
    use linkerd_multus::k8s::reserved::{NAMES, PREFIXES};
    let names: Vec<&str> = NAMES.iter().map(|(name, _)| *name).collect();
    let prefixes: Vec<&str> = PREFIXES.iter().map(|(prefix, _)| *prefix).collect();
    assert_eq!(cel_list(policy, "reservedNames"), names);
    assert_eq!(cel_list(policy, "reservedPrefixes"), prefixes);
    assert_eq!(
        cel_list(policy, "settingsNamespaces"),
        ["linkerd", "linkerd-cni"],
        "the setters linkerd-namespace and cni-namespace at their defaults"
    );
    let binding = pkg.get("ValidatingAdmissionPolicyBinding", RESTARTS);
    assert_eq!(binding.str_at(&["spec", "policyName"]), Some(RESTARTS));
    assert_eq!(
        strings(binding.at(&["spec", "validationActions"])),
        ["Deny"]
    );
    assert!(
        binding.at(&["spec", "matchResources"]).is_none(),
        "every namespace"
    );
    for (rel, r) in &pkg.resources {
        assert!(round_trip_any(r), "deploy-restarts/{rel}: {:?}", r.id());
    }
}

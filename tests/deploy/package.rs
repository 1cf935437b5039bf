//! The webhook's package, resource by resource: what it holds, valid Kubernetes objects,
//! the Deployment, PodDisruptionBudget, RBAC, pod security, probes and Service.

use super::*;

// ------------------------------------------------------------------------------------------
// The package.

#[test]
fn package_holds_exactly_the_expected_resources() {
    let pkg = Package::load();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    let want: BTreeSet<_> = [
        id("Kptfile", "", NAME),
        id("Namespace", "", NAMESPACE),
        id("ServiceAccount", NAMESPACE, NAME),
        id("ClusterRole", "", NAME),
        id("ClusterRoleBinding", "", NAME),
        id("Deployment", NAMESPACE, NAME),
        id("PodDisruptionBudget", NAMESPACE, NAME),
        id("Service", NAMESPACE, NAME),
        id("Service", NAMESPACE, "linkerd-multus-webhook-metrics"),
        id("NetworkPolicy", NAMESPACE, NAME),
        id("MutatingWebhookConfiguration", "", NAME),
        id("Issuer", NAMESPACE, "linkerd-multus-webhook-selfsigned"),
        id("Certificate", NAMESPACE, "linkerd-multus-webhook-ca"),
        id("Issuer", NAMESPACE, "linkerd-multus-webhook-ca"),
        id("Certificate", NAMESPACE, NAME),
    ]
    .into_iter()
    .collect();
    // The Kptfile is not a .yaml file; read it on its own.
    let kptfile = parse_yaml(&std::fs::read_to_string(repo_path("deploy/Kptfile")).unwrap())
        .expect("deploy/Kptfile parses");
    let mut have = ids;
    have.insert(kptfile.id());
    assert_eq!(have, want);
    // The cert-manager objects, and only they, are in cert-manager/ (option 2 deletes it).
    for (rel, r) in &pkg.resources {
        let cert_manager = r
            .str_at(&["apiVersion"])
            .is_some_and(|v| v.starts_with("cert-manager.io/"));
        assert_eq!(
            cert_manager,
            rel.starts_with("cert-manager/"),
            "{rel}: {:?}",
            r.id()
        );
    }
}

/// Every built-in resource of the package is a valid object of its Kubernetes API (the
/// cert-manager resources have no types here; the tests below check their fields).
#[test]
fn resources_are_valid_kubernetes_objects() {
    use k8s_openapi::api::{admissionregistration, apps, core, networking, policy, rbac};
    let pkg = Package::load();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (rel, r) in &pkg.resources {
        let problem = match r.str_at(&["kind"]).unwrap() {
            "Namespace" => round_trip::<core::v1::Namespace>(r),
            "ServiceAccount" => round_trip::<core::v1::ServiceAccount>(r),
            "Service" => round_trip::<core::v1::Service>(r),
            "Deployment" => round_trip::<apps::v1::Deployment>(r),
            "PodDisruptionBudget" => round_trip::<policy::v1::PodDisruptionBudget>(r),
            "ClusterRole" => round_trip::<rbac::v1::ClusterRole>(r),
            "ClusterRoleBinding" => round_trip::<rbac::v1::ClusterRoleBinding>(r),
            "NetworkPolicy" => round_trip::<networking::v1::NetworkPolicy>(r),
            "MutatingWebhookConfiguration" => {
                round_trip::<admissionregistration::v1::MutatingWebhookConfiguration>(r)
            }
            "Issuer" | "Certificate" => continue,
            other => panic!("{rel}: no check for kind {other}"),
        };
        checked += 1;
        problems.extend(problem.map(|p| format!("deploy/{rel}: {p}")));
    }
    assert_eq!(checked, 10);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kptfile_has_no_pipeline() {
    // CI has no image registry, and the repository's `kpt fn render` walks this package.
    let kptfile =
        parse_yaml(&std::fs::read_to_string(repo_path("deploy/Kptfile")).unwrap()).unwrap();
    assert_eq!(kptfile.str_at(&["apiVersion"]), Some("kpt.dev/v1"));
    assert!(
        kptfile.get("pipeline").is_none(),
        "deploy/Kptfile must have no pipeline"
    );
    assert_eq!(
        kptfile.annotation("config.kubernetes.io/local-config"),
        Some("true")
    );
}

#[test]
fn deployment_is_highly_available() {
    let pkg = Package::load();
    let d = pkg.deployment();
    assert_eq!(number(d, &["spec", "replicas"]), 2);
    assert_eq!(
        d.str_at(&["spec", "strategy", "type"]),
        Some("RollingUpdate")
    );
    assert_eq!(
        d.str_at(&["spec", "strategy", "rollingUpdate", "maxUnavailable"]),
        Some("0")
    );
    assert_eq!(
        d.str_at(&["spec", "strategy", "rollingUpdate", "maxSurge"]),
        Some("1")
    );
    let selector = d.at(&["spec", "selector", "matchLabels"]).unwrap();
    let pod_labels = d.at(&["spec", "template", "metadata", "labels"]).unwrap();
    assert!(
        selects(selector, pod_labels),
        "the Deployment selects its own pods"
    );

    // Never two replicas on one node while another can run one: a hard
    // topology spread on the hostname, counting only the nodes they tolerate.
    let spec = pkg.pod_spec();
    let spread = spec
        .get("topologySpreadConstraints")
        .map(Yaml::seq)
        .unwrap_or_default();
    let by_host = spread
        .iter()
        .find(|c| {
            c.str_at(&["topologyKey"]) == Some("kubernetes.io/hostname")
                && c.at(&["labelSelector", "matchLabels"])
                    .is_some_and(|s| selects(s, pod_labels))
        })
        .expect("a topology spread constraint on the hostname");
    assert_eq!(number(by_host, &["maxSkew"]), 1);
    assert_eq!(
        by_host.str_at(&["whenUnsatisfiable"]),
        Some("DoNotSchedule"),
        "replicas may share a node"
    );
    assert_eq!(by_host.str_at(&["nodeTaintsPolicy"]), Some("Honor"));
    // Scheduled before ordinary workloads, with a class users can set.
    assert_eq!(
        spec.str_at(&["priorityClassName"]),
        Some("system-cluster-critical")
    );

    // The grace period outlasts the shutdown delay plus the drain timeout.
    let delay = seconds(
        &pkg.arg("--shutdown-delay")
            .expect("--shutdown-delay in args"),
    );
    let drain = pkg.arg("--drain-timeout").map_or(20.0, |d| seconds(&d));
    let grace = number(spec, &["terminationGracePeriodSeconds"]) as f64;
    assert!(
        grace > delay + drain,
        "terminationGracePeriodSeconds {grace} <= shutdown-delay {delay} + drain-timeout {drain}"
    );
    assert_eq!(pkg.arg("--log-format").as_deref(), Some("json"));
    assert_eq!(
        spec.str_at(&["serviceAccountName"]),
        Some(NAME),
        "the pod runs as the package's ServiceAccount"
    );
}

#[test]
fn pod_disruption_budget_selects_the_webhook_pods() {
    let pkg = Package::load();
    let pdb = pkg.get("PodDisruptionBudget", NAME);
    assert_eq!(pdb.str_at(&["apiVersion"]), Some("policy/v1"));
    // maxUnavailable, not minAvailable: a drain is never blocked, not even with one replica.
    assert_eq!(number(pdb, &["spec", "maxUnavailable"]), 1);
    assert!(pdb.at(&["spec", "minAvailable"]).is_none());
    let pod_labels = pkg
        .deployment()
        .at(&["spec", "template", "metadata", "labels"])
        .unwrap();
    assert!(selects(
        pdb.at(&["spec", "selector", "matchLabels"])
            .expect("PDB selector"),
        pod_labels
    ));
    assert_eq!(
        pdb.str_at(&["metadata", "namespace"]),
        pkg.deployment().str_at(&["metadata", "namespace"])
    );
}

#[test]
fn rbac_is_exactly_read_access_to_namespaces_and_nads() {
    let pkg = Package::load();
    assert!(pkg.of_kind("Role").is_empty() && pkg.of_kind("RoleBinding").is_empty());
    assert_eq!(pkg.of_kind("ClusterRole").len(), 1);
    assert_eq!(pkg.of_kind("ClusterRoleBinding").len(), 1);
    let role = pkg.get("ClusterRole", NAME);
    let rules = role.get("rules").expect("rules").seq();
    let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = rules
        .iter()
        .map(|rule| {
            assert_eq!(
                rule.keys(),
                vec!["apiGroups", "resources", "verbs"],
                "no resourceNames, nonResourceURLs or other keys"
            );
            (
                strings(rule.get("apiGroups")),
                strings(rule.get("resources")),
                strings(rule.get("verbs")),
            )
        })
        .collect();
    let read = || vec!["get".to_string(), "list".into(), "watch".into()];
    assert_eq!(
        rules,
        [
            (vec!["".to_string()], vec!["namespaces".to_string()], read()),
            (
                vec!["k8s.cni.cncf.io".to_string()],
                vec!["network-attachment-definitions".to_string()],
                read()
            ),
        ]
    );
    assert!(role.get("aggregationRule").is_none());

    let binding = pkg.get("ClusterRoleBinding", NAME);
    assert_eq!(binding.str_at(&["roleRef", "kind"]), Some("ClusterRole"));
    assert_eq!(binding.str_at(&["roleRef", "name"]), Some(NAME));
    let subjects = binding.get("subjects").unwrap().seq();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].str_at(&["kind"]), Some("ServiceAccount"));
    assert_eq!(subjects[0].str_at(&["name"]), Some(NAME));
    assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
    pkg.get("ServiceAccount", NAME);
}

#[test]
fn pod_is_locked_down_without_pinning_a_uid() {
    let pkg = Package::load();
    let spec = pkg.pod_spec();
    let c = pkg.container();
    assert_eq!(
        spec.str_at(&["securityContext", "runAsNonRoot"]),
        Some("true")
    );
    assert_eq!(
        spec.str_at(&["securityContext", "seccompProfile", "type"]),
        Some("RuntimeDefault")
    );
    let sc = c.get("securityContext").expect("container securityContext");
    assert_eq!(sc.str_at(&["runAsNonRoot"]), Some("true"));
    assert_eq!(sc.str_at(&["readOnlyRootFilesystem"]), Some("true"));
    assert_eq!(sc.str_at(&["allowPrivilegeEscalation"]), Some("false"));
    assert_eq!(strings(sc.at(&["capabilities", "drop"])), ["ALL"]);
    assert!(sc.at(&["capabilities", "add"]).is_none());
    assert_eq!(
        sc.str_at(&["seccompProfile", "type"]),
        Some("RuntimeDefault")
    );
    assert!(
        sc.get("privileged")
            .is_none_or(|p| p.as_str() == Some("false"))
    );
    // OpenShift's restricted SCC assigns the UID: none may be pinned, and the manifest says why.
    for (what, ctx) in [
        ("pod", spec.get("securityContext")),
        ("container", Some(sc)),
    ] {
        let ctx = ctx.unwrap();
        for key in ["runAsUser", "runAsGroup", "fsGroup"] {
            assert!(ctx.get(key).is_none(), "{what} securityContext pins {key}");
        }
    }
    let text = std::fs::read_to_string(repo_path("deploy/deployment.yaml")).unwrap();
    assert!(
        text.contains("OpenShift") && text.contains("runAsUser"),
        "deployment.yaml should say why runAsUser is not set"
    );
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(spec.get(key).is_none(), "{key} set");
    }

    // Small requests and a memory limit.
    let res = c.get("resources").expect("resources");
    assert!(res.str_at(&["requests", "cpu"]).is_some());
    assert!(res.str_at(&["requests", "memory"]).is_some());
    assert_eq!(res.str_at(&["limits", "memory"]), Some("64Mi"));
}

#[test]
fn probes_ports_and_tls_files_agree() {
    let pkg = Package::load();
    let c = pkg.container();
    assert_eq!(
        c.str_at(&["image"]),
        Some("ghcr.io/linkerd-multus/linkerd-multus:v0.1.0")
    );
    assert_eq!(pkg.args().first().map(String::as_str), Some("webhook"));
    let ports = pkg.container_ports();
    assert_eq!(
        ports,
        [
            ("https".to_string(), "8443".to_string()),
            ("ops".to_string(), "9090".to_string())
        ]
    );
    let listen = pkg.arg("--listen").unwrap_or_else(|| "[::]:8443".into());
    let ops = pkg
        .arg("--ops-listen")
        .unwrap_or_else(|| "[::]:9090".into());
    assert_eq!(port_of(&listen), "8443", "--listen and the https port");
    assert_eq!(port_of(&ops), "9090", "--ops-listen and the ops port");
    // Every address of both families: the pod IP, on IPv4, IPv6 and dual-stack clusters.
    assert_eq!(listen, "[::]:8443");
    assert_eq!(ops, "[::]:9090");

    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let p = c.get(probe).unwrap_or_else(|| panic!("no {probe}"));
        assert_eq!(p.str_at(&["httpGet", "path"]), Some(path), "{probe}");
        let port = p.str_at(&["httpGet", "port"]).unwrap();
        assert!(port == "ops" || port == "9090", "{probe} on port {port}");
        assert!(p.str_at(&["httpGet", "scheme"]).is_none_or(|s| s == "HTTP"));
    }

    // --tls-cert and --tls-key are files of the TLS Secret's volume, mounted without subPath
    // (a subPath mount never sees the Secret's updates).
    let volume = pkg
        .pod_spec()
        .get("volumes")
        .unwrap()
        .seq()
        .iter()
        .find(|v| v.str_at(&["secret", "secretName"]) == Some(TLS_SECRET))
        .expect("a volume of the TLS Secret")
        .str_at(&["name"])
        .unwrap()
        .to_string();
    let mount = c
        .get("volumeMounts")
        .unwrap()
        .seq()
        .iter()
        .find(|m| m.str_at(&["name"]) == Some(volume.as_str()))
        .expect("the TLS volume is mounted");
    assert!(
        mount.get("subPath").is_none(),
        "TLS volume mounted with subPath"
    );
    assert_eq!(mount.str_at(&["readOnly"]), Some("true"));
    let dir = mount.str_at(&["mountPath"]).unwrap();
    assert_eq!(pkg.arg("--tls-cert"), Some(format!("{dir}/tls.crt")));
    assert_eq!(pkg.arg("--tls-key"), Some(format!("{dir}/tls.key")));
}

#[test]
fn service_matches_the_container_ports() {
    let pkg = Package::load();
    let svc = pkg.get("Service", NAME);
    let pod_labels = pkg.pod_labels();
    assert!(selects(svc.at(&["spec", "selector"]).unwrap(), pod_labels));
    let container_ports = pkg.container_ports();
    // Service port -> the container port number its targetPort names or gives.
    let target = |port: &str| -> (String, String) {
        let p = svc
            .at(&["spec", "ports"])
            .unwrap()
            .seq()
            .iter()
            .find(|p| p.str_at(&["port"]) == Some(port))
            .unwrap_or_else(|| panic!("no Service port {port}"));
        let t = p.str_at(&["targetPort"]).unwrap_or(port);
        let number = container_ports
            .iter()
            .find(|(name, number)| name == t || number == t)
            .map(|(_, number)| number.clone())
            .unwrap_or_else(|| panic!("Service port {port} targets {t}, not a container port"));
        (p.str_at(&["name"]).unwrap_or("").to_string(), number)
    };
    assert_eq!(target("443"), ("https".to_string(), "8443".to_string()));
    assert_eq!(
        svc.at(&["spec", "ports"]).unwrap().seq().len(),
        1,
        "the API server's Service carries the webhook's port only, not /metrics"
    );
    // The ops port has a headless Service of its own, one scrape target per replica.
    let metrics = pkg.get("Service", "linkerd-multus-webhook-metrics");
    assert!(selects(
        metrics.at(&["spec", "selector"]).unwrap(),
        pod_labels
    ));
    assert_eq!(metrics.str_at(&["spec", "clusterIP"]), Some("None"));
    let ports = metrics.at(&["spec", "ports"]).unwrap().seq();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].str_at(&["port"]), Some("9090"));
    assert_eq!(ports[0].str_at(&["targetPort"]), Some("ops"));
}

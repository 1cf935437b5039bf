//! How the API server reaches the webhook: the NetworkPolicy, the
//! MutatingWebhookConfiguration, its certificate, the README's recipe without cert-manager and
//! the Deployment's flags.

use super::*;

/// The NetworkPolicy selects the webhook's pods and admits only what they
/// serve: the API server to the webhook's port (from any address, narrowed by
/// setters), and the monitoring namespace to the ops port.
#[test]
fn network_policy_admits_the_api_server_and_the_scraper_only() {
    let pkg = Package::load();
    let policy = pkg.get("NetworkPolicy", NAME);
    assert!(selects(
        policy.at(&["spec", "podSelector", "matchLabels"]).unwrap(),
        pkg.pod_labels()
    ));
    assert_eq!(strings(policy.at(&["spec", "policyTypes"])), ["Ingress"]);
    let rules = policy.at(&["spec", "ingress"]).unwrap().seq();
    let ports = |rule: &Yaml| -> Vec<String> {
        rule.get("ports")
            .unwrap()
            .seq()
            .iter()
            .map(|p| p.str_at(&["port"]).unwrap().to_string())
            .collect()
    };
    assert_eq!(rules.len(), 2);
    assert_eq!(ports(&rules[0]), ["https"]);
    let blocks: Vec<&str> = rules[0]
        .get("from")
        .unwrap()
        .seq()
        .iter()
        .map(|f| f.str_at(&["ipBlock", "cidr"]).unwrap())
        .collect();
    assert_eq!(blocks, ["0.0.0.0/0", "::/0"]);
    assert_eq!(ports(&rules[1]), ["ops"]);
    let from = rules[1].get("from").unwrap().seq();
    assert_eq!(from.len(), 1);
    let expressions = from[0]
        .at(&["namespaceSelector", "matchExpressions"])
        .unwrap()
        .seq();
    assert_eq!(expressions.len(), 1);
    assert_eq!(
        expressions[0].str_at(&["key"]),
        Some("kubernetes.io/metadata.name")
    );
    assert_eq!(expressions[0].str_at(&["operator"]), Some("In"));
    assert_eq!(strings(expressions[0].get("values")), ["monitoring"]);
    // The named ports are the container's.
    let names: Vec<String> = pkg.container_ports().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["https", "ops"]);
    let text = std::fs::read_to_string(repo_path("deploy/networkpolicy.yaml")).unwrap();
    for setter in [
        "${api-server-cidr}",
        "${api-server-cidr-ipv6}",
        "${metrics-namespaces}",
    ] {
        assert!(text.contains(&format!("# kpt-set: {setter}")), "{setter}");
    }
}

#[test]
fn webhook_configuration_is_safe() {
    let pkg = Package::load();
    let mwc = pkg.get("MutatingWebhookConfiguration", NAME);
    assert_eq!(
        mwc.str_at(&["apiVersion"]),
        Some("admissionregistration.k8s.io/v1")
    );
    let w = pkg.webhook();
    let name = w.str_at(&["name"]).unwrap();
    assert!(
        name.split('.').count() >= 3,
        "webhook name {name} is not fully qualified"
    );
    assert_eq!(strings(w.get("admissionReviewVersions")), ["v1"]);
    assert_eq!(w.str_at(&["sideEffects"]), Some("None"));
    assert_eq!(w.str_at(&["failurePolicy"]), Some("Fail"));
    assert_eq!(w.str_at(&["timeoutSeconds"]), Some("5"));
    assert_eq!(w.str_at(&["matchPolicy"]), Some("Equivalent"));
    assert_eq!(w.str_at(&["reinvocationPolicy"]), Some("IfNeeded"));
    let text =
        std::fs::read_to_string(repo_path("deploy/mutatingwebhookconfiguration.yaml")).unwrap();
    for why in ["crash-loops", "Ignore", "timeoutSeconds"] {
        assert!(
            text.contains(why),
            "the failurePolicy/timeout comments should mention {why}"
        );
    }

    let rules = w.get("rules").unwrap().seq();
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    // CREATE only: a pod's networks are fixed when it starts, and no later
    // change to a pod (a finalizer removed) waits on the webhook.
    assert_eq!(strings(rule.get("operations")), ["CREATE"]);
    for why in ["CREATE only", "finalizer"] {
        assert!(
            text.contains(why),
            "the rules' comment should mention {why}"
        );
    }
    match_conditions_skip_host_network_and_deleted_pods(w);
    assert_eq!(strings(rule.get("apiGroups")), [""]);
    assert_eq!(strings(rule.get("apiVersions")), ["v1"]);
    assert_eq!(strings(rule.get("resources")), ["pods"]);
    assert_eq!(rule.str_at(&["scope"]), Some("Namespaced"));

    called_through_the_service(&pkg, w);

    namespace_selector_excludes_system_and_opted_out_namespaces(w);

    // cainjector fills the caBundle from the serving Certificate.
    assert_eq!(
        mwc.annotation("cert-manager.io/inject-ca-from"),
        Some(format!("{NAMESPACE}/{NAME}").as_str())
    );
    pkg.get("Certificate", NAME);
}

/// The Namespaces' webhook only warns: never fails a Namespace's write (Ignore, a short
/// timeout), mutates nothing, is called through the same Service, and is sent only Namespaces
/// with an annotation of Linkerd's or Multus's (what it reads). What it answers:
/// tests/webhook/opt_ins.rs.
#[test]
fn the_namespaces_webhook_only_warns() {
    let pkg = Package::load();
    let w = pkg.webhook_named("namespaces.multus.linkerd.io");
    assert_eq!(strings(w.get("admissionReviewVersions")), ["v1"]);
    assert_eq!(w.str_at(&["sideEffects"]), Some("None"));
    assert_eq!(w.str_at(&["failurePolicy"]), Some("Ignore"));
    assert_eq!(w.str_at(&["timeoutSeconds"]), Some("2"));
    let rules = w.get("rules").unwrap().seq();
    assert_eq!(rules.len(), 1);
    assert_eq!(strings(rules[0].get("operations")), ["CREATE", "UPDATE"]);
    assert_eq!(strings(rules[0].get("apiGroups")), [""]);
    assert_eq!(strings(rules[0].get("resources")), ["namespaces"]);
    assert_eq!(rules[0].str_at(&["scope"]), Some("Cluster"));
    called_through_the_service(&pkg, w);
    let conditions = w.get("matchConditions").unwrap().seq();
    assert_eq!(conditions.len(), 1);
    assert_eq!(
        conditions[0].str_at(&["expression"]),
        Some(
            "has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.lowerAscii().contains('linkerd') || k.lowerAscii().contains('multus'))"
        )
    );
}

/// The webhook's matchConditions.
fn match_conditions_skip_host_network_and_deleted_pods(w: &Yaml) {
    // Host-network pods and pods being deleted never reach it (tests/cluster.rs
    // shows both with the webhook down), nor pods in the namespaces of the list
    // setter (tests/extension/lifecycle.rs shows names and prefixes kept away).
    let conditions: Vec<(&str, &str)> = w
        .get("matchConditions")
        .expect("matchConditions")
        .seq()
        .iter()
        .map(|c| {
            (
                c.str_at(&["name"]).unwrap(),
                c.str_at(&["expression"]).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            (
                "not-host-network",
                "object == null || !has(object.spec.hostNetwork) || !object.spec.hostNetwork"
            ),
            (
                "not-being-deleted",
                "object == null || !has(object.metadata.deletionTimestamp)"
            ),
            // The list setter webhook-excluded-namespaces, empty: no namespace matches.
            ("not-excluded-namespace", EXCLUDED_NAMESPACES_EXPRESSION),
        ]
    );
}

/// The expression of `not-excluded-namespace` with the package's empty list.
const EXCLUDED_NAMESPACES_EXPRESSION: &str = "!'[]'.replace('[', '').replace(']', '').replace(' ', '').split(',').exists(n, n.endsWith('*') ? request.namespace.startsWith(n.substring(0, n.size() - 1)) : request.namespace == n)";

/// The webhook's clientConfig.
fn called_through_the_service(pkg: &Package, w: &Yaml) {
    // Called through the Service, on a port the Service has, at /mutate.
    let svc = pkg.get("Service", NAME);
    assert!(w.at(&["clientConfig", "url"]).is_none());
    assert_eq!(
        w.str_at(&["clientConfig", "service", "name"]),
        svc.str_at(&["metadata", "name"])
    );
    assert_eq!(
        w.str_at(&["clientConfig", "service", "namespace"]),
        svc.str_at(&["metadata", "namespace"])
    );
    assert_eq!(
        w.str_at(&["clientConfig", "service", "path"]),
        Some("/mutate")
    );
    let port = w
        .str_at(&["clientConfig", "service", "port"])
        .unwrap_or("443");
    assert!(
        svc.at(&["spec", "ports"])
            .unwrap()
            .seq()
            .iter()
            .any(|p| p.str_at(&["port"]) == Some(port)),
        "the Service has no port {port}"
    );
    // The caBundle comes from cainjector or certs.sh: a value here would be re-applied over it.
    assert!(w.at(&["clientConfig", "caBundle"]).is_none());
}

/// The webhook's namespaceSelector.
fn namespace_selector_excludes_system_and_opted_out_namespaces(w: &Yaml) {
    // Excluded: the system namespaces, cert-manager and the webhook's own; opt-out label.
    let exprs = w
        .at(&["namespaceSelector", "matchExpressions"])
        .expect("namespaceSelector.matchExpressions")
        .seq();
    assert!(w.at(&["namespaceSelector", "matchLabels"]).is_none());
    let expr = |key: &str| {
        exprs
            .iter()
            .find(|e| e.str_at(&["key"]) == Some(key))
            .unwrap_or_else(|| panic!("no namespaceSelector expression on {key}"))
    };
    let by_name = expr("kubernetes.io/metadata.name");
    assert_eq!(by_name.str_at(&["operator"]), Some("NotIn"));
    assert_eq!(
        strings(by_name.get("values")),
        [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            NAMESPACE,
            "cert-manager"
        ]
    );
    let opt_out = expr("multus.linkerd.io/webhook");
    assert_eq!(opt_out.str_at(&["operator"]), Some("NotIn"));
    assert_eq!(strings(opt_out.get("values")), ["disabled"]);
    assert_eq!(exprs.len(), 2);
    assert!(w.get("objectSelector").is_none());
}

#[test]
fn cert_manager_certificate_serves_the_service() {
    let pkg = Package::load();
    let cert = pkg.get("Certificate", NAME);
    let volume_secrets: Vec<&str> = pkg
        .pod_spec()
        .get("volumes")
        .unwrap()
        .seq()
        .iter()
        .filter_map(|v| v.str_at(&["secret", "secretName"]))
        .collect();
    assert_eq!(volume_secrets, [TLS_SECRET]);
    assert_eq!(cert.str_at(&["spec", "secretName"]), Some(TLS_SECRET));
    let dns = strings(cert.at(&["spec", "dnsNames"]));
    let svc = pkg.get("Service", NAME);
    let (name, ns) = (
        svc.str_at(&["metadata", "name"]).unwrap(),
        svc.str_at(&["metadata", "namespace"]).unwrap(),
    );
    for want in [
        name.to_string(),
        format!("{name}.{ns}"),
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
    ] {
        assert!(dns.contains(&want), "dnsNames {dns:?} lack {want}");
    }
    assert!(cert.str_at(&["spec", "isCA"]).is_none_or(|v| v == "false"));

    // Serving certificate <- CA Issuer <- CA Certificate <- self-signed Issuer.
    let issuer_of = |c: &Yaml| {
        assert_eq!(c.str_at(&["spec", "issuerRef", "kind"]), Some("Issuer"));
        pkg.get("Issuer", c.str_at(&["spec", "issuerRef", "name"]).unwrap())
    };
    let ca_issuer = issuer_of(cert);
    let ca_secret = ca_issuer
        .str_at(&["spec", "ca", "secretName"])
        .expect("the serving certificate's issuer is a CA issuer");
    let ca_cert = pkg
        .of_kind("Certificate")
        .into_iter()
        .find(|c| c.str_at(&["spec", "secretName"]) == Some(ca_secret))
        .expect("a Certificate makes the CA Issuer's secret");
    assert_eq!(ca_cert.str_at(&["spec", "isCA"]), Some("true"));
    assert!(
        issuer_of(ca_cert).at(&["spec", "selfSigned"]).is_some(),
        "the CA is signed by a self-signed Issuer"
    );
    for (_, r) in &pkg.resources {
        if r.str_at(&["apiVersion"])
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
        {
            assert_eq!(r.str_at(&["metadata", "namespace"]), Some(NAMESPACE));
        }
    }
}

/// Option 2 of the README: the documented `sed` removes the cainjector annotation and nothing
/// else, leaving a configuration that still parses.
#[test]
fn readme_recipe_without_cert_manager() {
    const SED: &str =
        "sed -i '/^  annotations:$/,/inject-ca-from/d' mutatingwebhookconfiguration.yaml";
    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(
        readme.contains(SED),
        "README.md no longer has the documented sed command"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo_path("deploy/mutatingwebhookconfiguration.yaml"),
        tmp.path().join("mutatingwebhookconfiguration.yaml"),
    )
    .unwrap();
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(SED)
        .current_dir(tmp.path()));
    assert!(out.status.success(), "{}", text(&out));
    let after =
        std::fs::read_to_string(tmp.path().join("mutatingwebhookconfiguration.yaml")).unwrap();
    let before = parse_yaml(
        &std::fs::read_to_string(repo_path("deploy/mutatingwebhookconfiguration.yaml")).unwrap(),
    )
    .unwrap();
    let after = parse_yaml(&after).expect("still YAML");
    assert!(after.at(&["metadata", "annotations"]).is_none());
    assert_eq!(
        tree_difference(
            before.get("webhooks").unwrap(),
            after.get("webhooks").unwrap(),
            "webhooks"
        ),
        None
    );
    assert_eq!(
        after.at(&["metadata", "labels"]),
        before.at(&["metadata", "labels"])
    );
}

/// Every flag the Deployment passes is one `linkerd-multus webhook` knows. (Fails until the
/// webhook subcommand exists.)
#[test]
fn deployment_flags_are_webhook_flags() {
    let pkg = Package::load();
    let out = run(Command::new(bin()).args(["webhook", "--help"]));
    assert!(
        out.status.success(),
        "`linkerd-multus webhook --help` failed:\n{}",
        text(&out)
    );
    let help = String::from_utf8_lossy(&out.stdout);
    let flags: Vec<String> = pkg
        .args()
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap().to_string())
        .collect();
    assert!(flags.len() >= 6, "{flags:?}");
    for flag in flags {
        let known = help
            .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
            .any(|word| word == flag);
        assert!(
            known,
            "deployment.yaml passes {flag}, which `linkerd-multus webhook --help` does not list:\n{help}"
        );
    }
}

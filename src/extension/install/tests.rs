use super::exclusions::Platform;
use super::options::FailurePolicy;
use super::*;
use crate::extension::ownership::{MARK, MARK_VALUE};
use crate::yaml::parse_stream;

fn certs() -> Certificates {
    Certificates {
        cert: "CERT\n".into(),
        key: "KEY\n".into(),
        ca_bundle: "CA\n".into(),
    }
}

/// `kind/namespace/name` of each object, in order.
fn ids(yaml: &str) -> Vec<String> {
    parse_stream(yaml)
        .unwrap()
        .iter()
        .map(|o| {
            let text = |path: &[&str]| o.get_path(path).and_then(Node::as_str).unwrap_or("");
            format!(
                "{}/{}/{}",
                text(&["kind"]),
                text(&["metadata", "namespace"]),
                text(&["metadata", "name"])
            )
        })
        .collect()
}

fn object<'a>(objects: &'a [Node], kind: &str) -> &'a Node {
    objects
        .iter()
        .find(|o| o.get_path(&["kind"]).and_then(Node::as_str) == Some(kind))
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn defaults_give_the_webhook_with_its_certificates() {
    let yaml = render(
        &Options::default(),
        Some(&certs()),
        &Callers::unread(&Options::default()),
    )
    .unwrap();
    assert_eq!(
        yaml,
        render(
            &Options::default(),
            Some(&certs()),
            &Callers::unread(&Options::default())
        )
        .unwrap()
    );
    let ns = "linkerd-multus";
    let want = [
        "Namespace//linkerd-multus".to_string(),
        format!("ServiceAccount/{ns}/linkerd-multus-webhook"),
        "ClusterRole//linkerd-multus-webhook".into(),
        "ClusterRoleBinding//linkerd-multus-webhook".into(),
        format!("Secret/{ns}/linkerd-multus-webhook-tls"),
        format!("Service/{ns}/linkerd-multus-webhook"),
        format!("Service/{ns}/linkerd-multus-webhook-metrics"),
        format!("NetworkPolicy/{ns}/linkerd-multus-webhook"),
        format!("PodDisruptionBudget/{ns}/linkerd-multus-webhook"),
        format!("Deployment/{ns}/linkerd-multus-webhook"),
        "MutatingWebhookConfiguration//linkerd-multus-webhook".into(),
    ];
    assert_eq!(ids(&yaml), want);
    assert!(!yaml.contains("--restart-stale-workloads"), "{yaml}");
    assert!(
        yaml.contains("memory: 64Mi\n") && !yaml.contains("128Mi"),
        "{yaml}"
    );
    let objects = parse_stream(&yaml).unwrap();
    let mwc = object(&objects, "MutatingWebhookConfiguration");
    assert!(mwc.get_path(&["metadata", "annotations"]).is_none());
    let hook = &mwc.get_path(&["webhooks"]).unwrap().as_seq().unwrap().items[0];
    assert_eq!(
        hook.get_path(&["clientConfig", "caBundle"])
            .and_then(Node::as_str),
        Some("Q0EK")
    );
    let secret = object(&objects, "Secret");
    assert_eq!(
        secret.get_path(&["data", "tls.key"]).and_then(Node::as_str),
        Some("S0VZCg==")
    );
    let namespace = object(&objects, "Namespace");
    assert_eq!(
        namespace
            .get_path(&["metadata", "labels", "linkerd.io/extension"])
            .and_then(Node::as_str),
        Some("multus")
    );
    assert_eq!(
        namespace
            .get_path(&["metadata", "annotations", MARK])
            .and_then(Node::as_str),
        Some(MARK_VALUE),
        "the namespace is marked as the extension's own"
    );
    let policy = object(&objects, "NetworkPolicy");
    assert_eq!(
        ingress(policy),
        [
            ("https", vec!["0.0.0.0/0", "::/0"]),
            ("ops", vec!["monitoring"])
        ]
    );
    let pdb = object(&objects, "PodDisruptionBudget");
    assert_eq!(
        pdb.get_path(&["spec", "maxUnavailable"])
            .and_then(Node::as_str),
        Some("1")
    );
    assert!(pdb.get_path(&["spec", "minAvailable"]).is_none());
}

/// Each ingress rule of the NetworkPolicy: its port, and the CIDRs or
/// namespaces it admits.
fn ingress(policy: &Node) -> Vec<(&str, Vec<&str>)> {
    let rules = policy
        .get_path(&["spec", "ingress"])
        .and_then(Node::as_seq)
        .unwrap();
    rules
        .items
        .iter()
        .map(|rule| {
            let port = rule
                .get_path(&["ports"])
                .and_then(Node::as_seq)
                .unwrap()
                .items[0]
                .get_path(&["port"])
                .and_then(Node::as_str)
                .unwrap();
            let from = &rule
                .get_path(&["from"])
                .and_then(Node::as_seq)
                .unwrap()
                .items;
            let admitted = from
                .iter()
                .flat_map(|peer| match peer.get_path(&["ipBlock", "cidr"]) {
                    Some(cidr) => vec![cidr.as_str().unwrap()],
                    None => {
                        let expression = &peer
                            .get_path(&["namespaceSelector", "matchExpressions"])
                            .and_then(Node::as_seq)
                            .unwrap()
                            .items[0];
                        assert_eq!(
                            expression.get_path(&["key"]).and_then(Node::as_str),
                            Some("kubernetes.io/metadata.name")
                        );
                        let values = expression
                            .get_path(&["values"])
                            .and_then(Node::as_seq)
                            .unwrap();
                        values.items.iter().map(|v| v.as_str().unwrap()).collect()
                    }
                })
                .collect();
            (port, admitted)
        })
        .collect()
}

#[test]
fn options_reach_the_objects() {
    let options = Options {
        namespace: "mesh".into(),
        linkerd_namespace: "l5d".into(),
        image: "mirror.example:5000/linkerd/multus:v0.1.0".into(),
        platform: Platform::OpenShift,
        replicas: 3,
        failure_policy: FailurePolicy::Ignore,
        priority_class_name: "high".into(),
        manage_nads: true,
        cni_namespace: "cni".into(),
        restart_stale_workloads: true,
        restart_concurrency: 3,
        restart_deadline: std::time::Duration::from_secs(900),
        network_resources: true,
        skip_secondary_subnets: true,
        cluster_cidrs: vec!["10.244.0.0/16".into(), "fd00:10::/56".into()],
        protected_cidrs: vec!["192.168.0.0/16".into()],
        certs: Certs::CertManager,
        ignore_cluster: false,
        api_server_cidrs: vec![
            "10.0.0.0/24".into(),
            "fd00::/64".into(),
            "192.0.2.7/32".into(),
        ],
        metrics_namespaces: vec![
            "openshift-monitoring".into(),
            "openshift-user-workload-monitoring".into(),
        ],
        webhook_excluded_namespaces: vec!["openshift".into(), "openshift-*".into()],
        day2: options::Day2Settings::default().resolve(true).unwrap(),
        monitoring: true,
    };
    let yaml = render(&options, None, &Callers::unread(&options)).unwrap();
    let objects = parse_stream(&yaml).unwrap();
    assert_eq!(
        ingress(object(&objects, "NetworkPolicy")),
        [
            ("https", vec!["10.0.0.0/24", "fd00::/64", "192.0.2.7/32"]),
            (
                "ops",
                vec!["openshift-monitoring", "openshift-user-workload-monitoring"]
            )
        ]
    );
    let policies: Vec<_> = objects
        .iter()
        .filter(|o| o.get_path(&["kind"]).and_then(Node::as_str) == Some("NetworkPolicy"))
        .collect();
    assert_eq!(
        ingress(policies[1]),
        [(
            "ops",
            vec!["openshift-monitoring", "openshift-user-workload-monitoring"]
        )],
        "the NAD controller's: its ops port alone"
    );
    let ids = ids(&yaml);
    assert_eq!(ids[0], "Namespace//mesh");
    for id in [
        "ServiceAccount/mesh/linkerd-multus-nad-controller",
        "ClusterRoleBinding//linkerd-multus-nad-controller",
        "Deployment/mesh/linkerd-multus-nad-controller",
        "PodDisruptionBudget/mesh/linkerd-multus-nad-controller",
        "Service/mesh/linkerd-multus-nad-controller-metrics",
        "Role/cni/linkerd-multus-nad-controller",
        "Role/default/linkerd-multus-nad-controller-events",
        "RoleBinding/default/linkerd-multus-nad-controller-events",
        "Role/mesh/linkerd-multus-nad-controller-lease",
        "ClusterRole//linkerd-multus-restarts",
        "ClusterRoleBinding//linkerd-multus-restarts",
        "ConfigMap/mesh/linkerd-multus-network-resources",
        "ClusterRole//linkerd-multus-webhook-network-resources",
        "Certificate/mesh/linkerd-multus-webhook",
        "Issuer/mesh/linkerd-multus-webhook-ca",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
    }
    assert!(!ids.iter().any(|i| i.starts_with("Secret/")), "{ids:?}");
    for old in [
        "namespace: linkerd-multus\n",
        "- linkerd-multus\n",
        " linkerd-multus/",
        ".linkerd-multus",
    ] {
        assert!(
            !yaml.contains(old),
            "the old namespace is left ({old:?}):\n{yaml}"
        );
    }
    for want in [
        "replicas: 3\n",
        "failurePolicy: Ignore\n",
        "priorityClassName: high\n",
        "- --linkerd-namespace=l5d\n",
        "- --missing-nad=attach\n",
        "- --network-resources=/etc/linkerd-multus/network-resources/network-resources.yaml\n",
        "- --skip-secondary-subnets=enabled\n",
        "- --cluster-cidrs=[10.244.0.0/16, fd00:10::/56]\n        - --protected-cidrs=[192.168.0.0/16]\n        ports:",
        "- --cni-namespace=cni\n        - --restart-stale-workloads=true\n        - --restart-concurrency=3\n        - --restart-deadline=15m\n",
        "cert-manager.io/inject-ca-from: mesh/linkerd-multus-webhook\n",
        "image: mirror.example:5000/linkerd/multus:v0.1.0\n",
        "expression: \"!'[openshift, openshift-*]'.replace(",
    ] {
        assert!(yaml.contains(want), "{want:?} not in:\n{yaml}");
    }
    let deployments: Vec<_> = objects
        .iter()
        .filter(|o| o.get_path(&["kind"]).and_then(Node::as_str) == Some("Deployment"))
        .collect();
    let limit = |d: &Node| {
        let container = &d
            .get_path(&["spec", "template", "spec", "containers"])
            .and_then(Node::as_seq)
            .unwrap()
            .items[0];
        container
            .get_path(&["resources", "limits", "memory"])
            .and_then(Node::as_str)
            .map(str::to_string)
    };
    assert_eq!(
        deployments.iter().map(|d| limit(d)).collect::<Vec<_>>(),
        [Some("64Mi".to_string()), Some("128Mi".to_string())],
        "the webhook's limit, then the controller's with the restarts"
    );
}

/// Each source of certificates: what holds the certificate and the caBundle, and who is asked
/// for them by annotations of the webhook configuration and the Service.
#[test]
fn each_source_of_certificates_gives_its_objects() {
    let annotations = |o: &Node| {
        let mut keys: Vec<String> = match o.get_path(&["metadata", "annotations"]) {
            Some(Node::Map(map)) => map
                .entries
                .iter()
                .map(|(k, v)| format!("{}={}", k.as_str().unwrap(), v.as_str().unwrap()))
                .collect(),
            _ => Vec::new(),
        };
        keys.sort();
        keys
    };
    let service_ca = vec![
        "service.beta.openshift.io/serving-cert-secret-name=linkerd-multus-webhook-tls".to_string(),
    ];
    for (certs, given, webhook, service, secret) in [
        (Certs::Generate, Some(certs()), vec![], vec![], true),
        (
            Certs::CertManager,
            None,
            vec![
                "cert-manager.io/inject-ca-from=linkerd-multus/linkerd-multus-webhook".to_string(),
            ],
            vec![],
            false,
        ),
        (
            Certs::OpenShiftServiceCa,
            None,
            vec!["service.beta.openshift.io/inject-cabundle=true".to_string()],
            service_ca,
            false,
        ),
    ] {
        let options = Options {
            certs,
            ..Options::default()
        };
        let yaml = render(&options, given.as_ref(), &Callers::unread(&options)).unwrap();
        let objects = parse_stream(&yaml).unwrap();
        let configuration = object(&objects, "MutatingWebhookConfiguration");
        assert_eq!(annotations(configuration), webhook, "{certs:?}");
        let bundle = configuration
            .get_path(&["webhooks"])
            .and_then(Node::as_seq)
            .unwrap()
            .items[0]
            .get_path(&["clientConfig", "caBundle"])
            .is_some();
        assert_eq!(bundle, secret, "{certs:?}: the caBundle");
        let webhook_service = objects
            .iter()
            .find(|o| {
                o.get_path(&["kind"]).and_then(Node::as_str) == Some("Service")
                    && o.get_path(&["metadata", "name"]).and_then(Node::as_str) == Some(SERVICE)
            })
            .unwrap();
        assert_eq!(annotations(webhook_service), service, "{certs:?}");
        let ids = ids(&yaml);
        assert_eq!(
            ids.iter()
                .any(|i| i == "Secret/linkerd-multus/linkerd-multus-webhook-tls"),
            secret,
            "{certs:?}: {ids:?}"
        );
    }
}

/// The webhook's port: from the ranges given, OpenShift's host network, the addresses the
/// cluster lists for the API server, or (nothing narrower known) every address.
#[test]
fn the_webhook_port_admits_the_callers_install_knows() {
    let openshift = Options {
        platform: Platform::OpenShift,
        ..Options::default()
    };
    let listed = Callers::Listed(vec![
        "192.0.2.10".parse().unwrap(),
        "2001:db8::1".parse().unwrap(),
    ]);
    for (options, callers, want) in [
        (
            &openshift,
            Callers::unread(&openshift),
            "    - port: https\n      protocol: TCP\n    from:\n    - namespaceSelector:\n        matchLabels:\n          policy-group.network.openshift.io/host-network: \"\"\n  - ports:\n",
        ),
        (
            &Options::default(),
            listed,
            "    - port: https\n      protocol: TCP\n    from:\n    - ipBlock:\n        cidr: \"192.0.2.10/32\"\n    - ipBlock:\n        cidr: \"2001:db8::1/128\"\n  - ports:\n",
        ),
        (
            &Options::default(),
            Callers::unread(&Options::default()),
            "    - port: https\n      protocol: TCP\n    from:\n    - ipBlock:\n        cidr: 0.0.0.0/0\n    - ipBlock:\n        cidr: ::/0\n  - ports:\n",
        ),
    ] {
        let yaml = render(options, None, &callers).unwrap();
        let policy = yaml
            .split("\n---\n")
            .find(|doc| {
                doc.contains("kind: NetworkPolicy")
                    && doc.contains("name: linkerd-multus-webhook\n")
            })
            .unwrap();
        assert!(policy.contains(want), "{callers:?}: {policy}");
    }
}

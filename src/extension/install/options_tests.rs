//! The install options' unit tests: the file, the flags over it, and the checks.

use std::path::Path;

use super::checks::{API_SERVER_CIDR, cidr};
use super::*;

const HEAD: &str = "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\n";

#[test]
fn a_file_gives_every_setting() {
    let options = Options {
        namespace: "mesh-webhook".into(),
        linkerd_namespace: "l5d".into(),
        image: "mirror.example:5000/linkerd/multus:0.1.0".into(),
        platform: Platform::OpenShift,
        replicas: 3,
        failure_policy: FailurePolicy::Ignore,
        priority_class_name: "high.example".into(),
        manage_nads: true,
        cni_namespace: "cni".into(),
        restart_stale_workloads: true,
        restart_concurrency: 4,
        restart_deadline: Duration::from_secs(90 * 60),
        network_resources: true,
        skip_secondary_subnets: true,
        cluster_cidrs: vec!["10.128.0.0/14".into(), "172.30.0.0/16".into()],
        protected_cidrs: vec!["192.168.0.0/16".into(), "fd00:20::/48".into()],
        certs: Certs::CertManager,
        ignore_cluster: true,
        api_server_cidrs: vec!["10.0.0.0/24".into(), "fd00::/64".into()],
        metrics_namespaces: vec!["openshift-monitoring".into(), "prom".into()],
        webhook_excluded_namespaces: vec![
            "openshift".into(),
            "openshift-*".into(),
            "legacy".into(),
        ],
        day2: Day2Settings {
            webhook_resources: Some(
                resources("{requests: {cpu: null}, limits: {memory: 256Mi}}", "x").unwrap(),
            ),
            log_level: Some("info,linkerd_multus=debug".into()),
            on_error: Some(OnError::Deny),
            missing_nad: Some(MissingNad::Ignore),
            pod_labels: Some(Pairs::from([("team".into(), "mesh".into())])),
            service_annotations: Some(Pairs::from([("a.example/b".into(), "x: \"y\"".into())])),
            ..Day2Settings::default()
        }
        .resolve(true)
        .unwrap(),
        monitoring: true,
    };
    let read = Settings::from_text(&options.to_file()).unwrap();
    assert_eq!(read.resolve().unwrap(), options);
    let empty = Settings::from_text(&format!("{HEAD}metadata: {{name: x}}\n")).unwrap();
    assert_eq!(empty.resolve().unwrap(), Options::default());
}

/// `platform: openshift` adds OpenShift's namespaces to those kept away from the
/// webhook, before the ones given, and gives OpenShift's Prometheus namespaces
/// unless others are given.
#[test]
fn the_openshift_platform_adds_its_namespaces() {
    let read = |spec: &str| {
        Settings::from_text(&format!("{HEAD}spec:\n{spec}"))
            .unwrap()
            .resolve()
            .unwrap()
    };
    let openshift =
        read("  platform: openshift\n  webhookExcludedNamespaces: [legacy, openshift-*, team-*]\n");
    assert_eq!(
        openshift.webhook_excluded_namespaces,
        ["openshift", "openshift-*", "legacy", "team-*"]
    );
    assert_eq!(
        openshift.metrics_namespaces,
        ["openshift-monitoring", "openshift-user-workload-monitoring"]
    );
    let given = read("  platform: openshift\n  metricsNamespaces: [prom]\n");
    assert_eq!(given.metrics_namespaces, ["prom"]);
    let plain = read("  webhookExcludedNamespaces: [legacy]\n");
    assert_eq!(
        (plain.webhook_excluded_namespaces, plain.metrics_namespaces),
        (vec!["legacy".to_string()], vec!["monitoring".to_string()])
    );
}

#[test]
fn flags_win_over_the_file() {
    let file = Settings::from_text(&format!(
        "{HEAD}spec:\n  replicas: 3\n  namespace: a\n  manageNADs: true\n"
    ))
    .unwrap();
    let flags = Settings {
        namespace: Some("b".into()),
        manage_nads: Some(false),
        ..Settings::default()
    };
    let options = file.overridden_by(flags).resolve().unwrap();
    assert_eq!(
        (
            options.replicas,
            options.namespace.as_str(),
            options.manage_nads
        ),
        (3, "b", false)
    );
}

#[test]
fn a_bad_file_names_the_field_and_what_to_do() {
    for (spec, want) in [
        (
            "spec:\n  replica: 3\n",
            "unknown setting spec.replica (did you mean spec.replicas?); valid settings are namespace,",
        ),
        (
            "spec:\n  replica: 3\n  failurePolcy: Fail\n  colour: blue\n",
            "unknown settings spec.replica (did you mean spec.replicas?), spec.failurePolcy (did you mean spec.failurePolicy?) and spec.colour; valid settings are namespace,",
        ),
        (
            "spec:\n  replicas: two\n",
            "spec.replicas: must be a whole number, not \"two\"",
        ),
        (
            "spec:\n  failurePolicy: fail\n",
            "spec.failurePolicy: must be Fail or Ignore, not \"fail\"",
        ),
        (
            "spec:\n  manageNADs: yes\n",
            "spec.manageNADs: must be true or false",
        ),
        (
            "spec:\n  restartStaleWorkloads: 1\n",
            "spec.restartStaleWorkloads: must be true or false",
        ),
        (
            "spec:\n  restartConcurrency: 0\n",
            "spec.restartConcurrency: must be a whole number from 1 to 65535 (workloads rolling at once), not \"0\"",
        ),
        (
            "spec:\n  restartConcurrency: 70000\n",
            "spec.restartConcurrency: must be a whole number from 1 to 65535",
        ),
        (
            "spec:\n  restartDeadline: 10\n",
            "spec.restartDeadline: must be a positive duration such as 10m or 1h30m, not \"10\"",
        ),
        (
            "spec:\n  restartDeadline: 0s\n",
            "spec.restartDeadline: must be a positive duration",
        ),
        (
            "spec:\n  skipSecondarySubnets: true\n",
            "spec.skipSecondarySubnets: must be enabled or disabled, not \"true\"",
        ),
        (
            "spec:\n  clusterCIDRs: 10.244.0.0/16\n",
            "spec.clusterCIDRs: must be a list of strings, not a scalar",
        ),
        (
            "spec:\n  protectedCIDRs: 192.168.0.0/16\n",
            "spec.protectedCIDRs: must be a list of strings, not a scalar",
        ),
        (
            "spec:\n  certs: vault\n",
            "spec.certs: must be generate, cert-manager or openshift-service-ca",
        ),
        (
            "spec:\n  platform: OpenShift\n",
            "spec.platform: must be kubernetes or openshift, not \"OpenShift\"",
        ),
        (
            "spec:\n  webhookExcludedNamespaces: openshift-*\n",
            "spec.webhookExcludedNamespaces: must be a list of strings, not a scalar",
        ),
        (
            "spec:\n  namespace: [a]\n",
            "spec.namespace: must be a string, not a sequence",
        ),
        ("spec: 3\n", "spec is a scalar, not a mapping"),
        (
            "spec:\n  apiServerCIDRs: 10.0.0.0/8\n",
            "spec.apiServerCIDRs: must be a list of strings, not a scalar",
        ),
        (
            "spec:\n  metricsNamespaces: [[a]]\n",
            "spec.metricsNamespaces: each item must be a string, not a sequence",
        ),
        (
            "replicas: 3\n",
            "unexpected top-level field \"replicas\": the settings go under spec",
        ),
    ] {
        let err = Settings::from_text(&format!("{HEAD}{spec}")).unwrap_err();
        assert!(err.contains(want), "{spec:?}: {err}");
    }
    let err = Settings::from_text("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
    assert!(
        err.contains("must be a LinkerdMultusInstall (multus.linkerd.io/v1alpha1), not \"ConfigMap\" (\"v1\")"),
        "{err}"
    );
    let err = Settings::from_file(Path::new("/nonexistent/install.yaml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--config /nonexistent/install.yaml: "),
        "{err}"
    );
}

#[test]
fn bad_values_and_conflicts_say_what_to_do() {
    for (settings, want) in [
        (
            Settings {
                namespace: Some("Mesh".into()),
                ..Settings::default()
            },
            "--namespace (namespace) \"Mesh\" is not a namespace name",
        ),
        (
            Settings {
                linkerd_namespace: Some("l5d_".into()),
                ..Settings::default()
            },
            "--linkerd-namespace (linkerdNamespace)",
        ),
        (
            Settings {
                replicas: Some(0),
                ..Settings::default()
            },
            "--replicas (replicas) 0",
        ),
        (
            Settings {
                priority_class_name: Some("High".into()),
                ..Settings::default()
            },
            "is not a PriorityClass name",
        ),
        (
            Settings {
                namespace: Some("kube-system".into()),
                ..Settings::default()
            },
            "--namespace (namespace) \"kube-system\" is Kubernetes's own: install puts linkerd-multus only in a namespace of its own, which uninstall deletes with everything in it; choose another (the default is linkerd-multus)",
        ),
        (
            Settings {
                namespace: Some("l5d".into()),
                linkerd_namespace: Some("l5d".into()),
                ..Settings::default()
            },
            "--namespace (namespace) \"l5d\" is the Linkerd control plane's:",
        ),
        (
            Settings {
                namespace: Some("cni".into()),
                cni_namespace: Some("cni".into()),
                manage_nads: Some(true),
                ..Settings::default()
            },
            "--namespace (namespace) \"cni\" is Linkerd-CNI's:",
        ),
        (
            Settings {
                api_server_cidrs: Some(vec!["10.0.0.1/24".into()]),
                ..Settings::default()
            },
            "--api-server-cidr (apiServerCIDRs) \"10.0.0.1/24\" has host bits set: the network is 10.0.0.0/24",
        ),
        (
            Settings {
                cluster_cidrs: Some(vec!["10.244.0.0/16".into(), "10.96.0.0".into()]),
                ..Settings::default()
            },
            "--cluster-cidr (clusterCIDRs) \"10.96.0.0\" is not a CIDR: write ADDRESS/PREFIX",
        ),
        (
            Settings {
                protected_cidrs: Some(vec!["192.168.0.0/16".into(), "192.168.0.0".into()]),
                ..Settings::default()
            },
            "--protected-cidr (protectedCIDRs) \"192.168.0.0\" is not a CIDR: write ADDRESS/PREFIX",
        ),
        (
            Settings {
                protected_cidrs: Some(vec!["192.168.4.1/16".into()]),
                ..Settings::default()
            },
            "--protected-cidr (protectedCIDRs) \"192.168.4.1/16\" has host bits set: the network is 192.168.0.0/16; write that, or 192.168.4.1/32 for the one address",
        ),
        (
            Settings {
                skip_secondary_subnets: Some(true),
                ..Settings::default()
            },
            "--skip-secondary-subnets (skipSecondarySubnets) enabled needs --cluster-cidr (clusterCIDRs): without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy",
        ),
        (
            Settings {
                metrics_namespaces: Some(vec![]),
                ..Settings::default()
            },
            "--metrics-namespace (metricsNamespaces) is empty",
        ),
        (
            Settings {
                metrics_namespaces: Some(vec!["Prom".into()]),
                ..Settings::default()
            },
            "--metrics-namespace (metricsNamespaces) \"Prom\" is not a namespace name",
        ),
        (
            Settings {
                cni_namespace: Some("cni".into()),
                ..Settings::default()
            },
            "add --manage-nads",
        ),
        (
            Settings {
                restart_stale_workloads: Some(true),
                ..Settings::default()
            },
            "--restart-stale-workloads (restartStaleWorkloads) is for the NAD controller, which restarts the workloads after it updates their namespace's NAD: add --manage-nads (manageNADs: true), or leave it out",
        ),
        (
            Settings {
                restart_stale_workloads: Some(true),
                manage_nads: Some(false),
                ..Settings::default()
            },
            "add --manage-nads (manageNADs: true)",
        ),
        (
            Settings {
                manage_nads: Some(true),
                restart_concurrency: Some(2),
                ..Settings::default()
            },
            "--restart-concurrency (restartConcurrency) and --restart-deadline (restartDeadline) pace the NAD controller's restarts: add --restart-stale-workloads (restartStaleWorkloads: true), or leave them out",
        ),
        (
            Settings {
                manage_nads: Some(true),
                restart_stale_workloads: Some(false),
                restart_deadline: Some(Duration::from_secs(60)),
                ..Settings::default()
            },
            "add --restart-stale-workloads",
        ),
        (
            Settings {
                image: Some("mirror.example:5000/linkerd/multus".into()),
                ..Settings::default()
            },
            "--image (image) \"mirror.example:5000/linkerd/multus\" has neither a tag nor a digest",
        ),
        (
            Settings {
                image: Some("mirror.example/linkerd/multus@sha256:abc".into()),
                ..Settings::default()
            },
            "--image (image) \"mirror.example/linkerd/multus@sha256:abc\" has a digest \"sha256:abc\" whose sha256 is not 64 lower-case hex digits (3 given): write REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST",
        ),
        (
            Settings {
                webhook_excluded_namespaces: Some(vec!["*".into()]),
                ..Settings::default()
            },
            "--webhook-excluded-namespace (webhookExcludedNamespaces) \"*\" keeps every namespace away from the webhook",
        ),
        (
            Settings {
                webhook_excluded_namespaces: Some(vec!["Legacy".into()]),
                ..Settings::default()
            },
            "--webhook-excluded-namespace (webhookExcludedNamespaces) \"Legacy\" is neither a namespace name nor a prefix ending in '*'",
        ),
        (
            Settings {
                webhook_excluded_namespaces: Some(vec!["linkerd*".into()]),
                ..Settings::default()
            },
            "--webhook-excluded-namespace (webhookExcludedNamespaces) \"linkerd*\" keeps the Linkerd control plane's namespace linkerd away from the webhook",
        ),
        (
            Settings {
                linkerd_namespace: Some("openshift-linkerd".into()),
                platform: Some(Platform::OpenShift),
                ..Settings::default()
            },
            "\"openshift-*\" (from --platform openshift) keeps the Linkerd control plane's namespace openshift-linkerd away",
        ),
    ] {
        let err = settings.clone().resolve().unwrap_err().to_string();
        assert!(err.contains(want), "{settings:?}: {err}");
    }
    let fine = Settings {
        cni_namespace: Some("cni".into()),
        manage_nads: Some(true),
        ..Settings::default()
    };
    assert_eq!(fine.resolve().unwrap().cni_namespace, "cni");
    let restarts = Settings {
        restart_stale_workloads: Some(true),
        manage_nads: Some(true),
        ..Settings::default()
    };
    assert!(restarts.resolve().unwrap().restart_stale_workloads);
    // The cluster's networks alone are fine: pods opt in by their annotation.
    let cidrs = Settings {
        cluster_cidrs: Some(vec!["FD00:10::/56".into()]),
        ..Settings::default()
    };
    assert_eq!(cidrs.resolve().unwrap().cluster_cidrs, ["fd00:10::/56"]);
    // The protected networks are optional, alone or beside skipSecondarySubnets.
    let protected = Settings {
        protected_cidrs: Some(vec!["FD00:20::/48".into(), "192.168.0.0/16".into()]),
        ..Settings::default()
    };
    assert_eq!(
        protected.resolve().unwrap().protected_cidrs,
        ["fd00:20::/48", "192.168.0.0/16"]
    );
}

#[test]
fn cidrs_are_checked_and_written_canonically() {
    for (text, want) in [
        ("10.0.0.0/24", Ok("10.0.0.0/24")),
        ("10.0.0.5/32", Ok("10.0.0.5/32")),
        ("0.0.0.0/0", Ok("0.0.0.0/0")),
        ("FD00:0::/64", Ok("fd00::/64")),
        ("::/0", Ok("::/0")),
        (
            "10.0.0.5/24",
            Err(
                "has host bits set: the network is 10.0.0.0/24; write that, or 10.0.0.5/32 for the one address",
            ),
        ),
        (
            "fd00::1/64",
            Err("has host bits set: the network is fd00::/64"),
        ),
        ("10.0.0.0", Err("is not a CIDR: write ADDRESS/PREFIX")),
        ("10.0.0.0/33", Err("the prefix must be 0 to 32")),
        ("fd00::/129", Err("the prefix must be 0 to 128")),
        ("10.0.0/8", Err("\"10.0.0\" is not an IP address")),
        ("10.0.0.0/x", Err("the prefix must be 0 to 32")),
    ] {
        match (cidr(text, API_SERVER_CIDR), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
            (Err(got), Err(want)) => {
                assert!(
                    got.starts_with(&format!("--api-server-cidr (apiServerCIDRs) {text:?} ")),
                    "{got}"
                );
                assert!(got.contains(want), "{text}: {got}");
            }
            (got, want) => panic!("{text}: {got:?}, not {want:?}"),
        }
    }
}

/// A duration has one written form, the chart's too: no spaces, the largest unit an hour; the
/// webhook and the NAD controller read it back as the same duration.
#[test]
fn durations_are_written_one_way() {
    for (text, want) in [
        ("10m", "10m"),
        ("1h 30m", "1h30m"),
        ("90m", "1h30m"),
        ("1h30m", "1h30m"),
        ("5400s", "1h30m"),
        ("1d", "24h"),
        ("1h 5s", "1h5s"),
        ("1s 500ms", "1s500ms"),
        ("2us 7ns", "2us7ns"),
    ] {
        let duration = humantime::parse_duration(text).unwrap();
        assert_eq!(duration_text(duration), want, "{text}");
        assert_eq!(humantime::parse_duration(want).unwrap(), duration, "{want}");
    }
}

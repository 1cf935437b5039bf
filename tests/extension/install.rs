//! `install` and the kpt packages are one source: the same options give the same objects,
//! whether set by `install` or by the packages' `# kpt-set:` setters (applied by the tests'
//! own apply-setters, `tests/deploy/setters.rs`); and what `install` refuses, it names.

use std::collections::BTreeMap;

use serde_json::Value;

use super::common::{Run, Yaml, parse_yaml_stream, repo_path, run_with_args, snapshot};
use crate::deploy::setters::apply_setters;
use crate::deploy::to_json;

/// One way to install: `install`'s flags, and the packages' setters and parts and the
/// chart's values (JSON; the namespace is the release's) that match.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) flags: &'static [&'static str],
    setters: &'static [(&'static str, &'static str)],
    nad_controller: bool,
    /// `deploy-restarts/` too, and `--restart-stale-workloads=true` with the case's other
    /// `--restart-*` flags added by hand at the end of the controller's args, and its memory
    /// limit raised to 128Mi, as its README says (they are no setters of the packages).
    restarts: bool,
    network_resources: bool,
    cert_manager: bool,
    pub(crate) values: &'static str,
}

const NR_FILE: &str = "/etc/linkerd-multus/network-resources/network-resources.yaml";

pub(crate) const CASES: &[Case] = &[
    Case {
        name: "defaults",
        flags: &[],
        setters: &[],
        nad_controller: false,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: "{}",
    },
    Case {
        name: "another namespace, 3 replicas, Ignore",
        flags: &[
            "--namespace=mesh-webhook",
            "--replicas=3",
            "--failure-policy=Ignore",
            "--priority-class-name=webhooks",
            "-L",
            "l5d",
        ],
        setters: &[
            ("namespace", "mesh-webhook"),
            ("replicas", "3"),
            ("failure-policy", "Ignore"),
            ("priority-class-name", "webhooks"),
            ("linkerd-namespace", "l5d"),
        ],
        nad_controller: false,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: r#"{"replicas": 3, "failurePolicy": "Ignore", "priorityClassName": "webhooks", "linkerdNamespace": "l5d"}"#,
    },
    Case {
        name: "the NAD controller",
        flags: &["--manage-nads", "--cni-namespace=cni"],
        setters: &[("missing-nad", "attach"), ("cni-namespace", "cni")],
        nad_controller: true,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: r#"{"manageNADs": true, "cniNamespace": "cni"}"#,
    },
    Case {
        name: "the NAD controller, restarting stale workloads",
        flags: &[
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-concurrency=3",
            "--restart-deadline=15m",
            "--namespace=mesh",
        ],
        setters: &[("missing-nad", "attach"), ("namespace", "mesh")],
        nad_controller: true,
        restarts: true,
        network_resources: false,
        cert_manager: false,
        values: r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartConcurrency": 3, "restartDeadline": "15m"}"#,
    },
    Case {
        name: "network resources",
        flags: &["--network-resources"],
        setters: &[("network-resources", NR_FILE)],
        nad_controller: false,
        restarts: false,
        network_resources: true,
        cert_manager: false,
        values: r#"{"networkResources": true}"#,
    },
    Case {
        name: "the API server's addresses, OpenShift's monitoring",
        flags: &[
            "--api-server-cidr=10.0.0.0/24",
            "--api-server-cidr=fd00::/64",
            "--metrics-namespace=openshift-monitoring,openshift-user-workload-monitoring",
        ],
        setters: &[
            ("api-server-cidr", "10.0.0.0/24"),
            ("api-server-cidr-ipv6", "fd00::/64"),
            (
                "metrics-namespaces",
                "[openshift-monitoring, openshift-user-workload-monitoring]",
            ),
        ],
        nad_controller: false,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: r#"{"apiServerCIDRs": ["10.0.0.0/24", "fd00::/64"], "metricsNamespaces": ["openshift-monitoring", "openshift-user-workload-monitoring"]}"#,
    },
    Case {
        name: "secondary networks' subnets skipped, the cluster's networks and protected ones",
        flags: &[
            "--skip-secondary-subnets=enabled",
            "--cluster-cidr=10.244.0.0/16,fd00:10::/56",
            "--cluster-cidr",
            "10.96.0.0/12",
            "--protected-cidr=192.168.0.0/16,203.0.113.0/24",
        ],
        setters: &[
            ("skip-secondary-subnets", "enabled"),
            (
                "cluster-cidrs",
                "[10.244.0.0/16, fd00:10::/56, 10.96.0.0/12]",
            ),
            ("protected-cidrs", "[192.168.0.0/16, 203.0.113.0/24]"),
        ],
        nad_controller: false,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: r#"{"skipSecondarySubnets": "enabled", "clusterCIDRs": ["10.244.0.0/16", "fd00:10::/56", "10.96.0.0/12"], "protectedCIDRs": ["192.168.0.0/16", "203.0.113.0/24"]}"#,
    },
    Case {
        name: "OpenShift, a mirror's image, namespaces kept away from the webhook",
        flags: &[
            "--platform=openshift",
            "--image=mirror.example:5000/linkerd/linkerd-multus@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "--webhook-excluded-namespace=legacy-apps,batch-*",
        ],
        setters: &[
            (
                "image",
                "mirror.example:5000/linkerd/linkerd-multus@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ),
            (
                "webhook-excluded-namespaces",
                "[openshift, openshift-*, legacy-apps, batch-*]",
            ),
            (
                "metrics-namespaces",
                "[openshift-monitoring, openshift-user-workload-monitoring]",
            ),
        ],
        nad_controller: false,
        restarts: false,
        network_resources: false,
        cert_manager: false,
        values: r#"{"platform": "openshift", "image": {"registry": "mirror.example:5000/linkerd", "name": "linkerd-multus", "digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, "webhookExcludedNamespaces": ["legacy-apps", "batch-*"]}"#,
    },
    Case {
        name: "cert-manager, everything",
        flags: &[
            "--certs=cert-manager",
            "--namespace=mesh",
            "--manage-nads",
            "--network-resources",
        ],
        setters: &[
            ("namespace", "mesh"),
            ("missing-nad", "attach"),
            ("network-resources", NR_FILE),
        ],
        nad_controller: true,
        restarts: false,
        network_resources: true,
        cert_manager: true,
        values: r#"{"certs": "cert-manager", "manageNADs": true, "networkResources": true}"#,
    },
];

/// The packages' defaults of every setter, as their READMEs document them.
const DEFAULTS: [(&str, &str); 16] = [
    ("image", "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0"),
    ("webhook-excluded-namespaces", "[]"),
    ("namespace", "linkerd-multus"),
    ("replicas", "2"),
    ("failure-policy", "Fail"),
    ("priority-class-name", "system-cluster-critical"),
    ("linkerd-namespace", "linkerd"),
    ("missing-nad", "deny"),
    ("cni-namespace", "linkerd-cni"),
    ("network-resources", ""),
    ("skip-secondary-subnets", "disabled"),
    ("cluster-cidrs", "[]"),
    ("protected-cidrs", "[]"),
    ("api-server-cidr", "0.0.0.0/0"),
    ("api-server-cidr-ipv6", "::/0"),
    ("metrics-namespaces", "[monitoring]"),
];

pub(crate) type Objects = BTreeMap<(String, String, String), Value>;

/// The YAML files of `dir` with `setters` applied, as objects.
fn package(dir: &str, setters: &[(&str, &str)], with_cert_manager: bool) -> Vec<Yaml> {
    let mut out = Vec::new();
    for (rel, bytes) in snapshot(&repo_path(dir)) {
        if !rel.ends_with(".yaml") || (rel.starts_with("cert-manager/") && !with_cert_manager) {
            continue;
        }
        let text = apply_setters(&String::from_utf8(bytes).unwrap(), setters);
        out.extend(parse_yaml_stream(&text).unwrap());
    }
    out
}

/// What a package user gets for `case`: the packages set with its setters, and without
/// cert-manager, the inject-ca-from annotation removed (deploy/README.md, step 1).
fn from_packages(case: &Case) -> Objects {
    let mut setters: BTreeMap<&str, &str> = DEFAULTS.into_iter().collect();
    setters.extend(case.setters.iter().copied());
    let setters: Vec<(&str, &str)> = setters.into_iter().collect();
    let mut objects = package("deploy", &setters, case.cert_manager);
    if case.nad_controller {
        objects.extend(package("deploy-nad-controller", &setters, false));
    }
    if case.restarts {
        objects.extend(package("deploy-restarts", &setters, false));
    }
    if case.network_resources {
        objects.extend(package("deploy-network-resources", &setters, false));
    }
    let mut out = by_id(&objects);
    if case.restarts {
        let deployment = out
            .iter_mut()
            .find(|(id, _)| id.0 == "Deployment" && id.2 == "linkerd-multus-nad-controller")
            .unwrap()
            .1;
        let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array_mut()
            .unwrap();
        for flag in case.flags.iter().filter(|f| f.starts_with("--restart-")) {
            args.push(Value::from(match *flag {
                "--restart-stale-workloads" => "--restart-stale-workloads=true",
                given => given,
            }));
        }
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] =
            Value::from("128Mi");
    }
    if case.flags.contains(&"--platform=openshift") {
        // The README's step on OpenShift: host-network traffic, in place of the two blocks.
        let policy = out
            .iter_mut()
            .find(|(id, _)| id.0 == "NetworkPolicy" && id.2 == "linkerd-multus-webhook")
            .unwrap()
            .1;
        policy["spec"]["ingress"][0]["from"] = serde_json::json!([{"namespaceSelector":
            {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}}}]);
    }
    if !case.cert_manager {
        let mwc = out
            .iter_mut()
            .find(|(id, _)| id.0 == "MutatingWebhookConfiguration")
            .unwrap()
            .1;
        mwc["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
    }
    out
}

pub(crate) fn by_id(objects: &[Yaml]) -> Objects {
    let mut out = Objects::new();
    for object in objects {
        assert!(
            out.insert(object.id(), to_json(object)).is_none(),
            "{:?} twice",
            object.id()
        );
    }
    out
}

/// `install --ignore-cluster` with `flags`: its objects, the generated certificate material
/// taken out ([`take_certificates`]).
pub(crate) fn from_install(flags: &[&str]) -> Objects {
    let mut args = vec!["install", "--ignore-cluster"];
    args.extend(flags);
    let run = run_with_args(b"", &args);
    assert_eq!(run.code, 0, "install {flags:?}: {}", run.stderr);
    let docs = parse_yaml_stream(&run.stdout).unwrap();
    assert_eq!(
        docs[0].str_at(&["kind"]),
        Some("Namespace"),
        "{flags:?}: the Namespace first"
    );
    let mut out = by_id(&docs);
    take_certificates(&mut out, &format!("install {flags:?}"));
    out
}

/// Takes the webhook's Secret and the configuration's caBundle out of `objects`, after
/// checking that they agree (the Secret's CA is the caBundle of every webhook) and that the
/// Secret holds ca.crt, tls.crt and tls.key: certificate bytes differ from run to run.
pub(crate) fn take_certificates(objects: &mut Objects, what: &str) {
    let secret = objects
        .iter()
        .find(|(id, _)| id.0 == "Secret")
        .map(|(id, _)| id.clone());
    if let Some(id) = secret {
        let secret = objects.remove(&id).unwrap();
        let ca = secret["data"]["ca.crt"].as_str().unwrap().to_string();
        for hook in objects
            .iter_mut()
            .find(|(id, _)| id.0 == "MutatingWebhookConfiguration")
            .unwrap()
            .1["webhooks"]
            .as_array_mut()
            .unwrap()
        {
            let bundle = hook["clientConfig"]
                .as_object_mut()
                .unwrap()
                .remove("caBundle");
            assert_eq!(
                bundle,
                Some(Value::String(ca.clone())),
                "{what}: the caBundle"
            );
        }
        let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"], "{what}");
    }
}

#[test]
fn install_and_the_packages_give_the_same_objects_for_the_same_options() {
    for case in CASES {
        let want = from_packages(case);
        let got = from_install(case.flags);
        let ids = |o: &Objects| o.keys().cloned().collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "{}: the objects", case.name);
        for (id, object) in &want {
            assert_eq!(&got[id], object, "{}: {id:?}", case.name);
        }
    }
}

/// The same settings in a file give the same output as the flags, and flags win over it.
#[test]
fn a_config_file_gives_what_the_flags_give() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("install.yaml");
    std::fs::write(
        &file,
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\nmetadata:\n  name: cluster\nspec:\n  namespace: mesh\n  replicas: 5\n  manageNADs: true\n  cniNamespace: cni\n  certs: cert-manager\n  linkerdNamespace: l5d\n",
    )
    .unwrap();
    let install = |args: &[&str]| {
        let mut all = vec!["install", "--ignore-cluster"];
        all.extend(args);
        let run = run_with_args(b"", &all);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run.stdout
    };
    let config = format!("--config={}", file.display());
    let flags = [
        "--namespace=mesh",
        "--replicas=3",
        "--manage-nads",
        "--cni-namespace=cni",
        "--certs=cert-manager",
        "-L",
        "l5d",
    ];
    assert_eq!(install(&[&config, "--replicas=3"]), install(&flags));
    assert_eq!(
        install(&[&config, "-L", "linkerd"]),
        install(&flags[..5]).replace("replicas: 3", "replicas: 5")
    );
}

fn install(args: &[&str]) -> Run {
    let mut all = vec!["install"];
    all.extend(args);
    run_with_args(b"", &all)
}

/// Each refusal: exit 1, nothing on stdout, one line naming what is wrong and what to do.
#[test]
fn bad_input_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let head = "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\n";
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("--config={}", path.display())
    };
    let unknown = file("unknown.yaml", &format!("{head}spec:\n  replica: 3\n"));
    let kind = file(
        "kind.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    let value = file(
        "value.yaml",
        &format!("{head}spec:\n  failurePolicy: Sometimes\n"),
    );
    let image = file("image.yaml", &format!("{head}spec:\n  image: [a]\n"));
    let excluded = file(
        "excluded.yaml",
        &format!("{head}spec:\n  webhookExcludedNamespaces: openshift-*\n"),
    );
    let skip = file(
        "skip.yaml",
        &format!("{head}spec:\n  skipSecondarySubnets: enabled\n"),
    );
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec![&unknown],
            vec![
                "unknown.yaml: unknown setting spec.replica (did you mean spec.replicas?); valid settings are namespace",
            ],
        ),
        (
            vec![&kind],
            vec![
                "kind.yaml: must be a LinkerdMultusInstall (multus.linkerd.io/v1alpha1)",
                "start it with",
            ],
        ),
        (
            vec![&value],
            vec!["value.yaml: spec.failurePolicy: must be Fail or Ignore"],
        ),
        (
            vec!["--config=/nonexistent.yaml"],
            vec!["--config /nonexistent.yaml: "],
        ),
        (
            vec!["--namespace=Mesh", "--ignore-cluster"],
            vec!["--namespace (namespace) \"Mesh\" is not a namespace name"],
        ),
        (
            vec!["--replicas=0", "--ignore-cluster"],
            vec!["give at least 1"],
        ),
        (
            vec!["--namespace=kube-system", "--ignore-cluster"],
            vec![
                "error: --namespace (namespace) \"kube-system\" is Kubernetes's own: install puts linkerd-multus only in a namespace of its own, which uninstall deletes with everything in it; choose another (the default is linkerd-multus)\n",
            ],
        ),
        (
            vec!["--namespace=linkerd", "--ignore-cluster"],
            vec!["--namespace (namespace) \"linkerd\" is the Linkerd control plane's:"],
        ),
        (
            vec!["--namespace=openshift-monitoring", "--ignore-cluster"],
            vec!["--namespace (namespace) \"openshift-monitoring\" is OpenShift's own:"],
        ),
        (
            vec!["--api-server-cidr=10.0.0.1/8", "--ignore-cluster"],
            vec![
                "--api-server-cidr (apiServerCIDRs) \"10.0.0.1/8\" has host bits set: the network is 10.0.0.0/8; write that, or 10.0.0.1/32 for the one address",
            ],
        ),
        (
            vec![
                "--cluster-cidr=10.244.0.0/16,10.96.0.1/12",
                "--ignore-cluster",
            ],
            vec![
                "error: --cluster-cidr (clusterCIDRs) \"10.96.0.1/12\" has host bits set: the network is 10.96.0.0/12; write that, or 10.96.0.1/32 for the one address\n",
            ],
        ),
        (
            vec!["--cluster-cidr=10.244.0.0", "--ignore-cluster"],
            vec![
                "--cluster-cidr (clusterCIDRs) \"10.244.0.0\" is not a CIDR: write ADDRESS/PREFIX",
            ],
        ),
        (
            vec![
                "--protected-cidr=192.168.0.0/16,203.0.113.9/24",
                "--ignore-cluster",
            ],
            vec![
                "error: --protected-cidr (protectedCIDRs) \"203.0.113.9/24\" has host bits set: the network is 203.0.113.0/24; write that, or 203.0.113.9/32 for the one address\n",
            ],
        ),
        (
            vec!["--protected-cidr=192.168.0.0", "--ignore-cluster"],
            vec![
                "--protected-cidr (protectedCIDRs) \"192.168.0.0\" is not a CIDR: write ADDRESS/PREFIX",
            ],
        ),
        // Skipping by default without the cluster's networks: the webhook would not start.
        (
            vec!["--skip-secondary-subnets=enabled", "--ignore-cluster"],
            vec![
                "error: --skip-secondary-subnets (skipSecondarySubnets) enabled needs --cluster-cidr (clusterCIDRs): without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy, so the webhook refuses to start;",
            ],
        ),
        (
            vec![&skip, "--ignore-cluster"],
            vec!["--skip-secondary-subnets (skipSecondarySubnets) enabled needs --cluster-cidr"],
        ),
        (
            vec!["--metrics-namespace=Prometheus", "--ignore-cluster"],
            vec!["--metrics-namespace (metricsNamespaces) \"Prometheus\" is not a namespace name"],
        ),
        (
            vec!["--cni-namespace=cni", "--ignore-cluster"],
            vec!["add --manage-nads"],
        ),
        (
            vec!["--restart-stale-workloads", "--ignore-cluster"],
            vec![
                "--restart-stale-workloads (restartStaleWorkloads) is for the NAD controller",
                "add --manage-nads (manageNADs: true), or leave it out",
            ],
        ),
        // A mirror's image written as a user might get it wrong.
        (
            vec![
                "--image=mirror.example:5000/linkerd/multus",
                "--ignore-cluster",
            ],
            vec![
                "error: --image (image) \"mirror.example:5000/linkerd/multus\" has neither a tag nor a digest: the kubelet would pull :latest, which changes under the replicas; add the tag (:v0.1.0) or the digest (@sha256:...): write REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST, e.g. mirror.example:5000/linkerd/multus:v0.1.0 (the default is ghcr.io/linkerd-multus/linkerd-multus:v0.1.0)\n",
            ],
        ),
        (
            vec![
                "--image=mirror.example:5000/linkerd/multus@sha256:12ab",
                "--ignore-cluster",
            ],
            vec![
                "--image (image) \"mirror.example:5000/linkerd/multus@sha256:12ab\" has a digest \"sha256:12ab\" whose sha256 is not 64 lower-case hex digits (4 given)",
            ],
        ),
        (
            vec![
                "--image=Mirror.example/Linkerd/multus:0.1.0",
                "--ignore-cluster",
            ],
            vec!["has a path component \"Linkerd\" that is not lower-case letters and digits"],
        ),
        (
            vec![&image],
            vec!["image.yaml: spec.image: must be a string, not a sequence"],
        ),
        // Namespaces kept away from the webhook: a glob that is not a prefix, everything,
        // the Linkerd control plane's.
        (
            vec![
                "--webhook-excluded-namespace=open*shift",
                "--ignore-cluster",
            ],
            vec![
                "error: --webhook-excluded-namespace (webhookExcludedNamespaces) \"open*shift\" is neither a namespace name nor a prefix ending in '*': lower-case letters, digits and '-' (e.g. legacy-apps, or openshift-* for every namespace that starts so)\n",
            ],
        ),
        (
            vec!["--webhook-excluded-namespace=*", "--ignore-cluster"],
            vec!["\"*\" keeps every namespace away from the webhook: no pod would be attached"],
        ),
        (
            vec!["--webhook-excluded-namespace=linkerd*", "--ignore-cluster"],
            vec![
                "error: --webhook-excluded-namespace (webhookExcludedNamespaces) \"linkerd*\" keeps the Linkerd control plane's namespace linkerd away from the webhook: its pods would start without linkerd-cni; leave it out, or name the namespaces to keep away one by one\n",
            ],
        ),
        (
            vec![&excluded],
            vec![
                "excluded.yaml: spec.webhookExcludedNamespaces: must be a list of strings, not a scalar",
            ],
        ),
        // No cluster to read the namespace and the certificates from.
        (
            vec!["--api-addr=127.0.0.1:1"],
            vec![
                "reading the cluster for the extension's namespace and the webhook's certificates",
                "pass --ignore-cluster",
            ],
        ),
        (
            vec!["--api-addr=127.0.0.1:1", "--certs=cert-manager"],
            vec!["reading the cluster for the extension's namespace"],
        ),
    ];
    refused(cases);
}

/// Each case's run exits 1 with nothing on stdout and an error naming each of its `wants`.
fn refused(cases: Vec<(Vec<&str>, Vec<&str>)>) {
    for (args, wants) in cases {
        let run = install(&args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}: {}",
            run.stderr
        );
        for want in wants {
            assert!(
                run.stderr.contains(want),
                "{args:?}: {want:?} not in {}",
                run.stderr
            );
        }
    }
}

/// Whether the webhook's port stays open to every address is said on stderr, and whether
/// the namespace was checked.
#[test]
fn warnings_say_what_stays_open_and_what_was_not_checked() {
    let open = "warning: the NetworkPolicy admits the webhook's port 8443 from every address: pass --api-server-cidr (apiServerCIDRs) with your control plane's addresses, once for each range, to admit only the API server\n";
    let unchecked =
        "warning: --ignore-cluster: whether namespace linkerd-multus exists was not checked;";
    for (flags, warns) in [
        (&[][..], true),
        (&["--api-server-cidr=10.0.0.0/24"][..], false),
        (&["--api-server-cidr=10.0.0.0/24,::/0"][..], true),
    ] {
        let run = install(&[&["--ignore-cluster"][..], flags].concat());
        assert_eq!(run.code, 0, "{flags:?}: {}", run.stderr);
        assert_eq!(
            run.stderr.contains(open),
            warns,
            "{flags:?}: {}",
            run.stderr
        );
        assert!(run.stderr.starts_with(unchecked), "{}", run.stderr);
    }
}

/// The command line's own refusals: clap names the flag and the valid values (exit 2).
#[test]
fn bad_flag_values_are_refused_by_the_command_line() {
    for (args, want) in [
        (
            &["--failure-policy=fail"][..],
            "[possible values: Fail, Ignore]",
        ),
        (&["--replicas=two"][..], "--replicas"),
        (
            &["--certs=vault"][..],
            "[possible values: generate, cert-manager, openshift-service-ca]",
        ),
        (
            &["--platform=OpenShift"][..],
            "[possible values: kubernetes, openshift]",
        ),
        (
            &["--skip-secondary-subnets=true"][..],
            "[possible values: enabled, disabled]",
        ),
    ] {
        let run = install(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
}

/// `install --help` shows how to apply the output (server-side, with the field manager the
/// docs use), an example for OpenShift, that the output holds the webhook's private key,
/// and no folder of the repository, which a user with the binary alone does not have.
#[test]
fn help_shows_an_example_and_warns_of_the_private_key() {
    for args in [&["install", "--help"][..], &["install", "-h"]] {
        let run = run_with_args(b"", args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for want in [
            "Examples:\n",
            "  linkerd multus check --pre\n  linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -\n",
            "  linkerd multus install --platform openshift --manage-nads \\\n      --image mirror.example:5000/linkerd/multus:v0.1.0 \\\n",
            "The output holds the webhook's private key (the Secret linkerd-multus-webhook-tls, unless\n--certs cert-manager or openshift-service-ca): pipe it to kubectl. Do not commit it to Git; if\nyou redirect it to a file, keep that file private and delete it once applied.",
            "--image <REFERENCE>",
            "--platform <PLATFORM>",
            "--webhook-excluded-namespace <NAME|PREFIX*>",
            "--metrics-namespace <NAMESPACE>",
            "--skip-secondary-subnets <enabled|disabled>",
            "--cluster-cidr <CIDR>",
            "--protected-cidr <CIDR>",
        ] {
            assert!(
                run.stdout.contains(want),
                "{args:?}: {want:?} not in\n{}",
                run.stdout
            );
        }
    }
    for args in [&["install", "--help"][..], &["check", "--help"]] {
        let run = run_with_args(b"", args);
        for folder in [
            "deploy/",
            "deploy-nad-controller",
            "deploy-network-resources",
        ] {
            assert!(
                !run.stdout.contains(folder),
                "{args:?} names {folder}:\n{}",
                run.stdout
            );
        }
    }
}

//! Which namespaces get a NAD and which workloads are attached, what the NAD holds for every
//! Linkerd generation and CNI config, the proxy UID and the networks annotation's forms.

use super::*;

/// Per case: the namespaces given a NAD and the workloads attached.
const ATTACHMENT_DECISIONS: &[(&str, &[&str], &[&str])] = &[
    ("e2e-namespace-plain", &[], &[]),
    (
        "e2e-namespace-enabled",
        &["test-ns-1", "test-ns-2"],
        &["Pod test-ns-2/test-pod", "Deployment test-ns-2/ingress"],
    ),
    ("e2e-namespace-disabled", &[], &[]),
    ("e2e-annotation-removed", &[], &[]),
    ("pod-own-annotations", &["apps"], &["Pod apps/attached"]),
    (
        "pod-empty-annotations",
        &["demo"],
        &["Pod demo/empty-values"],
    ),
    (
        "pod-overrides-namespace",
        &["demo", "meshed", "multus"],
        &[
            "Pod demo/inject-ingress",
            "Deployment meshed/opt-in",
            "Deployment multus/opt-in",
        ],
    ),
    (
        "control-plane",
        &["linkerd"],
        &[
            "Deployment linkerd/linkerd-destination",
            "Deployment linkerd/linkerd-identity",
            "Deployment linkerd/linkerd-proxy-injector",
            "CronJob linkerd/linkerd-heartbeat",
        ],
    ),
    (
        "control-plane-no-namespace",
        &["linkerd"],
        &["Deployment linkerd/linkerd-destination"],
    ),
    ("control-plane-namespace-only", &["linkerd"], &[]),
    (
        "networks-comma",
        &["demo"],
        &[
            "Deployment demo/spaces",
            "Deployment demo/tight",
            "Deployment demo/present",
            "Deployment demo/present-spaced",
            "Deployment demo/own-ns",
            "Deployment demo/iface",
            "Pod demo/single",
        ],
    ),
    (
        "networks-json",
        &["demo"],
        &[
            "Deployment demo/json",
            "Deployment demo/json-compact",
            "Deployment demo/json-present",
            "Pod demo/json-own-ns",
            "Deployment demo/json-multiline",
        ],
    ),
    (
        "networks-empty-values",
        &["demo"],
        &[
            "Deployment demo/empty",
            "Deployment demo/blank",
            "Deployment demo/empty-json",
            "Deployment demo/twice",
        ],
    ),
    (
        "workload-kinds",
        &["demo"],
        &[
            "Pod demo/pod",
            "Deployment demo/deployment",
            "StatefulSet demo/statefulset",
            "DaemonSet demo/daemonset",
            "ReplicaSet demo/replicaset",
            "ReplicationController demo/replicationcontroller",
            "Job demo/job",
            "CronJob demo/cronjob",
        ],
    ),
    (
        "workload-kinds-custom",
        &["demo"],
        &["Rollout demo/canary", "CloneSet demo/clone"],
    ),
    ("user-nad", &[], &["Deployment demo/web"]),
    ("user-reference", &["plain"], &["Deployment plain/manual"]),
    (
        "settings-namespaces",
        &["team-a", "team-b"],
        &["Deployment team-a/api", "Deployment team-b/api"],
    ),
    ("unknown-namespace", &["ghost"], &["Deployment ghost/self"]),
    ("workload-without-namespace", &[""], &["Deployment /app"]),
    ("no-configmap-needed", &[], &[]),
    (
        "no-path-annotations",
        &["demo", "other"],
        &["Deployment demo/web", "Pod other/standalone"],
    ),
    ("rerender-disabled", &[], &[]),
    ("rerender-annotation-removed", &[], &[]),
    (
        "rerender-user-reference",
        &["demo"],
        &["Deployment demo/manual-ref"],
    ),
    (
        "rerender-still-enabled",
        &["demo"],
        &[
            "Deployment demo/web",
            "StatefulSet demo/worker",
            "Deployment demo/json",
            "Pod demo/manual",
            "Deployment demo/own-uid",
        ],
    ),
    (
        "rerender-config-changed",
        &["demo"],
        &[
            "Deployment demo/web",
            "StatefulSet demo/worker",
            "Deployment demo/json",
            "Pod demo/manual",
            "Deployment demo/own-uid",
        ],
    ),
];

/// Which namespaces get a NAD and which workloads get attached, per case: the decision rules
/// of the original webhook (DOMAIN.md section 1) and the rule 3.
#[test]
fn attachment_decisions() {
    let mut problems = Vec::new();
    for (case, nads, attached) in ATTACHMENT_DECISIONS {
        let r = Rendered::of(case);
        if r.run.code != 0 {
            problems.push(format!("{case}: exit {}: {}", r.run.code, r.run.stderr));
            continue;
        }
        if r.nads() != set(nads) {
            problems.push(format!(
                "{case}: generated NADs in {:?}, expected {:?}",
                r.nads(),
                set(nads)
            ));
        }
        let nad = nad_name(&r.rl);
        if r.attached(&nad) != set(attached) {
            problems.push(format!(
                "{case}: attached {:?}, expected {:?}",
                r.attached(&nad),
                set(attached)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The NAD config of every Linkerd generation: every field kept, `policy` dropped, the
/// kubeconfig path filled in, `cniVersion` added.
#[test]
fn generations_keep_every_field() {
    for generation in ["stable-2.11", "edge-24.5", "version-2.18", "version-2.19"] {
        let case = format!("generation-{}", generation.replace('.', "-"));
        // The fixture as kpt sent it, taken from the case input.
        let input = parse_yaml(&input_of(&case)).unwrap();
        let source = items_of(&input)
            .iter()
            .find(|i| {
                i.id()
                    == (
                        "ConfigMap".into(),
                        "linkerd-cni".into(),
                        "linkerd-cni-config".into(),
                    )
            })
            .and_then(|i| i.str_at(&["data", "cni_network_config"]))
            .expect("CNI ConfigMap in the case input")
            .to_string();
        let mut want: serde_json::Value = serde_json::from_str(&source).unwrap();
        let obj = want.as_object_mut().unwrap();
        obj.remove("policy");
        obj.insert("cniVersion".into(), "0.3.0".into());
        obj["kubernetes"]["kubeconfig"] = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into();

        let r = Rendered::of(&case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni");
        assert_eq!(
            nad.str_at(&["metadata", "labels", MANAGED_BY]),
            Some("linkerd-multus"),
            "{case}: NAD not labelled as generated"
        );
        let got: serde_json::Value =
            serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
        assert_eq!(got, want, "{case}: NAD config");
        assert_eq!(
            r.attached("linkerd-cni"),
            set(&["Deployment demo/web"]),
            "{case}"
        );
    }
}

/// A hand-tuned CNI config: its own cniVersion and net dir, every extra field kept.
#[test]
fn custom_cni_config_is_kept() {
    let r = Rendered::of("cni-config-custom");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni");
    let got: serde_json::Value =
        serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
    assert_eq!(
        got["cniVersion"], "1.0.0",
        "cniVersion given by the CNI JSON wins"
    );
    assert_eq!(
        got["kubernetes"]["kubeconfig"], "/var/lib/cni/net.d/ZZZ-linkerd-cni-kubeconfig",
        "kubeconfig path follows dest_cni_net_dir"
    );
    let l = &got["linkerd"];
    assert_eq!(l["proxy-gid"], 2103);
    assert_eq!(l["iptables-mode"], "plain");
    assert_eq!(l["ipv6"], true);
    assert_eq!(l["use-wait-flag"], true);
    assert_eq!(
        l["inbound-ports-to-ignore"],
        serde_json::json!(["4191", "4190", "4567-4570"])
    );
    assert_eq!(
        l["subnets-to-ignore"],
        serde_json::json!(["10.0.0.0/8", "fd00::/8"])
    );
    assert_eq!(
        l["x-vendor"],
        serde_json::json!({"note": "café \"quoted\"", "list": [1, -2, true, null]})
    );
    assert_eq!(got["log_level"], "debug");
}

#[test]
fn openshift_proxy_uid() {
    let r = Rendered::of("openshift-uid-range");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.proxy_uid("Deployment", "demo", "web").as_deref(),
        Some("1000002102")
    );
    assert_eq!(
        r.proxy_uid("Pod", "demo", "pod").as_deref(),
        Some("1000002102")
    );
    assert_eq!(
        r.proxy_uid("Deployment", "demo", "own-uid").as_deref(),
        Some("2102"),
        "a workload's own proxy-uid is kept"
    );
    let own = r.item("Deployment", "demo", "own-uid");
    assert!(
        !own.annotation("multus.linkerd.io/owned")
            .unwrap_or("")
            .contains("proxy-uid"),
        "the user's proxy-uid is not recorded as owned"
    );
    let web = r.item("Deployment", "demo", "web");
    let owned = web.annotation("multus.linkerd.io/owned").unwrap_or("");
    assert!(
        owned.split(',').any(|p| p == "proxy-uid=1000002102")
            && owned.split(',').any(|p| p == "network=created"),
        "owned annotation of web: {owned:?}"
    );
    for ns in ["broken", "overflow"] {
        assert_eq!(r.proxy_uid("Deployment", ns, "web"), None, "{ns}");
        assert!(
            r.attached("linkerd-cni")
                .contains(&format!("Deployment {ns}/web")),
            "{ns}: a malformed range does not stop the attachment"
        );
    }
    for (ns, range) in [("broken", "1000000000"), ("overflow", "abc/10000")] {
        let named = results_of(&r.rl).iter().any(|res| {
            res.str_at(&["severity"]) == Some("warning")
                && res.str_at(&["message"]).is_some_and(|m| m.contains(range))
                && (res.str_at(&["resourceRef", "name"]) == Some(ns)
                    || res.str_at(&["resourceRef", "namespace"]) == Some(ns))
        });
        assert!(
            named,
            "no warning about the malformed range {range} on namespace {ns} or its workloads:\n{}",
            r.messages("warning").join("\n")
        );
    }
    // The proxy-uid is a quoted string (a plain number would not be a valid annotation).
    let text = &r.run.stdout;
    assert!(
        text.contains("config.linkerd.io/proxy-uid: \"1000002102\"")
            || text.contains("config.linkerd.io/proxy-uid: '1000002102'"),
        "proxy-uid not written as a quoted string"
    );
}

#[test]
fn control_plane_gets_no_proxy_uid() {
    let r = Rendered::of("control-plane");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    for name in [
        "linkerd-destination",
        "linkerd-identity",
        "linkerd-proxy-injector",
    ] {
        assert_eq!(r.proxy_uid("Deployment", "linkerd", name), None, "{name}");
    }
    assert_eq!(r.proxy_uid("CronJob", "linkerd", "linkerd-heartbeat"), None);
    // The CronJob's pod template is under jobTemplate.
    let hb = r.item("CronJob", "linkerd", "linkerd-heartbeat");
    assert_eq!(
        hb.str_at(&[
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some("linkerd-cni")
    );
}

#[test]
fn networks_annotation_forms() {
    let r = Rendered::of("networks-comma");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let nets = |kind: &str, name: &str| {
        let item = r.item(kind, "demo", name);
        template_annotation(&item, &r.rl, "k8s.v1.cni.cncf.io/networks")
            .unwrap()
            .to_string()
    };
    // The user's entries come first, unchanged, in their own form.
    assert!(nets("Deployment", "spaces").starts_with("a, other/b@net2,"));
    assert!(nets("Deployment", "tight").starts_with("a,b,"));
    assert_eq!(nets("Deployment", "present"), "a,linkerd-cni");
    assert_eq!(nets("Deployment", "present-spaced"), "a, linkerd-cni");
    assert_eq!(nets("Deployment", "own-ns"), "demo/linkerd-cni");
    assert_eq!(nets("Deployment", "iface"), "linkerd-cni@eth9");
    assert!(nets("Pod", "single").starts_with("macvlan-conf,"));
    for (kind, name) in [("Deployment", "present"), ("Deployment", "own-ns")] {
        assert_eq!(
            r.item(kind, "demo", name)
                .annotation("multus.linkerd.io/owned"),
            None,
            "{name}: nothing added, nothing owned"
        );
    }
    assert!(
        r.item("Deployment", "demo", "spaces")
            .annotation("multus.linkerd.io/owned")
            .unwrap_or("")
            .contains("network=appended")
    );

    let r = Rendered::of("networks-json");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let json = |kind: &str, name: &str| -> serde_json::Value {
        let item = r.item(kind, "demo", name);
        let text = template_annotation(&item, &r.rl, "k8s.v1.cni.cncf.io/networks").unwrap();
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}: {text}"))
    };
    assert_eq!(
        json("Deployment", "json"),
        serde_json::json!([
            {"name": "a"},
            {"name": "b", "namespace": "other", "interface": "net2",
             "ips": ["10.1.1.7/24"], "cni-args": {"mode": "fast"}},
            {"name": "linkerd-cni"}
        ])
    );
    assert_eq!(
        json("Deployment", "json-compact"),
        serde_json::json!([
            {"name": "sriov", "mac": "02:00:00:00:00:01", "x-unknown": 1},
            {"name": "linkerd-cni"}
        ])
    );
    assert_eq!(
        json("Deployment", "json-present"),
        serde_json::json!([{"name": "a"}, {"name": "linkerd-cni"}])
    );
    assert_eq!(
        json("Pod", "json-own-ns"),
        serde_json::json!([{"name": "linkerd-cni", "namespace": "demo"}])
    );
    assert_eq!(
        json("Deployment", "json-multiline"),
        serde_json::json!([
            {"name": "bridge", "default-route": ["10.0.0.1"]},
            {"name": "linkerd-cni"}
        ])
    );
}

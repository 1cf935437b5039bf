//! Settings across renders: config rollouts, NADs the user owns, every key changed, the
//! namespaces setting and file, and switching a namespace off.

use super::*;

/// Config rollouts: which pod templates carry the hash of their NAD's config (the invariants
/// check each value against the NAD in the workload's namespace), and what a changed ConfigMap
/// changes.
#[test]
fn config_rollout_stamps() {
    let stamped = |r: &Rendered| -> BTreeMap<String, String> {
        r.items()
            .iter()
            .filter_map(|i| {
                let hash = template_annotation(i, &r.rl, CONFIG_HASH)?;
                let (k, n, m) = i.id();
                Some((format!("{k} {n}/{m}"), hash.to_string()))
            })
            .collect()
    };
    let demo = [
        "Deployment demo/web",
        "Deployment demo/api",
        "StatefulSet demo/worker",
        "CronJob demo/report",
    ];
    let table: &[(&str, &[&str])] = &[
        ("rollout-all", &demo),
        (
            "rollout-labelled",
            &["Deployment demo/web", "StatefulSet demo/worker"],
        ),
        (
            "rollout-config-changed",
            &[&demo[..], &["Deployment team/app"]].concat(),
        ),
        ("rollout-off-removes", &[]),
        (
            "rollout-user-nad",
            &["Deployment demo/web", "Deployment other/api"],
        ),
        // configRollout defaults to off.
        ("rerender-still-enabled", &[]),
    ];
    for (case, want) in table {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let got: BTreeSet<String> = stamped(&r).into_keys().collect();
        assert_eq!(got, set(want), "{case}: stamped workloads");
    }

    // A user's NAD and a generated one have different configs: different hashes.
    let hashes = stamped(&Rendered::of("rollout-user-nad"));
    assert_ne!(
        hashes["Deployment demo/web"],
        hashes["Deployment other/api"]
    );

    // A changed ConfigMap: the generated NAD and the hashes of exactly the workloads attached
    // through it change; the workload on the user's NAD and the unattached ones do not.
    let case = "rollout-config-changed";
    let before = parse_yaml(&input_of(case)).unwrap();
    let r = Rendered::of(case);
    let changed: BTreeSet<String> = items_of(&before)
        .iter()
        .zip(r.items())
        .filter(|(a, b)| tree_difference(a, b, "").is_some())
        .map(|(_, b)| {
            let (k, n, m) = b.id();
            format!("{k} {n}/{m}")
        })
        .collect();
    let mut want = set(&demo);
    want.insert("NetworkAttachmentDefinition demo/linkerd-cni".into());
    assert_eq!(changed, want, "{case}: changed items");
    let old: BTreeMap<String, String> = items_of(&before)
        .iter()
        .filter_map(|i| {
            let hash = template_annotation(i, &before, CONFIG_HASH)?;
            let (k, n, m) = i.id();
            Some((format!("{k} {n}/{m}"), hash.to_string()))
        })
        .collect();
    let new = stamped(&r);
    for w in demo {
        assert_ne!(old[w], new[w], "{case}: {w} keeps its hash");
    }
    assert_eq!(old["Deployment team/app"], new["Deployment team/app"]);
}

#[test]
fn user_owned_nads() {
    let r = Rendered::of("user-nad");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    // Kept byte-identical: compare the item's text in input and output.
    let input = input_of("user-nad");
    let block = |text: &str| -> String {
        let start = text
            .find("- # Hand-written NAD")
            .or_else(|| text.find("- apiVersion: k8s.cni.cncf.io/v1"))
            .expect("user NAD in text");
        let rest = &text[start + 2..];
        let end = rest.find("\n- ").unwrap_or(rest.len());
        rest[..end].to_string()
    };
    let nad_in = block(&input);
    assert!(
        r.run.stdout.contains(
            "config: '{\"cniVersion\": \"0.3.1\", \"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"/etc/kubernetes/cni.kubeconfig\"}}'"
        ),
        "user NAD config not kept verbatim"
    );
    assert!(nad_in.contains("nodeSelector"));
    assert!(
        r.results_for("warning", "NetworkAttachmentDefinition", "linkerd-cni") >= 1,
        "no warning on the differing user NAD: {:?}",
        r.messages("warning")
    );

    let r = Rendered::of("user-reference");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert!(
        r.messages("warning").iter().any(|m| m.contains("plain")),
        "no warning that only a user-written reference keeps the NAD in plain: {:?}",
        r.messages("warning")
    );
    let manual = r.item("Deployment", "plain", "manual");
    assert_eq!(
        manual.annotation("multus.linkerd.io/owned"),
        None,
        "the user's reference is not the function's"
    );
}

#[test]
fn settings_change_every_key() {
    for case in ["settings-typed", "settings-configmap"] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let nads: BTreeSet<(String, String)> = r
            .items()
            .iter()
            .filter(|i| is_generated_nad(i))
            .map(|i| (i.id().1, i.id().2))
            .collect();
        // demo: enabled; linkerd-system: the control plane; both with nadName.
        assert_eq!(
            nads,
            [
                ("demo".to_string(), "linkerd-cni-net".to_string()),
                ("linkerd-system".to_string(), "linkerd-cni-net".to_string())
            ]
            .into_iter()
            .collect(),
            "{case}"
        );
        let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni-net");
        let cfg: serde_json::Value =
            serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
        assert_eq!(cfg["cniVersion"], "1.0.0", "{case}: cniVersion setting");
        assert_eq!(
            cfg["kubernetes"]["kubeconfig"], "/host/etc/cni/kubeconfig",
            "{case}: cniKubeconfig setting"
        );
        assert_eq!(
            cfg["log_level"], "info",
            "{case}: the ConfigMap of cniNamespace is used"
        );
        assert_eq!(
            r.proxy_uid("Deployment", "demo", "web").as_deref(),
            Some("3005"),
            "{case}: uidRangeAnnotation and proxyUIDOffset settings"
        );
        assert_eq!(
            r.proxy_uid("Deployment", "linkerd-system", "linkerd-destination"),
            None,
            "{case}"
        );
        assert!(
            r.attached("linkerd-cni-net")
                .contains("Deployment linkerd-system/linkerd-destination"),
            "{case}: linkerdNamespace setting"
        );
    }
    let r = Rendered::of("settings-configmap-structured");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.attached("linkerd-cni"),
        set(&["Deployment team-a/api", "Rollout team-a/canary"])
    );
    assert_eq!(r.nads(), set(&["team-a"]));
}

#[test]
fn settings_namespaces() {
    let r = Rendered::of("settings-namespaces");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.proxy_uid("Deployment", "team-a", "api").as_deref(),
        Some("2000002102")
    );
    // Namespaces not in the input: NADs at the end, in namespace order, at the documented path.
    let items = r.items();
    let tail: Vec<_> = items.iter().rev().take(2).rev().map(|i| i.id()).collect();
    assert_eq!(
        tail,
        vec![
            (
                "NetworkAttachmentDefinition".into(),
                "team-a".into(),
                "linkerd-cni".into()
            ),
            (
                "NetworkAttachmentDefinition".into(),
                "team-b".into(),
                "linkerd-cni".into()
            ),
        ]
    );
    let nad = r.item("NetworkAttachmentDefinition", "team-a", "linkerd-cni");
    assert_eq!(
        nad.annotation("config.kubernetes.io/path"),
        Some("team-a/networkattachmentdefinition_team-a_linkerd-cni.yaml")
    );
}

#[test]
fn nad_follows_its_namespace_file() {
    let r = Rendered::of("e2e-namespace-enabled");
    let items = r.items();
    for ns in ["test-ns-1", "test-ns-2"] {
        let pos = items
            .iter()
            .position(|i| i.id() == ("Namespace".into(), "".into(), ns.into()))
            .unwrap();
        let next = &items[pos + 1];
        assert_eq!(
            next.id(),
            (
                "NetworkAttachmentDefinition".into(),
                ns.into(),
                "linkerd-cni".into()
            ),
            "NAD right after Namespace {ns}"
        );
        let want = format!("namespaces/networkattachmentdefinition_{ns}_linkerd-cni.yaml");
        assert_eq!(next.annotation("config.kubernetes.io/path"), Some(&*want));
        assert_eq!(
            next.annotation("internal.config.kubernetes.io/path"),
            Some(&*want)
        );
    }
    let r = Rendered::of("workload-without-namespace");
    let nad = r.item("NetworkAttachmentDefinition", "", "linkerd-cni");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), None);
    assert_eq!(
        nad.annotation("config.kubernetes.io/path"),
        Some("networkattachmentdefinition_linkerd-cni.yaml")
    );
}

/// Switching a namespace off removes exactly what earlier renders added: rendering a case,
/// disabling its namespaces and rendering again gives the input back (same values, same
/// plain/quoted scalars, same key order), without the NADs.
#[test]
fn disable_restores_the_input() {
    let cases = [
        "generation-stable-2-11",
        "generation-version-2-19",
        "e2e-namespace-enabled",
        "networks-comma",
        "networks-json",
        "networks-empty-values",
        "workload-kinds",
        "openshift-uid-range",
        "yaml-fidelity",
        "json-items",
        "no-path-annotations",
        "rollout-all",
        "rollout-user-nad",
    ];
    let mut problems = Vec::new();
    for case in cases {
        let input = input_of(case);
        let first = run(input.as_bytes());
        assert_eq!(first.code, 0, "{case}: {}", first.stderr);
        let disable =
            |t: &str| t.replace("linkerd.io/multus: enabled", "linkerd.io/multus: disabled");
        let second = run(disable(&first.stdout).as_bytes());
        assert_eq!(second.code, 0, "{case}: {}", second.stderr);
        let want = items_of(&parse_yaml(&disable(&input)).unwrap());
        let second_rl = parse_yaml(&second.stdout).unwrap();
        let all = items_of(&second_rl);
        // A generated NAD may stay only where a workload still references it (the user's own
        // reference); everything else must be the input again.
        let nad = nad_name(&second_rl);
        let rendered = Rendered {
            run: second.clone(),
            rl: second_rl.clone(),
        };
        let referenced: BTreeSet<String> = rendered
            .attached(&nad)
            .iter()
            .map(|w| {
                w.split_once(' ')
                    .unwrap()
                    .1
                    .split('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        for left in all.iter().filter(|i| is_generated_nad(i)) {
            if !referenced.contains(&left.id().1) {
                problems.push(format!(
                    "{case}: generated NAD left in {:?} though nothing references it",
                    left.id().1
                ));
            }
        }
        let got: Vec<Yaml> = all.into_iter().filter(|i| !is_generated_nad(i)).collect();
        if want.len() != got.len() {
            problems.push(format!(
                "{case}: {} items in, {} after disabling",
                want.len(),
                got.len()
            ));
            continue;
        }
        for (i, (a, b)) in want.iter().zip(&got).enumerate() {
            if let Some(d) = tree_difference(a, b, &format!("item {i}")) {
                problems.push(format!("{case}: not restored: {d}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

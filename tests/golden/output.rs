//! The output itself: a summary at scale, YAML fidelity, JSON items, and the error results.

use super::*;

/// A summary stays one readable line when 10,000 workloads change, and the run stays fast.
#[test]
fn summary_readable_at_scale() {
    let mut input = String::from(concat!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n",
        "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: demo\n",
        "    annotations:\n      linkerd.io/multus: enabled\n      linkerd.io/inject: enabled\n",
    ));
    let cm = items_of(&parse_yaml(&input_of("generation-version-2-19")).unwrap())
        .into_iter()
        .find(|i| i.str_at(&["kind"]) == Some("ConfigMap"))
        .unwrap();
    let config = cm.str_at(&["data", "cni_network_config"]).unwrap();
    input.push_str(&format!(
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: linkerd-cni-config\n    namespace: linkerd-cni\n  data:\n    cni_network_config: {}\n",
        serde_json::to_string(config).unwrap()
    ));
    for i in 0..10_000 {
        input.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: pod-{i}\n    namespace: demo\n  spec:\n    containers:\n    - name: app\n      image: nginx\n"
        ));
    }
    let started = std::time::Instant::now();
    let got = run(input.as_bytes());
    let took = started.elapsed();
    assert_eq!(got.code, 0, "{}", got.stderr_first_line());
    let rl = parse_yaml(&got.stdout).unwrap();
    let results = results_of(&rl);
    let summary = results[0].str_at(&["message"]).unwrap();
    assert!(
        summary.len() <= 200 && !summary.contains('\n'),
        "summary not one short line: {summary:?}"
    );
    assert!(
        summary.contains("10000") || summary.contains("10,000"),
        "summary does not count the workloads: {summary:?}"
    );
    assert_eq!(
        got.stdout
            .matches("k8s.v1.cni.cncf.io/networks: linkerd-cni")
            .count(),
        10_000
    );
    assert!(
        took < std::time::Duration::from_secs(20),
        "10,000 pods took {took:?}"
    );
}

/// Scalars whose meaning differs between YAML readers keep their quoting; numbers keep their
/// exact text.
#[test]
fn yaml_fidelity() {
    let r = Rendered::of("yaml-fidelity");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let cm = r.item("ConfigMap", "demo", "tricky");
    let data = cm.get("data").unwrap();
    for (k, v) in data.entries() {
        let key = k.as_str().unwrap();
        assert!(
            matches!(v, Yaml::Scalar { plain: false, .. }),
            "data.{key} = {:?} lost its quotes",
            v.as_str()
        );
    }
    let text = &r.run.stdout;
    for line in [
        "defaultMode: 0644",
        "defaultMode: 0o600",
        "replicas: 0x2",
        "revisionHistoryLimit: 010",
        "progressDeadlineSeconds: 1_200",
        "huge: 123456789012345678901234567890",
        "above-u64: 18446744073709551616",
        "negative: -9223372036854775809",
        "float: 1.50",
        "exp: 6.02e+23",
        "nan: .NaN",
        "bool-11: yes",
        "timestamp: 2024-01-02T03:04:05Z",
        "memory: 1e3Mi",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start() == line),
            "line `{line}` not kept verbatim"
        );
    }
    let web = r.item("Deployment", "demo", "web");
    let env = web
        .at(&["spec", "template", "spec", "containers"])
        .unwrap()
        .seq()[0]
        .get("env")
        .unwrap()
        .seq()
        .to_vec();
    assert!(
        matches!(&env[0].get("value"), Some(Yaml::Scalar { value, plain: false, .. }) if value == "yes")
    );
    // `yes:` as a plain key means `true` to kubectl; quoting it would change the key.
    assert!(
        data.entries()
            .iter()
            .any(|(k, _)| matches!(k, Yaml::Scalar { value, plain: true, .. } if value == "yes")),
        "plain key `yes` changed"
    );
}

/// JSON files reach the function as flow nodes; output is block YAML with the same meaning.
#[test]
fn json_items_come_out_as_block_yaml() {
    let r = Rendered::of("json-items");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let items_text = before_results(&r.run.stdout);
    for flow in [
        "{\"apiVersion\"",
        "\"metadata\": {",
        "{\"matchLabels\"",
        "[{\"name\"",
    ] {
        assert!(
            !items_text.contains(flow),
            "output keeps the JSON item as a flow node (found {flow})"
        );
    }
    let cm = r.item("ConfigMap", "demo", "flags");
    for (k, want) in [("a", "yes"), ("b", "0644"), ("c", "~"), ("d", "1e3")] {
        assert!(
            matches!(cm.get("data").and_then(|d| d.get(k)), Some(Yaml::Scalar { value, plain: false, .. }) if value == want),
            "data.{k} lost its value or quotes"
        );
    }
    assert!(
        r.attached("linkerd-cni")
            .contains("Deployment demo/json-web")
    );
}

/// A bad networks annotation: the error result sits on the resource at fault, which is left
/// alone; other resources are still processed.
#[test]
fn error_bad_networks_annotation() {
    let r = Rendered::of("error-bad-networks");
    assert_eq!(r.run.code, 1);
    assert_eq!(r.results_for("error", "Deployment", "broken-json"), 1);
    assert_eq!(r.results_for("error", "Deployment", "broken-name"), 1);
    assert!(
        r.attached("linkerd-cni").contains("Deployment demo/good"),
        "other workloads are still processed"
    );
    for name in ["broken-json", "broken-name"] {
        let item = r.item("Deployment", "demo", name);
        assert_eq!(item.annotation("multus.linkerd.io/owned"), None);
    }
}

/// A CNI config that cannot give a NAD: no NAD, and no workload left referencing one.
#[test]
fn error_cni_config_leaves_no_dangling_reference() {
    for case in [
        "error-cni-json",
        "error-placeholder",
        "error-duplicate-configmap",
        "error-missing-configmap",
    ] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 1, "{case}");
        assert!(
            r.nads().is_empty(),
            "{case}: a NAD was generated from a bad or missing config"
        );
        assert!(
            r.attached("linkerd-cni").is_empty(),
            "{case}: a workload references a NAD that is not generated"
        );
    }
    let r = Rendered::of("error-placeholder");
    assert!(
        r.messages("error")
            .iter()
            .any(|m| m.contains("__LOG_LEVEL__")),
        "the placeholder is named: {:?}",
        r.messages("error")
    );
}

/// Bad settings: an error naming the key (and the valid choices), nothing generated.
#[test]
fn error_settings() {
    for (case, key) in [
        ("error-unknown-setting", "linkerdNamespaces"),
        ("error-typed-unknown-setting", "proxyUidOffset"),
        ("error-proxy-uid-offset", "proxyUIDOffset"),
        ("error-cni-version", "cniVersion"),
        ("error-namespace-twice", "demo"),
        ("error-builtin-kind", "Deployment"),
        ("error-config-rollout", "configRollout"),
    ] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 1, "{case}");
        let errors = r.messages("error").join("\n");
        assert!(
            errors.contains(key),
            "{case}: error does not name {key}: {errors}"
        );
        assert!(
            r.run.stderr_first_line().contains(key),
            "{case}: first stderr line does not name {key}: {}",
            r.run.stderr_first_line()
        );
        if case != "error-namespace-twice" {
            // Nothing is generated from settings that cannot be read.
            assert!(r.nads().is_empty(), "{case}");
        }
    }
    // Valid choices are listed.
    let r = Rendered::of("error-unknown-setting");
    let errors = r.messages("error").join("\n");
    for key in [
        "cniNamespace",
        "linkerdNamespace",
        "nadName",
        "cniKubeconfig",
        "cniVersion",
        "uidRangeAnnotation",
        "proxyUIDOffset",
        "namespaces",
        "workloadKinds",
        "defaultNamespace",
        "configRollout",
    ] {
        assert!(errors.contains(key), "valid key {key} not listed: {errors}");
    }
    let r = Rendered::of("error-config-rollout");
    let errors = r.messages("error").join("\n");
    for v in ["off", "all", "labelled"] {
        assert!(
            errors.contains(v),
            "valid configRollout {v} not listed: {errors}"
        );
    }
    let r = Rendered::of("error-cni-version");
    let errors = r.messages("error").join("\n");
    for v in ["0.1.0", "0.3.0", "1.0.0", "1.1.0"] {
        assert!(
            errors.contains(v),
            "valid cniVersion {v} not listed: {errors}"
        );
    }
}

//! The network-resources rules in the webhook: resource-backed NADs patched onto pods, missing
//! NADs denied, the NAD cache's readiness and the settings' errors.

use super::*;
use crate::common::process::Guarded;

// ------------------------------------------------------------------------------------------
// The network-resources rules (--network-resources).

const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";

const NODE_SELECTOR: &str = "k8s.v1.cni.cncf.io/nodeSelector";

/// The settings file of the network-resources rules, typed.
const NETWORK_RESOURCES: &str = "apiVersion: multus.linkerd.io/v1alpha1
kind: NetworkResources
metadata:
  name: network-resources
spec:
  downwardAPI: true
  injections:
    sriov-inject:
      annotations:
        example.com/injected: 'yes'
";

/// The cluster with resource-backed NADs in `demo`, and the Linkerd-CNI NAD.
fn cluster_with_nads() -> Cluster {
    let c = cluster();
    c.put_nad(
        &c.demo,
        "sriov-a",
        &[
            (RESOURCE_NAME, "intel.com/sriov_a"),
            (NODE_SELECTOR, "feature.node.kubernetes.io/sriov=true"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ],
    );
    c.put_nad(&c.demo, "sriov-b", &[(RESOURCE_NAME, "intel.com/sriov_b")]);
    c.put_nad(&c.demo, "linkerd-cni", &[]);
    c
}

/// The captured CREATE (or UPDATE) in `namespace`, selecting `networks`, labelled `labels`.
fn selecting(namespace: &str, operation: &str, networks: &str, labels: Value) -> Bytes {
    let review = moved(
        CREATE,
        namespace,
        json!({"k8s.v1.cni.cncf.io/networks": networks}),
    );
    let mut review: Value = serde_json::from_slice(&review).unwrap();
    review["request"]["operation"] = json!(operation);
    let metadata = &mut review["request"]["object"]["metadata"];
    for (k, v) in labels.as_object().unwrap() {
        metadata["labels"][k] = v.clone();
    }
    Bytes::from(review.to_string())
}

fn write_config(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn network_resources_patch_pods_created_and_deny_missing_nads() {
    let c = cluster_with_nads();
    let ca = Ca::new("CA");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "network-resources.yaml", NETWORK_RESOURCES);
    let webhook = Webhook::start(
        &c.account(&[WEBHOOK_ROLE, NAD_ROLE]),
        &ca.leaf(&["127.0.0.1"]),
        &["--network-resources", &config],
    );
    let rt = runtime();
    let mut conn = rt
        .block_on(Connection::open(
            &webhook.addr,
            &connector(&ca.pem, None, &[]),
        ))
        .unwrap();
    let mut post = |body: Bytes| {
        let (status, body) = rt.block_on(conn.post("/mutate", body)).unwrap();
        assert_eq!(status, 200);
        response_of(&body)
    };
    a_create_gets_both_rule_sets_in_one_patch(&mut post, &c);
    // UPDATE: the Linkerd-CNI rules only; resources and node selectors of a pod are immutable.
    let response = post(selecting(
        &c.demo,
        "UPDATE",
        "sriov-a, sriov-b",
        json!({"sriov-inject": "true"}),
    ));
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, sriov-b, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"}
        ])
    );
    // Selections of NADs that do not exist: denied (the default --on-error is allow), naming
    // the pod and each missing NAD once.
    let response = post(selecting(
        &c.demo,
        "CREATE",
        &format!("sriov-a, gone, {}/gone@net2, gone", c.plain),
        json!({}),
    ));
    assert_eq!(response["allowed"], false, "{response}");
    assert!(response.get("patch").is_none());
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: pod {demo}/pod2: selects NetworkAttachmentDefinitions {demo}/gone and {}/gone, which do not exist",
            c.plain,
            demo = c.demo
        )
    );
    nads_the_watch_brings_later_are_seen(&mut post, &c);
    // A networks annotation Multus would reject follows --on-error (allow, with a warning).
    let response = post(selecting(&c.demo, "CREATE", "a,,b", json!({})));
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("k8s.v1.cni.cncf.io/networks: item 2"),
        "{response}"
    );
    network_resources_admissions_are_counted(&webhook);
}

/// A CREATE selecting resource-backed NADs: one patch for both rule sets.
fn a_create_gets_both_rule_sets_in_one_patch(post: &mut impl FnMut(Bytes) -> Value, c: &Cluster) {
    // Two selections of sriov-a and one of sriov-b, plus the linkerd-cni the
    // Linkerd-CNI rules append (it has no resource): one patch for both rule sets.
    let response = post(selecting(
        &c.demo,
        "CREATE",
        "sriov-a, sriov-a@net2, sriov-b",
        json!({"sriov-inject": "true"}),
    ));
    assert_eq!(response["allowed"], true, "{response}");
    let record = r#"{"requests":{"intel.com/sriov_a":{"set":2},"intel.com/sriov_b":{"set":1}},"limits":{"intel.com/sriov_a":{"set":2},"intel.com/sriov_b":{"set":1}},"nodeSelector":{"feature.node.kubernetes.io/sriov":"true"},"annotations":{"example.com/injected":"yes"},"volume":true,"mounts":["c"]}"#;
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, sriov-a@net2, sriov-b, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": NAD_HASH},
            {"op": "add", "path": "/metadata/annotations/example.com~1injected", "value": "yes"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": record},
            {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"intel.com/sriov_a": "2", "intel.com/sriov_b": "1"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"intel.com/sriov_a": "2", "intel.com/sriov_b": "1"}},
            {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [
                {"name": "podnetinfo", "mountPath": "/etc/podnetinfo", "readOnly": true}
            ]},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"feature.node.kubernetes.io/sriov": "true"}},
            {"op": "add", "path": "/spec/volumes", "value": [{"name": "podnetinfo", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
            ]}}]}
        ])
    );
}

/// NADs the watch brings later are seen, and their node selectors checked.
fn nads_the_watch_brings_later_are_seen(post: &mut impl FnMut(Bytes) -> Value, c: &Cluster) {
    // NADs the watch brings later are seen.
    c.put_nad(&c.plain, "gone", &[(RESOURCE_NAME, "example.com/gone")]);
    c.put_nad(
        &c.demo,
        "gone",
        &[(NODE_SELECTOR, "feature.node.kubernetes.io/sriov=false")],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let response = loop {
        let response = post(selecting(
            &c.demo,
            "CREATE",
            &format!("sriov-a, gone, {}/gone@net2", c.plain),
            json!({}),
        ));
        if !response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("do not exist") || m.contains("does not exist"))
        {
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "the new NADs never reached the cache"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // ... and their node selectors conflict: denied too.
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: pod {demo}/pod2: spec.nodeSelector feature.node.kubernetes.io/sriov: NetworkAttachmentDefinition {demo}/sriov-a asks for \"true\" but NetworkAttachmentDefinition {demo}/gone for \"false\"",
            demo = c.demo
        )
    );
}

/// The metrics of the test's admissions and of the NAD cache.
fn network_resources_admissions_are_counted(webhook: &Webhook) {
    let metric = |l: &str| webhook.metric(l);
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"patched\"}"),
        2.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"warned\"}"),
        1.0
    );
    assert!(metric("linkerd_multus_admission_requests_total{outcome=\"denied\"}") >= 2.0);
    // The CREATE got network resources; the UPDATE did not.
    assert_eq!(
        metric("linkerd_multus_admission_patches_total{change=\"network_resources\"}"),
        1.0
    );
    // This test's five, and the other tests' NADs.
    assert!(metric("linkerd_multus_nad_cache_nads") >= 5.0);
    assert_eq!(metric("linkerd_multus_nad_cache_synced"), 1.0);
    assert_eq!(metric("linkerd_multus_nad_watch_up"), 1.0);
    assert_eq!(metric("linkerd_multus_nad_cache_age_seconds"), 0.0);
}

#[test]
fn with_missing_nad_ignore_and_no_network_resources_there_is_no_nad_watch_and_no_spec_change() {
    let c = cluster_with_nads();
    let ca = Ca::new("CA");
    // Namespaces only: the NADs cannot be listed, and the webhook must not need them.
    let webhook = Webhook::start(
        &c.account(&[NAMESPACES_ROLE]),
        &ca.leaf(&["127.0.0.1"]),
        &["--missing-nad", "ignore"],
    );
    let response = post_once(
        &webhook,
        &ca,
        selecting(&c.demo, "CREATE", "sriov-a, gone", json!({})),
    );
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "sriov-a, gone, linkerd-cni"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"}
        ])
    );
    let (_, metrics) = webhook.ops_get("/metrics").unwrap();
    assert!(!metrics.contains("linkerd_multus_nad_"), "{metrics}");
}

#[test]
fn not_ready_until_the_nad_cache_has_synced() {
    let c = cluster_with_nads();
    // An API server of this test's own, to take down at the end.
    let server = c.plane.new_api_server(&[]);
    c.plane.start_ready(&server);
    // The account has the Namespace rights but not yet the NAD rights: the NAD
    // list is refused (403), as in a cluster where the webhook's ClusterRole
    // is still an older one, without NADs.
    let (account, kubeconfig) = c.account_on(&server, NAMESPACES_ROLE);
    let ca = Ca::new("CA");
    let dir = tempfile::tempdir().unwrap();
    // The ConfigMap form, named by the environment variable.
    let config = write_config(
        dir.path(),
        "config-map.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: network-resources}\ndata:\n  resourceNameKeys: '[k8s.v1.cni.cncf.io/resourceName]'\n",
    );
    let webhook = Webhook::spawn(
        &kubeconfig,
        &ca.leaf(&["127.0.0.1"]),
        &[],
        &[("LINKERD_MULTUS_NETWORK_RESOURCES", &config)],
    );
    // The namespace cache syncs; only the NADs hold readiness back.
    webhook.wait_for_metric(
        "linkerd_multus_namespace_cache_synced",
        1.0,
        "the namespace cache never synced",
    );
    let (status, body) = webhook.ops_get("/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the NAD cache has not synced yet"), "{body}");
    assert!(!body.contains("namespace"), "{body}");
    assert_eq!(webhook.metric("linkerd_multus_nad_cache_synced"), 0.0);
    // The NAD rights granted: the retried list succeeds.
    c.grant(&account, NAD_ROLE);
    webhook.wait_for("/readyz", 200);
    assert!(webhook.metric("linkerd_multus_nad_cache_nads") >= 3.0);
    let patch = patch_of(&post_once(
        &webhook,
        &ca,
        selecting(&c.demo, "CREATE", "sriov-b", json!({})),
    ));
    assert!(
        patch.as_array().unwrap().contains(&json!(
            {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"intel.com/sriov_b": "1"}}
        )),
        "{patch}"
    );
    // The API server going away: still serving from the last known NADs, and said so.
    server.stop();
    webhook.wait_for_metric(
        "linkerd_multus_nad_watch_up",
        0.0,
        "the broken NAD watch never showed",
    );
    assert_eq!(webhook.ops_get("/readyz").unwrap().0, 200);
    assert!(
        post_once(
            &webhook,
            &ca,
            selecting(&c.demo, "CREATE", "sriov-b", json!({}))
        )
        .get("patch")
        .is_some()
    );
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, stderr) = webhook.stop();
    assert!(stderr.contains("NAD cache synced"), "{stderr}");
    assert!(
        stderr.contains("NAD watch broken; serving from the last known NADs"),
        "{stderr}"
    );
}

#[test]
fn network_resources_settings_errors_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let nr = write_config(dir.path(), "nr.yaml", NETWORK_RESOURCES);
    let lm = write_config(
        dir.path(),
        "lm.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec: {}\n",
    );
    let bad = write_config(
        dir.path(),
        "bad.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nspec:\n  honorResources: perhaps\n",
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    type Env<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Vec<&str>, Env, String)> = vec![
        (
            vec!["--config", &nr],
            vec![],
            format!(
                "--config {nr}: is a NetworkResources: the webhook takes it as --network-resources {nr}"
            ),
        ),
        (
            vec!["--network-resources", &lm],
            vec![],
            format!("--network-resources {lm}: is a LinkerdMultus: give it as --config"),
        ),
        (
            vec!["--network-resources", &bad],
            vec![],
            format!("--network-resources {bad}: setting honorResources: must be true or false"),
        ),
        (
            vec![],
            vec![("LINKERD_MULTUS_NETWORK_RESOURCES", missing.as_str())],
            format!("environment variable LINKERD_MULTUS_NETWORK_RESOURCES {missing}"),
        ),
    ];
    for (args, env, want) in cases {
        let out = Command::new(bin())
            .arg("webhook")
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(&args)
            .envs(env.iter().copied())
            .env("KUBECONFIG", dir.path().join("none"))
            .guarded_output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
    }
}

/// A virt-launcher pod as KubeVirt's virt-controller creates it (the golden case
/// `testdata/network-resources/virt-launcher`): the network devices KubeVirt 1.9 leaves
/// to the injector go into `compute`, beside KubeVirt's own requests.
#[test]
fn a_virt_launcher_pod_gets_what_the_injector_gives_it() {
    let c = cluster_with_nads();
    // The NADs of the golden case.
    c.put_nad(
        &c.demo,
        "sriov-net",
        &[
            (RESOURCE_NAME, "intel.com/sriov"),
            (NODE_SELECTOR, "feature.node.kubernetes.io/sriov=true"),
        ],
    );
    c.put_nad(&c.demo, "mlx", &[(RESOURCE_NAME, "mellanox.com/cx5")]);
    let ca = Ca::new("CA");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "network-resources.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nspec: {}\n",
    );
    let webhook = Webhook::start(
        &c.account(&[WEBHOOK_ROLE, NAD_ROLE]),
        &ca.leaf(&["127.0.0.1"]),
        &["--network-resources", &config],
    );
    let case = common::repo_path("testdata/network-resources/virt-launcher/input.yaml");
    let list = linkerd_multus::yaml::parse_document(&std::fs::read_to_string(case).unwrap())
        .unwrap()
        .to_json();
    let mut pod = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "Pod")
        .unwrap()
        .clone();
    // As created: no name yet, in the test's namespace, selecting its NADs there.
    let metadata = pod["metadata"].as_object_mut().unwrap();
    metadata.remove("name");
    metadata.insert("generateName".into(), json!("virt-launcher-vm1-"));
    metadata.insert("namespace".into(), json!(c.demo));
    let networks = &mut metadata["annotations"]["k8s.v1.cni.cncf.io/networks"];
    *networks = json!(networks.as_str().unwrap().replace(
        r#""namespace":"apps""#,
        &format!(r#""namespace":"{}""#, c.demo)
    ));
    let mut review: Value = serde_json::from_str(CREATE).unwrap();
    review["request"]["namespace"] = json!(c.demo);
    review["request"]["name"] = json!("");
    review["request"]["object"] = pod;
    let response = post_once(&webhook, &ca, Bytes::from(review.to_string()));
    assert_eq!(response["allowed"], true, "{response}");
    let demo = &c.demo;
    let record = r#"{"requests":{"intel.com/sriov":{"set":1},"mellanox.com/cx5":{"set":1}},"limits":{"intel.com/sriov":{"set":1},"mellanox.com/cx5":{"set":1}},"nodeSelector":{"feature.node.kubernetes.io/sriov":"true"}}"#;
    // The Linkerd-CNI rules append their network in KubeVirt's JSON form and record the
    // hash of the linkerd-cni NAD's config; the network-resources rules add to compute's requests and KubeVirt's node selector.
    assert_eq!(
        patch_of(&response),
        json!([
            {"op": "replace", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": format!(
                r#"[{{"interface":"podf767c48f0c6","mac":"02:00:00:00:00:01","name":"sriov-net","namespace":"{demo}"}},{{"interface":"pod339a1eac565","name":"mlx","namespace":"{demo}"}},{{"name":"linkerd-cni"}}]"#
            )},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=appended"},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": NAD_HASH},
            {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1network-resources", "value": record},
            {"op": "add", "path": "/spec/containers/0/resources/limits/intel.com~1sriov", "value": "1"},
            {"op": "add", "path": "/spec/containers/0/resources/limits/mellanox.com~1cx5", "value": "1"},
            {"op": "add", "path": "/spec/containers/0/resources/requests/intel.com~1sriov", "value": "1"},
            {"op": "add", "path": "/spec/containers/0/resources/requests/mellanox.com~1cx5", "value": "1"},
            {"op": "add", "path": "/spec/nodeSelector/feature.node.kubernetes.io~1sriov", "value": "true"}
        ])
    );
}

//! Off the Go operator without a gap, step by step as docs/migration.md says, on a real API
//! server: a cluster set up as the operator leaves it (its NADs in the enabled namespaces and
//! the control-plane namespace, its webhook configuration, its Deployment), then (1) the
//! operator's webhook guarded so that it skips a pod that selects linkerd-cni already, (2)
//! linkerd-multus's webhook installed alongside, (3) the operator's webhook configuration
//! deleted, (4) its Deployment deleted, then one NAD rendered and applied from Git (the
//! GitOps path) and (5) the NAD controller started. At every step, pods
//! created through the API server carry exactly one linkerd-cni selection (the dry runs that
//! wait for a step to take effect: what the step before or after gives), and the operator's
//! NADs are the same objects
//! (same uid); in the end the controller has adopted them: labelled as its own, spec.config
//! the ConfigMap's, its Event saying so; Git's NAD and a user's beside them are not adopted.
//!
//! The operator's webhook is a stand-in (go_operator_webhook.py, which says what it copies of
//! the operator's handler): the operator is a Go binary in an image, and neither is on the
//! machines these tests run on. Its webhook configuration is registered as the operator's
//! Helm chart renders it for a release named `multus-attacher`: a name that sorts after
//! `linkerd-multus-webhook`, so the API server calls linkerd-multus's webhook first and the
//! operator's sees what linkerd-multus wrote, the order in which the operator's split on `,`
//! would add linkerd-cni a second time without the guard.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use linkerd_multus::multus::networks::Networks;
use serde_json::{Value, json};

use super::common::bin;
use super::common::https::{Ca, http_get};
use super::common::kube_apiserver::free_port;
use super::common::process::Guard;
use super::harness::{
    BOUND, CONFIG_MAP, Controller, Setup, eventually, labelled_by_controller, read, setup,
};

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
const MULTUS: &str = "linkerd.io/multus";
const INJECT: &str = "linkerd.io/inject";
/// The annotation linkerd-multus's webhook writes on a pod it attached.
const OWNED: &str = "multus.linkerd.io/owned";
/// The operator's release, webhook configuration, Deployment and namespace.
const OPERATOR: &str = "multus-attacher";
/// The field manager the operator's writes are recorded under.
const OPERATOR_MANAGER: &str = "manager";
/// The spec.config the operator writes from version-2.19's ConfigMap: its Go struct
/// re-encoded (`cniVersion` 0.3.0, CNI's empty `ipam` and `dns`, and without `simulate`,
/// `use-wait-flag`, `iptables-mode` and `ipv6`, which it drops).
const OPERATOR_CONFIG: &str = r#"{"cniVersion":"0.3.0","name":"linkerd-cni","type":"linkerd-cni","ipam":{},"dns":{},"log_level":"info","linkerd":{"incoming-proxy-port":4143,"outgoing-proxy-port":4140,"proxy-uid":2102,"inbound-ports-to-ignore":["4191","4190"]},"kubernetes":{"kubeconfig":"/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"}}"#;

/// The pods each step creates: a name and the pod's own annotations. The control-plane pod
/// and a JSON list are added where they apply.
fn forms() -> Vec<(&'static str, Value)> {
    vec![
        ("bare", json!({})),
        ("listed", json!({NETWORKS: "a,b"})),
        ("spaced", json!({NETWORKS: "a, b"})),
        ("has-it", json!({NETWORKS: "a, linkerd-cni"})),
    ]
}

struct Migration {
    s: Setup,
    /// Namespaces the operator served: enabled for Multus and meshed.
    teams: Vec<String>,
    /// Enabled too, but opted out of linkerd-multus's webhook
    /// (`multus.linkerd.io/webhook: disabled`): only the operator's changes its pods.
    opted_out: String,
    /// The operator's NADs, by namespace, with their uid as the operator made them.
    nads: Vec<(String, String)>,
    ca: Ca,
    step: usize,
}

impl Migration {
    /// A pod in `namespace`, created for real (or, with `dry_run`, as the API server would
    /// store it): its annotations.
    fn create(&self, namespace: &str, name: &str, annotations: &Value, dry_run: bool) -> Value {
        let mut labels = json!({});
        if namespace == self.s.control_plane {
            labels = json!({"linkerd.io/control-plane-component": "destination"});
        }
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}
        });
        let created = self
            .s
            .plane
            .create_pod(&pod, dry_run)
            .unwrap_or_else(|e| panic!("creating {pod}: {e}"));
        created["metadata"]["annotations"].clone()
    }

    /// Creates a pod of every form in every namespace the operator served (and the
    /// control-plane pod), and checks each carries exactly one linkerd-cni selection.
    fn pods_attached_once(&mut self, with_json: bool) {
        self.step += 1;
        let mut forms = forms();
        if with_json {
            forms.push(("json", json!({NETWORKS: r#"[{"name": "a"}]"#})));
        }
        let mut namespaces = self.teams.clone();
        namespaces.push(self.s.control_plane.clone());
        for namespace in &namespaces {
            for (form, annotations) in &forms {
                let name = format!("{form}-{}", self.step);
                let stored = self.create(namespace, &name, annotations, false);
                let count = selections(&stored, namespace);
                assert_eq!(
                    count, 1,
                    "step {}: pod {namespace}/{name} admitted with {count} linkerd-cni selections: {stored}",
                    self.step
                );
            }
        }
    }

    /// Waits until a dry-run pod of `namespace` shows `loaded`, a step having taken effect;
    /// every one seen on the way selects linkerd-cni between `least` and `most` times (the
    /// step before allowed what the step after no longer does).
    fn until(
        &self,
        what: &str,
        namespace: &str,
        probe: &Value,
        (least, most): (usize, usize),
        loaded: impl Fn(&Value) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let stored = self.create(namespace, "probe", probe, true);
            let count = selections(&stored, namespace);
            assert!(
                (least..=most).contains(&count),
                "while waiting for {what}: {count} linkerd-cni selections: {stored}"
            );
            if loaded(&stored) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: never seen: {stored}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The operator's NADs are the objects it made: same uid; with `untouched`, not
    /// written since either.
    fn nads_kept(&self, untouched: bool) {
        for (namespace, uid) in &self.nads {
            let nad = self
                .s
                .nad(namespace)
                .unwrap_or_else(|| panic!("step {}: the NAD of {namespace} is gone", self.step));
            assert_eq!(
                nad["metadata"]["uid"].as_str(),
                Some(uid.as_str()),
                "step {}: {namespace}'s NAD was made again",
                self.step
            );
            if untouched {
                assert_eq!(
                    nad["spec"]["config"], OPERATOR_CONFIG,
                    "step {}: {nad}",
                    self.step
                );
                assert!(nad["metadata"].get("labels").is_none(), "{nad}");
            }
        }
    }
}

/// How many times the networks annotation selects linkerd-cni of the pod's namespace.
fn selections(annotations: &Value, namespace: &str) -> usize {
    let text = annotations[NETWORKS].as_str().unwrap_or_default();
    let networks = Networks::parse(text)
        .unwrap_or_else(|e| panic!("networks annotation {text:?} does not parse: {e}"));
    networks
        .selections()
        .iter()
        .filter(|s| s.name == "linkerd-cni" && s.namespace_or(namespace) == namespace)
        .count()
}

/// The operator's webhook (the stand-in), listening on loopback.
struct OperatorWebhook {
    _child: Guard,
    port: u16,
    _dir: tempfile::TempDir,
}

fn operator_webhook(m: &Migration) -> OperatorWebhook {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = m.ca.leaf(&["127.0.0.1"]).write(dir.path());
    let mut namespaces = serde_json::Map::new();
    for team in m.teams.iter().chain([&m.opted_out]) {
        namespaces.insert(team.clone(), json!({MULTUS: "enabled", INJECT: "enabled"}));
    }
    let script = super::common::repo_path("tests/controller/go_operator_webhook.py");
    let mut child = Guard::spawn(
        Command::new("python3")
            .arg(script)
            .arg(&cert)
            .arg(&key)
            .arg(&m.s.control_plane)
            .arg(Value::Object(namespaces).to_string())
            .stdout(Stdio::piped()),
    )
    .expect("starting python3 with the operator's webhook stand-in");
    let mut line = String::new();
    BufReader::new(child.take_stdout().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the stand-in prints its port");
    OperatorWebhook {
        _child: child,
        port,
        _dir: dir,
    }
}

/// linkerd-multus's webhook, with the rights of deploy/rbac.yaml.
struct OurWebhook {
    _child: Guard,
    addr: String,
    _dir: tempfile::TempDir,
}

fn our_webhook(m: &Migration) -> OurWebhook {
    m.s.plane.apply(&read("deploy/rbac.yaml"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = m.s.plane.service_account_kubeconfig(
        "linkerd-multus",
        "linkerd-multus-webhook",
        dir.path(),
    );
    let (cert, key) = m.ca.leaf(&["127.0.0.1"]).write(dir.path());
    let addr = format!("127.0.0.1:{}", free_port());
    let ops = format!("127.0.0.1:{}", free_port());
    let child = Guard::spawn(
        Command::new(bin())
            .arg("webhook")
            .args(["--listen", &addr, "--ops-listen", &ops])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(["--linkerd-namespace", &m.s.control_plane])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("starting linkerd-multus webhook");
    eventually("linkerd-multus's webhook ready", BOUND, || {
        http_get(&ops, "/readyz").is_some_and(|(status, _)| status == 200)
    });
    OurWebhook {
        _child: child,
        addr,
        _dir: dir,
    }
}

/// Registers linkerd-multus's webhook configuration as deploy/ ships it, calling `addr`.
fn register_ours(m: &Migration, addr: &str) {
    let shipped = read("deploy/mutatingwebhookconfiguration.yaml");
    let mut configuration =
        crate::deploy::to_json(&super::common::parse_yaml_stream(&shipped).unwrap()[0]);
    configuration["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    let ca = base64::engine::general_purpose::STANDARD.encode(&m.ca.pem);
    for hook in configuration["webhooks"].as_array_mut().unwrap() {
        hook["clientConfig"] = json!({"url": format!("https://{addr}/mutate"), "caBundle": ca});
    }
    m.s.plane.apply(&configuration.to_string());
}

/// The operator's objects as its Helm chart makes them for release `multus-attacher`: the
/// webhook configuration (calling the stand-in) and the Deployment (which nothing runs
/// here: the API server has no controllers; the stand-in is its webhook).
fn install_operator(m: &Migration, port: u16) {
    let plane = &m.s.plane;
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {OPERATOR}\n"
    ));
    let ca = base64::engine::general_purpose::STANDARD.encode(&m.ca.pem);
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": OPERATOR},
        "webhooks": [{
            "name": "multus.linkerd.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/annotate-multus-v1-pod"), "caBundle": ca},
            "namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-public", "kube-node-lease", OPERATOR],
            }]},
            "rules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"],
            }],
        }],
    });
    plane.apply(&configuration.to_string());
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": OPERATOR, "namespace": OPERATOR},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": OPERATOR}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": OPERATOR}},
                "spec": {"containers": [{
                    "name": OPERATOR,
                    "image": "demonihin/linkerd-multus-attach-operator:20230418-082236",
                }]},
            },
        },
    });
    plane.apply(&deployment.to_string());
}

/// A NAD made as the operator makes it: created (not applied) by its field manager, with no
/// label, holding its re-encoded config.
fn operator_nad(s: &Setup, namespace: &str) -> String {
    let nad = json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "linkerd-cni", "namespace": namespace},
        "spec": {"config": OPERATOR_CONFIG},
    });
    s.plane.kubectl_ok(
        &["create", "--field-manager", OPERATOR_MANAGER, "-f", "-"],
        &nad.to_string(),
    );
    let made = s.nad(namespace).unwrap();
    made["metadata"]["uid"].as_str().unwrap().to_string()
}

/// The NAD `linkerd-multus render` gives namespace `namespace` (enabled) from the
/// ConfigMap, as JSON: what a GitOps user commits and syncs.
fn rendered_nad(namespace: &str) -> String {
    crate::deploy::to_json(&super::harness::rendered_nad(namespace, CONFIG_MAP)).to_string()
}

/// The guard of docs/migration.md's step 1, as the doc writes it: the JSON patch between
/// `<<'EOF'` and `EOF` of the block that adds the matchConditions.
fn documented_guard() -> String {
    let doc = read("docs/migration.md");
    let at = doc
        .find("/matchConditions")
        .expect("docs/migration.md adds the guard's matchConditions");
    let start = doc[..at].rfind("<<'EOF'\n").expect("the guard's heredoc") + "<<'EOF'\n".len();
    let end = start + doc[start..].find("\nEOF\n").expect("the heredoc's end");
    doc[start..end].to_string()
}

#[test]
fn the_operator_is_replaced_step_by_step_with_every_pod_attached_once_and_its_nads_adopted() {
    let s = setup();
    let annotations = [(MULTUS, "enabled"), (INJECT, "enabled")];
    let teams = vec![
        s.plane.namespace("team", &annotations),
        s.plane.namespace("team", &annotations),
    ];
    s.plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n",
        s.control_plane
    ));
    let mut nads = Vec::new();
    for namespace in teams.iter().chain([&s.control_plane]) {
        nads.push((namespace.clone(), operator_nad(&s, namespace)));
    }
    // A user's NAD of the same name, made by hand: never the operator's, never adopted.
    let user = s.plane.namespace("user", &annotations);
    s.plane.kubectl_ok(
        &["create", "-f", "-"],
        &json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "linkerd-cni", "namespace": user},
            "spec": {"config": OPERATOR_CONFIG},
        })
        .to_string(),
    );
    let user_version = s.version(&user).unwrap();
    let opted_out = s.plane.unique_name("opted-out");
    s.plane.apply(
        &json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": opted_out,
                "labels": {"multus.linkerd.io/webhook": "disabled"},
                "annotations": {MULTUS: "enabled", INJECT: "enabled"},
            },
        })
        .to_string(),
    );
    let mut m = Migration {
        s,
        teams,
        opted_out,
        nads,
        ca: Ca::new("migration CA"),
        step: 0,
    };

    // 0. The operator alone, as the cluster runs before the migration.
    let operator = operator_webhook(&m);
    install_operator(&m, operator.port);
    let team = m.teams[0].clone();
    m.until("the operator's webhook", &team, &json!({}), (0, 1), |a| {
        a[MULTUS] == "enabled"
    });
    // Its split on `,` without trimming: a second linkerd-cni (the defect the guard stops).
    let doubled = m.create(
        &m.teams[0],
        "doubled",
        &json!({NETWORKS: "a, linkerd-cni"}),
        false,
    );
    assert_eq!(doubled[NETWORKS], "a, linkerd-cni,linkerd-cni", "{doubled}");
    m.nads_kept(true);
    eprintln!("step 0, the operator alone: {doubled}");

    // 1. The operator's webhook skips a pod that selects linkerd-cni already.
    m.s.plane.kubectl_ok(
        &[
            "patch",
            "mutatingwebhookconfiguration",
            OPERATOR,
            "--type=json",
            "--patch-file=/dev/stdin",
        ],
        &documented_guard(),
    );
    // Until the API server has it, the operator's duplicate of step 0.
    m.until(
        "the guard",
        &team,
        &json!({NETWORKS: "a, linkerd-cni"}),
        (1, 2),
        |a| a[NETWORKS] == "a, linkerd-cni",
    );
    m.pods_attached_once(false);
    m.nads_kept(true);

    // 2. linkerd-multus's webhook alongside: both answer every pod.
    let ours = our_webhook(&m);
    register_ours(&m, &ours.addr);
    m.until("linkerd-multus's webhook", &team, &json!({}), (1, 1), |a| {
        a.get(OWNED).is_some()
    });
    m.pods_attached_once(true);
    m.nads_kept(true);
    let both = m.create(&m.teams[0], "both", &json!({NETWORKS: "a, b"}), false);
    assert_eq!(
        both[NETWORKS], "a, b, linkerd-cni",
        "linkerd-multus's entry, which the guarded operator left alone: {both}"
    );
    eprintln!("step 2, both webhooks: {both}");

    // 3. The operator's webhook configuration deleted: linkerd-multus's alone. Seen in the
    // namespace opted out of linkerd-multus's webhook, where only the operator's attached
    // (writing its copies of the namespace's annotations): its pods are no longer changed.
    m.s.plane
        .kubectl(&["delete", "mutatingwebhookconfiguration", OPERATOR]);
    let opted_out = m.opted_out.clone();
    m.until(
        "the operator's webhook gone",
        &opted_out,
        &json!({}),
        (0, 1),
        |a| a.get(MULTUS).is_none(),
    );
    m.pods_attached_once(true);
    m.nads_kept(true);

    // 4. The operator's Deployment deleted (and its process, the stand-in, with it): its
    // NADs stay, untouched (it set no ownerReferences and no finalizers).
    m.s.plane
        .kubectl(&["delete", "deployment", "-n", OPERATOR, OPERATOR]);
    drop(operator);
    m.pods_attached_once(true);
    m.nads_kept(true);

    // GitOps (docs/migration.md): the second team's NAD rendered and applied from Git over
    // the operator's. A plain server-side apply names the operator's field; forced once, the
    // NAD is the same object, Git's from then on.
    let gitops = m.teams[1].clone();
    let rendered = rendered_nad(&gitops);
    let apply = [
        "apply",
        "--server-side",
        "--field-manager=kubectl",
        "-f",
        "-",
    ];
    let refused = m.s.plane.kubectl_input(&apply, &rendered);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && said.contains(r#"conflict with "manager""#)
            && said.contains(".spec.config"),
        "{said}"
    );
    let mut forced = apply.to_vec();
    forced.push("--force-conflicts");
    m.s.plane.kubectl_ok(&forced, &rendered);
    m.nads_kept(false);
    let git_nad = m.s.nad(&gitops).unwrap();
    assert_eq!(
        git_nad["metadata"]["labels"]["app.kubernetes.io/managed-by"], "linkerd-multus",
        "{git_nad}"
    );
    let git_version = m.s.version(&gitops).unwrap();
    eprintln!("GitOps: the rendered NAD applied over the operator's, refused first: {said}");

    // 5. The NAD controller: it adopts the operator's other NADs, the same objects, and
    // leaves Git's alone.
    let started = Instant::now();
    let controller = Controller::start(&m.s, "only", &m.s.kubeconfig());
    let want = m.s.rendered_config(CONFIG_MAP);
    assert_eq!(
        git_nad["spec"]["config"], want,
        "the render's config is the controller's"
    );
    m.nads.retain(|(namespace, _)| namespace != &gitops);
    for (namespace, _) in &m.nads {
        eventually(&format!("{namespace}'s NAD adopted"), BOUND, || {
            m.s.nad(namespace)
                .is_some_and(|n| labelled_by_controller(&n) && n["spec"]["config"] == want)
        });
        let took = started.elapsed();
        eprintln!("step 5: {namespace}'s NAD adopted by {took:?} after the controller started");
    }
    m.nads_kept(false);
    for (namespace, _) in &m.nads {
        let nad = m.s.nad(namespace).unwrap();
        let config_owners: Vec<&str> = nad["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["fieldsV1"]["f:spec"].get("f:config").is_some())
            .map(|f| f["manager"].as_str().unwrap())
            .collect();
        assert_eq!(config_owners, ["linkerd-multus-controller"], "{nad}");
        eventually(&format!("{namespace}'s NADAdopted Event"), BOUND, || {
            m.s.event_reasons(namespace)
                .contains(&"NADAdopted".to_string())
        });
    }
    assert!(
        want.contains(r#""iptables-mode": "nft""#),
        "the fields the operator dropped are back: {want}"
    );
    m.pods_attached_once(true);
    // Git's NAD and the user's: not the controller's, left as they are.
    assert_eq!(
        m.s.version(&gitops),
        Some(git_version),
        "{}",
        controller.log()
    );
    assert_eq!(
        m.s.version(&user),
        Some(user_version),
        "{}",
        controller.log()
    );
    let user_nad = m.s.nad(&user).unwrap();
    assert!(!labelled_by_controller(&user_nad), "{user_nad}");
    // A namespace enabled now gets its NAD from the controller.
    let new = m.s.plane.namespace("new", &annotations);
    eventually("the new namespace's NAD", BOUND, || {
        m.s.nad(&new).is_some_and(|n| labelled_by_controller(&n))
    });
}

//! Config restarts (`--restart-stale-workloads`) through the real API server, with exactly
//! the rights of deploy-nad-controller/ and deploy-restarts/, under deploy-restarts/'s
//! ValidatingAdmissionPolicy, read back from the API server's audit log. There is no controller manager, scheduler or kubelet here: the test
//! makes each workload's pods (and a Deployment's ReplicaSet) itself, and writes the rollout
//! status of workloads, the status of pods and of PodDisruptionBudgets
//! (`kubectl patch --subresource=status`) where their controllers and the kubelet would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use linkerd_multus::linkerd_cni::rollout::config_hash;
use serde_json::{Value, json};

use super::audit::{Request, requests, seconds, service_account};
use super::harness::{
    Audited, BOUND, Controller, Setup, eventually, labelled_by_controller, read, setup_with,
};

pub(super) const OPT_IN: &str = "multus.linkerd.io/restart-on-config-change";
pub(super) const EVICT: &str = "multus.linkerd.io/evict-on-config-change";
pub(super) const HASH: &str = "multus.linkerd.io/config-hash";
/// A hash no config of this test has: what pods started under an older config carry.
pub(super) const OLD: &str = "0123456789abcdef";
pub(super) const IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The kinds of workload the controller restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
}
pub(super) use Kind::{DaemonSet, Deployment, StatefulSet};

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Deployment => "Deployment",
            StatefulSet => "StatefulSet",
            DaemonSet => "DaemonSet",
        }
    }

    /// Its resource, as kubectl and the audit log name it.
    pub(super) fn resource(self) -> &'static str {
        match self {
            Deployment => "deployments",
            StatefulSet => "statefulsets",
            DaemonSet => "daemonsets",
        }
    }
}

/// A test's API server with the packages' rights and deploy-restarts/'s, another API server
/// on its etcd whose audit log the test reads, enforcing deploy-restarts/'s policy, and the
/// kubeconfig of the controller's account on that one.
pub(super) fn audited_setup() -> (Setup, Audited, PathBuf) {
    let s = setup_with(|rbac| format!("{rbac}\n---\n{}", read("deploy-restarts/rbac.yaml")));
    let audited = s.audited_server();
    shipped_policy(&s, &audited);
    let kubeconfig = s.kubeconfig_on(&audited.server, &s.account);
    (s, audited, kubeconfig)
}

/// The message of the shipped policy's refusal of a change to a workload other than its
/// template's hash.
const ONLY_THE_HASH: &str = "the NAD controller's account may change a Deployment, StatefulSet or DaemonSet only in its pod template's annotation multus.linkerd.io/config-hash (policy linkerd-multus-restarts)";

/// Applies deploy-restarts/policy.yaml as kpt's setters would set it for this test (its
/// account, its control-plane and CNI namespaces), and waits until `audited` enforces it: a
/// change of an image by the account, as a dry run, refused by it.
fn shipped_policy(s: &Setup, audited: &Audited) {
    let user = format!("system:serviceaccount:{}:{}", s.home, s.account);
    let policy = read("deploy-restarts/policy.yaml")
        .replace(
            "system:serviceaccount:linkerd-multus:linkerd-multus-nad-controller'\"",
            &format!("{user}'\""),
        )
        .replace(
            "\"['linkerd', 'linkerd-cni']\" #",
            &format!("\"['{}', '{}']\" #", s.control_plane, s.cni),
        );
    assert!(
        policy.contains(&user) && policy.contains(&s.cni),
        "the setters' lines"
    );
    s.plane.apply(&policy);
    let probe = s.plane.namespace("probe", &[]);
    workload(s, Deployment, &probe, "probe", json!({}), OLD);
    let admin = s.plane.admin_kubeconfig_for(&audited.server, s.dir.path());
    let admin = admin.to_str().unwrap();
    let image = r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "registry.example/other:1"}]"#;
    eventually("the shipped policy enforced", BOUND, || {
        let out = s.plane.kubectl_input(
            &[
                "--kubeconfig",
                admin,
                &format!("--as={user}"),
                "patch",
                "deployment",
                "-n",
                &probe,
                "probe",
                "--dry-run=server",
                "--type=json",
                "-p",
                image,
            ],
            "",
        );
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(ONLY_THE_HASH)
    });
}

/// Starts `controller --restart-stale-workloads` with `flags`, a Lease of 3 s.
pub(super) fn start(s: &Setup, identity: &str, kubeconfig: &Path, flags: &[&str]) -> Controller {
    let flags: Vec<&str> = ["--restart-stale-workloads"]
        .iter()
        .chain(flags)
        .copied()
        .collect();
    Controller::start_args(s, identity, kubeconfig, "3s", &flags)
}

/// A namespace (`prefix-N`) switched on with `annotations` more, once the controller made its
/// NAD: its name and the hash of the NAD's config (what a current pod carries).
pub(super) fn namespace(s: &Setup, prefix: &str, annotations: &[(&str, &str)]) -> (String, String) {
    let mut all = vec![("linkerd.io/multus", "enabled")];
    all.extend_from_slice(annotations);
    let namespace = s.plane.namespace(prefix, &all);
    eventually(
        &format!("the controller's NAD in {namespace}"),
        BOUND,
        || {
            s.nad(&namespace)
                .is_some_and(|n| labelled_by_controller(&n))
        },
    );
    let nad = s.nad(&namespace).unwrap();
    let current = config_hash(nad["spec"]["config"].as_str().unwrap());
    (namespace, current)
}

/// The uid of `resource` `name`.
pub(super) fn uid(s: &Setup, resource: &str, namespace: &str, name: &str) -> String {
    s.plane.kubectl(&[
        "get",
        resource,
        "-n",
        namespace,
        name,
        "-o",
        "jsonpath={.metadata.uid}",
    ])
}

/// Makes a `kind` `name` in `namespace` (its pod template annotated `template`), a Deployment's
/// ReplicaSet, and one pod of it carrying the config hash `pod_hash`, its rollout complete.
pub(super) fn workload(
    s: &Setup,
    kind: Kind,
    namespace: &str,
    name: &str,
    template: Value,
    pod_hash: &str,
) {
    workload_with(s, kind, namespace, name, template, json!({}), pod_hash);
}

/// The same, with the fields of `spec` set in its spec.
pub(super) fn workload_with(
    s: &Setup,
    kind: Kind,
    namespace: &str,
    name: &str,
    template: Value,
    spec: Value,
    pod_hash: &str,
) {
    let pod_spec = json!({"containers": [{"name": "c", "image": IMAGE}]});
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": kind.name(),
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": template},
                "spec": pod_spec
            }
        }
    });
    match kind {
        Deployment => object["spec"]["replicas"] = json!(1),
        StatefulSet => {
            object["spec"]["replicas"] = json!(1);
            object["spec"]["serviceName"] = json!(name);
        }
        DaemonSet => {}
    }
    for (field, value) in spec.as_object().unwrap() {
        object["spec"][field] = value.clone();
    }
    // Created in the cluster (an update of kubectl-create's), not applied from Git: a field
    // manager that applies the template would hold it, and the controller leave it to Git.
    s.plane
        .kubectl_ok(&["create", "-f", "-"], &object.to_string());
    complete(s, kind, namespace, name);
    its_pod(s, kind, namespace, name, pod_hash);
}

/// Makes the pod of `kind` `name` (through a ReplicaSet for a Deployment), carrying the
/// config hash `pod_hash`, as its controller would.
pub(super) fn its_pod(s: &Setup, kind: Kind, namespace: &str, name: &str, pod_hash: &str) {
    let pod_spec = json!({"containers": [{"name": "c", "image": IMAGE}]});
    let owner = |kind: &str, object: &str, uid: String| json!([{"apiVersion": "apps/v1", "kind": kind, "name": object, "uid": uid, "controller": true}]);
    let (owner, pod) = match kind {
        Deployment => {
            let rs = format!("{name}-1");
            s.plane.apply(
                &json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": rs, "namespace": namespace,
                                 "ownerReferences": owner("Deployment", name, uid(s, "deployment", namespace, name))},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
                    }
                })
                .to_string(),
            );
            let uid = uid(s, "replicaset", namespace, &rs);
            (owner("ReplicaSet", &rs, uid), format!("{name}-1-a"))
        }
        // Owned by the workload itself, as their controllers make them.
        StatefulSet | DaemonSet => (
            owner(kind.name(), name, uid(s, kind.resource(), namespace, name)),
            format!("{name}-0"),
        ),
    };
    s.plane.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace,
                         "labels": {"app": name},
                         "annotations": {HASH: pod_hash},
                         "ownerReferences": owner},
            "spec": pod_spec
        })
        .to_string(),
    );
}

/// Writes `status` into the status of `resource` `name` (`kubectl patch --subresource=status`).
pub(super) fn write_status(s: &Setup, resource: &str, namespace: &str, name: &str, status: Value) {
    s.plane.kubectl(&[
        "patch",
        resource,
        "-n",
        namespace,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({ "status": status }).to_string(),
    ]);
}

/// The `metadata.generation` of `resource` `name`.
pub(super) fn generation(s: &Setup, resource: &str, namespace: &str, name: &str) -> i64 {
    s.plane
        .kubectl(&[
            "get",
            resource,
            "-n",
            namespace,
            name,
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .trim()
        .parse()
        .unwrap()
}

/// Writes `kind` `name`'s rollout status as complete for its current generation (one
/// replica), as its controller would once its new pods are available; returns when it
/// started the write (nothing that follows the write can be earlier).
pub(super) fn complete(s: &Setup, kind: Kind, namespace: &str, name: &str) -> Timestamp {
    let started = Timestamp::now();
    let observed = generation(s, kind.resource(), namespace, name);
    let status = match kind {
        Deployment => json!({
            "observedGeneration": observed,
            "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1
        }),
        StatefulSet => json!({
            "observedGeneration": observed,
            "replicas": 1, "currentReplicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1
        }),
        DaemonSet => json!({
            "observedGeneration": observed,
            "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
            "updatedNumberScheduled": 1, "numberAvailable": 1, "numberReady": 1,
            "numberMisscheduled": 0
        }),
    };
    write_status(s, kind.resource(), namespace, name, status);
    started
}

/// The hash `kind` `name`'s pod template carries.
pub(super) fn template_hash(s: &Setup, kind: Kind, namespace: &str, name: &str) -> String {
    let workload = s.plane.get_ok(&format!(
        "/apis/apps/v1/namespaces/{namespace}/{}/{name}",
        kind.resource()
    ));
    workload["spec"]["template"]["metadata"]["annotations"][HASH]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The requests the controller's account sent, in the order answered.
pub(super) fn sent(s: &Setup, audited: &Audited) -> Vec<Request> {
    requests(&audited.log, &service_account(&s.home, &s.account))
}

/// The patches of `kind` the controller's account sent, whatever the answer.
pub(super) fn patches(s: &Setup, audited: &Audited, kind: Kind) -> Vec<Request> {
    sent(s, audited)
        .into_iter()
        .filter(|r| r.resource == kind.resource() && r.subresource.is_empty())
        .filter(|r| r.verb == "patch")
        .collect()
}

/// The names of the objects of `requests`.
pub(super) fn names(requests: &[Request]) -> Vec<&str> {
    requests.iter().map(|r| r.name.as_str()).collect()
}

/// The evictions (`create` of `pods/eviction`) the controller's account sent.
pub(super) fn evictions(s: &Setup, audited: &Audited) -> Vec<Request> {
    sent(s, audited)
        .into_iter()
        .filter(|r| r.resource == "pods" && r.subresource == "eviction" && r.verb == "create")
        .collect()
}

/// Whether `name` in `namespace` has a Warning Event of `reason`.
pub(super) fn warned(s: &Setup, namespace: &str, name: &str, reason: &str) -> bool {
    s.events_about(namespace, name)
        .iter()
        .any(|e| e["reason"] == reason && e["type"] == "Warning")
}

/// Makes a naked pod `name` with `labels` and `annotations`, bound to `node` if any.
pub(super) fn naked(
    s: &Setup,
    namespace: &str,
    name: &str,
    labels: Value,
    annotations: Value,
    node: Option<&str>,
) {
    let mut spec = json!({"containers": [{"name": "c", "image": IMAGE}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    s.plane.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": labels, "annotations": annotations},
            "spec": spec
        })
        .to_string(),
    );
}

/// Writes pod `name`'s status as running and ready, as a kubelet would: the API server
/// checks a pod's PodDisruptionBudget before evicting it only then (a pending pod, or one
/// not ready while its budget is met, is evicted without decrementing it).
pub(super) fn running(s: &Setup, namespace: &str, name: &str) {
    let status = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    write_status(s, "pod", namespace, name, status);
}

/// Whether pod `name` exists.
pub(super) fn exists(s: &Setup, namespace: &str, name: &str) -> bool {
    match s
        .plane
        .get(&format!("/api/v1/namespaces/{namespace}/pods/{name}"))
    {
        Some((200, _)) => true,
        Some((404, _)) => false,
        other => panic!("pod {namespace}/{name}: {other:?}"),
    }
}

/// Whether pod `name` is being deleted (it has a deletion timestamp).
pub(super) fn terminating(s: &Setup, namespace: &str, name: &str) -> bool {
    let pod = s
        .plane
        .get_ok(&format!("/api/v1/namespaces/{namespace}/pods/{name}"));
    pod["metadata"]["deletionTimestamp"]
        .as_str()
        .is_some_and(|t| !t.is_empty())
}

#[test]
fn stale_opted_in_workloads_are_restarted_once_each_paced_and_not_after_a_restart() {
    let (s, audited, kubeconfig) = audited_setup();
    let flags = ["--restart-deadline=2m"];
    let mut controller = start(&s, "first", &kubeconfig, &flags);
    let (app, current) = namespace(&s, "app", &[(OPT_IN, "enabled")]);
    // Two stale workloads opted in through their namespace; one current; one opted out.
    workload(&s, Deployment, &app, "api", json!({}), OLD);
    workload(&s, Deployment, &app, "web", json!({}), OLD);
    workload(
        &s,
        Deployment,
        &app,
        "fresh",
        json!({HASH: current}),
        &current,
    );
    workload(
        &s,
        Deployment,
        &app,
        "out",
        json!({OPT_IN: "disabled"}),
        OLD,
    );
    // A naked pod of the old config: reported, never restarted (not opted in to eviction).
    naked(&s, &app, "naked", json!({}), json!({HASH: OLD}), None);

    // One at a time: api first (by name), and web not while api's rollout is incomplete.
    eventually("api restarted", BOUND, || {
        template_hash(&s, Deployment, &app, "api") == current
    });
    // The naked pod is reported by an Event on it, not evicted (no second opt-in).
    eventually("the StaleConfig Event on the naked pod", BOUND, || {
        warned(&s, &app, "naked", "StaleConfig")
    });
    std::thread::sleep(Duration::from_secs(5));
    assert!(exists(&s, &app, "naked"), "not evicted");
    assert_eq!(
        template_hash(&s, Deployment, &app, "web"),
        "",
        "web waits for api's rollout"
    );
    let api_done = complete(&s, Deployment, &app, "api");
    eventually("web restarted", BOUND, || {
        template_hash(&s, Deployment, &app, "web") == current
    });
    complete(&s, Deployment, &app, "web");

    // A new controller (a restart, a new leader, a fresh list): nothing is patched again,
    // though the stale pods are still there (no kubelet replaces them here).
    controller.kill();
    let second = start(&s, "second", &kubeconfig, &flags);
    eventually("the second controller leads", BOUND, || {
        second.leader() == Some(1.0)
    });
    // It has planned over the same cluster once it reports the naked pod; a few passes more.
    eventually("the second controller's first plan", BOUND, || {
        second.metric("linkerd_multus_config_stale_reported ") == Some(1.0)
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(template_hash(&s, Deployment, &app, "out"), "", "opted out");
    assert_eq!(template_hash(&s, Deployment, &app, "fresh"), current);

    let patches = patches(&s, &audited, Deployment);
    assert_eq!(
        names(&patches),
        ["api", "web"],
        "one patch per stale workload, none for current or opted-out ones, none after the restart:\n{}",
        second.log()
    );
    assert!(
        patches[1].received > api_done,
        "web was restarted after api's rollout completed ({} < {api_done})",
        patches[1].received
    );
    assert_eq!(
        second.metric("linkerd_multus_config_restarts_total "),
        Some(0.0),
        "the second controller restarted nothing"
    );
    assert!(evictions(&s, &audited).is_empty(), "no pod evicted");
}

/// Writes PodDisruptionBudget `name`'s status as the disruption controller computes it from
/// `healthy` pods of `expected` with `desired` healthy wanted, for its current generation.
fn budget(s: &Setup, namespace: &str, name: &str, healthy: i64, desired: i64, expected: i64) {
    let status = json!({
        "observedGeneration": generation(s, "pdb", namespace, name),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": (healthy - desired).max(0),
    });
    write_status(s, "pdb", namespace, name, status);
}

/// A naked pod's eviction is opted in by its namespace alone: one annotated `enabled` on
/// itself (whoever may patch a pod could write that) is reported and never evicted until its
/// namespace opts in. Then each goes through the Eviction API: refused (429) while its
/// PodDisruptionBudget allows no disruption, evicted (201) once it allows one; a naked pod
/// of the old config that opts out on itself stays.
#[test]
fn a_naked_pod_is_evicted_only_when_its_namespace_opts_in_and_its_disruption_budget_allows() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &[]);
    let (ns, current) = namespace(&s, "evict", &[]);
    s.plane.apply(
        &json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "batch", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "batch"}}}
        })
        .to_string(),
    );
    // Both pods of the old config, running and ready; opted in to eviction only once ready
    // (a pending pod would be evicted whatever its budget says).
    naked(
        &s,
        &ns,
        "batch-old",
        json!({"app": "batch"}),
        json!({HASH: OLD}),
        None,
    );
    naked(
        &s,
        &ns,
        "idle",
        json!({"app": "idle"}),
        json!({HASH: OLD, EVICT: "disabled"}),
        None,
    );
    running(&s, &ns, "batch-old");
    running(&s, &ns, "idle");
    // There is no controller manager here: the test writes the budget's status as the
    // disruption controller would, one healthy pod of one, one wanted: no disruption allowed.
    budget(&s, &ns, "batch", 1, 1, 1);
    // A pod bound to a node, under no budget, that says it opts in: its namespace does not,
    // so it is reported, saying why its own annotation is not enough, and never evicted.
    naked(
        &s,
        &ns,
        "bound",
        json!({"app": "bound"}),
        json!({HASH: OLD, EVICT: "enabled"}),
        Some("node-1"),
    );
    eventually("the StaleConfig Events on the three pods", BOUND, || {
        ["batch-old", "idle", "bound"]
            .iter()
            .all(|pod| warned(&s, &ns, pod, "StaleConfig"))
    });
    let not_enough = |s: &Setup| {
        s.events_about(&ns, "bound").iter().any(|e| {
            e["reason"] == "StaleConfig"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.contains(&format!("its own {EVICT}=enabled is not enough")))
        })
    };
    assert!(not_enough(&s), "{:?}", s.events_about(&ns, "bound"));
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        evictions(&s, &audited).is_empty(),
        "no eviction asked before the namespace opts in:\n{}",
        controller.log()
    );
    assert!(!terminating(&s, &ns, "bound"));

    // The namespace opts in: the bound pod is evicted at once, and terminates for its grace
    // period (for ever here: no kubelet confirms it), and is asked no more.
    s.plane
        .kubectl(&["annotate", "namespace", &ns, &format!("{EVICT}=enabled")]);
    eventually("the bound pod evicted: terminating", BOUND, || {
        terminating(&s, &ns, "bound")
    });

    // Refused by the budget, and asked again by each later pass: the pod stays.
    let refused = |s: &Setup| {
        evictions(s, &audited)
            .iter()
            .filter(|r| r.name == "batch-old" && r.code == 429)
            .count()
    };
    eventually("three evictions refused with 429", BOUND, || {
        refused(&s) >= 3
    });
    assert!(exists(&s, &ns, "batch-old"), "a refused eviction leaves it");
    // Once a pass (every 2 s), not a burst of a client's retries.
    let times: Vec<Timestamp> = evictions(&s, &audited)
        .into_iter()
        .filter(|r| r.name == "batch-old")
        .map(|r| r.received)
        .collect();
    assert!(
        times.windows(2).all(|w| seconds(w[0], w[1]) > 1.0),
        "asked again at once: {times:?}"
    );
    assert_eq!(
        controller.metric("linkerd_multus_config_evictions_total "),
        Some(1.0),
        "the bound pod's: {}",
        controller.log()
    );

    // A second replica of the batch is up and ready (with the current config), and the
    // disruption controller (the test, here) counts two healthy pods of two, one wanted: one
    // disruption allowed.
    naked(
        &s,
        &ns,
        "batch-new",
        json!({"app": "batch"}),
        json!({HASH: current}),
        None,
    );
    running(&s, &ns, "batch-new");
    budget(&s, &ns, "batch", 2, 1, 2);
    // Not bound to a node, an evicted pod is deleted at once.
    eventually("batch-old evicted", BOUND, || !exists(&s, &ns, "batch-old"));
    eventually("the eviction counted", BOUND, || {
        controller
            .metric("linkerd_multus_config_evictions_total ")
            .is_some_and(|n| n >= 2.0)
    });
    // A few passes more: nothing else is evicted, nor asked to be.
    std::thread::sleep(Duration::from_secs(5));
    assert!(exists(&s, &ns, "idle"), "opted out of eviction");
    assert!(exists(&s, &ns, "batch-new"), "current");
    let asked: Vec<(String, u16)> = evictions(&s, &audited)
        .into_iter()
        .map(|r| (r.name, r.code))
        .collect();
    eprintln!("evictions asked (pod, code): {asked:?}");
    let codes = |pod: &str| -> Vec<u16> {
        asked
            .iter()
            .filter(|(name, _)| name == pod)
            .map(|(_, code)| *code)
            .collect()
    };
    assert_eq!(
        codes("bound"),
        [201],
        "evicted once: {asked:?}\n{}",
        controller.log()
    );
    let batch = codes("batch-old");
    let (last, refused) = batch.split_last().expect("batch-old's evictions");
    assert_eq!(
        *last, 201,
        "evicted once its budget allowed it, and then asked no more: {asked:?}"
    );
    assert!(
        refused.len() >= 2 && refused.iter().all(|c| *c == 429),
        "refused before: {asked:?}"
    );
    assert_eq!(
        codes("bound").len() + batch.len(),
        asked.len(),
        "no other pod asked: {asked:?}"
    );
    assert_eq!(
        controller.metric("linkerd_multus_config_evictions_total "),
        Some(2.0)
    );
}

/// A StatefulSet and a DaemonSet opted in through their pod template are restarted by one
/// patch each, the second after the first's rollout completed; a StatefulSet updated
/// OnDelete is reported, not patched.
#[test]
fn stateful_sets_and_daemon_sets_are_restarted_paced_and_on_delete_ones_reported() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &["--restart-deadline=2m"]);
    let (ns, current) = namespace(&s, "sets", &[]);
    let opted = json!({OPT_IN: "enabled"});
    workload(&s, StatefulSet, &ns, "db", opted.clone(), OLD);
    workload(&s, DaemonSet, &ns, "agent", opted.clone(), OLD);
    workload_with(
        &s,
        StatefulSet,
        &ns,
        "manual",
        opted,
        json!({"updateStrategy": {"type": "OnDelete"}}),
        OLD,
    );
    // Not opted in: its namespace says nothing, nor does its template.
    workload(&s, DaemonSet, &ns, "plain", json!({}), OLD);

    let both = [(StatefulSet, "db"), (DaemonSet, "agent")];
    let restarted = |(kind, name): &(Kind, &str)| template_hash(&s, *kind, &ns, name) == current;
    eventually("one of them restarted", BOUND, || {
        both.iter().any(restarted)
    });
    let first = *both.iter().find(|w| restarted(w)).unwrap();
    let second = *both.iter().find(|w| !restarted(w)).expect("one at a time");
    eventually(
        "the StaleConfig Event on the OnDelete StatefulSet",
        BOUND,
        || {
            s.events_about(&ns, "manual").iter().any(|e| {
                e["reason"] == "StaleConfig"
                    && e["type"] == "Warning"
                    && e["regarding"]["kind"] == "StatefulSet"
                    && e["note"].as_str().is_some_and(|n| n.contains("OnDelete"))
            })
        },
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !restarted(&second),
        "{second:?} waits for {first:?}'s rollout"
    );
    let first_done = complete(&s, first.0, &ns, first.1);
    eventually(&format!("{second:?} restarted"), BOUND, || {
        restarted(&second)
    });
    complete(&s, second.0, &ns, second.1);
    eventually("both rollouts seen complete", BOUND, || {
        controller.metric("linkerd_multus_config_rollouts_in_progress ") == Some(0.0)
    });
    std::thread::sleep(Duration::from_secs(5));

    assert_eq!(
        template_hash(&s, StatefulSet, &ns, "manual"),
        "",
        "OnDelete"
    );
    assert_eq!(
        template_hash(&s, DaemonSet, &ns, "plain"),
        "",
        "not opted in"
    );
    let stateful = patches(&s, &audited, StatefulSet);
    let daemon = patches(&s, &audited, DaemonSet);
    assert_eq!(
        (names(&stateful), names(&daemon)),
        (vec!["db"], vec!["agent"]),
        "one patch each, none of the OnDelete one or the one not opted in:\n{}",
        controller.log()
    );
    let second_patched = if second.0 == StatefulSet {
        stateful[0].received
    } else {
        daemon[0].received
    };
    assert!(
        second_patched > first_done,
        "{second:?} was restarted after {first:?}'s rollout completed ({second_patched} < {first_done})"
    );
    assert_eq!(
        controller.metric("linkerd_multus_config_restarts_total "),
        Some(2.0)
    );
}

/// A rollout that does not complete by `--restart-deadline` halts its namespace: a
/// RolloutStalled Event, the halted gauge, no other restart there, while another namespace
/// goes on; its namespace resumes once it completes.
#[test]
fn a_stalled_rollout_halts_its_namespace_until_it_completes_and_only_its_namespace() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &["--restart-deadline=3s"]);
    let halted = || controller.metric("linkerd_multus_config_rollouts_halted_namespaces ");
    let (ns, current) = namespace(&s, "stall", &[(OPT_IN, "enabled")]);
    workload(&s, Deployment, &ns, "api", json!({}), OLD);
    workload(&s, Deployment, &ns, "web", json!({}), OLD);
    let restarted =
        |namespace: &str, name: &str| template_hash(&s, Deployment, namespace, name) == current;
    eventually("one of them restarted", BOUND, || {
        restarted(&ns, "api") || restarted(&ns, "web")
    });
    let (first, second) = if restarted(&ns, "api") {
        ("api", "web")
    } else {
        ("web", "api")
    };
    // Its rollout is never completed (no status written): past the deadline it stalls.
    eventually("the RolloutStalled Event", BOUND, || {
        warned(&s, &ns, first, "RolloutStalled")
    });
    eventually("its namespace halted", BOUND, || halted() == Some(1.0));
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !restarted(&ns, second),
        "{second} waits: its namespace is halted"
    );
    assert_eq!(halted(), Some(1.0));

    // Another namespace goes on.
    let (other, other_current) = namespace(&s, "other", &[(OPT_IN, "enabled")]);
    assert_eq!(other_current, current, "one ConfigMap, one config");
    workload(&s, Deployment, &other, "app", json!({}), OLD);
    eventually("the other namespace's workload restarted", BOUND, || {
        restarted(&other, "app")
    });
    complete(&s, Deployment, &other, "app");
    assert!(!restarted(&ns, second), "{second} still waits");

    // The stalled rollout completes after all: its namespace resumes.
    let first_done = complete(&s, Deployment, &ns, first);
    eventually(&format!("{second} restarted"), BOUND, || {
        restarted(&ns, second)
    });
    complete(&s, Deployment, &ns, second);
    eventually("no namespace halted", BOUND, || halted() == Some(0.0));

    let patches = patches(&s, &audited, Deployment);
    assert_eq!(
        names(&patches),
        [first, "app", second],
        "one patch each:\n{}",
        controller.log()
    );
    assert!(
        patches[2].received > first_done,
        "{second} was restarted only after {first}'s rollout completed ({} < {first_done})",
        patches[2].received
    );
    assert!(!warned(&s, &ns, second, "RolloutStalled"));
}

/// A restart the API server refuses (here a ValidatingAdmissionPolicy, as a policy engine
/// would) holds no slot and runs no deadline: the next pass restarts another workload, and
/// the refused one is tried again at each pass and restarted once allowed, long before its
/// deadline, with no RolloutStalled Event.
#[test]
fn a_refused_restart_holds_up_nothing_and_is_tried_again_at_the_next_passes() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &["--restart-deadline=10m"]);
    let (ns, current) = namespace(&s, "refused", &[]);
    workload(&s, Deployment, &ns, "api", json!({}), OLD);
    workload(&s, Deployment, &ns, "web", json!({}), OLD);
    s.plane
        .kubectl(&["label", "deployment", "-n", &ns, "api", "locked=true"]);
    // Updates of a Deployment that stays labelled locked are refused in this namespace.
    let policy = format!("locked-{ns}");
    s.plane.apply(
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["UPDATE"], "resources": ["deployments"]
                }]},
                "validations": [{
                    "expression": "!(has(oldObject.metadata.labels) && 'locked' in oldObject.metadata.labels && has(object.metadata.labels) && 'locked' in object.metadata.labels)",
                    "message": "locked"
                }]
            }
        })
        .to_string(),
    );
    s.plane.apply(
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": ns}
                }}
            }
        })
        .to_string(),
    );
    // The controller's API server enforces it (its policies are loaded from a watch) before
    // the namespace opts in.
    let admin = s.plane.admin_kubeconfig_for(&audited.server, s.dir.path());
    let admin = admin.to_str().unwrap();
    eventually("the policy enforced", BOUND, || {
        let out = s.plane.kubectl_input(
            &[
                "--kubeconfig",
                admin,
                "patch",
                "deployment",
                "-n",
                &ns,
                "api",
                "--dry-run=server",
                "--type=merge",
                "-p",
                r#"{"metadata":{"annotations":{"probe":"1"}}}"#,
            ],
            "",
        );
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("locked")
    });
    s.plane
        .kubectl(&["annotate", "namespace", &ns, &format!("{OPT_IN}=enabled")]);

    // api comes first by name and is refused: web is restarted at a later pass.
    let refused = || {
        patches(&s, &audited, Deployment)
            .iter()
            .filter(|r| r.name == "api" && r.code >= 400)
            .count()
    };
    eventually("web restarted", BOUND, || {
        template_hash(&s, Deployment, &ns, "web") == current
    });
    assert!(refused() >= 1, "api was refused first");
    complete(&s, Deployment, &ns, "web");
    // And api is tried again at the next passes, while refused.
    let before = refused();
    eventually("api tried again", BOUND, || refused() >= before + 2);
    assert_eq!(template_hash(&s, Deployment, &ns, "api"), "");
    // Unlocked: restarted at the next pass, long before the 10 minutes of its deadline.
    let unlocked = Timestamp::now();
    s.plane
        .kubectl(&["label", "deployment", "-n", &ns, "api", "locked-"]);
    eventually("api restarted", BOUND, || {
        template_hash(&s, Deployment, &ns, "api") == current
    });
    complete(&s, Deployment, &ns, "api");
    eventually("both rollouts seen complete", BOUND, || {
        controller.metric("linkerd_multus_config_rollouts_in_progress ") == Some(0.0)
    });

    let patches = patches(&s, &audited, Deployment);
    let done: Vec<&Request> = patches.iter().filter(|r| r.code < 300).collect();
    assert_eq!(
        done.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["web", "api"],
        "{patches:?}"
    );
    assert!(done[1].received > unlocked);
    assert!(
        patches
            .iter()
            .all(|r| r.code < 300 || (r.name == "api" && r.received < unlocked)),
        "only api refused, while locked: {patches:?}"
    );
    assert!(!warned(&s, &ns, "api", "RolloutStalled"));
    assert_eq!(
        controller.metric("linkerd_multus_config_restarts_total "),
        Some(2.0)
    );
    assert_eq!(
        controller.metric("linkerd_multus_config_rollouts_halted_namespaces "),
        Some(0.0)
    );
}

/// What deploy-restarts/policy.yaml holds the controller's account to, on the real API server:
/// a broader change of a workload planted through the account (its token) is refused, and so
/// is any restart or eviction in a reserved namespace; the controller itself restarts the
/// stale workload of an ordinary namespace under the policy, and reports the one of
/// kube-system without patching it.
#[test]
fn the_policy_refuses_a_broader_patch_and_any_restart_in_a_reserved_namespace() {
    let (s, audited, kubeconfig) = audited_setup();
    let account = kubeconfig.to_str().unwrap();
    let enabled = [("linkerd.io/multus", "enabled"), (OPT_IN, "enabled")];
    let app = s.plane.namespace("app", &enabled);
    workload(&s, Deployment, &app, "web", json!({}), OLD);
    for (key, value) in enabled {
        let annotation = format!("{key}={value}");
        s.plane
            .kubectl(&["annotate", "namespace", "kube-system", &annotation]);
    }
    workload(&s, Deployment, "kube-system", "agent", json!({}), OLD);
    let as_account = |args: &[&str], stdin: &str| {
        let mut all = vec!["--kubeconfig", account];
        all.extend(args);
        let out = s.plane.kubectl_input(&all, stdin);
        assert!(!out.status.success(), "{args:?} was not refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let patch = |namespace: &str, kind: &str, patch: &str| {
        let args = [
            "patch",
            "deployment",
            "-n",
            namespace,
            "web",
            "--type",
            kind,
            "-p",
            patch,
        ];
        as_account(&args, "")
    };
    for (kind, planted) in [
        (
            "json",
            r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "registry.example/miner:1"}]"#,
        ),
        ("merge", r#"{"spec": {"replicas": 30}}"#),
        (
            "merge",
            &*json!({"spec": {"template": {"metadata": {"annotations": {HASH: "fedcba9876543210", "container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}}}}).to_string(),
        ),
        ("merge", r#"{"metadata": {"labels": {"team": "other"}}}"#),
    ] {
        let refused = patch(&app, kind, planted);
        assert!(refused.contains(ONLY_THE_HASH), "{planted}: {refused}");
    }
    let hash_only =
        json!({"spec": {"template": {"metadata": {"annotations": {HASH: "fedcba9876543210"}}}}});
    let reserved = "linkerd-multus restarts nothing in namespace kube-system: it is Kubernetes', OpenShift's, Linkerd's, Linkerd-CNI's or cert-manager's own (policy linkerd-multus-restarts)";
    let refused = as_account(
        &[
            "patch",
            "deployment",
            "-n",
            "kube-system",
            "agent",
            "--type",
            "merge",
            "-p",
            &hash_only.to_string(),
        ],
        "",
    );
    assert!(refused.contains(reserved), "{refused}");
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "agent-1-a", "namespace": "kube-system"}});
    let refused = as_account(
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/kube-system/pods/agent-1-a/eviction",
            "-f",
            "-",
        ],
        &eviction.to_string(),
    );
    assert!(refused.contains(reserved), "{refused}");
    assert_eq!(template_hash(&s, Deployment, &app, "web"), "");

    // The controller under the same policy: web is restarted, agent only reported.
    let started = Timestamp::now();
    let controller = start(&s, "only", &kubeconfig, &[]);
    for namespace in ["kube-system", &app] {
        eventually(
            &format!("the controller's NAD in {namespace}"),
            BOUND,
            || s.nad(namespace).is_some_and(|n| labelled_by_controller(&n)),
        );
    }
    let nad = s.nad(&app).unwrap();
    let current = config_hash(nad["spec"]["config"].as_str().unwrap());
    eventually("web restarted", BOUND, || {
        template_hash(&s, Deployment, &app, "web") == current
    });
    eventually("agent reported", BOUND, || {
        s.events_about("kube-system", "agent").iter().any(|e| {
            e["reason"] == "StaleConfig"
                && e["note"].as_str().is_some_and(|n| n.contains("in namespace kube-system, Kubernetes's own: linkerd-multus never restarts or evicts anything there"))
        })
    });
    assert_eq!(template_hash(&s, Deployment, "kube-system", "agent"), "");
    let in_kube_system: Vec<Request> = sent(&s, &audited)
        .into_iter()
        .filter(|r| r.received > started && r.namespace == "kube-system")
        .filter(|r| r.resource != "events" && r.resource != "network-attachment-definitions")
        .filter(|r| r.verb != "get" && r.verb != "list" && r.verb != "watch")
        .collect();
    assert!(
        in_kube_system.is_empty(),
        "{in_kube_system:?}\n{}",
        controller.log()
    );
    let restarts: Vec<Request> = patches(&s, &audited, Deployment)
        .into_iter()
        .filter(|r| r.received > started)
        .collect();
    assert_eq!(names(&restarts), ["web"], "{restarts:?}");
    assert!(restarts[0].code < 300, "{restarts:?}");
}

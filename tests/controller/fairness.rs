//! The restarts fair to every tenant, through the real API server (issue 46, items 3 and 4): a
//! namespace whose rollouts never complete delays another namespace's restart by at most one
//! `--restart-deadline`, and a pod's metadata is no proof: an ownerReference under a uid that
//! is not the live owner's restarts nothing.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::audit::seconds;
use super::harness::{BOUND, eventually};
use super::restarts::{
    Deployment, HASH, IMAGE, OLD, OPT_IN, audited_setup, generation, names, namespace, patches,
    start, template_hash, warned, workload, write_status,
};

/// How long a rollout may take here before its slot frees.
const DEADLINE: Duration = Duration::from_secs(20);
/// How often the controller plans.
const PASS: Duration = Duration::from_secs(2);

/// The tenant's namespace holds two opted-in Deployments that copy the current hash into
/// their templates and never complete (their pods stay on the old config), and a third the
/// controller restarts itself, which never completes either: the copies hold no slot, the
/// third holds the only one (`--restart-concurrency=1`) until its deadline. A victim's
/// Deployment, stale in another namespace after that, is restarted by the time that deadline
/// has passed, a pass at most later, and the tenant's namespace is halted.
#[test]
fn a_namespace_whose_rollouts_never_complete_delays_another_by_at_most_one_deadline() {
    let (s, audited, kubeconfig) = audited_setup();
    let deadline = format!("--restart-deadline={}s", DEADLINE.as_secs());
    let controller = start(&s, "only", &kubeconfig, &[&deadline]);
    let (tenant, current) = namespace(&s, "tenant", &[(OPT_IN, "enabled")]);
    for name in ["copy-a", "copy-b"] {
        workload(&s, Deployment, &tenant, name, json!({HASH: current}), OLD);
        never_completes(&s, &tenant, name);
    }
    workload(&s, Deployment, &tenant, "own", json!({}), OLD);
    eventually("the tenant's own Deployment restarted", BOUND, || {
        template_hash(&s, Deployment, &tenant, "own") == current
    });
    never_completes(&s, &tenant, "own");

    let (victim, victim_current) = namespace(&s, "victim", &[(OPT_IN, "enabled")]);
    assert_eq!(victim_current, current, "one ConfigMap, one config");
    let stale_since = Timestamp::now();
    workload(&s, Deployment, &victim, "app", json!({}), OLD);
    eventually("the victim restarted", DEADLINE + PASS + BOUND, || {
        template_hash(&s, Deployment, &victim, "app") == current
    });

    let patched = patches(&s, &audited, Deployment);
    assert_eq!(
        names(&patched),
        ["own", "app"],
        "the copies are never patched, each other once:\n{}",
        controller.log()
    );
    let (own, app) = (patched[0].received, patched[1].received);
    let waited = seconds(stale_since, app);
    let after_own = seconds(own, app);
    eprintln!(
        "fairness: --restart-deadline={}s; the victim's Deployment waited {waited:.1} s from its creation, restarted {after_own:.1} s after the tenant's own restart",
        DEADLINE.as_secs()
    );
    assert!(
        after_own <= (DEADLINE + PASS).as_secs_f64(),
        "restarted {after_own:.1} s after the tenant's restart took the slot: more than one deadline and a pass"
    );
    assert!(
        waited <= (DEADLINE + PASS).as_secs_f64(),
        "waited {waited:.1} s"
    );
    eventually("the tenant's namespace halted", BOUND, || {
        controller.metric("linkerd_multus_config_rollouts_halted_namespaces ") == Some(1.0)
    });
    assert!(warned(&s, &tenant, "own", "RolloutStalled"));
    for name in ["copy-a", "copy-b"] {
        assert!(!warned(&s, &tenant, name, "RolloutStalled"), "{name}");
    }
}

/// Writes Deployment `name`'s status as a rollout that has not completed: its generation
/// observed, no replica updated or available.
fn never_completes(s: &super::harness::Setup, namespace: &str, name: &str) {
    let observed = generation(s, "deployments", namespace, name);
    let status = json!({
        "observedGeneration": observed,
        "replicas": 1, "updatedReplicas": 0, "readyReplicas": 0, "availableReplicas": 0
    });
    write_status(s, "deployments", namespace, name, status);
}

/// Pods that name another workload of their namespace as their owner under a uid that is
/// not the live one (a ReplicaSet of it, or the Deployment itself), with the old config's
/// hash, as whoever may patch a pod could write them: each is reported, and the workload
/// they name, current and opted in, is never restarted.
#[test]
fn a_pod_naming_another_workloads_owner_under_a_forged_uid_restarts_nothing() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &[]);
    let (ns, current) = namespace(&s, "forged", &[(OPT_IN, "enabled")]);
    workload(&s, Deployment, &ns, "victim", json!({}), &current);
    let forged = "00000000-0000-4000-8000-000000000000";
    for (pod, kind, owner) in [
        ("planted-rs", "ReplicaSet", "victim-1"),
        ("planted-deploy", "Deployment", "victim"),
    ] {
        s.plane.apply(
            &json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": ns,
                             "annotations": {HASH: OLD},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind,
                                                  "name": owner, "uid": forged,
                                                  "controller": true}]},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]}
            })
            .to_string(),
        );
    }
    eventually("both planted pods reported", BOUND, || {
        warned(&s, &ns, "planted-rs", "StaleConfig")
            && warned(&s, &ns, "planted-deploy", "StaleConfig")
    });
    // A few passes more: nothing is patched.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(template_hash(&s, Deployment, &ns, "victim"), "");
    assert!(
        patches(&s, &audited, Deployment).is_empty(),
        "{}",
        controller.log()
    );
    assert_eq!(
        controller.metric("linkerd_multus_config_restarts_total "),
        Some(0.0)
    );
}

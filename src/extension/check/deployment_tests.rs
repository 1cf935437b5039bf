use super::*;
use serde_json::{Value, json};

fn template(image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "webhook", "image": image}]}
    })
}

fn deployment(generation: i64, status: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "w", "namespace": "lm", "uid": "d-uid", "generation": generation},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": template("img:2")},
        "status": status
    }))
    .unwrap()
}

/// A ReplicaSet of the Deployment, of the template of `image`.
fn replica_set(name: &str, image: &str, status: Value) -> ReplicaSet {
    let mut template = template(image);
    template["metadata"]["labels"]["pod-template-hash"] = json!(name);
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "lm", "uid": format!("{name}-uid"), "generation": 1,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "w",
                "uid": "d-uid", "controller": true}]},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template},
        "status": status
    }))
    .unwrap()
}

fn pod(name: &str, replica_set: &str, status: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "lm", "uid": format!("{name}-uid"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
                "uid": format!("{replica_set}-uid"), "controller": true}]},
        "spec": {"nodeName": "node-a", "containers": [{"name": "webhook", "image": "img:2"}]},
        "status": status
    }))
    .unwrap()
}

fn waiting(reason: &str, message: &str) -> Value {
    json!({"containerStatuses": [{"name": "webhook", "image": "img:2", "imageID": "", "ready": false,
        "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}]})
}

fn event(object: (&str, &str), reason: &str, message: &str, at: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{}.{at}", object.1), "namespace": "lm"},
        "involvedObject": {"kind": object.0, "name": object.1, "namespace": "lm"},
        "reason": reason, "message": message, "type": "Warning", "lastTimestamp": at
    }))
    .unwrap()
}

const RS_OK: &str = r#"{"observedGeneration": 1, "replicas": 2}"#;

fn rs_ok() -> Value {
    serde_json::from_str(RS_OK).unwrap()
}

fn rolled_out() -> Value {
    json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 0})
}

#[test]
fn readiness_of_the_deployment() {
    let d = |replicas: i32, generation: i64, status: Value| -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "w", "generation": generation},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": status
        }))
        .unwrap()
    };
    let full = json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2});
    for (deployment, want) in [
        (d(2, 2, full.clone()), Ok(())),
        (
            d(2, 3, full.clone()),
            Err("its latest change is not rolled out yet"),
        ),
        (
            d(0, 2, full),
            Err("scaled to 0 replicas: no replica answers the API server"),
        ),
        (
            d(
                2,
                1,
                json!({"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 2}),
            ),
            Err("1 of 2 replicas ready (2 up to date)"),
        ),
        (
            d(2, 1, json!({})),
            Err("its latest change is not rolled out yet"),
        ),
    ] {
        assert_eq!(ready(&deployment), want.map_err(String::from));
    }
}

#[test]
fn the_most_telling_reason_is_given_with_what_to_do() {
    let pull = waiting(
        "ImagePullBackOff",
        "Back-off pulling image \"img:2\": ErrImagePull: not found",
    );
    let unschedulable = json!({"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient cpu."}]});
    let crash = json!({"containerStatuses": [{"name": "webhook", "image": "img:2", "imageID": "",
        "ready": false, "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 1m20s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
            "message": "starting\nerror: --tls-cert: no such file\n"}}}]});
    let running = json!({"containerStatuses": [{"name": "webhook", "image": "img:2", "imageID": "",
        "ready": false, "restartCount": 0, "state": {"running": {}}}]});
    let refused = json!({"observedGeneration": 1, "replicas": 0, "conditions": [{
        "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
        "message": "pods \"w-new-\" is forbidden: unable to validate against any security context constraint"}]});
    let stalled = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 0, "conditions": [{
        "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
        "message": "ReplicaSet \"w-new\" has timed out progressing."}]});
    let describe_pod = |p: &str| format!("kubectl -n lm describe pod {p}");
    let controller = "check that kube-controller-manager runs and reaches the API server (kubeadm: kubectl -n kube-system get pods -l component=kube-controller-manager)";
    /// A case: its name, the Deployment, what was read of it, the reason and hint.
    type Case<'a> = (&'a str, Deployment, Seen, Option<(&'a str, String)>);
    let cases: Vec<Case> = vec![
        (
            "never acted on",
            deployment(1, json!({})),
            Seen::default(),
            Some((
                "no controller has acted on it: it has no status and no ReplicaSet",
                controller.into(),
            )),
        ),
        (
            "a change not acted on: the ReplicaSet is of the old template",
            deployment(2, json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2})),
            Seen {
                replica_sets: vec![replica_set("w-old", "img:1", rs_ok())],
                ..Seen::default()
            },
            Some((
                "no controller has acted on its latest change: its status is of generation 1, not 2, and no ReplicaSet has its pod template",
                controller.into(),
            )),
        ),
        (
            "a ReplicaSet no controller made pods for",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", json!({}))],
                ..Seen::default()
            },
            Some((
                "no controller has acted on ReplicaSet lm/w-new: it has no pods and its status is not of its generation",
                controller.into(),
            )),
        ),
        (
            "the pods refused, over the Deployment's own condition and the old ReplicaSet",
            deployment(2, stalled.clone()),
            Seen {
                replica_sets: vec![
                    replica_set("w-new", "img:2", refused),
                    replica_set("w-old", "img:1", rs_ok()),
                ],
                pods: vec![pod("w-old-a", "w-old", pull.clone())],
                events: vec![event(("ReplicaSet", "w-new"), "FailedCreate", "x", "2025-01-01T00:00:00Z")],
            },
            Some((
                "ReplicaSet lm/w-new cannot create pods (FailedCreate): pods \"w-new-\" is forbidden: unable to validate against any security context constraint",
                "kubectl -n lm describe replicaset w-new (the message names what refuses the pods: a SecurityContextConstraints, Pod Security, a ResourceQuota, a webhook)".into(),
            )),
        ),
        (
            "an image not pulled, over a pod not scheduled; the current ReplicaSet's pods first",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![
                    replica_set("w-old", "img:1", rs_ok()),
                    replica_set("w-new", "img:2", rs_ok()),
                ],
                pods: vec![
                    pod("w-old-a", "w-old", waiting("ErrImagePull", "old")),
                    pod("w-new-b", "w-new", unschedulable.clone()),
                    pod("w-new-c", "w-new", pull),
                ],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-c: container webhook cannot pull its image (ImagePullBackOff): Back-off pulling image \"img:2\": ErrImagePull: not found",
                describe_pod("w-new-c"),
            )),
        ),
        (
            "an image not pulled, without a message: the image named",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", waiting("InvalidImageName", ""))],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a: container webhook cannot pull its image img:2 (InvalidImageName)",
                describe_pod("w-new-a"),
            )),
        ),
        (
            "a crash loop: how the container last ended, its last line",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", crash)],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a: container webhook keeps crashing (CrashLoopBackOff, 4 restarts): it last exited with code 1 (Error): error: --tls-cert: no such file",
                "kubectl -n lm logs w-new-a -c webhook --previous".into(),
            )),
        ),
        (
            "a container that cannot start",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", waiting("CreateContainerConfigError", "secret \"tls\" not found"))],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a: container webhook cannot start (CreateContainerConfigError): secret \"tls\" not found",
                describe_pod("w-new-a"),
            )),
        ),
        (
            "a pod not scheduled",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", unschedulable)],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 Insufficient cpu.",
                describe_pod("w-new-a"),
            )),
        ),
        (
            "a container not ready: the latest Warning Event says why",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", running.clone())],
                events: vec![
                    event(("Pod", "w-new-a"), "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503", "2025-01-01T00:10:00Z"),
                    event(("Pod", "w-new-a"), "FailedMount", "MountVolume.SetUp failed", "2025-01-01T00:00:00Z"),
                ],
            },
            Some((
                "Pod lm/w-new-a: Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503",
                describe_pod("w-new-a"),
            )),
        ),
        (
            "a container not ready, no Event",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![pod("w-new-a", "w-new", running)],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a: container webhook runs but is not ready",
                "kubectl -n lm describe pod w-new-a; kubectl -n lm logs w-new-a -c webhook".into(),
            )),
        ),
        (
            "the Deployment's own condition",
            deployment(2, stalled),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                ..Seen::default()
            },
            Some((
                "its rollout stopped progressing (ProgressDeadlineExceeded): ReplicaSet \"w-new\" has timed out progressing.",
                "kubectl -n lm describe deployment w".into(),
            )),
        ),
        (
            "a pod no scheduler acted on",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                pods: vec![{
                    let mut p = pod("w-new-a", "w-new", json!({"phase": "Pending"}));
                    p.spec.as_mut().unwrap().node_name = None;
                    p
                }],
                ..Seen::default()
            },
            Some((
                "Pod lm/w-new-a has no node: no scheduler has acted on it",
                "check that kube-scheduler runs and reaches the API server (kubeadm: kubectl -n kube-system get pods -l component=kube-scheduler)".into(),
            )),
        ),
        (
            "nothing tells",
            deployment(2, rolled_out()),
            Seen {
                replica_sets: vec![replica_set("w-new", "img:2", rs_ok())],
                ..Seen::default()
            },
            None,
        ),
    ];
    for (case, deployment, seen, want) in cases {
        let want = want.map(|(reason, hint)| Why::new(reason, hint));
        assert_eq!(explain(&deployment, &seen), want, "{case}");
    }
}

#[test]
fn events_are_read_of_the_deployment_its_replica_sets_and_pods_not_ready() {
    let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let seen = Seen {
        replica_sets: vec![
            replica_set("w-old", "img:1", rs_ok()),
            replica_set("w-new", "img:2", rs_ok()),
        ],
        pods: (0..5)
            .map(|i| pod(&format!("w-new-{i}"), "w-new", json!({})))
            .chain([pod("w-old-r", "w-old", ready)])
            .collect(),
        ..Seen::default()
    };
    assert_eq!(
        event_sources(&deployment(2, rolled_out()), &seen),
        [
            "d-uid",
            "w-new-uid",
            "w-old-uid",
            "w-new-0-uid",
            "w-new-1-uid",
            "w-new-2-uid"
        ]
    );
}

#[test]
fn the_current_replica_set_has_the_template_but_for_its_hash() {
    let d = deployment(2, rolled_out());
    let sets = [
        replica_set("w-old", "img:1", rs_ok()),
        replica_set("w-new", "img:2", rs_ok()),
    ];
    assert_eq!(
        current(&d, &sets).and_then(|rs| rs.metadata.name.as_deref()),
        Some("w-new")
    );
    assert!(current(&d, &sets[..1]).is_none());
}

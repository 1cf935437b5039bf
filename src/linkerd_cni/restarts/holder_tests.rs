use serde_json::json;

use super::*;

/// The metadata of a workload: `labels`, `annotations` and `managed` (managedFields) as the
/// API server returns them.
fn meta(labels: Value, annotations: Value, managed: Value) -> kube::core::ObjectMeta {
    serde_json::from_value(json!({
        "name": "web", "namespace": "a",
        "labels": labels, "annotations": annotations, "managedFields": managed
    }))
    .unwrap()
}

/// A managedFields entry of `manager` with `operation`, holding `fields`.
fn entry(manager: &str, operation: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": "apps/v1",
           "fieldsType": "FieldsV1", "fieldsV1": fields, "time": "2026-11-29T08:00:00Z"})
}

/// What `kubectl apply --server-side` of a Deployment holds; with the template's hash when
/// `hash`.
fn template(hash: bool) -> Value {
    let mut annotations = json!({"f:linkerd.io/inject": {}});
    if hash {
        annotations[format!("f:{HASH_ANNOTATION}")] = json!({});
    }
    json!({"f:spec": {"f:replicas": {}, "f:template": {
        "f:metadata": {"f:annotations": annotations, "f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}
    }}})
}

/// What a restart holds: the template's hash alone.
fn restart() -> Value {
    json!({"f:spec": {"f:template": {"f:metadata": {"f:annotations": {
        format!("f:{HASH_ANNOTATION}"): {}
    }}}}})
}

/// What Helm 4's install holds (server-side apply): its marks and the chart's fields; with the
/// template's hash when `hash` (a post-renderer's configRollout).
fn helm(hash: bool) -> Value {
    let mut fields = template(hash);
    fields["f:metadata"] = json!({
        "f:annotations": {"f:meta.helm.sh/release-name": {}, "f:meta.helm.sh/release-namespace": {}},
        "f:labels": {"f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/managed-by": {}}
    });
    fields
}

fn helm_marks() -> (Value, Value) {
    (
        json!({"app.kubernetes.io/instance": "web", "app.kubernetes.io/managed-by": "Helm"}),
        json!({"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "a"}),
    )
}

fn applies_template(manager: &str) -> Option<Holder> {
    Some(Holder::AppliesTemplate {
        manager: manager.into(),
    })
}

#[test]
fn who_holds_a_workloads_pod_template() {
    let none = json!({});
    let (helm_labels, helm_annotations) = helm_marks();
    let status = json!({"manager": "kube-controller-manager", "operation": "Update",
                        "subresource": "status", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:status": {"f:replicas": {}}}});
    let cases: Vec<(&str, Value, Value, Value, Option<Holder>)> = vec![
        (
            "kubectl create, then the controller's restart",
            none.clone(),
            none.clone(),
            json!([
                entry("kubectl-create", "Update", template(false)),
                entry(CONTROLLER_MANAGED_BY, "Update", restart()),
                status.clone()
            ]),
            None,
        ),
        (
            "kubectl apply (client-side) keeps no field from an update",
            none.clone(),
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"}),
            json!([entry("kubectl-client-side-apply", "Update", template(true))]),
            None,
        ),
        (
            "kubectl apply --server-side of a rendered template",
            none.clone(),
            none.clone(),
            json!([entry("team-payments", "Apply", template(true))]),
            Some(Holder::AppliesHash {
                manager: "team-payments".into(),
            }),
        ),
        (
            "kubectl apply --server-side of a template without the hash",
            none.clone(),
            none.clone(),
            json!([entry("kubectl", "Apply", template(false))]),
            applies_template("kubectl"),
        ),
        (
            "restarted by an earlier release: the hash went to the controller, the template stays the team's",
            none.clone(),
            none.clone(),
            json!([
                entry("team-payments", "Apply", template(false)),
                entry(CONTROLLER_MANAGED_BY, "Update", restart())
            ]),
            applies_template("team-payments"),
        ),
        (
            "an apply of the status alone",
            none.clone(),
            none.clone(),
            json!([{"manager": "operator", "operation": "Apply", "subresource": "status",
                    "fieldsType": "FieldsV1", "fieldsV1": template(true)}]),
            None,
        ),
        (
            "an apply of the workload's labels alone",
            none.clone(),
            none.clone(),
            json!([entry(
                "labeller",
                "Apply",
                json!({"f:metadata": {"f:labels": {"f:team": {}}}})
            )]),
            None,
        ),
        (
            "Helm 4 (server-side apply), as the SDK names its manager",
            helm_labels.clone(),
            helm_annotations.clone(),
            json!([
                entry("python", "Apply", helm(false)),
                entry(CONTROLLER_MANAGED_BY, "Update", restart())
            ]),
            None,
        ),
        (
            "Helm 3 (client-side)",
            helm_labels.clone(),
            helm_annotations.clone(),
            json!([entry("helm", "Update", helm(true))]),
            None,
        ),
        (
            "Helm 4 with a post-renderer's configRollout",
            helm_labels.clone(),
            helm_annotations.clone(),
            json!([entry("helm", "Apply", helm(true))]),
            Some(Holder::AppliesHash {
                manager: "helm".into(),
            }),
        ),
        (
            "a Helm release someone applies over",
            helm_labels.clone(),
            helm_annotations.clone(),
            json!([
                entry("helm", "Apply", helm(false)),
                entry("kubectl", "Apply", template(false))
            ]),
            applies_template("kubectl"),
        ),
        (
            "Argo CD's annotation tracking",
            none.clone(),
            json!({"argocd.argoproj.io/tracking-id": "app:apps/Deployment:a/web"}),
            json!([]),
            Some(Holder::GitOps {
                tool: "Argo CD",
                by: "annotation argocd.argoproj.io/tracking-id".into(),
            }),
        ),
        (
            "Argo CD's label tracking, by its field manager (a client-side sync)",
            json!({"app.kubernetes.io/instance": "web"}),
            none.clone(),
            json!([entry("argocd-controller", "Update", template(false))]),
            Some(Holder::GitOps {
                tool: "Argo CD",
                by: "field manager argocd-controller".into(),
            }),
        ),
        (
            "app.kubernetes.io/instance alone is no mark",
            json!({"app.kubernetes.io/instance": "web"}),
            none.clone(),
            json!([entry("kubectl-create", "Update", template(false))]),
            None,
        ),
        (
            "Flux",
            json!({"kustomize.toolkit.fluxcd.io/name": "apps"}),
            none.clone(),
            json!([entry("kustomize-controller", "Apply", template(false))]),
            Some(Holder::GitOps {
                tool: "Flux",
                by: "label kustomize.toolkit.fluxcd.io/name".into(),
            }),
        ),
        (
            "kpt",
            none.clone(),
            json!({"config.kubernetes.io/origin": "path: web.yaml"}),
            json!([]),
            Some(Holder::GitOps {
                tool: "kpt",
                by: "annotation config.kubernetes.io/origin".into(),
            }),
        ),
    ];
    for (what, labels, annotations, managed, want) in cases {
        let held = read(&meta(labels, annotations, managed));
        assert_eq!(held.holder, want, "{what}");
    }
}

#[test]
fn the_controllers_own_hash_is_told() {
    let ours = meta(
        json!({}),
        json!({}),
        json!([entry(CONTROLLER_MANAGED_BY, "Update", restart())]),
    );
    assert_eq!(
        read(&ours),
        Held {
            holder: None,
            ours: true
        }
    );
    let other = meta(
        json!({}),
        json!({}),
        json!([entry("kubectl-patch", "Update", restart())]),
    );
    assert!(!read(&other).ours);
}

#[test]
fn each_holder_names_the_fix() {
    let applies = Holder::AppliesHash {
        manager: "team-payments".into(),
    };
    assert_eq!(
        applies.why(),
        "runs an older Linkerd-CNI config, and field manager team-payments applies its pod template's multus.linkerd.io/config-hash (server-side apply): a patch here would make its next apply conflict; render it with configRollout (which writes the new multus.linkerd.io/config-hash into its pod template) and apply it as before (field manager team-payments, or helm upgrade), and its pods roll with the new config"
    );
    let template = applies_template("kubectl").unwrap().why();
    assert!(
        template.contains("kubectl apply --server-side --field-manager=kubectl"),
        "{template}"
    );
    let argo = Holder::GitOps {
        tool: "Argo CD",
        by: "annotation argocd.argoproj.io/tracking-id".into(),
    };
    assert!(argo.why().contains("render it with configRollout"));
    assert!(argo.why().contains("and sync it"));
}

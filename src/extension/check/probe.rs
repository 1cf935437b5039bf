//! The webhook answering through the API server: a server-side dry-run
//! create of a probe pod that the rules attach (`linkerd.io/inject` and
//! `linkerd.io/multus` enabled on the pod), in a namespace the webhook
//! configuration selects and that has the Linkerd-CNI NAD (without it the
//! webhook would deny the pod). The answer must select `linkerd-cni`. A dry
//! run stores nothing and the webhook has no side effects.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client};
use serde_json::json;

use super::EXTENSION;
use super::extension::{Installed, WEBHOOK};
use super::report::Check;
use super::snapshot::{Meta, Nad, call};
use super::wait::{Pass, Retry};
use crate::k8s::namespace::{INJECT_ANNOTATION, MULTUS_ANNOTATION};
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks};

/// The probe pod's name.
pub const PROBE_POD: &str = "linkerd-multus-check-probe";

/// What is checked.
pub const DESCRIPTION: &str = "the webhook attaches linkerd-cni to a pod through the API server";

/// The namespace to probe in: the first, by name, that the configuration's
/// namespaceSelector selects, that is not being deleted and that has the NAD.
pub fn probe_namespace(
    config: &MutatingWebhookConfiguration,
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
) -> Option<String> {
    let selector = config
        .webhooks
        .iter()
        .flatten()
        .next()
        .map(|w| w.namespace_selector.clone().unwrap_or_default())?;
    let selector = Selector::try_from(selector).ok()?;
    namespaces
        .iter()
        .filter(|n| n.deletion_timestamp.is_none() && nads.contains_key(&n.name))
        .find(|n| selector.matches(&n.labels))
        .map(|n| n.name.clone())
}

/// The probe's pod: attached by the rules, admitted by the restricted Pod
/// Security Standard.
pub fn probe_pod(namespace: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": PROBE_POD,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": PROBE_POD},
            "annotations": {INJECT_ANNOTATION: "enabled", MULTUS_ANNOTATION: "enabled"}
        },
        "spec": {
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [{
                "name": "probe",
                "image": "registry.k8s.io/pause:3.10",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    }))
    .expect("the probe pod is a Pod")
}

/// Whether the admitted pod selects the NAD `nad_name` of its namespace.
pub fn attached(pod: &Pod, nad_name: &str, namespace: &str) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NETWORKS_ANNOTATION))
        .and_then(|text| Networks::parse(text).ok())
        .is_some_and(|n| n.references(nad_name, namespace))
}

/// Runs the probe and adds its check.
pub async fn check(
    client: &Client,
    installed: &Installed,
    config: &MutatingWebhookConfiguration,
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    pass: &mut Pass,
) {
    let nad = &installed.settings.nad_name;
    let Some(namespace) = probe_namespace(config, namespaces, nads) else {
        let error = format!(
            "no namespace that MutatingWebhookConfiguration {WEBHOOK} selects has the NAD {nad}: the probe was not run"
        );
        let hint = format!(
            "enable a namespace: kubectl annotate namespace NAME {MULTUS_ANNOTATION}=enabled, and give it the NAD (the NAD controller makes it: linkerd multus install --manage-nads)"
        );
        pass.add(
            EXTENSION,
            Check::warning(DESCRIPTION, error, hint),
            Retry::No,
        );
        return;
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let params = PostParams {
        dry_run: true,
        field_manager: Some("linkerd-multus-check".into()),
    };
    let at = format!("a dry-run create of pod {namespace}/{PROBE_POD}");
    let ns = &installed.namespace;
    let (check, retry) = match call(api.create(&params, &probe_pod(&namespace))).await {
        Err(e) => {
            let hint = format!(
                "the API server must reach a ready webhook replica through Service {ns}/{WEBHOOK}: kubectl -n {ns} get endpoints {WEBHOOK} (the Service's selector and targetPort must match the webhook's pods); kubectl -n {ns} logs deploy/{WEBHOOK}"
            );
            (
                Check::error(DESCRIPTION, format!("{at} failed: {e}"), hint),
                Retry::Yes,
            )
        }
        Ok(pod) if attached(&pod, nad, &namespace) => (Check::success(DESCRIPTION), Retry::No),
        Ok(_) => {
            let hint = format!(
                "check that MutatingWebhookConfiguration {WEBHOOK} selects namespace {namespace} and that the webhook runs with the settings of this cluster: kubectl -n {ns} logs deploy/{WEBHOOK}"
            );
            let error = format!("{at} was admitted without {nad} in {NETWORKS_ANNOTATION}");
            (Check::error(DESCRIPTION, error, hint), Retry::Yes)
        }
    };
    pass.add(EXTENSION, check, retry);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multus::nad::Maker;

    #[test]
    fn the_probe_runs_in_the_first_selected_namespace_with_the_nad() {
        let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": WEBHOOK},
            "webhooks": [{"name": "a", "clientConfig": {}, "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "namespaceSelector": {"matchExpressions": [
                    {"key": "multus.linkerd.io/webhook", "operator": "NotIn", "values": ["disabled"]}]}}]
        }))
        .unwrap();
        let ns = |name: &str, off: bool, deleting: bool| Meta {
            name: name.into(),
            labels: match off {
                true => [(
                    "multus.linkerd.io/webhook".to_string(),
                    "disabled".to_string(),
                )]
                .into(),
                false => BTreeMap::new(),
            },
            deletion_timestamp: deleting.then(|| "2025-01-01T00:00:00Z".into()),
            ..Meta::default()
        };
        let nad = Nad::new(Maker::Controller, None);
        let nads: BTreeMap<String, Nad> = ["a", "b", "c", "d"]
            .map(|n| (n.to_string(), nad.clone()))
            .into();
        let all = [
            ns("a", true, false),
            ns("b", false, true),
            ns("c", false, false),
            ns("d", false, false),
        ];
        assert_eq!(probe_namespace(&config, &all, &nads).as_deref(), Some("c"));
        assert_eq!(probe_namespace(&config, &all[..2], &nads), None);
    }

    #[test]
    fn attachment_is_read_in_either_form() {
        let mut pod = probe_pod("demo");
        assert!(!attached(&pod, "linkerd-cni", "demo"));
        for (networks, want) in [
            ("linkerd-cni", true),
            ("a, demo/linkerd-cni", true),
            (r#"[{"name": "linkerd-cni"}]"#, true),
            ("other/linkerd-cni", false),
        ] {
            pod.metadata
                .annotations
                .get_or_insert_default()
                .insert(NETWORKS_ANNOTATION.into(), networks.into());
            assert_eq!(attached(&pod, "linkerd-cni", "demo"), want, "{networks}");
        }
    }
}

//! `--pre`: what `install` needs. Multus's NAD CRD, the Linkerd-CNI
//! ConfigMap (valid), the Linkerd control plane's namespace, and the rights
//! to create the extension's objects, asked of the API server with
//! SelfSubjectAccessReviews.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};

use super::report::Check;
use super::snapshot::{call, get_opt};
use super::wait::{Pass, Retry};
use super::{Options, PRE, capped, cni, extension};
use crate::extension::DEFAULT_NAMESPACE;

/// The extension's objects by API group and resource, and whether they are
/// namespaced: what `install` creates.
pub const OBJECTS: &[(&str, &str, bool)] = &[
    ("", "namespaces", false),
    ("", "serviceaccounts", true),
    ("", "services", true),
    ("", "secrets", true),
    ("apps", "deployments", true),
    ("policy", "poddisruptionbudgets", true),
    ("networking.k8s.io", "networkpolicies", true),
    ("rbac.authorization.k8s.io", "clusterroles", false),
    ("rbac.authorization.k8s.io", "clusterrolebindings", false),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        false,
    ),
];

/// The review asking whether the caller may create `resource`.
pub fn review(group: &str, resource: &str, namespace: Option<&str>) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(String::from),
                verb: Some("create".into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    }
}

/// `resource.group` as kubectl names it.
fn qualified(group: &str, resource: &str) -> String {
    match group {
        "" => resource.to_string(),
        _ => format!("{resource}.{group}"),
    }
}

/// The `--pre` checks.
pub async fn check(client: &Client, options: &Options, pass: &mut Pass) {
    let (check, retry) = cni::crd_check(&cni::crd_served(client).await);
    pass.add(PRE, check, retry);
    let settings = extension::default_settings(options);
    let data = cni::config_map(client, &settings).await;
    cni::config_map_checks(PRE, &data, &settings, pass);
    let ns = &options.linkerd_namespace;
    let description = "the Linkerd control plane's namespace exists";
    let api: Api<Namespace> = Api::all(client.clone());
    let (check, retry) = match get_opt(api.get(ns)).await {
        Ok(Some(_)) => (Check::success(description), Retry::No),
        Ok(None) => (
            Check::error(
                description,
                format!("Namespace {ns} not found"),
                "install Linkerd first (linkerd install --crds | kubectl apply -f -; linkerd install | kubectl apply -f -), or pass -L for its namespace",
            ),
            Retry::No,
        ),
        Err(e) => (
            extension::read_error(description, &format!("Namespace {ns}"), &e),
            Retry::Yes,
        ),
    };
    pass.add(PRE, check, retry);
    rights(client, pass).await;
}

async fn rights(client: &Client, pass: &mut Pass) {
    let description = "can create the extension's objects";
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    for (group, resource, namespaced) in OBJECTS {
        let namespace = namespaced.then_some(DEFAULT_NAMESPACE);
        let asked = review(group, resource, namespace);
        let answer = match call(api.create(&PostParams::default(), &asked)).await {
            Ok(answer) => answer,
            Err(e) => {
                let check = extension::read_error(description, "a SelfSubjectAccessReview", &e);
                return pass.add(PRE, check, Retry::Yes);
            }
        };
        if !answer.status.is_some_and(|s| s.allowed) {
            let at = namespace.map(|n| format!(" in {n}")).unwrap_or_default();
            denied.push(format!("create {}{at}", qualified(group, resource)));
        }
    }
    let check = match denied.is_empty() {
        true => Check::success(description),
        false => Check::error(
            description,
            format!("you may not: {}", capped(&denied)),
            "install as a cluster administrator, or be granted these rights (kubectl auth can-i create RESOURCE)",
        ),
    };
    pass.add(PRE, check, Retry::No);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_the_package_is_asked_for() {
        let kinds = [
            "Namespace",
            "ServiceAccount",
            "Service",
            "Secret",
            "Deployment",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ClusterRole",
            "ClusterRoleBinding",
            "MutatingWebhookConfiguration",
        ];
        assert_eq!(OBJECTS.len(), kinds.len());
        for ((group, resource, _), kind) in OBJECTS.iter().zip(kinds) {
            let singular = match resource.strip_suffix("ies") {
                Some(stem) => format!("{stem}y"),
                None => resource.trim_end_matches('s').to_string(),
            };
            assert_eq!(singular, kind.to_lowercase(), "{group}");
        }
        let asked = review("apps", "deployments", Some("linkerd-multus"));
        let attributes = asked.spec.resource_attributes.unwrap();
        assert_eq!(attributes.verb.as_deref(), Some("create"));
        assert_eq!(qualified("apps", "deployments"), "deployments.apps");
        assert_eq!(qualified("", "secrets"), "secrets");
    }
}

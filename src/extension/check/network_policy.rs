//! Who may reach the webhook's port 8443: a warning where its NetworkPolicy admits every
//! address and the webhook asks no client certificate, for then anyone who reaches the pod
//! may send it reviews (docs/webhook.md, "Who can hold what").

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyIngressRule};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Api, Client};

use super::wait::{Pass, Retry};
use super::{Check, EXTENSION};
use crate::extension::install::certificates::SERVICE;

/// What the check says holds.
pub const DESCRIPTION: &str = "linkerd-multus-webhook admits only the API server to port 8443";

const HINT: &str = "admit only the API server: linkerd multus install --api-server-cidr with its addresses (or --platform openshift), the chart's apiServerCIDRs, the packages' api-server-cidr setters; or have the webhook ask the API server for a client certificate (--client-ca, docs/webhook.md)";

/// Warns where the webhook's NetworkPolicy in `namespace` admits every address to the
/// webhook's port and `webhook_args` ask no client certificate.
pub async fn check(client: &Client, namespace: &str, webhook_args: &[String], pass: &mut Pass) {
    if webhook_args.iter().any(|a| a.starts_with("--client-ca")) {
        pass.add(EXTENSION, Check::success(DESCRIPTION), Retry::No);
        return;
    }
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
    let read = tokio::time::timeout(
        super::super::install::cluster::API_TIMEOUT,
        api.get_opt(SERVICE),
    )
    .await;
    let check = match read {
        Ok(Ok(policy)) => match open(policy.as_ref()) {
            None => Check::success(DESCRIPTION),
            Some(why) => Check::warning(
                DESCRIPTION,
                format!(
                    "NetworkPolicy {namespace}/{SERVICE}: {why}, and the webhook asks no client certificate: any pod or host that reaches it may send it reviews"
                ),
                HINT,
            ),
        },
        Ok(Err(e)) => Check::warning(
            DESCRIPTION,
            format!("reading NetworkPolicy {namespace}/{SERVICE}: {e}"),
            HINT,
        ),
        Err(_) => Check::warning(
            DESCRIPTION,
            format!("reading NetworkPolicy {namespace}/{SERVICE}: no answer in time"),
            HINT,
        ),
    };
    pass.add(EXTENSION, check, Retry::No);
}

/// Why `policy` admits every address to the webhook's port; `None` when it does not.
pub fn open(policy: Option<&NetworkPolicy>) -> Option<String> {
    let Some(spec) = policy.and_then(|p| p.spec.as_ref()) else {
        return Some("there is none".into());
    };
    let ingress = spec
        .policy_types
        .as_ref()
        .is_none_or(|types| types.iter().any(|t| t == "Ingress"));
    if !ingress {
        return Some("it does not govern ingress".into());
    }
    let rules = spec.ingress.as_deref().unwrap_or_default();
    rules
        .iter()
        .filter(|rule| covers_webhook_port(rule))
        .find_map(open_rule)
}

/// Whether the rule admits traffic to port `https` (8443): it names no port, or that one.
fn covers_webhook_port(rule: &NetworkPolicyIngressRule) -> bool {
    rule.ports.as_ref().is_none_or(|ports| {
        ports.iter().any(|p| match &p.port {
            None => true,
            Some(IntOrString::String(name)) => name == "https",
            Some(IntOrString::Int(port)) => *port == 8443,
        })
    })
}

/// Why the rule admits every address; `None` when it does not.
fn open_rule(rule: &NetworkPolicyIngressRule) -> Option<String> {
    let Some(from) = rule.from.as_ref().filter(|f| !f.is_empty()) else {
        return Some("a rule for port 8443 names no source, which admits every address".into());
    };
    from.iter().find_map(|peer| {
        let cidr = &peer.ip_block.as_ref()?.cidr;
        cidr.ends_with("/0")
            .then(|| format!("it admits {cidr} to port 8443"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_admits_every_address() {
        for (spec, want) in [
            ("", Some("there is none")),
            (
                r#"{"podSelector": {}, "policyTypes": ["Egress"]}"#,
                Some("does not govern ingress"),
            ),
            (
                r#"{"podSelector": {}, "ingress": [{"ports": [{"port": "https"}]}]}"#,
                Some("names no source"),
            ),
            (
                r#"{"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}"#,
                Some("admits 0.0.0.0/0"),
            ),
            (
                r#"{"podSelector": {}, "ingress": [{"ports": [{"port": 8443}], "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}, {"ipBlock": {"cidr": "::/0"}}]}]}"#,
                Some("admits ::/0"),
            ),
            (
                r#"{"podSelector": {}, "ingress": [{"ports": [{"port": "https"}], "from": [{"ipBlock": {"cidr": "192.0.2.10/32"}}]}, {"ports": [{"port": "ops"}]}]}"#,
                None,
            ),
            (
                r#"{"podSelector": {}, "ingress": [{"ports": [{"port": "https"}], "from": [{"namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}}}]}]}"#,
                None,
            ),
            (r#"{"podSelector": {}, "policyTypes": ["Ingress"]}"#, None),
        ] {
            let policy: Option<NetworkPolicy> = (!spec.is_empty()).then(|| {
                serde_json::from_str(&format!(
                    r#"{{"metadata": {{"name": "p"}}, "spec": {spec}}}"#
                ))
                .unwrap()
            });
            let got = open(policy.as_ref());
            match (got.as_deref(), want) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{spec}: {got}"),
                (got, want) => panic!("{spec}: {got:?}, want {want:?}"),
            }
        }
    }
}

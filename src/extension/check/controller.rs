//! The NAD controller, when it is installed: its Deployment's readiness and
//! its leadership (a ready replica of its own holds the Lease, renewed), and
//! that the webhook does not run it in its own process, as an earlier
//! release's layout did (its account then held the rights to write).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};

use super::EXTENSION;
use super::extension::{
    Installed, WEBHOOK, container_args, read_error, readiness, restarts_from_args,
    settings_from_args,
};
use super::report::Check;
use super::snapshot::{call, get_opt};
use super::wait::{Pass, Retry};
use crate::extension::install::NAD_CONTROLLER;

/// The Lease the controller's replicas elect their writer by, unless `--lease-name` says.
pub const LEASE: &str = "linkerd-multus-nad-controller";

/// The webhook's `--manage-nads` (an earlier release's layout), and the
/// controller's Deployment when there is one: its readiness, its Lease, and
/// the settings its arguments give, into `installed`.
pub async fn check(
    client: &Client,
    installed: &mut Installed,
    webhook_args: &[String],
    pass: &mut Pass,
) {
    let ns = installed.namespace.clone();
    if runs_the_controller(webhook_args) {
        let description = format!("{WEBHOOK} runs no NAD controller");
        let error = format!(
            "Deployment {ns}/{WEBHOOK} runs the NAD controller in the webhook's process (--manage-nads=true, an earlier release's layout): the account that answers the API server on the network holds the rights to write NADs (and to restart workloads)"
        );
        let hint = "upgrade: linkerd multus install --manage-nads | kubectl apply --server-side --field-manager=linkerd-multus-install -f - (or helm upgrade): the NAD controller runs as Deployment linkerd-multus-nad-controller, with an account of its own";
        pass.add(EXTENSION, Check::error(description, error, hint), Retry::No);
    }
    let description = format!("{NAD_CONTROLLER} Deployment is ready");
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deployment = match get_opt(api.get(NAD_CONTROLLER)).await {
        Ok(None) => return,
        Err(e) => {
            let at = format!("Deployment {ns}/{NAD_CONTROLLER}");
            pass.add(EXTENSION, read_error(&description, &at, &e), Retry::Yes);
            return;
        }
        Ok(Some(deployment)) => deployment,
    };
    let (check, retry) = readiness(client, &deployment, &description).await;
    pass.add(EXTENSION, check, retry);
    installed.manage_nads = true;
    let args = container_args(&deployment, "controller");
    let base = std::mem::take(&mut installed.settings);
    installed.settings = settings_from_args(&args, base).0;
    installed.restarts = restarts_from_args(&args);
    let lease = lease_name(&args, &ns);
    let (check, retry) = leadership(client, &deployment, &lease).await;
    pass.add(EXTENSION, check, retry);
}

/// Whether the webhook's arguments run the NAD controller in its process.
fn runs_the_controller(args: &[String]) -> bool {
    args.iter()
        .any(|a| a == "--manage-nads" || a == "--manage-nads=true")
}

/// The Lease the controller's arguments name: `--lease-name`, `--lease-namespace`.
struct LeaseName {
    namespace: String,
    name: String,
}

/// The Lease of the controller's arguments, in `namespace` unless they name another.
fn lease_name(args: &[String], namespace: &str) -> LeaseName {
    let flag = |name: &str| {
        let inline = format!("--{name}=");
        args.iter()
            .enumerate()
            .find_map(|(i, a)| match a.strip_prefix(&inline) {
                Some(value) => Some(value.to_string()),
                None if *a == format!("--{name}") => args.get(i + 1).cloned(),
                None => None,
            })
    };
    LeaseName {
        namespace: flag("lease-namespace").unwrap_or_else(|| namespace.to_string()),
        name: flag("lease-name").unwrap_or_else(|| LEASE.to_string()),
    }
}

/// Whether a ready pod of the controller's Deployment holds its Lease, renewed within its
/// duration by this machine's clock.
async fn leadership(client: &Client, deployment: &Deployment, lease: &LeaseName) -> (Check, Retry) {
    let description = format!("{NAD_CONTROLLER} holds its Lease");
    let at = format!("Lease {}/{}", lease.namespace, lease.name);
    let ns = deployment.metadata.namespace.clone().unwrap_or_default();
    let logs = format!("see why: kubectl -n {ns} logs deploy/{NAD_CONTROLLER}");
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let record = match get_opt(api.get(&lease.name)).await {
        Err(e) => return (read_error(&description, &at, &e), Retry::Yes),
        Ok(None) => {
            let error = format!("{at} not found: no replica has taken it");
            return (Check::error(description, error, logs), Retry::Yes);
        }
        Ok(Some(lease)) => lease.spec.unwrap_or_default(),
    };
    let holder = record.holder_identity.unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = format!("app.kubernetes.io/name={NAD_CONTROLLER}");
    let ready: Vec<String> = match call(pods.list(&ListParams::default().labels(&selector))).await {
        Err(e) => {
            return (
                read_error(
                    &description,
                    &format!("the pods of Deployment {ns}/{NAD_CONTROLLER}"),
                    &e,
                ),
                Retry::Yes,
            );
        }
        Ok(list) => list
            .items
            .into_iter()
            .filter(pod_ready)
            .filter_map(|p| p.metadata.name)
            .collect(),
    };
    let renewed = record.renew_time.map(|t| t.0);
    let duration = i64::from(record.lease_duration_seconds.unwrap_or(0));
    let problem = leadership_problem(&holder, &ready, renewed, duration, Timestamp::now());
    match problem {
        None => (Check::success(description), Retry::No),
        Some(problem) => (
            Check::error(description, format!("{at}: {problem}"), logs),
            Retry::Yes,
        ),
    }
}

fn pod_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What is wrong with a Lease held by `holder`, renewed at `renewed` for `duration` seconds,
/// the controller's ready pods being `ready`.
pub fn leadership_problem(
    holder: &str,
    ready: &[String],
    renewed: Option<Timestamp>,
    duration: i64,
    now: Timestamp,
) -> Option<String> {
    if holder.is_empty() {
        return Some("released: no replica holds it".into());
    }
    if !ready.iter().any(|p| p == holder) {
        return Some(format!(
            "held by {holder}, which is not a ready pod of Deployment {NAD_CONTROLLER} ({}): a ready replica takes it over once it expires; a holder of an earlier release's layout (a webhook pod) no longer renews it",
            if ready.is_empty() {
                "it has none".to_string()
            } else {
                ready.join(", ")
            }
        ));
    }
    let age = renewed.map(|r| now.as_second() - r.as_second());
    match age {
        Some(age) if age <= duration => None,
        Some(age) => Some(format!(
            "not renewed by {holder} for {age} s, longer than its {duration} s: it no longer leads, and no NAD is written until a replica takes it"
        )),
        None => Some(format!("held by {holder}, never renewed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_replica_holds_a_fresh_lease() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        let ready = ["c-1".to_string(), "c-2".to_string()];
        for (holder, ready, renewed, want) in [
            ("c-1", &ready[..], at("2026-01-01T00:00:50Z"), None),
            (
                "",
                &ready[..],
                at("2026-01-01T00:00:50Z"),
                Some("released: no replica holds it"),
            ),
            (
                "webhook-1",
                &ready[..],
                at("2026-01-01T00:00:50Z"),
                Some(
                    "held by webhook-1, which is not a ready pod of Deployment linkerd-multus-nad-controller (c-1, c-2): a ready replica takes it over once it expires; a holder of an earlier release's layout (a webhook pod) no longer renews it",
                ),
            ),
            (
                "c-2",
                &ready[..],
                at("2026-01-01T00:00:30Z"),
                Some(
                    "not renewed by c-2 for 30 s, longer than its 15 s: it no longer leads, and no NAD is written until a replica takes it",
                ),
            ),
            ("c-2", &ready[..], None, Some("held by c-2, never renewed")),
        ] {
            assert_eq!(
                leadership_problem(holder, ready, renewed, 15, now).as_deref(),
                want,
                "{holder}"
            );
        }
    }

    #[test]
    fn the_lease_is_named_by_the_controller_s_arguments() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let named = lease_name(&args(&["controller"]), "lm");
        assert_eq!(
            (named.namespace.as_str(), named.name.as_str()),
            ("lm", LEASE)
        );
        let named = lease_name(
            &args(&["controller", "--lease-name=l", "--lease-namespace", "x"]),
            "lm",
        );
        assert_eq!((named.namespace.as_str(), named.name.as_str()), ("x", "l"));
        assert!(runs_the_controller(&args(&[
            "webhook",
            "--manage-nads=true"
        ])));
        assert!(!runs_the_controller(&args(&[
            "webhook",
            "--manage-nads=false"
        ])));
    }
}

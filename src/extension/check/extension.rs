//! The extension's own objects: its Namespace (the one labelled
//! `linkerd.io/extension=multus`), the webhook's Deployment and what its
//! arguments tell of the rules' settings, and the webhook configuration.
//! The NAD controller's Deployment and Lease are in [`super::controller`],
//! the certificate and the probe through the API server in
//! [`super::certificate`] and [`super::probe`].

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

use super::deployment;
use super::report::Check;
use super::snapshot::{Meta, ReadError, get_opt};
use super::wait::{Pass, Retry};
use super::{EXTENSION, INSTALL_HINT, Options, capped};
use crate::extension::install::NAD_CONTROLLER;
use crate::extension::{DEFAULT_NAMESPACE, EXTENSION_LABEL, NAME};
use crate::krm::function_config::SettingsKind;
use crate::linkerd_cni::settings::Settings;

/// The webhook's Deployment, Service and MutatingWebhookConfiguration.
pub const WEBHOOK: &str = "linkerd-multus-webhook";
/// The Secret holding the webhook's serving certificate.
pub const TLS_SECRET: &str = "linkerd-multus-webhook-tls";

/// What the checks after these learn of the installed extension.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The extension's namespace.
    pub namespace: String,
    /// The rules' settings, as the webhook's arguments give them.
    pub settings: Settings,
    /// Whether the NAD controller runs (its Deployment; or, in an earlier
    /// release's layout, the webhook's `--manage-nads`).
    pub manage_nads: bool,
    /// The NAD controller's restarts of stale workloads, when its arguments turn them on.
    pub restarts: Option<Restarts>,
}

/// The pacing of the NAD controller's restarts (`--restart-stale-workloads`), as its
/// arguments set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restarts {
    /// `--restart-concurrency` (1 unless set).
    pub concurrency: usize,
    /// `--restart-deadline` (10 minutes unless set).
    pub deadline: Duration,
}

/// The restarts the controller's arguments turn on, `None` when they do not:
/// `--restart-stale-workloads` (or `=true`), with `--restart-concurrency` and
/// `--restart-deadline` as `--flag=value` or `--flag value`; a value the controller would
/// refuse is left at its default.
pub fn restarts_from_args(args: &[String]) -> Option<Restarts> {
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
    let on = args
        .iter()
        .any(|a| a == "--restart-stale-workloads" || a == "--restart-stale-workloads=true");
    on.then(|| Restarts {
        concurrency: flag("restart-concurrency")
            .and_then(|n| n.parse().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(1),
        deadline: flag("restart-deadline")
            .and_then(|d| humantime::parse_duration(&d).ok())
            .unwrap_or(Duration::from_secs(600)),
    })
}

/// The Namespace and the webhook's Deployment, with the webhook's arguments;
/// `None` when the extension's Namespace is not there (the remaining checks
/// of the extension are then skipped).
pub async fn namespace_and_deployment(
    client: &Client,
    options: &Options,
    namespaces: &Result<Vec<Meta>, ReadError>,
    pass: &mut Pass,
) -> Option<(Installed, Vec<String>)> {
    let description = "linkerd-multus extension Namespace exists";
    let namespace = match namespaces {
        Err(e) => {
            let error = format!("cannot list Namespaces: {e}");
            let hint = "check that you may list Namespaces: kubectl auth can-i list namespaces";
            pass.add(
                EXTENSION,
                Check::error(description, error, hint),
                Retry::Yes,
            );
            return None;
        }
        Ok(all) => match extension_namespace(all) {
            Ok(name) => name,
            Err(error) => {
                let check = Check::error(description, error, INSTALL_HINT);
                pass.add(EXTENSION, check, Retry::No);
                return None;
            }
        },
    };
    let deleting = namespaces
        .iter()
        .flatten()
        .find(|n| n.name == namespace)
        .and_then(|n| n.deletion_timestamp.as_deref());
    if let Some(since) = deleting {
        let error = format!(
            "Namespace {namespace} is being deleted (since {since}): linkerd-multus is being uninstalled, its webhook with it"
        );
        let hint = format!(
            "wait until it is gone (kubectl wait --for=delete namespace/{namespace} --timeout=5m), then install again: linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -"
        );
        pass.add(EXTENSION, Check::error(description, error, hint), Retry::No);
        return None;
    }
    pass.add(EXTENSION, Check::success(description), Retry::No);
    let description = format!("{WEBHOOK} Deployment is ready");
    let mut installed = Installed {
        settings: default_settings(options),
        namespace,
        manage_nads: false,
        restarts: None,
    };
    let (check, retry, deployment) =
        deployment_ready(client, &installed.namespace, WEBHOOK, &description).await;
    pass.add(EXTENSION, check, retry);
    let args = deployment
        .as_ref()
        .map(|d| container_args(d, "webhook"))
        .unwrap_or_default();
    installed.settings = settings_from_args(&args, installed.settings).0;
    Some((installed, args))
}

/// Whether Deployment `namespace/name` is ready, and why not: the check
/// described `description`, and the Deployment when it was read.
pub async fn deployment_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    description: &str,
) -> (Check, Retry, Option<Deployment>) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let at = format!("Deployment {namespace}/{name}");
    let deployment = match get_opt(api.get(name)).await {
        Err(e) => return (read_error(description, &at, &e), Retry::Yes, None),
        Ok(None) => {
            let check = Check::error(description, format!("{at} not found"), INSTALL_HINT);
            return (check, Retry::No, None);
        }
        Ok(Some(deployment)) => deployment,
    };
    let (check, retry) = readiness(client, &deployment, description).await;
    (check, retry, Some(deployment))
}

/// Whether `deployment` is ready, and why not: the check described `description`.
pub async fn readiness(
    client: &Client,
    deployment: &Deployment,
    description: &str,
) -> (Check, Retry) {
    let namespace = deployment.metadata.namespace.as_deref().unwrap_or_default();
    let name = deployment.metadata.name.as_deref().unwrap_or_default();
    let at = format!("Deployment {namespace}/{name}");
    match deployment::ready(deployment) {
        Ok(()) => (Check::success(description), Retry::No),
        Err(problem) => {
            let (error, hint) = match deployment::why(client, deployment).await {
                Some(why) => (format!("{at}: {problem}\n{}", why.reason), why.hint),
                None => (
                    format!("{at}: {problem}"),
                    format!(
                        "see why: kubectl -n {namespace} describe deployment {name}; kubectl -n {namespace} get pods -l app.kubernetes.io/name={name}"
                    ),
                ),
            };
            (Check::error(description, error, hint), Retry::Yes)
        }
    }
}

/// The rules' settings when the webhook's arguments cannot be read: the
/// defaults, with the Linkerd namespace of `-L`.
pub fn default_settings(options: &Options) -> Settings {
    Settings {
        linkerd_namespace: options.linkerd_namespace.clone(),
        ..Settings::default()
    }
}

/// The rules' settings the installed webhook and NAD controller run with,
/// read without checking anything: the defaults when the extension cannot
/// be found.
pub async fn resolve(client: &Client, options: &Options, namespaces: &[Meta]) -> Installed {
    let namespace = extension_namespace(namespaces).unwrap_or_else(|_| DEFAULT_NAMESPACE.into());
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let args = |name: &'static str, container: &'static str| {
        let api = api.clone();
        async move {
            match get_opt(api.get(name)).await {
                Ok(Some(deployment)) => Some(container_args(&deployment, container)),
                _ => None,
            }
        }
    };
    let webhook = args(WEBHOOK, "webhook").await.unwrap_or_default();
    let (settings, old_layout) = settings_from_args(&webhook, default_settings(options));
    let controller = args(NAD_CONTROLLER, "controller").await;
    let manage_nads = old_layout || controller.is_some();
    let controller = controller.unwrap_or_default();
    Installed {
        namespace,
        settings: settings_from_args(&controller, settings).0,
        manage_nads,
        restarts: restarts_from_args(&controller),
    }
}

/// A check that failed because a read did.
pub fn read_error(description: &str, what: &str, e: &ReadError) -> Check {
    Check::error(
        description,
        format!("cannot read {what}: {e}"),
        "check the connection to the API server and your rights: kubectl auth can-i --list",
    )
}

/// The extension's namespace among all Namespaces: the one labelled
/// `linkerd.io/extension=multus` (when several are, one not being deleted
/// first, then [`DEFAULT_NAMESPACE`]).
pub fn extension_namespace(namespaces: &[Meta]) -> Result<String, String> {
    namespaces
        .iter()
        .filter(|n| n.labels.get(EXTENSION_LABEL).map(String::as_str) == Some(NAME))
        .min_by_key(|n| (n.deletion_timestamp.is_some(), n.name != DEFAULT_NAMESPACE))
        .map(|n| n.name.clone())
        .ok_or_else(|| format!("no Namespace is labelled {EXTENSION_LABEL}={NAME}"))
}

/// The arguments of the Deployment's container that runs `command` (its
/// first argument), else of its first container.
pub fn container_args(deployment: &Deployment, command: &str) -> Vec<String> {
    let containers = deployment
        .spec
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    containers
        .iter()
        .find(|c| {
            c.args
                .as_ref()
                .is_some_and(|a| a.first().map(String::as_str) == Some(command))
        })
        .or(containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

/// The rules' settings from the webhook's or the controller's arguments
/// (`--linkerd-namespace`, `--nad-name`, `--cni-namespace`, ... as
/// `--flag=value` or `--flag value`) over `base`, and whether they run the NAD
/// controller in the webhook's process (`--manage-nads`, an earlier release's).
pub fn settings_from_args(args: &[String], base: Settings) -> (Settings, bool) {
    let mut settings = base;
    let mut manage_nads = false;
    let mut args = args.iter().peekable();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        if name == "manage-nads" {
            manage_nads = inline.as_deref().is_none_or(|v| v == "true");
            continue;
        }
        // The settings keys of the webhook's flags (commands/flags.rs); each
        // value is read as the webhook reads it, and one it would refuse is
        // left at `base`.
        let key = match name {
            "linkerd-namespace" => "linkerdNamespace",
            "nad-name" => "nadName",
            "cni-namespace" => "cniNamespace",
            "cni-kubeconfig" => "cniKubeconfig",
            "cni-version" => "cniVersion",
            "uid-range-annotation" => "uidRangeAnnotation",
            "proxy-uid-offset" => "proxyUIDOffset",
            _ => continue,
        };
        let Some(value) = inline.or_else(|| args.next().cloned()) else {
            break;
        };
        let mut next = settings.clone();
        if next.override_with([(key, value.as_str())]).is_ok() {
            settings = next;
        }
    }
    (settings, manage_nads)
}

/// The webhook configuration, read for the checks of its clientConfig and
/// caBundle; `None` when it is missing or unreadable (reported here).
pub async fn webhook_configuration(
    client: &Client,
    installed: &Installed,
    pass: &mut Pass,
) -> Option<MutatingWebhookConfiguration> {
    let description = format!("{WEBHOOK} MutatingWebhookConfiguration calls the webhook's Service");
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let at = format!("MutatingWebhookConfiguration {WEBHOOK}");
    let config = match get_opt(api.get(WEBHOOK)).await {
        Err(e) => {
            pass.add(EXTENSION, read_error(&description, &at, &e), Retry::Yes);
            return None;
        }
        Ok(None) => {
            let check = Check::error(&description, format!("{at} not found"), INSTALL_HINT);
            pass.add(EXTENSION, check, Retry::No);
            return None;
        }
        Ok(Some(config)) => config,
    };
    let problems = client_config_problems(&config, &installed.namespace);
    let check = match problems.is_empty() {
        true => Check::success(&description),
        false => Check::error(
            &description,
            format!("{at}: {}", capped(&problems)),
            INSTALL_HINT,
        ),
    };
    pass.add(EXTENSION, check, Retry::No);
    Some(config)
}

/// The webhooks of the configuration that do not call the Service
/// `namespace/linkerd-multus-webhook`.
pub fn client_config_problems(
    config: &MutatingWebhookConfiguration,
    namespace: &str,
) -> Vec<String> {
    let webhooks = config.webhooks.as_deref().unwrap_or_default();
    if webhooks.is_empty() {
        return vec!["it has no webhook".into()];
    }
    webhooks
        .iter()
        .filter_map(|w| match &w.client_config.service {
            Some(s) if s.namespace == namespace && s.name == WEBHOOK => None,
            Some(s) => Some(format!(
                "webhook {} calls Service {}/{}, not {namespace}/{WEBHOOK}",
                w.name, s.namespace, s.name
            )),
            None => Some(format!(
                "webhook {} calls a URL, not the Service {namespace}/{WEBHOOK}",
                w.name
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(name: &str, labels: &[(&str, &str)]) -> Meta {
        Meta {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Meta::default()
        }
    }

    #[test]
    fn the_restarts_are_read_from_the_controllers_arguments() {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        for (args, want) in [
            (vec!["controller"], None),
            (vec!["controller", "--restart-stale-workloads=false"], None),
            (
                vec!["controller", "--restart-stale-workloads"],
                Some((1, minutes(10))),
            ),
            (
                // As install writes them.
                vec![
                    "controller",
                    "--restart-stale-workloads=true",
                    "--restart-concurrency=3",
                    "--restart-deadline=15m",
                ],
                Some((3, minutes(15))),
            ),
            (
                vec![
                    "--restart-stale-workloads",
                    "--restart-concurrency",
                    "0",
                    "--restart-deadline",
                    "soon",
                ],
                Some((1, minutes(10))),
            ),
        ] {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let got = restarts_from_args(&args).map(|r| (r.concurrency, r.deadline));
            assert_eq!(got, want, "{args:?}");
        }
    }

    #[test]
    fn the_extension_namespace_is_the_labelled_one() {
        let l = [(EXTENSION_LABEL, "multus")];
        for (namespaces, want) in [
            (
                vec![meta("a", &l), meta("linkerd-multus", &l)],
                Ok("linkerd-multus"),
            ),
            (vec![meta("b", &l), meta("linkerd-multus", &[])], Ok("b")),
            (
                vec![meta("linkerd-multus", &[(EXTENSION_LABEL, "viz")])],
                Err(()),
            ),
            // Uninstalled from one namespace, installed again in another.
            (
                vec![
                    Meta {
                        deletion_timestamp: Some("2026-01-01T00:00:00Z".into()),
                        ..meta("linkerd-multus", &l)
                    },
                    meta("mesh", &l),
                ],
                Ok("mesh"),
            ),
        ] {
            let got = extension_namespace(&namespaces);
            assert_eq!(got.as_deref().map_err(|_| ()), want);
        }
    }

    #[test]
    fn settings_come_from_the_webhook_s_arguments() {
        let args: Vec<String> = [
            "webhook",
            "--linkerd-namespace=l5d",
            "--nad-name",
            "lcni",
            "--manage-nads",
            "--proxy-uid-offset=7",
            "--on-error=allow",
        ]
        .map(String::from)
        .to_vec();
        let (settings, manage) = settings_from_args(&args, Settings::default());
        assert!(manage);
        assert_eq!(settings.linkerd_namespace, "l5d");
        assert_eq!(settings.nad_name, "lcni");
        assert_eq!(settings.proxy_uid_offset, 7);
        assert_eq!(settings.cni_namespace, "linkerd-cni");
        let (_, manage) = settings_from_args(&["--manage-nads=false".into()], Settings::default());
        assert!(!manage);
    }

    #[test]
    fn the_configuration_must_call_the_service() {
        let config = |client: serde_json::Value| -> MutatingWebhookConfiguration {
            serde_json::from_value(json!({
                "metadata": {"name": WEBHOOK},
                "webhooks": [{"name": "attach.multus.linkerd.io", "clientConfig": client,
                    "admissionReviewVersions": ["v1"], "sideEffects": "None"}]
            }))
            .unwrap()
        };
        let service = |ns: &str| json!({"service": {"namespace": ns, "name": WEBHOOK}});
        assert!(client_config_problems(&config(service("lm")), "lm").is_empty());
        assert_eq!(
            client_config_problems(&config(service("other")), "lm"),
            [
                "webhook attach.multus.linkerd.io calls Service other/linkerd-multus-webhook, not lm/linkerd-multus-webhook"
            ]
        );
        assert_eq!(
            client_config_problems(&config(json!({"url": "https://x/"})), "lm"),
            [
                "webhook attach.multus.linkerd.io calls a URL, not the Service lm/linkerd-multus-webhook"
            ]
        );
    }
}

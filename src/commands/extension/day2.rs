//! `install`'s day-2 flags: each container's resources, the log level, the webhook's
//! `--on-error` and `--missing-nad`, and labels and annotations for the pods, the webhook's
//! Service and its MutatingWebhookConfiguration; each overrides the same setting of
//! `--config` (the chart's value of the same name).

use clap::Args;

use crate::extension::install::options::{self, Day2Settings, MissingNad, OnError, Pairs};

fn pair(flag: &'static str) -> impl Fn(&str) -> Result<(String, String), String> + Clone {
    move |text| options::pair(text, flag)
}

fn resources(flag: &'static str) -> impl Fn(&str) -> Result<options::Resources, String> + Clone {
    move |text| options::resources(text, flag)
}

/// The day-2 flags.
#[derive(Debug, Clone, Args)]
pub struct Day2Flags {
    /// The webhook container's resources over the packages' (YAML, e.g. '{requests: {cpu:
    /// 50m}, limits: {memory: 256Mi}}'; null removes one) [default: requests cpu 10m, memory
    /// 32Mi; limits memory 64Mi].
    #[arg(long, value_name = "YAML", value_parser = resources("--webhook-resources"))]
    webhook_resources: Option<options::Resources>,
    /// The NAD controller container's resources, as --webhook-resources; with
    /// --restart-stale-workloads a 64Mi memory limit is raised to 128Mi [default: as the
    /// webhook's].
    #[arg(long, value_name = "YAML", value_parser = resources("--controller-resources"))]
    controller_resources: Option<options::Resources>,
    /// The webhook's and the NAD controller's log filter: a level (info, debug) or tracing
    /// directives [default: info].
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
    /// What the webhook answers for a pod it cannot act on: allow it with a warning, or deny
    /// it [default: allow].
    #[arg(long, value_enum, value_name = "ANSWER")]
    on_error: Option<OnError>,
    /// What the webhook does with a pod whose namespace lacks the NAD [default: attach with
    /// --manage-nads, else deny].
    #[arg(long, value_enum, value_name = "POLICY")]
    missing_nad: Option<MissingNad>,
    /// A label of the webhook's and the NAD controller's pods (KEY=VALUE), repeated.
    #[arg(long = "pod-label", value_name = "KEY=VALUE", value_parser = pair("--pod-label"))]
    pod_labels: Vec<(String, String)>,
    /// An annotation of their pods (KEY=VALUE), repeated.
    #[arg(long = "pod-annotation", value_name = "KEY=VALUE", value_parser = pair("--pod-annotation"))]
    pod_annotations: Vec<(String, String)>,
    /// A label of the webhook's Service (KEY=VALUE), repeated.
    #[arg(long = "service-label", value_name = "KEY=VALUE", value_parser = pair("--service-label"))]
    service_labels: Vec<(String, String)>,
    /// An annotation of the webhook's Service (KEY=VALUE), repeated: e.g. OpenShift's
    /// service.beta.openshift.io/serving-cert-secret-name.
    #[arg(long = "service-annotation", value_name = "KEY=VALUE", value_parser = pair("--service-annotation"))]
    service_annotations: Vec<(String, String)>,
    /// A label of the MutatingWebhookConfiguration (KEY=VALUE), repeated.
    #[arg(long = "webhook-configuration-label", value_name = "KEY=VALUE",
          value_parser = pair("--webhook-configuration-label"))]
    webhook_configuration_labels: Vec<(String, String)>,
    /// An annotation of the MutatingWebhookConfiguration (KEY=VALUE), repeated: e.g.
    /// OpenShift's service.beta.openshift.io/inject-cabundle=true.
    #[arg(long = "webhook-configuration-annotation", value_name = "KEY=VALUE",
          value_parser = pair("--webhook-configuration-annotation"))]
    webhook_configuration_annotations: Vec<(String, String)>,
}

/// The flag's pairs, `None` when not given.
fn pairs(given: &[(String, String)]) -> Option<Pairs> {
    (!given.is_empty()).then(|| given.iter().cloned().collect())
}

impl Day2Flags {
    /// The settings the flags give.
    pub fn settings(&self) -> Day2Settings {
        Day2Settings {
            webhook_resources: self.webhook_resources.clone(),
            controller_resources: self.controller_resources.clone(),
            log_level: self.log_level.clone(),
            on_error: self.on_error,
            missing_nad: self.missing_nad,
            pod_labels: pairs(&self.pod_labels),
            pod_annotations: pairs(&self.pod_annotations),
            service_labels: pairs(&self.service_labels),
            service_annotations: pairs(&self.service_annotations),
            webhook_configuration_labels: pairs(&self.webhook_configuration_labels),
            webhook_configuration_annotations: pairs(&self.webhook_configuration_annotations),
        }
    }
}

//! The day-2 settings ([`Day2`]) on the packages' objects, as the chart renders them: each
//! container's resources over the package's (with the restarts, the NAD controller's 64Mi
//! memory limit raised to [`RESTARTS_MEMORY_LIMIT`] unless another is given), `--log-level`
//! after `--log-format`, the webhook's `--on-error`, and the labels and annotations added to
//! the pods, the webhook's Service and its MutatingWebhookConfiguration (beside the package's,
//! which win).

use super::options::{Day2, Options, Pairs, Resources};
use super::{NAD_CONTROLLER, RESTARTS_MEMORY_LIMIT};
use crate::yaml::{Map, Node};

/// The webhook's Deployment, Service and container.
const WEBHOOK: &str = "linkerd-multus-webhook";
/// Its container.
const WEBHOOK_CONTAINER: &str = "webhook";
/// The NAD controller's container.
const CONTROLLER_CONTAINER: &str = "controller";
/// The package's memory limit of the NAD controller.
const PACKAGE_MEMORY_LIMIT: &str = "64Mi";

/// `object` with the day-2 settings of `options` that are its.
pub fn apply(object: &mut Node, options: &Options) {
    let day2 = &options.day2;
    let kind = object.get_path(&["kind"]).and_then(Node::as_str);
    let name = object
        .get_path(&["metadata", "name"])
        .and_then(Node::as_str);
    match (kind, name) {
        (Some("Deployment"), Some(WEBHOOK)) => {
            if let Some(container) = container(object, WEBHOOK_CONTAINER) {
                resources(container, &day2.webhook_resources);
                args(container, day2, true);
            }
            pod(object, day2);
        }
        (Some("Deployment"), Some(NAD_CONTROLLER)) => {
            if let Some(container) = container(object, CONTROLLER_CONTAINER) {
                resources(container, &day2.controller_resources);
                if options.restart_stale_workloads
                    && let Some(limits) = container
                        .map_entry("resources")
                        .and_then(|r| r.map_entry("limits"))
                    && limits.get_text("memory") == Some(PACKAGE_MEMORY_LIMIT)
                {
                    limits.insert("memory", Node::plain(RESTARTS_MEMORY_LIMIT));
                }
                args(container, day2, false);
            }
            pod(object, day2);
        }
        (Some("Service"), Some(WEBHOOK)) => {
            if let Some(metadata) = object.as_map_mut().and_then(|o| o.map_entry("metadata")) {
                add(metadata, "labels", &day2.service_labels);
                add(metadata, "annotations", &day2.service_annotations);
            }
        }
        (Some("MutatingWebhookConfiguration"), _) => {
            if let Some(metadata) = object.as_map_mut().and_then(|o| o.map_entry("metadata")) {
                add(metadata, "labels", &day2.webhook_configuration_labels);
                add(
                    metadata,
                    "annotations",
                    &day2.webhook_configuration_annotations,
                );
            }
        }
        _ => {}
    }
}

/// The Deployment's container `name`.
pub(super) fn container<'a>(deployment: &'a mut Node, name: &str) -> Option<&'a mut Map> {
    let Some(Node::Seq(containers)) = deployment
        .as_map_mut()
        .and_then(|d| d.map_entry("spec"))
        .and_then(|spec| spec.map_entry("template"))
        .and_then(|template| template.map_entry("spec"))
        .and_then(|spec| spec.get_mut("containers"))
    else {
        return None;
    };
    (containers.items.iter_mut())
        .find(|c| c.get_path(&["name"]).and_then(Node::as_str) == Some(name))?
        .as_map_mut()
}

/// The container's resources with `given` over them (`None` removes one).
fn resources(container: &mut Map, given: &Resources) {
    let Some(resources) = container.map_entry("resources") else {
        return;
    };
    for (section, items) in [("requests", &given.requests), ("limits", &given.limits)] {
        if items.is_empty() {
            continue;
        }
        let Some(section) = resources.map_entry(section) else {
            continue;
        };
        for (name, quantity) in items {
            match quantity {
                Some(q) => section.insert(name, Node::plain(q.as_str())),
                None => {
                    section.remove(name);
                }
            }
        }
    }
}

/// `--log-level` after `--log-format` where not the default; the webhook's `--on-error`.
fn args(container: &mut Map, day2: &Day2, webhook: bool) {
    let Some(Node::Seq(args)) = container.get_mut("args") else {
        return;
    };
    if webhook
        && let Some(arg) = (args.items.iter_mut())
            .find(|a| a.as_str().is_some_and(|a| a.starts_with("--on-error=")))
    {
        *arg = Node::plain(format!("--on-error={}", day2.on_error.as_str()));
    }
    if day2.log_level != "info" {
        let at = (args.items.iter())
            .position(|a| a.as_str().is_some_and(|a| a.starts_with("--log-format=")))
            .map_or(args.items.len(), |i| i + 1);
        let arg = format!("--log-level={}", day2.log_level);
        args.items.insert(at, Node::plain(arg));
    }
}

/// The pod template's labels and annotations.
fn pod(deployment: &mut Node, day2: &Day2) {
    if let Some(metadata) = deployment
        .as_map_mut()
        .and_then(|d| d.map_entry("spec"))
        .and_then(|spec| spec.map_entry("template"))
        .and_then(|template| template.map_entry("metadata"))
    {
        add(metadata, "labels", &day2.pod_labels);
        add(metadata, "annotations", &day2.pod_annotations);
    }
}

/// `pairs` added under `metadata`'s `key`, beside those there (which win).
fn add(metadata: &mut Map, key: &str, pairs: &Pairs) {
    if pairs.is_empty() {
        return;
    }
    let Some(map) = metadata.map_entry(key) else {
        return;
    };
    for (k, v) in pairs {
        if map.get(k).is_none() {
            map.insert(k, Node::string(v.as_str()));
        }
    }
}

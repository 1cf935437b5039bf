//! The `deploy/` kpt package (the webhook's Deployment, RBAC, Service, PodDisruptionBudget,
//! MutatingWebhookConfiguration and certificates), `deploy/certs.sh` and
//! `scripts/e2e-webhook.sh`: what a reviewer of the manifests would check, on the parsed
//! YAML; the certificate script run for real (openssl); the shell scripts under `bash -n` and
//! shellcheck (required: these tests fail, never skip, when it is missing).

use crate::common;
use crate::common::process::Guarded;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::output_text as text;
use common::*;

mod additions;
mod admission;
mod docs;
mod package;
mod scripts;
pub(crate) mod setters;

const NAMESPACE: &str = "linkerd-multus";
const NAME: &str = "linkerd-multus-webhook";
const TLS_SECRET: &str = "linkerd-multus-webhook-tls";

// ------------------------------------------------------------------------------------------
// Reading the package.

/// Every `.yaml` file under `deploy/` (relative path, text), sorted.
fn yaml_files() -> Vec<(String, String)> {
    snapshot(&repo_path("deploy"))
        .into_iter()
        .filter(|(rel, _)| rel.ends_with(".yaml"))
        .map(|(rel, bytes)| (rel, String::from_utf8(bytes).expect("UTF-8")))
        .collect()
}

/// Every resource of the package with the file it is in.
fn resources_of(files: &[(String, String)]) -> Vec<(String, Yaml)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let docs =
            parse_yaml_stream(text).unwrap_or_else(|e| panic!("deploy/{rel} does not parse: {e}"));
        assert!(!docs.is_empty(), "deploy/{rel} holds no resource");
        out.extend(docs.into_iter().map(|d| (rel.clone(), d)));
    }
    out
}

struct Package {
    resources: Vec<(String, Yaml)>,
}

impl Package {
    fn load() -> Self {
        Package::from_files(&yaml_files())
    }

    fn from_files(files: &[(String, String)]) -> Self {
        Package {
            resources: resources_of(files),
        }
    }

    /// The one resource of `kind` named `name`.
    fn get(&self, kind: &str, name: &str) -> &Yaml {
        let found: Vec<&Yaml> = self
            .resources
            .iter()
            .map(|(_, r)| r)
            .filter(|r| {
                r.str_at(&["kind"]) == Some(kind) && r.str_at(&["metadata", "name"]) == Some(name)
            })
            .collect();
        assert_eq!(
            found.len(),
            1,
            "expected exactly one {kind} {name} in deploy/"
        );
        found[0]
    }

    fn of_kind(&self, kind: &str) -> Vec<&Yaml> {
        self.resources
            .iter()
            .map(|(_, r)| r)
            .filter(|r| r.str_at(&["kind"]) == Some(kind))
            .collect()
    }

    fn deployment(&self) -> &Yaml {
        self.get("Deployment", NAME)
    }

    fn pod_labels(&self) -> &Yaml {
        self.deployment()
            .at(&["spec", "template", "metadata", "labels"])
            .expect("Deployment has pod labels")
    }

    fn pod_spec(&self) -> &Yaml {
        self.deployment()
            .at(&["spec", "template", "spec"])
            .expect("Deployment has a pod spec")
    }

    fn container(&self) -> &Yaml {
        let containers = self.pod_spec().get("containers").expect("containers").seq();
        assert_eq!(containers.len(), 1, "one container");
        &containers[0]
    }

    /// The container's ports: (name, number).
    fn container_ports(&self) -> Vec<(String, String)> {
        self.container()
            .get("ports")
            .unwrap()
            .seq()
            .iter()
            .map(|p| {
                (
                    p.str_at(&["name"]).unwrap().to_string(),
                    p.str_at(&["containerPort"]).unwrap().to_string(),
                )
            })
            .collect()
    }

    fn args(&self) -> Vec<String> {
        self.container()
            .get("args")
            .expect("container args")
            .seq()
            .iter()
            .map(|a| a.as_str().expect("string arg").to_string())
            .collect()
    }

    /// The value of `--flag=value` or `--flag value` in the container's args.
    fn arg(&self, flag: &str) -> Option<String> {
        let args = self.args();
        args.iter().enumerate().find_map(|(i, a)| {
            if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
                Some(v.to_string())
            } else if a == flag {
                args.get(i + 1).cloned()
            } else {
                None
            }
        })
    }

    /// The configuration's webhook of that name.
    fn webhook_named(&self, name: &str) -> &Yaml {
        let mwc = self.get("MutatingWebhookConfiguration", NAME);
        let hooks = mwc.get("webhooks").expect("webhooks").seq();
        let names: Vec<&str> = hooks.iter().filter_map(|h| h.str_at(&["name"])).collect();
        assert_eq!(
            names,
            ["attach.multus.linkerd.io", "namespaces.multus.linkerd.io"],
            "the pods' webhook, then the Namespaces'"
        );
        hooks
            .iter()
            .find(|h| h.str_at(&["name"]) == Some(name))
            .unwrap()
    }

    /// The webhook of pods, which attaches them.
    fn webhook(&self) -> &Yaml {
        self.webhook_named("attach.multus.linkerd.io")
    }
}

fn strings(node: Option<&Yaml>) -> Vec<String> {
    node.map(|n| {
        n.seq()
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    })
    .unwrap_or_default()
}

fn number(node: &Yaml, path: &[&str]) -> i64 {
    node.str_at(path)
        .unwrap_or_else(|| panic!("no {path:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{path:?} is not a number"))
}

/// `label map ⊆ other label map`.
fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    !selector.entries().is_empty()
        && selector
            .entries()
            .iter()
            .all(|(k, v)| labels.get(k.as_str().unwrap()).and_then(Yaml::as_str) == v.as_str())
}

/// Seconds of a duration written `5s`, `1m`, `500ms`.
fn seconds(text: &str) -> f64 {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: f64 = n
        .parse()
        .unwrap_or_else(|_| panic!("bad duration {text:?}"));
    match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => panic!("unexpected duration unit in {text:?}"),
    }
}

fn port_of(address: &str) -> &str {
    address.rsplit(':').next().unwrap()
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    })
}

fn run(cmd: &mut Command) -> Output {
    cmd.guarded_output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// A YAML node as JSON, with plain scalars resolved the way Kubernetes reads them (YAML 1.2
/// core schema: booleans, integers, floats, null).
pub(crate) fn to_json(node: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Yaml::Scalar {
            value,
            plain: true,
            tag: None,
            ..
        } => match value.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "" | "~" | "null" => Value::Null,
            v => v
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| {
                    v.parse::<f64>()
                        .ok()
                        .filter(|_| v.contains('.'))
                        .map(Value::from)
                        .ok_or(())
                })
                .unwrap_or_else(|_| Value::String(v.to_string())),
        },
        Yaml::Scalar { value, .. } => Value::String(value.clone()),
        Yaml::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.as_str().expect("string key").to_string(), to_json(v)))
                .collect(),
        ),
    }
}

/// Deserializes `resource` into its k8s-openapi type and serializes it back: a misspelled or
/// misplaced field is dropped on the way and shows as a difference, a wrong type fails.
fn round_trip<T>(resource: &Yaml) -> Option<String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let json = to_json(resource);
    let typed: T = match serde_json::from_value(json.clone()) {
        Ok(t) => t,
        Err(e) => return Some(format!("{:?}: not a valid object: {e}", resource.id())),
    };
    let back = serde_json::to_value(&typed).unwrap();
    (back != json).then(|| {
        format!(
            "{:?}: fields unknown to the Kubernetes API (dropped by a round trip):\n  written: {json}\n  typed:   {back}",
            resource.id()
        )
    })
}

/// Whether a resource reads as its Kubernetes type (the workload's kinds, with no field
/// dropped on the way).
fn round_trip_any(r: &Yaml) -> bool {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let json = to_json(r);
    match r.str_at(&["kind"]) {
        Some("Deployment") => round_trip::<Deployment>(r).is_none(),
        Some("Service") => round_trip::<Service>(r).is_none(),
        Some("ServiceAccount") => round_trip::<ServiceAccount>(r).is_none(),
        Some("NetworkPolicy") => round_trip::<NetworkPolicy>(r).is_none(),
        Some("PodDisruptionBudget") => round_trip::<PodDisruptionBudget>(r).is_none(),
        Some("ValidatingAdmissionPolicy") => round_trip::<ValidatingAdmissionPolicy>(r).is_none(),
        Some("ValidatingAdmissionPolicyBinding") => {
            round_trip::<ValidatingAdmissionPolicyBinding>(r).is_none()
        }
        Some("ClusterRole") => serde_json::from_value::<ClusterRole>(json).is_ok(),
        Some("ClusterRoleBinding") => serde_json::from_value::<ClusterRoleBinding>(json).is_ok(),
        Some("Role") => serde_json::from_value::<Role>(json).is_ok(),
        Some("RoleBinding") => serde_json::from_value::<RoleBinding>(json).is_ok(),
        Some("ConfigMap") => serde_json::from_value::<ConfigMap>(json).is_ok(),
        _ => false,
    }
}

//! The `deploy/` kpt package (the webhook's Deployment, RBAC, Service, PodDisruptionBudget,
//! MutatingWebhookConfiguration and certificates), `deploy/certs.sh` and
//! `scripts/e2e-webhook.sh`: what a reviewer of the manifests would check, on the parsed
//! YAML; the certificate script run for real (openssl); the shell scripts under `bash -n` and
//! shellcheck (required: these tests fail, never skip, when it is missing).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

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

    fn webhook(&self) -> &Yaml {
        let mwc = self.get("MutatingWebhookConfiguration", NAME);
        let hooks = mwc.get("webhooks").expect("webhooks").seq();
        assert_eq!(hooks.len(), 1, "one webhook in the configuration");
        &hooks[0]
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
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// ------------------------------------------------------------------------------------------
// The package.

#[test]
fn package_holds_exactly_the_expected_resources() {
    let pkg = Package::load();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    let want: BTreeSet<_> = [
        id("Kptfile", "", NAME),
        id("Namespace", "", NAMESPACE),
        id("ServiceAccount", NAMESPACE, NAME),
        id("ClusterRole", "", NAME),
        id("ClusterRoleBinding", "", NAME),
        id("Deployment", NAMESPACE, NAME),
        id("PodDisruptionBudget", NAMESPACE, NAME),
        id("Service", NAMESPACE, NAME),
        id("Service", NAMESPACE, "linkerd-multus-webhook-metrics"),
        id("NetworkPolicy", NAMESPACE, NAME),
        id("MutatingWebhookConfiguration", "", NAME),
        id("Issuer", NAMESPACE, "linkerd-multus-webhook-selfsigned"),
        id("Certificate", NAMESPACE, "linkerd-multus-webhook-ca"),
        id("Issuer", NAMESPACE, "linkerd-multus-webhook-ca"),
        id("Certificate", NAMESPACE, NAME),
    ]
    .into_iter()
    .collect();
    // The Kptfile is not a .yaml file; read it on its own.
    let kptfile = parse_yaml(&std::fs::read_to_string(repo_path("deploy/Kptfile")).unwrap())
        .expect("deploy/Kptfile parses");
    let mut have = ids;
    have.insert(kptfile.id());
    assert_eq!(have, want);
    // The cert-manager objects, and only they, are in cert-manager/ (option 2 deletes it).
    for (rel, r) in &pkg.resources {
        let cert_manager = r
            .str_at(&["apiVersion"])
            .is_some_and(|v| v.starts_with("cert-manager.io/"));
        assert_eq!(
            cert_manager,
            rel.starts_with("cert-manager/"),
            "{rel}: {:?}",
            r.id()
        );
    }
}

/// A YAML node as JSON, with plain scalars resolved the way Kubernetes reads them (YAML 1.2
/// core schema: booleans, integers, floats, null).
fn to_json(node: &Yaml) -> serde_json::Value {
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

/// Every built-in resource of the package is a valid object of its Kubernetes API (the
/// cert-manager resources have no types here; the tests below check their fields).
#[test]
fn resources_are_valid_kubernetes_objects() {
    use k8s_openapi::api::{admissionregistration, apps, core, networking, policy, rbac};
    let pkg = Package::load();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (rel, r) in &pkg.resources {
        let problem = match r.str_at(&["kind"]).unwrap() {
            "Namespace" => round_trip::<core::v1::Namespace>(r),
            "ServiceAccount" => round_trip::<core::v1::ServiceAccount>(r),
            "Service" => round_trip::<core::v1::Service>(r),
            "Deployment" => round_trip::<apps::v1::Deployment>(r),
            "PodDisruptionBudget" => round_trip::<policy::v1::PodDisruptionBudget>(r),
            "ClusterRole" => round_trip::<rbac::v1::ClusterRole>(r),
            "ClusterRoleBinding" => round_trip::<rbac::v1::ClusterRoleBinding>(r),
            "NetworkPolicy" => round_trip::<networking::v1::NetworkPolicy>(r),
            "MutatingWebhookConfiguration" => {
                round_trip::<admissionregistration::v1::MutatingWebhookConfiguration>(r)
            }
            "Issuer" | "Certificate" => continue,
            other => panic!("{rel}: no check for kind {other}"),
        };
        checked += 1;
        problems.extend(problem.map(|p| format!("deploy/{rel}: {p}")));
    }
    assert_eq!(checked, 10);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kptfile_has_no_pipeline() {
    // CI has no image registry, and the repository's `kpt fn render` walks this package.
    let kptfile =
        parse_yaml(&std::fs::read_to_string(repo_path("deploy/Kptfile")).unwrap()).unwrap();
    assert_eq!(kptfile.str_at(&["apiVersion"]), Some("kpt.dev/v1"));
    assert!(
        kptfile.get("pipeline").is_none(),
        "deploy/Kptfile must have no pipeline"
    );
    assert_eq!(
        kptfile.annotation("config.kubernetes.io/local-config"),
        Some("true")
    );
}

#[test]
fn deployment_is_highly_available() {
    let pkg = Package::load();
    let d = pkg.deployment();
    assert_eq!(number(d, &["spec", "replicas"]), 2);
    assert_eq!(
        d.str_at(&["spec", "strategy", "type"]),
        Some("RollingUpdate")
    );
    assert_eq!(
        d.str_at(&["spec", "strategy", "rollingUpdate", "maxUnavailable"]),
        Some("0")
    );
    assert_eq!(
        d.str_at(&["spec", "strategy", "rollingUpdate", "maxSurge"]),
        Some("1")
    );
    let selector = d.at(&["spec", "selector", "matchLabels"]).unwrap();
    let pod_labels = d.at(&["spec", "template", "metadata", "labels"]).unwrap();
    assert!(
        selects(selector, pod_labels),
        "the Deployment selects its own pods"
    );

    // Never two replicas on one node while another can run one: a hard
    // topology spread on the hostname, counting only the nodes they tolerate.
    let spec = pkg.pod_spec();
    let spread = spec
        .get("topologySpreadConstraints")
        .map(Yaml::seq)
        .unwrap_or_default();
    let by_host = spread
        .iter()
        .find(|c| {
            c.str_at(&["topologyKey"]) == Some("kubernetes.io/hostname")
                && c.at(&["labelSelector", "matchLabels"])
                    .is_some_and(|s| selects(s, pod_labels))
        })
        .expect("a topology spread constraint on the hostname");
    assert_eq!(number(by_host, &["maxSkew"]), 1);
    assert_eq!(
        by_host.str_at(&["whenUnsatisfiable"]),
        Some("DoNotSchedule"),
        "replicas may share a node"
    );
    assert_eq!(by_host.str_at(&["nodeTaintsPolicy"]), Some("Honor"));
    // Scheduled before ordinary workloads, with a class users can set.
    assert_eq!(
        spec.str_at(&["priorityClassName"]),
        Some("system-cluster-critical")
    );

    // The grace period outlasts the shutdown delay plus the drain timeout.
    let delay = seconds(
        &pkg.arg("--shutdown-delay")
            .expect("--shutdown-delay in args"),
    );
    let drain = pkg.arg("--drain-timeout").map_or(20.0, |d| seconds(&d));
    let grace = number(spec, &["terminationGracePeriodSeconds"]) as f64;
    assert!(
        grace > delay + drain,
        "terminationGracePeriodSeconds {grace} <= shutdown-delay {delay} + drain-timeout {drain}"
    );
    assert_eq!(pkg.arg("--log-format").as_deref(), Some("json"));
    assert_eq!(
        spec.str_at(&["serviceAccountName"]),
        Some(NAME),
        "the pod runs as the package's ServiceAccount"
    );
}

#[test]
fn pod_disruption_budget_selects_the_webhook_pods() {
    let pkg = Package::load();
    let pdb = pkg.get("PodDisruptionBudget", NAME);
    assert_eq!(pdb.str_at(&["apiVersion"]), Some("policy/v1"));
    assert_eq!(number(pdb, &["spec", "minAvailable"]), 1);
    let pod_labels = pkg
        .deployment()
        .at(&["spec", "template", "metadata", "labels"])
        .unwrap();
    assert!(selects(
        pdb.at(&["spec", "selector", "matchLabels"])
            .expect("PDB selector"),
        pod_labels
    ));
    assert_eq!(
        pdb.str_at(&["metadata", "namespace"]),
        pkg.deployment().str_at(&["metadata", "namespace"])
    );
}

#[test]
fn rbac_is_exactly_read_access_to_namespaces_and_nads() {
    let pkg = Package::load();
    assert!(pkg.of_kind("Role").is_empty() && pkg.of_kind("RoleBinding").is_empty());
    assert_eq!(pkg.of_kind("ClusterRole").len(), 1);
    assert_eq!(pkg.of_kind("ClusterRoleBinding").len(), 1);
    let role = pkg.get("ClusterRole", NAME);
    let rules = role.get("rules").expect("rules").seq();
    let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = rules
        .iter()
        .map(|rule| {
            assert_eq!(
                rule.keys(),
                vec!["apiGroups", "resources", "verbs"],
                "no resourceNames, nonResourceURLs or other keys"
            );
            (
                strings(rule.get("apiGroups")),
                strings(rule.get("resources")),
                strings(rule.get("verbs")),
            )
        })
        .collect();
    let read = || vec!["get".to_string(), "list".into(), "watch".into()];
    assert_eq!(
        rules,
        [
            (vec!["".to_string()], vec!["namespaces".to_string()], read()),
            (
                vec!["k8s.cni.cncf.io".to_string()],
                vec!["network-attachment-definitions".to_string()],
                read()
            ),
        ]
    );
    assert!(role.get("aggregationRule").is_none());

    let binding = pkg.get("ClusterRoleBinding", NAME);
    assert_eq!(binding.str_at(&["roleRef", "kind"]), Some("ClusterRole"));
    assert_eq!(binding.str_at(&["roleRef", "name"]), Some(NAME));
    let subjects = binding.get("subjects").unwrap().seq();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].str_at(&["kind"]), Some("ServiceAccount"));
    assert_eq!(subjects[0].str_at(&["name"]), Some(NAME));
    assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
    pkg.get("ServiceAccount", NAME);
}

#[test]
fn pod_is_locked_down_without_pinning_a_uid() {
    let pkg = Package::load();
    let spec = pkg.pod_spec();
    let c = pkg.container();
    assert_eq!(
        spec.str_at(&["securityContext", "runAsNonRoot"]),
        Some("true")
    );
    assert_eq!(
        spec.str_at(&["securityContext", "seccompProfile", "type"]),
        Some("RuntimeDefault")
    );
    let sc = c.get("securityContext").expect("container securityContext");
    assert_eq!(sc.str_at(&["runAsNonRoot"]), Some("true"));
    assert_eq!(sc.str_at(&["readOnlyRootFilesystem"]), Some("true"));
    assert_eq!(sc.str_at(&["allowPrivilegeEscalation"]), Some("false"));
    assert_eq!(strings(sc.at(&["capabilities", "drop"])), ["ALL"]);
    assert!(sc.at(&["capabilities", "add"]).is_none());
    assert_eq!(
        sc.str_at(&["seccompProfile", "type"]),
        Some("RuntimeDefault")
    );
    assert!(
        sc.get("privileged")
            .is_none_or(|p| p.as_str() == Some("false"))
    );
    // OpenShift's restricted SCC assigns the UID: none may be pinned, and the manifest says why.
    for (what, ctx) in [
        ("pod", spec.get("securityContext")),
        ("container", Some(sc)),
    ] {
        let ctx = ctx.unwrap();
        for key in ["runAsUser", "runAsGroup", "fsGroup"] {
            assert!(ctx.get(key).is_none(), "{what} securityContext pins {key}");
        }
    }
    let text = std::fs::read_to_string(repo_path("deploy/deployment.yaml")).unwrap();
    assert!(
        text.contains("OpenShift") && text.contains("runAsUser"),
        "deployment.yaml should say why runAsUser is not set"
    );
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(spec.get(key).is_none(), "{key} set");
    }

    // Small requests and a memory limit.
    let res = c.get("resources").expect("resources");
    assert!(res.str_at(&["requests", "cpu"]).is_some());
    assert!(res.str_at(&["requests", "memory"]).is_some());
    assert_eq!(res.str_at(&["limits", "memory"]), Some("64Mi"));
}

#[test]
fn probes_ports_and_tls_files_agree() {
    let pkg = Package::load();
    let c = pkg.container();
    assert_eq!(
        c.str_at(&["image"]),
        Some("ghcr.io/linkerd-multus/linkerd-multus:v0.1.0")
    );
    assert_eq!(pkg.args().first().map(String::as_str), Some("webhook"));
    let ports = pkg.container_ports();
    assert_eq!(
        ports,
        [
            ("https".to_string(), "8443".to_string()),
            ("ops".to_string(), "9090".to_string())
        ]
    );
    let listen = pkg.arg("--listen").unwrap_or_else(|| "[::]:8443".into());
    let ops = pkg
        .arg("--ops-listen")
        .unwrap_or_else(|| "[::]:9090".into());
    assert_eq!(port_of(&listen), "8443", "--listen and the https port");
    assert_eq!(port_of(&ops), "9090", "--ops-listen and the ops port");
    // Every address of both families: the pod IP, on IPv4, IPv6 and dual-stack clusters.
    assert_eq!(listen, "[::]:8443");
    assert_eq!(ops, "[::]:9090");

    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let p = c.get(probe).unwrap_or_else(|| panic!("no {probe}"));
        assert_eq!(p.str_at(&["httpGet", "path"]), Some(path), "{probe}");
        let port = p.str_at(&["httpGet", "port"]).unwrap();
        assert!(port == "ops" || port == "9090", "{probe} on port {port}");
        assert!(p.str_at(&["httpGet", "scheme"]).is_none_or(|s| s == "HTTP"));
    }

    // --tls-cert and --tls-key are files of the TLS Secret's volume, mounted without subPath
    // (a subPath mount never sees the Secret's updates).
    let volume = pkg
        .pod_spec()
        .get("volumes")
        .unwrap()
        .seq()
        .iter()
        .find(|v| v.str_at(&["secret", "secretName"]) == Some(TLS_SECRET))
        .expect("a volume of the TLS Secret")
        .str_at(&["name"])
        .unwrap()
        .to_string();
    let mount = c
        .get("volumeMounts")
        .unwrap()
        .seq()
        .iter()
        .find(|m| m.str_at(&["name"]) == Some(volume.as_str()))
        .expect("the TLS volume is mounted");
    assert!(
        mount.get("subPath").is_none(),
        "TLS volume mounted with subPath"
    );
    assert_eq!(mount.str_at(&["readOnly"]), Some("true"));
    let dir = mount.str_at(&["mountPath"]).unwrap();
    assert_eq!(pkg.arg("--tls-cert"), Some(format!("{dir}/tls.crt")));
    assert_eq!(pkg.arg("--tls-key"), Some(format!("{dir}/tls.key")));
}

#[test]
fn service_matches_the_container_ports() {
    let pkg = Package::load();
    let svc = pkg.get("Service", NAME);
    let pod_labels = pkg.pod_labels();
    assert!(selects(svc.at(&["spec", "selector"]).unwrap(), pod_labels));
    let container_ports = pkg.container_ports();
    // Service port -> the container port number its targetPort names or gives.
    let target = |port: &str| -> (String, String) {
        let p = svc
            .at(&["spec", "ports"])
            .unwrap()
            .seq()
            .iter()
            .find(|p| p.str_at(&["port"]) == Some(port))
            .unwrap_or_else(|| panic!("no Service port {port}"));
        let t = p.str_at(&["targetPort"]).unwrap_or(port);
        let number = container_ports
            .iter()
            .find(|(name, number)| name == t || number == t)
            .map(|(_, number)| number.clone())
            .unwrap_or_else(|| panic!("Service port {port} targets {t}, not a container port"));
        (p.str_at(&["name"]).unwrap_or("").to_string(), number)
    };
    assert_eq!(target("443"), ("https".to_string(), "8443".to_string()));
    assert_eq!(
        svc.at(&["spec", "ports"]).unwrap().seq().len(),
        1,
        "the API server's Service carries the webhook's port only, not /metrics"
    );
    // The ops port has a headless Service of its own, one scrape target per replica.
    let metrics = pkg.get("Service", "linkerd-multus-webhook-metrics");
    assert!(selects(
        metrics.at(&["spec", "selector"]).unwrap(),
        pod_labels
    ));
    assert_eq!(metrics.str_at(&["spec", "clusterIP"]), Some("None"));
    let ports = metrics.at(&["spec", "ports"]).unwrap().seq();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].str_at(&["port"]), Some("9090"));
    assert_eq!(ports[0].str_at(&["targetPort"]), Some("ops"));
}

/// The NetworkPolicy selects the webhook's pods and admits only what they
/// serve: the API server to the webhook's port (from any address, narrowed by
/// setters), and the monitoring namespace to the ops port.
#[test]
fn network_policy_admits_the_api_server_and_the_scraper_only() {
    let pkg = Package::load();
    let policy = pkg.get("NetworkPolicy", NAME);
    assert!(selects(
        policy.at(&["spec", "podSelector", "matchLabels"]).unwrap(),
        pkg.pod_labels()
    ));
    assert_eq!(strings(policy.at(&["spec", "policyTypes"])), ["Ingress"]);
    let rules = policy.at(&["spec", "ingress"]).unwrap().seq();
    let ports = |rule: &Yaml| -> Vec<String> {
        rule.get("ports")
            .unwrap()
            .seq()
            .iter()
            .map(|p| p.str_at(&["port"]).unwrap().to_string())
            .collect()
    };
    assert_eq!(rules.len(), 2);
    assert_eq!(ports(&rules[0]), ["https"]);
    let blocks: Vec<&str> = rules[0]
        .get("from")
        .unwrap()
        .seq()
        .iter()
        .map(|f| f.str_at(&["ipBlock", "cidr"]).unwrap())
        .collect();
    assert_eq!(blocks, ["0.0.0.0/0", "::/0"]);
    assert_eq!(ports(&rules[1]), ["ops"]);
    let from = rules[1].get("from").unwrap().seq();
    assert_eq!(from.len(), 1);
    assert_eq!(
        from[0].str_at(&[
            "namespaceSelector",
            "matchLabels",
            "kubernetes.io/metadata.name"
        ]),
        Some("monitoring")
    );
    // The named ports are the container's.
    let names: Vec<String> = pkg.container_ports().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["https", "ops"]);
    let text = std::fs::read_to_string(repo_path("deploy/networkpolicy.yaml")).unwrap();
    for setter in [
        "${api-server-cidr}",
        "${api-server-cidr-ipv6}",
        "${metrics-namespace}",
    ] {
        assert!(text.contains(&format!("# kpt-set: {setter}")), "{setter}");
    }
}

#[test]
fn webhook_configuration_is_safe() {
    let pkg = Package::load();
    let mwc = pkg.get("MutatingWebhookConfiguration", NAME);
    assert_eq!(
        mwc.str_at(&["apiVersion"]),
        Some("admissionregistration.k8s.io/v1")
    );
    let w = pkg.webhook();
    let name = w.str_at(&["name"]).unwrap();
    assert!(
        name.split('.').count() >= 3,
        "webhook name {name} is not fully qualified"
    );
    assert_eq!(strings(w.get("admissionReviewVersions")), ["v1"]);
    assert_eq!(w.str_at(&["sideEffects"]), Some("None"));
    assert_eq!(w.str_at(&["failurePolicy"]), Some("Fail"));
    assert_eq!(w.str_at(&["timeoutSeconds"]), Some("5"));
    assert_eq!(w.str_at(&["matchPolicy"]), Some("Equivalent"));
    assert_eq!(w.str_at(&["reinvocationPolicy"]), Some("IfNeeded"));
    let text =
        std::fs::read_to_string(repo_path("deploy/mutatingwebhookconfiguration.yaml")).unwrap();
    for why in ["crash-loops", "Ignore", "timeoutSeconds"] {
        assert!(
            text.contains(why),
            "the failurePolicy/timeout comments should mention {why}"
        );
    }

    let rules = w.get("rules").unwrap().seq();
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    // CREATE only: a pod's networks are fixed when it starts, and no later
    // change to a pod (a finalizer removed) waits on the webhook.
    assert_eq!(strings(rule.get("operations")), ["CREATE"]);
    for why in ["CREATE only", "finalizer"] {
        assert!(
            text.contains(why),
            "the rules' comment should mention {why}"
        );
    }
    // Host-network pods and pods being deleted never reach it (tests/cluster.rs
    // shows both with the webhook down).
    let conditions: Vec<(&str, &str)> = w
        .get("matchConditions")
        .expect("matchConditions")
        .seq()
        .iter()
        .map(|c| {
            (
                c.str_at(&["name"]).unwrap(),
                c.str_at(&["expression"]).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            (
                "not-host-network",
                "object == null || !has(object.spec.hostNetwork) || !object.spec.hostNetwork"
            ),
            (
                "not-being-deleted",
                "object == null || !has(object.metadata.deletionTimestamp)"
            ),
        ]
    );
    assert_eq!(strings(rule.get("apiGroups")), [""]);
    assert_eq!(strings(rule.get("apiVersions")), ["v1"]);
    assert_eq!(strings(rule.get("resources")), ["pods"]);
    assert_eq!(rule.str_at(&["scope"]), Some("Namespaced"));

    // Called through the Service, on a port the Service has, at /mutate.
    let svc = pkg.get("Service", NAME);
    assert!(w.at(&["clientConfig", "url"]).is_none());
    assert_eq!(
        w.str_at(&["clientConfig", "service", "name"]),
        svc.str_at(&["metadata", "name"])
    );
    assert_eq!(
        w.str_at(&["clientConfig", "service", "namespace"]),
        svc.str_at(&["metadata", "namespace"])
    );
    assert_eq!(
        w.str_at(&["clientConfig", "service", "path"]),
        Some("/mutate")
    );
    let port = w
        .str_at(&["clientConfig", "service", "port"])
        .unwrap_or("443");
    assert!(
        svc.at(&["spec", "ports"])
            .unwrap()
            .seq()
            .iter()
            .any(|p| p.str_at(&["port"]) == Some(port)),
        "the Service has no port {port}"
    );
    // The caBundle comes from cainjector or certs.sh: a value here would be re-applied over it.
    assert!(w.at(&["clientConfig", "caBundle"]).is_none());

    // Excluded: the system namespaces, cert-manager and the webhook's own; opt-out label.
    let exprs = w
        .at(&["namespaceSelector", "matchExpressions"])
        .expect("namespaceSelector.matchExpressions")
        .seq();
    assert!(w.at(&["namespaceSelector", "matchLabels"]).is_none());
    let expr = |key: &str| {
        exprs
            .iter()
            .find(|e| e.str_at(&["key"]) == Some(key))
            .unwrap_or_else(|| panic!("no namespaceSelector expression on {key}"))
    };
    let by_name = expr("kubernetes.io/metadata.name");
    assert_eq!(by_name.str_at(&["operator"]), Some("NotIn"));
    assert_eq!(
        strings(by_name.get("values")),
        [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            NAMESPACE,
            "cert-manager"
        ]
    );
    let opt_out = expr("multus.linkerd.io/webhook");
    assert_eq!(opt_out.str_at(&["operator"]), Some("NotIn"));
    assert_eq!(strings(opt_out.get("values")), ["disabled"]);
    assert_eq!(exprs.len(), 2);
    assert!(w.get("objectSelector").is_none());

    // cainjector fills the caBundle from the serving Certificate.
    assert_eq!(
        mwc.annotation("cert-manager.io/inject-ca-from"),
        Some(format!("{NAMESPACE}/{NAME}").as_str())
    );
    pkg.get("Certificate", NAME);
}

#[test]
fn cert_manager_certificate_serves_the_service() {
    let pkg = Package::load();
    let cert = pkg.get("Certificate", NAME);
    let volume_secrets: Vec<&str> = pkg
        .pod_spec()
        .get("volumes")
        .unwrap()
        .seq()
        .iter()
        .filter_map(|v| v.str_at(&["secret", "secretName"]))
        .collect();
    assert_eq!(volume_secrets, [TLS_SECRET]);
    assert_eq!(cert.str_at(&["spec", "secretName"]), Some(TLS_SECRET));
    let dns = strings(cert.at(&["spec", "dnsNames"]));
    let svc = pkg.get("Service", NAME);
    let (name, ns) = (
        svc.str_at(&["metadata", "name"]).unwrap(),
        svc.str_at(&["metadata", "namespace"]).unwrap(),
    );
    for want in [
        name.to_string(),
        format!("{name}.{ns}"),
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
    ] {
        assert!(dns.contains(&want), "dnsNames {dns:?} lack {want}");
    }
    assert!(cert.str_at(&["spec", "isCA"]).is_none_or(|v| v == "false"));

    // Serving certificate <- CA Issuer <- CA Certificate <- self-signed Issuer.
    let issuer_of = |c: &Yaml| {
        assert_eq!(c.str_at(&["spec", "issuerRef", "kind"]), Some("Issuer"));
        pkg.get("Issuer", c.str_at(&["spec", "issuerRef", "name"]).unwrap())
    };
    let ca_issuer = issuer_of(cert);
    let ca_secret = ca_issuer
        .str_at(&["spec", "ca", "secretName"])
        .expect("the serving certificate's issuer is a CA issuer");
    let ca_cert = pkg
        .of_kind("Certificate")
        .into_iter()
        .find(|c| c.str_at(&["spec", "secretName"]) == Some(ca_secret))
        .expect("a Certificate makes the CA Issuer's secret");
    assert_eq!(ca_cert.str_at(&["spec", "isCA"]), Some("true"));
    assert!(
        issuer_of(ca_cert).at(&["spec", "selfSigned"]).is_some(),
        "the CA is signed by a self-signed Issuer"
    );
    for (_, r) in &pkg.resources {
        if r.str_at(&["apiVersion"])
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
        {
            assert_eq!(r.str_at(&["metadata", "namespace"]), Some(NAMESPACE));
        }
    }
}

/// `kpt fn eval --image apply-setters -- namespace=NEW ...` as the package documents it,
/// done here by applying each `# kpt-set:` comment: afterwards no reference to the old
/// namespace may be left, every reference must name the new one, and each other setter
/// reaches what it names.
#[test]
fn setters_cover_every_reference() {
    const NEW: &str = "mesh-webhook";
    const SETTERS: [(&str, &str); 5] = [
        ("namespace", NEW),
        ("priority-class-name", "webhooks"),
        ("api-server-cidr", "10.0.0.0/24"),
        ("api-server-cidr-ipv6", "fd00::/64"),
        ("metrics-namespace", "prometheus"),
    ];
    let set = |text: &str| -> String {
        let mut out = String::new();
        for line in text.split_inclusive('\n') {
            let Some((before, pattern)) = line.split_once(" # kpt-set: ") else {
                out.push_str(line);
                continue;
            };
            let mut value = pattern.trim_end().to_string();
            for (name, to) in SETTERS {
                value = value.replace(&format!("${{{name}}}"), to);
            }
            assert!(
                !value.contains("${"),
                "unknown setter in {line:?}: deploy/README.md documents {SETTERS:?}"
            );
            let (key, _) = before
                .rsplit_once(' ')
                .expect("key or `-` before the value");
            out.push_str(&format!(
                "{key} {value} # kpt-set: {}",
                &line[line.find("# kpt-set: ").unwrap() + "# kpt-set: ".len()..]
            ));
        }
        out
    };
    let files: Vec<(String, String)> = yaml_files()
        .into_iter()
        .map(|(rel, text)| {
            let t = set(&text);
            (rel, t)
        })
        .collect();
    let pkg = Package::from_files(&files);

    // Every scalar that is (or embeds) a namespace now names NEW.
    fn walk<'a>(node: &'a Yaml, key: &str, out: &mut Vec<(String, &'a str)>) {
        match node {
            Yaml::Scalar { value, .. } => out.push((key.to_string(), value)),
            Yaml::Seq(items) => items.iter().for_each(|i| walk(i, key, out)),
            Yaml::Map(entries) => {
                for (k, v) in entries {
                    walk(v, k.as_str().unwrap_or("?"), out);
                }
            }
        }
    }
    for (rel, r) in &pkg.resources {
        let mut scalars = Vec::new();
        walk(r, "", &mut scalars);
        for (key, value) in scalars {
            let old_ns = value == NAMESPACE
                || value.contains(&format!(".{NAMESPACE}."))
                || value.ends_with(&format!(".{NAMESPACE}"))
                || value.starts_with(&format!("{NAMESPACE}/"));
            assert!(
                !old_ns || key == "app.kubernetes.io/part-of",
                "{rel}: {key}: {value:?} still names the namespace {NAMESPACE} after the setter"
            );
        }
    }
    assert_eq!(
        pkg.get("Namespace", NEW).str_at(&["metadata", "name"]),
        Some(NEW)
    );
    for (_, r) in &pkg.resources {
        let kind = r.str_at(&["kind"]).unwrap();
        let namespaced = !matches!(
            kind,
            "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "MutatingWebhookConfiguration"
        );
        let ns = r.str_at(&["metadata", "namespace"]);
        if namespaced {
            assert_eq!(ns, Some(NEW), "{:?}", r.id());
        } else {
            assert_eq!(ns, None, "{:?} is cluster-scoped", r.id());
        }
    }
    let w = pkg.webhook();
    assert_eq!(
        w.str_at(&["clientConfig", "service", "namespace"]),
        Some(NEW)
    );
    assert!(
        strings(
            w.at(&["namespaceSelector", "matchExpressions"])
                .unwrap()
                .seq()[0]
                .get("values")
        )
        .contains(&NEW.to_string())
    );
    assert_eq!(
        pkg.get("MutatingWebhookConfiguration", NAME)
            .annotation("cert-manager.io/inject-ca-from"),
        Some(format!("{NEW}/{NAME}").as_str())
    );
    assert_eq!(
        pkg.get("ClusterRoleBinding", NAME)
            .get("subjects")
            .unwrap()
            .seq()[0]
            .str_at(&["namespace"]),
        Some(NEW)
    );
    let dns = strings(pkg.get("Certificate", NAME).at(&["spec", "dnsNames"]));
    assert!(
        dns.contains(&format!("{NAME}.{NEW}.svc.cluster.local")),
        "{dns:?}"
    );

    // The other setters.
    assert_eq!(
        pkg.pod_spec().str_at(&["priorityClassName"]),
        Some("webhooks")
    );
    let ingress = pkg
        .get("NetworkPolicy", NAME)
        .at(&["spec", "ingress"])
        .unwrap()
        .seq();
    let blocks: Vec<&str> = ingress[0]
        .get("from")
        .unwrap()
        .seq()
        .iter()
        .map(|f| f.str_at(&["ipBlock", "cidr"]).unwrap())
        .collect();
    assert_eq!(blocks, ["10.0.0.0/24", "fd00::/64"]);
    assert_eq!(
        ingress[1].get("from").unwrap().seq()[0].str_at(&[
            "namespaceSelector",
            "matchLabels",
            "kubernetes.io/metadata.name"
        ]),
        Some("prometheus")
    );

    // The README documents every setter.
    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(readme.contains("gcr.io/kpt-fn/apply-setters:v0.2.0 -- namespace="));
    for (name, _) in SETTERS {
        assert!(readme.contains(&format!("`{name}`")), "{name}");
    }
}

/// Option 2 of the README: the documented `sed` removes the cainjector annotation and nothing
/// else, leaving a configuration that still parses.
#[test]
fn readme_recipe_without_cert_manager() {
    const SED: &str =
        "sed -i '/^  annotations:$/,/inject-ca-from/d' mutatingwebhookconfiguration.yaml";
    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(
        readme.contains(SED),
        "README.md no longer has the documented sed command"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo_path("deploy/mutatingwebhookconfiguration.yaml"),
        tmp.path().join("mutatingwebhookconfiguration.yaml"),
    )
    .unwrap();
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(SED)
        .current_dir(tmp.path()));
    assert!(out.status.success(), "{}", text(&out));
    let after =
        std::fs::read_to_string(tmp.path().join("mutatingwebhookconfiguration.yaml")).unwrap();
    let before = parse_yaml(
        &std::fs::read_to_string(repo_path("deploy/mutatingwebhookconfiguration.yaml")).unwrap(),
    )
    .unwrap();
    let after = parse_yaml(&after).expect("still YAML");
    assert!(after.at(&["metadata", "annotations"]).is_none());
    assert_eq!(
        tree_difference(
            before.get("webhooks").unwrap(),
            after.get("webhooks").unwrap(),
            "webhooks"
        ),
        None
    );
    assert_eq!(
        after.at(&["metadata", "labels"]),
        before.at(&["metadata", "labels"])
    );
}

/// Every flag the Deployment passes is one `linkerd-multus webhook` knows. (Fails until the
/// webhook subcommand exists.)
#[test]
fn deployment_flags_are_webhook_flags() {
    let pkg = Package::load();
    let out = run(Command::new(bin()).args(["webhook", "--help"]));
    assert!(
        out.status.success(),
        "`linkerd-multus webhook --help` failed:\n{}",
        text(&out)
    );
    let help = String::from_utf8_lossy(&out.stdout);
    let flags: Vec<String> = pkg
        .args()
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap().to_string())
        .collect();
    assert!(flags.len() >= 6, "{flags:?}");
    for flag in flags {
        let known = help
            .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
            .any(|word| word == flag);
        assert!(
            known,
            "deployment.yaml passes {flag}, which `linkerd-multus webhook --help` does not list:\n{help}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// deploy-network-resources/: the opt-in addition for --network-resources.

const NR_NAME: &str = "linkerd-multus-webhook-network-resources";
const NR_CONFIG_MAP: &str = "linkerd-multus-network-resources";

fn network_resources_package() -> Package {
    addition("deploy-network-resources")
}

/// The resources of an opt-in addition to the webhook package: `dir`'s YAML files.
fn addition(dir: &str) -> Package {
    let files: Vec<(String, String)> = snapshot(&repo_path(dir))
        .into_iter()
        .filter(|(rel, _)| rel.ends_with(".yaml"))
        .map(|(rel, bytes)| (rel, String::from_utf8(bytes).expect("UTF-8")))
        .collect();
    Package::from_files(&files)
}

#[test]
fn network_resources_package_reads_nads_and_nothing_more() {
    // The webhook package alone does not run the rules; it reads NADs already
    // (the missing-NAD check), and the addition grants no more than that.
    let base = Package::load();
    assert!(base.arg("--network-resources").is_none());
    let pkg = network_resources_package();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    assert_eq!(
        ids,
        [
            id("ClusterRole", "", NR_NAME),
            id("ClusterRoleBinding", "", NR_NAME),
            id("ConfigMap", NAMESPACE, NR_CONFIG_MAP),
        ]
        .into_iter()
        .collect()
    );
    let role = pkg.get("ClusterRole", NR_NAME);
    let rules = role.get("rules").expect("rules").seq();
    assert_eq!(rules.len(), 1, "one rule");
    let rule = &rules[0];
    assert_eq!(rule.keys(), vec!["apiGroups", "resources", "verbs"]);
    assert_eq!(strings(rule.get("apiGroups")), ["k8s.cni.cncf.io"]);
    assert_eq!(
        strings(rule.get("resources")),
        ["network-attachment-definitions"]
    );
    assert_eq!(strings(rule.get("verbs")), ["get", "list", "watch"]);
    let binding = pkg.get("ClusterRoleBinding", NR_NAME);
    assert_eq!(binding.str_at(&["roleRef", "kind"]), Some("ClusterRole"));
    assert_eq!(binding.str_at(&["roleRef", "name"]), Some(NR_NAME));
    let subjects = binding.get("subjects").unwrap().seq();
    assert_eq!(subjects.len(), 1);
    // The webhook's own ServiceAccount, as the base package defines it.
    base.get("ServiceAccount", NAME);
    assert_eq!(subjects[0].str_at(&["kind"]), Some("ServiceAccount"));
    assert_eq!(subjects[0].str_at(&["name"]), Some(NAME));
    assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
    for (rel, r) in &pkg.resources {
        assert!(
            round_trip_any(r),
            "deploy-network-resources/{rel}: {:?}",
            r.id()
        );
    }
}

// ------------------------------------------------------------------------------------------
// deploy-nad-controller/: the opt-in rights of --manage-nads.

const CONTROLLER: &str = "linkerd-multus-nad-controller";

fn nad_controller_package() -> Package {
    addition("deploy-nad-controller")
}

/// Each rule of a role: API groups, resources, resource names and verbs.
fn rules_of(role: &Yaml) -> Vec<[Vec<String>; 4]> {
    role.get("rules")
        .expect("rules")
        .seq()
        .iter()
        .map(|rule| {
            [
                strings(rule.get("apiGroups")),
                strings(rule.get("resources")),
                strings(rule.get("resourceNames")),
                strings(rule.get("verbs")),
            ]
        })
        .collect()
}

#[test]
fn nad_controller_rights_are_opt_in_and_exactly_what_it_does() {
    let v = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // The webhook package alone writes nothing.
    let base = Package::load();
    assert!(base.arg("--manage-nads").is_none());
    for role in base.of_kind("ClusterRole") {
        for [_, _, _, verbs] in rules_of(role) {
            assert_eq!(verbs, v(&["get", "list", "watch"]));
        }
    }
    // It names the Lease's namespace and its identity from the downward API.
    let env = base.container().get("env").expect("env").seq();
    let fields: Vec<(Option<&str>, Option<&str>)> = env
        .iter()
        .map(|e| {
            (
                e.str_at(&["name"]),
                e.str_at(&["valueFrom", "fieldRef", "fieldPath"]),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (Some("POD_NAMESPACE"), Some("metadata.namespace")),
            (Some("POD_NAME"), Some("metadata.name")),
        ]
    );
    let pkg = nad_controller_package();
    let ids: BTreeSet<(String, String, String)> =
        pkg.resources.iter().map(|(_, r)| r.id()).collect();
    let id = |k: &str, ns: &str, n: &str| (k.to_string(), ns.to_string(), n.to_string());
    let lease = format!("{CONTROLLER}-lease");
    assert_eq!(
        ids,
        BTreeSet::from([
            id("ClusterRole", "", CONTROLLER),
            id("ClusterRoleBinding", "", CONTROLLER),
            id("Role", "linkerd-cni", CONTROLLER),
            id("RoleBinding", "linkerd-cni", CONTROLLER),
            id("Role", NAMESPACE, &lease),
            id("RoleBinding", NAMESPACE, &lease),
        ])
    );
    assert_eq!(
        rules_of(pkg.get("ClusterRole", CONTROLLER)),
        [
            [
                v(&["k8s.cni.cncf.io"]),
                v(&["network-attachment-definitions"]),
                v(&[]),
                v(&["create", "patch", "delete", "get", "list", "watch"]),
            ],
            [
                v(&["events.k8s.io"]),
                v(&["events"]),
                v(&[]),
                v(&["create", "patch"])
            ],
        ]
    );
    // The one ConfigMap by name: a Role in the CNI namespace, not a ClusterRole.
    let config_map_role = pkg
        .of_kind("Role")
        .into_iter()
        .find(|r| r.str_at(&["metadata", "name"]) == Some(CONTROLLER))
        .unwrap();
    assert_eq!(
        rules_of(config_map_role),
        [[
            v(&[""]),
            v(&["configmaps"]),
            v(&["linkerd-cni-config"]),
            v(&["get", "list", "watch"]),
        ]]
    );
    let lease_role = pkg
        .of_kind("Role")
        .into_iter()
        .find(|r| r.str_at(&["metadata", "name"]) == Some(lease.as_str()))
        .unwrap();
    assert_eq!(
        rules_of(lease_role),
        [
            [
                v(&["coordination.k8s.io"]),
                v(&["leases"]),
                v(&[]),
                v(&["create"])
            ],
            [
                v(&["coordination.k8s.io"]),
                v(&["leases"]),
                v(&[CONTROLLER]),
                v(&["get", "update"]),
            ],
        ]
    );
    // Every binding names the webhook's own ServiceAccount.
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for binding in pkg.of_kind(kind) {
            let subjects = binding.get("subjects").unwrap().seq();
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].str_at(&["name"]), Some(NAME));
            assert_eq!(subjects[0].str_at(&["namespace"]), Some(NAMESPACE));
        }
    }
    // The Lease is the one the webhook uses by default.
    let out = run(Command::new(bin()).args(["webhook", "--help"]));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains(&format!("[default: {CONTROLLER}]")), "{help}");
    for (rel, r) in &pkg.resources {
        assert!(
            round_trip_any(r),
            "deploy-nad-controller/{rel}: {:?}",
            r.id()
        );
    }
}

/// Whether a resource reads as its Kubernetes type.
fn round_trip_any(r: &Yaml) -> bool {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let json = to_json(r);
    match r.str_at(&["kind"]) {
        Some("ClusterRole") => serde_json::from_value::<ClusterRole>(json).is_ok(),
        Some("ClusterRoleBinding") => serde_json::from_value::<ClusterRoleBinding>(json).is_ok(),
        Some("Role") => serde_json::from_value::<Role>(json).is_ok(),
        Some("RoleBinding") => serde_json::from_value::<RoleBinding>(json).is_ok(),
        Some("ConfigMap") => serde_json::from_value::<ConfigMap>(json).is_ok(),
        _ => false,
    }
}

/// The ConfigMap holds a settings file the webhook reads, at the path the README's
/// Deployment edit mounts and passes, with a flag the webhook knows.
#[test]
fn network_resources_recipe_agrees_with_the_webhook() {
    let pkg = network_resources_package();
    let config_map = pkg.get("ConfigMap", NR_CONFIG_MAP);
    let file = config_map
        .str_at(&["data", "network-resources.yaml"])
        .expect("data key network-resources.yaml");
    use linkerd_multus::krm::function_config::SettingsKind;
    let settings = linkerd_multus::network_resources::settings::Settings::from_object(
        &linkerd_multus::yaml::parse_document(file).expect("the settings file is YAML"),
    )
    .expect("the settings file is what --network-resources reads");
    assert_eq!(
        settings,
        linkerd_multus::network_resources::settings::Settings::default(),
        "the shipped settings are the defaults, spelled out"
    );
    let readme = std::fs::read_to_string(repo_path("deploy-network-resources/README.md")).unwrap();
    for want in [
        "- --network-resources=/etc/linkerd-multus/network-resources/network-resources.yaml",
        "mountPath: /etc/linkerd-multus/network-resources",
        &format!("name: {NR_CONFIG_MAP}"),
    ] {
        assert!(readme.contains(want), "README.md lacks {want:?}");
    }
    let out = run(Command::new(bin()).args(["webhook", "--help"]));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.split_whitespace().any(|w| w == "--network-resources"),
        "{help}"
    );
    // The Kptfile of the addition is local config, without a pipeline, like the package's.
    let kptfile = parse_yaml(
        &std::fs::read_to_string(repo_path("deploy-network-resources/Kptfile")).unwrap(),
    )
    .expect("Kptfile parses");
    assert!(kptfile.get("pipeline").is_none());
    assert_eq!(
        kptfile.str_at(&[
            "metadata",
            "annotations",
            "config.kubernetes.io/local-config"
        ]),
        Some("true")
    );
}

// ------------------------------------------------------------------------------------------
// deploy/certs.sh

fn openssl(args: &[&str]) -> Output {
    run(Command::new("openssl").args(args))
}

fn certs_sh(args: &[&str]) -> Output {
    run(Command::new("bash")
        .arg(repo_path("deploy/certs.sh"))
        .args(args))
}

fn sans(cert: &Path) -> String {
    let out = openssl(&[
        "x509",
        "-in",
        cert.to_str().unwrap(),
        "-noout",
        "-ext",
        "subjectAltName",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn verify(dir: &Path) {
    let ca = dir.join("ca.crt");
    let cert = dir.join("tls.crt");
    let out = openssl(&[
        "verify",
        "-CAfile",
        ca.to_str().unwrap(),
        "-purpose",
        "sslserver",
        cert.to_str().unwrap(),
    ]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains(": OK"),
        "openssl verify:\n{}",
        text(&out)
    );
}

#[test]
fn certs_sh_makes_a_certificate_the_ca_verifies() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let d = dir.to_str().unwrap();
    let out = certs_sh(&[
        "--out",
        d,
        "--san",
        "192.0.2.10",
        "--san",
        "webhook.example.test",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    verify(&dir);
    let names = sans(&dir.join("tls.crt"));
    for want in [
        format!("DNS:{NAME},"),
        format!("DNS:{NAME}.{NAMESPACE},"),
        format!("DNS:{NAME}.{NAMESPACE}.svc,"),
        format!("DNS:{NAME}.{NAMESPACE}.svc.cluster.local,"),
        "DNS:webhook.example.test".to_string(),
        "IP Address:192.0.2.10".to_string(),
    ] {
        assert!(names.contains(&want), "SANs lack {want}: {names}");
    }
    // The serving certificate's names are those of the cert-manager Certificate.
    let pkg = Package::load();
    for dns in strings(pkg.get("Certificate", NAME).at(&["spec", "dnsNames"])) {
        assert!(
            names.contains(&format!("DNS:{dns}")),
            "certs.sh lacks {dns}: {names}"
        );
    }
    for key in ["ca.key", "tls.key"] {
        let mode = std::fs::metadata(dir.join(key))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{key} mode {mode:o}");
    }
    let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("caBundle"), "{stdout}");

    // A second run keeps the CA (the caBundle stays valid) and makes a new serving
    // certificate for other names (another namespace).
    let ca_before = std::fs::read(dir.join("ca.crt")).unwrap();
    let cert_before = std::fs::read(dir.join("tls.crt")).unwrap();
    let out = certs_sh(&["--out", d, "--namespace", "mesh-webhook"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(dir.join("ca.crt")).unwrap(), ca_before);
    assert_ne!(std::fs::read(dir.join("tls.crt")).unwrap(), cert_before);
    verify(&dir);
    let names = sans(&dir.join("tls.crt"));
    assert!(
        names.contains(&format!("DNS:{NAME}.mesh-webhook.svc.cluster.local")),
        "{names}"
    );
    assert!(!names.contains("192.0.2.10"), "{names}");
}

#[test]
fn certs_sh_refuses_a_git_work_tree_and_bad_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let out = run(Command::new("git").args(["init", "-q"]).current_dir(&repo));
    assert!(out.status.success(), "{}", text(&out));
    let inside = repo.join("certs");
    let out = certs_sh(&["--out", inside.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "a directory in a Git work tree was accepted"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Git work tree"),
        "{}",
        text(&out)
    );
    assert!(!inside.exists(), "the refused directory was created");

    for bad in [
        vec![],
        vec!["--out"],
        vec!["--out", "/nonexistent/x", "--san", "not a name"],
        vec!["--out", "/nonexistent/x", "--days", "0"],
        vec!["--bogus"],
    ] {
        let out = certs_sh(&bad);
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{bad:?}: {}",
            text(&out)
        );
    }
    assert!(!Path::new("/nonexistent/x").exists());
    let out = certs_sh(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--apply"));
}

/// `--apply` with a stand-in kubectl that records its calls: the Secret holds the three files
/// and is stored with server-side apply; the caBundle patch carries the CA.
#[test]
fn certs_sh_apply_stores_the_secret_and_the_ca_bundle() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let log = tmp.path().join("kubectl.log");
    let fake = format!(
        r#"#!/usr/bin/env bash
echo "kubectl $*" >> '{log}'
case "$*" in
  "get namespace "*) exit 0 ;;
  *"jsonpath={{range .webhooks[*]}}"*) printf 'attach.multus.linkerd.io\n' ;;
  *"inject-ca-from"*) printf '' ;;
  *"create secret"*) echo "secret-yaml" ;;
  "apply "*) echo "stdin: $(cat)" >> '{log}' ;;
  "patch "*) ;;
  *) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
"#,
        log = log.display()
    );
    let kubectl = bin_dir.join("kubectl");
    std::fs::write(&kubectl, fake).unwrap();
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tmp.path().join("certs");
    let out = run(Command::new("bash")
        .arg(repo_path("deploy/certs.sh"))
        .args(["--out", dir.to_str().unwrap(), "--apply"])
        .env("PATH", &path));
    assert!(out.status.success(), "{}", text(&out));
    let calls = std::fs::read_to_string(&log).unwrap();
    let d = dir.display();
    assert!(
        calls.contains(&format!(
            "kubectl -n {NAMESPACE} create secret generic {TLS_SECRET} --type=kubernetes.io/tls --from-file=tls.crt={d}/tls.crt --from-file=tls.key={d}/tls.key --from-file=ca.crt={d}/ca.crt --dry-run=client -o yaml"
        )),
        "{calls}"
    );
    assert!(calls.contains("kubectl apply --server-side"), "{calls}");
    assert!(calls.contains("stdin: secret-yaml"), "{calls}");
    let b64 = run(Command::new("base64").arg("-w0").arg(dir.join("ca.crt")));
    let ca_bundle = String::from_utf8(b64.stdout).unwrap();
    assert!(ca_bundle.starts_with("LS0t"), "{ca_bundle}");
    let patch_line = calls
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "kubectl patch mutatingwebhookconfiguration {NAME} --type=json -p "
            ))
        })
        .unwrap_or_else(|| panic!("no caBundle patch in:\n{calls}"));
    let patch: serde_json::Value =
        serde_json::from_str(patch_line.split_once(" -p ").unwrap().1).expect("JSON patch");
    assert_eq!(
        patch,
        serde_json::json!([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca_bundle}])
    );
}

// ------------------------------------------------------------------------------------------
// Shell scripts.

#[test]
fn e2e_script_parses_and_explains_itself() {
    let script = repo_path("scripts/e2e-webhook.sh");
    let out = run(Command::new("bash").arg("-n").arg(&script));
    assert!(out.status.success(), "bash -n:\n{}", text(&out));
    let out = run(Command::new("bash").arg(&script).arg("--help"));
    assert!(out.status.success(), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "--url",
        "--ca-file",
        "kind create cluster",
        "docker network inspect kind",
        "k3d",
        "k3s",
        "OpenShift",
        "--dry-run=server",
        "1000682102",
    ] {
        assert!(
            help.contains(want),
            "--help does not mention {want}:\n{help}"
        );
    }
    // Without --url it stops before touching any cluster, with a usage error.
    let out = run(Command::new("bash")
        .arg(&script)
        .env("KUBECONFIG", "/nonexistent"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url is required"));
    let out = run(Command::new("bash")
        .arg(&script)
        .args(["--url", "http://192.0.2.1/mutate"])
        .env("KUBECONFIG", "/nonexistent"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("https://"),
        "{}",
        text(&out)
    );

    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(readme.contains("scripts/e2e-webhook.sh"));
}

#[test]
fn shell_scripts_pass_shellcheck() {
    let shellcheck = which("shellcheck").unwrap_or_else(|| {
        panic!(
            "shellcheck is not installed: `apt-get install shellcheck` (Debian/Ubuntu; .ci/run \
             installs it); the shell-script tests need it (they do not skip)"
        )
    });
    let mut scripts = Vec::new();
    for dir in ["scripts", "deploy"] {
        for (rel, _) in snapshot(&repo_path(dir)) {
            if rel.ends_with(".sh") && !rel.contains('/') {
                scripts.push(repo_path(dir).join(rel));
            }
        }
    }
    assert!(scripts.iter().any(|s| s.ends_with("e2e-webhook.sh")));
    assert!(scripts.iter().any(|s| s.ends_with("certs.sh")));
    let out = run(Command::new(shellcheck).args(&scripts));
    assert!(out.status.success(), "shellcheck:\n{}", text(&out));
    for s in &scripts {
        let out = run(Command::new("bash").arg("-n").arg(s));
        assert!(
            out.status.success(),
            "bash -n {}:\n{}",
            s.display(),
            text(&out)
        );
    }
}

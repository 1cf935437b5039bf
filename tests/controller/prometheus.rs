//! The alerts on a real Prometheus (Debian's `prometheus`): it scrapes, on loopback, two real
//! webhooks (`--on-error deny` and `allow`) and the real NAD controller (with
//! `--restart-stale-workloads`), all through an API server of the test's own, with the rules of
//! charts/linkerd-multus/monitoring/rules.yaml, every `for:` cut to 1 s (the only change: the
//! expressions are the file's). Faults are planted as they happen in a cluster, and each alert
//! must fire in Prometheus's `/api/v1/alerts`, quiet before its fault: a stale naked pod (pods
//! on an older config), one opted in to eviction under a PodDisruptionBudget allowing none
//! (evictions blocked), a restarted Deployment whose rollout never completes (stalled, its
//! namespace halted), a NAD edited by hand (reverted), a namespace whose admission policy refuses
//! the NAD (writes failing), the Linkerd-CNI ConfigMap deleted, a serving certificate that
//! expires in 10 days, a certificate file overwritten with garbage (reload failing), then the
//! API server stopped (watch outage, no leader, reviews answered with `--on-error`) and a
//! webhook killed (no replica answering). Every series a rule or a dashboard panel reads must
//! be among those scraped, and every panel's query must give a result.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use super::common::bin;
use super::common::https::{Ca, Connection, Leaf, connector, http_get};
use super::common::kube_apiserver::free_port;
use super::common::process::Guard;
use super::harness::{Setup, eventually};
use super::restarts::{
    Deployment, EVICT, HASH, OLD, OPT_IN, audited_setup, generation, naked, namespace, running,
    start, workload, write_status,
};
use crate::monitoring::{DASHBOARD, RULES, alerts, prometheus_tool};

const CREATE: &str = include_str!("../../../shared/fixtures/admission/pod-create.json");
/// How long an alert may take to fire once its fault is planted: a few scrapes, evaluations
/// and the controller's passes (every 2 s).
const FIRES_WITHIN: Duration = Duration::from_secs(30);

/// A webhook process, its ops port and its certificate folder.
struct Webhook {
    child: Guard,
    addr: String,
    ops: String,
    dir: tempfile::TempDir,
}

/// Starts a webhook with `--on-error on_error` on the API server of `kubeconfig`, serving
/// `leaf`, and waits until it is ready.
fn webhook(kubeconfig: &Path, leaf: &Leaf, on_error: &str) -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = leaf.write(dir.path());
    let addr = format!("127.0.0.1:{}", free_port());
    let ops = format!("127.0.0.1:{}", free_port());
    let child = Guard::spawn(
        Command::new(bin())
            .arg("webhook")
            .args(["--listen", &addr, "--ops-listen", &ops])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(["--tls-reload-interval", "100ms", "--on-error", on_error])
            .args(["--max-watch-outage", "1s", "--api-timeout", "2s"])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("starting linkerd-multus webhook");
    eventually("the webhook ready", Duration::from_secs(30), || {
        http_get(&ops, "/readyz").is_some_and(|(status, _)| status == 200)
    });
    Webhook {
        child,
        addr,
        ops,
        dir,
    }
}

/// Posts the captured pod review, moved to `namespace`, to `webhook`: the review's response.
fn review(webhook: &Webhook, ca: &Ca, namespace: &str) -> Value {
    let mut review: Value = serde_json::from_str(CREATE).unwrap();
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    let body = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut conn = Connection::open(&webhook.addr, &connector(&ca.pem, None, &[]))
                .await
                .unwrap();
            conn.post("/mutate", Bytes::from(review.to_string())).await
        })
        .unwrap()
        .1;
    serde_json::from_slice::<Value>(&body).unwrap()["response"].clone()
}

/// A Prometheus on loopback scraping every second, evaluating the rules every second.
struct Prometheus {
    _child: Guard,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts it on `targets` (job, its namespace label, address), with the rule file's `for:`
    /// cut to 1 s, and waits until every target is up.
    fn start(targets: &[(&str, &str, &str)]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let rules = std::fs::read_to_string(crate::common::repo_path(RULES)).unwrap();
        let shortened: String = rules
            .lines()
            .map(|line| match line.split_once("for: ") {
                Some((indent, _)) if indent.trim().is_empty() => format!("{indent}for: 1s\n"),
                _ => format!("{line}\n"),
            })
            .collect();
        assert_eq!(
            shortened.matches("for: 1s").count(),
            rules.matches("    for: ").count()
        );
        std::fs::write(dir.path().join("rules.yaml"), shortened).unwrap();
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\nscrape_configs:\n",
        );
        for job in targets.iter().map(|t| t.0).collect::<BTreeSet<_>>() {
            config.push_str(&format!("- job_name: {job}\n  static_configs:\n"));
            for (_, namespace, address) in targets.iter().filter(|t| t.0 == job) {
                config.push_str(&format!(
                    "  - targets: ['{address}']\n    labels: {{namespace: {namespace}}}\n"
                ));
            }
        }
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Guard::spawn(
            Command::new(prometheus_tool("prometheus"))
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap()),
        )
        .expect("starting prometheus");
        let prometheus = Prometheus {
            _child: child,
            addr,
            _dir: dir,
        };
        eventually("every target scraped and up", FIRES_WITHIN, || {
            prometheus.ready()
                && prometheus
                    .query("sum(up)")
                    .first()
                    .is_some_and(|r| r["value"][1] == json!(targets.len().to_string()))
        });
        prometheus
    }

    /// GETs `path` of its API over HTTP/1.0 (so the body is not chunked): its `data`.
    fn get(&self, path: &str) -> Value {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(&self.addr).expect("Prometheus listens");
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(tcp, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
        assert!(head.starts_with("HTTP/1.0 200"), "{path}: {head}\n{body}");
        let value: Value = serde_json::from_str(body).unwrap();
        assert_eq!(value["status"], "success", "{path}: {body}");
        value["data"].clone()
    }

    /// Whether its API answers.
    fn ready(&self) -> bool {
        http_get(&self.addr, "/-/ready").is_some_and(|(status, _)| status == 200)
    }

    /// The result of an instant query.
    fn query(&self, expr: &str) -> Vec<Value> {
        let encoded: String = expr
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        self.get(&format!("/api/v1/query?query={encoded}"))["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The firing alerts: name and namespace label.
    fn firing(&self) -> BTreeSet<(String, String)> {
        self.get("/api/v1/alerts")["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["state"] == "firing")
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap().to_string(),
                    a["labels"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    }

    /// Fails if any of `alerts` (name, namespace) fires already, before its fault.
    fn assert_quiet(&self, alerts: &[(&str, &str)]) {
        let firing = self.firing();
        for (name, namespace) in alerts {
            assert!(
                !firing.contains(&(name.to_string(), namespace.to_string())),
                "{name} ({namespace}) fires before its fault: {firing:?}"
            );
        }
    }

    /// Waits until each of `alerts` (name, namespace) fires: how long each took.
    fn wait_firing(&self, alerts: &[(&str, &str)]) -> Vec<(String, Duration)> {
        let start = Instant::now();
        let mut took = Vec::new();
        let mut left: Vec<(&str, &str)> = alerts.to_vec();
        while !left.is_empty() {
            let firing = self.firing();
            left.retain(|(name, namespace)| {
                let fired = firing.contains(&(name.to_string(), namespace.to_string()));
                if fired {
                    took.push((name.to_string(), start.elapsed()));
                }
                !fired
            });
            assert!(
                start.elapsed() < FIRES_WITHIN,
                "not firing within {FIRES_WITHIN:?}: {left:?}; firing: {firing:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        took
    }

    /// Every metric name scraped.
    fn names(&self) -> BTreeSet<String> {
        self.get("/api/v1/label/__name__/values")
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    }
}

/// The metric names an expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("linkerd_multus_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    if expr.contains("up{") {
        names.insert("up".into());
    }
    names
}

/// The dashboard's queries, with its variables given values.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(crate::common::repo_path(DASHBOARD)).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap().to_string();
            panel["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| {
                    let expr = t["expr"]
                        .as_str()
                        .unwrap()
                        .replace("$__rate_interval", "1m")
                        .replace("$namespace", ".*");
                    (title.clone(), expr)
                })
        })
        .collect()
}

/// A naked pod's eviction the API server refuses: running and ready, under a budget whose
/// status (written as the disruption controller would) allows no disruption; then its
/// namespace opts in to eviction.
fn blocked_eviction(s: &Setup, ns: &str) {
    s.plane.apply(
        &json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "batch", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "batch"}}}
        })
        .to_string(),
    );
    naked(
        s,
        ns,
        "batch",
        json!({"app": "batch"}),
        json!({HASH: OLD}),
        None,
    );
    running(s, ns, "batch");
    let status = json!({
        "observedGeneration": generation(s, "pdb", ns, "batch"),
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "disruptionsAllowed": 0,
    });
    write_status(s, "pdb", ns, "batch", status);
    // Opted in only now: a pending pod would be evicted whatever its budget says.
    s.plane
        .kubectl(&["annotate", "namespace", ns, &format!("{EVICT}=enabled")]);
}

/// A ValidatingAdmissionPolicy refusing NADs in `namespace` (as a policy engine would),
/// enforced by the API server of `admin` (a kubeconfig) before this returns.
fn refuse_nads(s: &Setup, namespace: &str, admin: &Path) {
    let policy = format!("no-nads-{namespace}");
    s.plane.apply(
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["k8s.cni.cncf.io"], "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["network-attachment-definitions"]
                }]},
                "validations": [{"expression": "false", "message": "no NAD here"}]
            }
        })
        .to_string(),
    );
    s.plane.apply(
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace}
                }}
            }
        })
        .to_string(),
    );
    let nad = format!(
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: probe\n  namespace: {namespace}\nspec:\n  config: '{{}}'\n"
    );
    let admin = admin.to_str().unwrap();
    eventually("the policy enforced", Duration::from_secs(30), || {
        let out = s.plane.kubectl_input(
            &[
                "--kubeconfig",
                admin,
                "create",
                "--dry-run=server",
                "-f",
                "-",
            ],
            &nad,
        );
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no NAD here")
    });
}

#[test]
fn each_alert_fires_on_a_real_prometheus_when_its_fault_is_planted() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &["--restart-deadline=3s"]);
    eventually("the controller leads", Duration::from_secs(30), || {
        controller.leader() == Some(1.0)
    });
    // The webhooks read through the same API server as the controller, so stopping it is
    // an outage for all three, while the test's kubectl goes on through the first one.
    let admin = s.plane.admin_kubeconfig_for(&audited.server, s.dir.path());
    let ca = Ca::new("linkerd-multus monitoring test CA");
    let mut expiring = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    expiring.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(10);
    let deny = webhook(&admin, &ca.sign(expiring), "deny");
    let mut allow = webhook(&admin, &ca.leaf(&["127.0.0.1"]), "allow");
    let (webhook_job, controller_job) = (
        "linkerd-multus-webhook-metrics",
        "linkerd-multus-nad-controller-metrics",
    );
    let prometheus = Prometheus::start(&[
        (webhook_job, "deny", &deny.ops),
        (webhook_job, "allow", &allow.ops),
        (controller_job, &s.home, &controller.ops),
    ]);
    // Healthy: only the short-lived certificate's alert fires (its fault is planted from the
    // start), once the rules have been evaluated on every target.
    let took = prometheus.wait_firing(&[("LinkerdMultusCertificateExpiringSoon", "deny")]);
    let quiet: BTreeSet<(String, String)> = [(
        "LinkerdMultusCertificateExpiringSoon".to_string(),
        "deny".to_string(),
    )]
    .into();
    assert_eq!(prometheus.firing(), quiet, "healthy, nothing else fires");
    let mut fired = vec![("a serving certificate expiring in 10 days", took)];

    // Faults the cluster keeps: they fire at once and stay.
    let (stale, _) = namespace(&s, "stale", &[]);
    naked(&s, &stale, "old", json!({}), json!({HASH: OLD}), None);
    let (evict, _) = namespace(&s, "evict", &[]);
    blocked_eviction(&s, &evict);
    let (rolling, _) = namespace(&s, "rolling", &[(OPT_IN, "enabled")]);
    workload(&s, Deployment, &rolling, "api", json!({}), OLD);
    let home = s.home.as_str();
    fired.push((
        "a stale naked pod; another under a budget allowing no eviction; a restarted Deployment whose rollout never completes",
        prometheus.wait_firing(&[
            ("LinkerdMultusPodsOnOlderConfig", home),
            ("LinkerdMultusEvictionsBlocked", home),
            ("LinkerdMultusRolloutStalled", home),
            ("LinkerdMultusRestartsHalted", home),
        ]),
    ));

    // Each fault below: its alerts quiet until it is planted.
    prometheus.assert_quiet(&[("LinkerdMultusNADReverted", home)]);
    let nad = s.nad(&stale).unwrap();
    let config = nad["spec"]["config"].as_str().unwrap();
    s.plane.kubectl(&[
        "patch",
        super::harness::NAD,
        "linkerd-cni",
        "-n",
        &stale,
        "--type=merge",
        "-p",
        &json!({"spec": {"config": config.replace("linkerd-cni", "edited-by-hand")}}).to_string(),
    ]);
    fired.push((
        "a NAD edited by hand",
        prometheus.wait_firing(&[("LinkerdMultusNADReverted", home)]),
    ));

    prometheus.assert_quiet(&[("LinkerdMultusNADWritesFailing", home)]);
    let refused = s.plane.namespace("refused", &[]);
    refuse_nads(&s, &refused, &admin);
    s.annotate(&refused, "enabled");
    fired.push((
        "a namespace whose admission policy refuses its NAD",
        prometheus.wait_firing(&[("LinkerdMultusNADWritesFailing", home)]),
    ));

    prometheus.assert_quiet(&[("LinkerdMultusCertificateReloadFailing", "deny")]);
    std::fs::write(deny.dir.path().join("tls.crt"), "not a certificate").unwrap();
    fired.push((
        "the serving certificate's file overwritten with garbage",
        prometheus.wait_firing(&[("LinkerdMultusCertificateReloadFailing", "deny")]),
    ));

    prometheus.assert_quiet(&[("LinkerdMultusCNIConfigUnusable", home)]);
    s.plane
        .kubectl(&["delete", "configmap", "-n", &s.cni, "linkerd-cni-config"]);
    fired.push((
        "the Linkerd-CNI ConfigMap deleted",
        prometheus.wait_firing(&[("LinkerdMultusCNIConfigUnusable", home)]),
    ));

    // The API server the three use stops: the watches break, the Lease is not renewed, and
    // past --max-watch-outage the webhooks answer reviews with --on-error.
    prometheus.assert_quiet(&[
        ("LinkerdMultusWatchDown", "deny"),
        ("LinkerdMultusWatchDown", "allow"),
        ("LinkerdMultusNoControllerLeader", home),
    ]);
    audited.server.stop();
    fired.push((
        "the API server stopped",
        prometheus.wait_firing(&[
            ("LinkerdMultusWatchDown", "deny"),
            ("LinkerdMultusWatchDown", "allow"),
            ("LinkerdMultusNoControllerLeader", home),
        ]),
    ));
    prometheus.assert_quiet(&[
        ("LinkerdMultusWebhookFailingClosed", "deny"),
        ("LinkerdMultusOnErrorAdmissions", "allow"),
        ("LinkerdMultusWebhookDown", "allow"),
    ]);
    // Once the outage is longer than --max-watch-outage (1 s), the caches vouch for nothing
    // and the live reads fail: the --on-error answer, denied or admitted unchanged with a
    // warning.
    eventually("--on-error deny", Duration::from_secs(20), || {
        review(&deny, &ca, &stale)["allowed"] == false
    });
    eventually("--on-error allow", Duration::from_secs(20), || {
        let allowed = review(&allow, &ca, &stale);
        allowed["allowed"] == true
            && allowed["patch"].is_null()
            && allowed["warnings"]
                .as_array()
                .is_some_and(|w| !w.is_empty())
    });
    fired.push((
        "a review to each webhook during the outage",
        prometheus.wait_firing(&[
            ("LinkerdMultusWebhookFailingClosed", "deny"),
            ("LinkerdMultusOnErrorAdmissions", "allow"),
        ]),
    ));

    prometheus.assert_quiet(&[("LinkerdMultusWebhookDown", "allow")]);
    allow.child.kill().unwrap();
    fired.push((
        "the allow webhook killed",
        prometheus.wait_firing(&[("LinkerdMultusWebhookDown", "allow")]),
    ));

    // Every alert fired on its fault.
    let all_fired: BTreeSet<String> = fired
        .iter()
        .flat_map(|(_, alerts)| alerts.iter().map(|(name, _)| name.clone()))
        .collect();
    let every: BTreeSet<String> = alerts().into_iter().map(|(name, _)| name).collect();
    assert_eq!(all_fired, every, "alerts that never fired");
    for (fault, alerts) in &fired {
        eprintln!("{fault}: {alerts:?}");
    }

    // No dead series: what every rule and panel reads is scraped, and each panel's query
    // gives a result.
    let scraped = prometheus.names();
    let queries = dashboard_queries();
    let mut read = BTreeSet::new();
    for (name, rule) in alerts() {
        for metric in metric_names(rule["expr"].as_str().unwrap()) {
            read.insert((format!("rule {name}"), metric));
        }
    }
    for (title, expr) in &queries {
        for metric in metric_names(expr) {
            read.insert((format!("panel {title}"), metric));
        }
        assert!(
            !prometheus.query(expr).is_empty(),
            "panel {title}: {expr} gives no result"
        );
    }
    let dead: Vec<_> = read.iter().filter(|(_, m)| !scraped.contains(m)).collect();
    assert!(dead.is_empty(), "read but never scraped: {dead:?}");
    drop(deny);
}

//! The monitoring objects (docs/monitoring.md): the alerts of
//! charts/linkerd-multus/monitoring/rules.yaml under `promtool check rules` and `promtool test
//! rules` (tests/monitoring/rules.test.yaml, a test for every alert), each alert's runbook, and
//! the chart's `monitoring.enabled` giving what `install --monitoring` gives. The end-to-end
//! test on a real Prometheus is tests/controller/prometheus.rs. Debian's `prometheus` package
//! gives promtool and the server (scripts/install-test-tools.sh installs it); these tests fail,
//! never skip, without it.

use crate::common::process::Guarded;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::helm::{CHART, helm};
use crate::common::{output_text, parse_yaml_stream, repo_path};
use crate::deploy::to_json;
use crate::extension::install::{Objects, by_id, from_install, take_certificates};

/// The rule file, the one source of the PrometheusRule.
pub(crate) const RULES: &str = "charts/linkerd-multus/monitoring/rules.yaml";
/// The Grafana dashboard.
pub(crate) const DASHBOARD: &str = "charts/linkerd-multus/monitoring/dashboard.json";

/// A binary of Debian's `prometheus` package (`prometheus` or `promtool`), failing the test
/// with what to install when it is missing.
pub(crate) fn prometheus_tool(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: install Debian's package prometheus (apt-get install prometheus; scripts/install-test-tools.sh does)"
            )
        })
}

/// The rule file as JSON.
pub(crate) fn rules() -> Value {
    let text = std::fs::read_to_string(repo_path(RULES)).unwrap();
    to_json(&parse_yaml_stream(&text).unwrap()[0])
}

/// Every alert of the rule file: its name and rule.
pub(crate) fn alerts() -> Vec<(String, Value)> {
    rules()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap().clone())
        .map(|rule| (rule["alert"].as_str().unwrap().to_string(), rule))
        .collect()
}

fn promtool(args: &[&str]) -> std::process::Output {
    Command::new(prometheus_tool("promtool"))
        .args(args)
        .current_dir(repo_path("tests/monitoring"))
        .guarded_output()
        .expect("running promtool")
}

#[test]
fn promtool_checks_the_rules() {
    let rules = repo_path(RULES);
    let out = promtool(&["check", "rules", rules.to_str().unwrap()]);
    assert!(out.status.success(), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(
        text.contains(&format!("SUCCESS: {} rules found", alerts().len())),
        "{text}"
    );
}

/// `promtool test rules` passes, and it tests every alert: each fires in some test (with its
/// labels and annotations) and is held quiet at another time.
#[test]
fn promtool_tests_every_alert_firing_and_quiet() {
    let out = promtool(&["test", "rules", "rules.test.yaml"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let text = std::fs::read_to_string(repo_path("tests/monitoring/rules.test.yaml")).unwrap();
    let tests = to_json(&parse_yaml_stream(&text).unwrap()[0]);
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .collect();
    for (alert, _) in alerts() {
        let of_it = cases.iter().filter(|c| c["alertname"] == alert.as_str());
        let (firing, quiet): (Vec<&&Value>, Vec<&&Value>) = of_it.partition(|c| {
            c["exp_alerts"].as_array().is_some_and(|a| {
                !a.is_empty() && a.iter().all(|e| e["exp_annotations"].is_object())
            })
        });
        assert!(
            !firing.is_empty(),
            "{alert}: no promtool test where it fires"
        );
        assert!(
            !quiet.is_empty(),
            "{alert}: no promtool test where it is quiet"
        );
    }
}

/// Each alert links its runbook, a section of docs/monitoring.md, and says how bad it is.
#[test]
fn every_alert_has_a_runbook_section_and_a_severity() {
    let doc = std::fs::read_to_string(repo_path("docs/monitoring.md")).unwrap();
    for (alert, rule) in alerts() {
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            url,
            format!(
                "https://github.com/linkerd-multus/linkerd-multus/blob/main/docs/monitoring.md#{}",
                alert.to_lowercase()
            ),
            "{alert}"
        );
        let section = doc
            .split(&format!("\n### {alert}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("docs/monitoring.md has no section ### {alert}"));
        let section = section.split("\n### ").next().unwrap();
        for part in ["**Means:**", "**Check:**", "**Fix:**"] {
            assert!(section.contains(part), "{alert}'s runbook lacks {part}");
        }
        assert!(
            section.contains("linkerd multus check"),
            "{alert}'s runbook names no check command"
        );
        assert!(
            ["critical", "warning", "info"]
                .contains(&rule["labels"]["severity"].as_str().unwrap_or_default()),
            "{alert}: severity"
        );
    }
}

/// The chart rendered with `values` in `namespace` (`helm template`).
fn template(namespace: &str, values: &str) -> Objects {
    let out = helm(
        &[
            "template",
            CHART,
            "--namespace",
            namespace,
            "--values",
            values,
        ],
        None,
    );
    assert!(
        out.status.success(),
        "helm template {values}: {}",
        output_text(&out)
    );
    let docs = parse_yaml_stream(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut objects = by_id(&docs);
    take_certificates(&mut objects, values);
    objects
}

/// `monitoring.enabled` and `install --monitoring` give the same objects, field for field (the
/// rules and the dashboard the files as they are); without it neither gives any of them.
#[test]
fn the_chart_and_install_give_the_same_monitoring_objects() {
    let cases = [
        (
            "linkerd-multus",
            &["--monitoring"][..],
            r#"{"installNamespace": true, "monitoring": {"enabled": true}}"#,
        ),
        (
            "mesh",
            &["--monitoring", "--manage-nads", "--namespace=mesh"][..],
            r#"{"installNamespace": true, "manageNADs": true, "monitoring": {"enabled": true}}"#,
        ),
    ];
    let monitoring = |objects: &Objects| {
        objects
            .keys()
            .filter(|id| {
                ["ServiceMonitor", "PrometheusRule"].contains(&id.0.as_str())
                    || id.2 == "linkerd-multus-dashboard"
            })
            .count()
    };
    for (namespace, flags, values) in cases {
        let want = from_install(flags);
        let got = template(namespace, values);
        assert_eq!(monitoring(&want), 3, "install {flags:?}");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{values}"
        );
        for (id, object) in &want {
            assert_eq!(&got[id], object, "{values}: {id:?}");
        }
        let rule = want
            .iter()
            .find(|(id, _)| id.0 == "PrometheusRule")
            .unwrap()
            .1;
        assert_eq!(rule["spec"], rules(), "the PrometheusRule is the rule file");
        let dashboard = want
            .iter()
            .find(|(id, _)| id.2 == "linkerd-multus-dashboard")
            .unwrap()
            .1;
        assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
        assert_eq!(
            dashboard["data"]["linkerd-multus.json"].as_str(),
            Some(
                std::fs::read_to_string(repo_path(DASHBOARD))
                    .unwrap()
                    .as_str()
            )
        );
    }
    assert_eq!(monitoring(&from_install(&[])), 0);
    assert_eq!(monitoring(&template("linkerd-multus", "{}")), 0);
}

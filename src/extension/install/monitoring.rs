//! `--monitoring`: a ServiceMonitor of the metrics Services, a PrometheusRule and a Grafana
//! dashboard ConfigMap, the objects of the chart's `monitoring.enabled`
//! (charts/linkerd-multus/templates/monitoring.yaml). The rules and the dashboard are the
//! chart's files, embedded: one source for the chart, `install` and the tests that run them on
//! promtool and a real Prometheus (docs/monitoring.md).

use anyhow::Context as _;

use crate::yaml::{Node, parse_stream};

/// The alerts, in Prometheus's rule-file format: the PrometheusRule's spec.
pub const RULES: &str = include_str!("../../../charts/linkerd-multus/monitoring/rules.yaml");
/// The Grafana dashboard, its JSON model.
pub const DASHBOARD: &str =
    include_str!("../../../charts/linkerd-multus/monitoring/dashboard.json");

/// The three objects in `namespace`, as the chart renders them.
pub fn objects(namespace: &str) -> anyhow::Result<Vec<Node>> {
    let labels = "  labels:\n    app.kubernetes.io/name: linkerd-multus-monitoring\n    app.kubernetes.io/part-of: linkerd-multus\n    linkerd.io/extension: multus\n";
    let indented = |text: &str, by: &str| {
        text.lines()
            .map(|line| format!("{by}{line}\n"))
            .collect::<String>()
    };
    let text = format!(
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: linkerd-multus\n  namespace: {namespace}\n{labels}spec:\n  selector:\n    matchLabels:\n      app.kubernetes.io/component: metrics\n      app.kubernetes.io/part-of: linkerd-multus\n  endpoints:\n  - port: metrics\n    path: /metrics\n    interval: 30s\n---\napiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: linkerd-multus\n  namespace: {namespace}\n{labels}spec:\n{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linkerd-multus-dashboard\n  namespace: {namespace}\n{labels}    grafana_dashboard: \"1\"\ndata:\n  linkerd-multus.json: |\n{}",
        indented(RULES, "  "),
        indented(DASHBOARD, "    "),
    );
    let docs = parse_stream(&text).context("the monitoring objects")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules and the dashboard reach their objects whole.
    #[test]
    fn the_rules_and_the_dashboard_are_embedded_whole() {
        let objects = objects("mesh").unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o.get_path(&["kind"]).and_then(Node::as_str).unwrap())
            .collect();
        assert_eq!(kinds, ["ServiceMonitor", "PrometheusRule", "ConfigMap"]);
        let rules = &parse_stream(RULES).unwrap()[0];
        assert_eq!(objects[1].get_path(&["spec"]), Some(rules));
        let dashboard = objects[2]
            .get_path(&["data", "linkerd-multus.json"])
            .and_then(Node::as_str);
        assert_eq!(dashboard, Some(DASHBOARD));
        for object in &objects {
            assert_eq!(
                object
                    .get_path(&["metadata", "namespace"])
                    .and_then(Node::as_str),
                Some("mesh")
            );
        }
    }
}

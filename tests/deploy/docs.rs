//! The sentences of the docs that describe the shipped objects and the webhook's behaviour,
//! held to them: what deploy/README.md says of the spread, the memory limits and the NAD
//! cache's metrics, and what docs/webhook.md says `check --proxy` compares the config hash
//! with (the behaviour itself: src/extension/check/proxy/old_config.rs's tests).

use super::*;

fn doc(path: &str) -> String {
    std::fs::read_to_string(repo_path(path)).unwrap()
}

/// A doc's text with its lines joined, so a sentence is found wherever it wraps.
fn joined(path: &str) -> String {
    doc(path).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_spread_is_the_one_the_objects_set() {
    let pkg = Package::load();
    let spread = pkg
        .pod_spec()
        .get("topologySpreadConstraints")
        .expect("a topology spread")
        .seq();
    assert_eq!(spread.len(), 1);
    assert_eq!(
        spread[0].str_at(&["whenUnsatisfiable"]),
        Some("DoNotSchedule")
    );
    assert_eq!(
        spread[0].str_at(&["topologyKey"]),
        Some("kubernetes.io/hostname")
    );
    let readme = joined("deploy/README.md");
    assert!(
        readme.contains("(`topologySpreadConstraints`, `DoNotSchedule` on the hostname)"),
        "deploy/README.md says the spread"
    );
    assert!(!readme.contains("ScheduleAnyway"));
}

#[test]
fn the_memory_limits_are_the_ones_the_objects_set() {
    let limit = |path: &str, container: &str| {
        let docs = parse_yaml_stream(&doc(path)).unwrap();
        let deployment = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("Deployment"))
            .unwrap();
        let containers = deployment
            .at(&["spec", "template", "spec", "containers"])
            .unwrap()
            .seq();
        let found = containers
            .iter()
            .find(|c| c.str_at(&["name"]) == Some(container))
            .unwrap();
        found
            .str_at(&["resources", "limits", "memory"])
            .unwrap()
            .to_string()
    };
    assert_eq!(limit("deploy/deployment.yaml", "webhook"), "64Mi");
    assert_eq!(
        limit("deploy-nad-controller/deployment.yaml", "controller"),
        "64Mi"
    );
    assert_eq!(
        linkerd_multus::extension::install::RESTARTS_MEMORY_LIMIT,
        "128Mi"
    );
    let readme = joined("deploy/README.md");
    assert!(
        readme.contains("Requests of 10m CPU and 32Mi, a 64Mi memory limit, as the NAD controller's (whose limit `install` and the chart raise to 128Mi with the restarts on"),
        "deploy/README.md says the limits"
    );
}

#[test]
fn the_nad_cache_metrics_are_there_when_the_webhook_watches_nads() {
    use linkerd_multus::admission::MissingNad;
    use linkerd_multus::webhook::watches_nads;
    // The packages' default, --missing-nad=deny, watches NADs; only ignore without the
    // network-resources rules does not.
    assert!(watches_nads(false, MissingNad::Deny));
    assert!(!watches_nads(false, MissingNad::Ignore));
    assert!(watches_nads(true, MissingNad::Ignore));
    let readme = joined("deploy/README.md");
    assert!(
        readme.contains("the same for the NAD cache, which the webhook runs unless `--missing-nad=ignore` and no `--network-resources`"),
        "deploy/README.md says when"
    );
    assert!(!readme.contains("with `--network-resources` only"));
}

#[test]
fn the_webhook_doc_says_check_compares_with_the_namespace_s_nad() {
    let webhook = joined("docs/webhook.md");
    assert!(webhook.contains(
        "`linkerd multus check --proxy` compares it with the hash of the `spec.config` of the NAD in the pod's namespace now"
    ));
    assert!(!webhook.contains("the config the live ConfigMap gives, to name the pods"));
}

/// docs/config-rollouts.md says the render restarts nothing, and the NAD controller restarts
/// the opted-in workloads with `--restart-stale-workloads`, a flag the controller takes; it no
/// longer says that no controller restarts anything.
#[test]
fn the_rollouts_doc_says_which_side_restarts() {
    let rollouts = joined("docs/config-rollouts.md");
    assert!(!rollouts.contains("no controller restarts anything"));
    assert!(rollouts.contains("the render restarts nothing and nothing sleeps"));
    assert!(rollouts.contains(
        "For workloads that do not live in Git, and only for those that opt in, the NAD controller (`linkerd-multus controller`"
    ));
    assert!(rollouts.contains("`--restart-stale-workloads`"));
    let out =
        common::process::Guard::output(Command::new(bin()).args(["controller", "--help"])).unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--restart-stale-workloads"));
}

//! Git and the controller meet on a namespace's NAD as a user meets them: the team's package
//! rendered (`linkerd-multus render`) and applied with `kubectl apply --server-side`, as the
//! docs show it, or under the field managers Argo CD (`argocd-controller`) and Flux
//! (`kustomize-controller`) apply as, without `--force-conflicts`, while the controller runs.
//! In every order (the controller's NAD first, Git's first, both at once) the apply succeeds,
//! the NAD ends as Git rendered it, and the controller writes nothing more and says nothing.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::common::bin;
use super::harness::{
    BOUND, CONFIG_MAP, Controller, Setup, StdinBytes, eventually, labelled_by_controller, setup,
};
use super::proxy::DelayProxy;

/// The managers a GitOps apply runs as: kubectl's own, Argo CD's and Flux's.
const MANAGERS: [&str; 3] = ["kubectl", "argocd-controller", "kustomize-controller"];

/// The team's package, rendered: its Namespace (enabled and meshed) and the NAD made from the
/// package's copy of the Linkerd-CNI ConfigMap (`config_map`, local-config, so not printed).
fn rendered(namespace: &str, config_map: &str) -> String {
    let copy = config_map.replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
        1,
    );
    let package = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n  annotations:\n    linkerd.io/multus: enabled\n    linkerd.io/inject: enabled\n---\n{copy}"
    );
    Command::new(bin())
        .args(["render", "-"])
        .stdin_bytes(package.as_bytes())
}

/// The first document of a rendered stream: its Namespace.
fn namespace_only(stream: &str) -> String {
    let (namespace, _) = stream
        .split_once("\n---\n")
        .expect("the Namespace, then the NAD");
    assert!(namespace.contains("kind: Namespace"), "{stream}");
    namespace.to_string()
}

/// `kubectl apply --server-side` of `stream` as `manager` (kubectl's own when `kubectl`),
/// with `extra` flags: its exit status and stderr.
fn apply(s: &Setup, stream: &str, manager: &str, extra: &[&str]) -> (bool, String) {
    let manager = format!("--field-manager={manager}");
    let mut args = vec!["apply", "--server-side", "-f", "-"];
    if !manager.ends_with("=kubectl") {
        args.push(&manager);
    }
    args.extend(extra);
    let out = s.plane.kubectl_input(&args, stream);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The NAD is Git's, as rendered: the render's mark, the rendered config, an applier of
/// Git's among its managers.
fn is_gits(nad: &Value, config: &str, manager: &str) -> bool {
    let appliers: Vec<&str> = nad["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["operation"] == "Apply")
        .filter_map(|m| m["manager"].as_str())
        .collect();
    nad["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "linkerd-multus"
        && nad["spec"]["config"].as_str() == Some(config)
        && appliers.contains(&manager)
}

/// The Warning Events about Namespace `namespace`.
fn warnings(s: &Setup, namespace: &str) -> Vec<String> {
    s.events_about("default", namespace)
        .iter()
        .filter(|e| e["type"] == "Warning")
        .map(|e| format!("{}: {}", e["reason"], e["note"]))
        .collect()
}

/// After Git took the NADs of `namespaces` over: two seconds on, none was written again, the
/// controller wrote nothing, and no Warning Event was written about any of them.
fn quiet_after(s: &Setup, controller: &Controller, namespaces: &[String]) {
    let versions: Vec<Option<String>> = namespaces.iter().map(|n| s.version(n)).collect();
    let writes = controller.writes();
    std::thread::sleep(Duration::from_secs(2));
    let now: Vec<Option<String>> = namespaces.iter().map(|n| s.version(n)).collect();
    assert_eq!(now, versions, "{}", controller.log());
    assert_eq!(controller.writes(), writes, "{}", controller.log());
    for namespace in namespaces {
        assert_eq!(warnings(s, namespace), Vec::<String>::new(), "{namespace}");
    }
}

/// The controller's NAD first (the Namespace applied on its own, the controller's NAD made),
/// then the whole rendered package, by each manager: no conflict, Git's NAD, a quiet
/// controller. The same package applied again changes nothing.
#[test]
fn git_takes_the_controller_s_nad_over_without_a_conflict() {
    let s = setup();
    let controller = Controller::start_quiet(&s);
    let config = s.rendered_config(CONFIG_MAP);
    let mut namespaces = Vec::new();
    for manager in MANAGERS {
        let namespace = s.plane.unique_name("first");
        let stream = rendered(&namespace, CONFIG_MAP);
        let (ok, stderr) = apply(&s, &namespace_only(&stream), manager, &[]);
        assert!(ok, "{stderr}");
        eventually("the controller's NAD", BOUND, || {
            s.nad(&namespace)
                .is_some_and(|n| labelled_by_controller(&n))
        });
        let (ok, stderr) = apply(&s, &stream, manager, &[]);
        assert!(ok, "{manager}: {stderr}");
        let nad = s.nad(&namespace).unwrap();
        assert!(is_gits(&nad, &config, manager), "{manager}: {nad}");
        namespaces.push((namespace, stream, manager));
    }
    let names: Vec<String> = namespaces.iter().map(|(n, _, _)| n.clone()).collect();
    quiet_after(&s, &controller, &names);
    for (namespace, stream, manager) in &namespaces {
        let version = s.version(namespace);
        let (ok, stderr) = apply(&s, stream, manager, &[]);
        assert!(ok, "{manager} again: {stderr}");
        assert_eq!(
            s.version(namespace),
            version,
            "applying again changes nothing"
        );
    }
}

/// Git's NAD first: applied before the controller runs, or while its view of the cluster lags
/// (a proxy holds what it reads back 5 s), so that its create meets Git's NAD and is refused
/// AlreadyExists. Either way the NAD stays Git's, the controller writes no more, and no
/// `NADExists` Warning Event is written: a healthy flow says nothing.
#[test]
fn git_s_nad_first_is_left_to_git_without_a_word() {
    let s = setup();
    let config = s.rendered_config(CONFIG_MAP);
    let before = s.plane.unique_name("before");
    let (ok, stderr) = apply(&s, &rendered(&before, CONFIG_MAP), "kubectl", &[]);
    assert!(ok, "{stderr}");
    let proxy = DelayProxy::start(s.plane.url());
    let controller = Controller::start_behind(&s, &proxy.address);
    eventually("leading", BOUND, || controller.leader() == Some(1.0));
    eventually("every namespace reconciled", BOUND, || {
        controller
            .metric("linkerd_multus_nad_reconciles_total{outcome=\"skipped\"}")
            .is_some_and(|n| n >= 1.0)
    });
    assert_eq!(controller.writes(), 0.0, "Git's NAD is never written");
    let writes = controller.writes();

    let raced = s.plane.unique_name("raced");
    let stream = rendered(&raced, CONFIG_MAP);
    // 2.5 s on each side of the race, as ownership.rs's: the controller learns of the
    // Namespace 5 s late, Git's NAD is there up to 2.5 s before its create, which it learns
    // of 2.5 s after.
    proxy.set_delay(Duration::from_secs(5));
    let (ok, stderr) = apply(&s, &namespace_only(&stream), "argocd-controller", &[]);
    assert!(ok, "{stderr}");
    std::thread::sleep(Duration::from_millis(2500));
    let (ok, stderr) = apply(&s, &stream, "argocd-controller", &[]);
    assert!(ok, "{stderr}");
    eventually("the controller's create, refused", BOUND, || {
        controller.writes() == writes + 1.0
    });
    proxy.set_delay(Duration::ZERO);
    eventually("the refused create logged", BOUND, || {
        controller
            .log()
            .contains("exists already, rendered from Git: left to Git")
    });
    for (namespace, manager) in [(&before, "kubectl"), (&raced, "argocd-controller")] {
        let nad = s.nad(namespace).unwrap();
        assert!(is_gits(&nad, &config, manager), "{nad}");
    }
    quiet_after(&s, &controller, &[before, raced]);
}

/// Both at once, as a user runs it: the rendered package applied in one `kubectl apply
/// --server-side` while the controller runs, so the controller's create and Git's apply race.
/// Whichever wins, the apply succeeds and the NAD ends Git's.
#[test]
fn git_and_the_controller_at_once_end_with_git_s_nad() {
    let s = setup();
    let controller = Controller::start_quiet(&s);
    eventually("leading", BOUND, || controller.leader() == Some(1.0));
    let config = s.rendered_config(CONFIG_MAP);
    let mut namespaces = Vec::new();
    for manager in MANAGERS.iter().cycle().take(6) {
        let namespace = s.plane.unique_name("together");
        let (ok, stderr) = apply(&s, &rendered(&namespace, CONFIG_MAP), manager, &[]);
        assert!(ok, "{manager}: {stderr}");
        eventually("the controller's pass over the namespace", BOUND, || {
            s.nad(&namespace)
                .is_some_and(|n| is_gits(&n, &config, manager))
        });
        namespaces.push(namespace);
    }
    quiet_after(&s, &controller, &namespaces);
}

/// A NAD an earlier release of the controller made, marked `app.kubernetes.io/managed-by:
/// linkerd-multus-controller` (a label Git's apply conflicts with): the controller relabels
/// it once, with no Event, and Git's apply then takes it over without a conflict.
#[test]
fn the_earlier_mark_is_replaced_so_git_meets_no_conflict() {
    let s = setup();
    let namespace = s.plane.unique_name("earlier");
    let stream = rendered(&namespace, CONFIG_MAP);
    let (ok, stderr) = apply(&s, &namespace_only(&stream), "kubectl", &[]);
    assert!(ok, "{stderr}");
    let earlier = serde_json::json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "linkerd-cni", "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "linkerd-multus-controller"}},
        "spec": {"config": s.rendered_config(CONFIG_MAP)},
    });
    s.plane.kubectl_ok(
        &[
            "create",
            "--field-manager=linkerd-multus-controller",
            "-f",
            "-",
        ],
        &earlier.to_string(),
    );
    let (ok, stderr) = apply(&s, &stream, "kubectl", &["--dry-run=server"]);
    assert!(
        !ok && stderr.contains(
            "conflict with \"linkerd-multus-controller\" using k8s.cni.cncf.io/v1: .metadata.labels.app.kubernetes.io/managed-by"
        ),
        "the conflict of the issue, before the controller runs: {stderr}"
    );
    let controller = Controller::start_quiet(&s);
    eventually("relabelled", BOUND, || {
        s.nad(&namespace)
            .is_some_and(|n| labelled_by_controller(&n))
    });
    assert_eq!(controller.writes(), 1.0, "one patch");
    assert_eq!(s.event_reasons(&namespace), Vec::<String>::new());
    let (ok, stderr) = apply(&s, &stream, "kubectl", &[]);
    assert!(ok, "{stderr}");
    quiet_after(&s, &controller, &[namespace]);
}

/// The one conflict left is real: a package whose copy of the Linkerd-CNI ConfigMap is not the
/// cluster's renders another `spec.config`, which a server-side apply without force names;
/// Argo CD and Flux force, and Git's NAD wins; the controller then leaves it.
#[test]
fn a_package_with_another_config_map_names_the_conflict_on_spec_config() {
    let (s, namespace, controller) = super::harness::with_one_nad("stale-copy");
    let copy = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
    assert_ne!(copy, CONFIG_MAP, "the fixture's log_level is edited");
    let stream = rendered(&namespace, &copy);
    let (ok, stderr) = apply(&s, &stream, "kubectl", &[]);
    assert!(
        !ok && stderr.contains("conflict with \"linkerd-multus-controller\"")
            && stderr.contains(".spec.config")
            && !stderr.contains("managed-by"),
        "{stderr}"
    );
    let (ok, stderr) = apply(&s, &stream, "argocd-controller", &["--force-conflicts"]);
    assert!(ok, "{stderr}");
    let nad = s.nad(&namespace).unwrap();
    assert!(
        is_gits(&nad, &s.rendered_config(&copy), "argocd-controller"),
        "{nad}"
    );
    quiet_after(&s, &controller, &[namespace]);
}

//! `install`'s output applied client-side, as a user who pipes it to a plain `kubectl apply
//! -f -` does, against a real kube-apiserver: applied again it changes nothing (every
//! object keeps its resourceVersion; kubectl says `unchanged` of each but the
//! PodDisruptionBudgets, below). Then `uninstall | kubectl delete
//! -f -` and, at once, install again: while the namespace is still being deleted (a lone
//! API server never finishes: it has no namespace controller), `install` prints nothing
//! and says to wait, and `check --pre` and `check` name the namespace being deleted.
//!
//! An API server of its own: the install registers a `failurePolicy: Fail` webhook for
//! pods in every namespace, and fixed names of cluster-scoped objects.

use serde_json::Value;

use super::common::kube_apiserver::ControlPlane;
use super::common::parse_yaml_stream;
use super::lifecycle::{extension, versions};

const NS: &str = "linkerd-multus";

/// The check described `description` in the JSON of `check` with `args`.
pub(super) fn seen(plane: &ControlPlane, args: &[&str], description: &str) -> Value {
    let mut all = vec!["check", "--wait=0s", "-o", "json"];
    all.extend(args);
    let run = extension(plane, &all);
    let json: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    let checks: Vec<&Value> = json["categories"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["checks"].as_array().unwrap())
        .collect();
    checks
        .iter()
        .find(|c| c["description"] == description)
        .map(|c| (*c).clone())
        .unwrap_or_else(|| panic!("no check {description:?}: {}", run.stdout))
}

#[test]
fn applied_again_client_side_nothing_changes_and_a_namespace_being_deleted_is_named() {
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    let cni = plane.namespace("cni", &[]);
    let cni_flag = format!("--cni-namespace={cni}");
    let flags = [
        "install",
        "--manage-nads",
        cni_flag.as_str(),
        "--network-resources",
    ];
    let install = extension(plane, &flags);
    assert_eq!(install.code, 0, "{}", install.stderr);
    let objects = parse_yaml_stream(&install.stdout).unwrap().len();

    // Applied client-side: every object created; applied again, unchanged, but for the
    // PodDisruptionBudgets, which kubectl reports `configured` on every client-side apply
    // whatever the manifest says: its API marks spec.selector `patchStrategy: replace`, so
    // kubectl's three-way patch always carries the selector whole. The API server changes
    // nothing: every object keeps its resourceVersion.
    let created = plane.kubectl_ok(&["apply", "-f", "-"], &install.stdout);
    let lines: Vec<&str> = created.lines().collect();
    assert_eq!(lines.len(), objects, "{created}");
    assert!(lines.iter().all(|l| l.ends_with(" created")), "{created}");
    let before = versions(plane, &install.stdout);
    let again = plane.kubectl_ok(&["apply", "-f", "-"], &install.stdout);
    let changed: Vec<&str> = again
        .lines()
        .filter(|l| !l.ends_with(" unchanged"))
        .collect();
    assert_eq!(again.lines().count(), objects, "{again}");
    assert_eq!(
        changed,
        [
            "poddisruptionbudget.policy/linkerd-multus-webhook configured",
            "poddisruptionbudget.policy/linkerd-multus-nad-controller configured"
        ],
        "{again}"
    );
    assert_eq!(
        versions(plane, &install.stdout),
        before,
        "applying again changed:\n{again}"
    );
    // A second install reads the cluster and prints the same bytes (which apply unchanged).
    let again = extension(plane, &flags);
    assert!(
        again.stdout == install.stdout,
        "a second install printed other objects"
    );

    // Uninstall, then install again at once.
    let removal = extension(plane, &["uninstall"]);
    assert_eq!(removal.code, 0, "{}", removal.stderr);
    plane.kubectl_ok(&["delete", "--wait=false", "-f", "-"], &removal.stdout);
    let deleting = plane.kubectl(&[
        "get",
        "namespace",
        NS,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!deleting.is_empty(), "namespace {NS} is not being deleted");

    let run = extension(plane, &flags);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{run:?}");
    assert_eq!(
        run.stderr,
        format!(
            "error: namespace \"{NS}\" is being deleted: the API server refuses new objects in it until it is gone, and its certificates go with it, so install printed nothing; wait until it is gone (kubectl wait --for=delete namespace/{NS} --timeout=5m), then run install again\n"
        )
    );

    let pre = seen(
        plane,
        &["--pre", "--manage-nads", &cni_flag, "--network-resources"],
        "the extension's namespace does not exist or is linkerd-multus's own",
    );
    assert_eq!(pre["result"], "error", "{pre}");
    assert_eq!(
        pre["error"],
        run.stderr
            .trim_end()
            .strip_prefix("error: ")
            .unwrap()
            .to_string()
    );
    assert_eq!(
        pre["hint"],
        format!("wait until it is gone: kubectl wait --for=delete namespace/{NS} --timeout=5m")
    );

    let check = seen(plane, &[], "linkerd-multus extension Namespace exists");
    assert_eq!(check["result"], "error", "{check}");
    let error = check["error"].as_str().unwrap();
    let since = error
        .strip_prefix(&format!("Namespace {NS} is being deleted (since "))
        .and_then(|rest| {
            rest.strip_suffix("): linkerd-multus is being uninstalled, its webhook with it")
        })
        .unwrap_or_else(|| panic!("{error}"));
    assert_eq!(since, deleting);
    assert_eq!(
        check["hint"],
        format!(
            "wait until it is gone (kubectl wait --for=delete namespace/{NS} --timeout=5m), then install again: linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -"
        )
    );
}

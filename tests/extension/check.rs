//! `linkerd multus check` against an installed extension (check_harness.rs):
//! clean, it checks `√`; each defect planted alone is named alone, in table
//! and JSON form, with its exit code; `linkerd check`'s call is answered as
//! Linkerd reads it; a failure that mends itself within `--wait` passes.

use crate::common::process::Guarded;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use super::check_harness::{self, DEMO, Installed, NS, WEBHOOK, installed};
use crate::common::bin;
use crate::common::https::Ca;
use crate::common::kube_apiserver::ControlPlane;
use crate::common::process::Guard;

/// Runs `check` against the installed extension's API server.
pub(super) fn check(installed: &Installed, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("check")
        .arg("--kubeconfig")
        .arg(&installed.kubeconfig)
        .args(args)
        .guarded_output()
        .expect("running linkerd-multus check")
}

/// A check as `linkerd check` reads it from the JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Seen {
    pub category: String,
    pub description: String,
    pub result: String,
    pub error: String,
    pub hint: String,
}

/// The JSON as `linkerd check` reads an extension's: `success` and every check.
pub(super) fn read_json(stdout: &[u8]) -> (bool, Vec<Seen>) {
    let json: Value = serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)));
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut seen = Vec::new();
    for category in json["categories"].as_array().expect("categories") {
        for check in category["checks"].as_array().expect("checks") {
            seen.push(Seen {
                category: text(&category["categoryName"]),
                description: text(&check["description"]),
                result: text(&check["result"]),
                error: text(&check["error"]),
                hint: text(&check["hint"]),
            });
        }
    }
    (json["success"].as_bool().expect("success"), seen)
}

/// Runs `check` with `args` in JSON and in table form: the exit code (the
/// same for both), the checks that did not pass, and the table.
pub(super) fn failures(installed: &Installed, args: &[&str]) -> (i32, Vec<Seen>, String) {
    let json = check(installed, &[args, &["-o", "json"]].concat());
    let (success, seen) = read_json(&json.stdout);
    let code = json.status.code().unwrap();
    assert_eq!(success, code == 0, "{seen:#?}");
    let table = check(installed, args);
    assert_eq!(table.status.code().unwrap(), code);
    let table = String::from_utf8(table.stdout).unwrap();
    let failing: Vec<Seen> = seen.into_iter().filter(|s| s.result != "success").collect();
    let marked = table
        .lines()
        .filter(|l| l.starts_with('×') || l.starts_with('‼'))
        .count();
    assert_eq!(marked, failing.len(), "{table}");
    (code, failing, table)
}

/// Asserts exactly one check did not pass: `result` in `category`, its
/// description holding `description`, its error naming `object`.
fn named_alone(installed: &Installed, args: &[&str], want: (&str, &str, &str, &str), code: i32) {
    let (category, description, result, object) = want;
    let (got_code, failing, table) = failures(installed, args);
    assert_eq!(failing.len(), 1, "{table}");
    let one = &failing[0];
    assert_eq!(
        (one.category.as_str(), one.result.as_str()),
        (category, result),
        "{table}"
    );
    assert!(one.description.contains(description), "{table}");
    assert!(one.error.contains(object), "{table}");
    assert!(!one.hint.is_empty(), "{table}");
    let mark = if result == "error" { "×" } else { "‼" };
    assert!(
        table.contains(&format!("{mark} {}\n    ", one.description)),
        "{table}"
    );
    assert!(table.contains(object), "{table}");
    assert_eq!(got_code, code, "{table}");
}

#[test]
fn a_clean_install_checks_and_each_defect_is_named_alone() {
    let mut installed = installed();
    for args in [&[][..], &["--proxy"], &["--pre"]] {
        let (code, failing, table) = failures(&installed, args);
        assert!(failing.is_empty() && code == 0, "{args:?}\n{table}");
        assert!(table.ends_with("Status check results are √\n"));
    }
    let (_, seen) = read_json(&check(&installed, &["-o", "json"]).stdout);
    let categories: std::collections::BTreeSet<&str> =
        seen.iter().map(|s| s.category.as_str()).collect();
    assert_eq!(
        categories,
        [
            "linkerd-multus",
            "linkerd-multus-cni",
            "linkerd-multus-nads"
        ]
        .into()
    );
    assert!(seen.iter().any(|s| {
        s.description
            .contains("attaches linkerd-cni to a pod through the API server")
    }));

    nad_deleted(&installed);
    nad_edited(&installed);
    nad_taken_by_a_network(&installed);
    certificate_near_expiry(&installed);
    webhook_port_open(&installed);
    service_pointing_nowhere(&mut installed);
    let (code, failing, table) = failures(&installed, &[]);
    assert!(failing.is_empty() && code == 0, "{table}");
}

/// The webhook's NetworkPolicy admitting every address to port 8443, as the package's
/// defaults do: a warning, put back when the port admits the API server alone.
fn webhook_port_open(installed: &Installed) {
    let plane = installed.plane;
    let set = |cidr: &str| {
        let patch = format!(
            r#"[{{"op": "replace", "path": "/spec/ingress/0/from", "value": [{{"ipBlock": {{"cidr": "{cidr}"}}}}]}}]"#
        );
        plane.kubectl(&[
            "patch",
            "networkpolicy",
            "linkerd-multus-webhook",
            "-n",
            "linkerd-multus",
            "--type=json",
            "-p",
            &patch,
        ]);
    };
    set("0.0.0.0/0");
    let want = (
        "linkerd-multus",
        "linkerd-multus-webhook admits only the API server to port 8443",
        "warning",
        "NetworkPolicy linkerd-multus/linkerd-multus-webhook: it admits 0.0.0.0/0 to port 8443, and the webhook asks no client certificate",
    );
    named_alone(installed, &[], want, 0);
    set("127.0.0.1/32");
}

/// A NAD deleted.
fn nad_deleted(installed: &Installed) {
    let plane = installed.plane;
    plane.kubectl(&[
        "delete",
        "network-attachment-definitions",
        "linkerd-cni",
        "-n",
        DEMO,
    ]);
    let want = (
        "linkerd-multus-nads",
        "needs the linkerd-cni NAD has it",
        "error",
        "demo/linkerd-cni",
    );
    named_alone(installed, &[], want, 1);
    check_harness::make_nad(plane, DEMO);
}

/// A NAD edited.
fn nad_edited(installed: &Installed) {
    let plane = installed.plane;
    plane.kubectl(&[
        "patch", "network-attachment-definitions", "linkerd-cni", "-n", DEMO, "--type=merge",
        "-p", r#"{"spec":{"config":"{\"cniVersion\":\"0.3.0\",\"name\":\"linkerd-cni\",\"type\":\"linkerd-cni\"}"}}"#,
    ]);
    let want = (
        "linkerd-multus-nads",
        "holds the ConfigMap's config",
        "error",
        "demo/linkerd-cni",
    );
    named_alone(installed, &[], want, 1);
    check_harness::make_nad(plane, DEMO);
}

/// The NAD replaced by a user's macvlan network of the same name: named in
/// the NADs' category, and the webhook, which will not attach a pod to it,
/// fails the probe.
fn nad_taken_by_a_network(installed: &Installed) {
    let plane = installed.plane;
    let delete = || {
        plane.kubectl(&[
            "delete",
            "network-attachment-definitions",
            "linkerd-cni",
            "-n",
            DEMO,
        ])
    };
    delete();
    plane.apply(&format!(
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {DEMO}\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\", \"master\": \"eth1\"}}'\n"
    ));
    // Until the webhook's NAD watch has the new NAD, its probe still passes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, seen) = read_json(&check(installed, &["--wait=0s", "-o", "json"]).stdout);
        let failing = seen.iter().filter(|s| s.result != "success").count();
        if failing > 1 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (code, failing, table) = failures(installed, &["--wait=0s"]);
    // Put back first, so a failed assertion leaves the fixture as it was.
    delete();
    check_harness::make_nad(plane, DEMO);
    assert_eq!(code, 1, "{table}");
    let seen: Vec<(&str, &str, &str)> = failing
        .iter()
        .map(|s| {
            (
                s.category.as_str(),
                s.description.as_str(),
                s.result.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "linkerd-multus",
                "the webhook attaches linkerd-cni to a pod through the API server",
                "error"
            ),
            (
                "linkerd-multus-nads",
                "no namespace's linkerd-cni NAD is another network",
                "error"
            ),
        ],
        "{table}"
    );
    assert_eq!(
        failing[1].error,
        "NetworkAttachmentDefinitions of someone else's, not Linkerd-CNI: demo/linkerd-cni runs macvlan; the meshed pods of these namespaces join that network instead of Linkerd-CNI"
    );
}

/// A certificate near expiry (10 days left), as a renewal with a short-lived
/// certificate leaves it: a new CA, in the caBundle beside the one of the
/// certificate the webhook still serves until it reloads.
fn certificate_near_expiry(installed: &Installed) {
    let plane = installed.plane;
    let ca = Ca::new("a short-lived renewal's CA");
    let mut params = rcgen::CertificateParams::new(vec![format!("{WEBHOOK}.{NS}.svc")]).unwrap();
    params.not_after =
        (std::time::SystemTime::now() + std::time::Duration::from_secs(10 * 86_400)).into();
    let bundle = format!("{}{}", ca.pem, installed.ca_pem);
    check_harness::set_certificate(plane, &ca.sign(params), &ca.pem, &bundle);
    let want = (
        "linkerd-multus",
        "valid for at least 60 days",
        "warning",
        "expires in 9 days",
    );
    named_alone(installed, &[], want, 0);
    check_harness::set_certificate(plane, &installed.leaf, &installed.ca_pem, &installed.ca_pem);
}

/// The Service pointing nowhere.
fn service_pointing_nowhere(installed: &mut Installed) {
    let plane = installed.plane;
    // Its selector matches no pod, so the endpoints controller would empty
    // its Endpoints (stand-in: done here).
    let selector =
        |name: &str| json!({"spec": {"selector": {"app.kubernetes.io/name": name}}}).to_string();
    plane.kubectl(&[
        "patch",
        "service",
        WEBHOOK,
        "-n",
        NS,
        "--type=merge",
        "-p",
        &selector("nowhere"),
    ]);
    check_harness::set_endpoints(plane, None);
    installed.restart_webhook();
    let want = (
        "linkerd-multus",
        "through the API server",
        "error",
        "no endpoints available",
    );
    named_alone(installed, &["--wait=0s"], want, 1);
    plane.kubectl(&[
        "patch",
        "service",
        WEBHOOK,
        "-n",
        NS,
        "--type=merge",
        "-p",
        &selector(WEBHOOK),
    ]);
    check_harness::set_endpoints(plane, Some((&installed.ip, installed.port)));
}

/// A meshed pod (a `linkerd-proxy` container) in `namespace`, created through
/// the webhook; `validator` adds Linkerd's network validator.
pub(super) fn meshed_pod(
    installed: &Installed,
    namespace: &str,
    name: &str,
    validator: bool,
) -> Value {
    let container = |name: &str| json!({"name": name, "image": "registry.k8s.io/pause:3.10"});
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": {"linkerd.io/inject": "enabled"}},
        "spec": {"containers": [container("app"), container("linkerd-proxy")]},
    });
    if validator {
        pod["spec"]["initContainers"] = json!([container("linkerd-network-validator")]);
    }
    let out = installed.kubectl_ok(&["create", "-o", "json", "-f", "-"], &pod.to_string());
    serde_json::from_str(&out).unwrap()
}

#[test]
fn the_data_plane_checks_name_the_pods() {
    let installed = installed();
    let plane = installed.plane;
    let attached = meshed_pod(&installed, DEMO, "web", true);
    let networks = &attached["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"];
    assert_eq!(networks, "linkerd-cni", "the webhook attaches it");
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert!(failing.is_empty() && code == 0, "{table}");

    // Its validator ended with exit code 95, as the kubelet would report it.
    let status = json!({"status": {"initContainerStatuses": [{
        "name": "linkerd-network-validator", "image": "registry.k8s.io/pause:3.10", "imageID": "",
        "ready": false, "restartCount": 1,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 95, "reason": "Error"}},
    }]}});
    plane.kubectl(&[
        "patch",
        "pod",
        "web",
        "-n",
        DEMO,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let want = (
        "linkerd-multus-data-plane",
        "exited with code 95",
        "error",
        "demo/web",
    );
    named_alone(&installed, &["--proxy"], want, 1);
    named_alone(&installed, &["--proxy", "-n", DEMO], want, 1);
    let (code, failing, _) = failures(&installed, &["--proxy", "-n", "linkerd"]);
    assert!(failing.is_empty() && code == 0);
    plane.kubectl(&["delete", "pod", "web", "-n", DEMO]);

    // A meshed pod created before its namespace was enabled: it runs without
    // linkerd-cni, though the rules now attach it.
    let late = plane.namespace("late", &[]);
    let pod = meshed_pod(&installed, &late, "early", false);
    assert!(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].is_null());
    plane.kubectl(&["annotate", "namespace", &late, "linkerd.io/multus=enabled"]);
    check_harness::make_nad(plane, &late);
    let object = format!("{late}/early");
    let want = (
        "linkerd-multus-data-plane",
        "select the linkerd-cni NAD",
        "error",
        object.as_str(),
    );
    named_alone(&installed, &["--proxy"], want, 1);
    let (code, failing, table) = failures(&installed, &[]);
    assert!(failing.is_empty() && code == 0, "{table}");
    plane.kubectl(&["delete", "pod", "early", "-n", &late]);
}

#[test]
fn linkerd_check_reads_the_result_as_it_calls_the_binary() {
    let installed = installed();
    // What `linkerd check` runs for an extension whose Namespace is labelled
    // linkerd.io/extension=multus (getExtensionCheckFlags), with a flag of a later Linkerd.
    let out = Command::new(bin())
        .args([
            "check",
            "--as-group=[]",
            "--context=test",
            "--linkerd-namespace=linkerd",
            "--verbose=false",
            "--proxy=false",
            "--wait=5m0s",
            "--output=json",
            "--some-future-flag=x",
        ])
        .env("KUBECONFIG", &installed.kubeconfig)
        .guarded_output()
        .unwrap();
    let (success, seen) = read_json(&out.stdout);
    assert!(success, "{seen:#?}");
    assert_eq!(out.status.code(), Some(0));
    assert!(seen.len() >= 10, "{seen:#?}");
    for s in &seen {
        assert!(s.category.starts_with("linkerd-multus") && !s.description.is_empty());
        assert_eq!(
            (s.result.as_str(), s.error.as_str(), s.hint.as_str()),
            ("success", "", "")
        );
    }
}

#[test]
fn a_failure_that_mends_itself_within_the_wait_passes() {
    let installed = installed();
    check_harness::deployment_ready(installed.plane, false);
    let mut child = Guard::spawn(
        Command::new(bin())
            .arg("check")
            .arg("--kubeconfig")
            .arg(&installed.kubeconfig)
            .args(["--wait=2m", "--output=json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    // Once a pass has found the Deployment not ready, and check has said on
    // stderr what it waits for, the Deployment becomes ready.
    let stderr = BufReader::new(child.take_stderr().unwrap());
    let mut lines = stderr.lines();
    let waiting = lines.by_ref().map_while(Result::ok).next();
    assert!(
        waiting
            .as_deref()
            .is_some_and(|l| l.starts_with("waiting up to ")
                && l.ends_with("s (--wait) for: linkerd-multus-webhook Deployment is ready")),
        "check never said it waits: {waiting:?}"
    );
    check_harness::deployment_ready(installed.plane, true);
    std::thread::spawn(move || lines.for_each(drop));
    let out = child.wait_with_output().unwrap();
    let (success, seen) = read_json(&out.stdout);
    assert!(success, "{seen:#?}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn pre_checks_the_rights_install_needs() {
    let installed = installed();
    let (code, failing, table) = failures(&installed, &["--pre"]);
    assert!(failing.is_empty() && code == 0, "{table}");
    let (code, failing, table) = failures(&installed, &["--pre", "--as=nobody", "--wait=0s"]);
    assert_eq!(code, 1);
    let rights = failing
        .iter()
        .find(|s| s.description == "can create the extension's objects")
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        rights.error.starts_with(
            "you may not: create,get,patch namespaces/linkerd-multus, create,get,patch serviceaccounts/linkerd-multus-webhook in linkerd-multus, create,get,patch,escalate,bind clusterroles.rbac.authorization.k8s.io/linkerd-multus-webhook, "
        ),
        "{table}"
    );
}

/// The one check of `--pre` named `description`, as `user` runs it with `args`.
fn pre_check(installed: &Installed, user: &str, args: &[&str], description: &str) -> Seen {
    let as_user = format!("--as={user}");
    let out = check(
        installed,
        &[&["--pre", "--wait=0s", "-o", "json", &as_user][..], args].concat(),
    );
    let (_, seen) = read_json(&out.stdout);
    seen.into_iter()
        .find(|s| s.description == description)
        .unwrap_or_else(|| panic!("no check {description:?} for {args:?}"))
}

/// An installer whose rights cover install's defaults and nothing more (no Roles, no
/// ConfigMaps but reading them, no cert-manager objects): `--pre` asks for the objects the
/// options give, so each option adds exactly what it makes, named.
#[test]
fn pre_asks_for_the_rights_of_exactly_what_install_prints() {
    let installed = installed();
    let plane = installed.plane;
    let user = plane.unique_name("installer");
    let rule = |groups: &str, resources: &str, verbs: &str| {
        format!("- apiGroups: [{groups}]\n  resources: [{resources}]\n  verbs: [{verbs}]\n")
    };
    let rules = [
        rule(
            "\"\"",
            "namespaces, serviceaccounts, services, secrets",
            "\"*\"",
        ),
        rule("\"\"", "configmaps", "get, list, watch"),
        rule("apps", "deployments", "\"*\""),
        rule("policy", "poddisruptionbudgets", "\"*\""),
        rule("networking.k8s.io", "networkpolicies", "\"*\""),
        rule(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "\"*\"",
        ),
        rule(
            "rbac.authorization.k8s.io",
            "clusterroles, clusterrolebindings",
            "\"*\"",
        ),
    ]
    .concat();
    plane.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {user}\nrules:\n{rules}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {user}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {user}\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: {user}\n"
    ));
    let description = "can create the extension's objects";
    // RBAC reaches the authorizer through its own watch.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pre_check(&installed, &user, &[], description).result != "success" {
        assert!(
            std::time::Instant::now() < deadline,
            "the installer's rights never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let rights = pre_check(&installed, &user, &["--network-resources"], description);
    assert_eq!(
        rights.error,
        "you may not: create,patch configmaps/linkerd-multus-network-resources in linkerd-multus"
    );
    let rights = pre_check(&installed, &user, &["--manage-nads"], description);
    let role = |name: &str, ns: &str| {
        format!(
            "create,get,patch,escalate,bind roles.rbac.authorization.k8s.io/{name} in {ns}, create,get,patch rolebindings.rbac.authorization.k8s.io/{name} in {ns}"
        )
    };
    assert_eq!(
        rights.error,
        format!(
            "you may not: {}, {}, {}",
            role("linkerd-multus-nad-controller", "linkerd-cni"),
            role("linkerd-multus-nad-controller-events", "default"),
            role("linkerd-multus-nad-controller-lease", "linkerd-multus"),
        )
    );
    let rights = pre_check(
        &installed,
        &user,
        &["--manage-nads", "--cni-namespace=cni", "-n", "mesh"],
        description,
    );
    assert!(
        rights.error.starts_with(
            "you may not: create,get,patch,escalate,bind roles.rbac.authorization.k8s.io/linkerd-multus-nad-controller in cni, "
        ) && rights.error.ends_with(" in mesh"),
        "{}",
        rights.error
    );
    let rights = pre_check(&installed, &user, &["--certs=cert-manager"], description);
    assert_eq!(
        rights.error,
        "you may not: create,get,patch issuers.cert-manager.io/linkerd-multus-webhook-selfsigned in linkerd-multus, create,get,patch certificates.cert-manager.io/linkerd-multus-webhook-ca in linkerd-multus, create,get,patch issuers.cert-manager.io/linkerd-multus-webhook-ca in linkerd-multus, create,get,patch certificates.cert-manager.io/linkerd-multus-webhook in linkerd-multus"
    );
    plane.kubectl(&["delete", "clusterrolebinding", &user]);
    plane.kubectl(&["delete", "clusterrole", &user]);
}

/// `--pre` checks the namespace install would take: one that exists without install's
/// mark is named with install's own refusal; options install refuses are refused.
#[test]
fn pre_checks_the_namespace_install_would_take() {
    let installed = installed();
    let description = "the extension's namespace does not exist or is linkerd-multus's own";
    let (_, failing, table) = failures(&installed, &["--pre", "-n", DEMO, "--wait=0s"]);
    let one = failing
        .iter()
        .find(|s| s.description == description)
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        one.error.starts_with(&format!(
            "namespace \"{DEMO}\" exists and linkerd-multus install did not make it (it lacks the annotation multus.linkerd.io/namespace-owner=linkerd-multus)"
        )),
        "{table}"
    );
    assert_eq!(failing.len(), 1, "{table}");
    let (code, failing, table) = failures(&installed, &["--pre", "-n", "linkerd-new", "--wait=0s"]);
    assert!(
        failing.is_empty() && code == 0,
        "a namespace that does not exist: {table}"
    );
    let (code, failing, table) = failures(&installed, &["--pre", "-n", "kube-system", "--wait=0s"]);
    assert_eq!(code, 1);
    assert_eq!(failing.len(), 1, "{table}");
    assert_eq!(failing[0].description, "install's options are valid");
    assert!(
        failing[0]
            .error
            .starts_with("--namespace (namespace) \"kube-system\" is Kubernetes's own"),
        "{table}"
    );
}

/// A dry-run create of the probe pod through the installed API server: whether it is admitted.
fn probe_admitted(installed: &Installed) -> bool {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "linkerd-multus-check-probe", "namespace": DEMO},
        "spec": {"containers": [{"name": "x", "image": "registry.k8s.io/pause:3.10"}]},
    });
    let mut child = Guard::spawn(
        installed
            .plane
            .kubectl_command()
            .env("KUBECONFIG", &installed.kubeconfig)
            .args(["create", "--dry-run=server", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .unwrap();
    std::io::Write::write_all(&mut child.take_stdin().unwrap(), pod.to_string().as_bytes())
        .unwrap();
    child.wait().unwrap().success()
}

/// Text from the cluster reaches the table with its control characters escaped: here an
/// admission policy's message, which the API server passes on when it denies the probe.
#[test]
fn control_characters_from_the_cluster_are_escaped_in_the_table() {
    let installed = installed();
    let plane = installed.plane;
    let name = plane.unique_name("deny-probe");
    let message = "denied\u{1b}[2J\u{1b}[1;31m by policy\u{7}\u{202e}";
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
            }]},
            "validations": [{
                "expression": "object.metadata.name != 'linkerd-multus-check-probe'",
                "message": message,
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": DEMO}}},
        },
    });
    plane.apply(&policy.to_string());
    plane.apply(&binding.to_string());
    let until = |admitted: bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while probe_admitted(&installed) != admitted {
            assert!(
                std::time::Instant::now() < deadline,
                "the policy never took effect"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    until(false);

    let (code, failing, table) = failures(&installed, &["--wait=0s"]);
    assert_eq!(code, 1, "{table}");
    assert_eq!(failing.len(), 1, "{table}");
    assert!(
        failing[0].error.contains(message),
        "the JSON keeps the text: {failing:?}"
    );
    assert!(
        table.contains("denied\\u{1b}[2J\\u{1b}[1;31m by policy\\u{7}\\u{202e}"),
        "{table}"
    );
    assert!(
        !table
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
        "{table:?}"
    );

    plane.kubectl(&["delete", "validatingadmissionpolicybinding", &name]);
    plane.kubectl(&["delete", "validatingadmissionpolicy", &name]);
    until(true);
}

/// A meshed pod the webhook attached (and stamped with the hash of the NAD
/// config it was created under), then the ConfigMap changed and the NADs
/// followed it: the pod still runs with the old config until it restarts.
#[test]
fn a_pod_created_under_an_older_config_is_named() {
    let installed = installed();
    let plane = installed.plane;
    let pod = meshed_pod(&installed, DEMO, "before", false);
    let hash = &pod["metadata"]["annotations"]["multus.linkerd.io/config-hash"];
    assert!(
        hash.is_string(),
        "the webhook records the config's hash: {pod}"
    );
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert!(failing.is_empty() && code == 0, "{table}");

    set_log_level(plane, "debug");
    let want = (
        "linkerd-multus-data-plane",
        "current linkerd-cni config",
        "warning",
        "demo/before",
    );
    named_alone(&installed, &["--proxy"], want, 0);
    plane.kubectl(&["delete", "pod", "before", "-n", DEMO]);
    set_log_level(plane, "info");
}

/// A meshed pod with a secondary network (a NAD with a static address and a route): inbound
/// TCP on it is refused by the proxy until its skip-subnets covers the network's subnets,
/// and `check --proxy` says so, naming the pod, the subnets and the NAD. Once the skip-subnets
/// linkerd-multus wrote for it no longer match the NAD (its range changed), `check` names the
/// pod with what was written and what is wanted.
#[test]
fn a_secondary_network_no_skip_subnets_covers_is_named() {
    let installed = installed();
    let plane = installed.plane;
    let storage_nad = |address: &str| {
        let config = format!(
            r#"{{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {{"type": "static", "addresses": [{{"address": "{address}"}}], "routes": [{{"dst": "172.20.0.0/16"}}]}}}}"#
        );
        let nad = json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "storage", "namespace": DEMO},
            "spec": {"config": config},
        });
        installed.kubectl_ok(&["apply", "-f", "-"], &nad.to_string());
    };
    storage_nad("10.10.0.5/24");
    let container = |name: &str| json!({"name": name, "image": "registry.k8s.io/pause:3.10"});
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "storage-client", "namespace": DEMO, "annotations": {
            "linkerd.io/inject": "enabled",
            "k8s.v1.cni.cncf.io/networks": "storage",
        }},
        "spec": {"containers": [container("app"), container("linkerd-proxy")]},
    });
    let created: Value = serde_json::from_str(
        &installed.kubectl_ok(&["create", "-o", "json", "-f", "-"], &pod.to_string()),
    )
    .unwrap();
    assert_eq!(
        created["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"],
        "storage,linkerd-cni"
    );
    let want = (
        "linkerd-multus-data-plane",
        "skip the subnets of their secondary networks",
        "warning",
        "demo/storage-client (10.10.0.0/24 of demo/storage, 172.20.0.0/16 of demo/storage)",
    );
    named_alone(&installed, &["--proxy"], want, 0);

    // Skipped on the pod: nothing to say.
    plane.kubectl(&[
        "annotate",
        "pod",
        "storage-client",
        "-n",
        DEMO,
        "config.linkerd.io/skip-subnets=10.10.0.0/24,172.20.0.0/16",
    ]);
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert!(failing.is_empty() && code == 0, "{table}");

    // Written by linkerd-multus (its record, as the rule leaves it with no list to carry
    // over; the webhook leaves both annotations alone on UPDATE), then the NAD's range moves.
    plane.kubectl(&[
        "annotate",
        "pod",
        "storage-client",
        "-n",
        DEMO,
        "multus.linkerd.io/skip-subnets=10.10.0.0/24,172.20.0.0/16",
    ]);
    let (code, failing, table) = failures(&installed, &["--proxy"]);
    assert!(failing.is_empty() && code == 0, "{table}");
    storage_nad("10.11.0.5/24");
    let entry = "demo/storage-client (written for 10.10.0.0/24, which demo/storage no longer gives; without 10.11.0.0/24 of demo/storage)";
    let want = (
        "linkerd-multus-data-plane",
        "skip-subnets written by linkerd-multus match their secondary networks",
        "warning",
        entry,
    );
    named_alone(&installed, &["--proxy"], want, 0);
    let table = String::from_utf8(check(&installed, &["--proxy"]).stdout).unwrap();
    let lines = format!(
        "‼ meshed pods' skip-subnets written by linkerd-multus match their secondary networks\n    \
         their NADs changed since their skip-subnets were written: {entry}\n    \
         hint: render and sync their workloads (or recreate the pods, which the webhook rewrites); \
         Linkerd-CNI reads skip-subnets only when a pod starts\n"
    );
    assert!(table.contains(&lines), "{table}");
    plane.kubectl(&["delete", "pod", "storage-client", "-n", DEMO]);
    plane.kubectl(&[
        "delete",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "storage",
        "-n",
        DEMO,
    ]);
}

/// Sets the Linkerd-CNI ConfigMap's log level, and the NADs of the demo and linkerd namespaces
/// follow it, as the NAD controller would make them: pods created before run an older config.
pub(super) fn set_log_level(plane: &ControlPlane, level: &str) {
    let config = plane.kubectl(&[
        "get",
        "configmap",
        "linkerd-cni-config",
        "-n",
        "linkerd-cni",
        "-o",
        "jsonpath={.data.cni_network_config}",
    ]);
    let config = config
        .replacen(
            r#""log_level": "info""#,
            &format!(r#""log_level": "{level}""#),
            1,
        )
        .replacen(
            r#""log_level": "debug""#,
            &format!(r#""log_level": "{level}""#),
            1,
        );
    let patch = json!([{"op": "replace", "path": "/data/cni_network_config", "value": config}]);
    plane.kubectl(&[
        "patch",
        "configmap",
        "linkerd-cni-config",
        "-n",
        "linkerd-cni",
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
    for ns in [DEMO, "linkerd"] {
        check_harness::make_nad(plane, ns);
    }
}

/// An Event as the NAD controller's restarts write it (`events.k8s.io/v1`), by `controller`.
pub(super) fn restarts_event(
    name: &str,
    regarding: Value,
    reason: &str,
    note: &str,
    controller: &str,
) -> String {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": DEMO},
        "eventTime": "2026-11-28T10:00:00.000000Z",
        "reportingController": controller, "reportingInstance": "linkerd-multus-webhook-1",
        "action": "Restart", "reason": reason, "type": "Warning", "note": note,
        "regarding": regarding,
    })
    .to_string()
}

/// The NAD controller's restarts said, in Events, that a rollout it started stalled and that
/// it leaves a naked pod to the user: `check --proxy` names the stalled rollout while it is
/// incomplete (not one that completed since, not another controller's), and the pod while it
/// runs an older config (not one that is gone), each with the controller's note.
#[test]
fn what_the_nad_controller_said_of_config_restarts_is_named() {
    let installed = installed();
    let plane = installed.plane;
    meshed_pod(&installed, DEMO, "left", false);
    set_log_level(plane, "debug");
    let deployment = |name: &str, updated: i64| {
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": DEMO},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
        });
        installed.kubectl_ok(&["apply", "-f", "-"], &d.to_string());
        // No controller manager here: the rollout status is written as the Deployment
        // controller would.
        let status = json!({"status": {"observedGeneration": 1, "replicas": 2,
            "updatedReplicas": updated, "readyReplicas": 2, "availableReplicas": 2}});
        plane.kubectl(&[
            "patch",
            "deployment",
            name,
            "-n",
            DEMO,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    };
    deployment("slow", 1);
    deployment("done", 2);
    let workload = |name: &str| json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": DEMO, "name": name});
    let pod =
        |name: &str| json!({"apiVersion": "v1", "kind": "Pod", "namespace": DEMO, "name": name});
    let controller = "linkerd-multus-controller";
    for (name, regarding, reason, note, by) in [
        (
            "e-slow",
            workload("slow"),
            "RolloutStalled",
            "did not complete in 10m",
            controller,
        ),
        (
            "e-done",
            workload("done"),
            "RolloutStalled",
            "did not complete in 10m",
            controller,
        ),
        (
            "e-other",
            workload("slow"),
            "RolloutStalled",
            "another's",
            "someone-else",
        ),
        (
            "e-left",
            pod("left"),
            "StaleConfig",
            "has no controller to restart it",
            controller,
        ),
        (
            "e-gone",
            pod("gone"),
            "StaleConfig",
            "has no controller to restart it",
            controller,
        ),
    ] {
        installed.kubectl_ok(
            &["create", "-f", "-"],
            &restarts_event(name, regarding, reason, note, by),
        );
    }

    let (code, failing, table) = failures(&installed, &["--proxy"]);
    let seen: Vec<(&str, &str, &str)> = failing
        .iter()
        .map(|s| (s.description.as_str(), s.result.as_str(), s.error.as_str()))
        .collect();
    assert_eq!(code, 0, "warnings only: {table}");
    assert_eq!(
        seen,
        [
            (
                "meshed pods run with their namespace's current linkerd-cni config",
                "warning",
                "created under an older config than their namespace's NAD holds (multus.linkerd.io/config-hash differs): Pod demo/left"
            ),
            (
                "no config rollout the NAD controller started is stalled",
                "warning",
                "these did not complete by the --restart-deadline, and hold every other restart of their namespace until they do: Deployment demo/slow (since 2026-11-28T10:00:00.000000Z: did not complete in 10m)"
            ),
            (
                "the NAD controller leaves no workload on an older config to you",
                "warning",
                "these run an older Linkerd-CNI config and the NAD controller does not restart them: Pod demo/left (has no controller to restart it)"
            ),
        ],
        "{table}"
    );

    for name in ["e-slow", "e-done", "e-other", "e-left", "e-gone"] {
        plane.kubectl(&["delete", "events.events.k8s.io", name, "-n", DEMO]);
    }
    plane.kubectl(&["delete", "deployment", "slow", "done", "-n", DEMO]);
    plane.kubectl(&["delete", "pod", "left", "-n", DEMO]);
    set_log_level(plane, "info");
}

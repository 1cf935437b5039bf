//! The harness fails what does not run: a broken arg, a wrong mount path or
//! a wrong probe port planted in the shipped Deployment makes a replica
//! crash or never become ready, and the harness says so.

use std::time::Duration;

use super::common;
use common::kubelet::Runtime;
use common::shipped::*;
use serde_json::{Value, json};

/// What is planted (a JSON patch of the stored Deployment), and what the
/// harness's failure must say.
const MUTATIONS: [(&str, &str, &str); 3] = [
    (
        "an arg the binary refuses (an empty value, as --network-resources= was)",
        r#"[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--client-ca="}]"#,
        "a value is required for '--client-ca <FILE>' but none was supplied",
    ),
    (
        "the certificates mounted at another path",
        r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/volumeMounts/0/mountPath", "value": "/etc/linkerd-multus/certs"}]"#,
        "reading /etc/linkerd-multus/tls/tls.crt",
    ),
    (
        "the readiness probe on a port nothing serves",
        r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/readinessProbe/httpGet/port", "value": 9091}]"#,
        "readiness probe failed",
    ),
];

/// How long a planted defect may take to show: the readiness probe's
/// period (5 s) twice over, and start-up.
const SHOWS_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn a_broken_template_fails_the_harness() {
    let cluster = cluster(Runtime::Process);
    let dir = tempfile::tempdir().unwrap();
    install(&cluster, OptionSet::Install(&[]), dir.path());
    let get = |path: &str| {
        cluster
            .plane
            .kubectl(&["get", "deployment", WEBHOOK, "-n", NS, "-o", path])
    };
    let template: Value = serde_json::from_str(&get("jsonpath={.spec.template}")).unwrap();
    let restore =
        json!([{"op": "replace", "path": "/spec/template", "value": template}]).to_string();
    for (what, patch, says) in MUTATIONS {
        cluster.plane.kubectl(&[
            "patch",
            "deployment",
            WEBHOOK,
            "-n",
            NS,
            "--type=json",
            "-p",
            patch,
        ]);
        let deployment = cluster.run_deployment(NS, WEBHOOK);
        let failure = deployment
            .ready_within(2, SHOWS_WITHIN)
            .err()
            .unwrap_or_else(|| panic!("{what}: the harness ran it as if nothing were wrong"));
        assert!(
            failure.contains(says),
            "{what}: the failure does not say {says:?}:\n{failure}"
        );
        eprintln!("planted {what}:\n  {patch}\nthe harness:\n{failure}\n");
        drop(deployment);
        cluster.plane.kubectl(&[
            "patch",
            "deployment",
            WEBHOOK,
            "-n",
            NS,
            "--type=json",
            "-p",
            &restore,
        ]);
    }
    // The template as shipped passes the same harness.
    let deployment = cluster.run_deployment(NS, WEBHOOK);
    deployment.wait_ready(2, READY);
    stops_cleanly(deployment);
}

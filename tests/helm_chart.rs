//! The Helm chart (`charts/linkerd-multus`) under Helm's own code: Helm SDK v4.2.3 through
//! helm-python-sdk (scripts/helm.py; scripts/install-test-tools.sh installs it, pinned, into
//! target/tools; these tests fail, never skip, when it is missing).
//!
//! One source: the chart is written in Helm's idiom (conditionals, loops over the CIDRs,
//! certificates read back with `lookup`), so it is not generated from the kpt packages;
//! instead, for every option set `install`'s tests use (tests/extension/install.rs, which
//! holds `install` to the packages), the chart rendered with the matching values gives the
//! same objects as `install`, field for field, but the certificate bytes.

mod renewal;

use crate::common;
use crate::common::process::Guarded;
use crate::extension::install::{CASES, Objects, by_id, from_install, take_certificates};

use std::process::Command;

use common::helm::{CHART, helm, helm_batch};
use common::kube_apiserver::ControlPlane;
use common::{Yaml, output_text, parse_yaml_stream};
use serde_json::Value;

/// The chart rendered (`helm template`) in `namespace` with `values` (JSON).
fn template(namespace: &str, values: &Value) -> Result<Vec<Yaml>, String> {
    let out = helm(
        &[
            "template",
            CHART,
            "--namespace",
            namespace,
            "--values",
            &values.to_string(),
        ],
        None,
    );
    if !out.status.success() {
        return Err(output_text(&out));
    }
    Ok(parse_yaml_stream(&String::from_utf8(out.stdout).unwrap()).unwrap())
}

/// The namespace `flags` give `install`.
fn namespace_of(flags: &[&str]) -> &'static str {
    match flags.iter().find_map(|f| f.strip_prefix("--namespace=")) {
        Some("mesh-webhook") => "mesh-webhook",
        Some("mesh") => "mesh",
        Some(other) => panic!("a namespace the chart cases do not know: {other}"),
        None => "linkerd-multus",
    }
}

#[test]
fn the_chart_passes_helm_lint_strict_with_every_case_s_values() {
    let day_two = DAY_TWO.iter().map(|(_, _, values)| *values);
    let values: Vec<&str> = std::iter::once("{}")
        .chain(CASES.iter().map(|c| c.values).chain(day_two))
        .collect();
    // Every lint in one Helm SDK process (each its own exit code and output).
    let requests: Vec<Vec<String>> = values
        .iter()
        .map(|values| {
            ["lint", CHART, "--values", values]
                .map(String::from)
                .to_vec()
        })
        .collect();
    for (values, out) in values.iter().zip(helm_batch(&requests)) {
        assert!(
            out.status.success(),
            "helm lint --strict {values}: {}",
            output_text(&out)
        );
    }
}

/// The day-2 settings (`install`'s flags, the chart's values of the same names), which the
/// kpt packages take by hand: the chart and `install` give the same objects for them too.
const DAY_TWO: &[(&str, &[&str], &str)] = &[
    (
        "day two: the webhook's resources, logs, answers, labels and annotations",
        &[
            "--log-level=debug",
            "--on-error=deny",
            "--missing-nad=ignore",
            "--webhook-resources={requests: {cpu: null, memory: 48Mi}, limits: {memory: 256Mi, ephemeral-storage: 1Gi}}",
            "--pod-label=team=mesh",
            "--pod-annotation=example.com/owner=platform team",
            "--service-label=tier=control",
            "--service-annotation=service.beta.openshift.io/serving-cert-secret-name=linkerd-multus-webhook-tls",
            "--webhook-configuration-label=tier=control",
            "--webhook-configuration-annotation=service.beta.openshift.io/inject-cabundle=true",
        ],
        r#"{"logLevel": "debug", "onError": "deny", "missingNAD": "ignore",
            "webhookResources": {"requests": {"cpu": null, "memory": "48Mi"}, "limits": {"memory": "256Mi", "ephemeral-storage": "1Gi"}},
            "podLabels": {"team": "mesh"}, "podAnnotations": {"example.com/owner": "platform team"},
            "serviceLabels": {"tier": "control"},
            "serviceAnnotations": {"service.beta.openshift.io/serving-cert-secret-name": "linkerd-multus-webhook-tls"},
            "webhookConfigurationLabels": {"tier": "control"},
            "webhookConfigurationAnnotations": {"service.beta.openshift.io/inject-cabundle": "true"}}"#,
    ),
    (
        "day two: the NAD controller restarting, its resources and logs",
        &[
            "--manage-nads",
            "--restart-stale-workloads",
            "--missing-nad=deny",
            "--log-level=info,linkerd_multus=debug",
            "--controller-resources={requests: {cpu: 20m}}",
            "--pod-label=team=mesh",
        ],
        r#"{"manageNADs": true, "restartStaleWorkloads": true, "missingNAD": "deny",
            "logLevel": "info,linkerd_multus=debug",
            "controllerResources": {"requests": {"cpu": "20m"}}, "podLabels": {"team": "mesh"}}"#,
    ),
    (
        "day two: the NAD controller restarting, its memory limit given",
        &[
            "--manage-nads",
            "--restart-stale-workloads",
            "--controller-resources={limits: {memory: 512Mi}}",
        ],
        r#"{"manageNADs": true, "restartStaleWorkloads": true,
            "controllerResources": {"limits": {"memory": "512Mi"}}}"#,
    ),
];

#[test]
fn the_chart_and_install_give_the_same_objects_for_the_same_options() {
    let cases = (CASES.iter().map(|c| (c.name, c.flags, c.values))).chain(DAY_TWO.iter().copied());
    for (name, flags, values) in cases {
        let namespace = namespace_of(flags);
        let mut values: Value = serde_json::from_str(values).unwrap();
        // install prints the Namespace; the chart does when asked.
        values["installNamespace"] = Value::Bool(true);
        let docs =
            template(namespace, &values).unwrap_or_else(|e| panic!("{name}: helm template: {e}"));
        let mut got: Objects = by_id(&docs);
        take_certificates(&mut got, &format!("the chart, {name}"));
        let want = from_install(flags);
        let ids = |o: &Objects| o.keys().cloned().collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "{name}: the objects");
        for (id, object) in &want {
            assert_eq!(&got[id], object, "{name}: {id:?}");
        }
    }
}

/// Each day-2 setting shows in the objects it is for (`DAY_TWO`'s values; `install`'s are the
/// same objects, held by the test above).
#[test]
fn day_two_values_reach_their_objects() {
    let (_, _, values) = DAY_TWO[0];
    let docs = template("linkerd-multus", &serde_json::from_str(values).unwrap()).unwrap();
    let json = |kind: &str| {
        let doc = docs
            .iter()
            .find(|d| {
                d.str_at(&["kind"]) == Some(kind)
                    && d.str_at(&["metadata", "name"]) == Some("linkerd-multus-webhook")
            })
            .unwrap_or_else(|| panic!("no {kind} linkerd-multus-webhook"));
        crate::deploy::to_json(doc)
    };
    let deployment = json("Deployment");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["resources"],
        serde_json::json!({"requests": {"memory": "48Mi"}, "limits": {"memory": "256Mi", "ephemeral-storage": "1Gi"}})
    );
    let args: Vec<&str> = (container["args"].as_array().unwrap().iter())
        .filter_map(Value::as_str)
        .collect();
    for want in [
        "--log-level=debug",
        "--on-error=deny",
        "--missing-nad=ignore",
    ] {
        assert!(args.contains(&want), "{want} not in {args:?}");
    }
    assert_eq!(pod["metadata"]["labels"]["team"], "mesh");
    assert_eq!(
        pod["metadata"]["annotations"]["example.com/owner"],
        "platform team"
    );
    let service = json("Service");
    assert_eq!(service["metadata"]["labels"]["tier"], "control");
    assert_eq!(
        service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        "linkerd-multus-webhook-tls"
    );
    let configuration = json("MutatingWebhookConfiguration");
    assert_eq!(configuration["metadata"]["labels"]["tier"], "control");
    assert_eq!(
        configuration["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
        "true"
    );
    // The NAD controller's memory limit with the restarts: raised from the default, kept when
    // given.
    for (case, limit) in [(1, "128Mi"), (2, "512Mi")] {
        let (_, _, values) = DAY_TWO[case];
        let docs = template("linkerd-multus", &serde_json::from_str(values).unwrap()).unwrap();
        let controller = docs
            .iter()
            .find(|d| {
                d.str_at(&["metadata", "name"]) == Some("linkerd-multus-nad-controller")
                    && d.str_at(&["kind"]) == Some("Deployment")
            })
            .unwrap();
        let json = crate::deploy::to_json(controller);
        assert_eq!(
            json["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
            limit
        );
    }
}

/// The generated certificates: the serving certificate for the Service's names, signed by the
/// CA of the caBundle (the webhook's own check, `linkerd multus check`, reads them so), both
/// shaped as `install` makes them: ECDSA P-256 keys, the same subjects and names, a 1-year
/// certificate and a 10-year CA.
#[test]
fn the_chart_makes_a_ca_and_a_serving_certificate_for_the_service() {
    let docs = template("mesh", &serde_json::json!({})).unwrap();
    let secret = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("Secret"))
        .expect("a Secret");
    assert_eq!(secret.str_at(&["type"]), Some("kubernetes.io/tls"));
    let pem = |key: &str| {
        use base64::Engine as _;
        let b64 = secret.str_at(&["data", key]).unwrap();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    for key in ["ca.crt", "tls.crt"] {
        std::fs::write(dir.path().join(key), pem(key)).unwrap();
    }
    assert!(pem("tls.key").contains("PRIVATE KEY"));
    let verify = Command::new("openssl")
        .args(["verify", "-CAfile", "ca.crt", "tls.crt"])
        .current_dir(dir.path())
        .guarded_output()
        .expect("openssl is not installed (Debian: openssl)");
    assert!(verify.status.success(), "{}", output_text(&verify));
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in", "tls.crt"])
        .current_dir(dir.path())
        .guarded_output()
        .unwrap();
    let sans = String::from_utf8_lossy(&text.stdout);
    for name in [
        "DNS:linkerd-multus-webhook,",
        "DNS:linkerd-multus-webhook.mesh,",
        "DNS:linkerd-multus-webhook.mesh.svc,",
        "DNS:linkerd-multus-webhook.mesh.svc.cluster.local",
    ] {
        assert!(sans.contains(name), "{name} not in {sans}");
    }
    let now = time::OffsetDateTime::now_utc();
    let install =
        linkerd_multus::extension::install::certificates::generate("mesh", now, None).unwrap();
    assert_eq!(
        (shape(&pem("tls.crt"), now), shape(&pem("ca.crt"), now)),
        (shape(&install.cert, now), shape(&install.ca_bundle, now)),
        "the chart's certificate and CA, then install's"
    );
    assert_eq!(shape(&pem("tls.crt"), now).3, 365);
    assert_eq!(shape(&pem("ca.crt"), now).3, 3650);
}

/// What a certificate (PEM) is: its subject, DNS names, whether its key is ECDSA P-256, and in
/// how many days from `now` it ends, to the nearest day.
fn shape(pem: &str, now: time::OffsetDateTime) -> (String, Vec<String>, bool, i64) {
    use x509_parser::extensions::GeneralName;
    use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let names = match cert.subject_alternative_name().unwrap() {
        Some(san) => (san.value.general_names.iter())
            .map(|n| match n {
                GeneralName::DNSName(name) => name.to_string(),
                other => format!("{other}"),
            })
            .collect(),
        None => Vec::new(),
    };
    let key = &cert.public_key().algorithm;
    let p256 = key.algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY
        && key.parameters.as_ref().and_then(|p| p.as_oid().ok()) == Some(OID_EC_P256);
    let days = (cert.validity().not_after.timestamp() - now.unix_timestamp() + 43_200) / 86_400;
    (cert.subject().to_string(), names, p256, days)
}

/// `install --certs openshift-service-ca` and the chart's `certs: openshift-service-ca` give
/// the same objects: neither has a Secret or a caBundle, both ask the operator for them.
#[test]
fn the_chart_and_install_ask_openshift_s_service_ca_alike() {
    let flags = ["--certs=openshift-service-ca", "--platform=openshift"];
    let values = serde_json::json!({"certs": "openshift-service-ca", "platform": "openshift"});
    let got = by_id(&template("linkerd-multus", &values).unwrap());
    let want = from_install(&flags);
    let ids = |o: &Objects| o.keys().cloned().collect::<Vec<_>>();
    assert_eq!(ids(&got), ids(&want));
    for (id, object) in &want {
        assert_eq!(&got[id], object, "{id:?}");
    }
    let service = &want[&(
        "Service".to_string(),
        "linkerd-multus".to_string(),
        "linkerd-multus-webhook".to_string(),
    )];
    assert_eq!(
        service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        "linkerd-multus-webhook-tls"
    );
}

/// With `certs: openshift-service-ca`, OpenShift's service CA operator makes the Secret and
/// writes the caBundle: the chart renders neither, and asks for both with the annotations the
/// kpt packages' README gives (deploy/README.md).
#[test]
fn with_openshift_s_service_ca_the_operator_is_asked_for_the_secret_and_the_ca_bundle() {
    let values = serde_json::json!({"certs": "openshift-service-ca", "platform": "openshift"});
    let docs = template("linkerd-multus", &values).unwrap();
    assert!(docs.iter().all(|d| d.str_at(&["kind"]) != Some("Secret")));
    let of = |kind: &str| {
        crate::deploy::to_json(
            docs.iter()
                .find(|d| {
                    d.str_at(&["kind"]) == Some(kind)
                        && d.str_at(&["metadata", "name"]) == Some("linkerd-multus-webhook")
                })
                .unwrap(),
        )
    };
    assert_eq!(
        of("Service")["metadata"]["annotations"],
        serde_json::json!({"service.beta.openshift.io/serving-cert-secret-name": "linkerd-multus-webhook-tls"})
    );
    let mwc = of("MutatingWebhookConfiguration");
    assert_eq!(
        mwc["metadata"]["annotations"],
        serde_json::json!({"service.beta.openshift.io/inject-cabundle": "true"})
    );
    for webhook in mwc["webhooks"].as_array().unwrap() {
        assert!(
            webhook["clientConfig"].get("caBundle").is_none(),
            "{webhook}"
        );
    }
    let deployment = of("Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "linkerd-multus-webhook-tls"
    );
    // Without it, the Service asks for nothing.
    let docs = template("linkerd-multus", &serde_json::json!({})).unwrap();
    for service in docs
        .iter()
        .filter(|d| d.str_at(&["kind"]) == Some("Service"))
    {
        assert!(
            crate::deploy::to_json(service)["metadata"]
                .get("annotations")
                .is_none(),
            "{:?}",
            service.id()
        );
    }
}

/// What the chart has beyond `install`'s options (Linkerd's extension charts' values) reaches
/// the objects it is for.
#[test]
fn the_chart_s_own_values_reach_their_objects() {
    let values = serde_json::json!({
        "installNamespace": true,
        "commonLabels": {"team": "mesh"},
        "podLabels": {"tier": "control"},
        "podAnnotations": {"example.com/owner": "mesh"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists", "effect": "NoSchedule"}],
        "imagePullSecrets": [{"name": "mirror-pull"}],
        "image": {"registry": "mirror.example/l5d", "name": "multus", "tag": "v9", "digest": format!("sha256:{}", "ab".repeat(32)), "pullPolicy": "Always"},
        "priorityClassName": "",
    });
    let docs = template("linkerd-multus", &values).unwrap();
    for doc in &docs {
        assert_eq!(
            doc.str_at(&["metadata", "labels", "team"]),
            Some("mesh"),
            "commonLabels on {:?}",
            doc.id()
        );
    }
    let deployment = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("Deployment"))
        .unwrap();
    let json = crate::deploy::to_json(deployment);
    let pod = &json["spec"]["template"];
    assert_eq!(pod["metadata"]["labels"]["tier"], "control");
    assert_eq!(pod["metadata"]["annotations"]["example.com/owner"], "mesh");
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(
        pod["spec"]["tolerations"][0]["key"],
        "node-role.kubernetes.io/infra"
    );
    assert_eq!(pod["spec"]["imagePullSecrets"][0]["name"], "mirror-pull");
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        format!("mirror.example/l5d/multus:v9@sha256:{}", "ab".repeat(32))
    );
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert!(pod["spec"].get("priorityClassName").is_none());

    // The image: the chart's appVersion by default, the digest alone when only it is given.
    let image = |image: Value| {
        let docs = template("linkerd-multus", &serde_json::json!({ "image": image })).unwrap();
        let deployment = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("Deployment"))
            .unwrap()
            .clone();
        crate::deploy::to_json(&deployment)["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        image(serde_json::json!({})),
        "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0"
    );
    assert_eq!(
        image(serde_json::json!({"digest": format!("sha256:{}", "cd".repeat(32))})),
        format!(
            "ghcr.io/linkerd-multus/linkerd-multus@sha256:{}",
            "cd".repeat(32)
        )
    );
}

/// With cert-manager, or a Secret of the user's, the chart renders no caBundle at all (Helm 4
/// applies server-side: a field cainjector owns would make every upgrade conflict), and the
/// annotation that asks cainjector for it.
#[test]
fn with_cert_manager_or_an_external_secret_no_ca_bundle_is_rendered() {
    for (values, annotation) in [
        (
            serde_json::json!({"certs": "cert-manager"}),
            (
                "cert-manager.io/inject-ca-from",
                "ns/linkerd-multus-webhook",
            ),
        ),
        (
            serde_json::json!({"webhook": {"externalSecret": true, "injectCaFrom": "ns/my-cert"}}),
            ("cert-manager.io/inject-ca-from", "ns/my-cert"),
        ),
        (
            serde_json::json!({"webhook": {"externalSecret": true, "injectCaFromSecret": "ns/my-ca"}}),
            ("cert-manager.io/inject-ca-from-secret", "ns/my-ca"),
        ),
    ] {
        let docs = template("ns", &values).unwrap();
        assert!(
            docs.iter().all(|d| d.str_at(&["kind"]) != Some("Secret")),
            "{values}: a Secret"
        );
        let mwc = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("MutatingWebhookConfiguration"))
            .unwrap();
        let json = crate::deploy::to_json(mwc);
        assert_eq!(
            json["metadata"]["annotations"][annotation.0], annotation.1,
            "{values}"
        );
        assert!(
            json["webhooks"][0]["clientConfig"]
                .get("caBundle")
                .is_none(),
            "{values}: a caBundle"
        );
    }
}

/// Each kind of mistake in the values is refused by values.schema.json before anything is
/// rendered, naming the value.
#[test]
fn a_bad_value_is_refused_by_the_schema_naming_it() {
    let cases = [
        (
            r#"{"replica": 2}"#,
            "additional properties 'replica' not allowed",
        ),
        (
            r#"{"replicas": 0}"#,
            "at '/replicas': minimum: got 0, want 1",
        ),
        (r#"{"replicas": "2"}"#, "at '/replicas'"),
        (r#"{"failurePolicy": "fail"}"#, "at '/failurePolicy'"),
        (r#"{"platform": "OpenShift"}"#, "at '/platform'"),
        (r#"{"certs": "vault"}"#, "at '/certs'"),
        (r#"{"manageNADs": "yes"}"#, "at '/manageNADs'"),
        (
            r#"{"linkerdNamespace": "Linkerd"}"#,
            "at '/linkerdNamespace'",
        ),
        (
            r#"{"apiServerCIDRs": ["10.0.0.0"]}"#,
            "at '/apiServerCIDRs/0'",
        ),
        (
            r#"{"skipSecondarySubnets": "true"}"#,
            "at '/skipSecondarySubnets'",
        ),
        (
            r#"{"clusterCIDRs": ["10.244.0.0"]}"#,
            "at '/clusterCIDRs/0'",
        ),
        (
            r#"{"protectedCIDRs": ["192.168.0.0/16", "192.168.0.0"]}"#,
            "at '/protectedCIDRs/1'",
        ),
        (
            r#"{"protectedCIDRs": "192.168.0.0/16"}"#,
            "at '/protectedCIDRs'",
        ),
        (
            r#"{"metricsNamespaces": "monitoring"}"#,
            "at '/metricsNamespaces'",
        ),
        (
            r#"{"webhookExcludedNamespaces": ["open*shift"]}"#,
            "at '/webhookExcludedNamespaces/0'",
        ),
        (
            r#"{"image": {"digest": "sha256:12ab"}}"#,
            "at '/image/digest'",
        ),
        (r#"{"image": {"tag": "v0.1.0 "}}"#, "at '/image/tag'"),
        (
            r#"{"image": {"pullPolicy": "always"}}"#,
            "at '/image/pullPolicy'",
        ),
        (
            r#"{"webhook": {"crtPEM": "-----BEGIN CERTIFICATE-----"}}"#,
            "at '/webhook'",
        ),
        (
            r#"{"webhook": {"injectCaFrom": "my-cert"}}"#,
            "at '/webhook/injectCaFrom'",
        ),
        (
            r#"{"commonLabels": {"team": 1}}"#,
            "at '/commonLabels/team'",
        ),
        (
            r#"{"imagePullSecrets": ["mirror-pull"]}"#,
            "at '/imagePullSecrets/0'",
        ),
    ];
    // Every render in one Helm SDK process (each its own exit code and output).
    let requests: Vec<Vec<String>> = cases
        .iter()
        .map(|(values, _)| {
            ["template", CHART, "--values", values]
                .map(String::from)
                .to_vec()
        })
        .collect();
    for ((values, expected), out) in cases.iter().zip(helm_batch(&requests)) {
        let text = output_text(&out);
        assert!(!out.status.success(), "{values} was taken: {text}");
        assert!(
            text.contains("values don't meet the specifications of the schema"),
            "{values}: {text}"
        );
        assert!(
            text.contains(expected),
            "{values}: no {expected:?} in {text}"
        );
    }
}

/// `helm template` with `values` fails, saying `refusal`.
fn assert_refused(values: &str, refusal: &str) {
    let out = helm(&["template", CHART, "--values", values], None);
    let text = output_text(&out);
    assert!(
        !out.status.success() && text.contains(refusal),
        "{values}: {text}"
    );
}

/// restartStaleWorkloads without manageNADs is refused, naming both, as `install` refuses it;
/// so are a value of the wrong type and the restarts' pacing without them or out of range.
#[test]
fn restarting_stale_workloads_needs_the_nad_controller() {
    let pacing_alone = "restartConcurrency and restartDeadline pace the NAD controller's restarts, but restartStaleWorkloads is false";
    for (values, refusal) in [
        (
            r#"{"restartStaleWorkloads": true}"#,
            "restartStaleWorkloads is true but manageNADs is false: the restarts are the NAD controller's",
        ),
        (
            r#"{"restartStaleWorkloads": "yes"}"#,
            "at '/restartStaleWorkloads'",
        ),
        (
            r#"{"manageNADs": true, "restartConcurrency": 3}"#,
            pacing_alone,
        ),
        (
            r#"{"manageNADs": true, "restartDeadline": "1h"}"#,
            pacing_alone,
        ),
        (
            r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartConcurrency": 0}"#,
            "at '/restartConcurrency'",
        ),
        (
            r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartDeadline": "ten minutes"}"#,
            "at '/restartDeadline'",
        ),
    ] {
        assert_refused(values, refusal);
    }
}

/// skipSecondarySubnets enabled without clusterCIDRs is refused with the webhook's reason (it
/// would not start), as `install` refuses it; the cluster's networks alone are fine, and the
/// protected networks are optional, given to the webhook as a list ([] for none).
#[test]
fn skipping_secondary_subnets_needs_the_cluster_networks() {
    assert_refused(
        r#"{"skipSecondarySubnets": "enabled"}"#,
        "skipSecondarySubnets is enabled but clusterCIDRs is empty: without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy, so the webhook refuses to start;",
    );
    assert_refused(
        r#"{"skipSecondarySubnets": "enabled", "protectedCIDRs": ["192.168.0.0/16"]}"#,
        "skipSecondarySubnets is enabled but clusterCIDRs is empty:",
    );
    let args = |values: serde_json::Value| -> Vec<String> {
        let docs = template("linkerd-multus", &values).unwrap();
        let deployment = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("Deployment"))
            .unwrap();
        let container = &deployment
            .at(&["spec", "template", "spec", "containers"])
            .unwrap()
            .seq()[0];
        (container.get("args").unwrap().seq().iter())
            .filter_map(Yaml::as_str)
            .map(str::to_string)
            .collect()
    };
    let cluster = args(serde_json::json!({"clusterCIDRs": ["10.244.0.0/16"]}));
    for want in [
        "--skip-secondary-subnets=disabled",
        "--cluster-cidrs=[10.244.0.0/16]",
        "--protected-cidrs=[]",
    ] {
        assert!(
            cluster.iter().any(|a| a == want),
            "{want} not in {cluster:?}"
        );
    }
    let protected = args(serde_json::json!({
        "skipSecondarySubnets": "enabled",
        "clusterCIDRs": ["10.244.0.0/16"],
        "protectedCIDRs": ["192.168.0.0/16", "fd00:20::/48"],
    }));
    for want in [
        "--skip-secondary-subnets=enabled",
        "--protected-cidrs=[192.168.0.0/16, fd00:20::/48]",
    ] {
        assert!(
            protected.iter().any(|a| a == want),
            "{want} not in {protected:?}"
        );
    }
}

/// `helm install --create-namespace`, `upgrade` with other values, `rollback` and `uninstall`
/// against a real kube-apiserver (one of its own: the release's cluster-scoped objects have
/// fixed names). The serving Secret and the caBundle stay byte for byte through the upgrade
/// and the rollback (read back with `lookup`: no new CA, no restart); the uninstall removes
/// what the release made and no NetworkAttachmentDefinition, the user's or the NAD
/// controller's. No kubelet runs the webhook here (`tests/shipped.rs` does, from the chart):
/// no pod is created while its configuration is registered.
#[test]
fn install_upgrade_rollback_and_uninstall_keep_the_certificates_and_every_nad() {
    let plane = ControlPlane::own();
    plane.install_nad_crd();
    // Linkerd-CNI's namespace (the NAD controller's rights are in it), and an app's NADs.
    let nads = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd-cni\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n---\n\
        apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: macvlan\n  namespace: app\nspec:\n  config: '{\"cniVersion\":\"0.3.1\",\"type\":\"macvlan\"}'\n---\n\
        apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: app\n  labels:\n    app.kubernetes.io/managed-by: linkerd-multus\nspec:\n  config: '{\"cniVersion\":\"0.3.1\",\"type\":\"linkerd-cni\"}'\n";
    plane.apply(nads);
    // The API server's addresses as one on a routable address lists them: a lone API server on
    // a loopback address writes no EndpointSlice for itself (Kubernetes refuses loopback
    // endpoints), so the test writes the one an API server at 192.0.2.10 would.
    plane.apply(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: kubernetes\n  namespace: default\n  labels:\n    kubernetes.io/service-name: kubernetes\naddressType: IPv4\nendpoints:\n- addresses: [192.0.2.10]\n  conditions: {ready: true}\n- addresses: [192.0.2.99]\n  conditions: {ready: false}\nports:\n- {name: https, port: 6443, protocol: TCP}\n",
    );
    let kubeconfig = plane.admin_kubeconfig.as_path();
    let release = |args: &[&str]| -> Value {
        let out = helm(args, Some(kubeconfig));
        assert!(out.status.success(), "helm {args:?}: {}", output_text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let ns = "linkerd-multus";
    let common_args = ["--release", "linkerd-multus", "--namespace", ns];
    let with = |command: &'static str, values: &str| -> Vec<String> {
        let mut args = vec![command.to_string()];
        if command != "rollback" {
            args.push(CHART.to_string());
        }
        args.extend(common_args.iter().map(|s| s.to_string()));
        if !values.is_empty() {
            args.extend(["--values".to_string(), values.to_string()]);
        }
        args
    };
    let run = |args: Vec<String>| release(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let state = || {
        let secret = plane.kubectl(&[
            "get", "secret", "linkerd-multus-webhook-tls", "-n", ns, "-o",
            "jsonpath={.metadata.resourceVersion} {.data.ca\\.crt} {.data.tls\\.crt} {.data.tls\\.key}",
        ]);
        let bundle = plane.kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "linkerd-multus-webhook",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle} {.webhooks[0].failurePolicy}",
        ]);
        let replicas = plane.kubectl(&[
            "get",
            "deployment",
            "linkerd-multus-webhook",
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.replicas}",
        ]);
        (secret, bundle, replicas)
    };

    let mut install = with("install", r#"{"manageNADs": true}"#);
    install.push("--create-namespace".into());
    let installed = run(install);
    assert_eq!(installed["revision"], 1, "{installed}");
    let (secret, bundle, replicas) = state();
    assert_eq!(secret.split(' ').count(), 4, "the Secret: {secret}");
    let ca = secret.split(' ').nth(1).unwrap().to_string();
    assert_eq!(
        bundle,
        format!("{ca} Fail"),
        "the caBundle is the Secret's CA"
    );
    assert_eq!(replicas, "2");
    // The webhook's port admits the API server's ready address alone, read with lookup, as
    // the release's notes say.
    let from = plane.kubectl(&[
        "get",
        "networkpolicy",
        "linkerd-multus-webhook",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.ingress[0].from}",
    ]);
    assert_eq!(from, r#"[{"ipBlock":{"cidr":"192.0.2.10/32"}}]"#);
    let notes = installed["notes"].as_str().unwrap_or_default();
    assert!(
        notes.contains("only from the API server's addresses, as the\nEndpointSlice default/kubernetes lists them (192.0.2.10/32)"),
        "{installed}"
    );
    let labels = plane.kubectl(&["get", "namespace", ns, "-o", "jsonpath={.metadata.labels}"]);
    assert!(
        labels.contains(r#""linkerd.io/extension":"multus""#),
        "the namespace Helm made carries the extension's label: {labels}"
    );

    // An upgrade with other values: the certificates, read back with lookup, stay.
    let upgraded = run(with(
        "upgrade",
        r#"{"manageNADs": true, "replicas": 3, "failurePolicy": "Ignore"}"#,
    ));
    assert_eq!(upgraded["revision"], 2, "{upgraded}");
    let (secret2, bundle2, replicas2) = state();
    assert_eq!(
        secret2, secret,
        "the Secret changed on upgrade (resourceVersion, then data)"
    );
    assert_eq!(bundle2, format!("{ca} Ignore"));
    assert_eq!(replicas2, "3");

    // Back to the first revision: its values, the same certificates.
    let mut rollback = with("rollback", "");
    rollback.extend(["--revision".into(), "1".into()]);
    let rolled = run(rollback);
    assert_eq!(rolled["revision"], 3, "{rolled}");
    let (secret3, bundle3, replicas3) = state();
    assert_eq!(
        secret3.split(' ').skip(1).collect::<Vec<_>>(),
        secret.split(' ').skip(1).collect::<Vec<_>>()
    );
    assert_eq!(bundle3, format!("{ca} Fail"));
    assert_eq!(replicas3, "2");

    // Uninstall: every object of the release gone (the Namespace being deleted: a lone API
    // server has no namespace controller to finish it), the NADs all there.
    let manifest = rolled["manifest"].as_str().unwrap().to_string();
    run(with("uninstall", ""));
    for doc in parse_yaml_stream(&manifest).unwrap() {
        let (kind, namespace, name) = doc.id();
        let mut args = vec![
            "get",
            kind.as_str(),
            name.as_str(),
            "--ignore-not-found",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}|{.metadata.name}",
        ];
        if !namespace.is_empty() {
            args.extend(["-n", namespace.as_str()]);
        }
        let left = plane.kubectl(&args);
        assert!(
            left.is_empty() || (kind == "Namespace" && !left.starts_with('|')),
            "{kind} {namespace}/{name} is left after helm uninstall: {left}"
        );
    }
    let left = plane.kubectl(&[
        "get",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "-n",
        "app",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    assert_eq!(left, "linkerd-cni macvlan", "helm uninstall took a NAD");
}

/// The chart's README documents every value, as values.yaml's comments say it
/// (scripts/chart-readme.py).
#[test]
fn the_chart_readme_is_what_values_yaml_gives() {
    let out = std::process::Command::new("python3")
        .arg(common::repo_path("scripts/chart-readme.py"))
        .arg("--check")
        .guarded_output()
        .expect("python3 is not installed");
    assert!(out.status.success(), "{}", output_text(&out));
}

/// What the release pushes beside the image (scripts/helm.py package, as
/// .github/workflows/release.yml runs it): the chart at the release's version, its image pinned
/// by the tag and the pushed digest; it lints and renders as it is.
#[test]
fn the_released_chart_pins_the_image_by_tag_and_digest() {
    let out_dir = tempfile::tempdir().unwrap();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let out_path = out_dir.path().to_string_lossy().to_string();
    let out = helm(
        &[
            "package",
            CHART,
            "--version",
            "0.1.0",
            "--image-digest",
            &digest,
            "--out",
            &out_path,
        ],
        None,
    );
    assert!(
        out.status.success(),
        "helm.py package: {}",
        output_text(&out)
    );
    let archive = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(
        archive,
        out_dir
            .path()
            .join("linkerd-multus-0.1.0.tgz")
            .to_string_lossy()
    );
    let chart_yaml = Command::new("tar")
        .args(["-xzOf", &archive, "linkerd-multus/Chart.yaml"])
        .guarded_output()
        .unwrap();
    let chart_yaml = String::from_utf8_lossy(&chart_yaml.stdout);
    assert!(chart_yaml.contains("\nversion: 0.1.0\n"), "{chart_yaml}");
    assert!(
        chart_yaml.contains("\nappVersion: v0.1.0\n"),
        "{chart_yaml}"
    );
    let lint = helm(&["lint", &archive], None);
    assert!(
        lint.status.success(),
        "helm lint {archive}: {}",
        output_text(&lint)
    );
    let rendered = helm(&["template", &archive], None);
    assert!(rendered.status.success(), "{}", output_text(&rendered));
    let rendered = String::from_utf8_lossy(&rendered.stdout);
    assert!(
        rendered.contains(&format!(
            "image: ghcr.io/linkerd-multus/linkerd-multus:v0.1.0@{digest}\n"
        )),
        "{rendered}"
    );
    // The repository's chart is untouched.
    let values =
        std::fs::read_to_string(common::repo_path("charts/linkerd-multus/values.yaml")).unwrap();
    assert!(values.contains("  digest: \"\"\n") && values.contains("  tag: \"\"\n"));
    for (version, digest) in [("v0.1.0", digest.as_str()), ("0.1.0", "sha256:12ab")] {
        let out = helm(
            &[
                "package",
                CHART,
                "--version",
                version,
                "--image-digest",
                digest,
                "--out",
                &out_path,
            ],
            None,
        );
        assert!(!out.status.success(), "{version} {digest} was taken");
    }
}

/// The chart README's Argo CD Application: the chart it names is the one the release pushes,
/// its values pass the schema, and two renders give the same objects (Argo CD renders with
/// `helm template`, which cannot read the cluster: no certificate is made at render time).
#[test]
fn the_readme_s_argo_cd_application_renders_the_same_every_time() {
    let readme =
        std::fs::read_to_string(common::repo_path("charts/linkerd-multus/README.md")).unwrap();
    let start = readme
        .find("```yaml\napiVersion: argoproj.io/v1alpha1\nkind: Application\n")
        .expect("charts/linkerd-multus/README.md's Argo CD Application");
    let block = &readme[start + "```yaml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let application = common::parse_yaml(block).unwrap();
    let chart_yaml =
        std::fs::read_to_string(common::repo_path("charts/linkerd-multus/Chart.yaml")).unwrap();
    let version = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .unwrap();
    assert_eq!(
        application.str_at(&["spec", "source", "repoURL"]),
        Some("oci://ghcr.io/linkerd-multus/charts/linkerd-multus")
    );
    assert_eq!(
        application.str_at(&["spec", "source", "targetRevision"]),
        Some(version)
    );
    let values = crate::deploy::to_json(
        application
            .at(&["spec", "source", "helm", "valuesObject"])
            .unwrap(),
    );
    let namespace = application
        .str_at(&["spec", "destination", "namespace"])
        .unwrap();
    let render = || {
        template(namespace, &values)
            .unwrap()
            .iter()
            .map(crate::deploy::to_json)
            .collect::<Vec<_>>()
    };
    assert_eq!(render(), render(), "two renders differ");
}

/// webhook.crtPEM, keyPEM and caBundle are used as given: in the Secret, and the CA as the
/// configuration's caBundle (over a Secret the cluster may hold: the user asked for these).
#[test]
fn given_certificates_are_used_as_given() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (crt, key, ca) = (
        "-----BEGIN CERTIFICATE-----\nserving\n-----END CERTIFICATE-----\n",
        "-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n",
        "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n",
    );
    let values = serde_json::json!({"webhook": {"crtPEM": crt, "keyPEM": key, "caBundle": ca}});
    let docs = template("linkerd-multus", &values).unwrap();
    let secret = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("Secret"))
        .unwrap();
    assert_eq!(secret.str_at(&["data", "tls.crt"]), Some(b64(crt).as_str()));
    assert_eq!(secret.str_at(&["data", "tls.key"]), Some(b64(key).as_str()));
    assert_eq!(secret.str_at(&["data", "ca.crt"]), Some(b64(ca).as_str()));
    let mwc = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("MutatingWebhookConfiguration"))
        .unwrap();
    assert_eq!(
        crate::deploy::to_json(mwc)["webhooks"][0]["clientConfig"]["caBundle"],
        b64(ca)
    );
}

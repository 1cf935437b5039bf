//! One line for both installers: every setting `linkerd multus install` refuses
//! (src/extension/install/options/checks.rs, file.rs, exclusions.rs, the command line's
//! values), the chart refuses too, under Helm's own code (scripts/helm.py, Helm SDK 4.2.3), for
//! the same reason: values.schema.json where JSON schema can say it (the chart then names the
//! value's path, and both name the offending value), else a `fail` of
//! charts/linkerd-multus/templates/_checks.tpl with install's reason word for word.
//!
//! What has no row, because the chart has no such value: `--image` without a tag or digest
//! (the chart's tag defaults to its appVersion), an empty `metricsNamespaces` (the chart's `[]`
//! is the platform's default), an empty `priorityClassName` (the chart's "" is none), and the
//! cluster's state (a namespace not install's own, or being deleted: `helm install` has its
//! own release ownership). Nor the default given explicitly where install refuses a setting
//! given at all (`--cni-namespace=linkerd-cni` without `--manage-nads`, `--restart-deadline=10m`
//! or `--restart-concurrency=1` without the restarts): a chart cannot tell a default value
//! from one given.

use crate::common;

use std::process::Output;

use common::helm::{CHART, helm_batch};
use common::{output_text, run_with_args};
use linkerd_multus::extension::install::options::Settings;

/// How install is given the setting.
enum Install {
    /// `install --ignore-cluster` with these flags.
    Flags(&'static [&'static str]),
    /// A LinkerdMultusInstall's spec (YAML under `spec:`), read by install's own parser.
    File(&'static str),
    /// Install has no such setting: the chart alone refuses it, for the reason given.
    None,
}

/// One refusal of both installers.
struct Row {
    /// The install flag (or file field) its refusal names.
    flag: &'static str,
    /// The chart value (or the release's namespace) the chart's refusal names.
    key: &'static str,
    install: Install,
    /// The release's namespace.
    namespace: &'static str,
    /// The chart's values, as JSON.
    values: &'static str,
    /// What both refusals say, word for word: the reason; by the schema, the value given or
    /// (for a choice) a valid one, as both list them.
    shared: &'static str,
    /// The chart refuses it by values.schema.json rather than by `fail`.
    schema: bool,
}

const NS: &str = "linkerd-multus";

const fn row(
    flag: &'static str,
    key: &'static str,
    install: Install,
    values: &'static str,
    shared: &'static str,
) -> Row {
    Row {
        flag,
        key,
        install,
        namespace: NS,
        values,
        shared,
        schema: false,
    }
}

const fn schema(
    flag: &'static str,
    key: &'static str,
    install: Install,
    values: &'static str,
    shared: &'static str,
) -> Row {
    Row {
        schema: true,
        ..row(flag, key, install, values, shared)
    }
}

const fn in_namespace(namespace: &'static str, row: Row) -> Row {
    Row { namespace, ..row }
}

use Install::{File, Flags};

/// The refusals, in the order of install's checks.
const ROWS: &[Row] = &[
    // The extension's namespace: a namespace name, and not someone else's (every reserved
    // name is a row too, from src/k8s/reserved.rs: `every_reserved_namespace_is_refused`).
    in_namespace(
        "Mesh",
        row(
            "--namespace",
            "the release's namespace",
            Flags(&["--namespace=Mesh"]),
            "{}",
            "\"Mesh\" is not a namespace name: lower-case letters, digits and '-', at most 63",
        ),
    ),
    in_namespace(
        "linkerd",
        row(
            "--namespace",
            "the release's namespace",
            Flags(&["--namespace=linkerd"]),
            r#"{"installNamespace": false}"#,
            "\"linkerd\" is the Linkerd control plane's: ",
        ),
    ),
    in_namespace(
        "kube-ops",
        row(
            "--namespace",
            "the release's namespace",
            Flags(&["--namespace=kube-ops"]),
            "{}",
            "\"kube-ops\" is Kubernetes's own: ",
        ),
    ),
    in_namespace(
        "l5d",
        row(
            "--namespace",
            "the release's namespace",
            Flags(&["--namespace=l5d", "-L", "l5d"]),
            r#"{"linkerdNamespace": "l5d"}"#,
            "\"l5d\" is the Linkerd control plane's: ",
        ),
    ),
    in_namespace(
        "cni",
        row(
            "--namespace",
            "the release's namespace",
            Flags(&["--namespace=cni", "--manage-nads", "--cni-namespace=cni"]),
            r#"{"manageNADs": true, "cniNamespace": "cni"}"#,
            "\"cni\" is Linkerd-CNI's: ",
        ),
    ),
    schema(
        "--linkerd-namespace",
        "linkerdNamespace",
        Flags(&["-L", "Linkerd"]),
        r#"{"linkerdNamespace": "Linkerd"}"#,
        "Linkerd",
    ),
    schema(
        "--cni-namespace",
        "cniNamespace",
        Flags(&["--manage-nads", "--cni-namespace=CNI"]),
        r#"{"manageNADs": true, "cniNamespace": "CNI"}"#,
        "CNI",
    ),
    // The image, in the chart in its parts.
    schema(
        "--image",
        "image",
        Flags(&["--image=mirror.example/linkerd/multus@sha256:12ab"]),
        r#"{"image": {"registry": "mirror.example/linkerd", "name": "multus", "digest": "sha256:12ab"}}"#,
        "sha256:12ab",
    ),
    schema(
        "--image",
        "image",
        Flags(&["--image=Mirror.example/Linkerd/multus:0.1.0"]),
        r#"{"image": {"registry": "Mirror.example/Linkerd", "name": "multus", "tag": "0.1.0"}}"#,
        "Linkerd",
    ),
    schema(
        "spec.image",
        "image",
        File("image: [a]"),
        r#"{"image": ["a"]}"#,
        "image",
    ),
    // The namespaces that scrape the metrics.
    schema(
        "--metrics-namespace",
        "metricsNamespaces",
        Flags(&["--metrics-namespace=Prometheus"]),
        r#"{"metricsNamespaces": ["Prometheus"]}"#,
        "Prometheus",
    ),
    // The namespaces kept away from the webhook.
    schema(
        "--webhook-excluded-namespace",
        "webhookExcludedNamespaces",
        Flags(&["--webhook-excluded-namespace=open*shift"]),
        r#"{"webhookExcludedNamespaces": ["open*shift"]}"#,
        "open*shift",
    ),
    schema(
        "--webhook-excluded-namespace",
        "webhookExcludedNamespaces",
        Flags(&["--webhook-excluded-namespace=*"]),
        r#"{"webhookExcludedNamespaces": ["*"]}"#,
        "*",
    ),
    schema(
        "spec.webhookExcludedNamespaces",
        "webhookExcludedNamespaces",
        File("webhookExcludedNamespaces: openshift-*"),
        r#"{"webhookExcludedNamespaces": "openshift-*"}"#,
        "webhookExcludedNamespaces",
    ),
    row(
        "--webhook-excluded-namespace",
        "webhookExcludedNamespaces",
        Flags(&["--webhook-excluded-namespace=linkerd*"]),
        r#"{"webhookExcludedNamespaces": ["linkerd*"]}"#,
        "\"linkerd*\" keeps the Linkerd control plane's namespace linkerd away from the webhook: its pods would start without linkerd-cni; leave it out, or name the namespaces to keep away one by one",
    ),
    row(
        "--webhook-excluded-namespace",
        "webhookExcludedNamespaces",
        Flags(&["--webhook-excluded-namespace=legacy,l5d", "-L", "l5d"]),
        r#"{"webhookExcludedNamespaces": ["legacy", "l5d"], "linkerdNamespace": "l5d"}"#,
        "\"l5d\" keeps the Linkerd control plane's namespace l5d away from the webhook:",
    ),
    row(
        "--platform",
        "platform",
        Flags(&["--platform=openshift", "-L", "openshift-linkerd"]),
        r#"{"platform": "openshift", "linkerdNamespace": "openshift-linkerd"}"#,
        " openshift) keeps the Linkerd control plane's namespace openshift-linkerd away from the webhook: its pods would start without linkerd-cni;",
    ),
    // The webhook's pods.
    schema(
        "--priority-class-name",
        "priorityClassName",
        Flags(&["--priority-class-name=Webhooks"]),
        r#"{"priorityClassName": "Webhooks"}"#,
        "Webhooks",
    ),
    schema(
        "--replicas",
        "replicas",
        Flags(&["--replicas=0"]),
        r#"{"replicas": 0}"#,
        "0",
    ),
    schema(
        "spec.replicas",
        "replicas",
        File("replicas: two"),
        r#"{"replicas": "two"}"#,
        "replicas",
    ),
    schema(
        "--failure-policy",
        "failurePolicy",
        Flags(&["--failure-policy=fail"]),
        r#"{"failurePolicy": "fail"}"#,
        "fail",
    ),
    schema(
        "--platform",
        "platform",
        Flags(&["--platform=OpenShift"]),
        r#"{"platform": "OpenShift"}"#,
        "openshift",
    ),
    schema(
        "--certs",
        "certs",
        Flags(&["--certs=vault"]),
        r#"{"certs": "vault"}"#,
        "cert-manager",
    ),
    schema(
        "spec.manageNADs",
        "manageNADs",
        File("manageNADs: yes"),
        r#"{"manageNADs": "yes"}"#,
        "manageNADs",
    ),
    schema(
        "spec.replica",
        "replica",
        File("replica: 3"),
        r#"{"replica": 3}"#,
        "replica",
    ),
    // Skipping the secondary networks' subnets.
    schema(
        "--skip-secondary-subnets",
        "skipSecondarySubnets",
        Flags(&["--skip-secondary-subnets=true"]),
        r#"{"skipSecondarySubnets": "true"}"#,
        "disabled",
    ),
    row(
        "--skip-secondary-subnets",
        "skipSecondarySubnets",
        Flags(&["--skip-secondary-subnets=enabled"]),
        r#"{"skipSecondarySubnets": "enabled"}"#,
        "without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy, so the webhook refuses to start",
    ),
    // The NAD controller and its restarts.
    row(
        "--cni-namespace",
        "cniNamespace",
        Flags(&["--cni-namespace=cni"]),
        r#"{"cniNamespace": "cni"}"#,
        "\"cni\" is for the NAD controller: ",
    ),
    row(
        "--restart-stale-workloads",
        "restartStaleWorkloads",
        Flags(&["--restart-stale-workloads"]),
        r#"{"restartStaleWorkloads": true}"#,
        "which restarts the workloads after it updates their namespace's NAD",
    ),
    row(
        "--restart-concurrency",
        "restartConcurrency",
        Flags(&["--manage-nads", "--restart-concurrency=3"]),
        r#"{"manageNADs": true, "restartConcurrency": 3}"#,
        "pace the NAD controller's restarts",
    ),
    row(
        "--restart-deadline",
        "restartDeadline",
        Flags(&["--manage-nads", "--restart-deadline=1h"]),
        r#"{"manageNADs": true, "restartDeadline": "1h"}"#,
        "pace the NAD controller's restarts",
    ),
    schema(
        "--restart-concurrency",
        "restartConcurrency",
        Flags(&[
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-concurrency=0",
        ]),
        r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartConcurrency": 0}"#,
        "0",
    ),
    row(
        "--restart-deadline",
        "restartDeadline",
        Flags(&[
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-deadline=0s",
        ]),
        r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartDeadline": "0s"}"#,
        "must be a positive duration such as 10m or 1h30m, not \"0s\"",
    ),
    row(
        "--restart-deadline",
        "restartDeadline",
        Flags(&[
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-deadline=10x",
        ]),
        r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartDeadline": "10x"}"#,
        "must be a positive duration such as 10m or 1h30m, not \"10x\"",
    ),
    schema(
        "--restart-deadline",
        "restartDeadline",
        Flags(&[
            "--manage-nads",
            "--restart-stale-workloads",
            "--restart-deadline=ten minutes",
        ]),
        r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartDeadline": "ten minutes"}"#,
        "ten minutes",
    ),
    // The CIDRs: an address and a prefix, no host bits, in each of the three lists.
    schema(
        "--api-server-cidr",
        "apiServerCIDRs",
        Flags(&["--api-server-cidr=10.0.0.0"]),
        r#"{"apiServerCIDRs": ["10.0.0.0"]}"#,
        "10.0.0.0",
    ),
    schema(
        "--api-server-cidr",
        "apiServerCIDRs",
        Flags(&["--api-server-cidr=10.0.0.0/33"]),
        r#"{"apiServerCIDRs": ["10.0.0.0/33"]}"#,
        "10.0.0.0/33",
    ),
    row(
        "--api-server-cidr",
        "apiServerCIDRs",
        Flags(&["--api-server-cidr=10.0.0.1/8"]),
        r#"{"apiServerCIDRs": ["10.0.0.1/8"]}"#,
        "\"10.0.0.1/8\" has host bits set: the network is 10.0.0.0/8; write that, or 10.0.0.1/32 for the one address",
    ),
    row(
        "--api-server-cidr",
        "apiServerCIDRs",
        Flags(&["--api-server-cidr=999.0.0.0/8"]),
        r#"{"apiServerCIDRs": ["999.0.0.0/8"]}"#,
        "\"999.0.0.0/8\" is not a CIDR: \"999.0.0.0\" is not an IP address",
    ),
    row(
        "--cluster-cidr",
        "clusterCIDRs",
        Flags(&["--cluster-cidr=10.244.0.0/16,10.128.0.1/14"]),
        r#"{"clusterCIDRs": ["10.244.0.0/16", "10.128.0.1/14"]}"#,
        "\"10.128.0.1/14\" has host bits set: the network is 10.128.0.0/14; write that, or 10.128.0.1/32 for the one address",
    ),
    row(
        "--cluster-cidr",
        "clusterCIDRs",
        Flags(&["--cluster-cidr=FD00:10:0:0:0:0:0:1/56"]),
        r#"{"clusterCIDRs": ["FD00:10:0:0:0:0:0:1/56"]}"#,
        "\"FD00:10:0:0:0:0:0:1/56\" has host bits set: the network is fd00:10::/56; write that, or fd00:10::1/128 for the one address",
    ),
    row(
        "--cluster-cidr",
        "clusterCIDRs",
        Flags(&["--cluster-cidr=1:0:0:4:0:0:0:8/112"]),
        r#"{"clusterCIDRs": ["1:0:0:4:0:0:0:8/112"]}"#,
        "\"1:0:0:4:0:0:0:8/112\" has host bits set: the network is 1:0:0:4::/112; write that, or 1:0:0:4::8/128 for the one address",
    ),
    row(
        "--cluster-cidr",
        "clusterCIDRs",
        Flags(&["--cluster-cidr=1::2::3/64"]),
        r#"{"clusterCIDRs": ["1::2::3/64"]}"#,
        "\"1::2::3/64\" is not a CIDR: \"1::2::3\" is not an IP address",
    ),
    row(
        "--protected-cidr",
        "protectedCIDRs",
        Flags(&["--protected-cidr=192.168.0.0/16,203.0.113.9/24"]),
        r#"{"protectedCIDRs": ["192.168.0.0/16", "203.0.113.9/24"]}"#,
        "\"203.0.113.9/24\" has host bits set: the network is 203.0.113.0/24; write that, or 203.0.113.9/32 for the one address",
    ),
    row(
        "--protected-cidr",
        "protectedCIDRs",
        Flags(&["--protected-cidr=010.1.0.0/16"]),
        r#"{"protectedCIDRs": ["010.1.0.0/16"]}"#,
        "\"010.1.0.0/16\" is not a CIDR: \"010.1.0.0\" is not an IP address",
    ),
    row(
        "--protected-cidr",
        "protectedCIDRs",
        Flags(&["--protected-cidr=::ffff:10.1.2.3/120"]),
        r#"{"protectedCIDRs": ["::ffff:10.1.2.3/120"]}"#,
        "\"::ffff:10.1.2.3/120\" has host bits set: the network is ::ffff:10.1.2.0/120; write that, or ::ffff:10.1.2.3/128 for the one address",
    ),
    schema(
        "spec.protectedCIDRs",
        "protectedCIDRs",
        File("protectedCIDRs: 192.168.0.0/16"),
        r#"{"protectedCIDRs": "192.168.0.0/16"}"#,
        "protectedCIDRs",
    ),
    // The day-2 settings.
    schema(
        "--webhook-resources",
        "webhookResources",
        Flags(&["--webhook-resources={limits: {memory: 256MB}}"]),
        r#"{"webhookResources": {"limits": {"memory": "256MB"}}}"#,
        "256MB",
    ),
    schema(
        "--controller-resources",
        "controllerResources",
        Flags(&[
            "--manage-nads",
            "--controller-resources={limit: {memory: 1Gi}}",
        ]),
        r#"{"manageNADs": true, "controllerResources": {"limit": {"memory": "1Gi"}}}"#,
        "limit",
    ),
    schema(
        "--log-level",
        "logLevel",
        Flags(&["--log-level=info, debug"]),
        r#"{"logLevel": "info, debug"}"#,
        "info, debug",
    ),
    schema(
        "--on-error",
        "onError",
        Flags(&["--on-error=fail"]),
        r#"{"onError": "fail"}"#,
        "deny",
    ),
    schema(
        "--missing-nad",
        "missingNAD",
        Flags(&["--missing-nad=create"]),
        r#"{"missingNAD": "create"}"#,
        "attach",
    ),
    schema(
        "--pod-label",
        "podLabels",
        Flags(&["--pod-label=team=platform team"]),
        r#"{"podLabels": {"team": "platform team"}}"#,
        "platform team",
    ),
    schema(
        "--service-annotation",
        "serviceAnnotations",
        Flags(&["--service-annotation=-x=1"]),
        r#"{"serviceAnnotations": {"-x": "1"}}"#,
        "-x",
    ),
    schema(
        "--webhook-configuration-label",
        "webhookConfigurationLabels",
        Flags(&["--webhook-configuration-label=example.com/a/b=1"]),
        r#"{"webhookConfigurationLabels": {"example.com/a/b": "1"}}"#,
        "example.com/a/b",
    ),
    // The chart's own: a Secret of the user's needs the CA the API server trusts it by.
    row(
        "",
        "webhook.externalSecret",
        Install::None,
        r#"{"webhook": {"externalSecret": true}}"#,
        "is true but no CA source is given: the webhook configuration would have no caBundle",
    ),
];

/// install's refusal of `row`, or `None` when install has no such setting.
fn install_refusal(row: &Row) -> Option<String> {
    match row.install {
        Flags(flags) => {
            let mut args = vec!["install", "--ignore-cluster"];
            args.extend(flags);
            let run = run_with_args(b"", &args);
            assert_ne!(run.code, 0, "install {flags:?} was taken");
            assert_eq!(run.stdout, "", "install {flags:?}");
            Some(run.stderr)
        }
        File(spec) => {
            let text = format!(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\nspec:\n  {spec}\n"
            );
            let refusal = Settings::from_text(&text)
                .and_then(|s| s.resolve().map_err(|e| e.to_string()))
                .expect_err(spec);
            Some(refusal)
        }
        Install::None => None,
    }
}

/// `helm template` of `row`'s values in its namespace: scripts/helm.py's arguments.
fn template_request(row: &Row) -> Vec<String> {
    [
        "template",
        CHART,
        "--namespace",
        row.namespace,
        "--values",
        row.values,
    ]
    .map(String::from)
    .to_vec()
}

/// The chart's refusal of `row`'s values in its namespace, from `out`, its render.
fn chart_refusal(row: &Row, out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{} in {}: the chart took it",
        row.values,
        row.namespace
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks `row` against `rendered`, the chart's render of its values.
fn check(row: &Row, rendered: &Output) -> Result<(), String> {
    let what = format!("{} / {} ({})", row.flag, row.key, row.values);
    let chart = chart_refusal(row, rendered);
    let by_schema = chart.contains("values don't meet the specifications of the schema");
    if by_schema != row.schema {
        return Err(format!(
            "{what}: the chart refused it by {}: {chart}",
            if by_schema { "its schema" } else { "a fail" }
        ));
    }
    let (key, shared) = match row.schema {
        // jsonschema quotes the value '…' and names its path.
        true => (
            format!("at '/{}", row.key.replace('.', "/")),
            row.shared.to_string(),
        ),
        false => (row.key.to_string(), row.shared.to_string()),
    };
    let named = row.key == "replica" || chart.contains(&key);
    if !named || !chart.contains(&shared) {
        return Err(format!(
            "{what}: the chart's refusal does not say {key:?} and {shared:?}: {chart}"
        ));
    }
    if let Some(install) = install_refusal(row)
        && (!install.contains(row.flag) || !install.contains(&shared))
    {
        return Err(format!(
            "{what}: install's refusal does not say {:?} and {shared:?}: {install}",
            row.flag
        ));
    }
    Ok(())
}

/// Each of install's refusals (table `ROWS`) is the chart's too, for the same reason.
#[test]
fn what_install_refuses_the_chart_refuses_for_the_same_reason() {
    // Every row's render in one Helm SDK process (each its own exit code and output).
    let rendered = helm_batch(&ROWS.iter().map(template_request).collect::<Vec<_>>());
    let failures: Vec<String> = ROWS
        .iter()
        .zip(&rendered)
        .filter_map(|(row, out)| check(row, out).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n\n")
    );
}

/// Every namespace install keeps the extension out of (src/k8s/reserved.rs) is refused as the
/// release's namespace, saying whose it is, whether or not the chart renders the Namespace.
#[test]
fn every_reserved_namespace_is_refused_as_the_release_s() {
    use linkerd_multus::k8s::reserved::{NAMES, PREFIXES};
    let names = NAMES
        .iter()
        .map(|(name, whose)| (name.to_string(), *whose))
        .chain(
            PREFIXES
                .iter()
                .map(|(prefix, whose)| (format!("{prefix}system"), *whose)),
        )
        .collect::<Vec<_>>();
    let requests: Vec<Vec<String>> = names
        .iter()
        .map(|(name, _)| {
            ["template", CHART, "--namespace", name.as_str(), "--values"]
                .into_iter()
                .chain([r#"{"installNamespace": false}"#])
                .map(String::from)
                .collect()
        })
        .collect();
    for ((name, whose), out) in names.iter().zip(helm_batch(&requests)) {
        let text = output_text(&out);
        let want = format!("the release's namespace {name:?} is {whose}: ");
        assert!(
            !out.status.success() && text.contains(&want),
            "{name}: {want:?} not in {text}"
        );
    }
}

/// No value combination renders a webhook configuration that refuses pods for want of a CA:
/// every configuration the chart renders has a caBundle, or asks cainjector (or OpenShift's
/// service CA) for one; the rest
/// are refused (`ROWS`).
#[test]
fn every_webhook_configuration_rendered_has_a_ca_source() {
    let pem = "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n";
    let mut combinations = Vec::new();
    for certs in ["generate", "cert-manager", "openshift-service-ca"] {
        for external in [false, true] {
            for source in ["", "caBundle", "injectCaFrom", "injectCaFromSecret"] {
                let mut webhook = serde_json::json!({ "externalSecret": external });
                match source {
                    "caBundle" => webhook["caBundle"] = pem.into(),
                    "" => {}
                    other => webhook[other] = "ns/name".into(),
                }
                combinations.push(serde_json::json!({ "certs": certs, "webhook": webhook }));
            }
        }
    }
    let requests: Vec<Vec<String>> = combinations
        .iter()
        .map(|values| {
            vec![
                "template".into(),
                CHART.into(),
                "--values".into(),
                values.to_string(),
            ]
        })
        .collect();
    let mut rendered = 0;
    for (values, out) in combinations.iter().zip(helm_batch(&requests)) {
        if !out.status.success() {
            let text = output_text(&out);
            assert!(
                text.contains("no CA source is given"),
                "{values}: refused for another reason: {text}"
            );
            continue;
        }
        rendered += 1;
        let docs = common::parse_yaml_stream(&String::from_utf8(out.stdout).unwrap()).unwrap();
        let mwc = docs
            .iter()
            .find(|d| d.str_at(&["kind"]) == Some("MutatingWebhookConfiguration"))
            .expect("a MutatingWebhookConfiguration");
        let json = crate::deploy::to_json(mwc);
        let injected = json["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| {
                a.keys().any(|k| {
                    k.starts_with("cert-manager.io/inject-ca-from")
                        || k == "service.beta.openshift.io/inject-cabundle"
                })
            });
        for hook in json["webhooks"].as_array().unwrap() {
            let bundle = hook["clientConfig"]["caBundle"]
                .as_str()
                .is_some_and(|b| !b.is_empty());
            assert!(
                bundle || injected,
                "{values}: webhook {} has no caBundle and nothing injects one",
                hook["name"]
            );
        }
    }
    assert!(rendered >= 10, "only {rendered} combinations rendered");
}

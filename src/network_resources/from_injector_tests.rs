use super::*;
use crate::krm::function_config::SettingsKind;
use crate::yaml::parse_document;

fn fixture(name: &str) -> String {
    let path = format!("{}/testdata/injector/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// Each ConfigMap of the injector's repository, under the flags of its
/// deployment example: the spec printed, and a part of each note.
#[test]
fn the_injectors_config_maps() {
    let deployment: Vec<String> = fixture("deployments-server-args.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let password =
        "injections:\n  customInjection:\n    annotations:\n      top-secret: password\n";
    let cases: [(&str, String, &[&str]); 11] = [
        ("readme-features", String::new(), &["downwardAPI: true, as"]),
        (
            "readme-user-defined-injections",
            "injections:\n  feature.pod.kubernetes.io_sriov-network:\n    annotations:\n      k8s.v1.cni.cncf.io/networks: sriov-net-attach-def\n".into(),
            &["are appended to the pod's own", "downwardAPI"],
        ),
        (
            "e2e-without-features",
            password.into(),
            &["does not read \"networkResourceNameKeys\"", "downwardAPI"],
        ),
        (
            "e2e-all-features-disabled",
            password.into(),
            &["no switch \"enableCustomizedInjection\"", "no switch \"enableResourceName\"", "downwardAPI"],
        ),
        (
            "e2e-unknown-features",
            password.into(),
            &["no switch \"someSuperFeature\"", "no switch \"resourceName\"", "downwardAPI"],
        ),
        (
            "e2e-two-injections",
            "injections:\n  customInjection:\n    annotations:\n      k8s.v1.cni.cncf.io/networks: sriov-net-attach-def\n  secondInjection:\n    annotations:\n      top-secret: password\n".into(),
            &["appended", "downwardAPI"],
        ),
        (
            "unit-all-features-on",
            "honorResources: true\ndownwardAPI: true\ninjections:\n  network-resource-injector-pod-annotation:\n    annotations:\n      k8s.v1.cni.cncf.io/networks: sriov-net-attach-def\n".into(),
            &["appended", "does not read \"networkResourceNameKeys\""],
        ),
        (
            "unit-feature-not-boolean",
            "injections:\n  network-resource-injector-pod-annotation:\n    annotations:\n      k8s.v1.cni.cncf.io/networks: sriov-net-attach-def\n".into(),
            &["ignores every switch", "appended", "networkResourceNameKeys", "downwardAPI"],
        ),
        ("unit-invalid-json", String::new(), &["is not a JSON object", "downwardAPI"]),
        (
            "unit-injection-bad-path",
            String::new(),
            &["\"nri-inject-annotation\" is left out: its path is not /metadata/annotations", "downwardAPI"],
        ),
        (
            "unit-default-network",
            "injections:\n  nri-inject-annotation:\n    annotations:\n      v1.multus-cni.io/default-network: sriov-net\n".into(),
            &["downwardAPI"],
        ),
    ];
    for (name, spec, notes) in cases {
        translates_to(&deployment, name, &spec, notes);
    }
}

/// The fixture `name`, with the deployment's flags, prints the object whose
/// spec is `spec` (after `downwardAPI: true` unless it sets `honorResources`),
/// with notes containing `notes` in order, and reads back as the same settings.
fn translates_to(deployment: &[String], name: &str, spec: &str, notes: &[&str]) {
    let config_map = parse_document(&fixture(&format!("{name}.yaml"))).unwrap();
    let t = translate(deployment, config_json(&config_map)).unwrap();
    let spec = match spec.starts_with("honorResources") {
        true => indent(spec),
        false => indent(&format!("downwardAPI: true\n{spec}")),
    };
    let printed = to_object(&t.settings, "network-resources");
    assert_eq!(
        printed,
        format!(
            "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nmetadata:\n  name: network-resources\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n{spec}"
        ),
        "{name}"
    );
    assert_eq!(t.notes.len(), notes.len(), "{name}: {:?}", t.notes);
    for (note, want) in t.notes.iter().zip(notes) {
        assert!(note.contains(want), "{name}: {note}");
    }
    let back = Settings::from_object(&parse_document(&printed).unwrap()).unwrap();
    assert_eq!(
        back, t.settings,
        "{name}: the object reads back as the same settings"
    );
}

fn indent(spec: &str) -> String {
    spec.lines().map(|l| format!("  {l}\n")).collect()
}

/// The flags as Go's flag package reads them; the ConfigMap's switches override them.
#[test]
fn flags_and_switches() {
    type Want = Result<(bool, bool, &'static [&'static str]), &'static str>;
    let cases: [(&[&str], Option<&str>, Want); 13] = [
        (&[], None, Ok((false, false, &[RESOURCE_NAME]))),
        (
            &["--honor-resources", "-injectHugepageDownApi=true"],
            None,
            Ok((true, true, &[RESOURCE_NAME])),
        ),
        (
            &[
                "-network-resource-name-keys",
                "k8s.v1.cni.cncf.io/resourceName, k8s.v1.cni.cncf.io/bridgeName",
            ],
            None,
            Ok((
                false,
                false,
                &[RESOURCE_NAME, "k8s.v1.cni.cncf.io/bridgeName"],
            )),
        ),
        (
            &["-honor-resources=F"],
            Some(r#"{"features": {"enableHonorExistingResources": true}}"#),
            Ok((true, false, &[RESOURCE_NAME])),
        ),
        (
            &["-honor-resources"],
            Some(r#"{"features": {"enableHonorExistingResources": false}}"#),
            Ok((false, false, &[RESOURCE_NAME])),
        ),
        (
            &["-port", "8443", "webhook", "-honor-resources"],
            None,
            Ok((false, false, &[RESOURCE_NAME])),
        ),
        (
            &["-honor-resources=maybe"],
            None,
            Err("flag -honor-resources: \"maybe\" is not a boolean"),
        ),
        (
            &["-resource-name-keys=a/b"],
            None,
            Err("flag -resource-name-keys=a/b: network-resources-injector has no such flag"),
        ),
        (
            &["-network-resource-name-keys"],
            None,
            Err("flag -network-resource-name-keys needs a value"),
        ),
        (
            &[
                "-log_link=/var/log/links",
                "--logbuflevel",
                "-1",
                "-log_dir",
                "/var/log",
                "-v=2",
                "-vmodule=webhook=3",
                "-log_backtrace_at=webhook.go:80",
                "-stderrthreshold",
                "INFO",
                "-alsologtostderr=false",
                "-client-ca=/a",
                "-client-ca=/b",
                "-insecure",
                "-enable-http2",
                "-tls-min-version=VersionTLS13",
                "-tls-cipher-suites=TLS_AES_128_GCM_SHA256",
                "-tls-curve-preferences=29",
                "-honor-resources",
            ],
            None,
            Ok((true, false, &[RESOURCE_NAME])),
        ),
        (
            &["-logbuflevel"],
            None,
            Err("flag -logbuflevel needs a value"),
        ),
        (
            &["-h"],
            None,
            Err(
                "flag -h: network-resources-injector prints its usage and exits instead of running; remove the flag",
            ),
        ),
        (
            &["-port=8443", "--help"],
            None,
            Err(
                "flag --help: network-resources-injector prints its usage and exits instead of running; remove the flag",
            ),
        ),
    ];
    for (flags, config, want) in cases {
        let got = translate(&args(flags), config)
            .map(|t| t.settings)
            .map_err(|e| e.to_string());
        match (got, want) {
            (Ok(s), Ok((honor, _, keys))) => {
                assert_eq!(s.honor_resources, honor, "{flags:?}");
                assert_eq!(s.resource_name_keys, keys, "{flags:?}");
                assert!(s.downward_api, "{flags:?}");
            }
            (Err(e), Err(want)) => assert_eq!(e, want, "{flags:?}"),
            (got, _) => panic!("{flags:?}: {got:?}"),
        }
    }
}

const RESOURCE_NAME: &str = crate::network_resources::settings::RESOURCE_NAME_ANNOTATION;

/// Each user-defined injection the injector applies, by the form of its
/// networks value: carried over (the value the settings hold) or refused.
#[test]
fn injections_carried_or_refused() {
    let not_by_name = "and NetworkResources injections add networks by name, from the pod's own namespace; list it in the labelled workloads' own k8s.v1.cni.cncf.io/networks instead, or change the injection to name networks only";
    let cases: [(&str, Result<&str, String>); 14] = [
        (r#""sriov-net""#, Ok("sriov-net")),
        (r#""a,b""#, Ok("a,b")),
        (r#"" a , b@ ""#, Ok("a, b")),
        (r#""[{\"name\": \"a\"}, {\"name\": \"b\"}]""#, Ok("a, b")),
        (
            r#""other/sriov-net""#,
            Err(format!("k8s.v1.cni.cncf.io/networks \"other/sriov-net\": selection other/sriov-net names namespace other, {not_by_name}")),
        ),
        (
            r#""a, sriov-net@net1""#,
            Err(format!("k8s.v1.cni.cncf.io/networks \"a, sriov-net@net1\": selection sriov-net@net1 names interface net1, {not_by_name}")),
        ),
        (
            r#""other/sriov-net@net1""#,
            Err(format!("k8s.v1.cni.cncf.io/networks \"other/sriov-net@net1\": selection other/sriov-net@net1 names namespace other and interface net1, {not_by_name}")),
        ),
        (
            r#""[{\"name\": \"a\", \"namespace\": \"other\"}]""#,
            Err(format!("k8s.v1.cni.cncf.io/networks \"[{{\\\"name\\\": \\\"a\\\", \\\"namespace\\\": \\\"other\\\"}}]\": selection other/a names namespace other, {not_by_name}")),
        ),
        (
            r#""[{\"name\": \"a\", \"mac\": \"02:00:00:00:00:01\"}]""#,
            Err(format!("k8s.v1.cni.cncf.io/networks \"[{{\\\"name\\\": \\\"a\\\", \\\"mac\\\": \\\"02:00:00:00:00:01\\\"}}]\": the element for a has members besides \"name\", {not_by_name}")),
        ),
        (
            r#""""#,
            Err("k8s.v1.cni.cncf.io/networks \"\" selects no network (where the injector applies it, it empties the pod's own); remove it from the injection".into()),
        ),
        (
            r#""[]""#,
            Err("k8s.v1.cni.cncf.io/networks \"[]\" selects no network (where the injector applies it, it empties the pod's own); remove it from the injection".into()),
        ),
        (
            r#""a,,b""#,
            Err("k8s.v1.cni.cncf.io/networks \"a,,b\" is not a networks value Multus reads (item 2 \"\": empty item), so the injector refuses pods with the label; correct it".into()),
        ),
        (
            r#"5"#,
            Err("its value is not a map of annotation keys to strings, on which the injector's webhook fails for pods with the label; make it one or remove the injection".into()),
        ),
        (
            r#""a", "not a key": "x""#,
            Err("\"not a key\" is not a valid annotation key, so the API server refuses the pods the injector adds it to; correct or remove it".into()),
        ),
    ];
    for (networks, want) in cases {
        let config = format!(
            r#"{{"user-defined-injections": {{"sriov": {{"op": "add", "path": "/metadata/annotations", "value": {{"k8s.v1.cni.cncf.io/networks": {networks}}}}}}}}}"#
        );
        let got = translate(&[], Some(&config));
        match (got, want) {
            (Ok(t), Ok(value)) => {
                assert_eq!(
                    t.settings.injections["sriov"][NETWORKS_ANNOTATION], value,
                    "{networks}"
                );
                assert!(
                    t.notes[0].contains("appended to the pod's own"),
                    "{networks}"
                );
            }
            (Err(e), Err(problem)) => assert_eq!(
                e.to_string(),
                format!("config.json: user-defined injection \"sriov\": {problem}"),
                "{networks}"
            ),
            (got, _) => panic!("{networks}: {got:?}"),
        }
    }
    let config =
        r#"{"user-defined-injections": {"sriov": {"op": "add", "path": "/metadata/annotations"}}}"#;
    assert!(matches!(
        translate(&[], Some(config)),
        Err(Error::Injection { problem, .. }) if *problem == InjectionProblem::NotAnnotations
    ));
}

/// Injections the injector never applies are left out with a note, as it
/// leaves them; Go's decoder matches the patch's keys regardless of case.
#[test]
fn injections_the_injector_skips() {
    let value = r#"{"top-secret": "password"}"#;
    let cases: [(&str, Option<&str>); 6] = [
        (
            &format!(
                r#""not a label!": {{"op": "add", "path": "/metadata/annotations", "value": {value}}}"#
            ),
            Some("it is not a valid label key"),
        ),
        (r#""l": "add""#, Some("it is not a JSON object")),
        (
            &format!(r#""l": {{"op": 5, "path": "/metadata/annotations", "value": {value}}}"#),
            Some("its op or path is not a string"),
        ),
        (
            &format!(
                r#""l": {{"op": "replace", "path": "/metadata/annotations", "value": {value}}}"#
            ),
            Some("its op is not add"),
        ),
        (
            &format!(r#""l": {{"op": "add", "path": "/metadata/labels", "value": {value}}}"#),
            Some("its path is not /metadata/annotations"),
        ),
        (
            &format!(r#""l": {{"Op": "add", "PATH": "/metadata/annotations", "Value": {value}}}"#),
            None,
        ),
    ];
    for (injection, skipped) in cases {
        let config = format!(r#"{{"user-defined-injections": {{{injection}}}}}"#);
        let t = translate(&[], Some(&config)).unwrap_or_else(|e| panic!("{injection}: {e}"));
        match skipped {
            Some(why) => {
                assert!(t.settings.injections.is_empty(), "{injection}");
                assert!(t.notes[0].contains(why), "{injection}: {:?}", t.notes);
            }
            None => assert_eq!(t.settings.injections["l"]["top-secret"], "password"),
        }
    }
}

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
    let cases: [(&[&str], Option<&str>, Want); 9] = [
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

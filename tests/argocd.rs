//! Argo CD's config-management plugin, re-enacted: Argo CD cannot run here, so
//! the test does what its plugin server does (argocd-cmp-server, sidecar
//! mode): copy the application directory to a scratch directory, match the
//! discovery rule, set the environment Argo CD sets (build variables,
//! `ARGOCD_ENV_*` from `plugin.env`, `ARGOCD_APP_PARAMETERS` and `PARAM_*` from
//! `plugin.parameters`), run `generate` exactly as `plugin.yaml` writes it, and
//! read stdout as the application's manifests.

use crate::common;
use crate::common::process::Guarded;

use std::path::Path;
use std::process::Command;

use common::{bin, copy_dir, kinds, parse_yaml_stream, repo_path, template_networks};
use linkerd_multus::yaml::{Node, parse_document};

const PLUGIN: &str = "functions/linkerd-multus/argocd/plugin.yaml";
const APPLICATION: &str = "functions/linkerd-multus/argocd/application.yaml";
const PATCH: &str = "functions/linkerd-multus/argocd/repo-server-patch.yaml";

fn read(rel: &str) -> Node {
    let text = std::fs::read_to_string(repo_path(rel)).unwrap();
    parse_document(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn text<'a>(node: &'a Node, path: &[&str]) -> &'a str {
    node.get_path(path)
        .and_then(Node::as_text)
        .unwrap_or_else(|| panic!("no {path:?}"))
}

fn strings(node: &Node) -> Vec<String> {
    node.as_seq()
        .map(|s| {
            s.items
                .iter()
                .map(|i| i.as_text().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Argo CD's name for a parameter's variable: upper case, every character
/// other than a letter or digit turned into `_`.
fn escaped(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

struct Generated {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the plugin's `generate` for an Application, as the plugin server does.
fn generate(application: &Node, parameters_override: Option<&str>) -> Generated {
    generate_edited(application, parameters_override, |_| {})
}

/// [`generate`] after `edit` changed the copy of the application's directory:
/// the mistakes a user makes in it.
fn generate_edited(
    application: &Node,
    parameters_override: Option<&str>,
    edit: impl FnOnce(&Path),
) -> Generated {
    let plugin = read(PLUGIN);
    let app_dir = repo_path("functions/linkerd-multus/examples").join(
        text(application, &["spec", "source", "path"])
            .strip_prefix("functions/linkerd-multus/examples/")
            .expect("the example application lives under examples/"),
    );
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("app");
    copy_dir(&app_dir, &work);
    edit(&work);

    // Discovery: the plugin is chosen for directories holding this file.
    let wanted = text(&plugin, &["spec", "discover", "fileName"]);
    assert!(
        work.join(wanted).is_file(),
        "discovery rule {wanted} does not match the example application"
    );

    let spec_plugin = application
        .get_path(&["spec", "source", "plugin"])
        .expect("spec.source.plugin");
    assert_eq!(
        text(application, &["spec", "source", "plugin", "name"]),
        text(&plugin, &["metadata", "name"])
    );
    let env = plugin_env(application, spec_plugin, parameters_override);

    let command = strings(plugin.get_path(&["spec", "generate", "command"]).unwrap());
    let args = plugin
        .get_path(&["spec", "generate", "args"])
        .map(strings)
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let out = Command::new(&command[0])
        .args(&command[1..])
        .args(&args)
        .env_clear()
        .envs(env)
        .current_dir(&work)
        .guarded_output()
        .expect("run the plugin's generate command");
    assert!(
        started.elapsed().as_secs() < 90,
        "generate ran past Argo CD's default 90 s timeout"
    );
    Generated {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The environment Argo CD gives the plugin's generate command for `application`: the build
/// environment, the plugin's `env` and its parameters (or `parameters_override`).
fn plugin_env(
    application: &Node,
    spec_plugin: &Node,
    parameters_override: Option<&str>,
) -> Vec<(String, String)> {
    let bin_dir = Path::new(bin()).parent().unwrap();
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            format!("{}:/usr/bin:/bin", bin_dir.display()),
        ),
        (
            "ARGOCD_APP_NAME".into(),
            text(application, &["metadata", "name"]).into(),
        ),
        (
            "ARGOCD_APP_NAMESPACE".into(),
            text(application, &["spec", "destination", "namespace"]).into(),
        ),
        (
            "ARGOCD_APP_REVISION".into(),
            "0123456789abcdef0123456789abcdef01234567".into(),
        ),
        ("ARGOCD_APP_REVISION_SHORT".into(), "0123456".into()),
        (
            "ARGOCD_APP_SOURCE_PATH".into(),
            text(application, &["spec", "source", "path"]).into(),
        ),
        (
            "ARGOCD_APP_SOURCE_REPO_URL".into(),
            text(application, &["spec", "source", "repoURL"]).into(),
        ),
        (
            "ARGOCD_APP_SOURCE_TARGET_REVISION".into(),
            text(application, &["spec", "source", "targetRevision"]).into(),
        ),
        ("KUBE_VERSION".into(), "1.32.0".into()),
        (
            "KUBE_API_VERSIONS".into(),
            "v1,apps/v1,batch/v1,k8s.cni.cncf.io/v1".into(),
        ),
    ];
    for entry in spec_plugin
        .get_path(&["env"])
        .and_then(Node::as_seq)
        .map_or(&[][..], |s| &s.items)
    {
        env.push((
            format!("ARGOCD_ENV_{}", text(entry, &["name"])),
            text(entry, &["value"]).into(),
        ));
    }
    let mut parameters = Vec::new();
    for p in spec_plugin
        .get_path(&["parameters"])
        .and_then(Node::as_seq)
        .map_or(&[][..], |s| &s.items)
    {
        let name = text(p, &["name"]);
        let value = text(p, &["string"]);
        env.push((format!("PARAM_{}", escaped(name)), value.into()));
        parameters.push(serde_json::json!({"name": name, "string": value}));
    }
    let json = parameters_override
        .map(str::to_string)
        .unwrap_or_else(|| serde_json::Value::from(parameters).to_string());
    env.push(("ARGOCD_APP_PARAMETERS".into(), json));
    env
}

#[test]
fn generate_renders_the_application() {
    let application = read(APPLICATION);
    let out = generate(&application, None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let docs = parse_yaml_stream(&out.stdout).expect("generate prints a YAML stream");
    assert_eq!(
        kinds(&docs),
        [
            "Namespace",
            "NetworkAttachmentDefinition",
            "CronJob",
            "Deployment"
        ],
        "{}",
        out.stdout
    );
    let web = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("Deployment"))
        .unwrap();
    assert_eq!(template_networks(web), Some("storage@net1,linkerd-cni"));
    // The Application's parameter reached the renderer.
    let nad = docs
        .iter()
        .find(|d| d.str_at(&["kind"]) == Some("NetworkAttachmentDefinition"))
        .unwrap();
    assert!(
        nad.str_at(&["spec", "config"])
            .unwrap()
            .contains("\"cniVersion\": \"1.0.0\""),
        "{}",
        out.stdout
    );
    // Settings objects and local-config resources are not applied.
    assert!(!out.stdout.contains("LinkerdMultus") && !out.stdout.contains("linkerd-cni-config"));
}

#[test]
fn a_failed_generate_prints_nothing() {
    // Argo CD prunes everything when a plugin prints nothing and succeeds; a
    // bad parameter must fail the generate instead.
    let application = read(APPLICATION);
    let out = generate(
        &application,
        Some(r#"[{"name":"proxyUIDOffset","string":"many"}]"#),
    );
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with(
            "error: Argo CD parameter proxyUIDOffset: setting proxyUIDOffset: \"many\" is not a whole number"
        ),
        "{}",
        out.stderr
    );
}

/// An application directory that holds the settings and no manifest (the
/// manifests are elsewhere, or the path is wrong): the generate fails, saying
/// what Argo CD would do and what to check, and prints nothing.
#[test]
fn an_empty_application_fails_naming_argo_cd() {
    let out = generate_edited(&read(APPLICATION), None, |work| {
        for dir in ["apps", "namespaces", "linkerd-cni"] {
            std::fs::remove_dir_all(work.join(dir)).unwrap();
        }
    });
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert_eq!(
        out.stderr,
        "error: no Kubernetes objects in .: Argo CD would prune every resource of the application demo; check that the Application's source path holds its manifests, or add --allow-empty to the plugin's generate command if an empty application is what you want\n"
    );
}

/// The settings of the discovery rule's file with a near-miss apiVersion (or
/// kind) are refused, naming the file, what is written and what to write:
/// before, the object was printed as one to apply, with the default settings.
#[test]
fn settings_of_another_api_version_are_refused() {
    for (from, to, want) in [
        (
            "multus.linkerd.io/v1alpha1",
            "multus.linkerd.io/v1",
            "error: linkerd-multus.yaml: LinkerdMultus linkerd-multus: apiVersion \"multus.linkerd.io/v1\" is not one linkerd-multus reads; write apiVersion: multus.linkerd.io/v1alpha1\n",
        ),
        (
            "multus.linkerd.io/v1alpha1",
            "linkerd.io/v1alpha1",
            "error: linkerd-multus.yaml: LinkerdMultus linkerd-multus: apiVersion \"linkerd.io/v1alpha1\" is not one linkerd-multus reads; write apiVersion: multus.linkerd.io/v1alpha1\n",
        ),
        (
            "kind: LinkerdMultus",
            "kind: LinkerdMultis",
            "error: linkerd-multus.yaml: LinkerdMultis linkerd-multus: multus.linkerd.io/v1alpha1 has no kind \"LinkerdMultis\"; write kind: LinkerdMultus\n",
        ),
    ] {
        let out = generate_edited(&read(APPLICATION), None, |work| {
            let path = work.join("linkerd-multus.yaml");
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains(from));
            std::fs::write(&path, text.replace(from, to)).unwrap();
        });
        assert_eq!((out.code, out.stdout.as_str()), (1, ""), "{to}");
        assert_eq!(out.stderr, want);
    }
}

/// Every unknown key of the settings at once, each with the key it is nearest to.
#[test]
fn every_unknown_setting_is_named_with_the_one_meant() {
    let out = generate_edited(&read(APPLICATION), None, |work| {
        let path = work.join("linkerd-multus.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = format!("{text}  nadNme: mesh\n  cniNamspace: cni\n  colour: blue\n");
        std::fs::write(&path, text).unwrap();
    });
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    assert_eq!(
        out.stderr,
        "error: linkerd-multus.yaml: unknown settings \"nadNme\" (did you mean nadName?), \"cniNamspace\" (did you mean cniNamespace?) and \"colour\"; valid settings are cniNamespace, linkerdNamespace, nadName, cniKubeconfig, cniVersion, uidRangeAnnotation, proxyUIDOffset, namespaces, workloadKinds, defaultNamespace, configRollout, nadSyncWave, skipSecondarySubnets, clusterCIDRs, protectedCIDRs\n"
    );
}

/// A JSON error in the Linkerd-CNI ConfigMap's value is named at the line and
/// column of the file (the value is a literal block, whose lines are the file's).
#[test]
fn a_json_error_is_named_at_the_line_of_the_file() {
    let out = generate_edited(&read(APPLICATION), None, |work| {
        let path = work.join("linkerd-cni/configmap.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let broken = text.replacen("\"proxy-uid\": 2102,", "\"proxy-uid\": 2102", 1);
        assert_ne!(text, broken);
        std::fs::write(&path, broken).unwrap();
    });
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    // Line 28 of the file is the value's line 12, `"ports-to-redirect": []`.
    assert_eq!(
        out.stderr,
        "error: ConfigMap linkerd-cni/linkerd-cni-config (linkerd-cni/configmap.yaml): data.cni_network_config is not valid JSON: expected `,` or `}` at line 28 column 9 of linkerd-cni/configmap.yaml\n"
    );
}

#[test]
fn announced_parameters_are_the_settings() {
    let plugin = read(PLUGIN);
    let names: Vec<_> = plugin
        .get_path(&["spec", "parameters", "static"])
        .and_then(Node::as_seq)
        .unwrap()
        .items
        .iter()
        .map(|p| text(p, &["name"]).to_string())
        .collect();
    assert_eq!(names, linkerd_multus::linkerd_cni::settings::KEYS);
}

#[test]
fn sidecar_patch_serves_the_plugin() {
    let patch = read(PATCH);
    let pod = patch.get_path(&["spec", "template", "spec"]).unwrap();
    let container = &pod
        .get_path(&["containers"])
        .and_then(Node::as_seq)
        .unwrap()
        .items[0];
    assert_eq!(
        strings(container.get_path(&["command"]).unwrap()),
        ["/var/run/argocd/argocd-cmp-server"]
    );
    // Argo CD requires the sidecar to run as user 999.
    assert_eq!(text(container, &["securityContext", "runAsUser"]), "999");
    let mounts: Vec<(String, String)> = container
        .get_path(&["volumeMounts"])
        .and_then(Node::as_seq)
        .unwrap()
        .items
        .iter()
        .map(|m| {
            (
                text(m, &["name"]).to_string(),
                text(m, &["mountPath"]).to_string(),
            )
        })
        .collect();
    for (name, path) in [
        ("var-files", "/var/run/argocd"),
        ("plugins", "/home/argocd/cmp-server/plugins"),
        (
            "linkerd-multus-plugin",
            "/home/argocd/cmp-server/config/plugin.yaml",
        ),
        ("linkerd-multus-tmp", "/tmp"),
    ] {
        assert!(
            mounts.contains(&(name.to_string(), path.to_string())),
            "no mount of {name} at {path}: {mounts:?}"
        );
    }
}

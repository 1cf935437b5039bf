//! Mistakes in what a user writes, made with files on disk and the commands a host runs
//! (`render` as Argo CD's plugin and scripts do, `post-render` as Helm does, `validate` as
//! CI does), each asserting the exact message: where a JSON error is in the file, what to do
//! about an empty input in each host, and settings objects that are not what they seem. The
//! same mistakes through kpt, kustomize and Argo CD's plugin are in their own test files.

use crate::common;

use std::path::Path;

use common::{Run, copy_dir, repo_path, run_clean};

/// A copy of the repository's kpt example (a plain directory of manifests) in `dir`.
fn example(dir: &Path) {
    copy_dir(&repo_path("functions/linkerd-multus/examples/kpt"), dir);
}

fn linkerd_multus(args: &[&str], cwd: &Path, stdin: &str) -> Run {
    run_clean(args, &[], cwd, stdin)
}

/// Fails with exactly `stderr`, printing nothing.
fn assert_fails(run: &Run, stderr: &str) {
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{}", run.stderr);
    assert_eq!(run.stderr, stderr);
}

/// A JSON error in the Linkerd-CNI ConfigMap's value: at the line and column of the file
/// when the value is a literal block (its lines are the file's), else at the line and column
/// of the value and the line of the file it starts at (quoted: escapes and folding change
/// columns and lines). Before, the line was always the value's, named as if it were the file's.
#[test]
fn json_errors_are_named_at_the_line_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    example(dir.path());
    let configmap = dir.path().join("linkerd-cni/configmap.yaml");
    let text = std::fs::read_to_string(&configmap).unwrap();
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let (uid, value_starts) = (
        line("\"proxy-uid\": 2102,"),
        line("cni_network_config: |-") + 1,
    );
    std::fs::write(
        &configmap,
        text.replacen("\"proxy-uid\": 2102,", "\"proxy-uid\": 2102", 1),
    )
    .unwrap();
    assert_fails(
        &linkerd_multus(&["render", "."], dir.path(), ""),
        &format!(
            "error: ConfigMap linkerd-cni/linkerd-cni-config (linkerd-cni/configmap.yaml): data.cni_network_config is not valid JSON: expected `,` or `}}` at line {} column 9 of linkerd-cni/configmap.yaml\n",
            uid + 1
        ),
    );
    assert_eq!(line("\"ports-to-redirect\"") - value_starts + 1, 12);

    // The same value, double-quoted on one line.
    std::fs::write(
        &configmap,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linkerd-cni-config\n  namespace: linkerd-cni\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n  cni_network_config: \"{\\\"name\\\": \\\"linkerd-cni\\\", \\\"type\\\": \\\"linkerd-cni\\\" \\\"x\\\": 1}\"\n",
    )
    .unwrap();
    assert_fails(
        &linkerd_multus(&["render", "."], dir.path(), ""),
        "error: ConfigMap linkerd-cni/linkerd-cni-config (linkerd-cni/configmap.yaml): data.cni_network_config is not valid JSON: expected `,` or `}` at line 1 column 47 of the value, which starts at line 9 of linkerd-cni/configmap.yaml\n",
    );

    // From stdin (Helm's post-renderer) there is no file to count in: the value's line.
    let stdin = std::fs::read_to_string(&configmap).unwrap()
        + "---\n"
        + &std::fs::read_to_string(dir.path().join("apps/web.yaml")).unwrap();
    let run = linkerd_multus(
        &["post-render", "--default-namespace=shop"],
        dir.path(),
        &stdin,
    );
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{}", run.stderr);
    assert_eq!(
        run.stderr_first_line(),
        "error: ConfigMap linkerd-cni/linkerd-cni-config (<stdin>): data.cni_network_config is not valid JSON: expected `,` or `}` at line 1 column 47 of the value"
    );
}

/// `validate` names a NAD's broken `spec.config` at the line of its file, in a `List` too.
#[test]
fn validate_names_a_nad_json_error_at_the_line_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let nad = |name: &str| {
        format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  config: |\n    {{\n      \"cniVersion\": \"0.3.1\",\n      \"type\": \"macvlan\",,\n      \"master\": \"eth0\"\n    }}\n"
        )
    };
    let list = format!(
        "# Two NADs in a List.\napiVersion: v1\nkind: List\nitems:\n- {}",
        nad("second").lines().collect::<Vec<_>>().join("\n  ")
    );
    std::fs::write(
        dir.path().join("nads.yaml"),
        format!("{}---\n{list}\n", nad("first")),
    )
    .unwrap();
    let run = linkerd_multus(&["validate", "nads.yaml"], dir.path(), "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "nads.yaml: error: NetworkAttachmentDefinition shop/first: spec.config: CNI configuration is not valid JSON: key must be a string at line 10 column 25 of nads.yaml\n\
         nads.yaml (document 2): error: NetworkAttachmentDefinition shop/second: spec.config: CNI configuration is not valid JSON: key must be a string at line 27 column 27 of nads.yaml\n\
         linkerd-multus validate: 2 NetworkAttachmentDefinitions and 0 workloads checked; 2 errors, 0 warnings\n"
    );
}

/// An input without objects: the message names what to do in the host that ran the command
/// (Helm's post-renderer, Argo CD's plugin, a person). Before, every host was told that Argo
/// CD would prune the application and to pass --allow-empty.
#[test]
fn an_empty_input_names_the_host_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert_fails(
        &linkerd_multus(
            &["post-render", "--default-namespace=shop"],
            dir.path(),
            "---\n",
        ),
        "error: no Kubernetes objects in <stdin>: Helm gave the post-renderer no manifests: the chart rendered none with these values (helm template shows what it renders); add --post-renderer-args=--allow-empty if an empty release is what you want\n",
    );
    assert_fails(
        &linkerd_multus(&["render", "empty"], dir.path(), ""),
        "error: no Kubernetes objects in empty: pass --allow-empty if an empty output is what you want\n",
    );
    let argocd = run_clean(
        &["render", "empty"],
        &[
            ("ARGOCD_APP_NAME", "shop"),
            ("ARGOCD_APP_NAMESPACE", "shop"),
        ],
        dir.path(),
        "",
    );
    assert_fails(
        &argocd,
        "error: no Kubernetes objects in empty: Argo CD would prune every resource of the application shop; check that the Application's source path holds its manifests, or add --allow-empty to the plugin's generate command if an empty application is what you want\n",
    );
    let allowed = linkerd_multus(&["render", "--allow-empty", "empty"], dir.path(), "");
    assert_eq!(
        (allowed.code, allowed.stdout.as_str()),
        (0, ""),
        "{}",
        allowed.stderr
    );
}

/// Settings objects that are not what they seem, among `validate`'s inputs: a `Validation`
/// of another version is refused as settings; a `LinkerdMultus` (the function's settings,
/// as kustomize copies it to its output when it is listed under `resources:`) is named as
/// an object that would be applied. Before, both were passed over as unknown objects.
#[test]
fn validate_names_settings_objects_that_are_not_what_they_seem() {
    let dir = tempfile::tempdir().unwrap();
    example(dir.path());
    std::fs::write(
        dir.path().join("validation.yaml"),
        "apiVersion: multus.linkerd.io/v1beta1\nkind: Validation\nmetadata:\n  name: validation\nspec:\n  namespaceIsolation: true\n",
    )
    .unwrap();
    let run = linkerd_multus(&["validate", "."], dir.path(), "");
    assert_eq!((run.code, run.stdout.as_str()), (1, ""));
    assert_eq!(
        run.stderr,
        "error: validation.yaml: Validation validation: apiVersion \"multus.linkerd.io/v1beta1\" is not one linkerd-multus reads; write apiVersion: multus.linkerd.io/v1alpha1\n"
    );
    std::fs::write(
        dir.path().join("validation.yaml"),
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nmetadata:\n  name: linkerd-multus\nspec:\n  linkerdNamespace: linkerd\n",
    )
    .unwrap();
    let run = linkerd_multus(&["validate", "."], dir.path(), "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("validation.yaml: error: LinkerdMultus linkerd-multus: linkerd-multus settings, not an object to apply: no API server serves multus.linkerd.io/v1alpha1, so an apply fails on it; list its file under transformers: in a kustomization, not under resources: (there kustomize copies it to the output and never runs the function), or mark it config.kubernetes.io/local-config: \"true\"\n"),
        "{}",
        run.stdout
    );
}

/// A workload or NAD past a cap of the secondary-network rule: the render refuses the
/// workload, naming its file, the resource, the field, the cap and the count, in a render's
/// error and in the KRM function's error result; the other workloads render.
#[test]
fn the_render_refuses_a_workload_past_a_cap_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_path("functions/linkerd-multus/examples/secondary-networks"),
        dir.path(),
    );
    let routes: Vec<String> = (0..129)
        .map(|i| format!(r#"{{"dst": "172.20.{}.{}/32"}}"#, i / 256, i % 256))
        .collect();
    let nads = dir.path().join("nads.yaml");
    let mut text = std::fs::read_to_string(&nads).unwrap();
    text.push_str(&format!(
        "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: wide\n  namespace: storage-demo\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\", \"ipam\": {{\"type\": \"static\", \"addresses\": [{{\"address\": \"10.60.0.5/24\"}}], \"routes\": [{}]}}}}'\n",
        routes.join(", ")
    ));
    std::fs::write(&nads, text).unwrap();
    let apps = dir.path().join("apps.yaml");
    let text = std::fs::read_to_string(&apps)
        .unwrap()
        .replacen("networks: storage", "networks: wide", 1)
        .replacen(
            "networks: lan",
            &format!("networks: {}", vec!["storage"; 65].join(",")),
            1,
        );
    std::fs::write(&apps, text).unwrap();

    let run = linkerd_multus(&["render", "."], dir.path(), "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "error: Deployment storage-demo/db (apps.yaml): NetworkAttachmentDefinition storage-demo/wide: its spec.config \"ipam.routes\" lists 129 routes; at most 128 are read (the routes cap): each becomes a subnet the pods that select the network skip; summarize them in fewer, wider routes\n\
         error: Deployment storage-demo/cache (apps.yaml (document 2)): annotation k8s.v1.cni.cncf.io/networks: selects 65 networks; at most 64 are read (the selections cap): Multus attaches each as an interface of the pod, and SR-IOV and macvlan pods select a handful; select fewer networks, or split the workload\n"
    );

    // The KRM function: an error result on each workload, naming its file and field.
    let mut items = Vec::new();
    for file in [
        "namespace.yaml",
        "linkerd-cni.yaml",
        "nads.yaml",
        "apps.yaml",
        "settings.yaml",
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        for (index, doc) in linkerd_multus::yaml::parse_stream(&text)
            .unwrap()
            .iter()
            .enumerate()
        {
            let mut doc = doc.to_json();
            let annotations = &mut doc["metadata"]["annotations"];
            if !annotations.is_object() {
                *annotations = serde_json::json!({});
            }
            annotations["config.kubernetes.io/path"] = file.into();
            annotations["config.kubernetes.io/index"] = index.to_string().into();
            items.push(doc);
        }
    }
    let list = serde_json::json!({"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items});
    let run = common::run(list.to_string().as_bytes());
    assert_eq!(run.code, 1, "{}", run.stderr);
    let output = linkerd_multus::yaml::parse_document(&run.stdout)
        .unwrap()
        .to_json();
    let errors: Vec<(String, String, String, String)> = output["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["severity"] == "error")
        .map(|r| {
            (
                r["file"]["path"].as_str().unwrap_or_default().to_string(),
                r["resourceRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r["field"]["path"].as_str().unwrap_or_default().to_string(),
                r["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let caps: Vec<(&str, &str, &str, bool)> = errors
        .iter()
        .map(|(file, name, field, message)| {
            let named =
                message.contains("(the routes cap)") || message.contains("(the selections cap)");
            (file.as_str(), name.as_str(), field.as_str(), named)
        })
        .collect();
    assert_eq!(
        caps,
        [
            (
                "apps.yaml",
                "db",
                "spec.template.metadata.annotations",
                true
            ),
            (
                "apps.yaml",
                "cache",
                "spec.template.metadata.annotations",
                true
            ),
        ],
        "{errors:?}"
    );
}

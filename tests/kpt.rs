//! End-to-end tests with the real `kpt` (`kpt fn eval --exec`, `kpt fn render --allow-exec`)
//! on copies of `testdata/packages/demo/`, asserting the files kpt writes back.
//!
//! kpt is required: when it is missing these tests fail (they never skip).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const DEMO_KPTFILE: &str = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: demo\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ninfo:\n  description: Demo package for linkerd-multus end-to-end tests\n";
const NAD_FILE: &str = "namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml";
const FUNCTION_KEYS_OR_MAPS: [&str; 4] = [
    "annotations:",
    "multus.linkerd.io/owned:",
    "k8s.v1.cni.cncf.io/networks:",
    "config.linkerd.io/proxy-uid:",
];

fn kpt() -> &'static str {
    static KPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KPT.get_or_init(|| {
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("kpt"))
                .find(|p| p.is_file())
        });
        match found {
            Some(p) => p.to_string_lossy().into_owned(),
            None => panic!(
                "kpt is not on PATH: install kpt (https://kpt.dev, 1.0.0-beta or later) to run \
                 the end-to-end tests; they do not skip"
            ),
        }
    })
}

/// A fresh copy of the demo package in a temporary directory.
struct Package {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Package {
    fn demo() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("demo");
        copy_dir(&repo_path("testdata/packages/demo"), &dir);
        // The Kptfile is written here, not kept in testdata: kpt renders every
        // package under the repository's root package (.krmignore or not).
        std::fs::write(dir.join("Kptfile"), DEMO_KPTFILE).unwrap();
        Package { _tmp: tmp, dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
    }

    fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.read(rel);
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        self.write(rel, &text.replacen(from, to, 1));
    }

    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        snapshot(&self.dir)
    }

    /// Adds a Kptfile pipeline running the binary.
    fn add_pipeline(&self, exec: &str) {
        self.add_mutators(&[(exec, None)]);
    }

    /// Adds a Kptfile pipeline of mutators: each an exec and its optional `configPath`.
    fn add_mutators(&self, mutators: &[(&str, Option<&str>)]) {
        let mut kptfile = self.read("Kptfile");
        kptfile.push_str("pipeline:\n  mutators:\n");
        for (exec, config) in mutators {
            kptfile.push_str(&format!("    - exec: \"{exec}\"\n"));
            if let Some(config) = config {
                kptfile.push_str(&format!("      configPath: {config}\n"));
            }
        }
        self.write("Kptfile", &kptfile);
    }

    /// Adds validators to the Kptfile pipeline (after any mutators): each an
    /// exec and its optional `configPath`.
    fn add_validators(&self, validators: &[(&str, Option<&str>)]) {
        let mut kptfile = self.read("Kptfile");
        if !kptfile.contains("\npipeline:\n") {
            kptfile.push_str("pipeline:\n");
        }
        kptfile.push_str("  validators:\n");
        for (exec, config) in validators {
            kptfile.push_str(&format!("    - exec: \"{exec}\"\n"));
            if let Some(config) = config {
                kptfile.push_str(&format!("      configPath: {config}\n"));
            }
        }
        self.write("Kptfile", &kptfile);
    }

    fn eval(&self, extra: &[&str]) -> KptRun {
        let dir = self.dir.to_string_lossy().into_owned();
        let mut args = vec!["fn", "eval", "--exec", bin(), dir.as_str()];
        args.extend_from_slice(extra);
        kpt_run(&args, &self.dir)
    }

    fn render(&self) -> KptRun {
        let dir = self.dir.to_string_lossy().into_owned();
        kpt_run(&["fn", "render", "--allow-exec", dir.as_str()], &self.dir)
    }
}

struct KptRun {
    ok: bool,
    output: String,
}

fn kpt_run(args: &[&str], cwd: &Path) -> KptRun {
    let out = Command::new(kpt())
        .args(args)
        .current_dir(cwd.parent().unwrap())
        .output()
        .unwrap_or_else(|e| panic!("cannot run kpt: {e}; install kpt to run these tests"));
    KptRun {
        ok: out.status.success(),
        output: format!(
            "kpt {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn original(rel: &str) -> Vec<u8> {
    if rel == "Kptfile" {
        return DEMO_KPTFILE.as_bytes().to_vec();
    }
    std::fs::read(repo_path("testdata/packages/demo").join(rel)).unwrap()
}

fn assert_same_files(a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)], what: &str) {
    let names = |s: &[(String, Vec<u8>)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}: different sets of files");
    for ((name, x), (_, y)) in a.iter().zip(b) {
        if x != y {
            let msg = first_difference(
                &format!("{what}: {name}"),
                &String::from_utf8_lossy(x),
                &String::from_utf8_lossy(y),
            )
            .unwrap_or_default();
            panic!("{msg}");
        }
    }
}

/// `changed` is `original` plus inserted lines, all of them the function's keys or the
/// `annotations:` maps that hold them, and at most a changed networks annotation value (so
/// comments, key order and everything else is kept).
fn assert_only_insertions(rel: &str, original: &str, changed: &str) {
    const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks:";
    let orig: Vec<&str> = original.lines().collect();
    let mut i = 0;
    let mut inserted = Vec::new();
    let indent = |l: &str| l.len() - l.trim_start().len();
    for line in changed.lines() {
        if i < orig.len() && orig[i] == line {
            i += 1;
        } else if i < orig.len()
            && orig[i].trim_start().starts_with(NETWORKS)
            && line.trim_start().starts_with(NETWORKS)
            && indent(orig[i]) == indent(line)
        {
            // The user's networks annotation, with the function's entry appended.
            i += 1;
            inserted.push(line);
        } else {
            inserted.push(line);
        }
    }
    assert_eq!(
        i,
        orig.len(),
        "{rel}: original line {} ({:?}) is missing or moved in:\n{changed}",
        i + 1,
        orig.get(i)
    );
    for line in &inserted {
        let t = line.trim_start();
        assert!(
            FUNCTION_KEYS_OR_MAPS.iter().any(|k| t.starts_with(k)),
            "{rel}: unexpected inserted line {line:?} in:\n{changed}"
        );
    }
    assert!(!inserted.is_empty(), "{rel}: not changed");
}

/// Checks the package after the first successful render of the demo package.
fn assert_rendered(pkg: &Package, nad_name: &str) {
    // The NAD, at the documented place, with the generated config and no host annotations.
    let nad_file = format!("namespaces/networkattachmentdefinition_demo_{nad_name}.yaml");
    let nad_text = pkg.read(&nad_file);
    assert!(
        !nad_text.contains("config.kubernetes.io/"),
        "kpt left host annotations in {nad_file}:\n{nad_text}"
    );
    let nad = parse_yaml(&nad_text).expect("NAD file parses");
    assert_eq!(
        nad.id(),
        (
            "NetworkAttachmentDefinition".into(),
            "demo".into(),
            nad_name.into()
        )
    );
    assert_eq!(nad.str_at(&["apiVersion"]), Some("k8s.cni.cncf.io/v1"));
    assert_eq!(
        nad.str_at(&["metadata", "labels", MANAGED_BY]),
        Some("linkerd-multus")
    );
    let config: serde_json::Value =
        serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
    assert_eq!(config["cniVersion"], "0.3.0");
    assert_eq!(
        config["kubernetes"]["kubeconfig"],
        "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
    );
    assert_eq!(config["linkerd"]["iptables-mode"], "nft");
    assert!(config.get("policy").is_none());

    // Workloads changed by insertions only: comments and key order kept.
    for rel in ["apps/web.yaml", "apps/worker.yaml"] {
        let orig = String::from_utf8(original(rel)).unwrap();
        assert_only_insertions(rel, &orig, &pkg.read(rel));
    }
    let web = parse_yaml(&pkg.read("apps/web.yaml")).unwrap();
    assert_eq!(
        web.keys(),
        vec!["kind", "metadata", "apiVersion", "spec"],
        "key order of web.yaml"
    );
    assert_eq!(
        web.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some(nad_name)
    );
    assert_eq!(
        web.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "config.linkerd.io/proxy-uid"
        ]),
        Some("1000002102")
    );
    let worker = parse_yaml(&pkg.read("apps/worker.yaml")).unwrap();
    assert_eq!(
        worker.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some(format!("storage/backend@net1,{nad_name}").as_str())
    );

    // Everything else byte-identical.
    for rel in [
        "Kptfile",
        "apps/db.yaml",
        "linkerd-cni/config.yaml",
        "misc/tricky.yaml",
        "namespaces/demo.yaml",
        "namespaces/plain.yaml",
    ] {
        if rel == "Kptfile" && pkg.read(rel).contains("pipeline:") {
            continue;
        }
        assert!(
            pkg.read(rel).as_bytes() == original(rel).as_slice(),
            "{rel} changed:\n{}",
            first_difference(
                rel,
                &String::from_utf8_lossy(&original(rel)),
                &pkg.read(rel)
            )
            .unwrap_or_default()
        );
    }
    let files: Vec<String> = pkg.snapshot().into_iter().map(|(n, _)| n).collect();
    let mut want: Vec<String> = snapshot(&repo_path("testdata/packages/demo"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    want.push(nad_file);
    want.push("Kptfile".into());
    want.sort();
    assert_eq!(files, want, "files in the package after the render");
}

#[test]
fn kpt_is_installed() {
    let out = Command::new(kpt())
        .arg("version")
        .output()
        .expect("kpt runs");
    assert!(out.status.success(), "`kpt version` failed");
}

#[test]
fn eval_exec_writes_nad_and_attaches_workloads() {
    let pkg = Package::demo();
    let run = pkg.eval(&[]);
    assert!(run.ok, "{}", run.output);
    assert_rendered(&pkg, "linkerd-cni");

    // A second eval changes nothing.
    let before = pkg.snapshot();
    let run = pkg.eval(&[]);
    assert!(run.ok, "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "second eval");
}

#[test]
fn eval_exec_with_configmap_function_config() {
    // `-- key=value` sends a ConfigMap functionConfig.
    let pkg = Package::demo();
    let run = pkg.eval(&["--", "linkerdNamespace=linkerd"]);
    assert!(run.ok, "{}", run.output);
    assert_rendered(&pkg, "linkerd-cni");

    let pkg = Package::demo();
    let run = pkg.eval(&["--", "nadName=mesh-cni", "proxyUIDOffset=2102"]);
    assert!(run.ok, "{}", run.output);
    assert_rendered(&pkg, "mesh-cni");
    assert!(!pkg.path(NAD_FILE).exists());

    // A bad setting fails and writes nothing.
    let pkg = Package::demo();
    let before = pkg.snapshot();
    let run = pkg.eval(&["--", "cniVersion=9.9.9"]);
    assert!(!run.ok, "a bad setting must fail:\n{}", run.output);
    assert!(run.output.contains("cniVersion"), "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "failed eval");
}

#[test]
fn render_pipeline_then_disable() {
    let pkg = Package::demo();
    pkg.add_pipeline(bin());
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_rendered(&pkg, "linkerd-cni");

    // Same files as `kpt fn eval --exec`.
    let evaluated = Package::demo();
    assert!(evaluated.eval(&[]).ok);
    let strip_kptfile = |s: Vec<(String, Vec<u8>)>| {
        s.into_iter()
            .filter(|(n, _)| n != "Kptfile")
            .collect::<Vec<_>>()
    };
    assert_same_files(
        &strip_kptfile(evaluated.snapshot()),
        &strip_kptfile(pkg.snapshot()),
        "render vs eval",
    );

    // A second render changes nothing.
    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "second render");

    // Disabling the namespace removes exactly what the renders added: every file is back to
    // the original bytes (the Kptfile keeps its pipeline, the Namespace its edit).
    pkg.edit(
        "namespaces/demo.yaml",
        "linkerd.io/multus: enabled",
        "linkerd.io/multus: disabled",
    );
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert!(
        !pkg.path(NAD_FILE).exists(),
        "the NAD file is still there after disabling the namespace"
    );
    let mut expected: Vec<(String, Vec<u8>)> = snapshot(&repo_path("testdata/packages/demo"))
        .into_iter()
        .map(|(n, bytes)| match n.as_str() {
            "namespaces/demo.yaml" => (
                n.clone(),
                String::from_utf8(bytes)
                    .unwrap()
                    .replace("linkerd.io/multus: enabled", "linkerd.io/multus: disabled")
                    .into_bytes(),
            ),
            _ => (n, bytes),
        })
        .collect();
    expected.push((
        "Kptfile".into(),
        std::fs::read(pkg.path("Kptfile")).unwrap(),
    ));
    expected.sort();
    assert_same_files(&expected, &pkg.snapshot(), "after disabling");

    // And enabling it again gives the first render back.
    pkg.edit(
        "namespaces/demo.yaml",
        "linkerd.io/multus: disabled",
        "linkerd.io/multus: enabled",
    );
    assert!(pkg.render().ok);
    assert_same_files(&before, &pkg.snapshot(), "after re-enabling");
}

#[test]
fn render_after_annotation_removed() {
    let pkg = Package::demo();
    pkg.add_pipeline(bin());
    assert!(pkg.render().ok);
    pkg.edit(
        "namespaces/demo.yaml",
        "    linkerd.io/multus: enabled # attach the linkerd-cni NAD\n",
        "",
    );
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert!(!pkg.path(NAD_FILE).exists());
    for rel in ["apps/web.yaml", "apps/worker.yaml", "apps/db.yaml"] {
        assert!(
            pkg.read(rel).as_bytes() == original(rel).as_slice(),
            "{rel} not restored:\n{}",
            pkg.read(rel)
        );
    }
}

#[test]
fn failing_render_leaves_every_file() {
    let pkg = Package::demo();
    pkg.add_pipeline(bin());
    pkg.edit(
        "apps/worker.yaml",
        "k8s.v1.cni.cncf.io/networks: storage/backend@net1",
        "k8s.v1.cni.cncf.io/networks: '[{\"name\": '",
    );
    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(!run.ok, "render must fail:\n{}", run.output);
    assert!(
        run.output.contains("k8s.v1.cni.cncf.io/networks"),
        "kpt output does not say what is wrong:\n{}",
        run.output
    );
    assert_same_files(&before, &pkg.snapshot(), "failed render");

    let run = pkg.eval(&[]);
    assert!(!run.ok, "eval must fail:\n{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "failed eval");
}

/// JSON files: kpt itself rewrites them (sorted keys, its own indentation) whatever the
/// function does, so an unrelated JSON file must come out as it does with an identity
/// function; a JSON workload gets attached and stays JSON.
#[test]
fn json_files_in_the_package() {
    let flags = r#"{
  "apiVersion": "v1",
  "kind": "ConfigMap",
  "metadata": {"name": "flags", "namespace": "plain"},
  "data": {"a": "yes", "b": "0644", "c": "~"}
}
"#;
    let api = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "api", "namespace": "demo"},
 "spec": {"selector": {"matchLabels": {"app": "api"}},
  "template": {"metadata": {"labels": {"app": "api"}},
   "spec": {"containers": [{"name": "api", "image": "nginx", "args": ["yes", "0644"]}]}}}}
"#;
    let with_json = |exec: &str| {
        let pkg = Package::demo();
        pkg.write("misc/flags.json", flags);
        pkg.write("apps/api.json", api);
        pkg.add_pipeline(exec);
        let run = pkg.render();
        assert!(run.ok, "{}", run.output);
        pkg
    };
    let ours = with_json(bin());
    let identity = with_json("/bin/cat");
    assert_eq!(
        ours.read("misc/flags.json"),
        identity.read("misc/flags.json"),
        "unrelated JSON file differs from what kpt writes with an identity function"
    );
    let api_out: serde_json::Value =
        serde_json::from_str(&ours.read("apps/api.json")).expect("api.json is still JSON");
    let ann = &api_out["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(ann["k8s.v1.cni.cncf.io/networks"], "linkerd-cni");
    assert_eq!(ann["config.linkerd.io/proxy-uid"], "1000002102");
    assert_eq!(
        api_out["spec"]["template"]["spec"]["containers"][0]["args"],
        serde_json::json!(["yes", "0644"])
    );
    // A second render is stable.
    let before = ours.snapshot();
    assert!(ours.render().ok);
    assert_same_files(&before, &ours.snapshot(), "second render with JSON files");
}

#[test]
fn repository_package_renders_the_kpt_example() {
    // The root Kptfile and .krmignore as committed, over the repository's
    // functions/ and testdata/ (which hold files that are not resources).
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    for file in ["Kptfile", ".krmignore"] {
        std::fs::copy(repo_path(file), root.join(file)).unwrap();
    }
    // deploy/ is a subpackage (its own Kptfile): kpt renders it too, whatever .krmignore
    // says, and writes its files back.
    for dir in ["functions", "testdata", "deploy"] {
        copy_dir(&repo_path(dir), &root.join(dir));
    }
    let release = root.join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::os::unix::fs::symlink(bin(), release.join("linkerd-multus")).unwrap();
    let before = snapshot(&root.join("functions"));
    let deploy = snapshot(&repo_path("deploy"));
    let out = Command::new(kpt())
        .args(["fn", "render", "--allow-exec", "."])
        .current_dir(&root)
        .output()
        .expect("kpt runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = snapshot(&root.join("functions"));
    assert_same_files(
        &deploy,
        &snapshot(&root.join("deploy")),
        "deploy/ after kpt fn render",
    );
    let changed: Vec<&str> = after
        .iter()
        .filter(|f| !before.contains(f))
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert_eq!(
        changed,
        [
            "linkerd-multus/examples/kpt/apps/web.yaml",
            "linkerd-multus/examples/kpt/namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml",
        ]
    );
    // Rendered: the CI gate passes, and rendering again changes nothing.
    let check = Command::new(bin())
        .args(["check", "functions/linkerd-multus/examples/kpt"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let again = Command::new(kpt())
        .args(["fn", "render", "--allow-exec", "."])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(snapshot(&root.join("functions")), after);
    // The deploy/ package is a fixed point of kpt: every file byte for byte as committed.
    assert_same_files(
        &deploy,
        &snapshot(&root.join("deploy")),
        "deploy/ after a second render",
    );
}

/// The two functions in one pipeline: LinkerdMultus attaches Linkerd-CNI, then
/// NetworkResources (its config a file of the package) requests the devices of
/// the networks every workload selects, the generated linkerd-cni NAD included.
/// A second render changes nothing; dropping the selection removes exactly what
/// the rules added.
#[test]
fn render_pipeline_with_network_resources() {
    let pkg = Package::demo();
    pkg.write(
        "network-resources.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nmetadata:\n  name: network-resources\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  resourceNameKeys: [k8s.v1.cni.cncf.io/resourceName]\n",
    );
    pkg.write(
        "apps/sriov.yaml",
        "# The SR-IOV network of the DPDK app.\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: sriov-net\n  namespace: demo\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov\n    k8s.v1.cni.cncf.io/nodeSelector: feature.node.kubernetes.io/sriov=true\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"name\": \"sriov-net\", \"type\": \"sriov\"}'\n---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: backend\n  namespace: storage\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"name\": \"backend\", \"type\": \"macvlan\"}'\n",
    );
    let dpdk = "# A DPDK app on the SR-IOV network.\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dpdk\n  namespace: demo\nspec:\n  selector:\n    matchLabels:\n      app: dpdk\n  template:\n    metadata:\n      labels:\n        app: dpdk\n      annotations:\n        k8s.v1.cni.cncf.io/networks: sriov-net, sriov-net # two VFs\n    spec:\n      containers:\n        - name: dpdk\n          image: registry.example/dpdk:1\n";
    pkg.write("apps/dpdk.yaml", dpdk);
    pkg.add_mutators(&[(bin(), None), (bin(), Some("network-resources.yaml"))]);

    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    let out = pkg.read("apps/dpdk.yaml");
    let doc = parse_yaml(&out).unwrap();
    let container = &doc
        .at(&["spec", "template", "spec", "containers"])
        .unwrap()
        .seq()[0];
    for field in ["requests", "limits"] {
        assert_eq!(
            container.str_at(&["resources", field, "intel.com/sriov"]),
            Some("2"),
            "{field}:\n{out}"
        );
    }
    assert_eq!(
        doc.str_at(&[
            "spec",
            "template",
            "spec",
            "nodeSelector",
            "feature.node.kubernetes.io/sriov"
        ]),
        Some("true"),
        "{out}"
    );
    assert_eq!(
        doc.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some("sriov-net, sriov-net, linkerd-cni"),
        "{out}"
    );
    assert!(out.contains("# two VFs"), "the comment is lost:\n{out}");

    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "second render");

    // Dropping the SR-IOV selection removes the resources and the node selector.
    pkg.edit(
        "apps/dpdk.yaml",
        "sriov-net, sriov-net, linkerd-cni",
        "linkerd-cni",
    );
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    let out = pkg.read("apps/dpdk.yaml");
    for gone in [
        "intel.com/sriov",
        "nodeSelector",
        "resources:",
        "multus.linkerd.io/network-resources",
    ] {
        assert!(!out.contains(gone), "{gone} is still there:\n{out}");
    }

    // A selection of a NAD that exists nowhere fails the render and writes nothing.
    pkg.edit(
        "apps/dpdk.yaml",
        "networks: linkerd-cni",
        "networks: linkerd-cni, absent",
    );
    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(!run.ok, "{}", run.output);
    assert!(
        run.output
            .contains("NetworkAttachmentDefinition demo/absent, which does not exist"),
        "{}",
        run.output
    );
    assert_same_files(&before, &pkg.snapshot(), "failed render");
}

/// LinkerdMultus then NetworkResources with `interfaceNames: deterministic`: the
/// linkerd-cni entry LinkerdMultus appends gets its Kaloom name, a second render
/// keeps it (LinkerdMultus knows the named entry as its own), and taking the
/// namespace off Multus removes the named entry.
#[test]
fn render_pipeline_names_interfaces() {
    let pkg = Package::demo();
    pkg.write(
        "network-resources.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\nmetadata:\n  name: network-resources\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  interfaceNames: deterministic\n",
    );
    pkg.write(
        "apps/backend.yaml",
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: backend\n  namespace: storage\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"name\": \"backend\", \"type\": \"macvlan\"}'\n",
    );
    pkg.add_mutators(&[(bin(), None), (bin(), Some("network-resources.yaml"))]);
    let networks = |pkg: &Package| {
        parse_yaml(&pkg.read("apps/web.yaml"))
            .unwrap()
            .str_at(&[
                "spec",
                "template",
                "metadata",
                "annotations",
                "k8s.v1.cni.cncf.io/networks",
            ])
            .map(str::to_string)
    };

    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_eq!(
        networks(&pkg).as_deref(),
        Some("linkerd-cni@net6a72ae7dcd39")
    );
    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "second render");

    pkg.edit(
        "namespaces/demo.yaml",
        "    linkerd.io/multus: enabled # attach the linkerd-cni NAD\n",
        "",
    );
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_eq!(networks(&pkg), None, "{}", pkg.read("apps/web.yaml"));
}

/// `configRollout: all` through `kpt fn render`: attached pod templates carry the hash of
/// their NAD's config, a second render changes nothing, and a changed ConfigMap changes the
/// NAD and exactly the attached workloads' hashes.
#[test]
fn config_rollout_rolls_exactly_the_attached_workloads() {
    use sha2::{Digest, Sha256};
    const HASH: &str = "multus.linkerd.io/config-hash";
    let pkg = Package::demo();
    pkg.write(
        "linkerd-multus.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nmetadata:\n  name: linkerd-multus\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  configRollout: all\n",
    );
    pkg.add_mutators(&[(bin(), Some("linkerd-multus.yaml"))]);
    let hash_of = |rel: &str| -> Option<String> {
        parse_yaml(&pkg.read(rel))
            .unwrap()
            .str_at(&["spec", "template", "metadata", "annotations", HASH])
            .map(str::to_string)
    };
    let nad_hash = || -> String {
        let nad = parse_yaml(&pkg.read(NAD_FILE)).unwrap();
        let digest = Sha256::digest(nad.str_at(&["spec", "config"]).unwrap().as_bytes());
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    };
    let attached = ["apps/web.yaml", "apps/worker.yaml"];

    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    let first = nad_hash();
    for rel in attached {
        assert_eq!(hash_of(rel).as_deref(), Some(first.as_str()), "{rel}");
    }
    assert_eq!(
        hash_of("apps/db.yaml"),
        None,
        "an unattached workload is stamped"
    );

    // Rendering again changes nothing.
    let before = pkg.snapshot();
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    assert_same_files(
        &before,
        &pkg.snapshot(),
        "second render with configRollout: all",
    );

    // A changed ConfigMap: the NAD and the attached workloads' hashes change, nothing else.
    pkg.edit(
        "linkerd-cni/config.yaml",
        "\"log_level\": \"info\"",
        "\"log_level\": \"debug\"",
    );
    let edited = pkg.snapshot();
    let run = pkg.render();
    assert!(run.ok, "{}", run.output);
    let after = pkg.snapshot();
    let changed: Vec<&str> = edited
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|((name, _), _)| name.as_str())
        .collect();
    assert_eq!(
        changed,
        [
            "apps/web.yaml",
            "apps/worker.yaml",
            "namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml"
        ],
        "files changed by the render after the ConfigMap edit"
    );
    let second = nad_hash();
    assert_ne!(first, second);
    for rel in attached {
        assert_eq!(hash_of(rel).as_deref(), Some(second.as_str()), "{rel}");
        // Only the hash line of the pod template changed.
        let old = &before.iter().find(|(n, _)| n == rel).unwrap().1;
        let old = String::from_utf8_lossy(old);
        let new = pkg.read(rel);
        let differing: Vec<(&str, &str)> = old
            .lines()
            .zip(new.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(old.lines().count(), new.lines().count(), "{rel}");
        assert_eq!(differing.len(), 1, "{rel}: {differing:?}");
        assert!(
            differing[0].1.trim_start().starts_with(HASH),
            "{rel}: {differing:?}"
        );
    }
    for rel in ["apps/db.yaml", "misc/tricky.yaml", "namespaces/plain.yaml"] {
        assert!(
            pkg.read(rel).as_bytes() == original(rel).as_slice(),
            "{rel} changed"
        );
    }
}

/// The binary as a kpt validator (`pipeline.validators`, `configPath` to a Validation): a
/// package with an invalid NAD, a malformed networks annotation and a selection across
/// namespaces under isolation fails the render with each problem reported and no file
/// written; fixed, it passes, also after the binary as a mutator (whose generated NAD is valid).
#[test]
fn render_pipeline_with_a_validator() {
    let pkg = Package::demo();
    pkg.write(
        "validation.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata:\n  name: validation\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  namespaceIsolation: true\n",
    );
    let bad_nad = "# A bridge network without a plugin type.\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: bridge\n  namespace: demo\nspec:\n  config: '{\"cniVersion\": \"0.4.0\", \"name\": \"bridge\", \"plugins\": [{\"bridge\": \"br0\"}]}'\n";
    let good_nad = bad_nad.replace("[{", "[{\"type\": \"bridge\", ");
    pkg.write("apps/bridge.yaml", bad_nad);
    let api = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: demo\nspec:\n  selector:\n    matchLabels:\n      app: api\n  template:\n    metadata:\n      labels:\n        app: api\n      annotations:\n        k8s.v1.cni.cncf.io/networks: bridge, storage/backend, Bad@net1\n    spec:\n      containers:\n        - name: api\n          image: registry.example/api:1\n";
    pkg.write("apps/api.yaml", api);
    pkg.add_validators(&[(bin(), Some("validation.yaml"))]);
    let dir = pkg.dir.to_string_lossy().into_owned();
    let render = || {
        kpt_run(
            &[
                "fn",
                "render",
                "--allow-exec",
                "--truncate-output=false",
                dir.as_str(),
            ],
            &pkg.dir,
        )
    };

    let before = pkg.snapshot();
    let run = render();
    assert!(!run.ok, "the validator passed:\n{}", run.output);
    for message in [
        "CNI configuration has no \"plugins[0].type\"",
        "Multus rejects the networks annotation: item 3 \"Bad@net1\": network name \"Bad\" is not a DNS-1123 label",
    ] {
        assert!(
            run.output.contains(message),
            "{message} not in:\n{}",
            run.output
        );
    }
    assert_same_files(&before, &pkg.snapshot(), "a render the validator failed");

    // The annotation fixed, the selection across namespaces is still refused.
    pkg.edit("apps/api.yaml", ", Bad@net1", "");
    pkg.write("apps/bridge.yaml", &good_nad);
    let run = render();
    assert!(!run.ok, "the validator passed:\n{}", run.output);
    assert!(
        run.output.contains("selects storage/backend, but with namespace isolation a pod in namespace demo may select only NADs in demo or in a global namespace"),
        "{}",
        run.output
    );

    // Global, it passes and changes nothing.
    pkg.edit(
        "validation.yaml",
        "namespaceIsolation: true\n",
        "namespaceIsolation: true\n  globalNamespaces: [default, storage]\n",
    );
    let before = pkg.snapshot();
    let run = render();
    assert!(run.ok, "{}", run.output);
    assert_same_files(&before, &pkg.snapshot(), "a render with only a validator");

    // After the mutator: its output (a generated NAD) is written and valid.
    pkg.write("Kptfile", DEMO_KPTFILE);
    pkg.add_mutators(&[(bin(), None)]);
    pkg.add_validators(&[(bin(), Some("validation.yaml"))]);
    let run = render();
    assert!(run.ok, "{}", run.output);
    assert!(pkg.path(NAD_FILE).is_file(), "{}", run.output);
    assert_eq!(
        pkg.read("apps/bridge.yaml"),
        good_nad,
        "the validator changed a file"
    );

    // A malformed Validation fails the render, naming the setting.
    pkg.edit("validation.yaml", "globalNamespaces:", "globalNamespace:");
    let run = render();
    assert!(!run.ok, "{}", run.output);
    assert!(run.output.contains("unknown setting \"globalNamespace\"; valid settings are namespaceIsolation, globalNamespaces"), "{}", run.output);
}

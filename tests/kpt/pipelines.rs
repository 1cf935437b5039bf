//! kpt runs the function: `fn eval --exec`, render pipelines and switching off, failing
//! renders, JSON files and the repository's kpt example.

use super::*;
use crate::common::process::Guarded;

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
        .guarded_output()
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
        .args(["diff", "functions/linkerd-multus/examples/kpt"])
        .current_dir(&root)
        .guarded_output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let again = Command::new(kpt())
        .args(["fn", "render", "--allow-exec", "."])
        .current_dir(&root)
        .guarded_output()
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

/// Mistakes in the settings and the package, made through the real kpt: each fails and
/// writes nothing, and the message names what the user wrote. `kpt fn eval -- key=value`
/// makes a ConfigMap named `function-input` of the arguments, which messages named before.
#[test]
fn settings_mistakes_name_what_the_user_wrote() {
    /// The arguments after the package, the edit before the run, what kpt must print.
    type Case<'a> = (&'a [&'a str], &'a dyn Fn(&Package), &'a str);
    let cases: [Case; 4] = [
        (
            &[
                "--",
                "nadNme=mesh",
                "cniNamspace=cni",
                "linkerdNamespace=linkerd",
            ],
            &|_| {},
            "[error]: the arguments `nadNme=mesh` and `cniNamspace=cni` after `--`: unknown settings \"nadNme\" (did you mean nadName?) and \"cniNamspace\" (did you mean cniNamespace?); valid settings are cniNamespace, linkerdNamespace, nadName, cniKubeconfig, cniVersion, uidRangeAnnotation, proxyUIDOffset, namespaces, workloadKinds, defaultNamespace, configRollout, nadSyncWave, skipSecondarySubnets, clusterCIDRs, protectedCIDRs\n",
        ),
        (
            &["--", "proxyUIDOffset=-1"],
            &|_| {},
            "[error]: the argument `proxyUIDOffset=-1` after `--`: setting proxyUIDOffset: \"-1\" is not a whole number from 0 to 4294967295\n",
        ),
        // The function sees the ConfigMap as kpt rewrote it: the line is the value's.
        (
            &[],
            &|pkg| {
                pkg.edit(
                    "linkerd-cni/config.yaml",
                    "\"proxy-uid\": 2102,",
                    "\"proxy-uid\": 2102",
                )
            },
            "[error] v1/ConfigMap/linkerd-cni/linkerd-cni-config data.cni_network_config: data.cni_network_config is not valid JSON: expected `,` or `}` at line 12 column 5 of the value\n",
        ),
        // Settings that would be applied as they are (no local-config annotation).
        (
            &[],
            &|pkg| {
                pkg.write("linkerd-multus.yaml", "apiVersion: multus.linkerd.io/v1\nkind: LinkerdMultus\nmetadata:\n  name: linkerd-multus\nspec:\n  nadName: mesh\n")
            },
            "[error] multus.linkerd.io/v1/LinkerdMultus/linkerd-multus: apiVersion \"multus.linkerd.io/v1\" is not one linkerd-multus reads; write apiVersion: multus.linkerd.io/v1alpha1; as it is, it is no linkerd-multus settings object but an object to apply\n",
        ),
    ];
    for (args, edit, want) in cases {
        let pkg = Package::demo();
        edit(&pkg);
        let before = pkg.snapshot();
        let run = pkg.eval(args);
        assert!(!run.ok, "{args:?} must fail:\n{}", run.output);
        assert!(run.output.contains(want), "{args:?}:\n{}", run.output);
        assert_same_files(&before, &pkg.snapshot(), "failed eval");
    }
}

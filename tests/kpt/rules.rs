//! Render pipelines with the other rule sets and settings: network resources, interface
//! names, config rollouts and a validator.

use super::*;

const HASH: &str = "multus.linkerd.io/config-hash";

/// The two functions in one pipeline: LinkerdMultus attaches Linkerd-CNI, then
/// NetworkResources (its config a file of the package) requests the devices of
/// the networks every workload selects, the generated linkerd-cni NAD included.
/// A second render changes nothing; dropping the selection removes exactly what
/// the rules added.
#[test]
fn render_pipeline_with_network_resources() {
    let pkg = demo_with_sriov();

    assert_dpdk_gets_its_resources(&pkg);

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

/// The demo package with the network-resources rules, an SR-IOV NAD and a DPDK app selecting
/// it twice, rendered by both functions.
fn demo_with_sriov() -> Package {
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
    pkg
}

/// A render gives the DPDK app its two VFs' resources and node selector, and the Linkerd-CNI
/// NAD after its own.
fn assert_dpdk_gets_its_resources(pkg: &Package) {
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
    assert_changed_files(&edited, &after);
    let second = nad_hash();
    assert_ne!(first, second);
    for rel in attached {
        assert_eq!(hash_of(rel).as_deref(), Some(second.as_str()), "{rel}");
        assert_only_the_hash_line_changed(&pkg, &before, rel);
    }
    for rel in ["apps/db.yaml", "misc/tricky.yaml", "namespaces/plain.yaml"] {
        assert!(
            pkg.read(rel).as_bytes() == original(rel).as_slice(),
            "{rel} changed"
        );
    }
}

/// Only the hash line of `rel`'s pod template changed since `before`.
fn assert_only_the_hash_line_changed(pkg: &Package, before: &[(String, Vec<u8>)], rel: &str) {
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

/// The files a render after the ConfigMap edit changed: the NAD and the attached workloads.
fn assert_changed_files(edited: &[(String, Vec<u8>)], after: &[(String, Vec<u8>)]) {
    let changed: Vec<&str> = edited
        .iter()
        .zip(after)
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
    let render = || render_all(&pkg);

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
    assert!(run.output.contains("unknown setting \"globalNamespace\" (did you mean globalNamespaces?); valid settings are namespaceIsolation, globalNamespaces"), "{}", run.output);
}

/// `kpt fn render` of `pkg`, every message in full.
fn render_all(pkg: &Package) -> KptRun {
    let dir = pkg.dir.to_string_lossy().into_owned();
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
}

/// A misspelt `linkerd.io/multus` on a pod template, through the real `kpt fn render`: the
/// mutator's warning is in kpt's results, the render passes and leaves the workload
/// unattached; a meshed namespace without the annotation gets an info result saying how to
/// enable it. The binary as a validator fails the render on the typo and writes nothing.
#[test]
fn render_reports_a_misspelt_multus_value() {
    let pkg = Package::demo();
    pkg.edit(
        "apps/web.yaml",
        "    metadata:\n      labels:\n        app: web\n",
        "    metadata:\n      annotations:\n        linkerd.io/multus: enable\n      labels:\n        app: web\n",
    );
    pkg.edit(
        "namespaces/plain.yaml",
        "  labels:\n",
        "  annotations:\n    linkerd.io/inject: enabled\n  labels:\n",
    );
    pkg.add_pipeline(bin());
    let run = render_all(&pkg);
    assert!(run.ok, "{}", run.output);
    for message in [
        "spec.template.metadata.annotations.linkerd.io/multus is \"enable\", neither enabled nor disabled: the pod template is treated as not enabled, so its pods are not attached to Linkerd-CNI, whatever the namespace says; did you mean enabled?",
        "the namespace is meshed (linkerd.io/inject: enabled) but has no linkerd.io/multus annotation, so its pods are attached to Linkerd-CNI only where their own template says linkerd.io/multus: enabled; annotate the namespace linkerd.io/multus=enabled to attach Linkerd-CNI",
    ] {
        assert!(
            run.output.contains(message),
            "{message} not in:\n{}",
            run.output
        );
    }
    assert!(
        !pkg.read("apps/web.yaml")
            .contains("k8s.v1.cni.cncf.io/networks"),
        "{}",
        pkg.read("apps/web.yaml")
    );

    pkg.write(
        "validation.yaml",
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata:\n  name: validation\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec:\n  namespaceIsolation: false\n",
    );
    pkg.add_validators(&[(bin(), Some("validation.yaml"))]);
    let before = pkg.snapshot();
    let run = render_all(&pkg);
    assert!(!run.ok, "the validator passed:\n{}", run.output);
    assert!(
        run.output.contains("\"enable\" is neither enabled nor disabled: linkerd-multus and its webhook treat the pod template as not enabled"),
        "{}",
        run.output
    );
    assert_same_files(&before, &pkg.snapshot(), "a render the validator failed");
}

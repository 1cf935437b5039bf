//! End-to-end tests of the container image: `scripts/container.sh` builds it (FROM scratch,
//! the static binary, USER 65534) once per test binary, under this checkout's own tag
//! ([`common::dev_image`]: the documented `localhost/linkerd-multus:dev` with a hash of the
//! checkout's path, so two checkouts testing at once never replace each other's image), then
//! the real hosts run it:
//!
//! * `kpt fn render` with a Kptfile pipeline `image: <that tag>` and `KPT_FN_RUNTIME=podman`;
//! * `kubectl kustomize --enable-alpha-plugins` with a container transformer, through a
//!   `docker` → podman symlink (what Debian's podman-docker package installs).
//!
//! podman, kpt and kubectl are required: when one is missing or podman cannot run containers
//! these tests fail with what to install (they never skip). `scripts/install-podman.sh` sets
//! podman up on the CI machine kind.
//!
//! A test binary of its own (Cargo.toml's `[[test]] container`), not a module of
//! tests/suite.rs: its first test builds the static release binary and the image (every core,
//! for minutes), which the timing-bound tests of the suite (the NAD controller's leases, the
//! soak, the webhook's limits) must not run beside.
//!
//! What the hosts run, as observed with a logging shim (kpt 1.0.0-beta.56, kubectl 1.32):
//!
//! * kpt: `podman run --rm -i --network none --user nobody --security-opt=no-new-privileges
//!   --pull missing IMAGE`. `--pull` follows `--image-pull-policy`: the default is
//!   IfNotPresent (`--pull missing`, although `kpt fn render --help` says "always"), so a
//!   locally built image runs without a registry; `--image-pull-policy always` fails here
//!   (podman tries `https://localhost/v2/`). `--user nobody` is resolved through the image's
//!   /etc/passwd, hence container/passwd.
//! * kustomize: `docker run --rm -i -a STDIN -a STDOUT -a STDERR --network none --user nobody
//!   --security-opt=no-new-privileges -e LOG_TO_STDERR=true -e STRUCTURED_RESULTS=true IMAGE`,
//!   no pull option (podman's default is "missing"). podman 4.3 accepts every one of these
//!   flags. The `docker` on this machine (/usr/local/bin/docker) is a client with no engine
//!   and fails with "Cannot connect to the Docker daemon", hence the shim first on PATH.

mod common;

use crate::common::process::Guarded;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use common::output_text as text;
use common::*;

/// The kpt example package (no Kptfile of its own: the tests write one).
const EXAMPLE: &str = "functions/linkerd-multus/examples/kpt";
const KUSTOMIZE_EXAMPLE: &str = "functions/linkerd-multus/examples/kustomize-container";
/// The image the examples name; the tests swap in the one built here.
const PUBLISHED_IMAGE: &str = "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0";
const NAD_FILE: &str = "namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml";

/// Where `tool` is on PATH; panics with `install` when it is not there.
fn require_tool(tool: &str, install: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(tool))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{tool} is not on PATH: {install}; the container tests need it (they do not skip)"
            )
        })
}

fn podman() -> &'static Path {
    static PODMAN: OnceLock<PathBuf> = OnceLock::new();
    PODMAN.get_or_init(|| {
        require_tool(
            "podman",
            "install podman and runc (as root: scripts/install-podman.sh, which also writes the \
             containers.conf settings this machine kind needs)",
        )
    })
}

fn kpt() -> &'static Path {
    static KPT: OnceLock<PathBuf> = OnceLock::new();
    KPT.get_or_init(|| require_tool("kpt", "install kpt (https://kpt.dev, 1.0.0-beta or later)"))
}

fn kubectl() -> &'static Path {
    static KUBECTL: OnceLock<PathBuf> = OnceLock::new();
    KUBECTL.get_or_init(|| {
        require_tool(
            "kubectl",
            "install kubectl (https://kubernetes.io/docs/tasks/tools/, 1.27 or later)",
        )
    })
}

/// Runs `cmd`, panicking with `what` when it cannot start.
fn output(cmd: &mut Command, what: &str) -> Output {
    cmd.guarded_output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"))
}

/// Runs `cmd` with `input` on stdin.
fn run_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = common::process::Guard::spawn(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut stdin = child.take_stdin().unwrap();
    let data = input.to_vec();
    // From a thread, so a child that writes much before reading all cannot deadlock us; a
    // broken pipe shows in the exit status and stderr.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Builds the image with scripts/container.sh, once for all tests of this binary (the other
/// tests wait for the first one's build). Returns the image name.
fn image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    let image = IMAGE.get_or_init(dev_image);
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        podman();
        let info = output(
            Command::new(podman()).args(["info", "--format", "{{.Host.OCIRuntime.Name}}"]),
            "podman info",
        );
        if !info.status.success() {
            return Err(format!(
                "podman does not work on this machine; run scripts/install-podman.sh as root\n{}",
                text(&info)
            ));
        }
        // The script builds the static release binary into CARGO_TARGET_DIR, then the image
        // from it, in a user's environment: the same build as README's `cargo install` in
        // tests/readme.rs, which then takes it as it is.
        let out = output(
            without_cargo_test_env(&mut Command::new(repo_path("scripts/container.sh")))
                .env("IMAGE", image)
                .env("PATH", path_with_cargo_tools())
                .current_dir(repo_path(".")),
            "scripts/container.sh",
        );
        if !out.status.success() {
            return Err(format!(
                "scripts/container.sh failed to build {image} (podman set up? run \
                 scripts/install-podman.sh as root)\n{}",
                text(&out)
            ));
        }
        // A run the way kpt does it, so a podman that builds but cannot run containers
        // (crun, or rlimits above the hard limits) fails here with the fix, not in a host.
        let run = run_with_stdin(
            Command::new(podman()).args([
                "run",
                "--rm",
                "-i",
                "--network",
                "none",
                "--user",
                "nobody",
                "--security-opt=no-new-privileges",
                "--pull",
                "never",
                image,
            ]),
            b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n",
        );
        if !run.status.success() || !String::from_utf8_lossy(&run.stdout).contains("ResourceList") {
            return Err(format!(
                "podman cannot run {image}: run scripts/install-podman.sh as root (it writes \
                 /etc/containers/containers.conf.d/50-linkerd-multus.conf: runtime runc, \
                 lowered nofile/nproc ulimits)\n{}",
                text(&run)
            ));
        }
        Ok(())
    });
    if let Err(e) = built {
        panic!("{e}");
    }
    image
}

/// A copy of the kpt example in a temporary directory, as a kpt package whose Kptfile runs
/// `mutator` (a pipeline entry such as `image: ...`).
fn example_package(tmp: &Path, name: &str, mutator: &str) -> PathBuf {
    let dir = tmp.join(name);
    copy_dir(&repo_path(EXAMPLE), &dir);
    std::fs::write(
        dir.join("Kptfile"),
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n  annotations:\n    \
             config.kubernetes.io/local-config: \"true\"\npipeline:\n  mutators:\n    - {mutator}\n"
        ),
    )
    .unwrap();
    dir
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

/// The selections of the networks annotation of a Deployment's pod template.
fn networks_of(deployment: &Yaml) -> Vec<Selection> {
    let value = deployment
        .str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks",
        ])
        .unwrap_or_else(|| panic!("no networks annotation on the pod template: {deployment:?}"));
    parse_networks(value).unwrap_or_else(|e| panic!("bad networks annotation {value:?}: {e}"))
}

fn names(selections: &[Selection]) -> Vec<&str> {
    selections
        .iter()
        .map(|(_, name, _)| name.as_str())
        .collect()
}

#[test]
fn image_is_minimal_and_runs_as_nobody() {
    let image = image();
    let inspect = output(
        Command::new(podman()).args([
            "image",
            "inspect",
            "--format",
            "{{.Config.User}}|{{json .Config.Entrypoint}}|\
             {{index .Config.Labels \"org.opencontainers.image.licenses\"}}|\
             {{index .Config.Labels \"org.opencontainers.image.version\"}}",
            image,
        ]),
        "podman image inspect",
    );
    assert!(inspect.status.success(), "{}", text(&inspect));
    assert_eq!(
        String::from_utf8_lossy(&inspect.stdout).trim(),
        format!(
            r#"65534:65534|["/usr/local/bin/linkerd-multus"]|Apache-2.0|{}"#,
            env!("CARGO_PKG_VERSION")
        ),
        "image config (User, Entrypoint, license and version labels)"
    );

    // The file system: the binary and the passwd/group files that resolve `--user nobody`.
    let create = output(
        Command::new(podman()).args(["create", image]),
        "podman create",
    );
    assert!(create.status.success(), "{}", text(&create));
    let id = String::from_utf8_lossy(&create.stdout).trim().to_string();
    let export = output(
        Command::new(podman()).args(["export", &id]),
        "podman export",
    );
    let _ = Command::new(podman()).args(["rm", &id]).guarded_output();
    assert!(export.status.success(), "{}", text(&export));
    let list = run_with_stdin(Command::new("tar").arg("-t"), &export.stdout);
    assert!(list.status.success(), "tar -t\n{}", text(&list));
    let mut files: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| !l.ends_with('/'))
        .map(str::to_string)
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["etc/group", "etc/passwd", "usr/local/bin/linkerd-multus"]
    );
    let passwd = run_with_stdin(
        Command::new("tar").args(["-xO", "etc/passwd"]),
        &export.stdout,
    );
    assert!(
        String::from_utf8_lossy(&passwd.stdout)
            .lines()
            .any(|l| l.starts_with("nobody:x:65534:65534:")),
        "/etc/passwd of the image has no nobody (kpt runs functions with --user nobody)\n{}",
        text(&passwd)
    );
}

#[test]
fn kpt_fn_render_runs_the_image_with_podman() {
    let image = image();
    let kpt = kpt();
    let tmp = tempfile::tempdir().unwrap();

    // The container, in a Kptfile pipeline.
    let pkg = example_package(tmp.path(), "with-image", &format!("image: {image}"));
    // No --image-pull-policy: the default (IfNotPresent) uses the local image.
    let out = output(
        Command::new(kpt)
            .args(["fn", "render", "with-image"])
            .env("KPT_FN_RUNTIME", "podman")
            .current_dir(tmp.path()),
        "kpt fn render",
    );
    assert!(out.status.success(), "kpt fn render failed\n{}", text(&out));

    // A NAD file next to the namespace file.
    let generated: Vec<String> = std::fs::read_dir(pkg.join("namespaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("networkattachmentdefinition_") && n.ends_with("_linkerd-cni.yaml")
        })
        .collect();
    assert_eq!(
        generated,
        ["networkattachmentdefinition_demo_linkerd-cni.yaml"],
        "NAD files written by kpt\n{}",
        text(&out)
    );
    let nad = parse_yaml(&read(&pkg, NAD_FILE)).unwrap();
    assert!(is_generated_nad(&nad), "not a generated NAD: {nad:?}");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), Some("demo"));
    assert_eq!(nad.str_at(&["metadata", "name"]), Some("linkerd-cni"));

    // The Deployment joins linkerd-cni and keeps its own network.
    let web = parse_yaml(&read(&pkg, "apps/web.yaml")).unwrap();
    let nets = networks_of(&web);
    assert_eq!(names(&nets), ["storage", "linkerd-cni"], "{nets:?}");

    // The image behaves exactly like the binary: the same pipeline with `exec:` writes the
    // same files (all but the Kptfile, whose pipeline differs).
    let exec_pkg = example_package(tmp.path(), "with-exec", &format!("exec: \"{}\"", bin()));
    let out = output(
        Command::new(kpt)
            .args(["fn", "render", "--allow-exec", "with-exec"])
            .current_dir(tmp.path()),
        "kpt fn render --allow-exec",
    );
    assert!(
        out.status.success(),
        "kpt fn render --allow-exec failed\n{}",
        text(&out)
    );
    let without_kptfile = |dir: &Path| {
        snapshot(dir)
            .into_iter()
            .filter(|(name, _)| name != "Kptfile")
            .collect::<Vec<_>>()
    };
    let (a, b) = (without_kptfile(&pkg), without_kptfile(&exec_pkg));
    let file_names = |s: &[(String, Vec<u8>)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        file_names(&a),
        file_names(&b),
        "image vs exec: different files"
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if let Some(diff) = first_difference(
            &format!("image vs exec: {name}"),
            &String::from_utf8_lossy(y),
            &String::from_utf8_lossy(x),
        ) {
            panic!("{diff}");
        }
    }
}

#[test]
fn kubectl_kustomize_runs_the_image_through_a_docker_shim() {
    let image = image();
    let kubectl = kubectl();
    let tmp = tempfile::tempdir().unwrap();

    let path = docker_shim_path(tmp.path());

    // The example, with the image built here and a non-default NAD name: kustomize
    // passes the transformer object itself as the functionConfig, and the name shows
    // that the function read it.
    let dir = tmp.path().join("overlay");
    copy_dir(&repo_path(KUSTOMIZE_EXAMPLE), &dir);
    let fn_yaml = dir.join("linkerd-multus.yaml");
    let transformer = std::fs::read_to_string(&fn_yaml).unwrap();
    assert!(transformer.contains(PUBLISHED_IMAGE), "{transformer}");
    std::fs::write(
        &fn_yaml,
        format!(
            "{}  nadName: linkerd-cni-kustomize\n",
            transformer.replace(PUBLISHED_IMAGE, image)
        ),
    )
    .unwrap();

    let out = output(
        Command::new(kubectl)
            .args(["kustomize", "--enable-alpha-plugins"])
            .arg(&dir)
            .env("PATH", &path),
        "kubectl kustomize",
    );
    assert!(
        out.status.success(),
        "kubectl kustomize --enable-alpha-plugins failed\n{}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Yaml> = stdout
        .split("\n---\n")
        .map(|d| parse_yaml(d).unwrap_or_else(|e| panic!("{e} in\n{d}")))
        .collect();
    let find = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| {
                d.str_at(&["kind"]) == Some(kind) && d.str_at(&["metadata", "name"]) == Some(name)
            })
            .unwrap_or_else(|| panic!("no {kind} {name} in the output:\n{stdout}"))
    };

    let nad = find("NetworkAttachmentDefinition", "linkerd-cni-kustomize");
    assert!(is_generated_nad(nad), "not a generated NAD: {nad:?}");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), Some("demo"));
    let config = nad.str_at(&["spec", "config"]).unwrap_or_default();
    let config: serde_json::Value =
        serde_json::from_str(config).unwrap_or_else(|e| panic!("NAD config {config:?}: {e}"));
    assert_eq!(config["type"], "linkerd-cni", "NAD config: {config}");

    let web = find("Deployment", "web");
    let nets = networks_of(web);
    assert_eq!(
        names(&nets),
        ["storage", "linkerd-cni-kustomize"],
        "{nets:?}"
    );
    assert!(
        web.str_at(&[
            "spec",
            "template",
            "metadata",
            "annotations",
            "config.linkerd.io/proxy-uid"
        ])
        .is_some(),
        "no proxy UID set on the pod template:\n{stdout}"
    );
}

/// A PATH whose `docker` is podman, in `tmp`.
fn docker_shim_path(tmp: &Path) -> std::ffi::OsString {
    // kustomize runs container functions with the `docker` CLI; podman takes its flags.
    let shim = tmp.join("bin");
    std::fs::create_dir(&shim).unwrap();
    std::os::unix::fs::symlink(podman(), shim.join("docker")).unwrap();
    std::env::join_paths(std::iter::once(shim.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap()
}

/// The webhook's Deployment as `linkerd multus install` prints it, run from the image by the
/// tests' kubelet (`common::kubelet`) under podman: the template's args and env, its user
/// (the image's 65534), read-only root filesystem, dropped capabilities and
/// no-new-privileges, every volume at its own mount path and the ServiceAccount token at
/// the in-cluster path, read through `KUBERNETES_SERVICE_HOST` as in a pod. It must do what
/// the suite's process runs do (`common::shipped::runs_as_shipped`).
#[test]
fn the_image_runs_the_webhook_as_its_deployment_says() {
    let runtime = common::kubelet::Runtime::Podman {
        podman: podman().to_path_buf(),
        image: image().to_string(),
    };
    let options = common::shipped::OptionSet::Install(&["--manage-nads", "--network-resources"]);
    common::shipped::runs_as_shipped(options, runtime);
}

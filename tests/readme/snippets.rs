//! Every snippet of the README run as written, in a copy of this checkout: the session that
//! runs them, the image it builds and the cluster it starts.

use super::*;
use crate::common::process::Guarded;

/// Copies the repository, without `target/` and `.git`, to `to`.
fn copy_repository(to: &Path) {
    let root = repo_path(".");
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

fn git_status() -> String {
    let out = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(repo_path("."))
        .guarded_output()
        .expect(
            "git is not installed: the README test compares `git status` around the cargo snippets",
        );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds this checkout's image once (scripts/container.sh), for the snippets that run it.
fn build_image() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = without_cargo_test_env(&mut Command::new(repo_path("scripts/container.sh")))
            .env("IMAGE", dev_image())
            .env("PATH", path_with_cargo_tools())
            .current_dir(repo_path("."))
            .guarded_output()
            .expect("cannot run scripts/container.sh");
        assert!(
            out.status.success(),
            "scripts/container.sh failed to build {} (podman missing? run scripts/install-podman.sh as root):\n{}",
            dev_image(),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// What every session shares: the install root of README's `cargo install` and a folder
/// holding the binary under test.
struct Shared {
    install_root: tempfile::TempDir,
    test_bin: tempfile::TempDir,
}

impl Shared {
    fn new() -> Shared {
        let test_bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(bin(), test_bin.path().join("linkerd-multus")).unwrap();
        // The Linkerd CLI's stand-in (tests/tools/linkerd says why and what it does), for
        // the snippets of `linkerd multus ...` and `linkerd check`.
        std::os::unix::fs::symlink(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/linkerd"),
            test_bin.path().join("linkerd"),
        )
        .unwrap();
        Shared {
            install_root: tempfile::tempdir().unwrap(),
            test_bin,
        }
    }

    fn path(&self) -> std::ffi::OsString {
        // target/cargo-tools: cargo-auditable, which README's ./scripts/container.sh needs
        // (scripts/install-test-tools.sh installs it there).
        let dirs = [
            self.install_root.path().join("bin"),
            self.test_bin.path().to_path_buf(),
            repo_path("target/cargo-tools/bin"),
        ];
        std::env::join_paths(dirs.into_iter().chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap()
    }
}

/// One README's run: its copy of the repository, its home and the current directory.
struct Session<'a> {
    shared: &'a Shared,
    tmp: tempfile::TempDir,
    cwd: PathBuf,
}

impl Session<'_> {
    fn copy(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    /// Runs `script` (bash) in `dir`; returns its exit status, its output and where it ended.
    fn bash(&self, dir: &Path, script: &str, block: &Block) -> (bool, String, PathBuf) {
        let cargo_install = block.text.contains("cargo install");
        let state = self.tmp.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let cwd_file = state.join("cwd");
        let _ = std::fs::remove_file(&cwd_file);
        let script = format!(
            "trap 'pwd > {cwd}' EXIT\n{script}",
            cwd = shell_quote(&cwd_file.to_string_lossy())
        );
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut cmd = Command::new("timeout");
        without_cargo_test_env(&mut cmd)
            .arg(SNIPPET_TIMEOUT_SECONDS.to_string())
            .args(["bash", "-c", &script])
            .current_dir(dir)
            .env("HOME", self.tmp.path().join("home"))
            .env(
                "CARGO_HOME",
                std::env::var_os("CARGO_HOME").unwrap_or_else(|| home.join(".cargo").into()),
            )
            .env(
                "RUSTUP_HOME",
                std::env::var_os("RUSTUP_HOME").unwrap_or_else(|| home.join(".rustup").into()),
            )
            .env("PATH", self.shared.path())
            .env("CARGO_INSTALL_ROOT", self.shared.install_root.path())
            .env("IMAGE", dev_image())
            .env_remove("KPT_FN_RUNTIME")
            .env_remove("KUSTOMIZE_PLUGIN_HOME");
        if block.cluster {
            cmd.env("KUBECONFIG", &cluster().admin_kubeconfig);
        } else {
            cmd.env_remove("KUBECONFIG");
        }
        if cargo_install {
            // scripts/container.sh's target, flags and rustc wrapper (cargo-auditable, which
            // `cargo auditable build` sets, with the arguments it passes its wrapper), so
            // `cargo install` takes the static release build the image was made from instead
            // of compiling the crate again.
            cmd.env("CARGO_BUILD_TARGET", STATIC_TARGET)
                .env("RUSTFLAGS", STATIC_RUSTFLAGS)
                .env("RUSTC_WORKSPACE_WRAPPER", cargo_auditable())
                .env("CARGO_AUDITABLE_ORIG_ARGS", AUDITABLE_INSTALL_ARGS);
        }
        let out = cmd
            .guarded_output()
            .expect("cannot run bash under timeout (coreutils)");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        if out.status.code() == Some(124) {
            text.push_str(&format!("\n(stopped after {SNIPPET_TIMEOUT_SECONDS} s)"));
        }
        let ended = std::fs::read_to_string(&cwd_file)
            .map(|s| PathBuf::from(s.trim()))
            .unwrap_or_else(|_| dir.to_path_buf());
        (out.status.success(), text, ended)
    }

    /// Runs one block; `Err` says what went wrong.
    fn run(&mut self, block: &Block) -> Result<(), String> {
        let text = block.text.replace(DOCUMENTED_DEV_IMAGE, &dev_image());
        if text.contains(&dev_image()) || text.contains("scripts/container.sh") {
            build_image();
        }
        let dir = match &block.place {
            Place::NotRun(_) => return Ok(()),
            Place::Continue => self.cwd.clone(),
            Place::In(dir) => self.copy().join(dir),
            Place::EmptyDir => {
                let dir = self.tmp.path().join(format!("empty-{}", block.line));
                std::fs::create_dir_all(&dir).unwrap();
                dir
            }
            Place::Checkout => repo_path("."),
        };
        let before = (block.place == Place::Checkout).then(git_status);
        let (ok, ended) = match block.kind {
            Kind::Sh => {
                let (ok, output, ended) =
                    self.bash(&dir, &format!("set -eo pipefail\n{text}"), block);
                if !ok {
                    return Err(format!("failed:\n{output}"));
                }
                (ok, ended)
            }
            Kind::Console => {
                let commands = console_commands(&text);
                let mut dir = dir.clone();
                for (cmd, expected) in commands {
                    let (ok, output, ended) =
                        self.bash(&dir, &format!("set -o pipefail\nexec 2>&1\n{cmd}"), block);
                    if !ok {
                        return Err(format!("`{cmd}` failed:\n{output}"));
                    }
                    let actual = trimmed_lines(&output);
                    let expected = trimmed_lines(&expected.join("\n"));
                    if !matches(&expected, &actual) {
                        return Err(format!(
                            "`{cmd}` printed other lines than the README shows:\n--- README\n{}\n--- printed\n{}",
                            expected.join("\n"),
                            actual.join("\n")
                        ));
                    }
                    dir = ended;
                }
                (true, dir)
            }
        };
        debug_assert!(ok);
        if let Some(before) = before {
            let after = git_status();
            if after != before {
                return Err(format!(
                    "ran in the checkout and changed it (git status before:\n{before}after:\n{after})"
                ));
            }
        } else {
            self.cwd = ended;
        }
        Ok(())
    }
}

/// cert-manager's two kinds the webhook package uses, schemaless: the API server of the tests
/// has no cert-manager, and no registry here ships its CRDs. Enough to apply the package as a
/// cluster with cert-manager takes it (nothing issues the certificates).
const CERT_MANAGER_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Issuer, listKind: IssuerList, plural: issuers, singular: issuer}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// The cluster of the snippets marked `<!-- run: against a cluster -->`: a real kube-apiserver
/// with etcd (tests/common/kube_apiserver.rs), with cert-manager's CRDs, Multus's NAD CRD, the
/// Linkerd-CNI ConfigMap and the `linkerd` namespace, as the READMEs' clusters have them.
fn cluster() -> &'static kube_apiserver::ControlPlane {
    static READY: OnceLock<()> = OnceLock::new();
    let plane = kube_apiserver::ControlPlane::shared();
    READY.get_or_init(|| {
        plane.install_nad_crd();
        for namespace in ["linkerd", "linkerd-cni"] {
            plane.apply(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"
            ));
        }
        plane.apply(include_str!(
            "../../../shared/fixtures/linkerd-cni/version-2.19.yaml"
        ));
        plane.kubectl_ok(&["apply", "-f", "-"], CERT_MANAGER_CRDS);
        plane.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/certificates.cert-manager.io",
            "crd/issuers.cert-manager.io",
        ]);
    });
    plane
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn every_readme_snippet_runs_as_written() {
    let shared = Shared::new();
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    // README_SNIPPETS_ONLY=FILE runs one file's snippets (while editing it).
    let only = std::env::var("README_SNIPPETS_ONLY").ok();
    for doc in documents() {
        let name = doc.to_string_lossy().into_owned();
        if only.as_ref().is_some_and(|only| *only != name) {
            continue;
        }
        let markdown = std::fs::read_to_string(repo_path(&name)).unwrap();
        let blocks = blocks(&markdown, &name);
        if blocks.is_empty() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("home")).unwrap();
        let mut session = Session {
            shared: &shared,
            cwd: PathBuf::new(),
            tmp,
        };
        copy_repository(&session.copy());
        session.cwd = session.copy().join(doc.parent().unwrap());
        for block in &blocks {
            let at = format!("{name}:{}", block.line);
            if let Place::NotRun(reason) = &block.place {
                skipped.push(format!("{at} ({reason})"));
                continue;
            }
            let started = std::time::Instant::now();
            match session.run(block) {
                Ok(()) => ran.push(format!("{at} ({:.1} s)", started.elapsed().as_secs_f64())),
                Err(e) => {
                    failures.push(format!("{at}: the snippet\n{}\n{e}", block.text.trim_end()))
                }
            }
        }
        if name == "README.md" {
            // The Install section's `cargo install` put a binary that runs into the root.
            let installed = shared.install_root.path().join("bin/linkerd-multus");
            match Command::new(&installed).arg("--version").guarded_output() {
                Ok(out) if out.status.success() => {}
                other => failures.push(format!(
                    "README.md: `cargo install --locked --path .` left no working {}: {other:?}",
                    installed.display()
                )),
            }
        }
    }
    eprintln!("snippets run:\n  {}", ran.join("\n  "));
    eprintln!("snippets not run:\n  {}", skipped.join("\n  "));
    assert!(
        failures.is_empty(),
        "{} README snippet(s) do not run as written (fix the snippet or the code; see tests/readme.rs for the <!-- run: ... --> marks):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

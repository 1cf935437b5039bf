//! Helm's own code for the tests: Helm SDK v4.2.3 through helm-python-sdk, driven by
//! scripts/helm.py (scripts/install-test-tools.sh installs the package, pinned, into
//! target/tools). A missing tool fails the test with what to run, never skips it.

use crate::common::process::Guarded;
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use super::process::Guard;
use super::repo_path;

/// The chart of this repository.
pub const CHART: &str = "charts/linkerd-multus";

/// target/tools/bin/python, with helm-python-sdk.
fn python() -> PathBuf {
    let python = repo_path("target/tools/bin/python");
    assert!(
        python.is_file(),
        "no {}: run scripts/install-test-tools.sh (it installs helm-python-sdk, Helm's SDK, \
         pinned, into target/tools)",
        python.display()
    );
    python
}

/// scripts/helm.py with `args`, run in the checkout: Helm's folders in a temporary home, and
/// no cluster but the one `kubeconfig` names.
pub fn helm(args: &[&str], kubeconfig: Option<&Path>) -> Output {
    helm_with_env(args, kubeconfig, &[])
}

/// [`helm`] with more variables in its environment (HELM_PLUGINS, PATH).
pub fn helm_with_env(args: &[&str], kubeconfig: Option<&Path>, env: &[(&str, &OsStr)]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = helm_command(home.path(), kubeconfig);
    cmd.arg(repo_path("scripts/helm.py")).args(args);
    cmd.envs(env.iter().copied());
    cmd.guarded_output().expect("cannot run scripts/helm.py")
}

/// Each of `requests` (scripts/helm.py's arguments) run as [`helm`] runs it with no cluster,
/// in one process (tests/common/helm_batch.py), which loads Python and Helm's SDK once: for
/// tables of renders. Each request's exit code, stdout and stderr are its own.
pub fn helm_batch(requests: &[Vec<String>]) -> Vec<Output> {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = helm_command(home.path(), None);
    cmd.arg(repo_path("tests/common/helm_batch.py"))
        .arg(repo_path("scripts/helm.py"))
        .arg(serde_json::to_string(requests).unwrap());
    let out = Guard::output(&mut cmd).expect("cannot run tests/common/helm_batch.py");
    assert!(
        out.status.success(),
        "tests/common/helm_batch.py: {}",
        super::output_text(&out)
    );
    let results: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tests/common/helm_batch.py's answer: {e}"));
    assert_eq!(results.len(), requests.len(), "one result a request");
    results
        .iter()
        .map(|r| Output {
            status: ExitStatus::from_raw((r["code"].as_i64().unwrap() as i32) << 8),
            stdout: r["stdout"].as_str().unwrap().as_bytes().to_vec(),
            stderr: r["stderr"].as_str().unwrap().as_bytes().to_vec(),
        })
        .collect()
}

/// target/tools/bin/python with Helm's folders in `home`, in the checkout, and no cluster but
/// the one `kubeconfig` names.
fn helm_command(home: &Path, kubeconfig: Option<&Path>) -> Command {
    let mut cmd = Command::new(python());
    cmd.current_dir(repo_path("."))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("HELM_NAMESPACE");
    match kubeconfig {
        Some(path) => cmd.env("KUBECONFIG", path),
        None => cmd.env("KUBECONFIG", home.join("none")),
    };
    cmd
}

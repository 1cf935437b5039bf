//! Helm's own code for the tests: Helm SDK v4.2.3 through helm-python-sdk, driven by
//! scripts/helm.py (scripts/install-test-tools.sh installs the package, pinned, into
//! target/tools). A missing tool fails the test with what to run, never skips it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    let mut cmd = Command::new(python());
    cmd.arg(repo_path("scripts/helm.py"))
        .args(args)
        .current_dir(repo_path("."))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env_remove("HELM_NAMESPACE");
    match kubeconfig {
        Some(path) => cmd.env("KUBECONFIG", path),
        None => cmd.env("KUBECONFIG", home.path().join("none")),
    };
    cmd.envs(env.iter().copied());
    cmd.output().expect("cannot run scripts/helm.py")
}

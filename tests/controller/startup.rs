//! `linkerd-multus controller` at start-up: bad settings named, and the flags of its help,
//! which listen on nothing but the operations port.

use crate::common::process::Guarded;
use std::process::Command;

use super::common::bin;

/// `controller ARGS` fails at start-up, naming `want`, without a panic.
fn refused_naming(args: &[&str], want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .arg("controller")
        .args(args)
        .env("KUBECONFIG", dir.path().join("none"))
        .env_remove("POD_NAMESPACE")
        .guarded_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{args:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(want), "{args:?}: {stderr}");
}

#[test]
fn bad_start_up_settings_are_named() {
    for (args, want) in [
        (
            &[][..],
            "controller needs the Lease's namespace: set --lease-namespace, or POD_NAMESPACE from the downward API (metadata.namespace)",
        ),
        (
            &["--lease-namespace", "x", "--lease-duration", "2s"][..],
            "--lease-duration 2s: must be at least 3s",
        ),
        (
            &["--restart-concurrency=0"][..],
            "invalid value '0' for '--restart-concurrency <N>'",
        ),
        (
            &["--listen", "[::]:8443"][..],
            "unexpected argument '--listen' found",
        ),
        (
            &[
                "--lease-namespace",
                "x",
                "--config",
                "/nonexistent/settings.yaml",
            ][..],
            "/nonexistent/settings.yaml",
        ),
    ] {
        refused_naming(args, want);
    }
}

/// `controller --help` lists its own flags and the settings that make a NAD: no admission
/// port, no TLS, none of the pod rules.
#[test]
fn help_lists_only_the_flags_the_controller_uses() {
    let out = Command::new(bin())
        .args(["controller", "--help"])
        .guarded_output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|f| f.split_once('[').map_or(f, |(name, _)| name))
        .collect();
    assert_eq!(
        flags,
        [
            "lease-name",
            "lease-namespace",
            "lease-duration",
            "identity",
            "restart-stale-workloads",
            "restart-concurrency",
            "restart-deadline",
            "ops-listen",
            "api-timeout",
            "config",
            "linkerd-namespace",
            "nad-name",
            "cni-namespace",
            "cni-kubeconfig",
            "cni-version",
            "log-format",
            "log-level",
        ]
    );
    // Under the headings of src/commands/help.rs, in this order.
    let headings: Vec<&str> = help
        .lines()
        .filter(|l| l.ends_with(':') && l.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect();
    assert_eq!(
        headings,
        [
            "Options:",
            "Leader election:",
            "Restarts:",
            "Operations and reads:",
            "Linkerd-CNI settings:",
            "The NAD:",
            "Logging:",
        ]
    );
}

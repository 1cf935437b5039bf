//! Start-up: bad settings named, the help's flags, a misspelt variable logged.

use super::*;
use crate::common::process::Guarded;

#[test]
fn bad_start_up_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let missing = dir.path().join("missing.crt");
    // A good certificate and key, then `extra`.
    let with_tls = |extra: &[&str]| tls_args(&cert, &key, extra);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--tls-cert".into(),
                missing.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            "missing.crt",
        ),
        (
            vec![
                "--tls-cert".into(),
                key.display().to_string(),
                "--tls-key".into(),
                key.display().to_string(),
            ],
            "no PEM certificate",
        ),
        (
            vec![
                "--tls-cert".into(),
                cert.display().to_string(),
                "--tls-key".into(),
                cert.display().to_string(),
            ],
            "no PEM private key",
        ),
        (with_tls(&["--proxy-uid-offset", "x"]), "--proxy-uid-offset"),
        (with_tls(&["--on-error", "maybe"]), "--on-error"),
        (
            with_tls(&["--manage-nads"]),
            "webhook --manage-nads: the NAD controller runs apart from the webhook now, as `linkerd-multus controller` with its own Deployment and ServiceAccount",
        ),
        (
            with_tls(&["--manage-nads=false", "--lease-duration", "15s"]),
            "webhook --lease-duration: the NAD controller runs apart from the webhook now",
        ),
        (
            with_tls(&["--missing-nad", "allow"]),
            "invalid value 'allow' for '--missing-nad <POLICY>'",
        ),
        (
            with_tls(&["--max-body-bytes-in-flight", "1048576"]),
            "--max-body-bytes-in-flight 1048576: a body of --max-body-bytes 6291456 could never be read (bodies over 64 KiB may take three quarters of the budget): raise it to at least 8388608, or lower --max-body-bytes",
        ),
        (
            with_tls(&["--max-connections", "0"]),
            "--max-connections 0: must be more than 0",
        ),
        (
            with_tls(&["--restart-stale-workloads"]),
            "webhook --restart-stale-workloads: the NAD controller runs apart from the webhook now",
        ),
        (
            with_tls(&["--skip-secondary-subnets=enabled"]),
            "settings: skipSecondarySubnets is enabled but clusterCIDRs is not set",
        ),
        (
            with_tls(&["--cluster-cidrs=10.244.0.0/16,10.96.0.0"]),
            "--cluster-cidrs: setting clusterCIDRs: \"10.96.0.0\" is not a CIDR such as 10.244.0.0/16",
        ),
        (
            with_tls(&["--protected-cidrs=192.168.0.0/16,192.168.1"]),
            "--protected-cidrs: setting protectedCIDRs: \"192.168.1\" is not a CIDR such as 10.244.0.0/16",
        ),
        (
            with_tls(&[
                "--skip-secondary-subnets=enabled",
                "--cluster-cidrs=10.244.0.0/16",
                "--missing-nad=ignore",
            ]),
            "--skip-secondary-subnets=enabled reads the IPAM of the NADs pods select, but --missing-nad ignore reads no NAD",
        ),
    ];
    for (args, want) in cases {
        refused_naming(dir.path(), &args, want);
    }
}

/// A good certificate and key, then `extra`.
fn tls_args(cert: &Path, key: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--tls-cert".to_string(),
        cert.display().to_string(),
        "--tls-key".to_string(),
        key.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// `webhook ARGS` fails at start-up, naming `want`, without a panic.
fn refused_naming(dir: &Path, args: &[String], want: &str) {
    let out = Command::new(bin())
        .arg("webhook")
        .args(args)
        .env("KUBECONFIG", dir.join("none"))
        .env_remove("POD_NAMESPACE")
        .guarded_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{args:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(want), "{args:?}: {stderr}");
}

/// `webhook --help` lists the webhook's own flags and the settings that decide
/// a pod: not those only rendering uses (workload kinds, namespaces of files,
/// config rollouts), nor the NAD controller's (`controller`'s; an earlier
/// release's manifests still pass some, read and hidden).
#[test]
fn help_lists_only_the_flags_the_webhook_uses() {
    let out = Command::new(bin())
        .args(["webhook", "--help"])
        .guarded_output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split_whitespace().next())
        // `--flag[=<BOOL>]`: an optional value.
        .map(|f| f.split_once('[').map_or(f, |(name, _)| name))
        .collect();
    assert_eq!(
        flags,
        [
            "listen",
            "path",
            "tls-cert",
            "tls-key",
            "client-ca",
            "tls-reload-interval",
            "ops-listen",
            "shutdown-delay",
            "drain-timeout",
            "max-body-bytes",
            "header-timeout",
            "body-timeout",
            "body-stall-timeout",
            "max-body-bytes-in-flight",
            "max-connections",
            "max-connections-per-peer",
            "max-requests-per-peer",
            "max-concurrent-streams",
            "idle-timeout",
            "api-timeout",
            "max-watch-outage",
            "live-read-timeout",
            "on-error",
            "network-resources",
            "missing-nad",
            "config",
            "linkerd-namespace",
            "nad-name",
            "uid-range-annotation",
            "proxy-uid-offset",
            "skip-secondary-subnets",
            "cluster-cidrs",
            "protected-cidrs",
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
            "Serving and TLS:",
            "Connection limits:",
            "Caches and reads:",
            "Rules:",
            "Linkerd-CNI settings:",
            "Pods:",
            "Logging:",
        ]
    );
    // A render-only flag is refused, not silently ignored.
    let out = Command::new(bin())
        .args(["webhook", "--config-rollout", "all"])
        .guarded_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("error: unexpected argument '--config-rollout' found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A misspelt variable is logged at start-up, before anything else can fail.
#[test]
fn a_misspelt_variable_is_logged_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("CA");
    let (cert, key) = ca.leaf(&["x"]).write(dir.path());
    let out = Command::new(bin())
        .args([
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--ops-listen",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env_clear()
        .env("LINKERD_MULTUS_NETWORK_RESOURCE", "nr.yaml")
        .env("KUBECONFIG", dir.path().join("none"))
        .guarded_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No API server here: it stops after the warning.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let warning = stderr.lines().next().unwrap_or_default();
    assert!(
        warning.contains(" WARN ")
            && warning.ends_with(
                "environment variable LINKERD_MULTUS_NETWORK_RESOURCE is not one linkerd-multus reads; did you mean LINKERD_MULTUS_NETWORK_RESOURCES?"
            ),
        "{stderr}"
    );
}

//! The headings of each command's `--help`, as kubectl and ripgrep group
//! their flags: what a flag is about (serving, limits, the rules, logging),
//! set on the command line before it is parsed. A flag is named by its
//! argument id, its field's name; a flag under no heading fails the tests.

use clap::Command;

/// A heading and the flags under it, in the order the help lists them.
type Group = (&'static str, &'static [&'static str]);

/// The Linkerd-CNI settings every renderer, the webhook and the controller read.
const NAMES: &[&str] = &["config", "linkerd_namespace", "nad_name"];
/// What a pod's attachment carries: its proxy UID and its skipped subnets.
const POD: &[&str] = &[
    "uid_range_annotation",
    "proxy_uid_offset",
    "skip_secondary_subnets",
    "cluster_cidrs",
    "protected_cidrs",
];
/// Where the NAD's config comes from.
const NAD: &[&str] = &["cni_namespace", "cni_kubeconfig", "cni_version"];
/// The package a renderer reads: which namespaces and workloads, and what it hands on.
const PACKAGE: &[&str] = &[
    "namespaces",
    "workload_kinds",
    "default_namespace",
    "config_rollout",
];
/// How a renderer reads its inputs.
const INPUTS: Group = ("Inputs", &["reference", "allow_empty"]);
/// The log of a long-running command.
#[cfg(feature = "webhook")]
const LOGGING: Group = ("Logging", &["log_format", "log_level"]);
/// How the Linkerd extension's commands reach the cluster: Linkerd's own flags.
#[cfg(feature = "webhook")]
const KUBERNETES: Group = (
    "Kubernetes",
    &[
        "api_addr",
        "context",
        "as_user",
        "as_group",
        "kubeconfig",
        "linkerd_namespace",
        "verbose",
    ],
);
/// Which parts of the cluster side are installed (or checked).
#[cfg(feature = "webhook")]
const PARTS: Group = (
    "Parts",
    &[
        "config",
        "manage_nads",
        "cni_namespace",
        "restart_stale_workloads",
        "network_resources",
        "certs",
    ],
);

/// Each command and its headings.
const COMMANDS: &[(&str, &[Group])] = &[
    (
        "render",
        &[
            ("Output", &["diff"]),
            INPUTS,
            ("Linkerd-CNI settings", NAMES),
            ("Pods", POD),
            ("The NAD", NAD),
            ("The package", PACKAGE),
        ],
    ),
    (
        "diff",
        &[
            INPUTS,
            ("Linkerd-CNI settings", NAMES),
            ("Pods", POD),
            ("The NAD", NAD),
            ("The package", PACKAGE),
        ],
    ),
    (
        "post-render",
        &[
            INPUTS,
            ("Linkerd-CNI settings", NAMES),
            ("Pods", POD),
            ("The NAD", NAD),
            ("The package", PACKAGE),
        ],
    ),
    (
        "validate",
        &[(
            "Rules",
            &[
                "config",
                "namespace_isolation",
                "global_namespace",
                "workload_kinds",
                "default_namespace",
            ],
        )],
    ),
    (
        "from-injector",
        &[("The injector", &["config_map", "name"])],
    ),
    #[cfg(feature = "webhook")]
    (
        "webhook",
        &[
            (
                "Serving and TLS",
                &[
                    "listen",
                    "path",
                    "tls_cert",
                    "tls_key",
                    "client_ca",
                    "tls_reload_interval",
                    "ops_listen",
                    "shutdown_delay",
                    "drain_timeout",
                ],
            ),
            (
                "Connection limits",
                &[
                    "max_body_bytes",
                    "header_timeout",
                    "body_timeout",
                    "body_stall_timeout",
                    "max_body_bytes_in_flight",
                    "max_connections",
                    "max_connections_per_peer",
                    "max_requests_per_peer",
                    "max_concurrent_streams",
                    "idle_timeout",
                ],
            ),
            (
                "Caches and reads",
                &["api_timeout", "max_watch_outage", "live_read_timeout"],
            ),
            ("Rules", &["on_error", "missing_nad", "network_resources"]),
            ("Linkerd-CNI settings", NAMES),
            ("Pods", POD),
            LOGGING,
        ],
    ),
    #[cfg(feature = "webhook")]
    (
        "controller",
        &[
            (
                "Leader election",
                &[
                    "lease_name",
                    "lease_namespace",
                    "lease_duration",
                    "identity",
                ],
            ),
            (
                "Restarts",
                &[
                    "restart_stale_workloads",
                    "restart_concurrency",
                    "restart_deadline",
                ],
            ),
            ("Operations and reads", &["ops_listen", "api_timeout"]),
            ("Linkerd-CNI settings", NAMES),
            ("The NAD", NAD),
            LOGGING,
        ],
    ),
    #[cfg(feature = "webhook")]
    (
        "check",
        &[
            KUBERNETES,
            (
                "What to check",
                &["namespace", "pre", "proxy", "wait", "output"],
            ),
            PARTS,
        ],
    ),
    #[cfg(feature = "webhook")]
    (
        "install",
        &[
            KUBERNETES,
            PARTS,
            (
                "The webhook",
                &[
                    "namespace",
                    "image",
                    "platform",
                    "webhook_excluded_namespaces",
                    "replicas",
                    "failure_policy",
                    "priority_class_name",
                    "api_server_cidrs",
                    "metrics_namespaces",
                    "ignore_cluster",
                ],
            ),
            ("Restarts", &["restart_concurrency", "restart_deadline"]),
            (
                "Secondary networks",
                &["skip_secondary_subnets", "cluster_cidrs", "protected_cidrs"],
            ),
            (
                "Day two",
                &[
                    "webhook_resources",
                    "controller_resources",
                    "log_level",
                    "on_error",
                    "missing_nad",
                    "pod_labels",
                    "pod_annotations",
                    "service_labels",
                    "service_annotations",
                    "webhook_configuration_labels",
                    "webhook_configuration_annotations",
                ],
            ),
            ("Monitoring", &["monitoring"]),
        ],
    ),
    #[cfg(feature = "webhook")]
    ("uninstall", &[KUBERNETES]),
    #[cfg(feature = "webhook")]
    (
        "preview",
        &[
            KUBERNETES,
            ("The new config", &["filename"]),
            ("Restarts", &["restart_concurrency", "restart_deadline"]),
        ],
    ),
];

/// `command` with each subcommand's flags under their headings.
///
/// # Panics
///
/// On a command or flag that is not there (clap's `mut_arg`): a test runs it.
pub fn grouped(mut command: Command) -> Command {
    for (name, groups) in COMMANDS {
        command = command.mut_subcommand(name, |mut sub| {
            for (heading, ids) in *groups {
                for id in *ids {
                    sub = sub.mut_arg(id, |arg| arg.help_heading(*heading));
                }
            }
            sub
        });
    }
    command
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every flag a `--help` shows is under a heading, and every flag the
    /// table names is a flag of its command.
    #[test]
    fn every_shown_flag_has_a_heading() {
        let command = grouped(super::super::Cli::command());
        let mut bare = Vec::new();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                let shown = !arg.is_hide_set() && !arg.is_positional();
                let own = matches!(arg.get_id().as_str(), "help" | "version");
                if shown && !own && arg.get_help_heading().is_none() {
                    bare.push(format!("{} --{}", sub.get_name(), arg.get_id()));
                }
            }
        }
        assert!(
            bare.is_empty(),
            "flags under no heading: add them to COMMANDS in src/commands/help.rs: {bare:?}"
        );
        let named = COMMANDS.len();
        assert_eq!(
            command
                .get_subcommands()
                .filter(|sub| COMMANDS.iter().any(|(n, _)| sub.get_name() == *n))
                .count(),
            named
        );
    }
}

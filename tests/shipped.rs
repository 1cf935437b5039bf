//! What ships runs as shipped (`common::shipped`): every option set of
//! `deploy/` (with its additions) and of `linkerd multus install`, each in a
//! cluster of its own; the image itself runs in `tests/container.rs`.
//! `shipped/rollout.rs` restarts and rotates the webhook under load;
//! `shipped/mutations.rs` shows that a broken template fails here.

use crate::common;

use common::kubelet::Runtime;
use common::shipped::{OptionSet, runs_as_shipped};

mod mutations;
mod rollout;

#[test]
fn deploy_package() {
    let options = OptionSet::Deploy {
        nad_controller: false,
        network_resources: false,
    };
    runs_as_shipped(options, Runtime::Process);
}

#[test]
fn deploy_package_with_the_nad_controller() {
    let options = OptionSet::Deploy {
        nad_controller: true,
        network_resources: false,
    };
    runs_as_shipped(options, Runtime::Process);
}

#[test]
fn deploy_package_with_network_resources() {
    let options = OptionSet::Deploy {
        nad_controller: false,
        network_resources: true,
    };
    runs_as_shipped(options, Runtime::Process);
}

#[test]
fn helm_chart_defaults() {
    runs_as_shipped(OptionSet::Helm("{}"), Runtime::Process);
}

/// The NAD controller restarting stale workloads too, paced: it starts, with the rights the
/// chart gives it, and warns of nothing.
#[test]
fn helm_chart_with_the_nad_controller_its_restarts_and_network_resources() {
    runs_as_shipped(
        OptionSet::Helm(
            r#"{"manageNADs": true, "restartStaleWorkloads": true, "restartConcurrency": 2, "restartDeadline": "30m", "networkResources": true}"#,
        ),
        Runtime::Process,
    );
}

#[test]
fn install_defaults() {
    runs_as_shipped(OptionSet::Install(&[]), Runtime::Process);
}

/// With the secondary-networks rule on by default and the cluster's networks.
#[test]
fn install_manage_nads_and_skip_secondary_subnets() {
    let flags = &[
        "--manage-nads",
        "--skip-secondary-subnets=enabled",
        "--cluster-cidr=10.244.0.0/16,10.96.0.0/12",
    ];
    runs_as_shipped(OptionSet::Install(flags), Runtime::Process);
}

#[test]
fn install_network_resources() {
    runs_as_shipped(
        OptionSet::Install(&["--network-resources"]),
        Runtime::Process,
    );
}

/// With the NAD controller's restarts of stale workloads, paced, and the rights install gives
/// them.
#[test]
fn install_manage_nads_restarts_and_network_resources() {
    let flags = &[
        "--manage-nads",
        "--restart-stale-workloads",
        "--restart-concurrency=2",
        "--restart-deadline=1h 30m",
        "--network-resources",
    ];
    runs_as_shipped(OptionSet::Install(flags), Runtime::Process);
}

#[test]
fn install_with_cert_manager() {
    let flags = &["--certs", "cert-manager"];
    runs_as_shipped(OptionSet::Install(flags), Runtime::Process);
}

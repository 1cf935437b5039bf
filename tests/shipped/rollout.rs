//! The webhook as shipped (`install --manage-nads`), under a steady stream of
//! pod creates through the API server: both replicas restarted in turn (a
//! rolling restart, maxSurge 1 and maxUnavailable 0 as its Deployment says),
//! then a new serving certificate, then a new CA rotated through the
//! caBundle (both CAs, then the new one alone). No admission may be lost:
//! every pod created is created, with linkerd-cni.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Duration;

use super::common;
use crate::extension::check_harness::set_certificate;
use common::https::Ca;
use common::kubelet::{Cluster, Runtime};
use common::shipped::install::run_script;
use common::shipped::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// Pods created a second, from a thread of their own.
const RATE: u64 = 10;

/// Creates pods in `namespace` at [`RATE`] until told to stop; returns
/// (created with linkerd-cni, failures as the API server gave them).
fn load(
    cluster: &Cluster,
    namespace: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(usize, Vec<String>)> {
    let client = cluster.client();
    let namespace = namespace.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let api: Api<Pod> = Api::namespaced(client, &namespace);
        let (mut ok, mut failures) = (0, Vec::new());
        let mut n = 0;
        let start = std::time::Instant::now();
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let pod: Pod = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("load-{n}"), "namespace": namespace},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
            }))
            .unwrap();
            match rt.block_on(api.create(&PostParams::default(), &pod)) {
                Ok(pod) if networks(&pod).contains("linkerd-cni") => ok += 1,
                Ok(pod) => failures.push(format!(
                    "load-{n} admitted without linkerd-cni: {:?}",
                    pod.metadata.annotations
                )),
                Err(e) => failures.push(format!("load-{n} at {:?}: {e}", start.elapsed())),
            }
            let due = start + Duration::from_millis(n * 1000 / RATE);
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        }
        (ok, failures)
    })
}

/// The names the Service's certificate must hold.
const NAMES: [&str; 4] = [
    "linkerd-multus-webhook",
    "linkerd-multus-webhook.linkerd-multus",
    "linkerd-multus-webhook.linkerd-multus.svc",
    "linkerd-multus-webhook.linkerd-multus.svc.cluster.local",
];

/// The time a replica takes to reload its files after the kubelet swapped
/// them: `--tls-reload-interval` (10 s) and a volume sync.
const RELOAD: Duration = Duration::from_secs(12);

#[test]
fn rolling_restart_and_certificate_rotation_lose_no_admission() {
    let cluster = cluster(Runtime::Process);
    let dir = tempfile::tempdir().unwrap();
    let options = OptionSet::Deploy {
        nad_controller: true,
        network_resources: false,
    };
    install(&cluster, options, dir.path());
    let deployment = cluster.run_deployment(NS, WEBHOOK);
    deployment.wait_ready(2, READY);
    enabled_namespace(&cluster.plane, "load");
    linkerd_cni_nad(&cluster.plane, "load");

    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(&cluster, "load", stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    let exits = deployment.rolling_restart(READY);

    // A new serving certificate, as deploy/README.md renews it: the CA kept.
    run_script(
        &cluster,
        dir.path(),
        "./linkerd-multus-webhook/certs.sh --out certs --apply >/dev/null",
    );
    std::thread::sleep(RELOAD);

    // A new CA: trusted beside the old one, then serving, then alone.
    let old_ca = std::fs::read_to_string(dir.path().join("certs/ca.crt")).unwrap();
    let old_leaf = common::https::Leaf {
        cert: std::fs::read_to_string(dir.path().join("certs/tls.crt")).unwrap(),
        key: std::fs::read_to_string(dir.path().join("certs/tls.key")).unwrap(),
    };
    let new_ca = Ca::new("linkerd-multus rotated CA");
    let both = format!("{old_ca}{}", new_ca.pem);
    set_certificate(&cluster.plane, &old_leaf, &old_ca, &both);
    std::thread::sleep(Duration::from_secs(2));
    set_certificate(&cluster.plane, &new_ca.leaf(&NAMES), &new_ca.pem, &both);
    std::thread::sleep(RELOAD);
    set_certificate(
        &cluster.plane,
        &new_ca.leaf(&NAMES),
        &new_ca.pem,
        &new_ca.pem,
    );
    std::thread::sleep(Duration::from_secs(3));

    stop.store(true, Ordering::Relaxed);
    let (ok, failures) = loader.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} admissions lost of {}:\n{}\n{}",
        failures.len(),
        ok + failures.len(),
        failures.join("\n"),
        deployment.describe()
    );
    assert!(ok >= 100, "only {ok} pods created");
    eprintln!(
        "{ok} pods created through the API server, none lost, across a rolling restart, a new serving certificate and a new CA"
    );
    for exit in &exits {
        assert!(
            exit.is_clean(),
            "a replica restarted in turn did not exit cleanly: {exit:#?}"
        );
    }
    stops_cleanly(deployment);
}

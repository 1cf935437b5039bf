//! Each shipped option set, installed as its README says: `deploy/` (and its
//! additions) with kubectl and `certs.sh --apply`, or `linkerd multus
//! install | kubectl apply --server-side -f -` (with `--certs cert-manager`,
//! the stand-in issuing and injecting as cert-manager would).

use super::*;
use crate::common::process::Guarded;

use common::kubelet::CertManager;

/// The setters of `deploy/` at their values in the package.
const DEFAULT_SETTERS: [(&str, &str); 16] = [
    ("image", "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0"),
    ("webhook-excluded-namespaces", "[]"),
    ("namespace", "linkerd-multus"),
    ("priority-class-name", "system-cluster-critical"),
    ("api-server-cidr", "0.0.0.0/0"),
    ("api-server-cidr-ipv6", "::/0"),
    ("metrics-namespaces", "[monitoring]"),
    ("replicas", "2"),
    ("failure-policy", "Fail"),
    ("linkerd-namespace", "linkerd"),
    ("missing-nad", "deny"),
    ("cni-namespace", "linkerd-cni"),
    ("network-resources", ""),
    ("skip-secondary-subnets", "disabled"),
    ("cluster-cidrs", "[]"),
    ("protected-cidrs", "[]"),
];

/// The settings file `deploy-network-resources/` mounts, as its README sets it.
pub const NETWORK_RESOURCES_FILE: &str =
    "/etc/linkerd-multus/network-resources/network-resources.yaml";

/// One way to install the cluster side.
#[derive(Debug, Clone, Copy)]
pub enum OptionSet {
    /// `deploy/`, certificates by `certs.sh`; with `deploy-nad-controller/`
    /// and `deploy-network-resources/` (and their setters) when asked.
    Deploy {
        nad_controller: bool,
        network_resources: bool,
    },
    /// `linkerd multus install` with these flags.
    Install(&'static [&'static str]),
    /// The Helm chart, `helm install --create-namespace` with these values (JSON).
    Helm(&'static str),
}

impl OptionSet {
    pub fn manages_nads(self) -> bool {
        match self {
            OptionSet::Deploy { nad_controller, .. } => nad_controller,
            OptionSet::Install(flags) => flags.contains(&"--manage-nads"),
            OptionSet::Helm(values) => helm_value(values, "manageNADs"),
        }
    }

    pub fn network_resources(self) -> bool {
        match self {
            OptionSet::Deploy {
                network_resources, ..
            } => network_resources,
            OptionSet::Install(flags) => flags.contains(&"--network-resources"),
            OptionSet::Helm(values) => helm_value(values, "networkResources"),
        }
    }

    fn cert_manager(self) -> bool {
        matches!(self, OptionSet::Install(flags) if flags.contains(&"cert-manager"))
    }
}

/// Whether the boolean value `key` of the chart's `values` (JSON) is true.
fn helm_value(values: &str, key: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(values).unwrap()[key] == serde_json::Value::Bool(true)
}

/// Installs `options` into `cluster`, working in `dir`.
pub fn install(cluster: &Cluster, options: OptionSet, dir: &Path) {
    match options {
        OptionSet::Deploy {
            nad_controller,
            network_resources,
        } => deploy(cluster, nad_controller, network_resources, dir),
        OptionSet::Helm(values) => {
            let out = common::helm::helm(
                &[
                    "install",
                    common::helm::CHART,
                    "--release",
                    "linkerd-multus",
                    "--namespace",
                    NS,
                    "--create-namespace",
                    "--values",
                    values,
                ],
                Some(&cluster.plane.admin_kubeconfig),
            );
            assert!(
                out.status.success(),
                "helm install {values}: {}",
                common::output_text(&out)
            );
        }
        OptionSet::Install(flags) => {
            if options.cert_manager() {
                CertManager::install_crds(cluster);
            }
            let out = Command::new(bin())
                .arg("install")
                .args(flags)
                .arg("--kubeconfig")
                .arg(&cluster.plane.admin_kubeconfig)
                .env_remove("LINKERD_NAMESPACE")
                .guarded_output()
                .expect("running linkerd-multus install");
            assert!(
                out.status.success(),
                "linkerd-multus install {flags:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let yaml = String::from_utf8(out.stdout).unwrap();
            cluster
                .plane
                .kubectl_ok(&["apply", "--server-side", "-f", "-"], &yaml);
            if options.cert_manager() {
                CertManager::default().reconcile(cluster, NS);
            }
        }
    }
}

/// `deploy/` as its README installs it without cert-manager (option 2), with
/// the additions as theirs do.
fn deploy(cluster: &Cluster, nad_controller: bool, network_resources: bool, dir: &Path) {
    let webhook = package("deploy", dir);
    let mut setters = DEFAULT_SETTERS.to_vec();
    for (name, value) in &mut setters {
        match *name {
            "missing-nad" if nad_controller => *value = "attach",
            "network-resources" if network_resources => *value = NETWORK_RESOURCES_FILE,
            _ => {}
        }
    }
    set(&webhook, &setters);
    std::fs::rename(&webhook, dir.join("linkerd-multus-webhook")).unwrap();
    let mut script = String::from(
        "set -eu\ncd linkerd-multus-webhook\nrm -r cert-manager\nsed -i '/^  annotations:$/,/inject-ca-from/d' mutatingwebhookconfiguration.yaml\ncd ..\nkubectl apply -f linkerd-multus-webhook/namespace.yaml\n",
    );
    for (addition, wanted) in [
        ("deploy-nad-controller", nad_controller),
        ("deploy-network-resources", network_resources),
    ] {
        if wanted {
            let copy = package(addition, dir);
            set(&copy, &DEFAULT_SETTERS);
            script.push_str(&format!("kubectl apply -R -f {addition}/\n"));
        }
    }
    script.push_str(
        "kubectl apply -R -f linkerd-multus-webhook/\n./linkerd-multus-webhook/certs.sh --out certs --apply\n",
    );
    run_script(cluster, dir, &script);
}

/// Runs `script` with bash in `dir`, with the cluster's kubectl and admin
/// kubeconfig as a user's shell has them; panics with its output when it fails.
pub fn run_script(cluster: &Cluster, dir: &Path, script: &str) {
    let kubectl_dir = cluster.plane.kubectl_path();
    let path = format!(
        "{}:{}",
        kubectl_dir.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .env("KUBECONFIG", &cluster.plane.admin_kubeconfig)
        .env("PATH", path)
        .guarded_output()
        .expect("running bash");
    assert!(
        out.status.success(),
        "in {}:\n{script}\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sets every `# kpt-set:` line of the package at `dir` to `setters`.
fn set(dir: &Path, setters: &[(&str, &str)]) {
    for (rel, _) in common::snapshot(dir) {
        if !rel.ends_with(".yaml") {
            continue;
        }
        let path = dir.join(&rel);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, common::setters::apply_setters(&text, setters)).unwrap();
    }
}

//! The project against a real kube-apiserver (tests/common/kube_apiserver.rs).

mod common;

use common::kube_apiserver::ControlPlane;

#[test]
fn smoke() {
    let plane = ControlPlane::shared();
    let ns = plane.namespace("smoke", &[("a", "b")]);
    println!("{}", plane.kubectl(&["get", "ns", &ns, "-o", "yaml"]));
    plane.install_nad_crd();
    let dir = tempfile::tempdir().unwrap();
    let kc = plane.service_account_kubeconfig(&ns, "sa", dir.path());
    let out = std::process::Command::new("kubectl").env("KUBECONFIG", &kc).args(["auth","can-i","--list","-n",&ns]).output().unwrap();
    println!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("rev {}", plane.compact_etcd());
}

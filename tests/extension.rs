//! The Linkerd extension (`linkerd multus install | uninstall | check`)
//! against a real kube-apiserver with etcd (tests/common/kube_apiserver.rs).

/// `check` on an installed extension: clean, then each defect planted alone.
mod check;
/// The installed extension `check` runs against.
mod check_harness;

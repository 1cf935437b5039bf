//! The Linkerd extension (`linkerd multus install | uninstall | check`), most of it
//! against a real kube-apiserver with etcd (tests/common/kube_apiserver.rs): `install`
//! gives the same objects as the kpt packages set alike and names what it refuses; the
//! cluster side applies, server-side or client-side, installs again without a change,
//! keeps the namespaces it is told away from the webhook, and `uninstall` gives what
//! `kubectl delete -f -` needs and nothing else, a namespace still being deleted named; `check` on an installed extension is
//! clean, then names each defect planted alone.

use crate::common;

/// `check` on an installed extension: clean, then each defect planted alone.
mod check;
/// `check` of the NAD controller: its readiness, its Lease, an earlier release's layout.
mod check_controller;
/// The installed extension `check` runs against.
pub(crate) mod check_harness;
/// `check --proxy` naming the workloads on an older config and the pods selecting a NAD gone.
mod check_proxy;
/// Why `check` fails: a Deployment not ready, said from its objects; an API error, once.
mod check_why;
pub(crate) mod install;
mod lifecycle;
/// `install` for OpenShift: a mirror's image, its namespaces kept away from the webhook.
mod openshift;
/// Applied again client-side; uninstalled, then installed again at once.
mod reinstall;

//! The Linkerd extension (`linkerd multus install | uninstall | check`), most of it
//! against a real kube-apiserver with etcd (tests/common/kube_apiserver.rs): `install`
//! gives the same objects as the kpt packages set alike and names what it refuses; the
//! cluster side applies, installs again without a change, and `uninstall` gives what
//! `kubectl delete -f -` needs and nothing else; `check` on an installed extension is
//! clean, then names each defect planted alone.

use crate::common;

/// `check` on an installed extension: clean, then each defect planted alone.
mod check;
/// The installed extension `check` runs against.
pub(crate) mod check_harness;
/// Why `check` fails: a Deployment not ready, said from its objects; an API error, once.
mod check_why;
mod install;
mod lifecycle;

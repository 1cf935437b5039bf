//! The Linkerd extension's commands: `install` (the same objects as the kpt packages set
//! alike, its refusals, and the cluster side applied to a real kube-apiserver, then
//! installed again without a change) and `uninstall` (what `kubectl delete -f -` needs,
//! and nothing else).

use crate::common;

mod install;
mod lifecycle;

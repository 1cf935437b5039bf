//! The Linkerd-CNI rules: which pods get the Linkerd-CNI NAD and how their
//! templates change ([`attach`]), the NAD config made from the Linkerd-CNI
//! ConfigMap ([`cni_config`]), config rollouts ([`rollout`]) and, in the cluster, the restarts of the workloads that run an
//! older config ([`restarts`]), and which
//! namespaces of a package get, keep or lose the NAD ([`package`]), and of a
//! live cluster, for the NAD controller ([`cluster`]); the skip-subnets a pod
//! with secondary networks needs ([`skip_subnets`]); the opt-in annotations
//! written wrong, in one wording for every side ([`opt_ins`]). Settings: the
//! `LinkerdMultus` kind ([`settings`]).

pub mod attach;
pub mod cluster;
pub mod cni_config;
pub mod opt_ins;
pub mod package;
#[cfg(feature = "webhook")]
pub mod restarts;
pub mod rollout;
pub mod settings;
pub mod skip_subnets;

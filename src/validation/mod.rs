//! Validation: what Multus and its admission controller would refuse, found
//! before anything is applied. Pure code: resources in, results out; no item
//! is changed, so the same rules serve as a kpt validator (the `Validation`
//! function configuration) and as `linkerd-multus validate` in CI.
//!
//! * A NetworkAttachmentDefinition's `spec.config` must be CNI configuration
//!   that net-attach-def-admission-controller and libcni accept: a JSON
//!   object; a list (`plugins`) has a `name` and a non-empty list of plugins
//!   that each have a `type`; a single configuration has a `type`; the fields
//!   libcni reads have its types. The CNI spec's `cniVersion` must be there
//!   and be a version. The NAD's name must be a DNS-1123 label. A NAD without
//!   `spec.config` is allowed, as the admission controller allows it (Multus
//!   then reads the configuration of that name from each node's files).
//! * The networks annotations of every workload's pod template (and of
//!   Pods) must parse as Multus parses them; the default-network annotation
//!   must select exactly one network.
//! * `linkerd.io/multus` on Namespaces and pod templates must be `enabled`
//!   or `disabled`: the rules read anything else as not enabled.
//! * With namespace isolation (as Multus runs on OpenShift), a selection may
//!   name another namespace only when it is a global one.
//!
//! A selected NAD that is not in the input is not a problem: it may be in the
//! cluster already.
//!
//! [`package`] checks a package (a CNI configuration by
//! [`crate::multus::cni_config`], which the NAD controller shares); [`settings`]
//! reads the `Validation` kind.

pub mod package;
pub mod settings;

//! Multus: the order a stream applies in ([`apply_order`]), the networks annotation ([`networks`]: what Multus accepts and
//! edits in the user's form), NetworkAttachmentDefinitions ([`nad`]),
//! deterministic interface names ([`interface_name`]), the checks of a
//! CNI configuration ([`cni_config`]: what libcni and the NAD admission
//! controller refuse), and the networks its IPAM gives ([`ipam`]). It knows no rule set.

pub mod apply_order;
pub mod cni_config;
pub mod interface_name;
pub mod ipam;
pub mod nad;
pub mod networks;

//! The Linkerd CLI extension, as Linkerd's EXTENSIONS.md defines one: `linkerd
//! multus install` prints the cluster side from one configuration
//! ([`install`]), `uninstall` what removes it ([`uninstall`]), `check` what is
//! wrong in a live cluster and what to do ([`check`]), `preview` what the NAD
//! controller restarts once a new Linkerd-CNI ConfigMap is applied ([`preview`]). Every command reaches
//! the API server the way the Linkerd CLI does ([`client`]). Both `install`
//! and `uninstall` touch only the extension's own namespace ([`ownership`]).

pub mod check;
pub mod client;
pub mod install;
pub mod ownership;
pub mod preview;
pub mod uninstall;

/// The extension's name: Linkerd runs `linkerd-multus` for `linkerd multus`,
/// and finds the extension by its Namespace's label [`EXTENSION_LABEL`]`=multus`.
pub const NAME: &str = "multus";

/// The label by which `linkerd check` finds the installed extensions.
pub const EXTENSION_LABEL: &str = "linkerd.io/extension";

/// The extension's namespace unless `install` is told otherwise.
pub const DEFAULT_NAMESPACE: &str = "linkerd-multus";

//! The NAD controller's rules for a live cluster (`webhook --manage-nads`):
//! which namespaces need the Linkerd-CNI NAD, and what to do with the one a
//! namespace has. Pure code; the controller front does the I/O.
//!
//! The controller owns only the NADs it made, marked
//! `app.kubernetes.io/managed-by: linkerd-multus-controller`. A NAD rendered
//! from Git (`linkerd-multus`) or written by anyone else is never changed or
//! deleted: Git wins, and the two never fight.

use std::collections::BTreeMap;

use crate::k8s::nad::{self, Maker};
use crate::k8s::namespace::{Lookup, MULTUS_ANNOTATION};
use crate::linkerd_cni::cni_config::{self, CniConfigError};
use crate::linkerd_cni::settings::Settings;
use crate::yaml::{Map, Node};

/// Whether a live namespace needs the NAD: annotated `linkerd.io/multus:
/// enabled`, or the control-plane namespace, as the Go operator decided.
pub fn needs_nad(namespace: &str, annotations: &dyn Lookup, settings: &Settings) -> bool {
    annotations.lookup(MULTUS_ANNOTATION) == Some("enabled")
        || namespace == settings.linkerd_namespace
}

/// The NAD config text from the live ConfigMap's `data`, by the function's
/// own [`cni_config::nad_config`].
pub fn config_text(
    data: Option<&BTreeMap<String, String>>,
    settings: &Settings,
) -> Result<String, CniConfigError> {
    let map = data.map(|data| {
        let mut map = Map::default();
        for (key, value) in data {
            map.insert(key, Node::string(value.as_str()));
        }
        map
    });
    cni_config::nad_config(map.as_ref(), settings).map(|config| cni_config::to_text(&config))
}

/// The digest the controller's cache keeps of a NAD's `spec.config` instead
/// of the text: the whole SHA-256, in lowercase hex (64 characters, against a
/// config of about 700).
pub fn config_digest(config: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(config.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The NAD a namespace has, as the controller's cache holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveNad<'a> {
    /// Who made it.
    pub maker: Maker,
    /// The [`config_digest`] of its `spec.config`.
    pub config: Option<&'a str>,
}

/// What the controller does with one namespace's NAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Apply a new NAD.
    Create,
    /// Apply the NAD it made, with the new config.
    Update,
    /// Delete the NAD it made: the namespace no longer needs it.
    Delete,
    /// Nothing to write.
    Keep(Kept),
}

/// Why nothing is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The NAD it made has the config it should.
    UpToDate,
    /// The namespace needs no NAD and has none.
    NotNeeded,
    /// The NAD was rendered from Git or written by someone else: not the
    /// controller's to change or delete.
    NotOurs(Maker),
    /// No valid Linkerd-CNI ConfigMap: nothing is created or changed.
    NoConfig,
    /// The namespace is being deleted; its NADs go with it.
    Terminating,
}

/// Decides for one namespace. `config` is the [`config_digest`] of the NAD
/// config from the live ConfigMap, `None` when it is missing or invalid.
pub fn decide(
    needed: bool,
    terminating: bool,
    live: Option<LiveNad<'_>>,
    config: Option<&str>,
) -> Action {
    match (needed, live) {
        (_, Some(LiveNad { maker, .. })) if maker != Maker::Controller => {
            Action::Keep(Kept::NotOurs(maker))
        }
        (_, None) if terminating => Action::Keep(Kept::Terminating),
        (false, None) => Action::Keep(Kept::NotNeeded),
        (false, Some(_)) => Action::Delete,
        (true, _) if config.is_none() => Action::Keep(Kept::NoConfig),
        (true, None) => Action::Create,
        (true, Some(live)) if live.config == config => Action::Keep(Kept::UpToDate),
        (true, Some(_)) if terminating => Action::Keep(Kept::Terminating),
        (true, Some(_)) => Action::Update,
    }
}

/// The NAD the controller applies in `namespace`, as JSON for server-side apply.
pub fn controller_nad(namespace: &str, config: &str, settings: &Settings) -> serde_json::Value {
    nad::new(
        &settings.nad_name,
        Some(namespace),
        config,
        nad::CONTROLLER_MANAGED_BY,
        &[],
        None,
    )
    .to_json()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaces_that_need_the_nad() {
        let settings = Settings::default();
        let on: BTreeMap<String, String> = [(MULTUS_ANNOTATION.into(), "enabled".into())].into();
        let off: BTreeMap<String, String> = [(MULTUS_ANNOTATION.into(), "disabled".into())].into();
        let empty = BTreeMap::new();
        for (name, annotations, want) in [
            ("demo", &on, true),
            ("demo", &off, false),
            ("demo", &empty, false),
            ("linkerd", &empty, true),
            ("linkerd", &off, true),
        ] {
            assert_eq!(
                needs_nad(name, annotations, &settings),
                want,
                "{name} {annotations:?}"
            );
        }
    }

    #[test]
    fn decisions() {
        let ours = |config| {
            Some(LiveNad {
                maker: Maker::Controller,
                config: Some(config),
            })
        };
        let rendered = Some(LiveNad {
            maker: Maker::Rendered,
            config: Some("old"),
        });
        let users = Some(LiveNad {
            maker: Maker::Other,
            config: None,
        });
        use Action::*;
        for (needed, terminating, live, config, want) in [
            (true, false, None, Some("new"), Create),
            (true, false, None, None, Keep(Kept::NoConfig)),
            (true, false, ours("new"), Some("new"), Keep(Kept::UpToDate)),
            (true, false, ours("old"), Some("new"), Update),
            (true, false, ours("old"), None, Keep(Kept::NoConfig)),
            (
                true,
                false,
                rendered,
                Some("new"),
                Keep(Kept::NotOurs(Maker::Rendered)),
            ),
            (
                true,
                false,
                users,
                Some("new"),
                Keep(Kept::NotOurs(Maker::Other)),
            ),
            (false, false, ours("old"), Some("new"), Delete),
            (false, false, ours("old"), None, Delete),
            (
                false,
                false,
                rendered,
                None,
                Keep(Kept::NotOurs(Maker::Rendered)),
            ),
            (
                false,
                false,
                users,
                Some("new"),
                Keep(Kept::NotOurs(Maker::Other)),
            ),
            (false, false, None, Some("new"), Keep(Kept::NotNeeded)),
            (true, true, None, Some("new"), Keep(Kept::Terminating)),
            (
                true,
                true,
                ours("old"),
                Some("new"),
                Keep(Kept::Terminating),
            ),
            (false, true, ours("old"), Some("new"), Delete),
        ] {
            assert_eq!(
                decide(needed, terminating, live, config),
                want,
                "needed {needed}, terminating {terminating}, {live:?}, {config:?}"
            );
        }
    }

    #[test]
    fn the_config_comes_from_the_function_s_own_builder() {
        let settings = Settings::default();
        let data: BTreeMap<String, String> = [(
            "cni_network_config".to_string(),
            r#"{"name": "linkerd-cni", "type": "linkerd-cni", "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}}"#
                .to_string(),
        )]
        .into();
        let text = config_text(Some(&data), &settings).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            json!({"cniVersion": "0.3.0", "name": "linkerd-cni", "type": "linkerd-cni", "kubernetes": {"kubeconfig": "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"}})
        );
        let bad: BTreeMap<String, String> =
            [("cni_network_config".to_string(), "{".to_string())].into();
        assert!(matches!(
            config_text(Some(&bad), &settings),
            Err(CniConfigError::InvalidJson(_))
        ));
        assert_eq!(config_text(None, &settings), Err(CniConfigError::Missing));
    }

    #[test]
    fn config_digests_are_whole_sha256s() {
        assert_eq!(
            config_digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_ne!(config_digest("{}"), config_digest("{ }"));
    }

    #[test]
    fn the_applied_nad_carries_the_controller_s_mark() {
        let nad = controller_nad("demo", "{}", &Settings::default());
        assert_eq!(
            nad,
            json!({
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {
                    "name": "linkerd-cni",
                    "namespace": "demo",
                    "labels": {"app.kubernetes.io/managed-by": "linkerd-multus-controller"}
                },
                "spec": {"config": "{}"}
            })
        );
    }
}

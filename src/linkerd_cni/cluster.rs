//! The NAD controller's rules for a live cluster (`linkerd-multus controller`):
//! which namespaces need the Linkerd-CNI NAD, and what to do with the one a
//! namespace has. Pure code; the controller front does the I/O.
//!
//! The controller owns only the NADs it made, marked
//! `app.kubernetes.io/created-by: linkerd-multus-controller`, and only while no
//! one else holds them ([`nad::Record::holder`]: the render's mark
//! `app.kubernetes.io/managed-by: linkerd-multus`, or a server-side or
//! client-side apply by another field manager). Its mark is a label no render
//! sets, so Git's apply of a rendered NAD over the controller's conflicts on
//! nothing; from then on the NAD is Git's, and the controller never writes it:
//! Git wins, and the two never fight.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::k8s::namespace::{Lookup, MULTUS_ANNOTATION};
use crate::linkerd_cni::cni_config::{self, CniConfigError, NETWORK_CONFIG_KEY};
use crate::linkerd_cni::settings::Settings;
use crate::multus::cni_config::{self as cni_check, check_cni_config};
use crate::multus::nad::{self, Maker};
use crate::yaml::{Map, Node};

/// Whether a live namespace needs the NAD: annotated `linkerd.io/multus:
/// enabled`, or the control-plane namespace, as the Go operator decided.
pub fn needs_nad(namespace: &str, annotations: &dyn Lookup, settings: &Settings) -> bool {
    annotations.lookup(MULTUS_ANNOTATION) == Some("enabled")
        || namespace == settings.linkerd_namespace
}

/// The largest NAD config the controller copies from the live ConfigMap.
/// Linkerd-CNI's own config is under 1 KiB (about 700 bytes with every field
/// of 2.19); 16 KiB leaves room twenty times over for fields later versions
/// add, while bounding what one ConfigMap edit writes: the config goes into
/// every enabled namespace's NAD, so 10,000 namespaces hold at most 160 MiB
/// of it in etcd and in every NAD watcher's memory (Multus, the webhook).
pub const MAX_CONFIG_BYTES: usize = 16 * 1024;

/// The CNI plugin type the controller's NADs run: Linkerd-CNI's.
pub const LINKERD_CNI_TYPE: &str = "linkerd-cni";

/// Why the live ConfigMap gives no NAD config the controller may copy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveConfigError {
    /// The ConfigMap itself does not give a config.
    #[error(transparent)]
    ConfigMap(#[from] CniConfigError),
    /// The config is larger than [`MAX_CONFIG_BYTES`].
    #[error(
        "data.{NETWORK_CONFIG_KEY} makes a NAD config of {size} bytes, more than the {MAX_CONFIG_BYTES} the controller copies into every enabled namespace: remove what Linkerd-CNI does not read"
    )]
    TooLarge {
        /// Its size, bytes.
        size: usize,
    },
    /// The config is not one Multus and Linkerd-CNI would run.
    #[error(
        "data.{NETWORK_CONFIG_KEY} is not a Linkerd-CNI config Multus would run: {}; fix the ConfigMap (Linkerd's CNI chart writes it)",
        join(.0)
    )]
    Invalid(Vec<ConfigProblem>),
}

/// One problem of the config the ConfigMap gives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    /// What libcni or the NAD admission controller would refuse.
    #[error("CNI configuration {0}")]
    Cni(cni_check::CniConfigError),
    /// A list of plugins: Linkerd-CNI's config is a single one.
    #[error("it has \"plugins\": Linkerd-CNI's config is a single configuration, not a list")]
    List,
    /// Another plugin type.
    #[error("\"type\" is {0}, not \"{LINKERD_CNI_TYPE}\"")]
    NotLinkerdCni(String),
    /// No `name`.
    #[error("it has no \"name\" (Linkerd-CNI's config names itself {LINKERD_CNI_TYPE:?})")]
    NoName,
}

fn join(problems: &[ConfigProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// The NAD config text from the live ConfigMap's `data`, by the function's
/// own [`cni_config::nad_config`], checked before the controller copies it:
/// what `validate` requires of a NAD's config ([`check_cni_config`]), a
/// single configuration of type [`LINKERD_CNI_TYPE`] with a `name`, and at
/// most [`MAX_CONFIG_BYTES`].
pub fn config_text(
    data: Option<&BTreeMap<String, String>>,
    settings: &Settings,
) -> Result<String, LiveConfigError> {
    let map = data.map(|data| {
        let mut map = Map::default();
        for (key, value) in data {
            map.insert(key, Node::string(value.as_str()));
        }
        map
    });
    let config = cni_config::nad_config(map.as_ref(), settings)?;
    let text = cni_config::to_text(&config);
    if text.len() > MAX_CONFIG_BYTES {
        return Err(LiveConfigError::TooLarge { size: text.len() });
    }
    let mut problems: Vec<ConfigProblem> = check_cni_config(&text)
        .into_iter()
        .map(ConfigProblem::Cni)
        .collect();
    if config.get("plugins").is_some() {
        problems.push(ConfigProblem::List);
    } else {
        match config.get("type") {
            Some(Value::String(t)) if t == LINKERD_CNI_TYPE => {}
            Some(Value::String(t)) if !t.is_empty() => {
                problems.push(ConfigProblem::NotLinkerdCni(format!("{t:?}")))
            }
            // Missing, empty or not a string: check_cni_config said so.
            _ => {}
        }
    }
    if matches!(config.get("name"), None | Some(Value::Null)) {
        problems.push(ConfigProblem::NoName);
    }
    match problems.is_empty() {
        true => Ok(text),
        false => Err(LiveConfigError::Invalid(problems)),
    }
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
    /// Whether it carries the controller's earlier mark ([`nad::Record::legacy`]), which
    /// the controller replaces.
    pub legacy: bool,
}

/// What the controller does with one namespace's NAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Apply a new NAD.
    Create,
    /// Patch the NAD it made: the new config, or its earlier mark replaced.
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
        (true, Some(live)) if live.config == config && !live.legacy => Action::Keep(Kept::UpToDate),
        (true, Some(_)) if terminating => Action::Keep(Kept::Terminating),
        (true, Some(_)) => Action::Update,
    }
}

/// The NAD the controller creates in `namespace`, as JSON.
pub fn controller_nad(namespace: &str, config: &str, settings: &Settings) -> serde_json::Value {
    nad::new(
        &settings.nad_name,
        Some(namespace),
        config,
        (nad::CREATED_BY_LABEL, nad::CONTROLLER_MANAGED_BY),
        &[],
        None,
    )
    .to_json()
}

/// The JSON merge patch that puts the controller's own NAD back: its `config`, its mark,
/// and its earlier mark removed when `legacy`; guarded by `resource_version`, so a NAD
/// changed since the controller saw it (taken over by Git) fails it with 409.
pub fn controller_patch(config: &str, legacy: bool, resource_version: &str) -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    labels.insert(
        nad::CREATED_BY_LABEL.into(),
        nad::CONTROLLER_MANAGED_BY.into(),
    );
    if legacy {
        labels.insert(nad::MANAGED_BY_LABEL.into(), serde_json::Value::Null);
    }
    serde_json::json!({
        "metadata": {"resourceVersion": resource_version, "labels": labels},
        "spec": {"config": config},
    })
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
                legacy: false,
            })
        };
        let legacy = Some(LiveNad {
            maker: Maker::Controller,
            config: Some("new"),
            legacy: true,
        });
        let rendered = Some(LiveNad {
            maker: Maker::Rendered,
            config: Some("old"),
            legacy: false,
        });
        let users = Some(LiveNad {
            maker: Maker::Other,
            config: None,
            legacy: false,
        });
        use Action::*;
        for (needed, terminating, live, config, want) in [
            (true, false, None, Some("new"), Create),
            (true, false, None, None, Keep(Kept::NoConfig)),
            (true, false, ours("new"), Some("new"), Keep(Kept::UpToDate)),
            (true, false, ours("old"), Some("new"), Update),
            (true, false, legacy, Some("new"), Update),
            (false, false, legacy, Some("new"), Delete),
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
            Err(LiveConfigError::ConfigMap(CniConfigError::InvalidJson(_)))
        ));
        assert_eq!(
            config_text(None, &settings),
            Err(LiveConfigError::ConfigMap(CniConfigError::Missing))
        );
    }

    #[test]
    fn the_live_config_is_checked_before_it_is_copied() {
        let settings = Settings::default();
        let kubeconfig = r#""kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}"#;
        let ok = format!(r#"{{"name": "linkerd-cni", "type": "linkerd-cni", {kubeconfig}}}"#);
        let long = format!(
            r#"{{"name": "linkerd-cni", "type": "linkerd-cni", "pad": "{}"}}"#,
            "x".repeat(MAX_CONFIG_BYTES)
        );
        let at = "data.cni_network_config is not a Linkerd-CNI config Multus would run: ";
        for (config, want) in [
            (ok.as_str(), None),
            (
                r#"{"name": "linkerd-cni", "type": "bridge"}"#,
                Some(format!("{at}\"type\" is \"bridge\", not \"linkerd-cni\"")),
            ),
            (
                r#"{"type": "linkerd-cni"}"#,
                Some(format!(
                    "{at}it has no \"name\" (Linkerd-CNI's config names itself \"linkerd-cni\")"
                )),
            ),
            (
                r#"{"name": "linkerd-cni", "cniVersion": "0.9.9", "type": "linkerd-cni"}"#,
                Some(format!(
                    "{at}CNI configuration \"cniVersion\" \"0.9.9\" is not a CNI spec version; valid: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"
                )),
            ),
            (
                r#"{"name": "l", "plugins": [{"type": "linkerd-cni"}]}"#,
                Some(format!(
                    "{at}it has \"plugins\": Linkerd-CNI's config is a single configuration, not a list"
                )),
            ),
            (
                r#"{"name": 7, "type": ""}"#,
                Some(format!(
                    "{at}CNI configuration \"type\" is empty; CNI configuration \"name\" is a number, not a string"
                )),
            ),
            (
                long.as_str(),
                Some(format!(
                    "data.cni_network_config makes a NAD config of {} bytes, more than the 16384 the controller copies into every enabled namespace: remove what Linkerd-CNI does not read",
                    MAX_CONFIG_BYTES + 90
                )),
            ),
        ] {
            let data: BTreeMap<String, String> =
                [("cni_network_config".to_string(), config.to_string())].into();
            let got = config_text(Some(&data), &settings).map_err(|e| e.to_string());
            let config = &config[..config.len().min(80)];
            match want {
                None => assert!(got.is_ok(), "{config}: {got:?}"),
                Some(want) => assert_eq!(
                    got.unwrap_err(),
                    format!(
                        "{want}{}",
                        if want.starts_with(at) {
                            "; fix the ConfigMap (Linkerd's CNI chart writes it)"
                        } else {
                            ""
                        }
                    ),
                    "{config}"
                ),
            }
        }
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
                    "labels": {"app.kubernetes.io/created-by": "linkerd-multus-controller"}
                },
                "spec": {"config": "{}"}
            })
        );
        assert_eq!(
            controller_patch("{}", true, "7"),
            json!({
                "metadata": {
                    "resourceVersion": "7",
                    "labels": {
                        "app.kubernetes.io/created-by": "linkerd-multus-controller",
                        "app.kubernetes.io/managed-by": null
                    }
                },
                "spec": {"config": "{}"}
            })
        );
        assert_eq!(
            controller_patch("{}", false, "7")["metadata"]["labels"],
            json!({"app.kubernetes.io/created-by": "linkerd-multus-controller"})
        );
    }
}

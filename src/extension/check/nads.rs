//! The NADs: every namespace that needs one has it (the NAD controller's own
//! rule, [`cluster::needs_nad`]), and every NAD the controller or a render
//! made holds the config the live ConfigMap gives ([`cluster::config_text`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::extension::Installed;
use super::report::Check;
use super::snapshot::{Meta, Nad};
use super::wait::{Pass, Retry};
use super::{NADS, capped};
use crate::extension::install::NAD_CONTROLLER;
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::cni_config::other_network;
use crate::linkerd_cni::settings::Settings;
use crate::multus::nad::Maker;

/// The namespaces (by name, sorted) that need the NAD and have none. Those
/// being deleted need none.
pub fn missing(
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    settings: &Settings,
) -> Vec<String> {
    namespaces
        .iter()
        .filter(|n| n.deletion_timestamp.is_none())
        .filter(|n| cluster::needs_nad(&n.name, &n.annotations, settings))
        .filter(|n| !nads.contains_key(&n.name))
        .map(|n| n.name.clone())
        .collect()
}

/// The namespaces that need the NAD and whose NAD of that name is another
/// network: not made by linkerd-multus, and with a config that runs no
/// Linkerd-CNI plugin. Each with what it runs. A NAD without `spec.config`
/// (Multus then reads the node's file of that name) is not judged.
pub fn taken(
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    settings: &Settings,
) -> Vec<(String, String)> {
    namespaces
        .iter()
        .filter(|n| n.deletion_timestamp.is_none())
        .filter(|n| cluster::needs_nad(&n.name, &n.annotations, settings))
        .filter_map(|n| {
            let nad = nads.get(&n.name)?;
            if nad.maker != Maker::Other {
                return None;
            }
            let runs = other_network(nad.config.as_deref()?)?;
            Some((n.name.clone(), runs))
        })
        .collect()
}

/// The NADs made by the controller or a render whose config is not the one
/// `config` (the ConfigMap's) gives: namespace and maker, by namespace. A
/// config equal as JSON counts as the same.
pub fn stale(nads: &BTreeMap<String, Nad>, config: &str) -> Vec<(String, Maker)> {
    let want: Option<Value> = serde_json::from_str(config).ok();
    let same = |text: &str| {
        text == config
            || serde_json::from_str::<Value>(text)
                .ok()
                .is_some_and(|v| Some(v) == want)
    };
    nads.iter()
        .filter(|(_, n)| matches!(n.maker, Maker::Controller | Maker::Rendered))
        .filter(|(_, n)| !n.config.as_deref().is_some_and(same))
        .map(|(ns, n)| (ns.clone(), n.maker))
        .collect()
}

/// The two checks of the NADs.
pub fn check(
    installed: &Installed,
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    config: Option<&str>,
    pass: &mut Pass,
) {
    let settings = &installed.settings;
    let name = &settings.nad_name;
    let ns = &installed.namespace;
    let description = format!("every namespace that needs the {name} NAD has it");
    let absent: Vec<String> = missing(namespaces, nads, settings)
        .into_iter()
        .map(|n| format!("{n}/{name}"))
        .collect();
    let (check, retry) = match (absent.is_empty(), installed.manage_nads) {
        (true, _) => (Check::success(description), Retry::No),
        (false, true) => (
            Check::error(
                description,
                format!("NetworkAttachmentDefinitions missing: {}", capped(&absent)),
                format!(
                    "the NAD controller makes them; see why it did not: kubectl -n {ns} logs deploy/{NAD_CONTROLLER}; kubectl get events -n default --field-selector reason=NADFailed"
                ),
            ),
            Retry::Yes,
        ),
        (false, false) => (
            Check::error(
                description,
                format!("NetworkAttachmentDefinitions missing: {}", capped(&absent)),
                "render them from Git and apply them (kpt fn render, or linkerd-multus render DIR | kubectl apply -f -), or run the NAD controller (linkerd multus install --manage-nads, or deploy-nad-controller/) to make them",
            ),
            Retry::No,
        ),
    };
    pass.add(NADS, check, retry);
    taken_check(installed, namespaces, nads, pass);
    stale_check(installed, nads, config, pass);
}

/// The check that no namespace's NAD of the name is someone else's network.
fn taken_check(
    installed: &Installed,
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    pass: &mut Pass,
) {
    let name = &installed.settings.nad_name;
    let description = format!("no namespace's {name} NAD is another network");
    let taken: Vec<String> = taken(namespaces, nads, &installed.settings)
        .into_iter()
        .map(|(n, runs)| format!("{n}/{name} runs {runs}"))
        .collect();
    let check = if taken.is_empty() {
        Check::success(description)
    } else {
        Check::error(
            description,
            format!(
                "NetworkAttachmentDefinitions of someone else's, not Linkerd-CNI: {}; the meshed pods of these namespaces join that network instead of Linkerd-CNI",
                capped(&taken)
            ),
            "rename that network (and the pods that select it), or give linkerd-multus another NAD name: the webhook's --nad-name and the render's nadName; if it is meant to be Linkerd-CNI's, label it app.kubernetes.io/managed-by: linkerd-multus and render it from Git",
        )
    };
    pass.add(NADS, check, Retry::No);
}

/// The check of the NADs' configs.
fn stale_check(
    installed: &Installed,
    nads: &BTreeMap<String, Nad>,
    config: Option<&str>,
    pass: &mut Pass,
) {
    let name = &installed.settings.nad_name;
    let ns = &installed.namespace;
    let description =
        format!("every {name} NAD made by linkerd-multus holds the ConfigMap's config");
    let Some(config) = config else {
        let check = Check::warning(
            description,
            "not compared: the Linkerd-CNI ConfigMap gives no valid config",
            "fix the Linkerd-CNI ConfigMap first (see linkerd-multus-cni above)",
        );
        return pass.add(NADS, check, Retry::No);
    };
    let old = stale(nads, config);
    if old.is_empty() {
        return pass.add(NADS, Check::success(description), Retry::No);
    }
    let by = |maker: Maker| -> Vec<String> {
        old.iter()
            .filter(|(_, m)| *m == maker)
            .map(|(n, _)| format!("{n}/{name}"))
            .collect()
    };
    let (controller, rendered) = (by(Maker::Controller), by(Maker::Rendered));
    let mut errors = Vec::new();
    let mut hints = Vec::new();
    if !controller.is_empty() {
        errors.push(format!(
            "made by the NAD controller: {}",
            capped(&controller)
        ));
        hints.push(format!("the NAD controller updates its own within seconds; if it does not, see its log (kubectl -n {ns} logs deploy/{NAD_CONTROLLER}) or restart it (kubectl -n {ns} rollout restart deploy/{NAD_CONTROLLER})"));
    }
    if !rendered.is_empty() {
        errors.push(format!("rendered from Git: {}", capped(&rendered)));
        hints.push("render the package again with the live ConfigMap and apply it (kpt fn render, your GitOps tool's sync, or linkerd-multus render DIR | kubectl apply -f -)".into());
    }
    let retry = match installed.manage_nads && rendered.is_empty() {
        true => Retry::Yes,
        false => Retry::No,
    };
    let error = format!(
        "NetworkAttachmentDefinitions with an older config, {}",
        errors.join("; ")
    );
    pass.add(
        NADS,
        Check::error(description, error, hints.join("; ")),
        retry,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::namespace::MULTUS_ANNOTATION;

    fn ns(name: &str, multus: Option<&str>, deleting: bool) -> Meta {
        Meta {
            name: name.into(),
            annotations: multus
                .map(|v| [(MULTUS_ANNOTATION.to_string(), v.to_string())].into())
                .unwrap_or_default(),
            deletion_timestamp: deleting.then(|| "2025-01-01T00:00:00Z".into()),
            ..Meta::default()
        }
    }

    fn nad(maker: Maker, config: &str) -> Nad {
        Nad::new(maker, Some(config.into()))
    }

    #[test]
    fn namespaces_that_need_the_nad_and_lack_it() {
        let namespaces = [
            ns("a", Some("enabled"), false),
            ns("b", Some("enabled"), false),
            ns("c", Some("disabled"), false),
            ns("d", Some("enabled"), true),
            ns("linkerd", None, false),
            ns("plain", None, false),
        ];
        let nads: BTreeMap<String, Nad> = [("b".to_string(), nad(Maker::Other, "{}"))].into();
        assert_eq!(
            missing(&namespaces, &nads, &Settings::default()),
            ["a", "linkerd"]
        );
    }

    #[test]
    fn taken_nads_are_other_networks_in_namespaces_that_need_the_nad() {
        let macvlan = r#"{"cniVersion": "0.3.1", "type": "macvlan"}"#;
        let namespaces = [
            ns("mac", Some("enabled"), false),
            ns("chained", Some("enabled"), false),
            ns("ours", Some("enabled"), false),
            ns("unneeded", None, false),
            ns("leaving", Some("enabled"), true),
            ns("broken", Some("enabled"), false),
            ns("file", Some("enabled"), false),
        ];
        let nads: BTreeMap<String, Nad> = [
            ("mac".to_string(), nad(Maker::Other, macvlan)),
            (
                "chained".to_string(),
                nad(
                    Maker::Other,
                    r#"{"plugins": [{"type": "bridge"}, {"type": "linkerd-cni"}]}"#,
                ),
            ),
            ("ours".to_string(), nad(Maker::Controller, macvlan)),
            ("unneeded".to_string(), nad(Maker::Other, macvlan)),
            ("leaving".to_string(), nad(Maker::Other, macvlan)),
            ("broken".to_string(), nad(Maker::Other, "{")),
            ("file".to_string(), Nad::new(Maker::Other, None)),
        ]
        .into();
        assert_eq!(
            taken(&namespaces, &nads, &Settings::default()),
            [
                ("mac".to_string(), "macvlan".to_string()),
                (
                    "broken".to_string(),
                    "no valid CNI configuration".to_string()
                ),
            ]
        );
    }

    #[test]
    fn stale_nads_are_those_linkerd_multus_made_with_another_config() {
        let config = "{\n  \"a\": 1\n}";
        let nads: BTreeMap<String, Nad> = [
            ("same".to_string(), nad(Maker::Controller, config)),
            (
                "reformatted".to_string(),
                nad(Maker::Rendered, r#"{"a":1}"#),
            ),
            ("old".to_string(), nad(Maker::Controller, r#"{"a":2}"#)),
            ("old-render".to_string(), nad(Maker::Rendered, r#"{"a":2}"#)),
            ("users".to_string(), nad(Maker::Other, r#"{"a":2}"#)),
            ("none".to_string(), Nad::new(Maker::Controller, None)),
        ]
        .into();
        assert_eq!(
            stale(&nads, config),
            [
                ("none".to_string(), Maker::Controller),
                ("old".to_string(), Maker::Controller),
                ("old-render".to_string(), Maker::Rendered),
            ]
        );
    }

    #[test]
    fn the_checks_name_the_nads_and_retry_only_what_the_controller_mends() {
        let installed = |manage_nads| Installed {
            namespace: "linkerd-multus".into(),
            settings: Settings::default(),
            manage_nads,
            restarts: None,
        };
        let namespaces = [ns("a", Some("enabled"), false)];
        for (manage, want_retry) in [(true, true), (false, false)] {
            let mut pass = Pass::default();
            check(
                &installed(manage),
                &namespaces,
                &BTreeMap::new(),
                Some("{}"),
                &mut pass,
            );
            let checks = &pass.report.categories[0].checks;
            assert_eq!(
                checks[0].error.as_deref(),
                Some("NetworkAttachmentDefinitions missing: a/linkerd-cni")
            );
            assert_eq!(checks[1].error, None);
            assert_eq!(pass.retry, want_retry);
        }
    }
}

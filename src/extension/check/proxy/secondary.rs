//! `--proxy`'s secondary networks: the meshed pods with secondary networks whose subnets no
//! skip-subnets covers (inbound TCP on them goes to the proxy, which refuses it:
//! [`skip_subnets`]), and those whose skip-subnets linkerd-multus wrote
//! ([`ADDED_ANNOTATION`]) for subnets their NADs no longer give.

use ipnet::IpNet;

use super::Findings;
use crate::extension::check::snapshot::{Ipams, Pod};
use crate::linkerd_cni::skip_subnets::{self, ADDED_ANNOTATION, Network, PluginSettings};
use crate::multus::networks::Networks;

/// Judges one meshed pod's secondary networks (`networks`, in namespace `ns`, named `named`),
/// given its namespace's skip-subnets `ns_skipped` and Linkerd-CNI's own settings `plugin`.
pub(super) fn judge(
    found: &mut Findings,
    pod: &Pod,
    named: String,
    networks: &Networks,
    (ns, ns_skipped, plugin): (&str, Option<&str>, &PluginSettings),
    (ipams, nad_name): (&Ipams, &str),
) {
    let annotations = &pod.meta.annotations;
    let given = secondary_given(networks, ns, ipams, nad_name);
    let skipped = skip_subnets::effective(
        annotations
            .get(skip_subnets::ANNOTATION)
            .map(String::as_str),
        ns_skipped,
        &plugin.subnets_to_ignore,
    );
    let missing: Vec<String> = given
        .iter()
        .flat_map(|(nad, subnets)| {
            let subnets = subnets.as_deref().unwrap_or_default();
            skip_subnets::uncovered(subnets, &skipped)
                .into_iter()
                .map(move |subnet| format!("{subnet} of {nad}"))
        })
        .collect();
    // A pod whose skip-subnets linkerd-multus wrote is named once, with the rule's fix;
    // what it wrote is judged only when every network the pod selects reads.
    let written = annotations
        .get(ADDED_ANNOTATION)
        .filter(|_| given.iter().all(|(_, subnets)| subnets.is_some()));
    let stale = written.and_then(|written| {
        let carried = ns_skipped.into_iter().flat_map(|v| v.split(','));
        let plugin_list = plugin.subnets_to_ignore.iter().map(String::as_str);
        let carried: Vec<&str> = carried.chain(plugin_list).collect();
        stale(written, &given, &missing, &carried, plugin.ipv6)
    });
    match stale {
        Some(entry) => found.secondary_stale.push(format!("{named} ({entry})")),
        None if !missing.is_empty() => found
            .secondary_refused
            .push(format!("{named} ({})", missing.join(", "))),
        None => {}
    }
}

/// Each secondary network `networks` selects (every NAD but the Linkerd-CNI one), as
/// `namespace/name`, with the IPv4 subnets it gives now ([`skip_subnets::secondary_subnets`]
/// with IPv6 off; the cluster's ranges do not matter here): none when the NAD no longer
/// exists, `None` when its IPAM cannot be read or is refused.
fn secondary_given(
    networks: &Networks,
    ns: &str,
    ipams: &Ipams,
    nad_name: &str,
) -> Vec<(String, Option<Vec<IpNet>>)> {
    let secondary = networks.selections().iter();
    secondary
        .filter(|selection| !selection.refers_to(nad_name, ns))
        .map(|selection| {
            let key = (
                selection.namespace_or(ns).to_string(),
                selection.name.clone(),
            );
            let nad = format!("{}/{}", key.0, key.1);
            let subnets = match ipams.get(&key) {
                None => Some(Vec::new()),
                Some(ipam) => {
                    let network = Network {
                        nad: &nad,
                        ipam,
                        ips: &selection.ips,
                    };
                    skip_subnets::secondary_subnets(&[network], Default::default(), false)
                        .ok()
                        .map(|found| found.subnets)
                }
            };
            (nad, subnets)
        })
        .collect()
}

/// How the skip-subnets linkerd-multus wrote for a pod (`written`, its [`ADDED_ANNOTATION`])
/// differ from what its networks `given` give now, `None` when they do not: the subnets
/// written that no network gives any more, then those `missing` from its skip-subnets. The
/// entries `carried` over (the namespace's value, the plugin's `subnets-to-ignore`) are not a
/// network's. With Linkerd-CNI's `ipv6` on, every subnet written fails the pod's next start.
fn stale(
    written: &str,
    given: &[(String, Option<Vec<IpNet>>)],
    missing: &[String],
    carried: &[&str],
    ipv6: bool,
) -> Option<String> {
    let gone: Vec<String> = written
        .split(',')
        .filter(|entry| !carried.contains(entry))
        .filter_map(|entry| entry.parse::<IpNet>().ok())
        .filter(|subnet| {
            ipv6 || !given
                .iter()
                .any(|(_, subnets)| subnets.iter().flatten().any(|s| s == subnet))
        })
        .map(|subnet| subnet.to_string())
        .collect();
    let mut parts = Vec::new();
    if !gone.is_empty() {
        let nads: Vec<&str> = given.iter().map(|(nad, _)| nad.as_str()).collect();
        let why = match nads[..] {
            _ if ipv6 => "which fail its next start now that Linkerd-CNI runs with ipv6 on".into(),
            [] => "which no network of it gives".to_string(),
            [nad] => format!("which {nad} no longer gives"),
            _ => format!("which none of {} gives any more", nads.join(", ")),
        };
        parts.push(format!("written for {}, {why}", gone.join(", ")));
    }
    if !missing.is_empty() && !ipv6 {
        let written = if parts.is_empty() { "written " } else { "" };
        parts.push(format!("{written}without {}", missing.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::judge;
    use super::super::tests::{pod, seen};
    use super::*;
    use crate::extension::check::snapshot::{Meta, Nad};
    use crate::linkerd_cni::settings::Settings;
    use crate::multus::nad::Maker;
    use crate::multus::networks::NETWORKS_ANNOTATION;

    /// Meshed pods with secondary networks: listed with each subnet no skip-subnets covers,
    /// whichever of the pod's, the namespace's or Linkerd-CNI's own list applies.
    #[test]
    fn secondary_networks_no_skip_subnets_covers_are_named() {
        use crate::multus::ipam;
        let storage = r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "172.20.0.0/16"}]}}"#;
        let ipams: Ipams = [
            ("demo", "storage", storage),
            ("shared", "data", r#"{"type": "bridge", "ipam": {"type": "host-local", "subnet": "192.168.50.0/24"}}"#),
            ("demo", "lease", r#"{"type": "macvlan", "ipam": {"type": "dhcp"}}"#),
            ("demo", "broken", r#"{"type": "macvlan", "ipam": {"type": "calico-ipam"}}"#),
        ]
        .into_iter()
        .map(|(ns, name, config)| ((ns.to_string(), name.to_string()), ipam::read(config)))
        .collect();
        let meta = |name: &str, annotations: &[(&str, &str)]| Meta {
            name: name.into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Meta::default()
        };
        let demo = meta("demo", &[]);
        let skipping = meta(
            "skipping",
            &[(skip_subnets::ANNOTATION, "10.10.0.0/16,172.20.0.0/16")],
        );
        let namespaces: BTreeMap<&str, &Meta> = [("demo", &demo), ("skipping", &skipping)].into();
        let plugin = r#"{"cniVersion": "0.3.1", "plugins": [{"type": "linkerd-cni", "linkerd": {"subnets-to-ignore": ["192.168.0.0/16"]}}]}"#;
        let nads: BTreeMap<String, Nad> = [(
            "demo".to_string(),
            Nad::new(Maker::Controller, Some(plugin.into())),
        )]
        .into();
        let networks = (
            NETWORKS_ANNOTATION,
            "storage, shared/data@net2, lease, broken, linkerd-cni",
        );
        let pods = [
            // Linkerd-CNI's own list covers shared/data; storage's subnet and route are not.
            pod("plain", "demo", &[networks]),
            // The pod's own value replaces the plugin's: shared/data is not covered any more.
            pod(
                "own",
                "demo",
                &[
                    networks,
                    (skip_subnets::ANNOTATION, "10.10.0.0/24,172.20.0.0/16"),
                ],
            ),
            // The namespace's value: storage covered, not shared/data (no plugin list there).
            pod(
                "by-namespace",
                "skipping",
                &[(NETWORKS_ANNOTATION, "demo/storage, shared/data")],
            ),
            // No secondary network.
            pod("mesh-only", "demo", &[(NETWORKS_ANNOTATION, "linkerd-cni")]),
        ];
        let found = judge(
            &pods,
            &seen(&namespaces, &nads, &ipams, &Settings::default()),
        );
        assert_eq!(
            found.secondary_refused,
            [
                "demo/own (192.168.50.0/24 of shared/data)",
                "demo/plain (10.10.0.0/24 of demo/storage, 172.20.0.0/16 of demo/storage)",
                "skipping/by-namespace (192.168.50.0/24 of shared/data)",
            ]
        );
    }

    /// The findings for one pod `demo/web` that selects `networks` (and Linkerd-CNI) with
    /// skip-subnets `value`, of which linkerd-multus wrote `written`; `demo/storage` has
    /// `config`, the namespace's skip-subnets are `ns_value`, and Linkerd-CNI's own list is
    /// 192.168.0.0/16 with `ipv6`.
    fn judge_web(
        config: &str,
        networks: &str,
        ns_value: Option<&str>,
        ipv6: bool,
        (value, written): (&str, &str),
    ) -> Findings {
        let ipams: Ipams = [(
            ("demo".into(), "storage".into()),
            crate::multus::ipam::read(config),
        )]
        .into();
        let linkerd = format!(
            r#"{{"type": "linkerd-cni", "linkerd": {{"subnets-to-ignore": ["192.168.0.0/16"], "ipv6": {ipv6}}}}}"#
        );
        let nads: BTreeMap<String, Nad> =
            [("demo".into(), Nad::new(Maker::Controller, Some(linkerd)))].into();
        let demo = Meta {
            name: "demo".into(),
            annotations: ns_value
                .map(|v| (skip_subnets::ANNOTATION.to_string(), v.to_string()))
                .into_iter()
                .collect(),
            ..Meta::default()
        };
        let namespaces: BTreeMap<&str, &Meta> = [("demo", &demo)].into();
        let networks = format!("{networks}, linkerd-cni");
        let mut annotations = vec![
            (NETWORKS_ANNOTATION, networks.as_str()),
            (skip_subnets::ANNOTATION, value),
        ];
        if !written.is_empty() {
            annotations.push((ADDED_ANNOTATION, written));
        }
        let pods = [pod("web", "demo", &annotations)];
        judge(
            &pods,
            &seen(&namespaces, &nads, &ipams, &Settings::default()),
        )
    }

    /// A static IPAM with `address` and `routes` (JSON objects).
    fn static_ipam(address: &str, routes: &str) -> String {
        format!(
            r#"{{"type": "macvlan", "ipam": {{"type": "static", "addresses": [{{"address": "{address}"}}], "routes": [{routes}]}}}}"#
        )
    }

    const ROUTE: &str = r#"{"dst": "172.20.0.0/16"}"#;

    fn listed(text: &str) -> Vec<String> {
        (!text.is_empty())
            .then(|| text.to_string())
            .into_iter()
            .collect()
    }

    /// A pod whose skip-subnets linkerd-multus wrote for 10.10.0.0/24 and 172.20.0.0/16 of
    /// demo/storage (carrying Linkerd-CNI's own list over): named when they no longer match
    /// what its NADs give, with what was written and what is wanted.
    #[test]
    fn skip_subnets_written_for_other_subnets_are_named() {
        let written = "192.168.0.0/16,10.10.0.0/24,172.20.0.0/16";
        let two_routes = format!("{ROUTE}, {{\"dst\": \"172.21.0.0/16\"}}");
        let v6 = r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "fd00:10::5/64"}]}}"#;
        let unreadable = r#"{"type": "macvlan", "ipam": {"type": "calico-ipam"}}"#;
        // (the NAD's config now, the networks, Linkerd-CNI's ipv6, the finding)
        let cases: &[(&str, &str, bool, &str)] = &[
            (&static_ipam("10.10.0.5/24", ROUTE), "storage", false, ""),
            (
                &static_ipam("10.11.0.5/24", ROUTE),
                "storage",
                false,
                "demo/web (written for 10.10.0.0/24, which demo/storage no longer gives; without 10.11.0.0/24 of demo/storage)",
            ),
            (
                &static_ipam("10.10.0.5/24", ""),
                "storage",
                false,
                "demo/web (written for 172.20.0.0/16, which demo/storage no longer gives)",
            ),
            (
                &static_ipam("10.10.0.5/24", &two_routes),
                "storage",
                false,
                "demo/web (written without 172.21.0.0/16 of demo/storage)",
            ),
            (
                &static_ipam("10.10.0.5/24", ""),
                "storage, gone",
                false,
                "demo/web (written for 172.20.0.0/16, which none of demo/storage, demo/gone gives any more)",
            ),
            (
                v6,
                "storage",
                false,
                "demo/web (written for 10.10.0.0/24, 172.20.0.0/16, which demo/storage no longer gives)",
            ),
            (
                &static_ipam("10.10.0.5/24", ROUTE),
                "storage",
                true,
                "demo/web (written for 10.10.0.0/24, 172.20.0.0/16, which fail its next start now that Linkerd-CNI runs with ipv6 on)",
            ),
            // Nothing to compare with: the NAD's IPAM is another check's.
            (unreadable, "storage", false, ""),
        ];
        for (config, networks, ipv6, want) in cases {
            let found = judge_web(config, networks, None, *ipv6, (written, written));
            assert_eq!(found.secondary_stale, listed(want), "{config} {networks}");
            assert!(found.secondary_refused.is_empty(), "{config}");
        }
    }

    /// What linkerd-multus wrote is told from what the pod or its namespace had: the entries
    /// carried over are not a network's, the pod's own are kept, and a pod it did not write
    /// for is the other check's.
    #[test]
    fn skip_subnets_carried_over_are_not_a_networks() {
        let config = static_ipam("10.10.0.5/24", ROUTE);
        let both = "10.10.0.0/24,172.20.0.0/16";
        let ns_too = "10.96.0.0/12,10.10.0.0/24,172.20.0.0/16";
        // (the namespace's value, the pod's value, what was written, stale, refused)
        let cases: &[(Option<&str>, &str, &str, &str, &str)] = &[
            (Some("10.96.0.0/12"), ns_too, ns_too, "", ""),
            (
                None,
                "10.10.0.0/16,10.10.0.0/24,172.20.0.0/16",
                both,
                "",
                "",
            ),
            (
                None,
                "10.10.0.0/24",
                "",
                "",
                "demo/web (172.20.0.0/16 of demo/storage)",
            ),
            (
                Some("10.96.0.0/12"),
                "10.96.0.0/12,10.10.0.0/24",
                "10.96.0.0/12,10.10.0.0/24",
                "demo/web (written without 172.20.0.0/16 of demo/storage)",
                "",
            ),
        ];
        for (ns_value, value, written, stale, refused) in cases {
            let found = judge_web(&config, "storage", *ns_value, false, (value, written));
            assert_eq!(
                (found.secondary_stale, found.secondary_refused),
                (listed(stale), listed(refused)),
                "{value} {written}"
            );
        }
    }
}

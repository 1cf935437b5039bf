//! `--proxy`: the data plane. Of the meshed pods (a `linkerd-proxy`
//! container), in every namespace or `-n`: those the rules attach
//! ([`attach::decide`], as the webhook decides) whose networks lack the
//! NAD; those created under an older NAD config (the hash the webhook and
//! renders record, [`HASH_ANNOTATION`]); those whose
//! `linkerd-network-validator` exited with 95; on OpenShift those whose
//! proxy UID is outside their namespace's UID range; and those with secondary
//! networks whose subnets no skip-subnets covers (inbound TCP on them goes to
//! the proxy, which refuses it: [`skip_subnets`]); and those whose skip-subnets
//! linkerd-multus wrote ([`ADDED_ANNOTATION`]) for subnets their NADs no longer give.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use kube::Client;

use super::report::Check;
use super::snapshot::{self, Ipams, Meta, Nad, Pod, VALIDATOR_CONTAINER, VALIDATOR_FAILED};
use super::wait::{Pass, Retry};
use super::{DATA_PLANE, Options, capped, cni, extension, rollouts};
use crate::linkerd_cni::attach::{self, PROXY_UID_ANNOTATION};
use crate::linkerd_cni::restarts::Subject;
use crate::linkerd_cni::rollout::{HASH_ANNOTATION, config_hash};
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::{self, ADDED_ANNOTATION, Network, PluginSettings};
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks};

/// What the data-plane checks found, each list `namespace/pod`, sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Attached by the rules, without the NAD in their networks.
    pub unattached: Vec<String>,
    /// Stamped with the hash of a config their namespace's NAD no longer holds.
    pub old_config: Vec<String>,
    /// Their validator exited with 95.
    pub validator_failed: Vec<String>,
    /// Their proxy UID is outside their namespace's UID range.
    pub uid_outside: Vec<String>,
    /// Secondary networks whose subnets no skip-subnets covers: `namespace/pod (SUBNET of
    /// NAMESPACE/NAD, ...)`; a pod in [`Findings::secondary_stale`] is not listed again.
    pub secondary_refused: Vec<String>,
    /// Skip-subnets linkerd-multus wrote for other subnets than their NADs give now:
    /// `namespace/pod (what was written and what is wanted)`.
    pub secondary_stale: Vec<String>,
    /// The pods of [`Findings::old_config`] and their workloads, for what the NAD controller
    /// said of them ([`rollouts`]).
    pub stale_subjects: BTreeSet<Subject>,
}

/// Judges the meshed pods, sorted.
pub fn judge(
    pods: &[Pod],
    namespaces: &BTreeMap<&str, &Meta>,
    nads: &BTreeMap<String, Nad>,
    ipams: &Ipams,
    settings: &Settings,
) -> Findings {
    let mut found = Findings::default();
    for pod in pods {
        found.add(pod, namespaces, nads, ipams, settings);
    }
    found.sort();
    found
}

impl Findings {
    /// Judges one meshed pod.
    pub fn add(
        &mut self,
        pod: &Pod,
        namespaces: &BTreeMap<&str, &Meta>,
        nads: &BTreeMap<String, Nad>,
        ipams: &Ipams,
        settings: &Settings,
    ) {
        let empty = BTreeMap::new();
        let ns = pod.meta.namespace.as_deref().unwrap_or_default();
        let named = || format!("{ns}/{}", pod.meta.name);
        let ns_annotations = namespaces.get(ns).map(|n| &n.annotations).unwrap_or(&empty);
        let annotations = &pod.meta.annotations;
        let decision = attach::decide(settings, ns, annotations, &pod.meta.labels, ns_annotations);
        let networks = annotations
            .get(NETWORKS_ANNOTATION)
            .and_then(|t| Networks::parse(t).ok());
        let selects = networks
            .as_ref()
            .is_some_and(|n| n.references(&settings.nad_name, ns));
        if decision.attach && !selects {
            self.unattached.push(named());
        }
        let live_hash = nads
            .get(ns)
            .and_then(|n| n.config.as_deref())
            .map(config_hash);
        if let (Some(stamped), Some(live)) = (annotations.get(HASH_ANNOTATION), live_hash)
            && selects
            && *stamped != live
        {
            self.old_config.push(named());
            self.stale_subjects.insert(Subject::Pod {
                namespace: ns.to_string(),
                name: pod.meta.name.clone(),
            });
            self.stale_subjects.extend(pod.meta.workload());
        }
        if pod.validator_failed {
            self.validator_failed.push(named());
        }
        let uid = pod
            .proxy_uid
            .or_else(|| annotations.get(PROXY_UID_ANNOTATION)?.parse().ok());
        if let (Some(uid), Some(range)) = (uid, ns_annotations.get(&settings.uid_range_annotation))
            && uid_range(range).is_some_and(|(first, size)| uid < first || uid >= first + size)
        {
            self.uid_outside.push(named());
        }
        let Some(networks) = networks else {
            return;
        };
        let no_plugin = PluginSettings::default();
        let plugin = nads.get(ns).map_or(&no_plugin, |n| &n.plugin);
        let given = secondary_given(&networks, ns, ipams, &settings.nad_name);
        let ns_skipped = ns_annotations
            .get(skip_subnets::ANNOTATION)
            .map(String::as_str);
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
            Some(entry) => self.secondary_stale.push(format!("{} ({entry})", named())),
            None if !missing.is_empty() => {
                self.secondary_refused
                    .push(format!("{} ({})", named(), missing.join(", ")))
            }
            None => {}
        }
    }

    /// Sorts every list, for the output.
    pub fn sort(&mut self) {
        for list in [
            &mut self.unattached,
            &mut self.old_config,
            &mut self.validator_failed,
            &mut self.uid_outside,
            &mut self.secondary_refused,
            &mut self.secondary_stale,
        ] {
            list.sort();
        }
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

/// An OpenShift UID range `first/size`.
fn uid_range(text: &str) -> Option<(i64, i64)> {
    let (first, size) = text.split_once('/')?;
    Some((first.trim().parse().ok()?, size.trim().parse().ok()?))
}

/// The data-plane checks.
pub async fn check(client: &Client, options: &Options, pass: &mut Pass) {
    let read = "the meshed pods, their namespaces and NADs can be read";
    let namespaces = match snapshot::namespaces(client).await {
        Ok(namespaces) => namespaces,
        Err(e) => {
            let check = extension::read_error(read, "Namespaces", &e);
            return pass.add(DATA_PLANE, check, Retry::Yes);
        }
    };
    let installed = extension::resolve(client, options, &namespaces).await;
    let settings = &installed.settings;
    // The Linkerd-CNI NADs, and the IPAM of every NAD (none without the CRD).
    let read_nads = async {
        if !cni::crd_served(client).await? {
            return Ok((BTreeMap::new(), Ipams::new()));
        }
        snapshot::nads_and_ipams(client, &settings.nad_name).await
    };
    let (nads, ipams) = match read_nads.await {
        Ok(read) => read,
        Err(e) => {
            let check = extension::read_error(read, "NetworkAttachmentDefinitions", &e);
            return pass.add(DATA_PLANE, check, Retry::Yes);
        }
    };
    let by_name: BTreeMap<&str, &Meta> = namespaces.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut found = Findings::default();
    let judged = snapshot::meshed_pods(client, options.namespace.as_deref(), |pod| {
        found.add(&pod, &by_name, &nads, &ipams, settings)
    })
    .await;
    if let Err(e) = judged {
        let check = extension::read_error(read, "Pods", &e);
        return pass.add(DATA_PLANE, check, Retry::Yes);
    }
    found.sort();
    report(&found, settings, installed.restarts.is_some(), pass);
    rollouts::check(
        client,
        options.namespace.as_deref(),
        &found.stale_subjects,
        pass,
    )
    .await;
}

fn report(found: &Findings, settings: &Settings, restarts: bool, pass: &mut Pass) {
    let nad = &settings.nad_name;
    let restart = "restart them so that the webhook attaches them: kubectl -n NAMESPACE rollout restart deployment NAME (or delete the pod)";
    let checks = [
        (
            format!("meshed pods the rules attach select the {nad} NAD"),
            &found.unattached,
            format!("created before the webhook or the NAD, these run without {nad}:"),
            restart.to_string(),
            false,
        ),
        (
            format!("meshed pods run with their namespace's current {nad} config"),
            &found.old_config,
            format!("created under an older {nad} config ({HASH_ANNOTATION} differs):"),
            rollouts::old_config_hint(restarts),
            true,
        ),
        (
            format!("no meshed pod's {VALIDATOR_CONTAINER} exited with code {VALIDATOR_FAILED}"),
            &found.validator_failed,
            format!(
                "the validator found the pod's traffic not redirected (exit code {VALIDATOR_FAILED}) in"
            ),
            format!(
                "linkerd-cni did not run for them: check that their {NETWORKS_ANNOTATION} selects {nad} and that the NAD exists, then delete the pods"
            ),
            false,
        ),
        (
            format!(
                "meshed pods' proxy UIDs are in their namespace's {} range",
                settings.uid_range_annotation
            ),
            &found.uid_outside,
            "proxy UID outside the namespace's UID range:".to_string(),
            format!(
                "remove their {PROXY_UID_ANNOTATION} (the webhook sets one in the range) and restart them"
            ),
            false,
        ),
        (
            "meshed pods skip the subnets of their secondary networks".to_string(),
            &found.secondary_refused,
            "inbound TCP on these networks goes to the proxy, which refuses it (the address is not the pod's own):".to_string(),
            format!(
                "annotate their namespaces (or pod templates) {}=enabled and render them, or recreate the pods through the webhook (docs/secondary-networks.md); skipped traffic gets no mTLS and no Linkerd policy",
                skip_subnets::OPT_IN_ANNOTATION
            ),
            true,
        ),
        (
            "meshed pods' skip-subnets written by linkerd-multus match their secondary networks".to_string(),
            &found.secondary_stale,
            "their NADs changed since their skip-subnets were written:".to_string(),
            "render and sync their workloads (or recreate the pods, which the webhook rewrites); Linkerd-CNI reads skip-subnets only when a pod starts".to_string(),
            true,
        ),
    ];
    for (description, pods, what, hint, warn) in checks {
        let check = match (pods.is_empty(), warn) {
            (true, _) => Check::success(description),
            (false, true) => Check::warning(description, format!("{what} {}", capped(pods)), hint),
            (false, false) => Check::error(description, format!("{what} {}", capped(pods)), hint),
        };
        pass.add(DATA_PLANE, check, Retry::No);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::check::snapshot::OwnerReference;
    use crate::k8s::namespace::{INJECT_ANNOTATION, MULTUS_ANNOTATION};
    use crate::linkerd_cni::restarts::{Key, Kind};
    use crate::multus::nad::Maker;

    fn pod(name: &str, ns: &str, annotations: &[(&str, &str)]) -> Pod {
        Pod {
            meta: Meta {
                name: name.into(),
                namespace: Some(ns.into()),
                annotations: annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Meta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn each_defect_names_its_pod() {
        let on = [
            (MULTUS_ANNOTATION, "enabled"),
            (INJECT_ANNOTATION, "enabled"),
        ];
        let demo = Meta {
            name: "demo".into(),
            annotations: on
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Meta::default()
        };
        let ocp = Meta {
            name: "ocp".into(),
            annotations: [(
                "openshift.io/sa.scc.uid-range".to_string(),
                "1000/100".to_string(),
            )]
            .into(),
            ..Meta::default()
        };
        let namespaces: BTreeMap<&str, &Meta> = [("demo", &demo), ("ocp", &ocp)].into();
        let nads: BTreeMap<String, Nad> = [(
            "demo".to_string(),
            Nad::new(Maker::Controller, Some("{}".into())),
        )]
        .into();
        let current = config_hash("{}");
        let mut failed = pod("failed", "demo", &[(NETWORKS_ANNOTATION, "linkerd-cni")]);
        failed.validator_failed = true;
        let mut uid_in = pod("in", "ocp", &[]);
        uid_in.proxy_uid = Some(1050);
        let mut old = pod(
            "old",
            "demo",
            &[
                (NETWORKS_ANNOTATION, "a, linkerd-cni"),
                (HASH_ANNOTATION, "0123"),
            ],
        );
        old.meta.labels = [("pod-template-hash".to_string(), "5d8f".to_string())].into();
        old.meta.owner_references = vec![OwnerReference {
            kind: "ReplicaSet".into(),
            name: "web-app-5d8f".into(),
            controller: Some(true),
        }];
        let pods = [
            pod(
                "ok",
                "demo",
                &[
                    (NETWORKS_ANNOTATION, "linkerd-cni"),
                    (HASH_ANNOTATION, &current),
                ],
            ),
            pod("bare", "demo", &[]),
            old,
            failed,
            pod("out", "ocp", &[(PROXY_UID_ANNOTATION, "2102")]),
            uid_in,
            pod("off", "ocp", &[]),
        ];
        let found = judge(
            &pods,
            &namespaces,
            &nads,
            &Ipams::new(),
            &Settings::default(),
        );
        assert_eq!(
            found,
            Findings {
                unattached: vec!["demo/bare".into()],
                old_config: vec!["demo/old".into()],
                validator_failed: vec!["demo/failed".into()],
                uid_outside: vec!["ocp/out".into()],
                secondary_refused: Vec::new(),
                secondary_stale: Vec::new(),
                stale_subjects: [
                    Subject::Pod {
                        namespace: "demo".into(),
                        name: "old".into()
                    },
                    Subject::Workload(Key {
                        kind: Kind::Deployment,
                        namespace: "demo".into(),
                        name: "web-app".into()
                    }),
                ]
                .into(),
            }
        );
    }

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
        let found = judge(&pods, &namespaces, &nads, &ipams, &Settings::default());
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
        judge(&pods, &namespaces, &nads, &ipams, &Settings::default())
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

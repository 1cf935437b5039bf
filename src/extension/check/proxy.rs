//! `--proxy`: the data plane. Of the meshed pods (a `linkerd-proxy`
//! container), in every namespace or `-n`: those the rules attach
//! ([`attach::decide`], as the webhook decides) whose networks lack the
//! NAD; those whose networks select a NAD that is gone (`missing_nads`); those
//! created under an older NAD config, named by their workload (`old_config`); those whose
//! `linkerd-network-validator` exited with 95; on OpenShift those whose
//! proxy UID is outside their namespace's UID range; those whose opt-in annotations are
//! written wrong (`opt_ins`); and those with secondary networks whose subnets no
//! skip-subnets covers, or whose skip-subnets linkerd-multus wrote for subnets their NADs no
//! longer give (`secondary`).

mod missing_nads;
mod old_config;
mod opt_ins;
mod secondary;

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;

use super::report::Check;
use super::snapshot::{self, Ipams, Meta, Nad, Pod, VALIDATOR_CONTAINER, VALIDATOR_FAILED};
use super::wait::{Pass, Retry};
use super::{DATA_PLANE, Options, capped, cni, extension, rollouts};
use crate::linkerd_cni::attach::{self, PROXY_UID_ANNOTATION};
use crate::linkerd_cni::restarts::Subject;
use crate::linkerd_cni::settings::Settings;
use crate::linkerd_cni::skip_subnets::{self, PluginSettings};
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks};
pub use old_config::Controller;

/// What the data-plane checks found, each list `namespace/pod`, sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Attached by the rules, without the NAD in their networks.
    pub unattached: Vec<String>,
    /// Selecting NADs that do not exist: `namespace/pod (NAMESPACE/NAD, ...)`.
    pub missing_nads: Vec<String>,
    /// Stamped with the hash of a config their namespace's NAD no longer holds, one line per
    /// workload (`Deployment namespace/name (namespace/pod, ...)`) or pod without one.
    pub old_config: Vec<String>,
    /// Their validator exited with 95.
    pub validator_failed: Vec<String>,
    /// Their proxy UID is outside their namespace's UID range.
    pub uid_outside: Vec<String>,
    /// Their opt-in annotations written wrong, once per workload (or pod without one):
    /// `Deployment namespace/name: what is wrong`.
    pub opt_ins: Vec<String>,
    /// Secondary networks whose subnets no skip-subnets covers: `namespace/pod (SUBNET of
    /// NAMESPACE/NAD, ...)`; a pod in [`Findings::secondary_stale`] is not listed again.
    pub secondary_refused: Vec<String>,
    /// Skip-subnets linkerd-multus wrote for other subnets than their NADs give now:
    /// `namespace/pod (what was written and what is wanted)`.
    pub secondary_stale: Vec<String>,
    /// The pods of [`Findings::old_config`] and their workloads, for what the NAD controller
    /// said of them ([`rollouts`]).
    pub stale_subjects: BTreeSet<Subject>,
    /// The pods of [`Findings::old_config`] by the workload (or pod) they are named under.
    old_by_owner: BTreeMap<Subject, Vec<String>>,
}

/// What the pods are judged against.
pub struct Seen<'a> {
    /// The Namespaces, by name.
    pub namespaces: &'a BTreeMap<&'a str, &'a Meta>,
    /// The Linkerd-CNI NADs, by namespace.
    pub nads: &'a BTreeMap<String, Nad>,
    /// The IPAM of every NAD, by `(namespace, name)`: also which NADs exist.
    pub ipams: &'a Ipams,
    /// Whether `ipams` holds every NAD of the cluster, so that a NAD it lacks is gone.
    pub every_nad: bool,
    /// The rules' settings.
    pub settings: &'a Settings,
}

/// Judges the meshed pods, sorted.
pub fn judge(pods: &[Pod], seen: &Seen<'_>) -> Findings {
    let mut found = Findings::default();
    for pod in pods {
        found.add(pod, seen);
    }
    found.sort();
    found
}

impl Findings {
    /// Judges one meshed pod.
    pub fn add(&mut self, pod: &Pod, seen: &Seen<'_>) {
        let (nads, settings) = (seen.nads, seen.settings);
        let empty = BTreeMap::new();
        let ns = pod.meta.namespace.as_deref().unwrap_or_default();
        let named = || format!("{ns}/{}", pod.meta.name);
        let ns_annotations = seen
            .namespaces
            .get(ns)
            .map(|n| &n.annotations)
            .unwrap_or(&empty);
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
        old_config::judge(self, pod, ns, selects, nads);
        opt_ins::judge(self, pod);
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
        if seen.every_nad {
            missing_nads::judge(self, named(), &networks, ns, seen.ipams);
        }
        let no_plugin = PluginSettings::default();
        let plugin = nads.get(ns).map_or(&no_plugin, |n| &n.plugin);
        let ns_skipped = ns_annotations
            .get(skip_subnets::ANNOTATION)
            .map(String::as_str);
        secondary::judge(
            self,
            pod,
            named(),
            &networks,
            (ns, ns_skipped, plugin),
            (seen.ipams, &settings.nad_name),
        );
    }

    /// Sorts every list, for the output.
    pub fn sort(&mut self) {
        self.old_config = old_config::lines(&self.old_by_owner);
        self.opt_ins.dedup();
        for list in [
            &mut self.unattached,
            &mut self.missing_nads,
            &mut self.validator_failed,
            &mut self.uid_outside,
            &mut self.opt_ins,
            &mut self.secondary_refused,
            &mut self.secondary_stale,
        ] {
            list.sort();
            list.dedup();
        }
    }
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
            return Ok((BTreeMap::new(), Ipams::new(), false));
        }
        let (nads, ipams) = snapshot::nads_and_ipams(client, &settings.nad_name).await?;
        Ok((nads, ipams, true))
    };
    let (nads, ipams, every_nad) = match read_nads.await {
        Ok(read) => read,
        Err(e) => {
            let check = extension::read_error(read, "NetworkAttachmentDefinitions", &e);
            return pass.add(DATA_PLANE, check, Retry::Yes);
        }
    };
    let by_name: BTreeMap<&str, &Meta> = namespaces.iter().map(|n| (n.name.as_str(), n)).collect();
    let seen = Seen {
        namespaces: &by_name,
        nads: &nads,
        ipams: &ipams,
        every_nad,
        settings,
    };
    let mut found = Findings::default();
    let judged = snapshot::meshed_pods(client, options.namespace.as_deref(), |pod| {
        found.add(&pod, &seen)
    })
    .await;
    if let Err(e) = judged {
        let check = extension::read_error(read, "Pods", &e);
        return pass.add(DATA_PLANE, check, Retry::Yes);
    }
    found.sort();
    report(&found, settings, Controller::of(&installed), pass);
    rollouts::check(
        client,
        options.namespace.as_deref(),
        &found.stale_subjects,
        pass,
    )
    .await;
}

fn report(found: &Findings, settings: &Settings, controller: Controller, pass: &mut Pass) {
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
            "meshed pods select only NADs that exist".to_string(),
            &found.missing_nads,
            "these select NetworkAttachmentDefinitions that are gone, so once recreated (a restart, an eviction, a node drained) they cannot start:".to_string(),
            missing_nads::HINT.to_string(),
            false,
        ),
        (
            format!("meshed pods run with their namespace's current {nad} config"),
            &found.old_config,
            old_config::WHAT.to_string(),
            controller.hint(),
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
            opt_ins::DESCRIPTION.to_string(),
            &found.opt_ins,
            opt_ins::WHAT.to_string(),
            opt_ins::HINT.to_string(),
            true,
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
    use crate::linkerd_cni::rollout::{HASH_ANNOTATION, config_hash};
    use crate::multus::nad::Maker;

    pub(super) fn pod(name: &str, ns: &str, annotations: &[(&str, &str)]) -> Pod {
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

    /// What the pods are judged against, without the list of every NAD.
    pub(super) fn seen<'a>(
        namespaces: &'a BTreeMap<&'a str, &'a Meta>,
        nads: &'a BTreeMap<String, Nad>,
        ipams: &'a Ipams,
        settings: &'a Settings,
    ) -> Seen<'a> {
        Seen {
            namespaces,
            nads,
            ipams,
            every_nad: false,
            settings,
        }
    }

    /// A pod of `demo` owned by ReplicaSet `web-app-5d8f` of Deployment `web-app`.
    pub(super) fn owned(mut pod: Pod) -> Pod {
        pod.meta.labels = [("pod-template-hash".to_string(), "5d8f".to_string())].into();
        pod.meta.owner_references = vec![OwnerReference {
            kind: "ReplicaSet".into(),
            name: "web-app-5d8f".into(),
            controller: Some(true),
        }];
        pod
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
        let old = owned(pod(
            "old",
            "demo",
            &[
                (NETWORKS_ANNOTATION, "a, linkerd-cni"),
                (HASH_ANNOTATION, "0123"),
            ],
        ));
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
        let settings = Settings::default();
        let found = judge(&pods, &seen(&namespaces, &nads, &Ipams::new(), &settings));
        let web_app = Subject::Workload(Key {
            kind: Kind::Deployment,
            namespace: "demo".into(),
            name: "web-app".into(),
        });
        assert_eq!(
            found,
            Findings {
                unattached: vec!["demo/bare".into()],
                missing_nads: Vec::new(),
                old_config: vec!["Deployment demo/web-app (demo/old)".into()],
                validator_failed: vec!["demo/failed".into()],
                uid_outside: vec!["ocp/out".into()],
                opt_ins: Vec::new(),
                secondary_refused: Vec::new(),
                secondary_stale: Vec::new(),
                stale_subjects: [
                    Subject::Pod {
                        namespace: "demo".into(),
                        name: "old".into()
                    },
                    web_app.clone(),
                ]
                .into(),
                old_by_owner: [(web_app, vec!["demo/old".to_string()])].into(),
            }
        );
    }
}

//! The work on one review is linear in its bytes: over generated pods and the NADs they
//! select (any number of selections, duplicated or not, with `ips` or not; IPAMs of any
//! number of ranges, addresses and routes, past the caps or within them), the units of work
//! the core counts (`linkerd_multus::work`: each selection, IPAM entry, range examined, entry
//! merged and NAD looked up) while it reads the NADs' configs (as the webhook's watch stores
//! them) and answers the review (the Linkerd-CNI rules with the secondary-network rule, then
//! with the network-resources rules) stay within [`PER_BYTE`] units per byte of the review
//! and the configs, plus [`FIXED`]. A loop nested in another over the same input (the
//! quadratic de-duplication this replaced did 10^8 comparisons for 230 KB) breaks it at the
//! sizes generated here. The same bound holds in the `work` fuzz target (fuzz/).

use std::collections::{BTreeMap, HashMap};

use linkerd_multus::admission::{
    self, MissingNad, NadCheck, NadConfigs, NetworkResources, OnError, Outcome,
};
use linkerd_multus::k8s::namespace::Lookup;
use linkerd_multus::linkerd_cni::settings::Settings;
use linkerd_multus::linkerd_cni::skip_subnets::{PluginSettings, WORK_BUDGET};
use linkerd_multus::multus::ipam::{self, Ipam, IpamError};
use linkerd_multus::multus::networks::MAX_SELECTIONS;
use linkerd_multus::network_resources::{self, Nads};
use linkerd_multus::work;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Units of work allowed per byte of input.
const PER_BYTE: u64 = 16;
/// Units allowed whatever the input: the rules' own steps, and the ranges the work budget
/// lets one pod examine (each examined costs a few units).
const FIXED: u64 = 4 * WORK_BUDGET as u64 + 2_000;

/// One NAD of the generated cluster: its IPAM's ranges, addresses and routes.
#[derive(Debug, Clone)]
struct NadSpec {
    ranges: usize,
    addresses: usize,
    routes: usize,
    /// Whether its entries repeat a few networks (de-duplicated) or are all distinct.
    repeated: bool,
}

#[derive(Debug, Clone)]
struct Input {
    nads: Vec<NadSpec>,
    /// Each selection: the NAD (index) and how many `ips` it lists.
    selections: Vec<(usize, usize)>,
    json: bool,
}

fn net(i: usize, repeated: bool, prefix: u8) -> String {
    let i = if repeated { i % 7 } else { i };
    format!(
        "172.{}.{}.{}/{prefix}",
        16 + i / 65536 % 16,
        i / 256 % 256,
        i % 256
    )
}

impl NadSpec {
    fn config(&self) -> String {
        let list = |n: usize, f: &dyn Fn(usize) -> Value| (0..n).map(f).collect::<Vec<_>>();
        let ranges = list(
            self.ranges,
            &|i| json!({"range": net(i, self.repeated, 24)}),
        );
        let addresses = list(
            self.addresses,
            &|i| json!({"address": net(100_000 + i, self.repeated, 32)}),
        );
        let routes = list(
            self.routes,
            &|i| json!({"dst": net(200_000 + i, self.repeated, 32)}),
        );
        json!({
            "cniVersion": "0.3.1",
            "type": "macvlan",
            "ipam": {"type": "whereabouts", "ipRanges": ranges, "addresses": addresses, "routes": routes}
        })
        .to_string()
    }
}

fn input() -> impl Strategy<Value = Input> {
    let nad = (0usize..48, 0usize..48, 0usize..200, proptest::bool::ANY).prop_map(
        |(ranges, addresses, routes, repeated)| NadSpec {
            ranges: ranges.max(1),
            addresses,
            routes,
            repeated,
        },
    );
    (
        proptest::collection::vec(nad, 1..6),
        // Most pods within the selections cap, some far past it.
        prop_oneof![3 => 0usize..80, 1 => 80usize..3_000],
        proptest::collection::vec((0usize..6, 0usize..20), 1..8),
        proptest::bool::ANY,
    )
        .prop_map(|(nads, count, pattern, json)| {
            let selections = (0..count)
                .map(|i| {
                    let (nad, ips) = pattern[i % pattern.len()];
                    (nad % nads.len(), if json { ips } else { 0 })
                })
                .collect();
            Input {
                nads,
                selections,
                json,
            }
        })
}

impl Input {
    fn networks(&self) -> String {
        if !self.json {
            let names: Vec<String> = self
                .selections
                .iter()
                .map(|(n, _)| format!("n{n}"))
                .collect();
            return names.join(",");
        }
        let elements: Vec<Value> = self
            .selections
            .iter()
            .enumerate()
            .map(|(k, (n, ips))| {
                let ips: Vec<String> = (0..*ips)
                    .map(|i| net(300_000 + k * 32 + i, false, 24))
                    .collect();
                json!({"name": format!("n{n}"), "ips": ips})
            })
            .collect();
        Value::Array(elements).to_string()
    }

    fn review(&self) -> String {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "app",
                "operation": "CREATE",
                "object": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": "p",
                        "namespace": "app",
                        "annotations": {
                            "k8s.v1.cni.cncf.io/networks": self.networks(),
                            "multus.linkerd.io/skip-secondary-subnets": "enabled",
                        }
                    },
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        })
        .to_string()
    }
}

/// The cluster's NADs as the webhook's cache holds them: each read once, with the caps.
struct Cluster {
    ipams: HashMap<String, Result<Ipam, IpamError>>,
    plugin: PluginSettings,
    annotations: BTreeMap<String, String>,
}

impl Nads for Cluster {
    fn annotations(&self, _: &str, name: &str) -> Option<&dyn Lookup> {
        (name == "linkerd-cni" || self.ipams.contains_key(name)).then_some(&self.annotations)
    }
}

impl NadConfigs for Cluster {
    fn config_hash(&self, _: &str, name: &str) -> Option<&str> {
        (name == "linkerd-cni").then_some("1f175a8d44f1fc03")
    }
    fn other_network(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn ipam(&self, _: &str, name: &str) -> Option<&Result<Ipam, IpamError>> {
        self.ipams.get(name)
    }
    fn plugin_settings(&self, _: &str, name: &str) -> Option<&PluginSettings> {
        (name == "linkerd-cni").then_some(&self.plugin)
    }
}

/// The units counted while the NADs are read and the review answered, both ways; and the
/// answers.
fn work_on(review: &str, configs: &[String]) -> (u64, Vec<admission::Answer>) {
    let settings = Settings {
        cluster_cidrs: vec![
            "10.128.0.0/14".parse().unwrap(),
            "10.96.0.0/12".parse().unwrap(),
        ],
        ..Settings::default()
    };
    let nr_settings = network_resources::settings::Settings::default();
    let namespace: BTreeMap<String, String> = [
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "enabled"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    let (answers, units) = work::measure(|| {
        let cluster = Cluster {
            ipams: configs
                .iter()
                .enumerate()
                .map(|(i, config)| (format!("n{i}"), ipam::read(config)))
                .collect(),
            plugin: PluginSettings::default(),
            annotations: BTreeMap::new(),
        };
        let request = admission::parse(review.as_bytes()).expect("the review reads");
        let check = NadCheck {
            nads: &cluster,
            policy: MissingNad::Deny,
        };
        let nr = NetworkResources {
            settings: &nr_settings,
            nads: &cluster,
        };
        [None, Some(&nr)]
            .into_iter()
            .map(|nr| {
                admission::answer(
                    &request,
                    &namespace,
                    &settings,
                    nr,
                    Some(&check),
                    OnError::Allow,
                )
            })
            .collect()
    });
    (units, answers)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_work_on_a_review_is_linear_in_its_bytes(input in input()) {
        let review = input.review();
        let configs: Vec<String> = input.nads.iter().map(NadSpec::config).collect();
        let bytes = (review.len() + configs.iter().map(String::len).sum::<usize>()) as u64;
        let (units, answers) = work_on(&review, &configs);
        prop_assert!(
            units <= PER_BYTE * bytes + FIXED,
            "{units} units for {bytes} bytes ({} selections, NADs {:?}): past {PER_BYTE} a byte and {FIXED}",
            input.selections.len(),
            input.nads
        );
        if input.selections.len() > MAX_SELECTIONS {
            for answer in &answers {
                prop_assert_eq!(answer.outcome, Outcome::Warned);
                prop_assert!(
                    answer.warnings[0].contains("(the selections cap)"),
                    "{:?}",
                    answer.warnings
                );
            }
        }
    }
}

/// The bound is not loose: the attack of issue 45 scaled down (one NAD of 2,000 routes
/// selected 8,000 times), examined as the code before the caps examined it, would pass it
/// ten times over, while what the rules do now stays within it.
#[test]
fn the_attack_stays_within_the_bound() {
    let input = Input {
        nads: vec![NadSpec {
            ranges: 1,
            addresses: 0,
            routes: 2_000,
            repeated: false,
        }],
        selections: vec![(0, 0); 8_000],
        json: false,
    };
    let review = input.review();
    let configs = vec![input.nads[0].config()];
    let bytes = (review.len() + configs[0].len()) as u64;
    let (units, answers) = work_on(&review, &configs);
    assert!(
        units <= PER_BYTE * bytes + FIXED,
        "{units} units for {bytes} bytes"
    );
    // Examining every route of every selection, as before, is 16 million units: ten times
    // the bound and more.
    let before = (8_000 * 2_001) as u64;
    assert!(
        before > 10 * (PER_BYTE * bytes + FIXED),
        "{before} against {bytes} bytes"
    );
    assert!(answers.iter().all(|a| a.outcome == Outcome::Warned));
}

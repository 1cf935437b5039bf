//! The bounds of the rule: the subnets cap, the work budget, and work linear in what the pod
//! and its NADs list.

use super::*;
use crate::multus::ipam::MAX_ROUTES;

/// `n` distinct IPv4 /32 subnets from `first` on.
fn hosts(first: usize, n: usize) -> Vec<IpNet> {
    (first..first + n)
        .map(|i| {
            format!("10.{}.{}.{}/32", i / 65536 % 256, i / 256 % 256, i % 256)
                .parse()
                .unwrap()
        })
        .collect()
}

/// NADs named `n0`, `n1`, ..., each an IPAM of `subnets` then routes to `routes`.
fn ipams(lists: &[(Vec<IpNet>, Vec<IpNet>)]) -> Vec<(String, Result<Ipam, IpamError>)> {
    lists
        .iter()
        .enumerate()
        .map(|(i, (subnets, routes))| {
            let ipam = Ipam::Subnets {
                subnets: subnets.clone(),
                routes: routes.clone(),
            };
            (format!("app/n{i}"), Ok(ipam))
        })
        .collect()
}

fn found(read: &[(String, Result<Ipam, IpamError>)]) -> Result<Subnets, Refusal> {
    let networks: Vec<Network<'_>> = read
        .iter()
        .map(|(nad, ipam)| Network {
            nad,
            ipam,
            ips: &[],
        })
        .collect();
    let cluster = ["10.244.0.0/16".parse().unwrap()];
    let guarded = Guarded {
        cluster: &cluster,
        protected: &[],
    };
    secondary_subnets(&networks, guarded, false)
}

/// At the subnets cap every subnet is written; one past it the pod is refused, naming the NAD
/// that brought it and the cap.
#[test]
fn the_subnets_cap_writes_up_to_its_limit_and_names_itself_past_it() {
    let half = MAX_SUBNETS / 2;
    let at = ipams(&[(hosts(0, half), vec![]), (vec![], hosts(half, half))]);
    assert_eq!(found(&at).unwrap().subnets.len(), MAX_SUBNETS);
    // The same subnets again are not counted twice.
    let again = ipams(&[
        (hosts(0, half), hosts(half, half)),
        (hosts(0, half), vec![]),
    ]);
    assert_eq!(found(&again).unwrap().subnets.len(), MAX_SUBNETS);
    let over = ipams(&[
        (hosts(0, half), hosts(half, half)),
        (hosts(MAX_SUBNETS, 1), vec![]),
    ]);
    let refusal = found(&over).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::TooManySubnets {
            nad: "app/n1".into()
        }
    );
    assert!(
        refusal.to_string().contains(
            "at most 256 are written to config.linkerd.io/skip-subnets (the subnets cap)"
        ),
        "{refusal}"
    );
}

/// At the work budget the ranges are examined; past it the pod is refused before any is,
/// naming the budget, whatever the ranges would have given.
#[test]
fn the_work_budget_examines_up_to_its_limit_and_names_itself_past_it() {
    let each = MAX_ROUTES;
    let nads = WORK_BUDGET / each;
    // Every NAD routes the same destinations: few subnets, many ranges examined.
    let same = |n| ipams(&vec![(vec![], hosts(0, each)); n]);
    assert_eq!(found(&same(nads)).unwrap().subnets.len(), each);
    let refusal = found(&same(nads + 1)).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::OverBudget {
            units: (nads + 1) * each
        }
    );
    assert!(
        refusal
            .to_string()
            .contains("at most 4096 are examined for one pod (the work budget)"),
        "{refusal}"
    );
    // Past the budget, no range is examined: a unit for each network, none for its routes.
    let units = |n| crate::work::measure(|| found(&same(n))).1;
    assert_eq!(units(4 * nads), 4 * nads as u64);
}

/// A network selected many times is read once: the same NAD selected up to the selections
/// cap costs what it costs once.
#[test]
fn a_network_selected_again_is_read_once() {
    let settings = Settings {
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        skip_secondary_subnets: true,
        ..Settings::default()
    };
    let read = ipams(&[(vec![], hosts(0, MAX_ROUTES))]);
    struct One<'a>(&'a Result<Ipam, IpamError>);
    impl NadIpams for One<'_> {
        fn ipam(&self, _: &str, _: &str) -> Option<&Result<Ipam, IpamError>> {
            Some(self.0)
        }
    }
    let nads = One(&read[0].1);
    let plugin = PluginSettings::default();
    let cx = Context {
        settings: &settings,
        pod_namespace: "app",
        namespace: &Option::<&std::collections::BTreeMap<String, String>>::None,
        nads: Some(&nads),
        plugin: Some(&plugin),
    };
    let selecting = |n: usize| vec!["n0"; n].join(",");
    let units = |n: usize| {
        let text = selecting(n);
        crate::work::measure(|| plan::secondary(Some(&text), &cx).map(|s| s.subnets.len())).1
    };
    let (once, many) = (units(1), units(crate::multus::networks::MAX_SELECTIONS));
    assert!(
        many < once + 3 * crate::multus::networks::MAX_SELECTIONS as u64,
        "once {once} units, at the cap {many}"
    );
}

/// What Linkerd-CNI covers is found in time linear in both lists: each subnet is looked up
/// once per prefix length the entries use.
#[test]
fn uncovered_is_linear_in_both_lists() {
    let run = |n: usize| {
        let subnets = hosts(0, n);
        let entries: Vec<String> = hosts(n, n).iter().map(IpNet::to_string).collect();
        let skipped: Vec<&str> = entries.iter().map(String::as_str).collect();
        crate::work::measure(|| uncovered(&subnets, &skipped).len())
    };
    let ((left, small), (left_big, big)) = (run(100), run(1_600));
    assert_eq!((left, left_big), (100, 1_600));
    assert!(big <= 16 * small + 16, "100: {small} units, 1600: {big}");
    let covered = uncovered(&hosts(0, 3), &["10.0.0.0/24", "junk", "10.0.0.1/32"]);
    assert!(covered.is_empty(), "{covered:?}");
    assert_eq!(
        uncovered(&nets_of(&["10.0.0.0/16"]), &["10.0.0.0/24"]),
        nets_of(&["10.0.0.0/16"])
    );
}

fn nets_of(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|n| n.parse().unwrap()).collect()
}

/// Merging is linear in the entries: the pod's own value, the record and the subnets.
#[test]
fn merge_is_linear_in_its_entries() {
    let run = |n: usize| {
        let own: Vec<String> = hosts(0, n).iter().map(IpNet::to_string).collect();
        let own = own.join(",");
        let subnets = hosts(n / 2, n);
        crate::work::measure(|| merge(Some(&own), None, None, &[], &subnets)).1
    };
    let (small, big) = (run(100), run(1_600));
    assert!(big <= 16 * small + 16, "100: {small} units, 1600: {big}");
}

use super::*;

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|n| n.parse().unwrap()).collect()
}

/// (what, the CNI configuration, the subnets, the routes) for each shape read.
const SHAPES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "static, its address masked",
        r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}]}}"#,
        &["10.10.0.0/24"],
        &[],
    ),
    (
        "host-local ranges, two sets (dual stack)",
        r#"{"type": "bridge", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.1.0.0/16", "rangeStart": "10.1.2.10", "rangeEnd": "10.1.2.50"}], [{"subnet": "fd10::/64"}]]}}"#,
        &["10.1.0.0/16", "fd10::/64"],
        &[],
    ),
    (
        "host-local, the older subnet",
        r#"{"type": "bridge", "ipam": {"type": "host-local", "subnet": "192.168.50.0/24"}}"#,
        &["192.168.50.0/24"],
        &[],
    ),
    (
        "whereabouts range, host bits set",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "192.168.2.225/28"}}"#,
        &["192.168.2.224/28"],
        &[],
    ),
    (
        "whereabouts range_start, range_end and exclude do not narrow the network",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "192.168.2.0/24", "range_start": "192.168.2.10", "range_end": "192.168.2.20", "exclude": ["192.168.2.12/32"]}}"#,
        &["192.168.2.0/24"],
        &[],
    ),
    (
        "whereabouts FIRST-LAST/PREFIX",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "range": "192.168.2.225-192.168.2.230/28"}}"#,
        &["192.168.2.224/28"],
        &[],
    ),
    (
        "whereabouts ipRanges then range",
        r#"{"type": "macvlan", "ipam": {"type": "whereabouts", "ipRanges": [{"range": "192.168.10.1/24"}, {"range": "176.168.10.1/16"}], "range": "abcd::1/64"}}"#,
        &["192.168.10.0/24", "176.168.0.0/16", "abcd::/64"],
        &[],
    ),
    (
        "routes, each destination once",
        r#"{"type": "macvlan", "ipam": {"type": "static", "addresses": [{"address": "10.10.0.5/24"}], "routes": [{"dst": "172.16.0.0/12", "gw": "10.10.0.1"}, {"dst": "172.16.5.0/12"}]}}"#,
        &["10.10.0.0/24"],
        &["172.16.0.0/12"],
    ),
    (
        "a configuration list: the main plugin's IPAM",
        r#"{"cniVersion": "0.4.0", "plugins": [{"type": "tuning"}, {"type": "macvlan", "ipam": {"type": "host-local", "subnet": "10.9.0.0/16"}}, {"type": "sbr"}]}"#,
        &["10.9.0.0/16"],
        &[],
    ),
];

#[test]
fn each_ipam_shape_gives_its_networks() {
    for (what, config, subnets, routes) in SHAPES {
        assert_eq!(
            read(config),
            Ok(Ipam::Subnets {
                subnets: nets(subnets),
                routes: nets(routes),
            }),
            "{what}"
        );
    }
}

#[test]
fn dhcp_and_no_ipam_give_no_subnet() {
    for (config, expected) in [
        (
            r#"{"type": "macvlan", "ipam": {"type": "dhcp"}}"#,
            Ipam::Dhcp,
        ),
        (r#"{"type": "macvlan"}"#, Ipam::None),
        (r#"{"type": "macvlan", "ipam": {}}"#, Ipam::None),
        (r#"{"plugins": [{"type": "macvlan"}]}"#, Ipam::None),
    ] {
        assert_eq!(read(config), Ok(expected), "{config}");
    }
}

/// Configurations that cannot be read, and the message each gives.
const REFUSED: &[(&str, &str)] = &[
    ("[]", "is not a JSON object"),
    (r#"{"ipam": "static"}"#, "\"ipam\" is not an object"),
    (
        r#"{"ipam": {"subnet": "10.0.0.0/8"}}"#,
        "\"ipam.type\" is not a string",
    ),
    (
        r#"{"ipam": {"type": "calico-ipam"}}"#,
        "\"ipam.type\" is \"calico-ipam\", an IPAM whose addresses cannot be known",
    ),
    (
        r#"{"ipam": {"type": "static", "addresses": [{"address": "10.0.0.5"}]}}"#,
        "\"ipam.addresses[0].address\" \"10.0.0.5\" is not an address with its prefix length",
    ),
    (
        r#"{"ipam": {"type": "host-local", "ranges": [{"subnet": "10.0.0.0/8"}]}}"#,
        "\"ipam.ranges[0]\" is not a list",
    ),
    (
        r#"{"ipam": {"type": "host-local"}}"#,
        "\"ipam\" has no \"ranges\" or \"subnet\": its type host-local needs one",
    ),
    (
        r#"{"ipam": {"type": "whereabouts", "range": "192.168.2.225-192.168.2.230"}}"#,
        "\"ipam.range\" \"192.168.2.225-192.168.2.230\" is not a CIDR or FIRST-LAST/PREFIX",
    ),
    (
        r#"{"ipam": {"type": "whereabouts", "ipRanges": [{"range_start": "10.0.0.1"}]}}"#,
        "\"ipam.ipRanges[0].range\" is not a string",
    ),
    (
        r#"{"ipam": {"type": "static", "addresses": [{"address": "10.0.0.5/24"}], "routes": [{"gw": "10.0.0.1"}]}}"#,
        "\"ipam.routes[0].dst\" is not a string",
    ),
    (
        r#"{"plugins": [{"type": "macvlan", "ipam": {"type": "whereabouts"}}]}"#,
        "\"plugins[0].ipam\" has no \"range\", \"ipRanges\" or \"addresses\"",
    ),
];

/// A CNI configuration whose IPAM lists `n` of one kind of entry: (the cap's field, the
/// cap, the configuration).
fn listing(kind: &str, n: usize) -> String {
    let nets = |f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(", ");
    let net = |i: usize| format!("10.{}.{}.0/24", i / 256, i % 256);
    let ipam = match kind {
        "routes" => format!(
            r#"{{"type": "static", "addresses": [{{"address": "192.168.0.2/24"}}], "routes": [{}]}}"#,
            nets(&|i| format!(r#"{{"dst": "{}"}}"#, net(i)))
        ),
        "addresses" => format!(
            r#"{{"type": "static", "addresses": [{}]}}"#,
            nets(&|i| format!(r#"{{"address": "{}"}}"#, net(i)))
        ),
        "host-local ranges" => format!(
            r#"{{"type": "host-local", "ranges": [[{}]]}}"#,
            nets(&|i| format!(r#"{{"subnet": "{}"}}"#, net(i)))
        ),
        _ => format!(
            r#"{{"type": "whereabouts", "ipRanges": [{}]}}"#,
            nets(&|i| format!(r#"{{"range": "{}"}}"#, net(i)))
        ),
    };
    format!(r#"{{"type": "macvlan", "ipam": {ipam}}}"#)
}

/// Each cap: at it, every entry is read; one over it, the IPAM is refused, naming the
/// field, the count and the cap.
#[test]
fn each_cap_reads_up_to_its_limit_and_names_itself_past_it() {
    let caps = [
        ("routes", MAX_ROUTES, "ipam.routes", "routes"),
        ("addresses", MAX_ADDRESSES, "ipam.addresses", "addresses"),
        ("host-local ranges", MAX_RANGES, "ipam.ranges", "ranges"),
        ("whereabouts ranges", MAX_RANGES, "ipam.ipRanges", "ranges"),
    ];
    for (kind, cap, field, what) in caps {
        let Ok(Ipam::Subnets { subnets, routes }) = read(&listing(kind, cap)) else {
            panic!(
                "{kind} at the cap is refused: {:?}",
                read(&listing(kind, cap))
            );
        };
        assert_eq!(
            subnets.len() + routes.len(),
            cap + usize::from(kind == "routes")
        );
        let error = read(&listing(kind, cap + 1)).expect_err(kind);
        assert_eq!(
            error.to_string().split(':').next().unwrap(),
            format!(
                "\"{field}\" lists {} {what}; at most {cap} are read (the {what} cap)",
                cap + 1
            ),
            "{kind}"
        );
    }
}

/// An IPAM far past a cap is refused after counting: the work does not grow with it.
#[test]
fn an_ipam_past_a_cap_is_refused_before_its_entries_are_read() {
    for kind in [
        "routes",
        "addresses",
        "host-local ranges",
        "whereabouts ranges",
    ] {
        let units = |n| {
            let config: Value = serde_json::from_str(&listing(kind, n)).unwrap();
            crate::work::measure(|| read_value(&config)).1
        };
        assert_eq!(units(1_000), units(5_000), "{kind}");
    }
}

#[test]
fn what_cannot_be_read_is_named() {
    for (config, expected) in REFUSED {
        let error = read(config).expect_err(config).to_string();
        assert!(
            error.starts_with(expected),
            "{config}: {error:?} does not start with {expected:?}"
        );
    }
}

//! The IPAM section of a NAD's CNI configuration, read for what it tells of the networks an
//! interface joins: the subnets its addresses come from, and the destinations of its routes.
//! Known before the pod's sandbox exists, so the rules can act on it (issue: secondary networks
//! beside the mesh).
//!
//! The shapes read, as each IPAM plugin documents them:
//!
//! * `static` (CNI plugins): `addresses[].address`, an address with its prefix;
//! * `host-local` (CNI plugins): `ranges`, a list of range sets, each a list of
//!   `{subnet, rangeStart, rangeEnd, gateway}`; or the older single `subnet`;
//! * `whereabouts`: `range` (a CIDR, or `FIRST-LAST/PREFIX`), with `range_start`,
//!   `range_end` and `exclude` narrowing which addresses pods get, and `ipRanges`, a list of
//!   the same; and the static plugin's `addresses` beside them;
//! * every type: `routes[].dst`.
//!
//! The subnet is the whole network of a range (its CIDR masked): peers on it may have any of
//! its addresses, not only those given to pods, so `range_start`, `range_end` and `exclude`
//! do not narrow it. `dhcp` gives addresses only at run time; a configuration without IPAM gives
//! none. In a configuration list, the IPAM is the first plugin's that has one (the main plugin;
//! chained plugins such as tuning have none).

use ipnet::IpNet;
use serde_json::{Map as JsonMap, Value};

use crate::work::{self, Distinct};

/// The most ranges one NAD's IPAM may list (the ranges cap): host-local's `ranges`, summed
/// over its range sets, and its `subnet`; whereabouts' `ipRanges` and `range`. A network has
/// a range per family, and a pool split in a few; each range becomes a subnet a pod skips.
pub const MAX_RANGES: usize = 32;
/// The most static addresses one NAD's IPAM may list (the addresses cap): `addresses` of the
/// static IPAM (and whereabouts beside its ranges); an interface has one address per family.
pub const MAX_ADDRESSES: usize = 32;
/// The most routes one NAD's IPAM may list (the routes cap): `routes`. A secondary network
/// routes a few prefixes through its gateway, a storage or telco network a few dozen; each
/// destination becomes a subnet a pod skips, which Linkerd-CNI turns into an iptables rule
/// of its own.
pub const MAX_ROUTES: usize = 128;

/// What a network's IPAM tells of the networks its interface joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ipam {
    /// Addresses from these subnets, and routes to these destinations: each masked to its
    /// network, each once, in the configuration's order.
    Subnets {
        /// The networks the interface's addresses are in.
        subnets: Vec<IpNet>,
        /// The destinations of its routes.
        routes: Vec<IpNet>,
    },
    /// `dhcp`: the address comes from a DHCP server when the pod starts.
    Dhcp,
    /// No IPAM: the interface gets no address from CNI.
    None,
}

/// Why a NAD's IPAM cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// The configuration is not a JSON object.
    #[error("is not a JSON object")]
    NotObject,
    /// An `ipam` that is not an object, or without a string `type`.
    #[error("\"{field}\" {why}")]
    Shape {
        /// The field, as a path in the configuration.
        field: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An IPAM type whose addresses this project cannot know.
    #[error(
        "\"{field}\" is {kind:?}, an IPAM whose addresses cannot be known before the pod starts (static, host-local, whereabouts and dhcp can)"
    )]
    UnknownType {
        /// Where the type is.
        field: String,
        /// The type.
        kind: String,
    },
    /// A CIDR or address that does not parse.
    #[error("\"{field}\" {value:?} is not {expected}")]
    Cidr {
        /// The field, as a path in the configuration.
        field: String,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A list longer than its cap ([`MAX_RANGES`], [`MAX_ADDRESSES`], [`MAX_ROUTES`]).
    #[error(
        "\"{field}\" lists {count} {what}; at most {cap} are read (the {what} cap): each becomes a subnet the pods that select the network skip; {fix}"
    )]
    TooMany {
        /// The field, as a path in the configuration.
        field: String,
        /// `ranges`, `addresses` or `routes`: what the cap counts.
        what: &'static str,
        /// How many it lists.
        count: usize,
        /// The cap.
        cap: usize,
        /// What to do.
        fix: &'static str,
    },
    /// An IPAM that names no range where its type needs one.
    #[error("\"{field}\" has no {what}: its type {kind} needs one")]
    NoRange {
        /// The IPAM, as a path.
        field: String,
        /// The type.
        kind: &'static str,
        /// What is missing.
        what: &'static str,
    },
}

/// The IPAM of the CNI configuration `config` (a single configuration or a configuration list).
pub fn read(config: &str) -> Result<Ipam, IpamError> {
    match serde_json::from_str::<Value>(config) {
        Ok(value) => read_value(&value),
        Err(_) => Err(IpamError::NotObject),
    }
}

/// [`read`] on a configuration already parsed.
pub fn read_value(config: &Value) -> Result<Ipam, IpamError> {
    let Value::Object(object) = config else {
        return Err(IpamError::NotObject);
    };
    let (path, ipam) = match object.get("plugins") {
        Some(Value::Array(plugins)) => {
            match plugins.iter().enumerate().find_map(|(i, p)| {
                p.get("ipam")
                    .filter(|ipam| !is_empty(ipam))
                    .map(|ipam| (format!("plugins[{i}].ipam"), ipam))
            }) {
                Some(found) => found,
                None => return Ok(Ipam::None),
            }
        }
        _ => match object.get("ipam") {
            Some(ipam) if !is_empty(ipam) => ("ipam".to_string(), ipam),
            _ => return Ok(Ipam::None),
        },
    };
    let Value::Object(ipam) = ipam else {
        return Err(IpamError::Shape {
            field: path,
            why: "is not an object",
        });
    };
    let kind = match ipam.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        _ => {
            return Err(IpamError::Shape {
                field: format!("{path}.type"),
                why: "is not a string: an IPAM names its plugin",
            });
        }
    };
    let mut subnets = Distinct::default();
    match kind {
        "dhcp" => return Ok(Ipam::Dhcp),
        "static" => static_addresses(ipam, &path, &mut subnets)?,
        "host-local" => {
            host_local(ipam, &path, &mut subnets)?;
            if subnets.is_empty() {
                return Err(IpamError::NoRange {
                    field: path,
                    kind: "host-local",
                    what: "\"ranges\" or \"subnet\"",
                });
            }
        }
        "whereabouts" => {
            whereabouts(ipam, &path, &mut subnets)?;
            static_addresses(ipam, &path, &mut subnets)?;
            if subnets.is_empty() {
                return Err(IpamError::NoRange {
                    field: path,
                    kind: "whereabouts",
                    what: "\"range\", \"ipRanges\" or \"addresses\"",
                });
            }
        }
        other => {
            return Err(IpamError::UnknownType {
                field: format!("{path}.type"),
                kind: other.to_string(),
            });
        }
    }
    let mut routes = Distinct::default();
    let listed = capped(ipam, "routes", path.as_str(), MAX_ROUTES, ROUTES_FIX)?;
    for (i, route) in listed.iter().enumerate() {
        let field = format!("{path}.routes[{i}].dst");
        let why = "is not a string: a route names its destination";
        push(&mut routes, cidr_at(route.get("dst"), &field, why, cidr)?);
    }
    Ok(Ipam::Subnets {
        subnets: subnets.into_vec(),
        routes: routes.into_vec(),
    })
}

fn is_empty(ipam: &Value) -> bool {
    matches!(ipam, Value::Null) || ipam.as_object().is_some_and(JsonMap::is_empty)
}

/// The array at `key`, or none (a missing or non-array field is left to the plugin).
fn array<'a>(object: &'a JsonMap<String, Value>, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// What to do about too many routes.
const ROUTES_FIX: &str = "summarize them in fewer, wider routes";
/// What to do about too many ranges or addresses.
const RANGES_FIX: &str = "give the network fewer, wider ranges";

/// The array at `key` of `ipam` (at `path`), refused when it holds more than `cap` entries.
fn capped<'a>(
    ipam: &'a JsonMap<String, Value>,
    key: &'static str,
    path: &str,
    cap: usize,
    fix: &'static str,
) -> Result<&'a [Value], IpamError> {
    let list = array(ipam, key);
    too_many(list.len(), cap, || format!("{path}.{key}"), key, fix)?;
    Ok(list)
}

/// Refuses `count` entries of `what` (at `field`) over `cap`.
fn too_many(
    count: usize,
    cap: usize,
    field: impl FnOnce() -> String,
    what: &'static str,
    fix: &'static str,
) -> Result<(), IpamError> {
    match count > cap {
        true => Err(IpamError::TooMany {
            field: field(),
            what,
            count,
            cap,
            fix,
        }),
        false => Ok(()),
    }
}

/// `net` masked to its network, once.
fn push(list: &mut Distinct<IpNet>, net: IpNet) {
    list.insert(net.trunc());
}

/// The string at `field` (`value`), read by `parse`; `why` says what is wrong when it is
/// missing or not a string.
fn cidr_at(
    value: Option<&Value>,
    field: &str,
    why: &'static str,
    parse: fn(&str, &str) -> Result<IpNet, IpamError>,
) -> Result<IpNet, IpamError> {
    let text = value
        .and_then(Value::as_str)
        .ok_or_else(|| IpamError::Shape {
            field: field.to_string(),
            why,
        })?;
    parse(text, field)
}

/// An address or network with its prefix (`10.1.2.3/24`, `fd00::/64`).
fn cidr(text: &str, field: &str) -> Result<IpNet, IpamError> {
    text.trim().parse::<IpNet>().map_err(|_| IpamError::Cidr {
        field: field.to_string(),
        value: text.to_string(),
        expected: "an address with its prefix length (ADDRESS/PREFIX)",
    })
}

fn static_addresses(
    ipam: &JsonMap<String, Value>,
    path: &str,
    subnets: &mut Distinct<IpNet>,
) -> Result<(), IpamError> {
    let listed = capped(ipam, "addresses", path, MAX_ADDRESSES, RANGES_FIX)?;
    for (i, entry) in listed.iter().enumerate() {
        let field = format!("{path}.addresses[{i}].address");
        let why = "is not a string: a static address is ADDRESS/PREFIX";
        push(subnets, cidr_at(entry.get("address"), &field, why, cidr)?);
    }
    Ok(())
}

fn host_local(
    ipam: &JsonMap<String, Value>,
    path: &str,
    subnets: &mut Distinct<IpNet>,
) -> Result<(), IpamError> {
    let sets = array(ipam, "ranges");
    work::count(sets.len());
    let count = sets
        .iter()
        .map(|set| set.as_array().map_or(1, Vec::len))
        .sum::<usize>()
        + usize::from(ipam.contains_key("subnet"));
    too_many(
        count,
        MAX_RANGES,
        || format!("{path}.ranges"),
        "ranges",
        RANGES_FIX,
    )?;
    for (i, set) in sets.iter().enumerate() {
        let Value::Array(set) = set else {
            return Err(IpamError::Shape {
                field: format!("{path}.ranges[{i}]"),
                why: "is not a list: host-local's ranges are lists of range sets",
            });
        };
        for (j, range) in set.iter().enumerate() {
            let field = format!("{path}.ranges[{i}][{j}].subnet");
            let why = "is not a string: a range names its subnet";
            push(subnets, cidr_at(range.get("subnet"), &field, why, cidr)?);
        }
    }
    if let Some(subnet) = ipam.get("subnet") {
        let field = format!("{path}.subnet");
        push(
            subnets,
            cidr_at(Some(subnet), &field, "is not a string", cidr)?,
        );
    }
    Ok(())
}

fn whereabouts(
    ipam: &JsonMap<String, Value>,
    path: &str,
    subnets: &mut Distinct<IpNet>,
) -> Result<(), IpamError> {
    let listed = array(ipam, "ipRanges");
    let count = listed.len() + usize::from(ipam.contains_key("range"));
    too_many(
        count,
        MAX_RANGES,
        || format!("{path}.ipRanges"),
        "ranges",
        RANGES_FIX,
    )?;
    for (i, entry) in listed.iter().enumerate() {
        let field = format!("{path}.ipRanges[{i}].range");
        let range = cidr_at(
            entry.get("range"),
            &field,
            "is not a string",
            whereabouts_range,
        )?;
        push(subnets, range);
    }
    if let Some(range) = ipam.get("range") {
        let field = format!("{path}.range");
        push(
            subnets,
            cidr_at(Some(range), &field, "is not a string", whereabouts_range)?,
        );
    }
    Ok(())
}

/// A whereabouts `range`: a CIDR, or `FIRST-LAST/PREFIX` (the range-end syntax).
fn whereabouts_range(text: &str, field: &str) -> Result<IpNet, IpamError> {
    let Some((first, last)) = text.split_once('-') else {
        return cidr(text, field);
    };
    let bad = || IpamError::Cidr {
        field: field.to_string(),
        value: text.to_string(),
        expected: "a CIDR or FIRST-LAST/PREFIX",
    };
    let (_, prefix) = last.split_once('/').ok_or_else(bad)?;
    cidr(&format!("{first}/{prefix}"), field).map_err(|_| bad())
}

#[cfg(test)]
#[path = "ipam_tests.rs"]
mod tests;

//! The `podnetinfo` downward-API volume: labels, annotations and hugepages
//! exposed to the containers, with its mounts and `CONTAINER_NAME`.

use std::collections::BTreeSet;

use super::{Applied, container_name, containers, containers_mut};
use crate::network_resources::error::Error;
use crate::network_resources::record::Record;
use crate::yaml::{Map, Node, Seq};

/// The downward-API volume (and its mounts).
const PODNETINFO: &str = "podnetinfo";
/// Where the volume is mounted.
const PODNETINFO_PATH: &str = "/etc/podnetinfo";
/// The variable telling a container its name, for its hugepage files.
const CONTAINER_NAME_ENV: &str = "CONTAINER_NAME";

/// The prefix of hugepage resource names, `hugepages-<page size>`.
const HUGEPAGES_PREFIX: &str = "hugepages-";

fn field_ref(path: &str, field: &str) -> Node {
    Node::mapping([
        ("path", Node::string(path)),
        (
            "fieldRef",
            Node::mapping([("fieldPath", Node::string(field))]),
        ),
    ])
}

/// Whether a quantity is set and not zero.
fn nonzero(node: &Node) -> bool {
    node.as_text().is_some_and(|t| {
        let digits: String = t
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        digits.chars().any(|c| c.is_ascii_digit() && c != '0')
    })
}

/// The hugepage files of one container, `(file, resource)`: for every `hugepages-<size>`
/// request, then limit, that is set and not zero, largest pages first, the file
/// `hugepages_<size>_<request|limit>_<container>` with the binary size written as
/// network-resources-injector writes `1Gi` and `2Mi` (`1G`, `2M`, `64K`, `16G`).
fn hugepage_files(container: &Node) -> Vec<(String, String)> {
    let name = container_name(container);
    let mut files = Vec::new();
    for (field, kind) in [("requests", "request"), ("limits", "limit")] {
        let Some(list) = container
            .as_map()
            .and_then(|c| c.get("resources"))
            .and_then(Node::as_map)
            .and_then(|r| r.get(field))
            .and_then(Node::as_map)
        else {
            continue;
        };
        let mut sizes: Vec<(&str, &str)> = list
            .entries
            .iter()
            .filter(|(_, value)| nonzero(value))
            .filter_map(|(key, _)| {
                let resource = key.as_text()?;
                Some((resource, resource.strip_prefix(HUGEPAGES_PREFIX)?))
            })
            .filter(|(_, size)| !size.is_empty())
            .collect();
        sizes.sort_by(|a, b| page_bytes(b.1).cmp(&page_bytes(a.1)).then(a.0.cmp(b.0)));
        for (resource, size) in sizes {
            let size = match size.strip_suffix('i') {
                Some(s) if s.ends_with(['K', 'M', 'G', 'T', 'P', 'E']) => s,
                _ => size,
            };
            files.push((
                format!("hugepages_{size}_{kind}_{name}"),
                format!("{field}.{resource}"),
            ));
        }
    }
    files
}

/// The bytes of a page size such as `2Mi`, `1Gi` or `1048576`; 0 when it is none.
fn page_bytes(size: &str) -> u128 {
    let digits = size.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(number) = size[..digits].parse::<u128>() else {
        return 0;
    };
    let factor: u128 = match &size[digits..] {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => 0,
    };
    number.saturating_mul(factor)
}

/// The `podnetinfo` volume for these containers.
fn podnetinfo_volume(containers: &[Node]) -> Node {
    let mut items = vec![
        field_ref("labels", "metadata.labels"),
        field_ref("annotations", "metadata.annotations"),
    ];
    for container in containers {
        for (file, resource) in hugepage_files(container) {
            items.push(Node::mapping([
                ("path", Node::string(file)),
                (
                    "resourceFieldRef",
                    Node::mapping([
                        ("containerName", Node::string(container_name(container))),
                        ("resource", Node::string(resource)),
                        ("divisor", Node::string("1Mi")),
                    ]),
                ),
            ]));
        }
    }
    Node::mapping([
        ("name", Node::string(PODNETINFO)),
        (
            "downwardAPI",
            Node::mapping([(
                "items",
                Node::Seq(Seq {
                    items,
                    ..Seq::default()
                }),
            )]),
        ),
    ])
}

fn named<'a>(list: Option<&'a Node>, name: &str) -> Option<&'a Node> {
    list?
        .as_seq()?
        .items
        .iter()
        .find(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(name))
}

/// A list field of a map (`volumes`, `volumeMounts`, `env`), created when missing.
fn list_entry<'a>(map: &'a mut Map, key: &str) -> Result<&'a mut Vec<Node>, Error> {
    if map.get(key).is_none_or(Node::is_null) {
        map.insert(key, Node::Seq(Seq::default()));
    }
    match map.get_mut(key) {
        Some(Node::Seq(s)) => Ok(&mut s.items),
        _ => Err(Error::Shape(format!("{key} is not a list"))),
    }
}

/// Removes the item named `name` from a list field, and the field when it is left empty.
fn remove_named(map: &mut Map, key: &str, name: &str) -> bool {
    let Some(Node::Seq(seq)) = map.get_mut(key) else {
        return false;
    };
    let Some(at) = seq
        .items
        .iter()
        .position(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(name))
    else {
        return false;
    };
    seq.items.remove(at);
    if seq.items.is_empty() {
        map.remove(key);
    }
    true
}

/// Adds or removes the `podnetinfo` volume, its mounts and `CONTAINER_NAME`.
pub(super) fn downward_api(
    spec: &mut Map,
    want: bool,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    if !want && !before.volume && before.mounts.is_empty() && before.env.is_empty() {
        return Ok(());
    }
    volume(spec, want, before, out)?;
    let hugepages: BTreeSet<String> = containers(spec)
        .iter()
        .filter(|c| !hugepage_files(c).is_empty())
        .map(container_name)
        .collect();
    for container in containers_mut(spec) {
        let name = container_name(container);
        let Some(c) = container.as_map_mut() else {
            continue;
        };
        mount(c, &name, want, before, out)?;
        container_name_env(c, &name, want && hugepages.contains(&name), before, out)?;
    }
    Ok(())
}

/// Adds, updates or removes the `podnetinfo` volume; a volume of that name
/// the workload has of its own is left as it is.
fn volume(spec: &mut Map, want: bool, before: &Record, out: &mut Applied) -> Result<(), Error> {
    let volume = podnetinfo_volume(containers(spec));
    let existing = named(spec.get("volumes"), PODNETINFO).cloned();
    match (want, existing) {
        (true, None) => {
            list_entry(spec, "volumes")?.push(volume);
            out.record.volume = true;
            out.changes.push(format!("added volume {PODNETINFO}"));
        }
        (true, Some(v)) if before.volume => {
            if v != volume {
                let list = list_entry(spec, "volumes")?;
                if let Some(slot) = list
                    .iter_mut()
                    .find(|i| i.as_map().and_then(|m| m.get_text("name")) == Some(PODNETINFO))
                {
                    *slot = volume;
                }
                out.changes.push(format!("updated volume {PODNETINFO}"));
            }
            out.record.volume = true;
        }
        (true, Some(v)) => {
            if v != volume {
                out.warnings.push(format!(
                    "volume {PODNETINFO} is the workload's own, so it is left as it is; the downward-API files this function would expose in it are not added"
                ));
            }
        }
        (false, Some(_)) if before.volume => {
            remove_named(spec, "volumes", PODNETINFO);
            out.changes.push(format!("removed volume {PODNETINFO}"));
        }
        (false, _) => {}
    }
    Ok(())
}

/// Mounts the volume in container `name`, or unmounts it; a mount the
/// container has of its own (by name or path) is left as it is.
fn mount(
    c: &mut Map,
    name: &str,
    want: bool,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let mounted = c
        .get("volumeMounts")
        .and_then(Node::as_seq)
        .is_some_and(|s| {
            s.items.iter().any(|m| {
                let m = m.as_map();
                m.and_then(|m| m.get_text("name")) == Some(PODNETINFO)
                    || m.and_then(|m| m.get_text("mountPath")) == Some(PODNETINFO_PATH)
            })
        });
    match (want, mounted, before.mounts.contains(name)) {
        (true, true, true) => {
            out.record.mounts.insert(name.to_string());
        }
        (true, true, false) => {}
        (true, false, _) => {
            list_entry(c, "volumeMounts")?.push(Node::mapping([
                ("name", Node::string(PODNETINFO)),
                ("mountPath", Node::string(PODNETINFO_PATH)),
                ("readOnly", Node::plain("true")),
            ]));
            out.record.mounts.insert(name.to_string());
            out.changes
                .push(format!("mounted {PODNETINFO} in container {name}"));
        }
        (false, _, true) => {
            if remove_named(c, "volumeMounts", PODNETINFO) {
                out.changes
                    .push(format!("unmounted {PODNETINFO} from container {name}"));
            }
        }
        (false, _, false) => {}
    }
    Ok(())
}

/// Sets `CONTAINER_NAME` in container `name` when it is wanted (the container
/// has hugepage files), or removes the one the rules set.
fn container_name_env(
    c: &mut Map,
    name: &str,
    wants_env: bool,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let has_env = named(c.get("env"), CONTAINER_NAME_ENV).is_some();
    match (wants_env, has_env, before.env.contains(name)) {
        (true, true, true) => {
            out.record.env.insert(name.to_string());
        }
        (true, true, false) => {}
        (true, false, _) => {
            list_entry(c, "env")?.push(Node::mapping([
                ("name", Node::string(CONTAINER_NAME_ENV)),
                ("value", Node::string(name.to_string())),
            ]));
            out.record.env.insert(name.to_string());
            out.changes
                .push(format!("set {CONTAINER_NAME_ENV} in container {name}"));
        }
        (false, true, true) => {
            remove_named(c, "env", CONTAINER_NAME_ENV);
            out.changes.push(format!(
                "removed {CONTAINER_NAME_ENV} from container {name}"
            ));
        }
        (false, _, _) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    /// Every `hugepages-<size>` request and limit of a container gets its file, named as
    /// network-resources-injector names the `1Gi` and `2Mi` ones.
    #[test]
    fn hugepages_of_every_size() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("{}", &[]),
            ("{requests: {cpu: 1, memory: 1Gi}}", &[]),
            (
                "{requests: {hugepages-2Mi: 512Mi, hugepages-1Gi: 2Gi}, limits: {hugepages-1Gi: 2Gi}}",
                &[
                    ("hugepages_1G_request_c", "requests.hugepages-1Gi"),
                    ("hugepages_2M_request_c", "requests.hugepages-2Mi"),
                    ("hugepages_1G_limit_c", "limits.hugepages-1Gi"),
                ],
            ),
            (
                "{requests: {hugepages-64Ki: 1Mi, hugepages-16Gi: 16Gi, hugepages-32Mi: 64Mi, hugepages-512Mi: 1Gi}}",
                &[
                    ("hugepages_16G_request_c", "requests.hugepages-16Gi"),
                    ("hugepages_512M_request_c", "requests.hugepages-512Mi"),
                    ("hugepages_32M_request_c", "requests.hugepages-32Mi"),
                    ("hugepages_64K_request_c", "requests.hugepages-64Ki"),
                ],
            ),
            // Zero quantities are not exposed, as the injector skips them.
            (
                "{limits: {hugepages-2Mi: 0, hugepages-1Gi: '0Gi', hugepages-16Gi: 1}}",
                &[("hugepages_16G_limit_c", "limits.hugepages-16Gi")],
            ),
            // A size without a binary suffix is written as it is.
            (
                "{requests: {hugepages-1048576: 2Mi, hugepages-: 1}}",
                &[("hugepages_1048576_request_c", "requests.hugepages-1048576")],
            ),
        ];
        for (resources, expected) in cases {
            let container = parse_document(&format!("{{name: c, resources: {resources}}}"))
                .unwrap_or_else(|e| panic!("{resources}: {e}"));
            let got = hugepage_files(&container);
            let want: Vec<(String, String)> = expected
                .iter()
                .map(|(f, r)| (f.to_string(), r.to_string()))
                .collect();
            assert_eq!(got, want, "{resources}");
        }
    }

    #[test]
    fn page_sizes() {
        for (size, bytes) in [
            ("2Mi", 2 << 20),
            ("1Gi", 1 << 30),
            ("64Ki", 64 << 10),
            ("1048576", 1 << 20),
            ("2M", 2_000_000),
            ("x", 0),
            ("", 0),
        ] {
            assert_eq!(page_bytes(size), bytes, "{size}");
        }
    }
}

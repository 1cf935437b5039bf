//! The network resources: each selected NAD's resource name counted into the
//! requests and limits of the first container, or of the one the pod
//! template chose.

use std::collections::{BTreeMap, BTreeSet};

use super::{Applied, container_name, containers, containers_mut, resource_value};
use crate::network_resources::error::Error;
use crate::network_resources::record::{Record, Share};
use crate::network_resources::settings::Settings;
use crate::yaml::{Map, Node};

/// A quantity as written: a whole number, or something else the rules do not add to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Quantity {
    Count(u64),
    Other(String),
}

fn quantity(node: &Node) -> Quantity {
    let text = node.as_text().unwrap_or_default();
    match text.trim().parse::<u64>() {
        Ok(n) => Quantity::Count(n),
        Err(_) => Quantity::Other(text.to_string()),
    }
}

/// The container that receives the resources.
pub(super) struct Target {
    /// Its index in `spec.containers`.
    pub index: usize,
    /// Its name, when the pod template chose it.
    pub chosen: Option<String>,
}

/// Sets or removes the requests and limits of the target container; when
/// the rules' share was in another container (the choice changed), takes it
/// out of that one first. `check_spec` has checked their shapes.
pub(super) fn resources(
    spec: &mut Map,
    settings: &Settings,
    counts: &BTreeMap<String, u64>,
    before: &Record,
    target: Target,
    out: &mut Applied,
) -> Result<(), Error> {
    let previous = match &before.container {
        None => Some(0),
        Some(name) => containers(spec)
            .iter()
            .position(|c| container_name(c) == *name),
    };
    if previous == Some(target.index) {
        in_container(spec, settings, counts, before, target.index, out)?;
    } else {
        if let Some(previous) = previous {
            in_container(spec, settings, &BTreeMap::new(), before, previous, out)?;
        }
        let moved = Record {
            requests: BTreeMap::new(),
            limits: BTreeMap::new(),
            ..before.clone()
        };
        in_container(spec, settings, counts, &moved, target.index, out)?;
    }
    if !(out.record.requests.is_empty() && out.record.limits.is_empty()) {
        // A record without a container means the first one (as records made
        // before the choice existed do): any other is named, chosen or not.
        out.record.container = target.chosen.or_else(|| {
            (target.index != 0)
                .then(|| containers(spec).get(target.index).map(container_name))
                .flatten()
        });
    }
    Ok(())
}

/// Sets or removes the requests and limits of container `index`, whose
/// share of them `before` records.
fn in_container(
    spec: &mut Map,
    settings: &Settings,
    counts: &BTreeMap<String, u64>,
    before: &Record,
    index: usize,
    out: &mut Applied,
) -> Result<(), Error> {
    let all = containers(spec);
    // `check_spec` has made sure there is a target container when counts ask for one.
    let Some(target) = all.get(index).filter(|c| c.as_map().is_some()) else {
        return Ok(());
    };
    let target_name = container_name(target);
    let names: BTreeSet<&String> = counts
        .keys()
        .chain(before.requests.keys())
        .chain(before.limits.keys())
        .collect();
    let mut writes: Vec<Write> = Vec::new();
    for name in names {
        let counted = Counted {
            name,
            count: counts.get(name).copied().unwrap_or(0),
            container: &target_name,
        };
        let bases = counted.bases(target, before, out);
        let user_elsewhere = all.iter().enumerate().any(|(i, c)| {
            i != index
                && (resource_value(c, "requests", name).is_some()
                    || resource_value(c, "limits", name).is_some())
        });
        let user_set = user_elsewhere || bases.iter().any(|(_, _, base)| base.is_some());
        for (field, current, base) in bases {
            let target = counted.target(field, &base, user_set, settings, out);
            if target != current {
                writes.push(counted.write(field, &current, target));
            }
        }
    }
    out.changes.extend(write_messages(&writes, &target_name));
    let Some(target) = containers_mut(spec)
        .get_mut(index)
        .and_then(Node::as_map_mut)
    else {
        return Ok(());
    };
    for w in writes {
        write_quantity(target, index, w.field, &w.name, w.value)?;
    }
    Ok(())
}

/// One resource the rules count, or counted before, in the target container.
struct Counted<'a> {
    /// The resource name.
    name: &'a String,
    /// How many selected NADs ask for it (0: none now).
    count: u64,
    /// The target container's name.
    container: &'a str,
}

impl Counted<'_> {
    /// For `requests` and `limits`: the current value, and the user's part
    /// of it (the base): the value less what the rules recorded, or all of it
    /// when it was edited by hand.
    fn bases(
        &self,
        target: &Node,
        before: &Record,
        out: &mut Applied,
    ) -> Vec<(&'static str, Option<Quantity>, Option<Quantity>)> {
        let (name, container) = (self.name, self.container);
        let mut bases = Vec::with_capacity(2);
        for (field, owned) in [("requests", &before.requests), ("limits", &before.limits)] {
            let current = resource_value(target, field, name).map(quantity);
            let base = match (owned.get(name), &current) {
                (Some(Share::Set(n)), Some(Quantity::Count(c))) if c == n => None,
                (Some(Share::Added(n)), Some(Quantity::Count(c))) if c >= n => {
                    Some(Quantity::Count(c - n))
                }
                (Some(_), Some(_)) => {
                    out.changes.push(format!(
                        "{field} of {name} in container {container} was edited by hand; it is left to the user"
                    ));
                    current.clone()
                }
                _ => current.clone(),
            };
            bases.push((field, current, base));
        }
        bases
    }

    /// The value `field` should have given its base, recording the rules'
    /// share; the user's own value (`user_set`, here or in another container)
    /// is left alone unless `honorResources` adds to it.
    fn target(
        &self,
        field: &'static str,
        base: &Option<Quantity>,
        user_set: bool,
        settings: &Settings,
        out: &mut Applied,
    ) -> Option<Quantity> {
        let (name, count, container) = (self.name, self.count, self.container);
        let record = if field == "requests" {
            &mut out.record.requests
        } else {
            &mut out.record.limits
        };
        match (base, count) {
            (_, 0) => base.clone(),
            (Some(Quantity::Other(text)), _) if settings.honor_resources => {
                out.warnings.push(format!(
                    "{field} of {name} in container {container} is {text:?}, not a whole number: {count} cannot be added to it"
                ));
                base.clone()
            }
            (Some(Quantity::Count(b)), _) if settings.honor_resources => {
                record.insert(name.clone(), Share::Added(count));
                Some(Quantity::Count(b + count))
            }
            (None, _) if settings.honor_resources || !user_set => {
                record.insert(name.clone(), Share::Set(count));
                Some(Quantity::Count(count))
            }
            _ => base.clone(),
        }
    }

    /// The write that takes `field` from `current` to `target`.
    fn write(
        &self,
        field: &'static str,
        current: &Option<Quantity>,
        target: Option<Quantity>,
    ) -> Write {
        let value = match target {
            Some(Quantity::Count(n)) => Some(n),
            Some(Quantity::Other(_)) => unreachable!("a text value is never written"),
            None => None,
        };
        let verb = match (current, value) {
            (_, None) => Verb::Removed,
            (None, Some(_)) => Verb::Set,
            (Some(_), Some(_)) => Verb::Changed,
        };
        Write {
            field,
            name: self.name.clone(),
            value,
            verb,
        }
    }
}

/// What an edit of a quantity does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Set,
    Changed,
    Removed,
}

/// One edit of `resources.<field>.<name>` of the target container.
struct Write {
    field: &'static str,
    name: String,
    value: Option<u64>,
    verb: Verb,
}

/// The change messages for the edits of one container, short for the common
/// case: a resource whose requests and limits get the same edit is named once,
/// and resources with the same edit share one message, e.g. "set requests and
/// limits r/a, r/b to 1 in container app".
fn write_messages(writes: &[Write], container: &str) -> Vec<String> {
    // (verb, value, fields) -> names, in the order first seen.
    let mut groups: Vec<(Verb, Option<u64>, &str, Vec<&str>)> = Vec::new();
    let mut i = 0;
    while i < writes.len() {
        let w = &writes[i];
        let both = writes.get(i + 1).filter(|n| {
            n.name == w.name && n.field != w.field && n.verb == w.verb && n.value == w.value
        });
        let fields = match both {
            Some(_) => "requests and limits",
            None => w.field,
        };
        i += if both.is_some() { 2 } else { 1 };
        match groups
            .iter_mut()
            .find(|(verb, value, f, _)| (*verb, *value, *f) == (w.verb, w.value, fields))
        {
            Some(group) => group.3.push(&w.name),
            None => groups.push((w.verb, w.value, fields, vec![&w.name])),
        }
    }
    groups
        .into_iter()
        .map(|(verb, value, fields, names)| {
            let names = names.join(", ");
            match (verb, value) {
                (Verb::Removed, _) | (_, None) => {
                    format!("removed {fields} {names} from container {container}")
                }
                (Verb::Set, Some(n)) => {
                    format!("set {fields} {names} to {n} in container {container}")
                }
                (Verb::Changed, Some(n)) => {
                    format!("changed {fields} {names} to {n} in container {container}")
                }
            }
        })
        .collect()
}

/// Sets `resources.<field>.<name>` of a container, keeping the style of an
/// existing value, or removes it and the maps it leaves empty.
fn write_quantity(
    container: &mut Map,
    index: usize,
    field: &str,
    name: &str,
    value: Option<u64>,
) -> Result<(), Error> {
    let shape = || {
        Error::Shape(format!(
            "spec.containers[{index}].resources.{field} is not a mapping"
        ))
    };
    match value {
        Some(n) => {
            let map = container
                .map_entry("resources")
                .and_then(|r| r.map_entry(field))
                .ok_or_else(shape)?;
            match map.get_mut(name) {
                Some(Node::Scalar(s)) => s.value = n.to_string().into(),
                _ => map.insert(name, Node::string(n.to_string())),
            }
        }
        None => {
            let Some(resources) = container.get_mut("resources").and_then(Node::as_map_mut) else {
                return Ok(());
            };
            if let Some(map) = resources.get_mut(field).and_then(Node::as_map_mut) {
                map.remove(name);
                if map.is_empty() {
                    resources.remove(field);
                }
            }
            if resources.is_empty() {
                container.remove("resources");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_messages_group_like_edits() {
        let w = |field, name: &str, value, verb| Write {
            field,
            name: name.into(),
            value,
            verb,
        };
        let cases: [(Vec<Write>, &[&str]); 4] = [
            (
                vec![
                    w("requests", "r/a", Some(1), Verb::Set),
                    w("limits", "r/a", Some(1), Verb::Set),
                    w("requests", "r/b", Some(1), Verb::Set),
                    w("limits", "r/b", Some(1), Verb::Set),
                ],
                &["set requests and limits r/a, r/b to 1 in container app"],
            ),
            (
                vec![
                    w("requests", "r/a", Some(2), Verb::Changed),
                    w("limits", "r/a", Some(3), Verb::Changed),
                ],
                &[
                    "changed requests r/a to 2 in container app",
                    "changed limits r/a to 3 in container app",
                ],
            ),
            (
                vec![
                    w("requests", "r/a", None, Verb::Removed),
                    w("limits", "r/a", None, Verb::Removed),
                    w("limits", "r/b", Some(1), Verb::Set),
                ],
                &[
                    "removed requests and limits r/a from container app",
                    "set limits r/b to 1 in container app",
                ],
            ),
            (vec![], &[]),
        ];
        for (writes, want) in cases {
            assert_eq!(write_messages(&writes, "app"), want);
        }
    }
}

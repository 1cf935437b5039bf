//! The NADs' node labels, merged into the pod template's `spec.nodeSelector`.

use std::collections::BTreeMap;

use super::Applied;
use crate::network_resources::error::Error;
use crate::network_resources::record::Record;
use crate::yaml::{Map, Node};

/// Merges the NADs' node labels into `spec.nodeSelector`.
pub(super) fn node_selector(
    spec: &mut Map,
    wanted: &BTreeMap<String, (String, String)>,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    if wanted.is_empty() && before.node_selector.is_empty() {
        return Ok(());
    }
    let current = current(spec)?;
    let mut sets: Vec<(&str, &str)> = Vec::new();
    let mut removes: Vec<&str> = Vec::new();
    for (key, ours) in &before.node_selector {
        match current.get(key) {
            Some(v) if v == ours && !wanted.contains_key(key) => {
                removes.push(key);
                out.changes.push(format!("removed spec.nodeSelector {key}"));
            }
            Some(v) if v == ours => {}
            Some(_) => out.changes.push(format!(
                "spec.nodeSelector {key} was edited by hand; it is left to the user"
            )),
            None => {}
        }
    }
    for (key, (value, source)) in wanted {
        let owned = before
            .node_selector
            .get(key)
            .is_some_and(|ours| current.get(key) == Some(ours));
        match current.get(key) {
            Some(v) if owned => {
                if v != value {
                    sets.push((key, value));
                    out.changes.push(format!(
                        "set spec.nodeSelector {key} to {value:?} ({source})"
                    ));
                }
                out.record.node_selector.insert(key.clone(), value.clone());
            }
            Some(v) if v == value => {}
            Some(v) => {
                return Err(Error::NodeSelectorConflict {
                    key: key.clone(),
                    first: source.clone(),
                    first_value: value.clone(),
                    second: "the workload's own spec.nodeSelector".into(),
                    second_value: v.clone(),
                });
            }
            None => {
                sets.push((key, value));
                out.changes.push(format!(
                    "set spec.nodeSelector {key} to {value:?} ({source})"
                ));
                out.record.node_selector.insert(key.clone(), value.clone());
            }
        }
    }
    if sets.is_empty() && removes.is_empty() {
        return Ok(());
    }
    write(spec, &sets, &removes)
}

/// The labels of `spec.nodeSelector` as they are.
fn current(spec: &Map) -> Result<BTreeMap<String, String>, Error> {
    Ok(match spec.get("nodeSelector") {
        None => BTreeMap::new(),
        Some(n) if n.is_null() => BTreeMap::new(),
        Some(Node::Map(m)) => m
            .entries
            .iter()
            .filter_map(|(k, v)| Some((k.as_text()?.to_string(), v.as_text()?.to_string())))
            .collect(),
        Some(other) => {
            return Err(Error::Shape(format!(
                "spec.nodeSelector is {}, not a mapping",
                other.kind_name()
            )));
        }
    })
}

/// Writes the labels set and removes those removed, and `spec.nodeSelector`
/// when it is left empty.
fn write(spec: &mut Map, sets: &[(&str, &str)], removes: &[&str]) -> Result<(), Error> {
    let map = spec
        .map_entry("nodeSelector")
        .ok_or_else(|| Error::Shape("spec.nodeSelector is not a mapping".into()))?;
    for &key in removes {
        map.remove(key);
    }
    for &(key, value) in sets {
        match map.get_mut(key) {
            Some(Node::Scalar(s)) => s.value = value.into(),
            _ => map.insert(key, Node::string(value)),
        }
    }
    if map.is_empty() {
        spec.remove("nodeSelector");
    }
    Ok(())
}

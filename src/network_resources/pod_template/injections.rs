//! The metadata rules: injections (annotations and networks added to pods
//! labelled for them) and deterministic interface names.

use std::collections::BTreeMap;

use super::Applied;
use crate::k8s::workload::{
    remove_annotation, set_annotation, template_annotations, template_labels,
};
use crate::multus::interface_name::{self, InterfaceNameError};
use crate::multus::networks::{NETWORKS_ANNOTATION, Networks, Selection};
use crate::network_resources::error::Error;
use crate::network_resources::record::Record;
use crate::network_resources::settings::Settings;
use crate::yaml::Map;

/// Adds the annotations of the injections whose label is `true`, removes those
/// it added that are no longer wanted.
pub(super) fn inject(
    t: &mut Map,
    settings: &Settings,
    pod_namespace: &str,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let mut wanted = wanted(t, settings)?;
    let networks: Vec<&str> = wanted
        .remove(NETWORKS_ANNOTATION)
        .map(|(v, _)| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let current = |t: &Map, key: &str| {
        template_annotations(t)
            .and_then(|a| a.get_text(key))
            .map(str::to_string)
    };
    for (key, ours) in &before.annotations {
        if wanted.contains_key(key.as_str()) {
            continue;
        }
        match current(t, key) {
            Some(v) if v == *ours => {
                remove_annotation(t, key);
                out.changes
                    .push(format!("removed injected annotation {key}"));
            }
            Some(_) => out.changes.push(format!(
                "injected annotation {key} was edited by hand; it is left to the user"
            )),
            None => {}
        }
    }
    for (key, (value, label)) in wanted {
        let ours = before.annotations.get(key);
        match current(t, key) {
            Some(v) if ours == Some(&v) => {
                if v != value {
                    set(t, key, value)?;
                    out.changes
                        .push(format!("set annotation {key} (injection {label})"));
                }
                out.record.annotations.insert(key.into(), value.into());
            }
            Some(_) if ours.is_some() => out.changes.push(format!(
                "injected annotation {key} was edited by hand; it is left to the user"
            )),
            Some(v) if v == value => {}
            Some(_) => out.warnings.push(format!(
                "annotation {key} is already set; injection {label} leaves it as it is"
            )),
            None => {
                set(t, key, value)?;
                out.changes
                    .push(format!("set annotation {key} (injection {label})"));
                out.record.annotations.insert(key.into(), value.into());
            }
        }
    }
    inject_networks(t, &networks, pod_namespace, before, out)
}

/// The annotations the injections of the template's labels want: key to
/// value and the injection's label. Two that want different values conflict.
fn wanted<'s>(
    t: &Map,
    settings: &'s Settings,
) -> Result<BTreeMap<&'s str, (&'s str, &'s str)>, Error> {
    let labels = template_labels(t);
    let mut wanted: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for (label, annotations) in &settings.injections {
        let on = labels
            .and_then(|l| l.get_text(label))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !on {
            continue;
        }
        for (key, value) in annotations {
            match wanted.get(key.as_str()) {
                Some((v, first)) if v != value => {
                    return Err(Error::InjectionConflict {
                        key: key.clone(),
                        first: first.to_string(),
                        second: label.clone(),
                    });
                }
                _ => {
                    wanted.insert(key, (value, label));
                }
            }
        }
    }
    Ok(wanted)
}

fn set(t: &mut Map, key: &str, value: &str) -> Result<(), Error> {
    set_annotation(t, key, value.to_string()).map_err(Error::Shape)
}

/// Appends the injected networks to the networks annotation, each as a plain
/// selection, and removes those it appended that are no longer wanted.
fn inject_networks(
    t: &mut Map,
    wanted: &[&str],
    pod_namespace: &str,
    before: &Record,
    out: &mut Applied,
) -> Result<(), Error> {
    let networks_error = |source| Error::Networks {
        annotation: NETWORKS_ANNOTATION,
        source,
    };
    let mut text = template_annotations(t)
        .and_then(|a| a.get_text(NETWORKS_ANNOTATION))
        .map(str::to_string);
    let original = text.clone();
    for name in &before.networks {
        if wanted.contains(&name.as_str()) {
            continue;
        }
        let Some(current) = &text else { continue };
        let parsed = Networks::parse(current).map_err(networks_error)?;
        match parsed.without_first(|s| injected_entry(s, name)) {
            Some(rest) => {
                text = Some(rest);
                out.changes
                    .push(format!("removed injected network {name}"));
            }
            None => out.warnings.push(format!(
                "the {name} entry an injection added to {NETWORKS_ANNOTATION} is gone or was edited; the annotation is left as it is"
            )),
        }
    }
    for name in wanted {
        let parsed = text
            .as_deref()
            .map(Networks::parse)
            .transpose()
            .map_err(networks_error)?;
        let referenced = parsed
            .as_ref()
            .is_some_and(|n| n.references(name, pod_namespace));
        if !referenced {
            text = Some(match &parsed {
                Some(n) => n.with_appended(name),
                None => name.to_string(),
            });
            out.changes.push(format!("added injected network {name}"));
            out.record.networks.insert(name.to_string());
        } else if before.networks.contains(*name)
            && parsed.is_some_and(|n| n.selections().iter().any(|s| injected_entry(s, name)))
        {
            out.record.networks.insert(name.to_string());
        }
    }
    if text != original {
        match text.filter(|t| !t.trim().is_empty()) {
            Some(t2) => set(t, NETWORKS_ANNOTATION, &t2)?,
            None => remove_annotation(t, NETWORKS_ANNOTATION),
        }
    }
    Ok(())
}

/// Gives every selection without an interface its deterministic name. Names are
/// not recorded: once given, they are what the pod's software sees, so turning
/// the setting off leaves them in place.
pub(super) fn name_interfaces(t: &mut Map, out: &mut Applied) -> Result<(), Error> {
    let Some(text) = template_annotations(t).and_then(|a| a.get_text(NETWORKS_ANNOTATION)) else {
        return Ok(());
    };
    if let Some(named) = interface_name::name_interfaces(text).map_err(|e| match e {
        InterfaceNameError::Networks(source) => Error::Networks {
            annotation: NETWORKS_ANNOTATION,
            source,
        },
        e => Error::InterfaceNames(e),
    })? {
        set(t, NETWORKS_ANNOTATION, &named)?;
        out.changes
            .push(format!("named the interfaces in {NETWORKS_ANNOTATION}"));
    }
    Ok(())
}

/// Whether `s` is the entry an injection appended for network `name`: the plain
/// name, or the name with its deterministic interface.
fn injected_entry(s: &Selection, name: &str) -> bool {
    (s.is_plain() && s.name == name) || s.is_exactly(name, &interface_name::deterministic(name))
}

//! The JSONPatch of the annotation edits the Linkerd-CNI rules make on a
//! pod, written from the request's own `metadata` without building trees.

use serde::Serialize;

use super::{Edit, Metadata};
use crate::k8s::json_patch::{Op, Writer};

/// The JSONPatch of annotation edits on the object's `metadata`: what
/// [`crate::k8s::json_patch::diff`] gives between the object before and
/// after [`crate::linkerd_cni::attach::workload`] writes them, without the
/// trees. Removals come first, then replacements in the annotations' order,
/// then additions in the edits' order; removing the last annotation removes
/// the map, and a missing map is added whole.
pub(super) fn annotation_patch(
    metadata: Option<&Metadata>,
    edits: &[Edit],
) -> Result<Writer, String> {
    const ANNOTATIONS: &str = "/metadata/annotations";
    let mut patch = Writer::default();
    if edits.is_empty() {
        return Ok(patch);
    }
    let sets = || edits.iter().filter_map(|(k, v)| Some((*k, v.as_deref()?)));
    let members = match metadata.and_then(|m| m.annotations.as_ref()) {
        Some(annotations) => match annotations.members() {
            Some(members) => members,
            None if sets().next().is_none() => return Ok(patch),
            None => return Err("metadata.annotations is not a mapping".into()),
        },
        None if sets().next().is_none() => return Ok(patch),
        None => {
            let added = Added(edits);
            match metadata {
                Some(_) => patch.push_at(Op::Add, ANNOTATIONS, Some(&added)),
                None => patch.push_at(
                    Op::Add,
                    "/metadata",
                    Some(&serde_json::json!({ "annotations": added })),
                ),
            }
            return Ok(patch);
        }
    };
    let edit_of = |key: &str| {
        edits
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_deref())
    };
    let kept = members
        .iter()
        .filter(|m| edit_of(&m.name) != Some(None))
        .count();
    let mut added = sets()
        .filter(|(k, _)| !members.iter().any(|m| m.name == *k))
        .peekable();
    if kept == 0 && added.peek().is_none() {
        patch.push_at(Op::Remove, ANNOTATIONS, None::<&()>);
        return Ok(patch);
    }
    for member in members {
        if edit_of(&member.name) == Some(None) {
            patch.push(Op::Remove, ANNOTATIONS, &member.name, None);
        }
    }
    for member in members {
        if let Some(Some(new)) = edit_of(&member.name)
            && member.text() != Some(new)
        {
            patch.push(Op::Replace, ANNOTATIONS, &member.name, Some(new));
        }
    }
    for (key, value) in added {
        patch.push(Op::Add, ANNOTATIONS, key, Some(value));
    }
    Ok(patch)
}

/// The annotations set by edits, as a JSON object in their order.
struct Added<'a>(&'a [Edit]);

impl Serialize for Added<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (key, value) in self.0 {
            if let Some(value) = value {
                map.serialize_entry(key, value.as_str())?;
            }
        }
        map.end()
    }
}

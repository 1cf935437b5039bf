//! What the network-resources rules added to a workload, recorded on it so a
//! later render (or the webhook) changes or removes only that.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The workload annotation holding the record, as compact JSON.
pub const RECORD_ANNOTATION: &str = "multus.linkerd.io/network-resources";

/// The rules' share of one resource quantity in the container that receives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Share {
    /// The rules set the value: it is all theirs.
    Set(u64),
    /// The rules added this much to the user's value.
    Added(u64),
}

/// Everything the rules own on one workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The container holding the requests and limits, when the pod template
    /// chose one ([`super::pod_template::CONTAINER_ANNOTATION`]); else the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Resource requests of that container.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Share>,
    /// Resource limits of that container.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Share>,
    /// `spec.nodeSelector` entries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Pod annotations added by injections, with the value added.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Networks an injection appended to the networks annotation.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub networks: BTreeSet<String>,
    /// Whether the `podnetinfo` volume is the rules'.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub volume: bool,
    /// Containers given the `podnetinfo` mount.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub mounts: BTreeSet<String>,
    /// Containers given the `CONTAINER_NAME` variable.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub env: BTreeSet<String>,
}

impl Record {
    /// Reads the annotation's value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let refuse = |why: String| {
            format!("is not a record this function wrote ({why}); remove it to start afresh")
        };
        if !text.trim_start().starts_with('{') {
            return Err(refuse("not a JSON object".into()));
        }
        serde_json::from_str(text).map_err(|e| refuse(e.to_string()))
    }

    /// Whether nothing is owned.
    pub fn is_empty(&self) -> bool {
        *self == Record::default()
    }

    /// The annotation's value: compact JSON with sorted keys.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut record = Record::default();
        assert_eq!(record.to_text(), "{}");
        record
            .requests
            .insert("intel.com/sriov".into(), Share::Set(2));
        record
            .limits
            .insert("intel.com/sriov".into(), Share::Added(1));
        record.node_selector.insert("rack".into(), "r1".into());
        record.volume = true;
        record.mounts.insert("app".into());
        let text = record.to_text();
        assert_eq!(
            text,
            r#"{"requests":{"intel.com/sriov":{"set":2}},"limits":{"intel.com/sriov":{"added":1}},"nodeSelector":{"rack":"r1"},"volume":true,"mounts":["app"]}"#
        );
        assert_eq!(Record::parse(&text).unwrap(), record);
    }

    #[test]
    fn refuses_what_it_did_not_write() {
        for text in [
            "",
            "[]",
            r#"{"colour":1}"#,
            r#"{"requests":{"a":{"set":-1}}}"#,
        ] {
            assert!(Record::parse(text).is_err(), "{text}");
        }
    }
}

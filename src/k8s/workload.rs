//! Workload kinds: which resources carry a pod template, and where; the
//! annotations and labels of a pod template or an object's metadata.

use std::fmt;

use crate::yaml::{Map, Node, Style, Text, is_plain_safe};

/// A kind of resource that holds a pod template at a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadKind {
    group: String,
    kind: String,
    pointer: String,
    segments: Vec<String>,
}

/// The built-in kinds: (API group, kind, pod template pointer).
const BUILT_IN: &[(&str, &str, &str)] = &[
    ("", "Pod", ""),
    ("", "ReplicationController", "/spec/template"),
    ("apps", "Deployment", "/spec/template"),
    ("apps", "StatefulSet", "/spec/template"),
    ("apps", "DaemonSet", "/spec/template"),
    ("apps", "ReplicaSet", "/spec/template"),
    ("extensions", "Deployment", "/spec/template"),
    ("extensions", "DaemonSet", "/spec/template"),
    ("extensions", "ReplicaSet", "/spec/template"),
    ("batch", "Job", "/spec/template"),
    ("batch", "CronJob", "/spec/jobTemplate/spec/template"),
];

impl WorkloadKind {
    fn new(group: &str, kind: &str, pointer: &str) -> Result<Self, String> {
        let segments = parse_pointer(pointer).ok_or_else(|| {
            format!("podTemplatePath {pointer:?} is not a JSON pointer (like /spec/template)")
        })?;
        Ok(WorkloadKind {
            group: group.to_string(),
            kind: kind.to_string(),
            pointer: pointer.to_string(),
            segments,
        })
    }

    /// The Pod kind: the object is its own pod template.
    pub fn pod() -> Self {
        Self::new("", "Pod", "").expect("the empty pointer is valid")
    }

    /// A user-declared kind; `api_version` may carry a version, which is ignored.
    pub fn custom(api_version: &str, kind: &str, pointer: &str) -> Result<Self, String> {
        let group = crate::k8s::resource::group_of(api_version);
        if BUILT_IN.iter().any(|(g, k, _)| *g == group && *k == kind) {
            return Err(format!("{group}/{kind} is built in"));
        }
        Self::new(group, kind, pointer)
    }

    /// Whether both describe the same group and kind.
    pub fn same_kind(&self, other: &WorkloadKind) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    /// The pod template pointer as written.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// The dotted path of `field` of the pod template from the resource, as
    /// results name fields (`spec.template.metadata.annotations`); the
    /// template's own path when `field` is empty.
    pub fn field(&self, field: &str) -> String {
        let template = self.pointer.trim_start_matches('/').replace('/', ".");
        match (template.as_str(), field) {
            ("", field) => field.to_string(),
            (_, "") => template,
            (template, field) => format!("{template}.{field}"),
        }
    }

    /// The pod template of a resource of this kind: `Ok(None)` when the
    /// resource has none (an Argo Rollout with a `workloadRef`, say).
    pub fn pod_template_mut<'a>(&self, item: &'a mut Node) -> Result<Option<&'a mut Map>, String> {
        let mut node = item;
        for segment in &self.segments {
            let next = match node {
                Node::Map(map) => map.get_mut(segment),
                Node::Seq(seq) => segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| seq.items.get_mut(i)),
                Node::Scalar(_) => None,
            };
            match next {
                Some(n) if !n.is_null() => node = n,
                _ => return Ok(None),
            }
        }
        match node {
            Node::Map(map) => Ok(Some(map)),
            other => Err(format!(
                "pod template {} is {}, not a mapping",
                self.pointer,
                other.kind_name()
            )),
        }
    }
}

impl WorkloadKind {
    /// The pod template of a resource of this kind, read only (see
    /// [`WorkloadKind::pod_template_mut`]).
    pub fn pod_template<'a>(&self, item: &'a Node) -> Result<Option<&'a Map>, String> {
        let mut node = item;
        for segment in &self.segments {
            let next = match node {
                Node::Map(map) => map.get(segment),
                Node::Seq(seq) => segment.parse::<usize>().ok().and_then(|i| seq.items.get(i)),
                Node::Scalar(_) => None,
            };
            match next {
                Some(n) if !n.is_null() => node = n,
                _ => return Ok(None),
            }
        }
        match node {
            Node::Map(map) => Ok(Some(map)),
            other => Err(format!(
                "pod template {} is {}, not a mapping",
                self.pointer,
                other.kind_name()
            )),
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group, self.kind)
    }
}

/// The workload kinds in force: the built-in ones and the user's.
#[derive(Debug, Clone)]
pub struct WorkloadKinds {
    kinds: Vec<WorkloadKind>,
}

impl WorkloadKinds {
    /// The built-in kinds plus `custom`.
    pub fn new(custom: &[WorkloadKind]) -> Self {
        let mut kinds: Vec<WorkloadKind> = BUILT_IN
            .iter()
            .map(|(g, k, p)| WorkloadKind::new(g, k, p).expect("built-in pointers are valid"))
            .collect();
        kinds.extend(custom.iter().cloned());
        WorkloadKinds { kinds }
    }

    /// The kind entry for a resource's API group and kind.
    pub fn find(&self, group: &str, kind: &str) -> Option<&WorkloadKind> {
        self.kinds
            .iter()
            .find(|k| k.kind == kind && k.group == group)
    }
}

/// Splits a JSON pointer (RFC 6901) into its unescaped segments.
fn parse_pointer(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|s| {
            if s.is_empty() {
                return None;
            }
            let mut out = String::with_capacity(s.len());
            let mut chars = s.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    },
                    c => out.push(c),
                }
            }
            Some(out)
        })
        .collect()
}

// Pod templates and object metadata: read, set and remove annotations and labels.

/// The annotations of a pod template (`metadata.annotations`), if any.
pub fn template_annotations(template: &Map) -> Option<&Map> {
    template
        .get("metadata")?
        .as_map()?
        .get("annotations")?
        .as_map()
}

/// The labels of a pod template (`metadata.labels`), if any.
pub fn template_labels(template: &Map) -> Option<&Map> {
    template.get("metadata")?.as_map()?.get("labels")?.as_map()
}

/// Checks that `metadata`, when present, is a mapping, and its `annotations` too:
/// the rules write there.
pub(crate) fn metadata_is_a_map(object: &Map) -> Result<(), String> {
    match object.get("metadata") {
        Some(meta) if !meta.is_null() && meta.as_map().is_none() => {
            Err(format!("metadata is {}, not a mapping", meta.kind_name()))
        }
        Some(Node::Map(meta)) => match meta.get("annotations") {
            Some(a) if !a.is_null() && a.as_map().is_none() => Err(format!(
                "metadata.annotations is {}, not a mapping",
                a.kind_name()
            )),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Sets `metadata.annotations[key]` on an object or template, keeping the
/// value's style when it already exists, creating the maps when missing.
pub fn set_annotation(object: &mut Map, key: &str, value: impl Into<Text>) -> Result<(), String> {
    let value = value.into();
    let annotations = object
        .map_entry("metadata")
        .and_then(|m| m.map_entry("annotations"))
        .ok_or_else(|| "metadata.annotations is not a mapping".to_string())?;
    match annotations.get_mut(key) {
        Some(Node::Scalar(s)) if s.style != Style::Plain || is_plain_safe(&value) => {
            s.value = value;
        }
        _ => annotations.insert(key, Node::string(value)),
    }
    Ok(())
}

/// Removes `metadata.annotations[key]`, and the `annotations` and `metadata`
/// maps when that leaves them empty.
pub fn remove_annotation(object: &mut Map, key: &str) {
    let Some(meta) = object.get_mut("metadata").and_then(Node::as_map_mut) else {
        return;
    };
    let Some(annotations) = meta.get_mut("annotations").and_then(Node::as_map_mut) else {
        return;
    };
    if annotations.remove(key).is_none() {
        return;
    }
    if annotations.is_empty() {
        meta.remove("annotations");
        if meta.is_empty() {
            object.remove("metadata");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing: a workload whose `metadata.annotations` was a scalar made the
    /// rules panic when they recorded what they own there.
    #[test]
    fn metadata_and_its_annotations_must_be_mappings() {
        for (src, want) in [
            ("metadata: {annotations: {a: b}}", Ok(())),
            ("metadata: {annotations: null}", Ok(())),
            ("metadata: {name: x}", Ok(())),
            ("kind: Pod", Ok(())),
            ("metadata: x", Err("metadata is a scalar, not a mapping")),
            (
                "metadata: {annotations: \"a: b\"}",
                Err("metadata.annotations is a scalar, not a mapping"),
            ),
            (
                "metadata: {annotations: [a]}",
                Err("metadata.annotations is a sequence, not a mapping"),
            ),
        ] {
            let doc = crate::yaml::parse_document(src).unwrap();
            let got = metadata_is_a_map(doc.as_map().unwrap());
            assert_eq!(got, want.map_err(str::to_string), "{src}");
        }
    }
    use crate::yaml::parse_document;

    #[test]
    fn pointers() {
        for (p, want) in [
            ("", Some(vec![])),
            ("/spec/template", Some(vec!["spec", "template"])),
            ("/a~1b/c~0d", Some(vec!["a/b", "c~d"])),
            ("/list/0", Some(vec!["list", "0"])),
            ("spec", None),
            ("/a//b", None),
            ("/a~2", None),
        ] {
            let want = want.map(|v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(parse_pointer(p), want, "{p}");
        }
    }

    #[test]
    fn fields_under_the_template() {
        let kinds = WorkloadKinds::new(&[]);
        for (group, kind, field, want) in [
            (
                "apps",
                "Deployment",
                "metadata.annotations",
                "spec.template.metadata.annotations",
            ),
            (
                "batch",
                "CronJob",
                "spec.nodeSelector",
                "spec.jobTemplate.spec.template.spec.nodeSelector",
            ),
            ("apps", "Deployment", "", "spec.template"),
            ("", "Pod", "metadata.annotations", "metadata.annotations"),
            ("", "Pod", "", ""),
        ] {
            assert_eq!(
                kinds.find(group, kind).unwrap().field(field),
                want,
                "{kind} {field}"
            );
        }
    }

    #[test]
    fn finds_pod_templates() {
        let kinds = WorkloadKinds::new(&[WorkloadKind::custom(
            "argoproj.io/v1alpha1",
            "Rollout",
            "/spec/template",
        )
        .unwrap()]);
        let cases = [
            (
                "batch",
                "CronJob",
                "spec: {jobTemplate: {spec: {template: {metadata: {name: t}}}}}",
                Ok(Some("t")),
            ),
            (
                "apps",
                "Deployment",
                "spec: {template: {metadata: {name: t}}}",
                Ok(Some("t")),
            ),
            (
                "argoproj.io",
                "Rollout",
                "spec: {workloadRef: {name: x}}",
                Ok(None),
            ),
            ("", "Pod", "metadata: {name: t}", Ok(Some("t"))),
            ("apps", "Deployment", "spec: {template: [1]}", Err(())),
        ];
        for (group, kind, src, want) in cases {
            let mut item = parse_document(src).unwrap();
            let got = kinds
                .find(group, kind)
                .unwrap()
                .pod_template_mut(&mut item)
                .map(|t| {
                    t.and_then(|t| {
                        t.get("metadata")?
                            .as_map()?
                            .get_text("name")
                            .map(String::from)
                    })
                })
                .map_err(|_| ());
            assert_eq!(got, want.map(|w| w.map(String::from)), "{kind}");
        }
        assert!(kinds.find("apps", "Rollout").is_none());
        assert!(kinds.find("", "Service").is_none());
    }
}

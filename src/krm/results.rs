//! Function results: what changed and what is wrong, in the KRM `results` format.

use std::fmt;

use crate::k8s::resource::{FileRef, ResourceRef};
use crate::yaml::{Node, TextPosition};

/// How serious a result is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The output cannot be trusted; the process exits 1.
    Error,
    /// Something the user should look at.
    Warning,
    /// A change the function made.
    Info,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// `n noun`, with an `s` unless `n` is 1.
pub fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ if noun.ends_with("sh") => format!("{n} {noun}es"),
        _ => format!("{n} {noun}s"),
    }
}

/// The errors and warnings among `results`, for a summary: `1 error, 0 warnings`.
pub fn problems(results: &[FnResult]) -> String {
    let count = |severity| results.iter().filter(|r| r.severity == severity).count();
    format!(
        "{}, {}",
        plural(count(Severity::Error), "error"),
        plural(count(Severity::Warning), "warning")
    )
}

/// Where in its field's value (a text: a ConfigMap's JSON) a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// A line and column of the value, which is all the rules see.
    InValue(TextPosition),
    /// A line and column of the resource's file, whose lines are the
    /// value's (a literal block scalar).
    InFile(TextPosition),
    /// A line and column of the value, which starts at `line` of the file.
    InValueAt {
        /// Where in the value.
        at: TextPosition,
        /// The file's line the value starts at.
        line: usize,
    },
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnResult {
    /// How serious it is.
    pub severity: Severity,
    /// What happened, in one sentence.
    pub message: String,
    /// The resource it is about.
    pub resource: Option<ResourceRef>,
    /// The field it is about, as a dotted path.
    pub field: Option<String>,
    /// The file the resource lives in.
    pub file: Option<FileRef>,
    /// A mistake in the input that the render goes past (a warning) but
    /// that `diff`, the CI gate, refuses: a `linkerd.io/multus` value that
    /// is neither `enabled` nor `disabled`. Not part of the KRM result.
    pub fails_diff: bool,
    /// An info the user must act on (a meshed namespace whose pods are not attached): `render`
    /// prints it on stderr with the warnings, as kpt shows every result. Not part of the KRM
    /// result.
    pub to_act: bool,
    /// Where in the field's value the problem is; the message says it after
    /// [`FnResult::message`] ([`FnResult::text`]).
    pub position: Option<Position>,
}

impl FnResult {
    /// A result about no resource in particular.
    pub fn new(severity: Severity, message: impl Into<String>) -> Self {
        FnResult {
            severity,
            message: message.into(),
            resource: None,
            field: None,
            file: None,
            fails_diff: false,
            to_act: false,
            position: None,
        }
    }

    /// The message, with where in the value or the file the problem is.
    pub fn text(&self) -> String {
        let file = self.file.as_ref().map_or("the file", |f| f.path.as_str());
        match self.position {
            None => self.message.clone(),
            Some(Position::InValue(at)) => format!(
                "{} at line {} column {} of the value",
                self.message, at.line, at.column
            ),
            Some(Position::InFile(at)) => format!(
                "{} at line {} column {} of {file}",
                self.message, at.line, at.column
            ),
            Some(Position::InValueAt { at, line }) => format!(
                "{} at line {} column {} of the value, which starts at line {line} of {file}",
                self.message, at.line, at.column
            ),
        }
    }

    /// Attaches the resource and its file.
    pub fn on(mut self, resource: &ResourceRef, file: Option<&FileRef>) -> Self {
        self.resource = Some(resource.clone());
        self.file = file.cloned();
        self
    }

    /// Attaches a field path.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// The result as a KRM `results` entry.
    pub fn into_node(self) -> Node {
        let mut entries = Vec::with_capacity(5);
        entries.push(("message", Node::string(self.text())));
        entries.push(("severity", Node::plain(self.severity.as_str())));
        if let Some(r) = self.resource {
            let mut rr = Vec::with_capacity(4);
            rr.push(("apiVersion", Node::string(r.api_version)));
            rr.push(("kind", Node::string(r.kind)));
            rr.push(("name", Node::string(r.name)));
            if let Some(ns) = r.namespace {
                rr.push(("namespace", Node::string(ns)));
            }
            entries.push(("resourceRef", Node::mapping(rr)));
        }
        if let Some(field) = self.field {
            entries.push(("field", Node::mapping([("path", Node::string(field))])));
        }
        if let Some(file) = self.file {
            let mut f = vec![("path", Node::string(file.path))];
            if let Some(i) = file.index {
                f.push(("index", Node::plain(i.to_string())));
            }
            entries.push(("file", Node::mapping(f)));
        }
        Node::mapping(entries)
    }
}

impl fmt::Display for FnResult {
    /// One line: `severity: resource (file): message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.severity.as_str())?;
        if let Some(r) = &self.resource {
            write!(f, "{r}")?;
            if let Some(file) = &self.file {
                write!(f, " ({file})")?;
            }
            f.write_str(": ")?;
        }
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::emit_document;

    #[test]
    fn writes_the_krm_result_shape() {
        let r = ResourceRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            namespace: Some("demo".into()),
        };
        let file = FileRef {
            path: "apps/web.yaml".into(),
            index: Some(0),
        };
        let result = FnResult::new(Severity::Error, "bad")
            .on(&r, Some(&file))
            .field("metadata.annotations");
        assert_eq!(
            emit_document(&result.clone().into_node()),
            "message: bad\nseverity: error\nresourceRef:\n  apiVersion: apps/v1\n  kind: Deployment\n  name: web\n  namespace: demo\nfield:\n  path: metadata.annotations\nfile:\n  path: apps/web.yaml\n  index: 0\n"
        );
        assert_eq!(
            result.to_string(),
            "error: Deployment demo/web (apps/web.yaml): bad"
        );
    }
}

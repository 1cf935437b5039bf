//! Manifest files on disk or on stdin: what the plain renderer, `check` and the
//! Helm post-renderer read, and the YAML stream they write.
//!
//! Each resource read is tagged with the `config.kubernetes.io/path` and
//! `config.kubernetes.io/index` annotations kpt would give it, so results and
//! errors name the file and document, and generated NADs get a file; the
//! tags are removed again before anything is written.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::k8s::resource::{self, INDEX_ANNOTATIONS, NotAResource, PATH_ANNOTATIONS};
use crate::krm::results::{FnResult, Position};
use crate::yaml::{self, Map, Node, ParseError};

/// The file name kpt gives a package's own description; never a resource.
pub const KPTFILE: &str = "Kptfile";
/// How documents read from stdin are named in messages.
pub const STDIN: &str = "<stdin>";

/// Why manifests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path as the user gave it.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// A file is not valid YAML or JSON.
    #[error("{path}: not valid YAML: {source}")]
    Yaml {
        /// The file.
        path: String,
        /// Where and what.
        source: ParseError,
    },
    /// A document is not a Kubernetes object.
    #[error("{path} (document {}): not a Kubernetes object: {problem}", .index + 1)]
    NotAResource {
        /// The file.
        path: String,
        /// The document's position in the file, from 0 (shown from 1).
        index: usize,
        /// The missing or malformed field.
        problem: NotAResource,
    },
}

/// Where one input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file or a directory.
    Path(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl Input {
    /// Reads a command-line argument: `-` is stdin.
    pub fn from_arg(arg: &str) -> Self {
        if arg == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(arg))
        }
    }
}

/// Resources read from files, in a stable order.
#[derive(Debug, Default)]
pub struct Manifests {
    /// Each resource, tagged with its file and position.
    pub items: Vec<Node>,
    /// The directory the tagged paths are relative to, when there is one.
    pub root: Option<PathBuf>,
    /// Whether the tags are this reader's, to be removed on output. A stream
    /// whose resources already carry paths (`kpt fn source`) is left as it is.
    pub tagged: bool,
    /// Every file read, by tagged path, with the documents it held as written
    /// when asked to keep them (for diffs).
    pub files: BTreeMap<String, Vec<Node>>,
    /// Whether to keep the documents as written.
    originals: bool,
    /// The file of each item, while reading.
    sources: Vec<String>,
    /// The empty `annotations` (`{}`, `null`) written on items, by file and
    /// position: the tags fill them, and they come back as written.
    empty_annotations: BTreeMap<(String, usize), Node>,
}

impl Manifests {
    /// Reads the inputs; `stdin` supplies the text of `-`.
    ///
    /// Directories are walked in name order; hidden files and directories,
    /// Kptfiles and files that are neither YAML nor JSON are skipped. With one
    /// directory as the only input, paths are relative to it (as in a kpt
    /// package); otherwise they are as given. With `originals`, the documents
    /// of each file are also kept as written, for diffs.
    pub fn read(
        inputs: &[Input],
        originals: bool,
        mut stdin: impl FnMut() -> io::Result<String>,
    ) -> Result<Self, ReadError> {
        let root = match inputs {
            [Input::Path(p)] if p.is_dir() => Some(p.clone()),
            _ => None,
        };
        let mut manifests = Manifests {
            root: root.clone(),
            originals,
            ..Manifests::default()
        };
        for input in inputs {
            match input {
                Input::Stdin => {
                    let text = stdin().map_err(|source| ReadError::Io {
                        path: STDIN.into(),
                        source,
                    })?;
                    manifests.add(STDIN.into(), STDIN, &text)?;
                }
                Input::Path(path) => {
                    for file in files_under(path)? {
                        let tagged = match &root {
                            Some(root) => file.strip_prefix(root).unwrap_or(&file),
                            None => &file,
                        };
                        let text =
                            std::fs::read_to_string(&file).map_err(|source| ReadError::Io {
                                path: display(&file),
                                source,
                            })?;
                        manifests.add(display(tagged), &display(&file), &text)?;
                    }
                }
            }
        }
        manifests.tagged = !manifests
            .items
            .iter()
            .any(|i| resource::file_ref(i).is_some());
        if manifests.tagged {
            let mut next: BTreeMap<&str, usize> = BTreeMap::new();
            for (item, path) in manifests.items.iter_mut().zip(&manifests.sources) {
                let index = next.entry(path).or_default();
                if let Some(empty) = empty_annotations(item) {
                    manifests
                        .empty_annotations
                        .insert((path.clone(), *index), empty.clone());
                }
                tag(item, path, *index);
                *index += 1;
            }
        }
        Ok(manifests)
    }

    /// Adds the documents of one file: `path` is how it is tagged, `shown`
    /// how errors name it (as the user gave it).
    fn add(&mut self, path: String, shown: &str, text: &str) -> Result<(), ReadError> {
        let docs = yaml::parse_stream(text).map_err(|source| ReadError::Yaml {
            path: shown.to_string(),
            source,
        })?;
        let mut written = Vec::new();
        for (index, mut doc) in docs.into_iter().filter(|d| !d.is_null()).enumerate() {
            if doc.is_flow() {
                doc.into_yaml_style();
            }
            let not_a_resource = |problem| ReadError::NotAResource {
                path: shown.to_string(),
                index,
                problem,
            };
            for item in flatten_list(doc) {
                resource::resource_ref(&item).map_err(not_a_resource)?;
                // The reader tags resources in their annotations (found by fuzzing).
                if item
                    .get_path(&["metadata", "annotations"])
                    .is_some_and(|a| !a.is_null() && a.as_map().is_none())
                {
                    return Err(not_a_resource(NotAResource {
                        field: "metadata.annotations",
                        problem: "is not a mapping",
                    }));
                }
                if !is_package_file(&item) {
                    written.push(item);
                }
            }
        }
        self.sources
            .extend(std::iter::repeat_n(path.clone(), written.len()));
        let file = self.files.entry(path).or_default();
        if self.originals {
            file.extend(written.iter().cloned());
        }
        self.items.extend(written);
        Ok(())
    }

    /// Tags resources with the paths to show rather than paths relative to
    /// the root: for files read beside others that have their own root.
    pub fn without_root(mut self) -> Self {
        if let Some(root) = self.root.take() {
            for item in &mut self.items {
                if let Some((path, index)) = origin(item) {
                    tag(item, &display(&root.join(path)), index);
                }
            }
            self.files = std::mem::take(&mut self.files)
                .into_iter()
                .map(|(path, docs)| (display(&root.join(path)), docs))
                .collect();
            self.empty_annotations = std::mem::take(&mut self.empty_annotations)
                .into_iter()
                .map(|((path, index), node)| ((display(&root.join(path)), index), node))
                .collect();
        }
        self
    }

    /// Removes the tags [`Manifests::read`] and the core put on a resource.
    /// An `annotations` mapping this leaves empty goes too, unless the item
    /// was read with it empty: then it is written back as it was (`{}`, `null`).
    pub fn untag(&self, item: &mut Node) {
        let kept = origin(item).and_then(|o| self.empty_annotations.get(&o));
        let Some(metadata) = item.as_map_mut().and_then(|m| m.get_mut("metadata")) else {
            return;
        };
        let Some(metadata) = metadata.as_map_mut() else {
            return;
        };
        let Some(slot) = metadata.get_mut("annotations") else {
            return;
        };
        let Node::Map(annotations) = slot else {
            return;
        };
        for key in PATH_ANNOTATIONS.iter().chain(&INDEX_ANNOTATIONS) {
            annotations.remove(key);
        }
        if annotations.is_empty() {
            match kept {
                Some(empty) => *slot = empty.clone(),
                None => {
                    metadata.remove("annotations");
                }
            }
        }
    }

    /// Writes resources as one YAML stream, untagged, in the order given.
    pub fn to_stream<'a>(&self, items: impl IntoIterator<Item = &'a Node>) -> String {
        let untagged: Vec<Node> = items
            .into_iter()
            .map(|item| {
                let mut item = item.clone();
                self.untag(&mut item);
                item
            })
            .collect();
        yaml::emit_stream(&untagged)
    }

    /// Turns a result's position in its field's value into one in its file
    /// (shown as `result.file` names it), which is read again: the line and
    /// column when the value's lines are the file's, else the line the value
    /// starts at. Left as it is for stdin and for resources this reader did
    /// not tag.
    pub fn locate(&self, result: &mut FnResult) {
        let (Some(Position::InValue(at)), Some(file), Some(field)) =
            (result.position, &result.file, &result.field)
        else {
            return;
        };
        if !self.tagged || file.path == STDIN {
            return;
        }
        let Ok(text) = std::fs::read_to_string(&file.path) else {
            return;
        };
        let Ok(docs) = yaml::parse_stream(&text) else {
            return;
        };
        let index = file.index.map_or(0, |i| i as usize);
        let Some(&(document, list_item)) = places(&docs).get(index) else {
            return;
        };
        let path = match list_item {
            Some(item) => format!("items.{item}.{field}"),
            None => field.clone(),
        };
        if let Some(place) = yaml::locate(&text, document, &path) {
            result.position = Some(match place.in_file(at) {
                Some(in_file) => Position::InFile(in_file),
                None => Position::InValueAt {
                    at,
                    line: place.line,
                },
            });
        }
    }

    /// The path to show for a tagged path.
    pub fn display_path(&self, tagged: &str) -> String {
        match &self.root {
            Some(root) if tagged != STDIN => display(&root.join(tagged)),
            _ => tagged.to_string(),
        }
    }
}

/// The YAML and JSON files at a path: itself, or those under it.
fn files_under(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let io_error = |source| ReadError::Io {
        path: display(path),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io_error)?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let walk = walkdir::WalkDir::new(path)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walk {
        let entry = entry.map_err(|e| ReadError::Io {
            path: e.path().map_or_else(|| display(path), display),
            source: e.into(),
        })?;
        let name = entry.file_name().to_string_lossy();
        let manifest = name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json");
        if entry.file_type().is_file() && manifest && name != KPTFILE {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

/// A path with `/` separators and no leading `./`.
fn display(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    match text.strip_prefix("./") {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => text,
    }
}

/// A Kptfile or a Kustomization: describes the package, is never applied.
fn is_package_file(doc: &Node) -> bool {
    let Some(map) = doc.as_map() else {
        return false;
    };
    let api_version = map.get_text("apiVersion").unwrap_or_default();
    match map.get_text("kind") {
        Some(KPTFILE) => resource::group_of(api_version) == "kpt.dev",
        Some("Kustomization" | "Component") => {
            resource::group_of(api_version) == "kustomize.config.k8s.io"
        }
        _ => false,
    }
}

/// Where each resource [`Manifests::add`] reads from a file's documents is:
/// its document (from 0, empty ones counted) and its place in a `List`.
fn places(docs: &[Node]) -> Vec<(usize, Option<usize>)> {
    let mut places = Vec::new();
    for (document, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
        if !is_list(doc) {
            if !is_package_file(doc) {
                places.push((document, None));
            }
            continue;
        }
        let items = doc
            .as_map()
            .and_then(|m| m.get("items"))
            .and_then(Node::as_seq);
        for (i, item) in items.into_iter().flat_map(|s| s.items.iter().enumerate()) {
            if !is_package_file(item) {
                places.push((document, Some(i)));
            }
        }
    }
    places
}

/// Whether a document is a `List` (or any `*List` with items and no name).
fn is_list(doc: &Node) -> bool {
    doc.get_path(&["metadata", "name"]).is_none()
        && doc.as_map().is_some_and(|m| {
            m.get_text("kind").is_some_and(|k| k.ends_with("List"))
                && m.get("apiVersion").is_some()
                && m.get("items").and_then(Node::as_seq).is_some()
        })
}

/// The items of a `List` (or any `*List` with items and no name), else the
/// document itself.
fn flatten_list(doc: Node) -> Vec<Node> {
    if !is_list(&doc) {
        return vec![doc];
    }
    let Node::Map(map) = doc else { unreachable!() };
    map.entries
        .into_iter()
        .find_map(|(k, v)| match (k.as_str(), v) {
            (Some("items"), Node::Seq(seq)) => Some(seq.items),
            _ => None,
        })
        .unwrap_or_default()
}

/// Tags a resource with its file and position.
fn tag(item: &mut Node, path: &str, index: usize) {
    let map = item.as_map_mut().expect("checked to be a resource");
    let annotations = map
        .map_entry("metadata")
        .and_then(|m| m.map_entry("annotations"))
        .expect("checked to be a resource");
    annotations.insert(PATH_ANNOTATIONS[1], Node::string(path));
    annotations.insert(INDEX_ANNOTATIONS[1], Node::string(index.to_string()));
}

/// An empty `metadata.annotations` (`{}` or a null) as written on an item.
fn empty_annotations(item: &Node) -> Option<&Node> {
    let annotations = item.get_path(&["metadata", "annotations"])?;
    let empty = annotations.is_null() || annotations.as_map().is_some_and(Map::is_empty);
    empty.then_some(annotations)
}

/// The tagged file and position of a resource.
pub fn origin(item: &Node) -> Option<(String, usize)> {
    let file = resource::file_ref(item)?;
    Some((file.path, file.index.unwrap_or(0) as usize))
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Path(p) => f.write_str(&display(p)),
            Input::Stdin => f.write_str(STDIN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Manifests, ReadError> {
        Manifests::read(&[Input::Stdin], false, || Ok(text.to_string()))
    }

    #[test]
    fn tags_each_document_and_untags_on_output() {
        let src = "# Source: web/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# Source: web/templates/empty.yaml\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\", \"annotations\": {\"x\": \"1\"}}}\n";
        let m = read_text(src).unwrap();
        assert_eq!(m.items.len(), 2);
        assert_eq!(origin(&m.items[1]), Some((STDIN.to_string(), 1)));
        assert_eq!(
            m.to_stream(&m.items),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations:\n    x: \"1\"\n"
        );
    }

    #[test]
    fn empty_annotations_come_back_as_written() {
        let src = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations: null\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n";
        let m = read_text(src).unwrap();
        assert_eq!(m.to_stream(&m.items), src);
        // Emptied by the function: it goes.
        let mut m = read_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    x: y\n",
        )
        .unwrap();
        let item = m.items[0].as_map_mut().unwrap();
        crate::k8s::workload::remove_annotation(item, "x");
        assert_eq!(
            m.to_stream(&m.items),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        );
    }

    #[test]
    fn flattens_lists_and_skips_package_files() {
        let src = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n---\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata: {name: pkg}\n---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata: {name: k}\n";
        let m = read_text(src).unwrap();
        let kinds: Vec<_> = m
            .items
            .iter()
            .map(|i| resource::resource_ref(i).unwrap().to_string())
            .collect();
        assert_eq!(kinds, ["ConfigMap a", "Secret b"]);
    }

    #[test]
    fn errors_name_the_file_and_document() {
        let cases = [
            ("a: [1", "<stdin>: not valid YAML: line 2 column 1:"),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Secret\nmetadata: {name: b}\n",
                "<stdin> (document 2): not a Kubernetes object: apiVersion:",
            ),
            (
                "apiVersion: v1\nkind: List\nitems:\n- {kind: Secret}\n",
                "<stdin> (document 1): not a Kubernetes object: apiVersion:",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    a/b \"x\"\n",
                "<stdin> (document 1): not a Kubernetes object: metadata.annotations: is not a mapping",
            ),
            (
                "- 1\n- 2\n",
                "<stdin> (document 1): not a Kubernetes object: item:",
            ),
        ];
        for (src, want) in cases {
            let err = read_text(src).unwrap_err().to_string();
            assert!(err.starts_with(want), "{src:?}: {err}");
        }
    }

    #[test]
    fn walks_directories_in_order_skipping_hidden_and_kptfiles() {
        let dir = tempfile::tempdir().unwrap();
        let write = |p: &str, text: &str| {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        let cm =
            |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n");
        write("b/two.yaml", &cm("two"));
        write(
            "a.json",
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"one\"}}",
        );
        write(".git/config.yaml", "not: [valid");
        write(".hidden.yaml", "not: [valid");
        write(
            "Kptfile",
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata: {name: p}\n",
        );
        write("notes.txt", "hello");
        write("b/c.yml", &cm("three"));
        let m = Manifests::read(
            &[Input::Path(dir.path().to_path_buf())],
            false,
            || unreachable!(),
        )
        .unwrap();
        let seen: Vec<_> = m.items.iter().map(|i| origin(i).unwrap().0).collect();
        assert_eq!(seen, ["a.json", "b/c.yml", "b/two.yaml"]);
        assert_eq!(
            m.display_path("b/c.yml"),
            display(&dir.path().join("b/c.yml"))
        );
        let missing = Manifests::read(
            &[Input::Path(dir.path().join("nope"))],
            false,
            || unreachable!(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            missing.ends_with("nope: No such file or directory (os error 2)"),
            "{missing}"
        );
    }
}

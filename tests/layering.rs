//! The shape of `src/`: no file over 600 lines, and the layering that
//! docs/code-map.md draws: each top-level
//! module (a file or a folder of `src/`) is in one layer and imports only the
//! layers below it, never one beside it: the rule sets do not import one
//! another, and neither do the fronts (the webhook and the NAD controller run
//! in one process, which the command line wires); no two modules import each
//! other, directly or around a circle. The layers below the rule sets do not
//! name them either, not even in a message or a comment.
//!
//! The imports are read from the text: every `crate::` path (with `use
//! crate::{a, b::c}` groups), every `super::` path that climbs out of its
//! top-level module, and the binary's `linkerd_multus::` paths. Comment lines
//! do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom first, and the top-level modules in each.
const LAYERS: &[(&str, &[&str])] = &[
    ("the work meter", &["work"]),
    ("the YAML tree", &["yaml"]),
    ("the Kubernetes vocabulary", &["k8s"]),
    ("the KRM protocol and Multus", &["krm", "multus"]),
    (
        "the rule sets",
        &["linkerd_cni", "network_resources", "validation"],
    ),
    (
        "the settings pipeline and admission",
        &["pipeline", "admission"],
    ),
    (
        "the cluster fronts",
        &["webhook", "controller", "extension"],
    ),
    ("the command line", &["commands"]),
    ("the binary", &["main"]),
];

/// The layers below the rule sets, which must not name them.
const BELOW_THE_RULE_SETS: &[&str] = &["work", "yaml", "k8s", "krm", "multus"];

/// How the rule sets are named: their modules and the kinds of their settings.
const RULE_SET_NAMES: &[&str] = &[
    "linkerd_cni",
    "network_resources",
    "validation::",
    "LinkerdMultus",
    "NetworkResources",
    "Validation",
];

/// A module path below `crate`: `["k8s", "networks"]`; the crate root is empty.
type Module = Vec<String>;

/// One import: where it is, what it says, and the module it reaches.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    line: usize,
    text: String,
    from: Module,
    to: Module,
}

impl Import {
    fn at(&self) -> String {
        format!("{}:{}: `{}`", self.file, self.line, self.text)
    }
}

#[test]
fn src_is_layered_without_circles() {
    let files = src_files();
    let problems = check(&files);
    assert!(
        problems.is_empty(),
        "the layering of src/ is broken (see docs/code-map.md):\n{}",
        problems.join("\n")
    );
}

/// The most lines a file of `src/` may have: a reader finds a concept in the file named after
/// it, and a file past this holds more than one.
const MOST_LINES: usize = 600;

#[test]
fn no_src_file_is_over_600_lines() {
    let long: Vec<String> = src_files()
        .iter()
        .map(|(path, text)| (path, text.lines().count()))
        .filter(|(_, lines)| *lines > MOST_LINES)
        .map(|(path, lines)| format!("{path}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files of src/ over {MOST_LINES} lines; move a concept of each to a module named after it:\n{}",
        long.join("\n")
    );
}

/// The benchmarks are crates of their own (`benches/NAME.rs`,
/// `benches/NAME/main.rs`), sharing files by `#[path]`: no two of a crate's
/// modules import each other, directly or around a circle.
#[test]
fn benches_have_no_circles() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(manifest.join(path)).ok();
    let mut roots = Vec::new();
    for entry in std::fs::read_dir(manifest.join("benches")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() && path.join("main.rs").is_file() {
            roots.push(format!("benches/{name}/main.rs"));
        } else if name.ends_with(".rs") {
            roots.push(format!("benches/{name}"));
        }
    }
    roots.sort();
    assert!(roots.len() > 5, "benches/ was not found: {roots:?}");
    let mut problems = Vec::new();
    for root in &roots {
        let files = crate_files(root, &read);
        assert!(files.len() > 1, "{root}: its modules were not found");
        problems.extend(crate_circles(root, &files));
    }
    assert!(
        problems.is_empty(),
        "a benchmark's modules import each other; move what both need to a module of its own:\n{}",
        problems.join("\n")
    );
}

/// The benchmarks' check follows `mod` and `#[path]` and finds a circle
/// between two files, and one around a shared file, naming each import.
#[test]
fn the_bench_check_names_a_circle() {
    let tree: BTreeMap<&str, &str> = [
        (
            "benches/web/main.rs",
            "#[path = \"../common/mod.rs\"]\n#[allow(dead_code)]\nmod common;\nmod load;\nmod requests;\nuse load::run;\n",
        ),
        ("benches/web/load.rs", "use crate::requests::judge;\nuse super::PATH;\n"),
        ("benches/web/requests.rs", "use crate::load::Target;\n"),
        ("benches/common/mod.rs", "pub mod audit;\n"),
        ("benches/common/audit.rs", "use crate::common::x;\n"),
        ("benches/fine.rs", "mod load;\n"),
        ("benches/load.rs", "use crate::common::Tally;\n"),
    ]
    .into();
    let read = |path: &str| tree.get(path).map(|text| text.to_string());
    let files = crate_files("benches/web/main.rs", &read);
    let modules: Vec<String> = files
        .iter()
        .map(|(path, m, _)| format!("{path} {}", m.join("::")))
        .collect();
    assert_eq!(
        modules,
        [
            "benches/web/main.rs ",
            "benches/common/mod.rs common",
            "benches/common/audit.rs common::audit",
            "benches/web/load.rs load",
            "benches/web/requests.rs requests",
        ]
    );
    assert_eq!(
        crate_circles("benches/web/main.rs", &files),
        [
            "benches/web/main.rs: a circle: load -> requests -> load (benches/web/load.rs:1: `crate::requests::judge`; benches/web/requests.rs:1: `crate::load::Target`)"
        ]
    );
    let fine = crate_files("benches/fine.rs", &read);
    assert_eq!(fine.len(), 2);
    assert!(crate_circles("benches/fine.rs", &fine).is_empty());
}

/// The files of the crate whose root is `root`, each with its module (the
/// root's is empty) and text, following `mod name;` and `#[path = "..."]`
/// as rustc does; a file that cannot be read is left out.
fn crate_files(root: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<(String, Module, String)> {
    let mut files = Vec::new();
    let mut todo = vec![(root.to_string(), Module::new(), true)];
    while let Some((path, module, mod_rs)) = todo.pop() {
        let Some(text) = read(&path) else {
            continue;
        };
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        let stem = path.rsplit('/').next().unwrap().trim_end_matches(".rs");
        let mut attribute_path: Option<String> = None;
        let mut children = Vec::new();
        for line in text.lines() {
            if line.starts_with(char::is_whitespace) {
                continue;
            }
            if let Some(rest) = line.strip_prefix("#[path = \"") {
                attribute_path = rest.strip_suffix("\"]").map(str::to_string);
                continue;
            }
            if line.starts_with("#[") {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [.., "mod", name] = words.as_slice()
                && let Some(name) = name.strip_suffix(';')
            {
                let mut child = module.clone();
                child.push(name.to_string());
                let (file, child_mod_rs) = match attribute_path.take() {
                    Some(at) => (normalize(&format!("{dir}/{at}")), true),
                    None if mod_rs => {
                        let flat = format!("{dir}/{name}.rs");
                        if read(&flat).is_some() {
                            (flat, false)
                        } else {
                            (format!("{dir}/{name}/mod.rs"), true)
                        }
                    }
                    None => (format!("{dir}/{stem}/{name}.rs"), false),
                };
                children.push((file, child, child_mod_rs));
            }
            attribute_path = None;
        }
        files.push((path, module, text));
        todo.extend(children.into_iter().rev());
    }
    files
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// The circles among the modules of one crate, each naming the crate.
fn crate_circles(root: &str, files: &[(String, Module, String)]) -> Vec<String> {
    let modules: BTreeSet<Module> = files.iter().map(|(_, module, _)| module.clone()).collect();
    let imports: Vec<Import> = files
        .iter()
        .flat_map(|(path, module, text)| imports_of(path, module.clone(), text, &modules))
        .collect();
    let mut graph: Graph = BTreeMap::new();
    for import in &imports {
        if let (Some(from), Some(to)) = (import.from.first(), import.to.first())
            && from != to
        {
            graph
                .entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_insert_with(|| import.clone());
        }
    }
    find_circle(&graph)
        .map(|c| describe("a circle", &c))
        .into_iter()
        .chain(inner_circle(&imports))
        .map(|problem| format!("{root}: {problem}"))
        .collect()
}

/// The checker finds what it must, naming the file and line.
#[test]
fn the_check_names_each_offending_import() {
    let files = [
        ("src/lib.rs", "pub mod k8s;\npub mod linkerd_cni;\n"),
        ("src/yaml/mod.rs", ""),
        ("src/k8s/mod.rs", "pub mod resource;\n"),
        (
            "src/k8s/resource.rs",
            "use crate::{\n    yaml::Node,\n    linkerd_cni::attach,\n};\n",
        ),
        (
            "src/linkerd_cni/mod.rs",
            "// use crate::validation;\nmod tests {\n    use super::super::validation::x;\n}\n",
        ),
        (
            "src/linkerd_cni/attach.rs",
            "fn f() { crate::k8s::resource::g() }\n",
        ),
        ("src/validation/mod.rs", "use crate::pipeline::run;\n"),
        ("src/pipeline.rs", "use crate::commands::Outcome;\n"),
        ("src/commands/mod.rs", "use crate::webhook;\n"),
        ("src/webhook/mod.rs", "use crate::controller::run;\n"),
        ("src/controller/mod.rs", ""),
        ("src/stray.rs", ""),
    ]
    .map(|(path, text)| (path.to_string(), text.to_string()));
    let problems = check(&files);
    let expect = [
        "src/k8s/resource.rs:3: `crate::{yaml::Node, linkerd_cni::attach}`: k8s (the Kubernetes vocabulary) imports linkerd_cni (the rule sets)",
        "src/linkerd_cni/mod.rs:3: `super::super::validation::x`: linkerd_cni (the rule sets) imports validation (the rule sets)",
        "src/validation/mod.rs:1: `crate::pipeline::run`: validation (the rule sets) imports pipeline (the settings pipeline and admission)",
        "src/pipeline.rs:1: `crate::commands::Outcome`: pipeline (the settings pipeline and admission) imports commands (the command line)",
        "src/webhook/mod.rs:1: `crate::controller::run`: webhook (the cluster fronts) imports controller (the cluster fronts)",
        "src/stray.rs: the top-level module stray is in no layer",
        "a circle: k8s -> linkerd_cni -> k8s",
    ];
    for want in expect {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "missing {want:?} in:\n{}",
            problems.join("\n")
        );
    }
    assert_eq!(problems.len(), expect.len(), "{}", problems.join("\n"));
}

#[test]
fn the_lower_layers_do_not_name_a_rule_set() {
    let files = read_tree(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")));
    let problems = rule_set_names(&files);
    assert!(
        problems.is_empty(),
        "a layer below the rule sets names one; say what it needs in its own terms (a kind, a phrase the caller gives):\n{}",
        problems.join("\n")
    );
}

/// The check finds a kind in a comment and a module in a path, not a word
/// that only contains a name.
#[test]
fn the_name_check_names_the_line() {
    let files = [
        (
            "src/krm/mod.rs",
            "//! Reads a LinkerdMultus.\nconst X: &str = \"MyValidation\";\n",
        ),
        ("src/multus/nad.rs", "use crate::linkerd_cni::settings;\n"),
        ("src/linkerd_cni/mod.rs", "//! LinkerdMultus\n"),
    ]
    .map(|(path, text)| (path.to_string(), text.to_string()));
    assert_eq!(
        rule_set_names(&files),
        [
            "src/krm/mod.rs:1: names LinkerdMultus: `//! Reads a LinkerdMultus.`",
            "src/multus/nad.rs:1: names linkerd_cni: `use crate::linkerd_cni::settings;`",
        ]
    );
}

/// Each line of a layer below the rule sets that names one.
fn rule_set_names(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files {
        let module = module_of(path);
        if !module
            .first()
            .is_some_and(|top| BELOW_THE_RULE_SETS.contains(&top.as_str()))
        {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            for name in RULE_SET_NAMES {
                let named = line.match_indices(name).any(|(at, _)| {
                    let before = line[..at].chars().next_back();
                    let after = line[at + name.len()..].chars().next();
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(before) && (name.ends_with("::") || !word(after))
                });
                if named {
                    problems.push(format!("{path}:{}: names {name}: `{}`", n + 1, line.trim()));
                }
            }
        }
    }
    problems
}

/// The files of this crate's `src/`, each with its text.
fn src_files() -> Vec<(String, String)> {
    let files = read_tree(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")));
    assert!(
        files.len() > 20,
        "src/ was not found: {} files",
        files.len()
    );
    files
}

/// Every `.rs` file below `src`, as `src/...` paths and their text.
fn read_tree(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().display().to_string();
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((format!("src/{}", rel.replace('\\', "/")), text));
            }
        }
    }
    files.sort();
    files
}

/// Every problem of the tree, one line each.
fn check(files: &[(String, String)]) -> Vec<String> {
    let modules: BTreeSet<Module> = files.iter().map(|(path, _)| module_of(path)).collect();
    let layer_of = |top: &str| LAYERS.iter().position(|(_, mods)| mods.contains(&top));
    let mut problems = Vec::new();
    let mut tops: BTreeSet<String> = BTreeSet::new();
    for (path, _) in files {
        if let Some(top) = module_of(path).into_iter().next()
            && layer_of(&top).is_none()
            && tops.insert(top.clone())
        {
            problems.push(format!(
                "{path}: the top-level module {top} is in no layer; add it to LAYERS in tests/layering.rs and to docs/code-map.md"
            ));
        }
    }
    let imports: Vec<Import> = files
        .iter()
        .flat_map(|(path, text)| imports(path, text, &modules))
        .collect();
    let mut graph: Graph = BTreeMap::new();
    for import in &imports {
        let (Some(from), Some(to)) = (import.from.first(), import.to.first()) else {
            continue;
        };
        if from == to {
            continue;
        }
        graph
            .entry(from.clone())
            .or_default()
            .entry(to.clone())
            .or_insert_with(|| import.clone());
        let (Some(a), Some(b)) = (layer_of(from), layer_of(to)) else {
            continue;
        };
        if b >= a {
            problems.push(format!(
                "{}: {from} ({}) imports {to} ({})",
                import.at(),
                LAYERS[a].0,
                LAYERS[b].0
            ));
        }
    }
    problems.extend(find_circle(&graph).map(|c| describe("a circle", &c)));
    problems.extend(inner_circle(&imports));
    problems
}

/// Within a top-level module, a file may use its ancestors' items and its
/// descendants, but files must not import each other around a circle.
fn inner_circle(imports: &[Import]) -> Option<String> {
    let mut inner: Graph = BTreeMap::new();
    for import in imports {
        let related = import.to.starts_with(&import.from) || import.from.starts_with(&import.to);
        if !related && import.to.first() == import.from.first() {
            inner
                .entry(import.from.join("::"))
                .or_default()
                .entry(import.to.join("::"))
                .or_insert_with(|| import.clone());
        }
    }
    find_circle(&inner).map(|c| describe("a circle between files", &c))
}

/// The module a file is: `src/k8s/networks/mod.rs` is `k8s::networks`.
fn module_of(path: &str) -> Module {
    let rel = path.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Module = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

/// The imports of one file of `src/` that reach another module.
fn imports(path: &str, text: &str, modules: &BTreeSet<Module>) -> Vec<Import> {
    imports_of(path, module_of(path), text, modules)
}

/// The imports of the file at `path`, which is the module `file_module`.
fn imports_of(
    path: &str,
    file_module: Module,
    text: &str,
    modules: &BTreeSet<Module>,
) -> Vec<Import> {
    let lines: Vec<&str> = text.lines().collect();
    // The inline modules (`mod tests {`) open at each line, for `super::`.
    let mut inline: Vec<Vec<String>> = Vec::with_capacity(lines.len());
    let mut open: Vec<(usize, String)> = Vec::new();
    for line in &lines {
        let indent = line.len() - line.trim_start().len();
        if open
            .last()
            .is_some_and(|(i, _)| *i == indent && line.trim() == "}")
        {
            open.pop();
        }
        inline.push(open.iter().map(|(_, name)| name.clone()).collect());
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [.., "mod", name, "{"] = words.as_slice() {
            open.push((indent, name.to_string()));
        }
    }
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut found = Vec::new();
    for prefix in ["crate::", "super::", "linkerd_multus::"] {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | ':')) {
                continue;
            }
            let line = starts.partition_point(|&s| s <= at) - 1;
            if lines[line].trim_start().starts_with("//") {
                continue;
            }
            let (base, rest) = match prefix {
                "super::" => {
                    let mut here = file_module.clone();
                    here.extend(inline[line].iter().cloned());
                    let mut rest = &text[at..];
                    while let Some(r) = rest.strip_prefix("super::") {
                        here.pop();
                        rest = r;
                    }
                    (here, rest)
                }
                _ if prefix == "linkerd_multus::" && file_module != ["main"] => continue,
                _ => (Vec::new(), &text[at + prefix.len()..]),
            };
            let (paths, len) = paths(rest);
            let offset = text.len() - rest.len();
            let written = text[at..offset + len]
                .split_whitespace()
                .collect::<Vec<_>>();
            let written = written.join(" ").replace("{ ", "{").replace(", }", "}");
            for (item, segments) in paths {
                let mut full = base.clone();
                full.extend(segments);
                let to = (0..=full.len())
                    .rev()
                    .map(|n| full[..n].to_vec())
                    .find(|m| modules.contains(m))
                    .unwrap_or_default();
                found.push(Import {
                    file: path.to_string(),
                    line: starts.partition_point(|&s| s <= offset + item),
                    text: written.clone(),
                    from: file_module.clone(),
                    to,
                });
            }
        }
    }
    found
}

/// The paths at the start of `rest` (after `crate::`): one `a::b::c`, or the
/// first segment of each item of a `{...}` group, each with its offset in
/// `rest`; and how many bytes they take.
fn paths(rest: &str) -> (Vec<(usize, Vec<String>)>, usize) {
    let ident = |s: &str| {
        s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut close = group.len();
        for (i, c) in group.char_indices() {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth == 0 {
                close = i;
                break;
            }
        }
        let mut items = Vec::new();
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in group[..close].char_indices().chain([(close, ',')]) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    let raw = &group[start..i];
                    let item = raw.trim_start();
                    let first = &item[..ident(item)];
                    if !first.is_empty() {
                        let at = 1 + start + raw.len() - item.len();
                        items.push((
                            at,
                            if first == "self" {
                                vec![]
                            } else {
                                vec![first.to_string()]
                            },
                        ));
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        return (items, close + 2);
    }
    let mut segments = Vec::new();
    let mut len = 0;
    loop {
        let n = ident(&rest[len..]);
        if n == 0 {
            break;
        }
        segments.push(rest[len..len + n].to_string());
        len += n;
        match rest[len..].strip_prefix("::") {
            Some(next) if next.starts_with(|c: char| c.is_alphanumeric() || c == '_') => len += 2,
            _ => break,
        }
    }
    (vec![(0, segments)], len)
}

/// Modules, each with the modules it imports and the first import of each.
type Graph = BTreeMap<String, BTreeMap<String, Import>>;

/// A circle of `graph`, as each module on it and its import of the next.
fn find_circle(graph: &Graph) -> Option<Vec<(String, Import)>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<(String, Import)>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            let steps = circle.windows(2);
            return Some(
                steps
                    .map(|w| (w[0].clone(), graph[&w[0]][&w[1]].clone()))
                    .collect(),
            );
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// A circle as one line: `a -> b -> a`, then where each import is.
fn describe(what: &str, circle: &[(String, Import)]) -> String {
    let names: Vec<&str> = circle.iter().map(|(name, _)| name.as_str()).collect();
    let sites: Vec<String> = circle.iter().map(|(_, import)| import.at()).collect();
    format!(
        "{what}: {} -> {} ({})",
        names.join(" -> "),
        names[0],
        sites.join("; ")
    )
}

//! Golden tests: every directory under `testdata/golden/` holds an `input.yaml` (a
//! ResourceList as kpt sends it) and `expected.yaml` (the exact expected stdout), optionally
//! `expected-exit` (default 0) and `expected-stderr-first-line`.
//!
//! Besides the byte comparison, every case is checked for determinism and idempotence, and
//! for invariants that hold whatever the golden files say (so regenerating them with
//! `UPDATE_GOLDEN=1` cannot silently record a bug): exit code versus error results,
//! pass-through of everything the function does not own, no dangling NAD references,
//! well-formed generated NADs and ownership records.
//!
//! `UPDATE_GOLDEN=1 cargo test --test suite golden::` rewrites the expected files from the binary's
//! current behaviour (`GOLDEN_CASE=a,b` limits it to some cases); read every changed file before committing it (`git diff testdata`).
//! Some expected files were corrected by hand where the binary disagreed with the contract:
//! an update must not silently undo those corrections.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::golden::{self, read};
use common::*;

mod decisions;
mod invariants;
mod output;
mod settings;

fn golden_dir() -> PathBuf {
    repo_path("testdata/golden")
}

fn case_dirs() -> Vec<PathBuf> {
    golden::case_dirs(&golden_dir(), 30)
}

fn for_each_case(f: impl Fn(&Path) -> Vec<String> + Sync) {
    golden::for_each_case(&case_dirs(), f)
}

fn input_of(case: &str) -> String {
    read(&golden_dir().join(case), "input.yaml").unwrap_or_else(|| panic!("no case {case}"))
}

/// Runs `f` on every case in parallel and fails with every collected problem.
/// The exact comparison with the golden files (or their update).
#[test]
fn golden_outputs_match() {
    golden::outputs_match(&case_dirs());
}

/// Same input twice: byte-identical output. Output fed back: byte-identical items and
/// functionConfig, and stable from then on (whole stdout identical on the third run).
#[test]
fn deterministic_and_idempotent() {
    golden::deterministic_and_idempotent(&case_dirs());
}

/// A setting of a case, from its functionConfig.
fn setting<'a>(resource_list: &'a Yaml, key: &str) -> Option<&'a str> {
    let fc = resource_list.get("functionConfig")?;
    fc.str_at(&["spec", key])
        .or_else(|| fc.str_at(&["data", key]))
}

/// The name of the NAD in a case (from its functionConfig, else the default).
fn nad_name(resource_list: &Yaml) -> String {
    setting(resource_list, "nadName")
        .unwrap_or("linkerd-cni")
        .to_string()
}

fn workload_meta_path(item: &Yaml, resource_list: &Yaml) -> Option<Vec<String>> {
    let kind = item.str_at(&["kind"])?;
    let api = item.str_at(&["apiVersion"]).unwrap_or("");
    if let Some(p) = pod_metadata_path(kind) {
        // Built-in kinds only in their real API groups.
        let group = api.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let ok = match kind {
            "Pod" | "ReplicationController" => group.is_empty(),
            "Job" | "CronJob" => group == "batch",
            _ => group == "apps",
        };
        return ok.then(|| p.iter().map(|s| s.to_string()).collect());
    }
    // Custom kinds declared in settings.
    let group = |a: &str| {
        a.rsplit_once('/')
            .map(|(g, _)| g.to_string())
            .unwrap_or_default()
    };
    custom_kinds(resource_list)
        .into_iter()
        .find(|(g, k, _)| k == kind && *g == group(api))
        .map(|(_, _, p)| p)
}

/// `(API group, kind, pod template metadata path)` of the kinds declared in `workloadKinds`,
/// from a typed functionConfig or a ConfigMap holding JSON or YAML text.
fn custom_kinds(resource_list: &Yaml) -> Vec<(String, String, Vec<String>)> {
    let Some(fc) = resource_list.get("functionConfig") else {
        return Vec::new();
    };
    let declared: Vec<(String, String, String)> = if let Some(k) = fc.at(&["spec", "workloadKinds"])
    {
        k.seq()
            .iter()
            .map(|k| {
                let s = |key: &str| k.str_at(&[key]).unwrap_or("").to_string();
                (s("apiVersion"), s("kind"), s("podTemplatePath"))
            })
            .collect()
    } else if let Some(text) = fc.str_at(&["data", "workloadKinds"]) {
        let parsed = parse_yaml(text).unwrap_or(Yaml::Seq(Vec::new()));
        parsed
            .seq()
            .iter()
            .map(|k| {
                let s = |key: &str| k.str_at(&[key]).unwrap_or("").to_string();
                (s("apiVersion"), s("kind"), s("podTemplatePath"))
            })
            .collect()
    } else {
        Vec::new()
    };
    declared
        .into_iter()
        .map(|(api, kind, pointer)| {
            let group = api
                .rsplit_once('/')
                .map(|(g, _)| g.to_string())
                .unwrap_or_default();
            let mut path: Vec<String> = pointer
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            path.push("metadata".into());
            (group, kind, path)
        })
        .collect()
}

fn template_annotation<'a>(item: &'a Yaml, resource_list: &Yaml, key: &str) -> Option<&'a str> {
    let path = workload_meta_path(item, resource_list)?;
    let mut p: Vec<&str> = path.iter().map(String::as_str).collect();
    p.push("annotations");
    p.push(key);
    item.str_at(&p)
}

/// The config-rollout stamp of a workload's pod template.
const CONFIG_HASH: &str = "multus.linkerd.io/config-hash";

// ------------------------------------------------------------------------------------------
// Semantic checks of single cases, independent of the golden files.

struct Rendered {
    run: Run,
    rl: Yaml,
}

impl Rendered {
    fn of(case: &str) -> Self {
        let run = common::run(input_of(case).as_bytes());
        assert!(!run.panicked(), "{case}: crashed: {}", run.stderr);
        let rl = parse_yaml(&run.stdout)
            .unwrap_or_else(|e| panic!("{case}: stdout does not parse: {e}\n{}", run.stdout));
        Rendered { run, rl }
    }

    fn items(&self) -> Vec<Yaml> {
        items_of(&self.rl)
    }

    fn item(&self, kind: &str, ns: &str, name: &str) -> Yaml {
        self.items()
            .into_iter()
            .find(|i| i.id() == (kind.into(), ns.into(), name.into()))
            .unwrap_or_else(|| panic!("no {kind} {ns}/{name} in output"))
    }

    /// Namespaces holding a generated NAD.
    fn nads(&self) -> BTreeSet<String> {
        self.items()
            .iter()
            .filter(|i| is_generated_nad(i))
            .map(|i| i.id().1)
            .collect()
    }

    /// Workloads (kind/ns/name) whose networks annotation selects `nad` in their namespace.
    fn attached(&self, nad: &str) -> BTreeSet<String> {
        self.items()
            .iter()
            .filter(|i| {
                let ns = i.id().1;
                template_annotation(i, &self.rl, "k8s.v1.cni.cncf.io/networks")
                    .and_then(|v| parse_networks(v).ok())
                    .is_some_and(|s| {
                        s.iter().any(|(sns, sname, _)| {
                            sname == nad && sns.as_deref().unwrap_or(&ns) == ns
                        })
                    })
            })
            .map(|i| {
                let (k, n, m) = i.id();
                format!("{k} {n}/{m}")
            })
            .collect()
    }

    fn proxy_uid(&self, kind: &str, ns: &str, name: &str) -> Option<String> {
        let item = self.item(kind, ns, name);
        template_annotation(&item, &self.rl, "config.linkerd.io/proxy-uid").map(str::to_string)
    }

    fn messages(&self, severity: &str) -> Vec<String> {
        results_of(&self.rl)
            .iter()
            .filter(|r| r.str_at(&["severity"]) == Some(severity))
            .map(|r| r.str_at(&["message"]).unwrap_or("").to_string())
            .collect()
    }

    /// Results of `severity` whose resourceRef names `kind` `name`.
    fn results_for(&self, severity: &str, kind: &str, name: &str) -> usize {
        results_of(&self.rl)
            .iter()
            .filter(|r| {
                r.str_at(&["severity"]) == Some(severity)
                    && r.str_at(&["resourceRef", "kind"]) == Some(kind)
                    && r.str_at(&["resourceRef", "name"]) == Some(name)
            })
            .count()
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

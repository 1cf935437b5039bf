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

fn has_path_annotations(items: &[Yaml]) -> bool {
    items
        .iter()
        .any(|i| i.annotation("config.kubernetes.io/path").is_some())
}

/// Invariants that must hold for every case, whatever its golden file says.
fn invariants(input: &str, got: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    if got.code != 0 && got.code != 1 {
        problems.push(format!("exit code {} is neither 0 nor 1", got.code));
        return problems;
    }
    let rl_in = match parse_yaml(input) {
        Ok(y) => y,
        Err(e) => return vec![format!("input.yaml does not parse: {e}")],
    };
    let rl = match parse_yaml(&got.stdout) {
        Ok(y) => y,
        Err(e) => return vec![format!("stdout does not parse: {e}")],
    };
    // Shape of the ResourceList.
    let keys = rl.keys();
    let mut want = vec!["apiVersion", "kind", "items"];
    if rl_in.get("functionConfig").is_some() {
        want.push("functionConfig");
    }
    let mut want_with_results = want.clone();
    want_with_results.push("results");
    if keys != want && keys != want_with_results {
        problems.push(format!(
            "top-level keys {keys:?}, expected {want_with_results:?}"
        ));
    }
    if rl.str_at(&["apiVersion"]) != Some("config.kubernetes.io/v1")
        || rl.str_at(&["kind"]) != Some("ResourceList")
    {
        problems.push("output is not a config.kubernetes.io/v1 ResourceList".into());
    }
    if let (Some(a), Some(b)) = (rl_in.get("functionConfig"), rl.get("functionConfig"))
        && let Some(d) = tree_difference(a, b, "functionConfig")
    {
        problems.push(format!("functionConfig changed: {d}"));
    }
    // Exit code versus results.
    let results = results_of(&rl);
    let errors = results
        .iter()
        .filter(|r| r.str_at(&["severity"]) == Some("error"))
        .count();
    if (got.code == 1) != (errors > 0) {
        problems.push(format!(
            "exit code {} but {errors} error result(s)",
            got.code
        ));
    }
    if got.code == 1 && !got.stderr_first_line().starts_with("error: ") {
        problems.push(format!(
            "exit 1 but stderr does not start with `error: `: {:?}",
            got.stderr_first_line()
        ));
    }
    for (i, r) in results.iter().enumerate() {
        let sev = r.str_at(&["severity"]).unwrap_or("");
        if !["info", "warning", "error"].contains(&sev) {
            problems.push(format!("result {i} has severity {sev:?}"));
        }
        if r.str_at(&["message"]).is_none_or(str::is_empty) {
            problems.push(format!("result {i} has no message"));
        }
        if i == 0 {
            if sev != "info" || r.get("resourceRef").is_some() {
                problems.push("first result is not an info summary without resourceRef".into());
            }
        } else if r.get("resourceRef").is_none() {
            // Issue rule 8: every change and every problem names its resource.
            problems.push(format!(
                "{sev} result {i} without resourceRef: {:?}",
                r.str_at(&["message"]).unwrap_or("")
            ));
        }
    }
    if !results.is_empty() {
        // A summary must stay readable: one line, short.
        let summary = results[0].str_at(&["message"]).unwrap_or("");
        if summary.len() > 300 || summary.contains('\n') {
            problems.push(format!("summary is not one short line: {summary:?}"));
        }
    }

    // Pass-through: everything but generated NADs and the function's own keys is unchanged,
    // in the same order.
    let items_in = items_of(&rl_in);
    let items_out = items_of(&rl);
    let rest_in: Vec<&Yaml> = items_in.iter().filter(|i| !is_generated_nad(i)).collect();
    let rest_out: Vec<&Yaml> = items_out.iter().filter(|i| !is_generated_nad(i)).collect();
    if rest_in.len() != rest_out.len() {
        problems.push(format!(
            "{} items other than generated NADs in, {} out",
            rest_in.len(),
            rest_out.len()
        ));
    } else {
        for (i, (a, b)) in rest_in.iter().zip(&rest_out).enumerate() {
            let (a, b) = (without_function_keys(a), without_function_keys(b));
            if let Some(d) = tree_difference(&a, &b, &format!("item {i}")) {
                problems.push(format!("changed beyond the function's keys: {d}"));
            }
        }
    }

    // Every change is a result naming the changed resource (issue rule 8).
    let refs: BTreeSet<(String, String, String)> = results
        .iter()
        .filter_map(|r| {
            let get = |k: &str| r.str_at(&["resourceRef", k]).unwrap_or("").to_string();
            r.get("resourceRef")
                .map(|_| (get("kind"), get("namespace"), get("name")))
        })
        .collect();
    if rest_in.len() == rest_out.len() {
        for (a, b) in rest_in.iter().zip(&rest_out) {
            if tree_difference(a, b, "").is_some() && !refs.contains(&b.id()) {
                let (k, n, m) = b.id();
                problems.push(format!("{k} {n}/{m} changed but no result names it"));
            }
        }
    }
    let generated_in: Vec<&Yaml> = items_in.iter().filter(|i| is_generated_nad(i)).collect();
    let generated_out: Vec<&Yaml> = items_out.iter().filter(|i| is_generated_nad(i)).collect();
    for nad in &generated_out {
        let same = generated_in
            .iter()
            .any(|i| i.id() == nad.id() && tree_difference(i, nad, "").is_none());
        if !same && !refs.contains(&nad.id()) {
            problems.push(format!(
                "NAD {:?} generated or changed without a result",
                nad.id()
            ));
        }
    }
    for nad in &generated_in {
        if !generated_out.iter().any(|o| o.id() == nad.id()) && !refs.contains(&nad.id()) {
            problems.push(format!("NAD {:?} removed without a result", nad.id()));
        }
    }

    // Generated NADs.
    let nad = nad_name(&rl_in);
    let paths = has_path_annotations(&items_in);
    let mut nad_namespaces = BTreeSet::new();
    for item in &items_out {
        if item.str_at(&["kind"]) != Some("NetworkAttachmentDefinition") {
            continue;
        }
        if item.str_at(&["metadata", "name"]) == Some(nad.as_str()) {
            nad_namespaces.insert(item.id().1);
        }
        if !is_generated_nad(item) {
            continue;
        }
        let (_, ns, name) = item.id();
        let what = format!("generated NAD {ns}/{name}");
        if item.str_at(&["apiVersion"]) != Some("k8s.cni.cncf.io/v1") {
            problems.push(format!("{what}: wrong apiVersion"));
        }
        if name != nad {
            problems.push(format!("{what}: name is not {nad}"));
        }
        match item.at(&["spec", "config"]) {
            Some(Yaml::Scalar {
                value,
                style: saphyr_parser::ScalarStyle::Literal,
                ..
            }) => match serde_json::from_str::<serde_json::Value>(value) {
                Ok(json) => {
                    let pretty = serde_json::to_string_pretty(&json).unwrap();
                    if value.trim_end() != pretty {
                        problems.push(format!(
                            "{what}: spec.config is not 2-space pretty-printed JSON"
                        ));
                    }
                    if json.get("policy").is_some() {
                        problems.push(format!("{what}: config keeps the policy object"));
                    }
                    if json.get("cniVersion").and_then(|v| v.as_str()).is_none() {
                        problems.push(format!("{what}: config has no cniVersion"));
                    }
                    if let Some(p) = find_placeholder(value) {
                        problems.push(format!("{what}: config holds placeholder {p}"));
                    }
                }
                Err(e) => problems.push(format!("{what}: spec.config is not JSON: {e}")),
            },
            _ => problems.push(format!(
                "{what}: spec.config missing or not a literal block"
            )),
        }
        if paths != item.annotation("config.kubernetes.io/path").is_some() {
            problems.push(format!(
                "{what}: path annotation present = {}, input items carry paths = {paths}",
                !paths
            ));
        }
        if paths {
            let want_file = if ns.is_empty() {
                format!("networkattachmentdefinition_{nad}.yaml")
            } else {
                format!("networkattachmentdefinition_{ns}_{nad}.yaml")
            };
            for key in [
                "config.kubernetes.io/path",
                "internal.config.kubernetes.io/path",
            ] {
                let p = item.annotation(key).unwrap_or("");
                if p.rsplit('/').next() != Some(want_file.as_str()) {
                    problems.push(format!(
                        "{what}: {key} is {p:?}, file should be {want_file}"
                    ));
                }
            }
            for key in [
                "config.kubernetes.io/index",
                "internal.config.kubernetes.io/index",
            ] {
                if item.annotation(key).is_none() {
                    problems.push(format!("{what}: no {key}"));
                }
            }
        }
    }

    // Workloads: well-formed ownership records, no dangling references, never twice.
    let default_namespace = setting(&rl_in, "defaultNamespace").unwrap_or("");
    for (idx, item) in items_out.iter().enumerate() {
        let (kind, ns, name) = item.id();
        let what = format!("{kind} {ns}/{name}");
        let ns = if ns.is_empty() {
            default_namespace.to_string()
        } else {
            ns
        };
        if let Some(owned) = item.annotation("multus.linkerd.io/owned")
            && !owned.split(',').all(|part| {
                part == "network=created"
                    || part == "network=appended"
                    || part
                        .strip_prefix("proxy-uid=")
                        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            })
        {
            problems.push(format!("{what}: malformed owned annotation {owned:?}"));
        }
        if got.code == 0
            && let Some(hash) = template_annotation(item, &rl_in, CONFIG_HASH)
        {
            let config = items_out
                .iter()
                .filter(|i| {
                    i.str_at(&["kind"]) == Some("NetworkAttachmentDefinition")
                        && i.str_at(&["metadata", "name"]) == Some(nad.as_str())
                })
                .find(|i| {
                    let nad_ns = i.id().1;
                    (if nad_ns.is_empty() {
                        default_namespace
                    } else {
                        &nad_ns
                    }) == ns
                })
                .and_then(|i| i.str_at(&["spec", "config"]));
            problems.extend(config_hash_problems(item, &rl_in, &nad, &ns, hash, config));
        }
        let Some(networks) = template_annotation(item, &rl_in, "k8s.v1.cni.cncf.io/networks")
        else {
            continue;
        };
        let Ok(selections) = parse_networks(networks) else {
            continue; // an error case; checked by the golden file
        };
        let refs = selections
            .iter()
            .filter(|(sns, sname, _)| *sname == nad && sns.as_deref().unwrap_or(&ns) == ns)
            .count();
        if refs > 0 && got.code == 0 && !nad_namespaces.contains(&ns) {
            problems.push(format!(
                "{what} references NAD {nad} but no such NAD is in namespace {ns:?}"
            ));
        }
        let refs_in = items_in
            .iter()
            .find(|i| {
                i.id() == item.id() && i.str_at(&["apiVersion"]) == item.str_at(&["apiVersion"])
            })
            .and_then(|i| template_annotation(i, &rl_in, "k8s.v1.cni.cncf.io/networks"))
            .and_then(|v| parse_networks(v).ok())
            .map(|s| {
                s.iter()
                    .filter(|(sns, sname, _)| *sname == nad && sns.as_deref().unwrap_or(&ns) == ns)
                    .count()
            })
            .unwrap_or(0);
        if refs > refs_in.max(1) {
            problems.push(format!(
                "item {idx} {what}: {nad} attached {refs} times: {networks:?}"
            ));
        }
    }
    problems
}

/// The config-rollout stamp of a workload's pod template.
const CONFIG_HASH: &str = "multus.linkerd.io/config-hash";

/// A config-hash stamp is only on attached pod templates the `configRollout` setting selects,
/// and is the first 16 hex characters of the SHA-256 of the exact `spec.config` of the NAD in
/// the workload's namespace.
fn config_hash_problems(
    item: &Yaml,
    resource_list: &Yaml,
    nad: &str,
    ns: &str,
    hash: &str,
    config: Option<&str>,
) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let (kind, _, name) = item.id();
    let what = format!("{kind} {ns}/{name}");
    let mut problems = Vec::new();
    let mode = setting(resource_list, "configRollout").unwrap_or("off");
    let label = workload_meta_path(item, resource_list).and_then(|path| {
        let mut p: Vec<&str> = path.iter().map(String::as_str).collect();
        p.extend(["labels", "config.linkerd.io/reconcile"]);
        item.str_at(&p).map(str::to_string)
    });
    match mode {
        "all" => {}
        "labelled" if label.as_deref() == Some("auto") => {}
        _ => problems.push(format!(
            "{what}: {CONFIG_HASH} with configRollout {mode} and reconcile label {label:?}"
        )),
    }
    let attached = template_annotation(item, resource_list, "k8s.v1.cni.cncf.io/networks")
        .and_then(|v| parse_networks(v).ok())
        .is_some_and(|s| {
            s.iter()
                .any(|(sns, sname, _)| sname == nad && sns.as_deref().unwrap_or(ns) == ns)
        });
    if !attached {
        problems.push(format!(
            "{what}: {CONFIG_HASH} on a workload not attached to {nad}"
        ));
    }
    match config {
        Some(config) => {
            let digest = Sha256::digest(config.as_bytes());
            let want: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            if hash != want {
                problems.push(format!(
                    "{what}: {CONFIG_HASH} is {hash}, the NAD config in {ns:?} hashes to {want}"
                ));
            }
        }
        None => problems.push(format!(
            "{what}: {CONFIG_HASH} but no NAD config in namespace {ns:?}"
        )),
    }
    problems
}

/// The first `__UPPER_CASE__` placeholder in `text`.
fn find_placeholder(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(start) = rest.find("__") {
        let after = &rest[start + 2..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
            .count();
        let word = &after[..len];
        if let Some(stem) = word.strip_suffix("__")
            && !stem.is_empty()
            && stem.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        {
            return Some(&rest[start..start + 2 + len]);
        }
        rest = &rest[start + 2..];
    }
    None
}

#[test]
fn invariants_hold_for_every_case() {
    for_each_case(|dir| {
        let input = read(dir, "input.yaml").unwrap();
        let got = run(input.as_bytes());
        if got.panicked() {
            return vec![format!("binary crashed:\n{}", got.stderr)];
        }
        let mut problems = invariants(&input, &got);
        // The same invariants on the second render of successful cases.
        if got.code == 0 {
            let again = run(got.stdout.as_bytes());
            for p in invariants(&got.stdout, &again) {
                problems.push(format!("second render: {p}"));
            }
        }
        problems
    });
}

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

/// Which namespaces get a NAD and which workloads get attached, per case: the decision rules
/// of the original webhook (DOMAIN.md section 1) and the rule 3.
#[test]
fn attachment_decisions() {
    let table: &[(&str, &[&str], &[&str])] = &[
        ("e2e-namespace-plain", &[], &[]),
        (
            "e2e-namespace-enabled",
            &["test-ns-1", "test-ns-2"],
            &["Pod test-ns-2/test-pod", "Deployment test-ns-2/ingress"],
        ),
        ("e2e-namespace-disabled", &[], &[]),
        ("e2e-annotation-removed", &[], &[]),
        ("pod-own-annotations", &["apps"], &["Pod apps/attached"]),
        (
            "pod-empty-annotations",
            &["demo"],
            &["Pod demo/empty-values"],
        ),
        (
            "pod-overrides-namespace",
            &["demo", "meshed", "multus"],
            &[
                "Pod demo/inject-ingress",
                "Deployment meshed/opt-in",
                "Deployment multus/opt-in",
            ],
        ),
        (
            "control-plane",
            &["linkerd"],
            &[
                "Deployment linkerd/linkerd-destination",
                "Deployment linkerd/linkerd-identity",
                "Deployment linkerd/linkerd-proxy-injector",
                "CronJob linkerd/linkerd-heartbeat",
            ],
        ),
        (
            "control-plane-no-namespace",
            &["linkerd"],
            &["Deployment linkerd/linkerd-destination"],
        ),
        ("control-plane-namespace-only", &["linkerd"], &[]),
        (
            "networks-comma",
            &["demo"],
            &[
                "Deployment demo/spaces",
                "Deployment demo/tight",
                "Deployment demo/present",
                "Deployment demo/present-spaced",
                "Deployment demo/own-ns",
                "Deployment demo/iface",
                "Pod demo/single",
            ],
        ),
        (
            "networks-json",
            &["demo"],
            &[
                "Deployment demo/json",
                "Deployment demo/json-compact",
                "Deployment demo/json-present",
                "Pod demo/json-own-ns",
                "Deployment demo/json-multiline",
            ],
        ),
        (
            "networks-empty-values",
            &["demo"],
            &[
                "Deployment demo/empty",
                "Deployment demo/blank",
                "Deployment demo/empty-json",
                "Deployment demo/twice",
            ],
        ),
        (
            "workload-kinds",
            &["demo"],
            &[
                "Pod demo/pod",
                "Deployment demo/deployment",
                "StatefulSet demo/statefulset",
                "DaemonSet demo/daemonset",
                "ReplicaSet demo/replicaset",
                "ReplicationController demo/replicationcontroller",
                "Job demo/job",
                "CronJob demo/cronjob",
            ],
        ),
        (
            "workload-kinds-custom",
            &["demo"],
            &["Rollout demo/canary", "CloneSet demo/clone"],
        ),
        ("user-nad", &[], &["Deployment demo/web"]),
        ("user-reference", &["plain"], &["Deployment plain/manual"]),
        (
            "settings-namespaces",
            &["team-a", "team-b"],
            &["Deployment team-a/api", "Deployment team-b/api"],
        ),
        ("unknown-namespace", &["ghost"], &["Deployment ghost/self"]),
        ("workload-without-namespace", &[""], &["Deployment /app"]),
        ("no-configmap-needed", &[], &[]),
        (
            "no-path-annotations",
            &["demo", "other"],
            &["Deployment demo/web", "Pod other/standalone"],
        ),
        ("rerender-disabled", &[], &[]),
        ("rerender-annotation-removed", &[], &[]),
        (
            "rerender-user-reference",
            &["demo"],
            &["Deployment demo/manual-ref"],
        ),
        (
            "rerender-still-enabled",
            &["demo"],
            &[
                "Deployment demo/web",
                "StatefulSet demo/worker",
                "Deployment demo/json",
                "Pod demo/manual",
                "Deployment demo/own-uid",
            ],
        ),
        (
            "rerender-config-changed",
            &["demo"],
            &[
                "Deployment demo/web",
                "StatefulSet demo/worker",
                "Deployment demo/json",
                "Pod demo/manual",
                "Deployment demo/own-uid",
            ],
        ),
    ];
    let mut problems = Vec::new();
    for (case, nads, attached) in table {
        let r = Rendered::of(case);
        if r.run.code != 0 {
            problems.push(format!("{case}: exit {}: {}", r.run.code, r.run.stderr));
            continue;
        }
        if r.nads() != set(nads) {
            problems.push(format!(
                "{case}: generated NADs in {:?}, expected {:?}",
                r.nads(),
                set(nads)
            ));
        }
        let nad = nad_name(&r.rl);
        if r.attached(&nad) != set(attached) {
            problems.push(format!(
                "{case}: attached {:?}, expected {:?}",
                r.attached(&nad),
                set(attached)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The NAD config of every Linkerd generation: every field kept, `policy` dropped, the
/// kubeconfig path filled in, `cniVersion` added.
#[test]
fn generations_keep_every_field() {
    for generation in ["stable-2.11", "edge-24.5", "version-2.18", "version-2.19"] {
        let case = format!("generation-{}", generation.replace('.', "-"));
        // The fixture as kpt sent it, taken from the case input.
        let input = parse_yaml(&input_of(&case)).unwrap();
        let source = items_of(&input)
            .iter()
            .find(|i| {
                i.id()
                    == (
                        "ConfigMap".into(),
                        "linkerd-cni".into(),
                        "linkerd-cni-config".into(),
                    )
            })
            .and_then(|i| i.str_at(&["data", "cni_network_config"]))
            .expect("CNI ConfigMap in the case input")
            .to_string();
        let mut want: serde_json::Value = serde_json::from_str(&source).unwrap();
        let obj = want.as_object_mut().unwrap();
        obj.remove("policy");
        obj.insert("cniVersion".into(), "0.3.0".into());
        obj["kubernetes"]["kubeconfig"] = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into();

        let r = Rendered::of(&case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni");
        assert_eq!(
            nad.str_at(&["metadata", "labels", MANAGED_BY]),
            Some("linkerd-multus"),
            "{case}: NAD not labelled as generated"
        );
        let got: serde_json::Value =
            serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
        assert_eq!(got, want, "{case}: NAD config");
        assert_eq!(
            r.attached("linkerd-cni"),
            set(&["Deployment demo/web"]),
            "{case}"
        );
    }
}

/// A hand-tuned CNI config: its own cniVersion and net dir, every extra field kept.
#[test]
fn custom_cni_config_is_kept() {
    let r = Rendered::of("cni-config-custom");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni");
    let got: serde_json::Value =
        serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
    assert_eq!(
        got["cniVersion"], "1.0.0",
        "cniVersion given by the CNI JSON wins"
    );
    assert_eq!(
        got["kubernetes"]["kubeconfig"], "/var/lib/cni/net.d/ZZZ-linkerd-cni-kubeconfig",
        "kubeconfig path follows dest_cni_net_dir"
    );
    let l = &got["linkerd"];
    assert_eq!(l["proxy-gid"], 2103);
    assert_eq!(l["iptables-mode"], "plain");
    assert_eq!(l["ipv6"], true);
    assert_eq!(l["use-wait-flag"], true);
    assert_eq!(
        l["inbound-ports-to-ignore"],
        serde_json::json!(["4191", "4190", "4567-4570"])
    );
    assert_eq!(
        l["subnets-to-ignore"],
        serde_json::json!(["10.0.0.0/8", "fd00::/8"])
    );
    assert_eq!(
        l["x-vendor"],
        serde_json::json!({"note": "café \"quoted\"", "list": [1, -2, true, null]})
    );
    assert_eq!(got["log_level"], "debug");
}

#[test]
fn openshift_proxy_uid() {
    let r = Rendered::of("openshift-uid-range");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.proxy_uid("Deployment", "demo", "web").as_deref(),
        Some("1000002102")
    );
    assert_eq!(
        r.proxy_uid("Pod", "demo", "pod").as_deref(),
        Some("1000002102")
    );
    assert_eq!(
        r.proxy_uid("Deployment", "demo", "own-uid").as_deref(),
        Some("2102"),
        "a workload's own proxy-uid is kept"
    );
    let own = r.item("Deployment", "demo", "own-uid");
    assert!(
        !own.annotation("multus.linkerd.io/owned")
            .unwrap_or("")
            .contains("proxy-uid"),
        "the user's proxy-uid is not recorded as owned"
    );
    let web = r.item("Deployment", "demo", "web");
    let owned = web.annotation("multus.linkerd.io/owned").unwrap_or("");
    assert!(
        owned.split(',').any(|p| p == "proxy-uid=1000002102")
            && owned.split(',').any(|p| p == "network=created"),
        "owned annotation of web: {owned:?}"
    );
    for ns in ["broken", "overflow"] {
        assert_eq!(r.proxy_uid("Deployment", ns, "web"), None, "{ns}");
        assert!(
            r.attached("linkerd-cni")
                .contains(&format!("Deployment {ns}/web")),
            "{ns}: a malformed range does not stop the attachment"
        );
    }
    for (ns, range) in [("broken", "1000000000"), ("overflow", "abc/10000")] {
        let named = results_of(&r.rl).iter().any(|res| {
            res.str_at(&["severity"]) == Some("warning")
                && res.str_at(&["message"]).is_some_and(|m| m.contains(range))
                && (res.str_at(&["resourceRef", "name"]) == Some(ns)
                    || res.str_at(&["resourceRef", "namespace"]) == Some(ns))
        });
        assert!(
            named,
            "no warning about the malformed range {range} on namespace {ns} or its workloads:\n{}",
            r.messages("warning").join("\n")
        );
    }
    // The proxy-uid is a quoted string (a plain number would not be a valid annotation).
    let text = &r.run.stdout;
    assert!(
        text.contains("config.linkerd.io/proxy-uid: \"1000002102\"")
            || text.contains("config.linkerd.io/proxy-uid: '1000002102'"),
        "proxy-uid not written as a quoted string"
    );
}

#[test]
fn control_plane_gets_no_proxy_uid() {
    let r = Rendered::of("control-plane");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    for name in [
        "linkerd-destination",
        "linkerd-identity",
        "linkerd-proxy-injector",
    ] {
        assert_eq!(r.proxy_uid("Deployment", "linkerd", name), None, "{name}");
    }
    assert_eq!(r.proxy_uid("CronJob", "linkerd", "linkerd-heartbeat"), None);
    // The CronJob's pod template is under jobTemplate.
    let hb = r.item("CronJob", "linkerd", "linkerd-heartbeat");
    assert_eq!(
        hb.str_at(&[
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/networks"
        ]),
        Some("linkerd-cni")
    );
}

#[test]
fn networks_annotation_forms() {
    let r = Rendered::of("networks-comma");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let nets = |kind: &str, name: &str| {
        let item = r.item(kind, "demo", name);
        template_annotation(&item, &r.rl, "k8s.v1.cni.cncf.io/networks")
            .unwrap()
            .to_string()
    };
    // The user's entries come first, unchanged, in their own form.
    assert!(nets("Deployment", "spaces").starts_with("a, other/b@net2,"));
    assert!(nets("Deployment", "tight").starts_with("a,b,"));
    assert_eq!(nets("Deployment", "present"), "a,linkerd-cni");
    assert_eq!(nets("Deployment", "present-spaced"), "a, linkerd-cni");
    assert_eq!(nets("Deployment", "own-ns"), "demo/linkerd-cni");
    assert_eq!(nets("Deployment", "iface"), "linkerd-cni@eth9");
    assert!(nets("Pod", "single").starts_with("macvlan-conf,"));
    for (kind, name) in [("Deployment", "present"), ("Deployment", "own-ns")] {
        assert_eq!(
            r.item(kind, "demo", name)
                .annotation("multus.linkerd.io/owned"),
            None,
            "{name}: nothing added, nothing owned"
        );
    }
    assert!(
        r.item("Deployment", "demo", "spaces")
            .annotation("multus.linkerd.io/owned")
            .unwrap_or("")
            .contains("network=appended")
    );

    let r = Rendered::of("networks-json");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let json = |kind: &str, name: &str| -> serde_json::Value {
        let item = r.item(kind, "demo", name);
        let text = template_annotation(&item, &r.rl, "k8s.v1.cni.cncf.io/networks").unwrap();
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}: {text}"))
    };
    assert_eq!(
        json("Deployment", "json"),
        serde_json::json!([
            {"name": "a"},
            {"name": "b", "namespace": "other", "interface": "net2",
             "ips": ["10.1.1.7/24"], "cni-args": {"mode": "fast"}},
            {"name": "linkerd-cni"}
        ])
    );
    assert_eq!(
        json("Deployment", "json-compact"),
        serde_json::json!([
            {"name": "sriov", "mac": "02:00:00:00:00:01", "x-unknown": 1},
            {"name": "linkerd-cni"}
        ])
    );
    assert_eq!(
        json("Deployment", "json-present"),
        serde_json::json!([{"name": "a"}, {"name": "linkerd-cni"}])
    );
    assert_eq!(
        json("Pod", "json-own-ns"),
        serde_json::json!([{"name": "linkerd-cni", "namespace": "demo"}])
    );
    assert_eq!(
        json("Deployment", "json-multiline"),
        serde_json::json!([
            {"name": "bridge", "default-route": ["10.0.0.1"]},
            {"name": "linkerd-cni"}
        ])
    );
}

/// Config rollouts: which pod templates carry the hash of their NAD's config (the invariants
/// check each value against the NAD in the workload's namespace), and what a changed ConfigMap
/// changes.
#[test]
fn config_rollout_stamps() {
    let stamped = |r: &Rendered| -> BTreeMap<String, String> {
        r.items()
            .iter()
            .filter_map(|i| {
                let hash = template_annotation(i, &r.rl, CONFIG_HASH)?;
                let (k, n, m) = i.id();
                Some((format!("{k} {n}/{m}"), hash.to_string()))
            })
            .collect()
    };
    let demo = [
        "Deployment demo/web",
        "Deployment demo/api",
        "StatefulSet demo/worker",
        "CronJob demo/report",
    ];
    let table: &[(&str, &[&str])] = &[
        ("rollout-all", &demo),
        (
            "rollout-labelled",
            &["Deployment demo/web", "StatefulSet demo/worker"],
        ),
        (
            "rollout-config-changed",
            &[&demo[..], &["Deployment team/app"]].concat(),
        ),
        ("rollout-off-removes", &[]),
        (
            "rollout-user-nad",
            &["Deployment demo/web", "Deployment other/api"],
        ),
        // configRollout defaults to off.
        ("rerender-still-enabled", &[]),
    ];
    for (case, want) in table {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let got: BTreeSet<String> = stamped(&r).into_keys().collect();
        assert_eq!(got, set(want), "{case}: stamped workloads");
    }

    // A user's NAD and a generated one have different configs: different hashes.
    let hashes = stamped(&Rendered::of("rollout-user-nad"));
    assert_ne!(
        hashes["Deployment demo/web"],
        hashes["Deployment other/api"]
    );

    // A changed ConfigMap: the generated NAD and the hashes of exactly the workloads attached
    // through it change; the workload on the user's NAD and the unattached ones do not.
    let case = "rollout-config-changed";
    let before = parse_yaml(&input_of(case)).unwrap();
    let r = Rendered::of(case);
    let changed: BTreeSet<String> = items_of(&before)
        .iter()
        .zip(r.items())
        .filter(|(a, b)| tree_difference(a, b, "").is_some())
        .map(|(_, b)| {
            let (k, n, m) = b.id();
            format!("{k} {n}/{m}")
        })
        .collect();
    let mut want = set(&demo);
    want.insert("NetworkAttachmentDefinition demo/linkerd-cni".into());
    assert_eq!(changed, want, "{case}: changed items");
    let old: BTreeMap<String, String> = items_of(&before)
        .iter()
        .filter_map(|i| {
            let hash = template_annotation(i, &before, CONFIG_HASH)?;
            let (k, n, m) = i.id();
            Some((format!("{k} {n}/{m}"), hash.to_string()))
        })
        .collect();
    let new = stamped(&r);
    for w in demo {
        assert_ne!(old[w], new[w], "{case}: {w} keeps its hash");
    }
    assert_eq!(old["Deployment team/app"], new["Deployment team/app"]);
}

#[test]
fn user_owned_nads() {
    let r = Rendered::of("user-nad");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    // Kept byte-identical: compare the item's text in input and output.
    let input = input_of("user-nad");
    let block = |text: &str| -> String {
        let start = text
            .find("- # Hand-written NAD")
            .or_else(|| text.find("- apiVersion: k8s.cni.cncf.io/v1"))
            .expect("user NAD in text");
        let rest = &text[start + 2..];
        let end = rest.find("\n- ").unwrap_or(rest.len());
        rest[..end].to_string()
    };
    let nad_in = block(&input);
    assert!(
        r.run.stdout.contains(
            "config: '{\"cniVersion\": \"0.3.1\", \"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"/etc/kubernetes/cni.kubeconfig\"}}'"
        ),
        "user NAD config not kept verbatim"
    );
    assert!(nad_in.contains("nodeSelector"));
    assert!(
        r.results_for("warning", "NetworkAttachmentDefinition", "linkerd-cni") >= 1,
        "no warning on the differing user NAD: {:?}",
        r.messages("warning")
    );

    let r = Rendered::of("user-reference");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert!(
        r.messages("warning").iter().any(|m| m.contains("plain")),
        "no warning that only a user-written reference keeps the NAD in plain: {:?}",
        r.messages("warning")
    );
    let manual = r.item("Deployment", "plain", "manual");
    assert_eq!(
        manual.annotation("multus.linkerd.io/owned"),
        None,
        "the user's reference is not the function's"
    );
}

#[test]
fn settings_change_every_key() {
    for case in ["settings-typed", "settings-configmap"] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 0, "{case}: {}", r.run.stderr);
        let nads: BTreeSet<(String, String)> = r
            .items()
            .iter()
            .filter(|i| is_generated_nad(i))
            .map(|i| (i.id().1, i.id().2))
            .collect();
        // demo: enabled; linkerd-system: the control plane; both with nadName.
        assert_eq!(
            nads,
            [
                ("demo".to_string(), "linkerd-cni-net".to_string()),
                ("linkerd-system".to_string(), "linkerd-cni-net".to_string())
            ]
            .into_iter()
            .collect(),
            "{case}"
        );
        let nad = r.item("NetworkAttachmentDefinition", "demo", "linkerd-cni-net");
        let cfg: serde_json::Value =
            serde_json::from_str(nad.str_at(&["spec", "config"]).unwrap()).unwrap();
        assert_eq!(cfg["cniVersion"], "1.0.0", "{case}: cniVersion setting");
        assert_eq!(
            cfg["kubernetes"]["kubeconfig"], "/host/etc/cni/kubeconfig",
            "{case}: cniKubeconfig setting"
        );
        assert_eq!(
            cfg["log_level"], "info",
            "{case}: the ConfigMap of cniNamespace is used"
        );
        assert_eq!(
            r.proxy_uid("Deployment", "demo", "web").as_deref(),
            Some("3005"),
            "{case}: uidRangeAnnotation and proxyUIDOffset settings"
        );
        assert_eq!(
            r.proxy_uid("Deployment", "linkerd-system", "linkerd-destination"),
            None,
            "{case}"
        );
        assert!(
            r.attached("linkerd-cni-net")
                .contains("Deployment linkerd-system/linkerd-destination"),
            "{case}: linkerdNamespace setting"
        );
    }
    let r = Rendered::of("settings-configmap-structured");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.attached("linkerd-cni"),
        set(&["Deployment team-a/api", "Rollout team-a/canary"])
    );
    assert_eq!(r.nads(), set(&["team-a"]));
}

#[test]
fn settings_namespaces() {
    let r = Rendered::of("settings-namespaces");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        r.proxy_uid("Deployment", "team-a", "api").as_deref(),
        Some("2000002102")
    );
    // Namespaces not in the input: NADs at the end, in namespace order, at the documented path.
    let items = r.items();
    let tail: Vec<_> = items.iter().rev().take(2).rev().map(|i| i.id()).collect();
    assert_eq!(
        tail,
        vec![
            (
                "NetworkAttachmentDefinition".into(),
                "team-a".into(),
                "linkerd-cni".into()
            ),
            (
                "NetworkAttachmentDefinition".into(),
                "team-b".into(),
                "linkerd-cni".into()
            ),
        ]
    );
    let nad = r.item("NetworkAttachmentDefinition", "team-a", "linkerd-cni");
    assert_eq!(
        nad.annotation("config.kubernetes.io/path"),
        Some("team-a/networkattachmentdefinition_team-a_linkerd-cni.yaml")
    );
}

#[test]
fn nad_follows_its_namespace_file() {
    let r = Rendered::of("e2e-namespace-enabled");
    let items = r.items();
    for ns in ["test-ns-1", "test-ns-2"] {
        let pos = items
            .iter()
            .position(|i| i.id() == ("Namespace".into(), "".into(), ns.into()))
            .unwrap();
        let next = &items[pos + 1];
        assert_eq!(
            next.id(),
            (
                "NetworkAttachmentDefinition".into(),
                ns.into(),
                "linkerd-cni".into()
            ),
            "NAD right after Namespace {ns}"
        );
        let want = format!("namespaces/networkattachmentdefinition_{ns}_linkerd-cni.yaml");
        assert_eq!(next.annotation("config.kubernetes.io/path"), Some(&*want));
        assert_eq!(
            next.annotation("internal.config.kubernetes.io/path"),
            Some(&*want)
        );
    }
    let r = Rendered::of("workload-without-namespace");
    let nad = r.item("NetworkAttachmentDefinition", "", "linkerd-cni");
    assert_eq!(nad.str_at(&["metadata", "namespace"]), None);
    assert_eq!(
        nad.annotation("config.kubernetes.io/path"),
        Some("networkattachmentdefinition_linkerd-cni.yaml")
    );
}

/// Switching a namespace off removes exactly what earlier renders added: rendering a case,
/// disabling its namespaces and rendering again gives the input back (same values, same
/// plain/quoted scalars, same key order), without the NADs.
#[test]
fn disable_restores_the_input() {
    let cases = [
        "generation-stable-2-11",
        "generation-version-2-19",
        "e2e-namespace-enabled",
        "networks-comma",
        "networks-json",
        "networks-empty-values",
        "workload-kinds",
        "openshift-uid-range",
        "yaml-fidelity",
        "json-items",
        "no-path-annotations",
        "rollout-all",
        "rollout-user-nad",
    ];
    let mut problems = Vec::new();
    for case in cases {
        let input = input_of(case);
        let first = run(input.as_bytes());
        assert_eq!(first.code, 0, "{case}: {}", first.stderr);
        let disable =
            |t: &str| t.replace("linkerd.io/multus: enabled", "linkerd.io/multus: disabled");
        let second = run(disable(&first.stdout).as_bytes());
        assert_eq!(second.code, 0, "{case}: {}", second.stderr);
        let want = items_of(&parse_yaml(&disable(&input)).unwrap());
        let second_rl = parse_yaml(&second.stdout).unwrap();
        let all = items_of(&second_rl);
        // A generated NAD may stay only where a workload still references it (the user's own
        // reference); everything else must be the input again.
        let nad = nad_name(&second_rl);
        let rendered = Rendered {
            run: second.clone(),
            rl: second_rl.clone(),
        };
        let referenced: BTreeSet<String> = rendered
            .attached(&nad)
            .iter()
            .map(|w| {
                w.split_once(' ')
                    .unwrap()
                    .1
                    .split('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        for left in all.iter().filter(|i| is_generated_nad(i)) {
            if !referenced.contains(&left.id().1) {
                problems.push(format!(
                    "{case}: generated NAD left in {:?} though nothing references it",
                    left.id().1
                ));
            }
        }
        let got: Vec<Yaml> = all.into_iter().filter(|i| !is_generated_nad(i)).collect();
        if want.len() != got.len() {
            problems.push(format!(
                "{case}: {} items in, {} after disabling",
                want.len(),
                got.len()
            ));
            continue;
        }
        for (i, (a, b)) in want.iter().zip(&got).enumerate() {
            if let Some(d) = tree_difference(a, b, &format!("item {i}")) {
                problems.push(format!("{case}: not restored: {d}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A summary stays one readable line when 10,000 workloads change, and the run stays fast.
#[test]
fn summary_readable_at_scale() {
    let mut input = String::from(concat!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n",
        "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: demo\n",
        "    annotations:\n      linkerd.io/multus: enabled\n      linkerd.io/inject: enabled\n",
    ));
    let cm = items_of(&parse_yaml(&input_of("generation-version-2-19")).unwrap())
        .into_iter()
        .find(|i| i.str_at(&["kind"]) == Some("ConfigMap"))
        .unwrap();
    let config = cm.str_at(&["data", "cni_network_config"]).unwrap();
    input.push_str(&format!(
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: linkerd-cni-config\n    namespace: linkerd-cni\n  data:\n    cni_network_config: {}\n",
        serde_json::to_string(config).unwrap()
    ));
    for i in 0..10_000 {
        input.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: pod-{i}\n    namespace: demo\n  spec:\n    containers:\n    - name: app\n      image: nginx\n"
        ));
    }
    let started = std::time::Instant::now();
    let got = run(input.as_bytes());
    let took = started.elapsed();
    assert_eq!(got.code, 0, "{}", got.stderr_first_line());
    let rl = parse_yaml(&got.stdout).unwrap();
    let results = results_of(&rl);
    let summary = results[0].str_at(&["message"]).unwrap();
    assert!(
        summary.len() <= 200 && !summary.contains('\n'),
        "summary not one short line: {summary:?}"
    );
    assert!(
        summary.contains("10000") || summary.contains("10,000"),
        "summary does not count the workloads: {summary:?}"
    );
    assert_eq!(
        got.stdout
            .matches("k8s.v1.cni.cncf.io/networks: linkerd-cni")
            .count(),
        10_000
    );
    assert!(
        took < std::time::Duration::from_secs(20),
        "10,000 pods took {took:?}"
    );
}

/// Scalars whose meaning differs between YAML readers keep their quoting; numbers keep their
/// exact text.
#[test]
fn yaml_fidelity() {
    let r = Rendered::of("yaml-fidelity");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let cm = r.item("ConfigMap", "demo", "tricky");
    let data = cm.get("data").unwrap();
    for (k, v) in data.entries() {
        let key = k.as_str().unwrap();
        assert!(
            matches!(v, Yaml::Scalar { plain: false, .. }),
            "data.{key} = {:?} lost its quotes",
            v.as_str()
        );
    }
    let text = &r.run.stdout;
    for line in [
        "defaultMode: 0644",
        "defaultMode: 0o600",
        "replicas: 0x2",
        "revisionHistoryLimit: 010",
        "progressDeadlineSeconds: 1_200",
        "huge: 123456789012345678901234567890",
        "above-u64: 18446744073709551616",
        "negative: -9223372036854775809",
        "float: 1.50",
        "exp: 6.02e+23",
        "nan: .NaN",
        "bool-11: yes",
        "timestamp: 2024-01-02T03:04:05Z",
        "memory: 1e3Mi",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start() == line),
            "line `{line}` not kept verbatim"
        );
    }
    let web = r.item("Deployment", "demo", "web");
    let env = web
        .at(&["spec", "template", "spec", "containers"])
        .unwrap()
        .seq()[0]
        .get("env")
        .unwrap()
        .seq()
        .to_vec();
    assert!(
        matches!(&env[0].get("value"), Some(Yaml::Scalar { value, plain: false, .. }) if value == "yes")
    );
    // `yes:` as a plain key means `true` to kubectl; quoting it would change the key.
    assert!(
        data.entries()
            .iter()
            .any(|(k, _)| matches!(k, Yaml::Scalar { value, plain: true, .. } if value == "yes")),
        "plain key `yes` changed"
    );
}

/// JSON files reach the function as flow nodes; output is block YAML with the same meaning.
#[test]
fn json_items_come_out_as_block_yaml() {
    let r = Rendered::of("json-items");
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    let items_text = before_results(&r.run.stdout);
    for flow in [
        "{\"apiVersion\"",
        "\"metadata\": {",
        "{\"matchLabels\"",
        "[{\"name\"",
    ] {
        assert!(
            !items_text.contains(flow),
            "output keeps the JSON item as a flow node (found {flow})"
        );
    }
    let cm = r.item("ConfigMap", "demo", "flags");
    for (k, want) in [("a", "yes"), ("b", "0644"), ("c", "~"), ("d", "1e3")] {
        assert!(
            matches!(cm.get("data").and_then(|d| d.get(k)), Some(Yaml::Scalar { value, plain: false, .. }) if value == want),
            "data.{k} lost its value or quotes"
        );
    }
    assert!(
        r.attached("linkerd-cni")
            .contains("Deployment demo/json-web")
    );
}

/// A bad networks annotation: the error result sits on the resource at fault, which is left
/// alone; other resources are still processed.
#[test]
fn error_bad_networks_annotation() {
    let r = Rendered::of("error-bad-networks");
    assert_eq!(r.run.code, 1);
    assert_eq!(r.results_for("error", "Deployment", "broken-json"), 1);
    assert_eq!(r.results_for("error", "Deployment", "broken-name"), 1);
    assert!(
        r.attached("linkerd-cni").contains("Deployment demo/good"),
        "other workloads are still processed"
    );
    for name in ["broken-json", "broken-name"] {
        let item = r.item("Deployment", "demo", name);
        assert_eq!(item.annotation("multus.linkerd.io/owned"), None);
    }
}

/// A CNI config that cannot give a NAD: no NAD, and no workload left referencing one.
#[test]
fn error_cni_config_leaves_no_dangling_reference() {
    for case in [
        "error-cni-json",
        "error-placeholder",
        "error-duplicate-configmap",
        "error-missing-configmap",
    ] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 1, "{case}");
        assert!(
            r.nads().is_empty(),
            "{case}: a NAD was generated from a bad or missing config"
        );
        assert!(
            r.attached("linkerd-cni").is_empty(),
            "{case}: a workload references a NAD that is not generated"
        );
    }
    let r = Rendered::of("error-placeholder");
    assert!(
        r.messages("error")
            .iter()
            .any(|m| m.contains("__LOG_LEVEL__")),
        "the placeholder is named: {:?}",
        r.messages("error")
    );
}

/// Bad settings: an error naming the key (and the valid choices), nothing generated.
#[test]
fn error_settings() {
    for (case, key) in [
        ("error-unknown-setting", "linkerdNamespaces"),
        ("error-typed-unknown-setting", "proxyUidOffset"),
        ("error-proxy-uid-offset", "proxyUIDOffset"),
        ("error-cni-version", "cniVersion"),
        ("error-namespace-twice", "demo"),
        ("error-builtin-kind", "Deployment"),
        ("error-config-rollout", "configRollout"),
    ] {
        let r = Rendered::of(case);
        assert_eq!(r.run.code, 1, "{case}");
        let errors = r.messages("error").join("\n");
        assert!(
            errors.contains(key),
            "{case}: error does not name {key}: {errors}"
        );
        assert!(
            r.run.stderr_first_line().contains(key),
            "{case}: first stderr line does not name {key}: {}",
            r.run.stderr_first_line()
        );
        if case != "error-namespace-twice" {
            // Nothing is generated from settings that cannot be read.
            assert!(r.nads().is_empty(), "{case}");
        }
    }
    // Valid choices are listed.
    let r = Rendered::of("error-unknown-setting");
    let errors = r.messages("error").join("\n");
    for key in [
        "cniNamespace",
        "linkerdNamespace",
        "nadName",
        "cniKubeconfig",
        "cniVersion",
        "uidRangeAnnotation",
        "proxyUIDOffset",
        "namespaces",
        "workloadKinds",
        "defaultNamespace",
        "configRollout",
    ] {
        assert!(errors.contains(key), "valid key {key} not listed: {errors}");
    }
    let r = Rendered::of("error-config-rollout");
    let errors = r.messages("error").join("\n");
    for v in ["off", "all", "labelled"] {
        assert!(
            errors.contains(v),
            "valid configRollout {v} not listed: {errors}"
        );
    }
    let r = Rendered::of("error-cni-version");
    let errors = r.messages("error").join("\n");
    for v in ["0.1.0", "0.3.0", "1.0.0", "1.1.0"] {
        assert!(
            errors.contains(v),
            "valid cniVersion {v} not listed: {errors}"
        );
    }
}

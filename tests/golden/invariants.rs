//! The invariants every golden case keeps, whatever its expected file says.

use super::*;

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
    problems.extend(shape_problems(&rl_in, &rl));
    let results = results_of(&rl);
    problems.extend(result_problems(got, &results));
    let items_in = items_of(&rl_in);
    let items_out = items_of(&rl);
    problems.extend(pass_through_problems(&items_in, &items_out, &results));
    let (nad_problems, nad_namespaces) = generated_nad_problems(&rl_in, &items_in, &items_out);
    problems.extend(nad_problems);
    problems.extend(workload_problems(
        got,
        &rl_in,
        &items_in,
        &items_out,
        &nad_namespaces,
    ));
    problems
}

/// The shape of the output ResourceList, and its functionConfig unchanged.
fn shape_problems(rl_in: &Yaml, rl: &Yaml) -> Vec<String> {
    let mut problems = Vec::new();
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
    problems
}

/// The exit code agrees with the results; every result is well formed, the summary first.
fn result_problems(got: &Run, results: &[Yaml]) -> Vec<String> {
    let mut problems = Vec::new();
    // Exit code versus results.
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
        } else if r.get("resourceRef").is_none() && !names_kpt_arguments(r) {
            // Issue rule 8: every change and every problem names its resource (or, for the
            // settings kpt made of `kpt fn eval -- key=value`, the arguments as written).
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
    problems
}

/// Whether a result is about the arguments after `kpt fn eval ... --`, which kpt passes as
/// a ConfigMap the user never wrote: it names them instead of that ConfigMap.
fn names_kpt_arguments(result: &Yaml) -> bool {
    let message = result.str_at(&["message"]).unwrap_or("");
    (message.starts_with("the argument `") || message.starts_with("the arguments `"))
        && message.contains("` after `--`: ")
}

/// Pass-through: everything but generated NADs and the function's own keys is unchanged, in
/// the same order; every change is a result naming the changed resource (issue rule 8).
fn pass_through_problems(items_in: &[Yaml], items_out: &[Yaml], results: &[Yaml]) -> Vec<String> {
    let mut problems = Vec::new();
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
    problems
}

/// Generated NADs: well formed, and the namespaces holding a NAD of the case's name.
fn generated_nad_problems(
    rl_in: &Yaml,
    items_in: &[Yaml],
    items_out: &[Yaml],
) -> (Vec<String>, BTreeSet<String>) {
    let mut problems = Vec::new();
    // Generated NADs.
    let nad = nad_name(rl_in);
    let paths = has_path_annotations(items_in);
    let mut nad_namespaces = BTreeSet::new();
    for item in items_out {
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
        problems.extend(nad_config_problems(&what, item));
        if paths != item.annotation("config.kubernetes.io/path").is_some() {
            problems.push(format!(
                "{what}: path annotation present = {}, input items carry paths = {paths}",
                !paths
            ));
        }
        if paths {
            problems.extend(nad_path_problems(&what, item, &ns, &nad));
        }
    }
    (problems, nad_namespaces)
}

/// A generated NAD's `spec.config`: a literal block of pretty-printed JSON, without the
/// policy object or a placeholder, with a cniVersion.
fn nad_config_problems(what: &str, item: &Yaml) -> Vec<String> {
    let mut problems = Vec::new();
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
    problems
}

/// A generated NAD's path and index annotations, when the input items carry paths.
fn nad_path_problems(what: &str, item: &Yaml, ns: &str, nad: &str) -> Vec<String> {
    let mut problems = Vec::new();
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
    problems
}

/// Workloads: well-formed ownership records, no dangling references, never twice.
fn workload_problems(
    got: &Run,
    rl_in: &Yaml,
    items_in: &[Yaml],
    items_out: &[Yaml],
    nad_namespaces: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let nad = nad_name(rl_in);
    let default_namespace = setting(rl_in, "defaultNamespace").unwrap_or("");
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
        if got.code == 0 {
            let at = (nad.as_str(), ns.as_str(), default_namespace);
            problems.extend(stamp_problems(item, rl_in, items_out, at));
        }
        let Some(networks) = template_annotation(item, rl_in, "k8s.v1.cni.cncf.io/networks") else {
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
            .and_then(|i| template_annotation(i, rl_in, "k8s.v1.cni.cncf.io/networks"))
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

/// The rules decide each item on its own and on the package, not on where it stands: the
/// items in the reverse order render to the same items (a workload's rules that read its
/// namespace's NAD config run in its own visit when the config is known then, and after the
/// NADs' plan otherwise), with the same exit code and summary. Only the results' order moves.
#[test]
fn the_items_order_changes_no_item() {
    for_each_case(|dir| {
        let input = read(dir, "input.yaml").unwrap();
        let mut list = linkerd_multus::yaml::parse_document(&input).unwrap();
        let Some(linkerd_multus::yaml::Node::Seq(items)) =
            list.as_map_mut().and_then(|m| m.get_mut("items"))
        else {
            return vec!["input.yaml has no items".into()];
        };
        items.items.reverse();
        let reversed = linkerd_multus::yaml::emit_document(&list);
        let (forward, backward) = (run(input.as_bytes()), run(reversed.as_bytes()));
        let rendered = |run: &Run| {
            let out = parse_yaml(&run.stdout).expect("the output parses");
            let mut items: Vec<String> = items_of(&out).iter().map(|i| format!("{i:?}")).collect();
            items.sort();
            let summary = results_of(&out)
                .first()
                .and_then(|r| r.str_at(&["message"]).map(str::to_string));
            (run.code, summary, items)
        };
        let (want, got) = (rendered(&forward), rendered(&backward));
        let mut problems = Vec::new();
        if (&want.0, &want.1) != (&got.0, &got.1) {
            problems.push(format!(
                "items reversed: exit code and summary {:?}, {:?}; in order {:?}, {:?}",
                got.0, got.1, want.0, want.1
            ));
        }
        if want.2 != got.2 {
            let differ = want.2.iter().filter(|i| !got.2.contains(i)).count();
            problems.push(format!("items reversed: {differ} items render otherwise"));
        }
        problems
    });
}

/// The config-hash stamp of a workload in namespace `ns`, against the config of the NAD `nad`
/// there (`at` is the NAD's name, the namespace and the default namespace).
fn stamp_problems(
    item: &Yaml,
    rl_in: &Yaml,
    items_out: &[Yaml],
    at: (&str, &str, &str),
) -> Vec<String> {
    let (nad, ns, default_namespace) = at;
    let Some(hash) = template_annotation(item, rl_in, CONFIG_HASH) else {
        return Vec::new();
    };
    let config = items_out
        .iter()
        .filter(|i| {
            i.str_at(&["kind"]) == Some("NetworkAttachmentDefinition")
                && i.str_at(&["metadata", "name"]) == Some(nad)
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
    config_hash_problems(item, rl_in, nad, ns, hash, config)
}

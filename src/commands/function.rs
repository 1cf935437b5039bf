//! The KRM function: a ResourceList in, a ResourceList out. What the binary
//! is with no subcommand, under kpt, kustomize and the container image.

pub use crate::commands::outcome::Outcome;

use crate::commands::outcome::Error;
use crate::k8s::resource::{annotation, resource_ref};
use crate::krm::resource_list::{self, ResourceList, ResourceListError};
use crate::krm::results::{self, FnResult, Severity};
use crate::pipeline::{self, settings};
use crate::yaml::Node;

/// Runs the function on the text of a ResourceList: its results in the
/// ResourceList printed, exit 1 exactly when there is an error.
pub fn run(input: &str) -> Outcome {
    outcome(ResourceList::parse(input), &mut None, String::new())
}

/// [`run`] for a process that prints the outcome and exits: the input is freed once parsed
/// (the tree owns its text), the output goes into one buffer sized from the input's length, and
/// the tree is handed back rather than dropped, for the process to leave it to the kernel
/// ([`std::mem::forget`]). At 10,000 resources (`cargo bench --bench krm`) the buffer lowers
/// the peak memory by 6% (a buffer grown from empty is copied through every smaller size,
/// whose pages stay the process's), and the tree left to the kernel lowers the time by 5 to
/// 10%.
pub fn run_keeping(input: String) -> (Outcome, Option<Node>) {
    let parsed = ResourceList::parse(&input);
    let buffer = String::with_capacity(output_capacity(input.len()));
    drop(input);
    let mut kept = None;
    let outcome = outcome(parsed, &mut kept, buffer);
    (outcome, kept)
}

/// The output buffer's capacity for an input of `len` bytes: a quarter more, for what the
/// rules add; pages of it never written are never the process's.
fn output_capacity(len: usize) -> usize {
    len + len / 4
}

/// The outcome of a parse: the render of the list, or why there is none.
fn outcome(
    parsed: Result<ResourceList, ResourceListError>,
    kept: &mut Option<Node>,
    buffer: String,
) -> Outcome {
    parsed
        .map_err(Error::from)
        .and_then(|list| render(list, kept, buffer))
        .unwrap_or_else(|e| Outcome::failed(&e, false))
}

/// The annotations that tell kustomize how to run a function, the current
/// one and the older one.
const FUNCTION_ANNOTATIONS: [&str; 2] = ["config.kubernetes.io/function", "config.k8s.io/function"];

/// What the function says when kustomize runs it without resources.
const KUSTOMIZE_NO_RESOURCES: &str = "kustomize gave the function no resources, as it gives a generator: list its settings file (annotated config.kubernetes.io/function) under transformers: in the kustomization, not under generators:; a transformer renders the resources listed under resources:";

/// The results of a run refused before rendering: `errors`, after a summary
/// that says nothing changed.
fn refused(errors: Vec<FnResult>) -> Vec<FnResult> {
    let summary = format!("linkerd-multus: no changes; {}", results::problems(&errors));
    let mut results = vec![FnResult::new(Severity::Info, summary)];
    results.extend(errors);
    results
}

/// Whether kustomize runs the function as a generator: the functionConfig
/// says how kustomize runs it (the `config.kubernetes.io/function`
/// annotation, which kpt does not read), and the only item is the
/// functionConfig itself (kustomize gives a generator its own config, marked
/// local-config) or there is none.
fn is_kustomize_generator(list: &ResourceList) -> bool {
    let Some(config) = &list.function_config else {
        return false;
    };
    let is_config = |item: &Node| match (resource_ref(item), resource_ref(config)) {
        (Ok(item), Ok(config)) => item == config,
        _ => false,
    };
    FUNCTION_ANNOTATIONS
        .iter()
        .any(|key| annotation(config, key).is_some())
        && list.items.iter().all(is_config)
}

/// Renders a parsed ResourceList; the tree it printed goes into `kept`.
fn render(
    mut list: ResourceList,
    kept: &mut Option<Node>,
    mut stdout: String,
) -> Result<Outcome, Error> {
    let mut sources = settings::Sources::new(settings::Takes::Any);
    if let Some(config) = &list.function_config {
        sources.given = settings::Given::FunctionConfig(config);
    }
    let results = match settings::resolve(sources) {
        // kpt made the functionConfig of the arguments: the message names them.
        Err(e @ settings::Error::Arguments { .. }) => {
            refused(vec![FnResult::new(Severity::Error, e.to_string())])
        }
        Err(e) => {
            let mut error = FnResult::new(Severity::Error, e.to_string()).field("functionConfig");
            error.resource = list
                .function_config
                .as_ref()
                .and_then(|c| resource_ref(c).ok());
            refused(vec![error])
        }
        Ok(config) => {
            let to_apply = settings::settings_to_apply(settings::Takes::Any, &list.items);
            if !to_apply.is_empty() {
                refused(to_apply)
            } else if is_kustomize_generator(&list) {
                refused(vec![FnResult::new(Severity::Error, KUSTOMIZE_NO_RESOURCES)])
            } else {
                pipeline::render(&mut list.items, &config)?
            }
        }
    };
    let errors: Vec<_> = results
        .iter()
        .filter(|r| r.severity == Severity::Error)
        .collect();
    let stderr = match errors.as_slice() {
        [] => String::new(),
        [only] => format!("{only}\n"),
        [first, rest @ ..] => format!("{first}\n({} more errors in the results)\n", rest.len()),
    };
    let code = i32::from(!errors.is_empty());
    let list = list.into_node(results);
    resource_list::emit(&list, &mut stdout);
    *kept = Some(list);
    Ok(Outcome {
        stdout,
        stderr,
        code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIGMAP: &str = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: linkerd-cni-config\n    namespace: linkerd-cni\n  data:\n    cni_network_config: '{\"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\", \"kubernetes\": {\"kubeconfig\": \"__KUBECONFIG_FILEPATH__\"}}'\n";

    const DEPLOYMENT: &str = "- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: web\n    namespace: demo\n    annotations:\n      config.kubernetes.io/path: web.yaml\n  spec:\n    template:\n      metadata:\n        annotations:\n          linkerd.io/multus: enabled\n      spec:\n        containers: []\n";

    /// The process's path writes its output into a buffer sized from the input: the same
    /// bytes as [`run`], whether the output outgrows the buffer, is shorter than the input, or
    /// is an error.
    #[test]
    fn keeping_gives_the_same_output() {
        let list = |items: &str| {
            format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n{items}")
        };
        let comment = format!("# {}\n", "padding ".repeat(2_000));
        // (case, input, exit code, whether the output outgrows the buffer)
        let cases = [
            (
                "attached",
                list(&format!("{CONFIGMAP}{DEPLOYMENT}")),
                0,
                Some(true),
            ),
            (
                "a long comment",
                list(&format!("{comment}{CONFIGMAP}")),
                0,
                Some(false),
            ),
            ("not a resource", list("- 42\n"), 1, None),
            ("not YAML", "items: [\n".to_string(), 1, None),
        ];
        for (case, input, code, longer) in cases {
            let want = run(&input);
            let (got, _) = run_keeping(input.clone());
            assert_eq!(got.code, code, "{case}: {}", got.stderr);
            assert_eq!(got.stdout, want.stdout, "{case}");
            assert_eq!(got.stderr, want.stderr, "{case}");
            if let Some(longer) = longer {
                let outgrows = got.stdout.len() > output_capacity(input.len());
                assert_eq!(outgrows, longer, "{case}");
            }
        }
    }
}

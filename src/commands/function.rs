//! The KRM function: a ResourceList in, a ResourceList out. What the binary
//! is with no subcommand, under kpt, kustomize and the container image.

pub use crate::commands::outcome::Outcome;

use crate::commands::outcome::Error;
use crate::k8s::resource::resource_ref;
use crate::krm::resource_list::{self, ResourceList, ResourceListError};
use crate::krm::results::{FnResult, Severity};
use crate::pipeline::{self, settings};
use crate::yaml::Node;

/// Runs the function on the text of a ResourceList: its results in the
/// ResourceList printed, exit 1 exactly when there is an error.
pub fn run(input: &str) -> Outcome {
    outcome(ResourceList::parse(input), &mut None)
}

/// [`run`] for a process that prints the outcome and exits: the input is
/// freed once parsed (the tree owns its text), and the tree is handed back
/// rather than dropped, for the process to leave it to the kernel
/// ([`std::mem::forget`]). At 10,000 resources (`cargo bench --bench krm`)
/// the first lowers the peak memory by 3 to 5%, the second the time by 5 to 10%.
pub fn run_keeping(input: String) -> (Outcome, Option<Node>) {
    let parsed = ResourceList::parse(&input);
    drop(input);
    let mut kept = None;
    let outcome = outcome(parsed, &mut kept);
    (outcome, kept)
}

/// The outcome of a parse: the render of the list, or why there is none.
fn outcome(parsed: Result<ResourceList, ResourceListError>, kept: &mut Option<Node>) -> Outcome {
    parsed
        .map_err(Error::from)
        .and_then(|list| render(list, kept))
        .unwrap_or_else(|e| Outcome::failed(&e, false))
}

/// Renders a parsed ResourceList; the tree it printed goes into `kept`.
fn render(mut list: ResourceList, kept: &mut Option<Node>) -> Result<Outcome, Error> {
    let mut sources = settings::Sources::new(settings::Takes::Any);
    if let Some(config) = &list.function_config {
        sources.given = settings::Given::FunctionConfig(config);
    }
    let results = match settings::resolve(sources) {
        Err(e) => {
            let mut error = FnResult::new(Severity::Error, e.to_string()).field("functionConfig");
            error.resource = list
                .function_config
                .as_ref()
                .and_then(|c| resource_ref(c).ok());
            vec![
                FnResult::new(
                    Severity::Info,
                    "linkerd-multus: no changes; 1 error, 0 warnings",
                ),
                error,
            ]
        }
        Ok(config) => pipeline::render(&mut list.items, &config)?,
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
    let stdout = resource_list::emit(&list);
    *kept = Some(list);
    Ok(Outcome {
        stdout,
        stderr,
        code,
    })
}

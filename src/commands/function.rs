//! The KRM function: a ResourceList in, a ResourceList out. What the binary
//! is with no subcommand, under kpt, kustomize and the container image.

pub use crate::commands::outcome::Outcome;

use crate::commands::outcome::Error;
use crate::k8s::resource::resource_ref;
use crate::krm::resource_list::ResourceList;
use crate::krm::results::{FnResult, Severity};
use crate::pipeline::{self, settings};

/// Runs the function on the text of a ResourceList: its results in the
/// ResourceList printed, exit 1 exactly when there is an error.
pub fn run(input: &str) -> Outcome {
    run_inner(input).unwrap_or_else(|e| Outcome::failed(&e, false))
}

fn run_inner(input: &str) -> Result<Outcome, Error> {
    let mut list = ResourceList::parse(input)?;
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
    Ok(Outcome {
        stdout: list.to_yaml(results),
        stderr,
        code,
    })
}

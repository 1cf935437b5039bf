//! The KRM function: a ResourceList in, a ResourceList out. What the binary
//! is with no subcommand, under kpt, kustomize and the container image.

use crate::k8s::resource::resource_ref;
use crate::krm::resource_list::ResourceList;
use crate::krm::results::{FnResult, Severity};
use crate::pipeline::{self, settings};

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The ResourceList to print, empty when the input was unusable.
    pub stdout: String,
    /// Messages for people; the first line says what is wrong.
    pub stderr: String,
    /// 1 exactly when there is an error.
    pub code: i32,
}

impl Outcome {
    fn failed(message: String) -> Self {
        Outcome {
            stdout: String::new(),
            stderr: format!("error: {message}\n"),
            code: 1,
        }
    }
}

/// Runs the function on the text of a ResourceList.
pub fn run(input: &str) -> Outcome {
    let mut list = match ResourceList::parse(input) {
        Ok(list) => list,
        Err(e) => return Outcome::failed(e.to_string()),
    };
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
        Ok(config) => match pipeline::render(&mut list.items, &config) {
            Ok(results) => results,
            Err(e) => return Outcome::failed(format!("the input is malformed: {e}")),
        },
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
    Outcome {
        stdout: list.to_yaml(results),
        stderr,
        code,
    }
}

//! The `validate` command: manifest files in, one line per problem out, for
//! CI. The checks are [`crate::validation`]'s, as in the kpt validator.

use std::io;
use std::path::PathBuf;

use clap::Args;

use crate::commands::manifests::{Input, Manifests};
use crate::commands::outcome::{Error, Outcome};
use crate::k8s::resource::{self, ResourceRef, identify};
use crate::krm::results::{FnResult, Severity};
use crate::linkerd_cni::cni_config::NETWORK_CONFIG_KEY;
use crate::pipeline::FunctionConfig;
use crate::pipeline::environment::Value;
use crate::pipeline::settings::{self, Given, Sources, Takes};
use crate::validation::{self, settings::Settings};
use crate::yaml::Node;

/// `validate`: its inputs and settings; flags win over the config file.
#[derive(Args)]
pub struct ValidateArgs {
    /// Files and directories, as for render, or - for stdin. A Validation
    /// object among them holds the settings, as --config does.
    #[arg(value_name = "PATH|-", required = true)]
    paths: Vec<String>,
    /// A file holding the settings: a Validation object (or a ConfigMap).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Pods may select NADs only in their own namespace and the global ones,
    /// as Multus with namespaceIsolation (OpenShift) allows [default: false].
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    namespace_isolation: Option<String>,
    /// A namespace whose NADs any pod may select under namespace isolation;
    /// repeat it or give a comma-separated list. Replaces the default list
    /// [default: default,openshift-multus,openshift-sriov-network-operator].
    #[arg(long, value_name = "NAMESPACE", value_delimiter = ',')]
    global_namespace: Vec<String>,
    /// Workload kinds beyond the built-in ones, as YAML or JSON:
    /// '[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]'.
    #[arg(long, value_name = "YAML")]
    workload_kinds: Option<String>,
    /// Namespace of resources without metadata.namespace.
    #[arg(long, value_name = "NAMESPACE")]
    default_namespace: Option<String>,
}

impl ValidateArgs {
    /// Runs `validate`; `stdin` supplies the text of `-`.
    pub fn run(self, stdin: impl FnMut() -> io::Result<String>) -> Outcome {
        let global = (!self.global_namespace.is_empty()).then(|| self.global_namespace.join(","));
        let flags = [
            (
                "namespace-isolation",
                "namespaceIsolation",
                self.namespace_isolation,
            ),
            ("global-namespace", "globalNamespaces", global),
            ("workload-kinds", "workloadKinds", self.workload_kinds),
            (
                "default-namespace",
                "defaultNamespace",
                self.default_namespace,
            ),
        ]
        .into_iter()
        .filter_map(|(flag, key, value)| Some(Value::flag(flag, key, value?)))
        .collect();
        let options = Options {
            inputs: self.paths.iter().map(|p| Input::from_arg(p)).collect(),
            config: self.config,
            flags,
        };
        run(&options, stdin)
    }
}

/// A run of `validate`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Files, directories or stdin holding the resources.
    pub inputs: Vec<Input>,
    /// A file holding a `Validation` object (or a ConfigMap).
    pub config: Option<PathBuf>,
    /// Settings from flags, applied last.
    pub flags: Vec<Value>,
}

/// Validates the inputs; `stdin` supplies the text of `-`. Exits 1 when
/// there is an error, or when the inputs or settings cannot be read.
pub fn run(options: &Options, stdin: impl FnMut() -> io::Result<String>) -> Outcome {
    run_inner(options, stdin).unwrap_or_else(|e| Outcome::failed(&e, false))
}

fn run_inner(
    options: &Options,
    stdin: impl FnMut() -> io::Result<String>,
) -> Result<Outcome, Error> {
    let manifests = Manifests::read(&options.inputs, false, stdin)?;
    let settings = settings(options, &manifests)?;
    let refs = identify(&manifests.items)?;
    let mut before = settings::settings_to_apply(Takes::Validation, &manifests.items);
    if options.inputs.iter().any(|i| matches!(i, Input::Path(_))) {
        before.extend(applied_by_kubectl(&manifests.items, &refs));
    }
    let report = validation::package::validate(&manifests.items, &refs, &settings).after(before);
    let mut stdout = String::new();
    for result in &report.problems {
        stdout.push_str(&line(result, &manifests));
        stdout.push('\n');
    }
    stdout.push_str(&report.summary.message);
    stdout.push('\n');
    let errors = report
        .problems
        .iter()
        .any(|r| r.severity == Severity::Error);
    Ok(Outcome {
        stdout,
        stderr: String::new(),
        code: i32::from(errors),
    })
}

/// The local-config copies of the Linkerd-CNI ConfigMap in files (a ConfigMap holding
/// `data.cni_network_config`, which every host reads and none applies): `kubectl apply -R -f
/// DIR` knows nothing of local-config and applies them, so the copy replaces the live ConfigMap, whose owner's next apply (the
/// Linkerd-CNI chart's upgrade) then conflicts with it. A warning each, naming the ways to
/// apply a rendered package that leave them out.
fn applied_by_kubectl(items: &[Node], refs: &[ResourceRef]) -> Vec<FnResult> {
    items
        .iter()
        .zip(refs)
        .filter(|(item, r)| {
            resource::is_local_config(item)
                && r.kind == "ConfigMap"
                && r.group().is_empty()
                && item.get_path(&["data", NETWORK_CONFIG_KEY]).is_some()
        })
        .map(|(item, r)| {
            let message = "local-config: kpt and linkerd-multus render leave it out, but kubectl apply -R (or -f of its file) applies it, and this copy then replaces the cluster's ConfigMap of that name, which its owner (the Linkerd-CNI chart) applies: its next upgrade conflicts on .data; apply the rendered package with kpt live apply, or linkerd-multus render DIR | kubectl apply --server-side -f -";
            let mut result =
                FnResult::new(Severity::Warning, message).on(r, resource::file_ref(item).as_ref());
            result.field = Some(format!("metadata.annotations.{}", resource::LOCAL_CONFIG_ANNOTATION));
            result
        })
        .collect()
}

/// The settings: `--config` or a `Validation` among the inputs, then the flags.
fn settings(options: &Options, manifests: &Manifests) -> Result<Settings, settings::Error> {
    let where_is = |item: &Node| {
        resource::file_ref(item).map_or_else(
            || "the input".to_string(),
            |f| manifests.display_path(&f.path),
        )
    };
    let mut sources = Sources::new(Takes::Validation);
    if let Some(path) = &options.config {
        sources.given = Given::File {
            source: "--config",
            path,
        };
    }
    sources.found = (manifests.items.iter())
        .filter(|item| Takes::Validation.is_settings_object(item))
        .map(|item| (item, where_is(item)))
        .collect();
    sources.flags = options.flags.clone();
    match settings::resolve(sources)? {
        FunctionConfig::Validation(settings) => Ok(settings),
        _ => unreachable!("validate takes Validation settings only"),
    }
}

/// One problem as a line: `file: severity: resource: field: message`.
fn line(result: &FnResult, manifests: &Manifests) -> String {
    let mut result = result.clone();
    let mut parts = Vec::with_capacity(5);
    if let Some(file) = &mut result.file {
        file.path = manifests.display_path(&file.path);
        parts.push(file.to_string());
    }
    manifests.locate(&mut result);
    parts.push(
        match result.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
        .to_string(),
    );
    if let Some(r) = &result.resource {
        parts.push(r.to_string());
    }
    if let Some(field) = &result.field {
        parts.push(field.clone());
    }
    parts.push(result.text());
    parts.join(": ")
}

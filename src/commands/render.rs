//! The file renderer: manifest files in, a YAML stream (or a diff) out.
//! What Argo CD, Helm, kustomize's exec plugins and CI run (`render`, `render
//! --diff`, `diff`, `post-render`); the KRM function's core does the work.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;

use clap::Args;

use crate::commands::diff;
use crate::commands::flags::{NadSettings, PodSettings, given};
use crate::commands::manifests::{self, Input, Manifests, STDIN};
use crate::commands::outcome::{Error, Host, Outcome};
use crate::k8s::resource::{self, FileRef};
use crate::k8s::workload::WorkloadKinds;
use crate::krm::results::{FnResult, Severity, plural};
use crate::multus::apply_order;
use crate::pipeline::environment::{self, Environment};
use crate::pipeline::settings::{self, Given, Sources, Takes};
use crate::pipeline::{self, FunctionConfig};
use crate::yaml::{self, Node};

/// What `post-render` says when workloads have no namespace and none is set.
const POST_RENDER_NAMESPACE_HINT: &str = "Helm does not tell a post-renderer the release namespace; pass it as --post-renderer-args=--default-namespace=NAMESPACE (the namespace of helm -n), so that the namespace's linkerd.io/multus and linkerd.io/inject annotations count and the NAD is generated in it";

/// What `diff` exits with, as its help shows it.
pub const DIFF_EXIT_CODES: &str = "\
Exit codes:
  0  every file is rendered
  1  rendering would change a file: the diff is on stdout
  2  the files could not be checked (an input or a setting is wrong, an opt-in annotation is written wrong (a value neither enabled nor disabled, a misspelt key), or the rules found an error: stderr says which), or the command line is wrong";

/// `render`: files, directories or stdin to a YAML stream, or a diff.
#[derive(Args)]
pub struct RenderArgs {
    /// Files and directories (walked recursively; hidden ones, Kptfiles and
    /// local-config objects are left out), or - for stdin.
    #[arg(value_name = "PATH|-", default_value = "-")]
    paths: Vec<String>,
    /// Prints a unified diff of what rendering changes instead of the result.
    #[arg(long)]
    diff: bool,
    #[command(flatten)]
    settings: SettingsArgs,
}

/// `diff`: whether rendering would change the files. None of its flags is
/// one of Linkerd's (`--context` is `--reference` here), so a Linkerd user's
/// habits do not change its meaning.
#[derive(Args)]
pub struct DiffArgs {
    /// Files and directories, as for render.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
    /// Files or directories read to decide but not printed: the Linkerd-CNI
    /// ConfigMap, Namespaces, NADs already in the cluster.
    #[arg(long, value_name = "PATH")]
    reference: Vec<PathBuf>,
    /// Succeeds with empty output when the inputs hold no resources.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    core: CoreSettings,
}

/// `post-render`: Helm's manifests on stdin, rendered on stdout.
#[derive(Args)]
pub struct PostRenderArgs {
    #[command(flatten)]
    settings: SettingsArgs,
}

/// The renderer's settings and inputs.
#[derive(Args)]
struct SettingsArgs {
    /// Files or directories read to decide but not printed: the Linkerd-CNI
    /// ConfigMap, Namespaces, NADs already in the cluster. Its old name
    /// --context still works.
    #[arg(long, value_name = "PATH", alias = "context")]
    reference: Vec<PathBuf>,
    /// Succeeds with empty output when the inputs hold no resources.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    core: CoreSettings,
}

/// The settings for rendering files: those of a pod and those of the NADs,
/// namespaces and workloads of a package.
#[derive(Args)]
struct CoreSettings {
    /// A file holding the settings: a LinkerdMultus object (or a ConfigMap).
    /// A LinkerdMultus among the inputs is read the same way. For `render`, a
    /// NetworkResources object runs the network-resources rules instead.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    pod: PodSettings,
    #[command(flatten)]
    nad: NadSettings,
    /// Annotations of namespaces not in the input, as YAML or JSON:
    /// '{demo: {annotations: {linkerd.io/multus: enabled}}}'.
    #[arg(long, value_name = "YAML")]
    namespaces: Option<String>,
    /// Workload kinds beyond the built-in ones, as YAML or JSON:
    /// '[{apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}]'.
    #[arg(long, value_name = "YAML")]
    workload_kinds: Option<String>,
    /// Namespace of resources without metadata.namespace (helm -n, Argo CD's
    /// destination).
    #[arg(long, value_name = "NAMESPACE")]
    default_namespace: Option<String>,
    /// Stamp the hash of their NAD config on attached pod templates, so a
    /// changed config rolls them: off, all, or labelled (only those labelled
    /// config.linkerd.io/reconcile: auto) [default: off].
    #[arg(long, value_name = "MODE")]
    config_rollout: Option<String>,
}

impl CoreSettings {
    /// The flags given, by settings key.
    fn flags(self) -> Vec<(&'static str, String)> {
        let mut flags = self.pod.flags();
        flags.extend(self.nad.flags());
        flags.extend(given([
            ("namespaces", self.namespaces),
            ("workloadKinds", self.workload_kinds),
            ("defaultNamespace", self.default_namespace),
            ("configRollout", self.config_rollout),
        ]));
        flags
    }
}

impl SettingsArgs {
    fn into_options(self, inputs: Vec<Input>, mode: Mode) -> Options {
        Options {
            inputs,
            context: self.reference.into_iter().map(Input::Path).collect(),
            config: self.core.config.clone(),
            flags: self.core.flags(),
            mode,
            allow_empty: self.allow_empty,
            namespace_variables: &[],
            namespace_hint: None,
        }
    }
}

/// The inputs of command-line arguments: `-` is stdin.
fn inputs(paths: &[String]) -> Vec<Input> {
    paths.iter().map(|p| Input::from_arg(p)).collect()
}

impl RenderArgs {
    /// Runs `render`; `env` reads environment variables, `stdin` the text of `-`.
    pub fn run(
        self,
        env: &dyn Fn(&str) -> Option<String>,
        stdin: impl FnMut() -> io::Result<String>,
    ) -> Outcome {
        let mode = if self.diff { Mode::Diff } else { Mode::Stream };
        let mut options = self.settings.into_options(inputs(&self.paths), mode);
        // Argo CD applies resources without a namespace in the application's
        // destination namespace.
        options.namespace_variables = &["ARGOCD_APP_NAMESPACE"];
        run(&options, env, stdin)
    }
}

impl DiffArgs {
    /// Runs `diff`.
    pub fn run(
        self,
        env: &dyn Fn(&str) -> Option<String>,
        stdin: impl FnMut() -> io::Result<String>,
    ) -> Outcome {
        let settings = SettingsArgs {
            reference: self.reference,
            allow_empty: self.allow_empty,
            core: self.core,
        };
        let options = settings.into_options(inputs(&self.paths), Mode::Check);
        run(&options, env, stdin)
    }
}

impl PostRenderArgs {
    /// Runs `post-render`.
    pub fn run(
        self,
        env: &dyn Fn(&str) -> Option<String>,
        stdin: impl FnMut() -> io::Result<String>,
    ) -> Outcome {
        let mut options = self.settings.into_options(vec![Input::Stdin], Mode::Stream);
        options.namespace_hint = Some(POST_RENDER_NAMESPACE_HINT);
        run(&options, env, stdin)
    }
}

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The rendered resources as one YAML stream.
    Stream,
    /// A unified diff of what rendering changes; exits 0.
    Diff,
    /// The same diff; exits 1 when there is one.
    Check,
}

/// A run of the renderer.
#[derive(Debug, Clone)]
pub struct Options {
    /// Files, directories or stdin holding the resources.
    pub inputs: Vec<Input>,
    /// Files or directories read to decide (the Linkerd-CNI ConfigMap,
    /// Namespaces, NADs already in the cluster) but not printed.
    pub context: Vec<Input>,
    /// A file holding the `LinkerdMultus` settings (or a ConfigMap).
    pub config: Option<PathBuf>,
    /// Settings from command-line flags: key and value, applied last.
    pub flags: Vec<(&'static str, String)>,
    /// What to print.
    pub mode: Mode,
    /// Whether an input without resources is fine.
    pub allow_empty: bool,
    /// Variables naming the namespace the host puts resources without one
    /// in (Argo CD's `ARGOCD_APP_NAMESPACE`): the `defaultNamespace` when no
    /// setting gives one.
    pub namespace_variables: &'static [&'static str],
    /// How to give that namespace when no setting gives one and workloads
    /// have none: said in a warning after the count of those workloads.
    pub namespace_hint: Option<&'static str>,
}

/// Renders the inputs; `env` reads environment variables, `stdin` the text of `-`.
pub fn run(
    options: &Options,
    env: &dyn Fn(&str) -> Option<String>,
    stdin: impl FnMut() -> io::Result<String>,
) -> Outcome {
    run_inner(options, env, stdin)
        .unwrap_or_else(|e| Outcome::failed(&e, options.mode == Mode::Check))
}

fn run_inner(
    options: &Options,
    env: &dyn Fn(&str) -> Option<String>,
    stdin: impl FnMut() -> io::Result<String>,
) -> Result<Outcome, Error> {
    if options.context.contains(&Input::Stdin) {
        return Err(Error::ContextFromStdin);
    }
    let mut manifests = Manifests::read(&options.inputs, options.mode != Mode::Stream, stdin)?;
    let (context, context_origins) = read_context(options, &manifests)?;
    let set_aside = take_settings_objects(&mut manifests.items);
    let config = settings(options, env, &set_aside, &manifests)?;
    if manifests.items.is_empty() && !options.allow_empty {
        let inputs: Vec<String> = options.inputs.iter().map(ToString::to_string).collect();
        // Only post-render has a namespace hint: Helm runs it.
        return Err(Error::NoObjects {
            inputs: inputs.join(", "),
            host: Host::of(options.namespace_hint.is_some(), env),
        });
    }

    let mut items = std::mem::take(&mut manifests.items);
    items.extend(context.items);
    let results = pipeline::render(&mut items, &config)?;
    // Generated NADs get new files, so a resource from a context file is
    // exactly one whose file and position are a context file's.
    let is_context =
        |item: &Node| manifests::origin(item).is_some_and(|o| context_origins.contains(&o));

    let mut stderr = String::new();
    let mut errors = 0;
    for result in &results {
        if result.severity == Severity::Info && !result.to_act {
            continue;
        }
        errors += usize::from(result.severity == Severity::Error);
        stderr.push_str(&show(result, &manifests));
        stderr.push('\n');
    }
    if let Some(warning) = namespace_warning(options, &config, &items, &is_context) {
        stderr.push_str(&warning);
    }
    // A warning about a mistake the render goes past (an opt-in annotation
    // written wrong: a value neither enabled nor disabled, a misspelt key)
    // fails the CI gate.
    let mistakes = results.iter().filter(|r| r.fails_diff).count();
    if errors == 0 && mistakes > 0 && options.mode == Mode::Check {
        let (are, they) = if mistakes == 1 {
            ("is", "it is")
        } else {
            ("are", "they are")
        };
        stderr.push_str(&format!(
            "{} above {are} written wrong (a value neither enabled nor disabled, or a misspelt key); the files are not checked until {they} fixed\n",
            plural(mistakes, "opt-in annotation")
        ));
    }
    if errors > 0 || (mistakes > 0 && options.mode == Mode::Check) {
        return Ok(Outcome {
            stdout: String::new(),
            stderr,
            code: if options.mode == Mode::Check { 2 } else { 1 },
        });
    }

    match options.mode {
        Mode::Stream => {
            items.retain(|i| !is_context(i) && !resource::is_local_config(i));
            apply_order::sort(&mut items);
            if manifests.tagged {
                items.iter_mut().for_each(|i| manifests.untag(i));
            }
            Ok(Outcome {
                stdout: yaml::emit_stream(&items),
                stderr,
                code: 0,
            })
        }
        Mode::Diff | Mode::Check => {
            let output: Vec<&Node> = items.iter().filter(|i| !is_context(i)).collect();
            let files = changed_files(&manifests, &output, &set_aside, options);
            let (text, changed) = diff::unified(&files);
            let code = i32::from(options.mode == Mode::Check && changed > 0);
            if options.mode == Mode::Check {
                stderr.push_str(&match changed {
                    0 => format!("{} files up to date\n", files.len()),
                    1 => format!(
                        "1 file is not rendered; run the render ({}) and commit the result\n",
                        render_command(&manifests)
                    ),
                    n => format!(
                        "{n} files are not rendered; run the render ({}) and commit the result\n",
                        render_command(&manifests)
                    ),
                });
            }
            Ok(Outcome {
                stdout: text,
                stderr,
                code,
            })
        }
    }
}

/// The command that renders the package: `kpt fn render`, with
/// `--allow-exec` when its Kptfile runs a function by `exec:` (kpt refuses
/// to run one without it).
fn render_command(manifests: &Manifests) -> &'static str {
    let runs_exec = manifests
        .root
        .as_ref()
        .and_then(|root| std::fs::read_to_string(root.join(manifests::KPTFILE)).ok())
        .and_then(|text| yaml::parse_document(&text).ok())
        .is_some_and(|kptfile| {
            ["mutators", "validators"].iter().any(|stage| {
                kptfile
                    .get_path(&["pipeline", stage])
                    .and_then(Node::as_seq)
                    .is_some_and(|functions| {
                        functions
                            .items
                            .iter()
                            .any(|f| f.get_path(&["exec"]).is_some())
                    })
            })
        });
    if runs_exec {
        "kpt fn render --allow-exec"
    } else {
        "kpt fn render"
    }
}

/// The `--reference` files, and the file and position of each of their
/// resources; a file may not be both an input and context.
fn read_context(
    options: &Options,
    manifests: &Manifests,
) -> Result<(Manifests, BTreeSet<(String, usize)>), Error> {
    let context =
        Manifests::read(&options.context, false, || unreachable!("checked above"))?.without_root();
    let mut origins = BTreeSet::new();
    for item in &context.items {
        if let Some(origin) = manifests::origin(item) {
            if manifests.files.contains_key(&origin.0) {
                return Err(Error::InputAndContext(origin.0));
            }
            origins.insert(origin);
        }
    }
    Ok((context, origins))
}

/// The warning that workloads have no namespace and none is set, with
/// [`Options::namespace_hint`]; `None` without a hint or such workloads.
fn namespace_warning(
    options: &Options,
    config: &FunctionConfig,
    items: &[Node],
    is_context: &dyn Fn(&Node) -> bool,
) -> Option<String> {
    let hint = options.namespace_hint?;
    let FunctionConfig::LinkerdMultus(settings) = config else {
        return None;
    };
    if settings.default_namespace.is_some() {
        return None;
    }
    let kinds = WorkloadKinds::new(&settings.workload_kinds);
    let without = items
        .iter()
        .filter(|item| !is_context(item))
        .filter_map(|item| resource::resource_ref(item).ok())
        .filter(|r| r.namespace.is_none() && kinds.find(r.group(), &r.kind).is_some())
        .count();
    let (have, their, them) = match without {
        0 => return None,
        1 => ("has", "its", "it"),
        _ => ("have", "their", "them"),
    };
    Some(format!(
        "warning: {} {have} no metadata.namespace and no default namespace is set, so only {their} own annotations decide {them}: {hint}\n",
        plural(without, "workload")
    ))
}

/// Removes the settings objects (`LinkerdMultus`, `NetworkResources`) from
/// the resources: they configure the renderer and are not applied.
fn take_settings_objects(items: &mut Vec<Node>) -> Vec<Node> {
    let (settings, rest): (Vec<Node>, Vec<Node>) = std::mem::take(items)
        .into_iter()
        .partition(|item| Takes::Rendering.is_settings_object(item));
    *items = rest;
    settings
}

/// The settings: the config object, then environment variables, then flags.
fn settings(
    options: &Options,
    env: &dyn Fn(&str) -> Option<String>,
    objects: &[Node],
    manifests: &Manifests,
) -> Result<FunctionConfig, settings::Error> {
    let where_is = |item: &Node| {
        resource::file_ref(item)
            .map_or_else(|| "the input".to_string(), |f| show_file(&f, manifests))
    };
    let mut sources = Sources::new(Takes::Rendering);
    if let Some(path) = &options.config {
        sources.given = Given::File {
            source: "--config",
            path,
        };
    }
    sources.found = objects.iter().map(|o| (o, where_is(o))).collect();
    sources.environment = Some(Environment {
        read: env,
        argocd: true,
        namespace_variables: options.namespace_variables,
    });
    sources.flags = environment::flags(options.flags.clone());
    settings::resolve(sources)
}

/// Each file before and after rendering, by the path to show.
fn changed_files(
    manifests: &Manifests,
    output: &[&Node],
    set_aside: &[Node],
    options: &Options,
) -> diff::Files {
    let stdin_only = options.inputs.iter().all(|i| *i == Input::Stdin);
    let mut after: BTreeMap<String, Vec<(usize, &Node)>> = BTreeMap::new();
    for (position, item) in output.iter().copied().chain(set_aside).enumerate() {
        let (path, index) = match manifests::origin(item) {
            Some(_) if stdin_only => (STDIN.to_string(), position),
            Some(origin) => origin,
            None => (STDIN.to_string(), position),
        };
        after.entry(path).or_default().push((index, item));
    }
    let mut files = diff::Files::new();
    for (path, docs) in &manifests.files {
        let before = (!docs.is_empty()).then(|| yaml::emit_stream(docs));
        files.insert(manifests.display_path(path), (before, None));
    }
    for (path, mut docs) in after {
        docs.sort_by_key(|(index, _)| *index);
        let text = if manifests.tagged {
            manifests.to_stream(docs.into_iter().map(|(_, d)| d))
        } else {
            yaml::emit_stream(docs.into_iter().map(|(_, d)| d))
        };
        files.entry(manifests.display_path(&path)).or_default().1 = Some(text);
    }
    files
}

/// A result as one line, with the file as the user knows it.
fn show(result: &FnResult, manifests: &Manifests) -> String {
    let mut result = result.clone();
    if let Some(file) = &mut result.file {
        file.path = manifests.display_path(&file.path);
    }
    manifests.locate(&mut result);
    result.to_string()
}

fn show_file(file: &FileRef, manifests: &Manifests) -> String {
    FileRef {
        path: manifests.display_path(&file.path),
        index: file.index,
    }
    .to_string()
}

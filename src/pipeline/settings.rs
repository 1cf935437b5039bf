//! The settings of a run, resolved in one place for every front, as ripgrep
//! resolves its flags: what each front takes ([`Takes`], the definitions),
//! where settings come from ([`Sources`]: the ResourceList's functionConfig or
//! a settings file, settings objects among the inputs, environment variables,
//! flags) and the settings they resolve to ([`FunctionConfig`], one rule
//! set's). The kind of the settings object names the rule set; a setting
//! given in more than one place is taken from the last in this order: the
//! object, `LINKERD_MULTUS_*`, Argo CD's `env` and parameters, the flags, and,
//! for the default namespace only, the host's namespace variable.

use std::borrow::Cow;
use std::io;
use std::path::Path;

use crate::k8s::resource;
use crate::krm::function_config::{
    self as function_config, API_VERSION, SettingsError, SettingsKind, SettingsObject,
};
use crate::krm::results::{FnResult, Severity};
use crate::linkerd_cni;
use crate::network_resources;
use crate::pipeline::environment::{EnvError, Environment, Value};
use crate::validation;
use crate::yaml::{self, Node, ParseError};

/// The settings of a run: one rule set's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionConfig {
    /// Attach Linkerd-CNI (a `LinkerdMultus`, a ConfigMap, or no object).
    LinkerdMultus(linkerd_cni::settings::Settings),
    /// Apply the network-resources rules (a `NetworkResources`).
    NetworkResources(network_resources::settings::Settings),
    /// Check the package and change nothing (a `Validation`).
    Validation(validation::settings::Settings),
}

/// The settings objects a front takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// Any kind; a ConfigMap or no object is a `LinkerdMultus`: the KRM function.
    Any,
    /// A `LinkerdMultus` or a `NetworkResources`, also among the inputs: the renderer.
    Rendering,
    /// A `Validation`, also among the inputs: `validate`.
    Validation,
    /// A `LinkerdMultus`: the webhook's `--config`.
    LinkerdMultus,
    /// A `NetworkResources`: the webhook's `--network-resources`.
    NetworkResources,
}

const LINKERD_MULTUS: &str = linkerd_cni::settings::KIND;
const NETWORK_RESOURCES: &str = network_resources::settings::KIND;
const VALIDATION: &str = validation::settings::KIND;
/// The kinds of the settings objects of the rule sets.
const RULE_SET_KINDS: &[&str] = &[LINKERD_MULTUS, NETWORK_RESOURCES, VALIDATION];
/// Every kind of [`API_VERSION`]: the rule sets' and `linkerd multus
/// install`'s (`LinkerdMultusInstall`, read by the extension).
const KINDS: &[&str] = &[
    LINKERD_MULTUS,
    NETWORK_RESOURCES,
    VALIDATION,
    "LinkerdMultusInstall",
];

/// The error for an object near a settings object without being one
/// ([`function_config::near_miss`]): `multus.linkerd.io/v1`, `LinkerdMultis`.
pub fn near_miss(item: &Node) -> Option<SettingsError> {
    function_config::near_miss(item, KINDS)
}

impl Takes {
    /// The kinds of the settings objects the front takes out of its inputs.
    fn among_inputs(self) -> &'static [&'static str] {
        match self {
            Takes::Rendering => &[LINKERD_MULTUS, NETWORK_RESOURCES],
            Takes::Validation => &[VALIDATION],
            _ => &[],
        }
    }

    /// Whether `item` is a settings object the front takes out of its inputs
    /// rather than processing it: one of its kinds, or one near a settings
    /// object ([`near_miss`]), which [`resolve`] refuses.
    pub fn is_settings_object(self, item: &Node) -> bool {
        let among_inputs = self.among_inputs();
        match SettingsObject::of(item) {
            Ok(SettingsObject::Typed { kind, .. }) if among_inputs.contains(&kind) => true,
            _ => !among_inputs.is_empty() && near_miss(item).is_some(),
        }
    }

    /// The kind messages name for its objects among the inputs.
    fn kind(self) -> &'static str {
        match self {
            Takes::Validation => VALIDATION,
            Takes::NetworkResources => NETWORK_RESOURCES,
            _ => LINKERD_MULTUS,
        }
    }

    /// The kinds it takes, as an error for another kind names them.
    fn expected(self) -> String {
        match self {
            Takes::Validation => VALIDATION.to_string(),
            _ => format!("{LINKERD_MULTUS}, {NETWORK_RESOURCES} or {VALIDATION}"),
        }
    }
}

/// The settings object a host gives.
#[derive(Debug, Clone, Copy)]
pub enum Given<'a> {
    /// None.
    Nothing,
    /// The ResourceList's `functionConfig`: errors are the settings' own.
    FunctionConfig(&'a Node),
    /// A settings file, named by a flag or a variable (`source`).
    File {
        /// The flag or variable, as errors name it: `--config`.
        source: &'a str,
        /// The file.
        path: &'a Path,
    },
}

/// Where the settings of a run come from.
pub struct Sources<'a> {
    /// What the front takes.
    pub takes: Takes,
    /// The settings object the host gives.
    pub given: Given<'a>,
    /// The settings objects among the inputs ([`Takes::is_settings_object`]),
    /// each with where it is, as messages name it.
    pub found: Vec<(&'a Node, String)>,
    /// The environment, when the front reads settings from it.
    pub environment: Option<Environment<'a>>,
    /// Settings given as flags, applied after the environment's.
    pub flags: Vec<Value>,
}

impl<'a> Sources<'a> {
    /// The sources of a front that takes `takes`, as yet with none given.
    pub fn new(takes: Takes) -> Self {
        Sources {
            takes,
            given: Given::Nothing,
            found: Vec::new(),
            environment: None,
            flags: Vec::new(),
        }
    }
}

/// Why the settings of a run could not be resolved: one line for people.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A settings file could not be read.
    #[error("{at}: {error}")]
    Unreadable {
        /// The flag or variable and the file.
        at: String,
        /// Why.
        error: io::Error,
    },
    /// A settings file is not YAML.
    #[error("{at}: not valid YAML: {error}")]
    NotYaml {
        /// The flag or variable and the file.
        at: String,
        /// Where and what.
        error: ParseError,
    },
    /// Two settings objects: which two.
    #[error("settings are given twice: {0}; keep one")]
    Twice(String),
    /// The functionConfig's settings are wrong.
    #[error(transparent)]
    FunctionConfig(SettingsError),
    /// The settings kpt made of the arguments after `--` are wrong.
    #[error("{arguments}: {error}")]
    Arguments {
        /// The arguments, as written: ``the argument `nadNme=x` after `--` ``.
        arguments: String,
        /// What is wrong.
        error: SettingsError,
    },
    /// A settings object's settings are wrong.
    #[error("{at}: {error}")]
    Object {
        /// Where the object is.
        at: String,
        /// What is wrong.
        error: SettingsError,
    },
    /// A `Validation` given to the renderer.
    #[error(
        "{at} is a {VALIDATION}: it configures linkerd-multus validate, which checks files without rendering them"
    )]
    ValidationToRender {
        /// Where it is.
        at: String,
    },
    /// A `NetworkResources` given as the webhook's `--config`.
    #[error(
        "{at}: is a {NETWORK_RESOURCES}: the webhook takes it as --network-resources {path} (--config holds the {LINKERD_MULTUS} settings)"
    )]
    NetworkResourcesAsConfig {
        /// The flag and the file.
        at: String,
        /// The file.
        path: String,
    },
    /// A `LinkerdMultus` given as the webhook's `--network-resources`.
    #[error(
        "{at}: is a {LINKERD_MULTUS}: give it as --config; {given_as} takes a {NETWORK_RESOURCES} ({API_VERSION}) or a ConfigMap"
    )]
    LinkerdMultusAsNetworkResources {
        /// The flag or variable and the file.
        at: String,
        /// The flag or variable.
        given_as: String,
    },
    /// A `LinkerdMultus` flag beside a `NetworkResources` object.
    #[error(
        "{flag} is a {LINKERD_MULTUS} setting, but {at} is a {NETWORK_RESOURCES}: settings of the network-resources rules go in it"
    )]
    FlagBesideNetworkResources {
        /// The flag.
        flag: String,
        /// Where the object is.
        at: String,
    },
    /// An environment variable does not make sense.
    #[error(transparent)]
    Environment(#[from] EnvError),
    /// Two settings contradict each other, wherever each was given.
    #[error("{at}settings: {problem}")]
    Conflict {
        /// Where the settings object is, with a colon, if there is one.
        at: String,
        /// Which settings, and what to do.
        problem: String,
    },
    /// A value given as text is wrong.
    #[error("{at}: {error}")]
    Value {
        /// Where it was given.
        at: String,
        /// What is wrong.
        error: SettingsError,
    },
}

/// Resolves the settings of a run: the settings object (at most one of the
/// given one and those among the inputs), of a kind the front takes, then the
/// environment and the flags, which set `LinkerdMultus` settings (flags also
/// `Validation` ones).
pub fn resolve(sources: Sources<'_>) -> Result<FunctionConfig, Error> {
    let Sources {
        takes,
        given,
        found,
        environment,
        flags,
    } = sources;
    if let Some((error, at)) = found
        .iter()
        .find_map(|(node, at)| Some((near_miss(node)?, at)))
    {
        return Err(Error::Object {
            at: at.clone(),
            error,
        });
    }
    let (node, at) = the_object(takes, given, &found)?;
    let read = read(node.as_deref(), takes).map_err(|error| match (&at, given) {
        (Some(at), _) => Error::Object {
            at: at.clone(),
            error,
        },
        (None, Given::FunctionConfig(node)) => {
            match function_config::as_arguments(node, &error.keys()) {
                Some(arguments) => Error::Arguments { arguments, error },
                None => Error::FunctionConfig(error),
            }
        }
        (None, _) => Error::FunctionConfig(error),
    });
    let at = at.unwrap_or_default();
    let Some(mut config) = read? else {
        return Err(elsewhere(takes, given, at));
    };
    layer(&mut config, takes, environment, &flags, at)?;
    Ok(config)
}

/// The settings object of a run and where it is (`None`: the
/// functionConfig): the given one or the one among the inputs; two are an
/// error.
fn the_object<'a>(
    takes: Takes,
    given: Given<'a>,
    found: &[(&'a Node, String)],
) -> Result<(Option<Cow<'a, Node>>, Option<String>), Error> {
    let kind = takes.kind();
    Ok(match (given, found) {
        (Given::File { source, path }, []) => {
            let file = read_file(source, path)?;
            let at = format!("{source} {}", path.display());
            (Some(Cow::Owned(file)), Some(at))
        }
        (Given::File { source, path }, [(_, at), ..]) => {
            let path = path.display();
            return Err(Error::Twice(format!(
                "{source} {path} and the {kind} in {at}"
            )));
        }
        (Given::FunctionConfig(node), _) => (Some(Cow::Borrowed(node)), None),
        (Given::Nothing, []) => (None, None),
        (Given::Nothing, [(node, at)]) => (Some(Cow::Borrowed(*node)), Some(at.clone())),
        (Given::Nothing, [(_, first), (_, second), ..]) => {
            return Err(Error::Twice(format!(
                "a {kind} in {first} and another in {second}"
            )));
        }
    })
}

/// The error for a settings file that the front takes under another flag.
fn elsewhere(takes: Takes, given: Given<'_>, at: String) -> Error {
    let (source, path) = match given {
        Given::File { source, path } => (source, path.display().to_string()),
        _ => ("", String::new()),
    };
    match takes {
        Takes::LinkerdMultus => Error::NetworkResourcesAsConfig { at, path },
        _ => Error::LinkerdMultusAsNetworkResources {
            at,
            given_as: source.to_string(),
        },
    }
}

/// Layers the environment and the flags on the settings the object gave
/// (found `at`), as its rule set takes them.
fn layer(
    config: &mut FunctionConfig,
    takes: Takes,
    environment: Option<Environment<'_>>,
    flags: &[Value],
    at: String,
) -> Result<(), Error> {
    match config {
        FunctionConfig::LinkerdMultus(settings) => {
            if let Some(environment) = &environment {
                apply(settings, &environment.values()?)?;
            }
            apply(settings, flags)?;
            if let Some((variable, namespace)) = environment
                .filter(|_| settings.default_namespace.is_none())
                .and_then(|e| e.namespace())
            {
                let value = Value {
                    key: "defaultNamespace",
                    value: namespace,
                    source: format!("environment variable {variable}"),
                };
                apply(settings, &[value])?;
            }
            if let Some(problem) = settings.conflict() {
                let at = if at.is_empty() { at } else { format!("{at}: ") };
                return Err(Error::Conflict { at, problem });
            }
        }
        FunctionConfig::Validation(_) if takes == Takes::Rendering => {
            return Err(Error::ValidationToRender { at });
        }
        FunctionConfig::Validation(settings) => apply(settings, flags)?,
        FunctionConfig::NetworkResources(_) => {
            if let Some(flag) = flags.first() {
                return Err(Error::FlagBesideNetworkResources {
                    flag: flag.source.clone(),
                    at,
                });
            }
        }
    }
    Ok(())
}

/// The kind dispatch: reads a settings object (`None`: there is none) as
/// the rule set its kind names, when `takes` takes that kind; `Ok(None)` when
/// the front takes objects of that kind elsewhere (under another flag).
fn read(node: Option<&Node>, takes: Takes) -> Result<Option<FunctionConfig>, SettingsError> {
    use FunctionConfig as C;
    let Some(node) = node.filter(|n| takes == Takes::NetworkResources || !n.is_null()) else {
        return Ok(Some(match takes {
            Takes::Validation => C::Validation(Default::default()),
            _ => C::LinkerdMultus(Default::default()),
        }));
    };
    let object = SettingsObject::of(node)?;
    if let Some(error) = near_miss(node) {
        return Err(error);
    }
    let typed = match object {
        SettingsObject::Typed { kind, .. } => kind,
        SettingsObject::ConfigMap(_) => takes.kind(),
        SettingsObject::Other { kind, .. } if takes == Takes::NetworkResources => kind,
        SettingsObject::Other { .. } => "",
    };
    let config = match (takes, typed) {
        (Takes::LinkerdMultus, NETWORK_RESOURCES) | (Takes::NetworkResources, LINKERD_MULTUS) => {
            return Ok(None);
        }
        (Takes::Validation, VALIDATION) => C::Validation(SettingsKind::from_object(node)?),
        (Takes::Validation, _) => return Err(object.wrong_kind(takes.expected())),
        (Takes::Any | Takes::Rendering | Takes::NetworkResources, NETWORK_RESOURCES) => {
            C::NetworkResources(SettingsKind::from_object(node)?)
        }
        (Takes::Any | Takes::Rendering, VALIDATION) => {
            C::Validation(SettingsKind::from_object(node)?)
        }
        (Takes::NetworkResources, _) => return Err(object.wrong_kind(takes.expected())),
        (_, LINKERD_MULTUS) => C::LinkerdMultus(SettingsKind::from_object(node)?),
        _ => return Err(object.wrong_kind(takes.expected())),
    };
    Ok(Some(config))
}

/// The settings objects among `items` that would be applied as they are:
/// of a rule set's kind (or near one) and not marked
/// `config.kubernetes.io/local-config`. No API server serves their kinds, so
/// an apply of the output fails on them; in a kustomization, the function's
/// settings listed under `resources:` are one (kustomize copies them to its
/// output). An error result for each, naming the object and its file; the
/// settings objects `takes` reads among its inputs are not to apply.
pub fn settings_to_apply(takes: Takes, items: &[Node]) -> Vec<FnResult> {
    let mut results = Vec::new();
    for item in items {
        let message = match near_miss(item) {
            Some(near) => format!(
                "{}; as it is, it is no linkerd-multus settings object but an object to apply",
                near_miss_problem(near)
            ),
            None => match SettingsObject::of(item) {
                Ok(SettingsObject::Typed { kind, .. })
                    if RULE_SET_KINDS.contains(&kind) && !takes.among_inputs().contains(&kind) =>
                {
                    format!(
                        "linkerd-multus settings, not an object to apply: no API server serves {API_VERSION}, so an apply fails on it; list its file under transformers: in a kustomization, not under resources: (there kustomize copies it to the output and never runs the function), or mark it config.kubernetes.io/local-config: \"true\""
                    )
                }
                _ => continue,
            },
        };
        if resource::is_local_config(item) {
            continue;
        }
        let mut result = FnResult::new(Severity::Error, message);
        result.resource = resource::resource_ref(item).ok();
        result.file = resource::file_ref(item);
        results.push(result);
    }
    results
}

/// What a near-miss error says after the object it names.
fn near_miss_problem(error: SettingsError) -> String {
    match error {
        SettingsError::NearMiss { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// Reads the YAML settings file `path` given as `source` (a flag, or an
/// environment variable); errors start with both.
fn read_file(source: &str, path: &Path) -> Result<Node, Error> {
    let at = format!("{source} {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|error| Error::Unreadable {
        at: at.clone(),
        error,
    })?;
    yaml::parse_document(&text).map_err(|error| Error::NotYaml { at, error })
}

/// Applies text values in order; the error names the first bad one.
fn apply(settings: &mut impl SettingsKind, values: &[Value]) -> Result<(), Error> {
    for value in values {
        settings
            .override_with([(value.key, value.value.as_str())])
            .map_err(|error| Error::Value {
                at: value.source.clone(),
                error,
            })?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;

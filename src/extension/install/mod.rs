//! `linkerd multus install`: the cluster side from one configuration
//! ([`options`]), printed for `kubectl apply --server-side -f -`. What it prints is the kpt
//! packages' objects ([`packages`]) with their setters applied
//! ([`setters`]), and the webhook's certificates ([`certificates`]): made
//! here, or kept from the cluster ([`cluster`]) when `install` made them, or
//! left to cert-manager. It takes only a namespace of its own
//! ([`ownership`](super::ownership)), and admits only the API server to the
//! webhook's port where it can tell its addresses ([`callers`]). The same
//! options, certificates and callers give the same bytes.

pub mod callers;
pub mod certificates;
pub mod cluster;
pub mod day2;
pub mod exclusions;
pub mod monitoring;
pub mod options;
pub mod packages;
pub mod setters;

use base64::Engine as _;

use callers::Callers;
use certificates::{Certificates, SECRET, SECRET_TYPE, SERVICE};
use cluster::NamespaceState;
use options::{Certs, Options};

use super::client::Target;
use super::ownership::{MARK, MARK_VALUE};
use super::{EXTENSION_LABEL, NAME};
use crate::yaml::{Map, Node, Seq, emit_stream};

/// Why `install` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is not valid.
    #[error(transparent)]
    Options(#[from] options::OptionsError),
    /// The cluster could not be read for the namespace or the certificates.
    #[error(
        "reading the cluster for the extension's namespace and the webhook's certificates: {}; pass --ignore-cluster to render without reading it (or --kubeconfig, --context for the cluster)",
        crate::extension::client::anyhow_text(.0)
    )]
    Cluster(anyhow::Error),
    /// The namespace exists and is not the extension's.
    #[error(
        "namespace {namespace:?} exists and linkerd-multus install did not make it (it lacks the annotation {MARK}={MARK_VALUE}): install puts the extension only in a namespace of its own, which uninstall deletes with everything in it. Pass --namespace with a namespace that does not exist yet; or, if {namespace} holds nothing but linkerd-multus (installed before install marked its namespace), mark it: kubectl annotate namespace {namespace} {MARK}={MARK_VALUE}"
    )]
    ForeignNamespace {
        /// The namespace.
        namespace: String,
    },
    /// The namespace is being deleted.
    #[error(
        "namespace {namespace:?} is being deleted: the API server refuses new objects in it until it is gone, and its certificates go with it, so install printed nothing; wait until it is gone (kubectl wait --for=delete namespace/{namespace} --timeout=5m), then run install again"
    )]
    NamespaceDeleting {
        /// The namespace.
        namespace: String,
    },
    /// The certificates could not be made.
    #[error("making the webhook's certificates: {0:#}")]
    Certificates(anyhow::Error),
    /// The packages embedded in this binary do not render (a defect).
    #[error("the packages embedded in this binary: {0:#}")]
    Packages(anyhow::Error),
}

/// What `install` prints: the YAML, and notes for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The objects, for `kubectl apply --server-side -f -`.
    pub yaml: String,
    /// What became of the namespace and the certificates, and warnings.
    pub notes: Vec<String>,
}

/// The manifests for `options`. Unless `--ignore-cluster`, reads whose the
/// namespace is (one that exists without the extension's mark is refused)
/// and, with `--certs generate`, its Secret's certificates.
pub async fn install(target: &Target, options: &Options) -> Result<Installed, Error> {
    let now = time::OffsetDateTime::now_utc();
    let namespace = &options.namespace;
    let mut notes = Vec::new();
    let state = if options.ignore_cluster {
        notes.push(format!(
            "warning: --ignore-cluster: whether namespace {namespace} exists was not checked; apply this only where it does not exist or is linkerd-multus's own: applied over a namespace of yours, it marks it ({MARK}), and uninstall would delete it with everything in it"
        ));
        None
    } else {
        let client = target.client().await.map_err(Error::Cluster)?;
        let state = cluster::namespace(&client, namespace)
            .await
            .map_err(Error::Cluster)?;
        match state {
            NamespaceState::Foreign => {
                return Err(Error::ForeignNamespace {
                    namespace: namespace.clone(),
                });
            }
            NamespaceState::Deleting => {
                return Err(Error::NamespaceDeleting {
                    namespace: namespace.clone(),
                });
            }
            NamespaceState::Absent | NamespaceState::Ours => Some((client, state)),
        }
    };
    let callers = match (Callers::given(options), &state) {
        (Some(callers), _) => callers,
        (None, Some((client, _))) => Callers::read(cluster::api_server_addresses(client).await),
        (None, None) => Callers::unread(options),
    };
    let certificates = match (options.certs, state) {
        (Certs::CertManager | Certs::OpenShiftServiceCa, _) => None,
        (Certs::Generate, Some((client, NamespaceState::Ours))) => {
            let existing = cluster::tls_secret(&client, namespace)
                .await
                .map_err(Error::Cluster)?;
            let (certs, decision) = certificates::keep_or_renew(namespace, existing, now)
                .map_err(Error::Certificates)?;
            notes.push(decision.note(namespace));
            Some(certs)
        }
        (Certs::Generate, state) => {
            let new = certificates::generate(namespace, now, None).map_err(Error::Certificates)?;
            if state.is_some() {
                notes.push(certificates::Decision::New.note(namespace));
            }
            Some(new)
        }
    };
    notes.extend(callers.note());
    let yaml = render(options, certificates.as_ref(), &callers).map_err(Error::Packages)?;
    Ok(Installed { yaml, notes })
}

/// The manifests for `options` with `certificates` (`None`: cert-manager's), the webhook's
/// port open to `callers`.
pub fn render(
    options: &Options,
    certificates: Option<&Certificates>,
    callers: &Callers,
) -> anyhow::Result<String> {
    Ok(emit_stream(&objects(options, certificates, callers)?))
}

/// The objects `install` prints for `options`, in order.
pub fn objects(
    options: &Options,
    certificates: Option<&Certificates>,
    callers: &Callers,
) -> anyhow::Result<Vec<Node>> {
    let (rights, rest) = packages::files(options);
    let mut objects = packages::objects(&rights, options)?;
    let mut rest = packages::objects(&rest, options)?;
    if let Some(certs) = certificates {
        objects.push(secret(&options.namespace, certs));
    }
    for object in &mut rest {
        match object.get_path(&["kind"]).and_then(Node::as_str) {
            Some("MutatingWebhookConfiguration") => {
                if let Some(certs) = certificates {
                    trust(object, &certs.ca_bundle);
                } else if options.certs == Certs::OpenShiftServiceCa {
                    annotate(object, SERVICE_CA_INJECT, "true");
                }
            }
            Some("Service")
                if options.certs == Certs::OpenShiftServiceCa
                    && object
                        .get_path(&["metadata", "name"])
                        .and_then(Node::as_str)
                        == Some(SERVICE) =>
            {
                annotate(object, SERVICE_CA_SECRET, SECRET);
            }
            Some("NetworkPolicy") => {
                if let Some(from) = callers.from() {
                    admit_only(object, from);
                }
            }
            Some("Deployment")
                if options.restart_stale_workloads
                    && object
                        .get_path(&["metadata", "name"])
                        .and_then(Node::as_str)
                        == Some(NAD_CONTROLLER) =>
            {
                for arg in restart_args(options) {
                    append_arg(object, &arg);
                }
            }
            _ => {}
        }
        day2::apply(object, options);
    }
    objects.extend(rest);
    if options.monitoring {
        objects.extend(monitoring::objects(&options.namespace)?);
    }
    Ok(objects)
}

/// The NAD controller's flag for [`Options::restart_stale_workloads`]: not a
/// setter of `deploy-nad-controller/`, whose users add it by hand with
/// `deploy-restarts/`.
pub const RESTART_STALE_WORKLOADS: &str = "--restart-stale-workloads=true";

/// The NAD controller's flags of the restarts: [`RESTART_STALE_WORKLOADS`], then the
/// concurrency and deadline where they are not its defaults.
pub fn restart_args(options: &Options) -> Vec<String> {
    let defaults = Options::default();
    let mut args = vec![RESTART_STALE_WORKLOADS.to_string()];
    if options.restart_concurrency != defaults.restart_concurrency {
        args.push(format!(
            "--restart-concurrency={}",
            options.restart_concurrency
        ));
    }
    if options.restart_deadline != defaults.restart_deadline {
        args.push(format!(
            "--restart-deadline={}",
            options::duration_text(options.restart_deadline)
        ));
    }
    args
}

/// The NAD controller's Deployment `controller` container.
fn controller_container(deployment: &mut Node) -> Option<&mut Map> {
    day2::container(deployment, CONTROLLER_CONTAINER)
}

/// The Deployment's `controller` container gets `arg` after its other args.
fn append_arg(deployment: &mut Node, arg: &str) {
    if let Some(Node::Seq(args)) = controller_container(deployment).and_then(|c| c.get_mut("args"))
    {
        // Plain, as the package writes its flags: `--…=true` reads back
        // as that string (`Node::string` would quote it, being cautious).
        args.items.push(Node::plain(arg));
    }
}

/// The controller container's memory limit with the restarts on (unless another is given,
/// [`day2`]), for their watches of every
/// pod (as metadata) and workload: measured by `cargo bench --bench controller` at 10,000
/// namespaces, 5,000 workloads and 50,000 pods, 66 MiB held and 78 MiB at a replica's start,
/// where the package's 64Mi holds the NAD controller alone. docs/benchmarks.md has the
/// figures.
pub const RESTARTS_MEMORY_LIMIT: &str = "128Mi";

/// The NAD controller's Deployment.
pub const NAD_CONTROLLER: &str = "linkerd-multus-nad-controller";
/// The name of its container.
const CONTROLLER_CONTAINER: &str = "controller";

/// The labels of every object of the extension.
fn labels() -> Node {
    Node::mapping([
        ("app.kubernetes.io/name", Node::string(SERVICE)),
        ("app.kubernetes.io/part-of", Node::string("linkerd-multus")),
        (EXTENSION_LABEL, Node::string(NAME)),
    ])
}

/// The Secret the Deployment mounts.
fn secret(namespace: &str, certs: &Certificates) -> Node {
    let b64 = |text: &str| Node::string(base64::engine::general_purpose::STANDARD.encode(text));
    Node::mapping([
        ("apiVersion", Node::string("v1")),
        ("kind", Node::string("Secret")),
        (
            "metadata",
            Node::mapping([
                ("name", Node::string(SECRET)),
                ("namespace", Node::string(namespace)),
                ("labels", labels()),
            ]),
        ),
        ("type", Node::string(SECRET_TYPE)),
        (
            "data",
            Node::mapping([
                ("ca.crt", b64(&certs.ca_bundle)),
                ("tls.crt", b64(&certs.cert)),
                ("tls.key", b64(&certs.key)),
            ]),
        ),
    ])
}

/// The Service's annotation that asks OpenShift's service CA operator for the
/// Secret of a serving certificate for the Service's names (`--certs openshift-service-ca`).
pub const SERVICE_CA_SECRET: &str = "service.beta.openshift.io/serving-cert-secret-name";

/// The webhook configuration's annotation that asks it for the caBundle.
pub const SERVICE_CA_INJECT: &str = "service.beta.openshift.io/inject-cabundle";

/// `object` annotated `key: value`, in place of cert-manager's CA injection: what
/// deploy/README.md has users do for OpenShift's service CA.
fn annotate(object: &mut Node, key: &str, value: &str) {
    let Some(metadata) = object.as_map_mut().and_then(|o| o.map_entry("metadata")) else {
        return;
    };
    if let Some(annotations) = metadata.map_entry("annotations") {
        annotations.remove("cert-manager.io/inject-ca-from");
        annotations.insert(key, Node::string(value));
    }
}

/// The configuration trusts `ca_bundle` rather than cert-manager's injection:
/// the package's README, "Install without cert-manager", step 1 and the caBundle.
fn trust(configuration: &mut Node, ca_bundle: &str) {
    let Some(map) = configuration.as_map_mut() else {
        return;
    };
    if let Some(metadata) = map.map_entry("metadata")
        && let Some(Node::Map(annotations)) = metadata.get_mut("annotations")
    {
        annotations.remove("cert-manager.io/inject-ca-from");
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_bundle);
    if let Some(Node::Seq(webhooks)) = map.get_mut("webhooks") {
        for webhook in &mut webhooks.items {
            if let Some(client) = webhook
                .as_map_mut()
                .and_then(|w| w.map_entry("clientConfig"))
            {
                client.insert("caBundle", Node::string(bundle.as_str()));
            }
        }
    }
}

/// The NetworkPolicy admits the webhook's port (`https`) from `from` only.
fn admit_only(policy: &mut Node, from: Vec<Node>) {
    let Some(Node::Seq(rules)) = policy
        .as_map_mut()
        .and_then(|p| p.map_entry("spec"))
        .and_then(|spec| spec.get_mut("ingress"))
    else {
        return;
    };
    for rule in &mut rules.items {
        let https = rule
            .get_path(&["ports"])
            .and_then(Node::as_seq)
            .is_some_and(|ports| {
                ports
                    .items
                    .iter()
                    .any(|p| p.get_path(&["port"]).and_then(Node::as_str) == Some("https"))
            });
        if let (true, Some(rule)) = (https, rule.as_map_mut()) {
            rule.insert(
                "from",
                Node::Seq(Seq {
                    items: from,
                    ..Seq::default()
                }),
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests;

//! `linkerd multus install`: the cluster side from one configuration
//! ([`options`]), printed for `kubectl apply -f -`. What it prints is the kpt
//! packages' objects ([`packages`]) with their setters applied
//! ([`setters`]), and the webhook's certificates ([`certificates`]): made
//! here, or kept from the cluster ([`cluster`]), or left to cert-manager.
//! The same options and certificates give the same bytes.

pub mod certificates;
pub mod cluster;
pub mod options;
pub mod packages;
pub mod setters;

use base64::Engine as _;

use certificates::{Certificates, Decision, SECRET, SERVICE};
use options::{Certs, Options};

use super::client::Target;
use super::{EXTENSION_LABEL, NAME};
use crate::yaml::{Node, emit_stream};

/// Why `install` printed nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is not valid.
    #[error(transparent)]
    Options(#[from] options::OptionsError),
    /// The cluster could not be read for its certificates.
    #[error(
        "reading the cluster for the webhook's certificates: {0:#}; pass --ignore-cluster to make new ones without reading it (or --kubeconfig, --context for the cluster)"
    )]
    Cluster(anyhow::Error),
    /// The certificates could not be made.
    #[error("making the webhook's certificates: {0:#}")]
    Certificates(anyhow::Error),
    /// The packages embedded in this binary do not render (a defect).
    #[error("the packages embedded in this binary: {0:#}")]
    Packages(anyhow::Error),
}

/// What `install` prints: the YAML, and a note for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The objects, for `kubectl apply -f -`.
    pub yaml: String,
    /// What became of the certificates.
    pub note: Option<String>,
}

/// The manifests for `options`; reads the cluster's certificates unless
/// `--ignore-cluster` or cert-manager.
pub async fn install(target: &Target, options: &Options) -> Result<Installed, Error> {
    let now = time::OffsetDateTime::now_utc();
    let (certificates, note) = match options.certs {
        Certs::CertManager => (None, None),
        Certs::Generate if options.ignore_cluster => {
            let new = certificates::generate(&options.namespace, now, None)
                .map_err(Error::Certificates)?;
            (Some(new), None)
        }
        Certs::Generate => {
            let client = target.client().await.map_err(Error::Cluster)?;
            let existing = cluster::tls_secret(&client, &options.namespace)
                .await
                .map_err(Error::Cluster)?;
            let (certs, decision) = certificates::keep_or_renew(&options.namespace, existing, now)
                .map_err(Error::Certificates)?;
            let note = match decision {
                Decision::Kept => format!(
                    "kept the webhook's certificates of {}/{SECRET}",
                    options.namespace
                ),
                Decision::New(why) => format!("made new webhook certificates ({why})"),
            };
            (Some(certs), Some(note))
        }
    };
    let yaml = render(options, certificates.as_ref()).map_err(Error::Packages)?;
    Ok(Installed { yaml, note })
}

/// The manifests for `options` with `certificates` (`None`: cert-manager's).
pub fn render(options: &Options, certificates: Option<&Certificates>) -> anyhow::Result<String> {
    let (rights, rest) = packages::files(options);
    let mut objects = packages::objects(&rights, options)?;
    let mut rest = packages::objects(&rest, options)?;
    if let Some(certs) = certificates {
        objects.push(secret(&options.namespace, certs));
        for object in &mut rest {
            if object.get_path(&["kind"]).and_then(Node::as_str)
                == Some("MutatingWebhookConfiguration")
            {
                trust(object, &certs.ca_bundle);
            }
        }
    }
    objects.extend(rest);
    Ok(emit_stream(&objects))
}

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
        ("type", Node::string("kubernetes.io/tls")),
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

#[cfg(test)]
mod tests;

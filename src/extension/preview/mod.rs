//! `linkerd multus preview`: what the NAD controller will do once a new Linkerd-CNI ConfigMap
//! is applied, without changing anything. It reads the cluster as the controller's watches
//! hold it ([`read`]), gives each namespace's NAD the hash it will hold once the controller
//! has written the new config (a NAD Git or another writer holds keeps its own), and runs the
//! controller's own planner over it ([`crate::linkerd_cni::restarts::preview`]), paced as the
//! installed controller's arguments say ([`show`]).

pub mod read;
pub mod show;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;

use crate::extension::check::extension::{Installed, resolve};
use crate::extension::check::{Options as CheckOptions, snapshot};
use crate::extension::client::{Target, anyhow_text};
use crate::k8s::reserved;
use crate::linkerd_cni::restarts::{Cluster, Key, Pod, Preview, preview};
use crate::linkerd_cni::rollout::config_hash;
use crate::linkerd_cni::settings::Settings;
use read::Snapshot;
use show::Pacing;

/// What `preview` is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The file of the new ConfigMap, as named on the command line.
    pub file: String,
    /// Its text.
    pub text: String,
    /// The Linkerd control plane's namespace (`-L`).
    pub linkerd_namespace: String,
    /// `--restart-concurrency`, else the installed controller's.
    pub concurrency: Option<usize>,
    /// `--restart-deadline`, else the installed controller's.
    pub deadline: Option<Duration>,
}

/// Why there is no preview.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The file gives no NAD config the controller would copy.
    #[error("{file}: {why}")]
    File {
        /// The file.
        file: String,
        /// Why, and the fix.
        why: String,
    },
    /// The cluster could not be read.
    #[error("reading the cluster: {0}")]
    Cluster(String),
    /// No NAD controller is installed: no NAD follows the ConfigMap.
    #[error(
        "no NAD controller is installed in namespace {0} (Deployment linkerd-multus-nad-controller): no NAD follows the Linkerd-CNI ConfigMap and nothing is restarted; install it with linkerd multus install --manage-nads"
    )]
    NoController(String),
}

/// The preview's text.
pub async fn run(target: &Target, options: &Options) -> Result<String, PreviewError> {
    let cluster = |e: anyhow::Error| PreviewError::Cluster(anyhow_text(&e));
    let client = target.client().await.map_err(cluster)?;
    let read = |(what, e): (String, snapshot::ReadError)| {
        PreviewError::Cluster(format!("cannot list {what}: {e}"))
    };
    let namespaces = snapshot::namespaces(&client)
        .await
        .map_err(|e| read(("Namespaces".into(), e)))?;
    let installed = installed(&client, options, &namespaces).await;
    if !installed.manage_nads {
        return Err(PreviewError::NoController(installed.namespace));
    }
    let settings = &installed.settings;
    let text = show::config_text(&options.text, settings).map_err(|why| PreviewError::File {
        file: options.file.clone(),
        why,
    })?;
    let snapshot = Snapshot::read(&client, namespaces, &settings.nad_name)
        .await
        .map_err(read)?;
    let (written, nad_hashes) =
        show::nad_hashes(&snapshot.namespaces, &snapshot.nads, settings, &text);
    let pacing = Pacing {
        concurrency: (options.concurrency)
            .or(installed.restarts.map(|r| r.concurrency))
            .unwrap_or(1)
            .max(1),
        deadline: (options.deadline)
            .or(installed.restarts.map(|r| r.deadline))
            .unwrap_or(Duration::from_secs(600)),
        on: installed.restarts.is_some(),
    };
    let planned = plan(&snapshot, settings, &nad_hashes, pacing);
    let hash = config_hash(&text);
    Ok(show::text(&options.file, &hash, &written, pacing, &planned))
}

/// The controller's planner over `snapshot`, its NADs at `nad_hashes`.
fn plan(
    snapshot: &Snapshot,
    settings: &Settings,
    nad_hashes: &BTreeMap<String, String>,
    pacing: Pacing,
) -> Preview {
    let pods: Vec<Pod> = snapshot.pods.iter().map(|p| snapshot.pod(p)).collect();
    let visit = |each: &mut dyn FnMut(&Pod)| pods.iter().for_each(each);
    let workload = |key: &Key| snapshot.workloads.get(key);
    let annotation = |namespace: &str, key: &str| {
        let meta = snapshot.namespaces.iter().find(|n| n.name == namespace)?;
        meta.annotations.get(key).cloned()
    };
    let reserved = |namespace: &str| {
        reserved::reserved(
            namespace,
            &settings.linkerd_namespace,
            &settings.cni_namespace,
        )
    };
    let cluster = Cluster {
        workload: &workload,
        pods: &visit,
        nad_hashes,
        namespace_annotation: &annotation,
        reserved: &reserved,
    };
    preview(&cluster, pacing.concurrency, pacing.deadline)
}

/// The installed extension's settings and the controller's pacing, from their Deployments'
/// arguments.
async fn installed(client: &Client, options: &Options, namespaces: &[snapshot::Meta]) -> Installed {
    let check = CheckOptions {
        linkerd_namespace: options.linkerd_namespace.clone(),
        namespace: None,
        pre: false,
        proxy: false,
        wait: Duration::ZERO,
        install: Err(String::new()),
    };
    resolve(client, &check, namespaces).await
}

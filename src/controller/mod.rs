//! `linkerd-multus webhook --manage-nads`: the NAD controller, the Go
//! operator's other half, for namespaces that do not live in Git. It keeps
//! the Linkerd-CNI NAD in every namespace that needs it by the function's
//! rules ([`crate::linkerd_cni::cluster`]), built from the live Linkerd-CNI
//! ConfigMap by the function's own code, with kube-runtime's `Controller`.
//!
//! It runs in the webhook's process: every replica answers admission, and the
//! one holding the `coordination.k8s.io` Lease ([`lease`]) writes. It owns
//! only the NADs it made (labelled `app.kubernetes.io/managed-by:
//! linkerd-multus-controller`), applies them server-side with its own field
//! manager and never forces a conflict, and deletes only its own, with the
//! uid and resourceVersion it saw as preconditions.

pub mod lease;
pub mod metrics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, future};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{
    Action, Config as ControllerConfig, Controller, Error as ControllerError,
};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::{mpsc, watch};

use crate::k8s::nad::{self, Maker};
use crate::k8s::namespace::MULTUS_ANNOTATION;
use crate::linkerd_cni::cluster::{self, Kept, LiveNad};
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::settings::Settings;
pub use metrics::Metrics;

/// The field manager of the controller's server-side applies, and the
/// reporting controller of its Events.
pub const FIELD_MANAGER: &str = "linkerd-multus-controller";

/// Where the NAD cache keeps the digest of a NAD's `spec.config`.
const CONFIG_DIGEST: &str = "configDigest";
/// How many namespaces are reconciled at once.
const CONCURRENCY: u16 = 16;
/// How long a failed reconcile waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// The NAD controller's flags, on `linkerd-multus webhook`.
#[derive(Debug, Clone, clap::Args)]
#[group(id = "nad_controller")]
pub struct Args {
    /// Also keeps the Linkerd-CNI NAD in every namespace that needs it
    /// (annotated linkerd.io/multus: enabled, and the control-plane
    /// namespace), built from the live Linkerd-CNI ConfigMap: the Go
    /// operator's namespace controller. One replica writes, through a Lease.
    #[arg(long)]
    pub manage_nads: bool,
    /// The Lease that elects the replica which writes NADs.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "linkerd-multus-nad-controller"
    )]
    pub lease_name: String,
    /// Namespace of the Lease [default: $POD_NAMESPACE, the webhook's own].
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long the Lease holds without a renewal: the longest a new leader
    /// waits after the old one died without releasing it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// This replica's name in the Lease [default: $POD_NAME, else the host name].
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,
}

/// What [`run`] needs, resolved from [`Args`] and the environment.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// Lease duration, whole seconds (at least 3).
    pub lease_seconds: u64,
    /// This replica's identity.
    pub identity: String,
    /// Deadline of each API call other than a watch (`--api-timeout`).
    pub api_timeout: Duration,
}

impl Args {
    /// The options of [`run`]; `None` without `--manage-nads`. Errors say
    /// which flag or variable to set.
    pub fn options(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        api_timeout: Duration,
    ) -> anyhow::Result<Option<Options>> {
        if !self.manage_nads {
            return Ok(None);
        }
        let lease_namespace = self
            .lease_namespace
            .clone()
            .or_else(|| env("POD_NAMESPACE").filter(|n| !n.is_empty()))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--manage-nads needs the Lease's namespace: set --lease-namespace, or POD_NAMESPACE from the downward API (metadata.namespace)"
                )
            })?;
        let lease_seconds = self.lease_duration.as_secs();
        if lease_seconds < 3 {
            anyhow::bail!(
                "--lease-duration {}: must be at least 3s (the leader renews a third of it before it ends)",
                humantime::format_duration(self.lease_duration)
            );
        }
        let identity = self
            .identity
            .clone()
            .or_else(|| env("POD_NAME").filter(|n| !n.is_empty()))
            .or_else(|| env("HOSTNAME").filter(|n| !n.is_empty()))
            .unwrap_or_else(|| format!("linkerd-multus-{}", std::process::id()));
        Ok(Some(Options {
            lease_name: self.lease_name.clone(),
            lease_namespace,
            lease_seconds,
            identity,
            api_timeout,
        }))
    }
}

/// The NetworkAttachmentDefinition resource.
pub fn nad_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(nad::GROUP, "v1", nad::KIND),
        "network-attachment-definitions",
    )
}

/// Runs the controller until `stop` turns true: waits for the Lease, writes
/// NADs while it holds it, stops writing the moment it loses it, and
/// releases it on the way out, for the other replica to take over.
pub async fn run(
    client: Client,
    settings: Settings,
    options: Options,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(mut leadership) = lease::Leadership::acquire_loop(&client, &options, &mut stop).await
    else {
        return;
    };
    let settings = Arc::new(settings);
    loop {
        tokio::select! {
            leading = leadership.wait_for(true) => if !leading { break },
            _ = stop.wait_for(|s| *s) => break,
        }
        metrics.leader.set(1);
        tracing::info!(
            identity = %options.identity,
            lease = %format!("{}/{}", options.lease_namespace, options.lease_name),
            "leading: this replica writes the NADs"
        );
        let lost = tokio::select! {
            _ = reconcile_all(client.clone(), settings.clone(), metrics.clone(), &options) => false,
            _ = leadership.wait_for(false) => true,
            _ = stop.wait_for(|s| *s) => false,
        };
        metrics.leader.set(0);
        if lost {
            tracing::warn!(identity = %options.identity, "lost the lease: stopped writing NADs");
        } else {
            break;
        }
    }
    metrics.leader.set(0);
    leadership.release().await;
}

/// What every reconcile shares.
struct Context {
    settings: Arc<Settings>,
    client: Client,
    nad_store: Store<DynamicObject>,
    nad_resource: ApiResource,
    /// The NAD config from the live ConfigMap.
    config: watch::Receiver<LiveConfig>,
    events: Events,
    metrics: Arc<Metrics>,
}

impl Context {
    /// The NADs of one namespace.
    fn nads_in(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.nad_resource)
    }
}

/// What the live ConfigMap gives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LiveConfig {
    /// Not listed yet.
    Unread,
    /// Missing or invalid: nothing is created or changed.
    Unusable,
    /// A NAD config.
    Ready(Arc<NadConfig>),
}

/// A NAD config and its digest, made once per ConfigMap change.
#[derive(Debug, PartialEq, Eq)]
struct NadConfig {
    text: String,
    /// [`cluster::config_digest`] of the text, as the NAD cache keeps live configs.
    digest: String,
}

/// Where Events go. Warnings share one recorder, which folds a repeated
/// failure into one Event's series; each Normal Event (one per NAD made,
/// updated or removed) is published by a recorder of its own, since kube's
/// recorder keeps every Event it published for six minutes to fold repeats,
/// which at 10,000 namespaces would hold every Event of a start in memory.
#[derive(Clone)]
struct Events {
    client: Client,
    reporter: Reporter,
    warnings: Recorder,
}

impl Events {
    fn new(client: Client, identity: &str) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(identity.to_string()),
        };
        Events {
            warnings: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
        }
    }

    async fn publish(&self, event: &Event, regarding: &ObjectReference) -> kube::Result<()> {
        match event.type_ {
            EventType::Warning => self.warnings.publish(event, regarding).await,
            EventType::Normal => {
                Recorder::new(self.client.clone(), self.reporter.clone())
                    .publish(event, regarding)
                    .await
            }
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{action} NetworkAttachmentDefinition {namespace}/{name}: {source}")]
    Write {
        action: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Watches Namespaces, the controller's NADs and the ConfigMap, and
/// reconciles every namespace, for as long as it is polled.
async fn reconcile_all(
    client: Client,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    options: &Options,
) {
    let nad_resource = nad_resource();
    let nads: Api<DynamicObject> = Api::all_with(client.clone(), &nad_resource);
    let nad_writer = reflector::store::Writer::new(nad_resource.clone());
    let nad_store = nad_writer.as_reader();
    let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    // Only the NADs of its name, and of each only what the rules read.
    let nad_stream = watcher(nads, by_name(&settings.nad_name))
        .default_backoff()
        .modify(|nad: &mut DynamicObject| {
            nad.metadata.managed_fields = None;
            nad.metadata.annotations = None;
            let digest = nad
                .data
                .pointer("/spec/config")
                .and_then(|c| c.as_str())
                .map(cluster::config_digest);
            nad.data = serde_json::json!({ CONFIG_DIGEST: digest });
        })
        .reflect(nad_writer)
        .touched_objects();

    let (ns_store, ns_writer) = reflector::store::<PartialObjectMeta<Namespace>>();
    // Api<PartialObjectMeta<_>> lists and watches metadata only.
    let namespaces = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|ns: &mut PartialObjectMeta<Namespace>| {
        ns.metadata.managed_fields = None;
        ns.metadata.labels = None;
        if let Some(annotations) = &mut ns.metadata.annotations {
            annotations.retain(|k, _| k == MULTUS_ANNOTATION);
        }
    })
    .reflect(ns_writer)
    .applied_objects();

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &settings.cni_namespace);
    let (config_sender, config_rx) = watch::channel(LiveConfig::Unread);
    let events = Events::new(client.clone(), &options.identity);
    let config_changes = config_map_changes(
        watcher(config_maps, by_name(CONFIG_MAP_NAME)).default_backoff(),
        settings.clone(),
        config_sender,
        events.clone(),
        metrics.clone(),
    );
    let context = Arc::new(Context {
        settings,
        client: client.clone(),
        nad_store: nad_store.clone(),
        nad_resource: nad_resource.clone(),
        config: config_rx.clone(),
        events,
        metrics: metrics.clone(),
    });
    // The NAD and ConfigMap watches run on their own and feed the Controller
    // through channels: a reconcile never waits for them, so the Controller's
    // queue can never hold up the watches that reconciles read.
    let (nad_tx, nad_rx) = mpsc::unbounded_channel();
    let nad_watch = nad_stream.for_each(move |nad| {
        if let Some(namespace) = nad.ok().and_then(|nad| nad.namespace()) {
            nad_tx.send(ObjectRef::new(&namespace)).ok();
        }
        future::ready(())
    });
    let (config_tx, config_changed) = mpsc::unbounded_channel();
    let config_watch = config_changes.for_each(move |()| {
        config_tx.send(()).ok();
        future::ready(())
    });
    let managed = count_managed(nad_store.clone(), metrics);
    let controller = async move {
        // Nothing is decided before the NADs and the ConfigMap are known.
        let mut config = config_rx;
        if nad_store.wait_until_ready().await.is_err()
            || config.wait_for(|c| *c != LiveConfig::Unread).await.is_err()
        {
            return;
        }
        Controller::for_stream(namespaces, ns_store)
            .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
            .reconcile_on(receiver_stream(nad_rx))
            .reconcile_all_on(receiver_stream(config_changed))
            .run(reconcile, error_policy, context.clone())
            .for_each(|result| {
                // Reconcile errors are logged by the error policy; these are the Controller's own.
                if let Err(
                    e @ (ControllerError::ObjectNotFound(_)
                    | ControllerError::QueueError(_)
                    | ControllerError::RunnerError(_)),
                ) = &result
                {
                    tracing::warn!(error = %e, "NAD controller");
                }
                future::ready(())
            })
            .await
    };
    tokio::select! {
        _ = controller => {}
        _ = nad_watch => {}
        _ = config_watch => {}
        _ = managed => {}
    }
}

/// A stream of what a channel receives.
fn receiver_stream<T: Send + 'static>(
    receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// Follows the ConfigMap: keeps the NAD config current, reports a missing or
/// invalid one each time it changes, and yields each time the config changes.
fn config_map_changes(
    watch_events: impl futures_util::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>>
    + Send
    + 'static,
    settings: Arc<Settings>,
    config: watch::Sender<LiveConfig>,
    events: Events,
    metrics: Arc<Metrics>,
) -> impl futures_util::Stream<Item = ()> + Send + 'static {
    let mut listing: Option<Option<ConfigMap>> = None;
    watch_events.filter_map(move |event| {
        // The ConfigMap as it now is, once an event settles it.
        let settled = match event {
            Ok(watcher::Event::Init) => {
                listing = Some(None);
                None
            }
            Ok(watcher::Event::InitApply(cm)) => {
                listing = Some(Some(cm));
                None
            }
            Ok(watcher::Event::InitDone) => Some(listing.take().flatten()),
            Ok(watcher::Event::Apply(cm)) => Some(Some(cm)),
            Ok(watcher::Event::Delete(_)) => Some(None),
            Err(e) => {
                tracing::warn!(error = %e, "watching the Linkerd-CNI ConfigMap");
                None
            }
        };
        let changed = settled.and_then(|cm| {
            let live = match read_config(cm.as_ref(), &settings, &events, &metrics) {
                Some(text) => LiveConfig::Ready(Arc::new(NadConfig {
                    digest: cluster::config_digest(&text),
                    text,
                })),
                None => LiveConfig::Unusable,
            };
            let changed = *config.borrow() != live;
            config.send_replace(live);
            changed.then_some(())
        });
        future::ready(changed)
    })
}

/// The NAD config of the ConfigMap, or `None` when it is missing or invalid
/// (logged, counted and, when invalid, reported as an Event on it).
fn read_config(
    cm: Option<&ConfigMap>,
    settings: &Settings,
    events: &Events,
    metrics: &Metrics,
) -> Option<String> {
    let at = format!("ConfigMap {}/{CONFIG_MAP_NAME}", settings.cni_namespace);
    let Some(cm) = cm else {
        metrics.config_map(false, false);
        tracing::warn!("{at} not found: NADs are neither created nor changed until it exists");
        return None;
    };
    match cluster::config_text(cm.data.as_ref(), settings) {
        Ok(text) => {
            metrics.config_map(true, true);
            tracing::info!(resource_version = ?cm.resource_version(), "{at} read");
            Some(text)
        }
        Err(e) => {
            metrics.config_map(true, false);
            let note = format!("{at}: {e}; no NAD is created or changed until it is fixed");
            tracing::error!("{note}");
            let events = events.clone();
            let reference = cm.object_ref(&());
            tokio::spawn(async move {
                let event = Event {
                    type_: EventType::Warning,
                    reason: "InvalidConfig".into(),
                    note: Some(note),
                    action: "ReadConfig".into(),
                    secondary: None,
                };
                if let Err(e) = events.publish(&event, &reference).await {
                    tracing::warn!(error = %e, "publishing an Event on the Linkerd-CNI ConfigMap");
                }
            });
            None
        }
    }
}

/// Keeps the `NADs managed` gauge current from the NAD cache.
async fn count_managed(nads: Store<DynamicObject>, metrics: Arc<Metrics>) {
    loop {
        let managed = nads
            .state()
            .iter()
            .filter(|nad| maker(nad) == Maker::Controller)
            .count();
        metrics.managed.set(managed as i64);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn maker(nad: &DynamicObject) -> Maker {
    Maker::of(nad.labels().get(nad::MANAGED_BY_LABEL).map(String::as_str))
}

/// Brings one namespace's NAD in line with the rules.
async fn reconcile(
    namespace: Arc<PartialObjectMeta<Namespace>>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    // The Controller starts once the NADs and the ConfigMap are known.
    let config = match &*context.config.borrow() {
        LiveConfig::Ready(config) => Some(config.clone()),
        LiveConfig::Unread | LiveConfig::Unusable => None,
    };
    let settings = &context.settings;
    let name = namespace.name_any();
    let empty = BTreeMap::new();
    let annotations = namespace.metadata.annotations.as_ref().unwrap_or(&empty);
    let needed = cluster::needs_nad(&name, annotations, settings);
    let terminating = namespace.metadata.deletion_timestamp.is_some();
    let key = ObjectRef::new_with(&settings.nad_name, context.nad_resource.clone()).within(&name);
    let live = context.nad_store.get(&key);
    let live_view = live.as_deref().map(|nad| LiveNad {
        maker: maker(nad),
        config: nad.data[CONFIG_DIGEST].as_str(),
    });
    let digest = config.as_ref().map(|c| c.digest.as_str());
    let action = cluster::decide(needed, terminating, live_view, digest);
    let metrics = &context.metrics;
    let nad_name = &settings.nad_name;
    let at = format!("NetworkAttachmentDefinition {name}/{nad_name}");
    let (reason, note) = match action {
        cluster::Action::Keep(kept) => {
            metrics.reconciled(match kept {
                Kept::UpToDate | Kept::NotNeeded => "unchanged",
                Kept::NotOurs(_) | Kept::NoConfig | Kept::Terminating => "skipped",
            });
            if let Kept::NotOurs(maker) = kept {
                tracing::debug!(namespace = %name, ?maker, "{at} is not the controller's: left as it is");
            }
            return Ok(Action::await_change());
        }
        cluster::Action::Create | cluster::Action::Update => {
            let config = config.expect("decide applies only with a config");
            let body = cluster::controller_nad(&name, &config.text, settings);
            let params = PatchParams::apply(FIELD_MANAGER);
            let api = context.nads_in(&name);
            metrics.wrote();
            let create = action == cluster::Action::Create;
            if let Err(source) = api.patch(nad_name, &params, &Patch::Apply(&body)).await {
                return Err(failed(&context, &namespace, "applying", nad_name, source).await);
            }
            metrics.reconciled(if create { "created" } else { "updated" });
            tracing::info!(namespace = %name, "{at} {}", if create { "created" } else { "updated" });
            if create {
                (
                    "NADCreated",
                    format!("{at} created from the Linkerd-CNI ConfigMap"),
                )
            } else {
                (
                    "NADUpdated",
                    format!("{at} updated: the Linkerd-CNI ConfigMap changed"),
                )
            }
        }
        cluster::Action::Delete => {
            let live = live.expect("decide deletes only a live NAD");
            let api = context.nads_in(&name);
            // Only the NAD it saw as its own: had Git or a user taken it
            // over since, its resourceVersion changed and the delete fails.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: live.uid(),
                    resource_version: live.resource_version(),
                }),
                ..DeleteParams::default()
            };
            metrics.wrote();
            match api.delete(nad_name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(source) => {
                    return Err(failed(&context, &namespace, "deleting", nad_name, source).await);
                }
            }
            metrics.reconciled("deleted");
            tracing::info!(namespace = %name, "{at} removed");
            (
                "NADRemoved",
                format!(
                    "{at} removed: the namespace is no longer annotated {MULTUS_ANNOTATION}: enabled"
                ),
            )
        }
    };
    publish(&context, &namespace, EventType::Normal, reason, note).await;
    Ok(Action::await_change())
}

/// Counts, logs and reports a failed write; the error retries the namespace.
async fn failed(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    action: &'static str,
    nad_name: &str,
    source: kube::Error,
) -> Error {
    context.metrics.reconciled("error");
    let error = Error::Write {
        action,
        namespace: namespace.name_any(),
        name: nad_name.to_string(),
        source,
    };
    let hint = match &error {
        Error::Write {
            source: kube::Error::Api(e),
            ..
        } if e.code == 409 => {
            "; another field manager owns a field the controller would change: it does not force it"
        }
        _ => "",
    };
    publish(
        context,
        namespace,
        EventType::Warning,
        "NADFailed",
        format!("{error}{hint}"),
    )
    .await;
    error
}

fn error_policy(
    namespace: Arc<PartialObjectMeta<Namespace>>,
    error: &Error,
    _: Arc<Context>,
) -> Action {
    tracing::warn!(namespace = %namespace.name_any(), error = %error, "reconcile failed; retrying in {RETRY:?}");
    Action::requeue(RETRY)
}

/// An Event on the Namespace (Events of cluster-scoped objects go to `default`).
async fn publish(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Namespace".into()),
        name: Some(namespace.name_any()),
        uid: namespace.uid(),
        ..ObjectReference::default()
    };
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = context.events.publish(&event, &reference).await {
        tracing::warn!(namespace = %namespace.name_any(), error = %e, "publishing an Event");
    }
}

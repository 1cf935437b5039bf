//! `linkerd-multus controller`: the NAD controller, the Go operator's other
//! half, for namespaces that do not live in Git. It keeps the Linkerd-CNI NAD
//! in every namespace that needs it by the function's rules
//! ([`crate::linkerd_cni::cluster`]), built from the live Linkerd-CNI
//! ConfigMap by the function's own code, with kube-runtime's `Controller`.
//!
//! It runs apart from the webhook, in a Deployment and with a ServiceAccount
//! of its own, listening on its operations port alone: the replica holding
//! the `coordination.k8s.io` Lease ([`lease`]) writes, and only while its
//! leadership is fresh; a replica is ready while it reaches the Lease
//! ([`health`]). It owns exactly the NADs it made (labelled
//! `app.kubernetes.io/created-by: linkerd-multus-controller`) while no one else
//! holds them (`multus::nad::Record::holder`: the render's mark, another
//! field manager's apply): it creates new ones, never adopting one that exists,
//! puts back the fields of its own that were edited, and deletes only its own
//! ([`reconcile`]). Every call has a
//! deadline ([`api`]); failed namespaces back off ([`backoff`]); repeated
//! Events fold into series ([`events`]); the ConfigMap is checked before any
//! NAD is written from it ([`config_map`]).

pub mod api;
pub mod backoff;
pub mod config_map;
pub mod events;
pub mod health;
pub mod lease;
pub mod metrics;
pub mod opt_ins;
pub mod reconcile;
pub mod restarts;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, future};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Config as ControllerConfig, Controller, Error as ControllerError};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};

use crate::k8s::namespace::MULTUS_ANNOTATION;
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::restarts as linkerd_restarts;
use crate::linkerd_cni::settings::Settings;
use crate::multus::nad::{self, Maker};
use backoff::Backoff;
use config_map::LiveConfig;
use events::Events;
use health::Contact;
use lease::{Fence, Leadership};
pub use metrics::Metrics;
use reconcile::{CONFIG_DIGEST, Context};

/// The field manager of the controller's server-side applies, and the
/// reporting controller of its Events.
pub const FIELD_MANAGER: &str = nad::CONTROLLER_MANAGED_BY;

/// How many namespaces are reconciled at once.
const CONCURRENCY: u16 = 16;
/// How often the housekeeping runs: the gauge of NADs managed, the Event
/// series due, the failures of namespaces gone.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// What [`run`] needs: the flags of `controller` and the environment, resolved.
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
    /// The restarts of stale workloads (`--restart-stale-workloads`); `None` when off.
    pub restarts: Option<restarts::Options>,
}

impl Options {
    /// The Lease as `namespace/name`.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.lease_namespace, self.lease_name)
    }
}

/// Runs the controller until `stop` turns true: waits for the Lease, writes
/// NADs while its leadership is fresh, drops every reconcile in flight the
/// moment it is not, and releases the Lease on the way out, for the other
/// replica to take over. `client` makes every call but the evictions, which go through
/// `once`: the same configuration without kube's own retries of a 429, which for an eviction
/// is a PodDisruptionBudget's answer, asked again at the next pass. `contact` learns when the
/// election reaches the Lease.
pub async fn run(
    client: Client,
    once: Client,
    settings: Settings,
    options: Options,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
    contact: Contact,
) {
    let mut leadership = Leadership::start(&client, &options, stop.clone(), contact);
    let shared = Shared {
        once,
        settings: Arc::new(settings),
        events: Arc::new(Events::new(
            client.clone(),
            &options.identity,
            options.api_timeout,
        )),
        backoff: Arc::new(Backoff::default()),
        said: Arc::new(opt_ins::Said::default()),
        metrics: metrics.clone(),
        api_timeout: options.api_timeout,
        restarts: options.restarts,
    };
    while leadership.acquired().await {
        metrics.leader.set(1);
        tracing::info!(
            identity = %options.identity,
            lease = %options.lease(),
            "leading: this replica writes the NADs"
        );
        tokio::select! {
            _ = reconcile_all(client.clone(), &shared, leadership.fence()) => {}
            _ = leadership.lost() => {}
        }
        metrics.leader.set(0);
        if *stop.borrow() {
            break;
        }
        tracing::warn!(identity = %options.identity, "no longer leading: stopped writing NADs");
    }
    metrics.leader.set(0);
    leadership.release().await;
}

/// What the controller keeps from one term to the next.
struct Shared {
    /// The client without kube's retries, for the evictions.
    once: Client,
    settings: Arc<Settings>,
    events: Arc<Events>,
    backoff: Arc<Backoff>,
    said: Arc<opt_ins::Said>,
    metrics: Arc<Metrics>,
    api_timeout: Duration,
    restarts: Option<restarts::Options>,
}

/// The NADs of the controller's name, and of each only what the rules read
/// (who holds it, read from its labels and managedFields, and the digest of
/// its config): the cache and the stream of what changes in it.
fn nad_cache(
    client: &Client,
    settings: &Settings,
) -> (
    Store<DynamicObject>,
    impl futures_util::Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
) {
    let nad_resource = nad::api_resource();
    let nads: Api<DynamicObject> = Api::all_with(client.clone(), &nad_resource);
    let writer = reflector::store::Writer::new(nad_resource);
    let store = writer.as_reader();
    let stream = watcher(nads, by_name(&settings.nad_name))
        .default_backoff()
        .modify(|nad: &mut DynamicObject| {
            let record = reconcile::record(nad);
            let holder = reconcile::Holder {
                maker: record.holder(),
                legacy: record.legacy(),
                go_operator: record.go_operators(),
            };
            nad.metadata.managed_fields = None;
            nad.metadata.annotations = None;
            nad.metadata.labels = None;
            let digest = nad
                .data
                .pointer("/spec/config")
                .and_then(|c| c.as_str())
                .map(cluster::config_digest);
            nad.data = serde_json::json!({ CONFIG_DIGEST: digest });
            holder.keep(nad);
        })
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// Every Namespace, metadata only and of it only the opt-in annotations (and
/// the keys that misspell them): the cache and the stream of those applied.
fn namespace_cache(
    client: &Client,
) -> (
    Store<PartialObjectMeta<Namespace>>,
    impl futures_util::Stream<Item = Result<PartialObjectMeta<Namespace>, watcher::Error>>
    + Send
    + 'static,
) {
    let (store, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
    // Api<PartialObjectMeta<_>> lists and watches metadata only.
    let stream = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|ns: &mut PartialObjectMeta<Namespace>| {
        ns.metadata.managed_fields = None;
        ns.metadata.labels = None;
        if let Some(annotations) = &mut ns.metadata.annotations {
            annotations.retain(|k, _| {
                k == MULTUS_ANNOTATION
                    || k == linkerd_restarts::OPT_IN_ANNOTATION
                    || k == linkerd_restarts::EVICT_ANNOTATION
                    || opt_ins::kept(k)
            });
        }
    })
    .reflect(writer)
    .applied_objects();
    (store, stream)
}

/// A watch of the objects of one name.
fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

/// Watches Namespaces, the controller's NADs and the ConfigMap, and
/// reconciles every namespace, for as long as it is polled.
async fn reconcile_all(client: Client, shared: &Shared, fence: Fence) {
    let (nad_store, nad_stream) = nad_cache(&client, &shared.settings);
    let (ns_store, namespaces) = namespace_cache(&client);
    let config_maps: Api<ConfigMap> =
        Api::namespaced(client.clone(), &shared.settings.cni_namespace);
    let (config_sender, config_rx) = watch::channel(LiveConfig::Unread);
    let config_changes = config_map::changes(
        watcher(config_maps, by_name(CONFIG_MAP_NAME)).default_backoff(),
        config_map::Reader {
            settings: shared.settings.clone(),
            config: config_sender,
            events: shared.events.clone(),
            metrics: shared.metrics.clone(),
        },
    );
    let context = Arc::new(Context {
        settings: shared.settings.clone(),
        client,
        nad_store: nad_store.clone(),
        nad_resource: nad::api_resource(),
        config: config_rx.clone(),
        events: shared.events.clone(),
        metrics: shared.metrics.clone(),
        backoff: shared.backoff.clone(),
        said: shared.said.clone(),
        fence,
        api_timeout: shared.api_timeout,
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
    let housekeeping = housekeeping(nad_store.clone(), ns_store.clone(), shared);
    let restarts = {
        let context = shared.restarts.map(|options| restarts::Context {
            client: context.client.clone(),
            evictions: shared.once.clone(),
            nads: nad_store.clone(),
            namespaces: ns_store.clone(),
            nad_name: shared.settings.nad_name.clone(),
            linkerd_namespace: shared.settings.linkerd_namespace.clone(),
            cni_namespace: shared.settings.cni_namespace.clone(),
            fence: context.fence.clone(),
            events: shared.events.clone(),
            metrics: shared.metrics.clone(),
            api_timeout: shared.api_timeout,
            options,
        });
        async move {
            match context {
                Some(context) => restarts::run(context).await,
                None => future::pending().await,
            }
        }
    };
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
            .run(reconcile::reconcile, reconcile::error_policy, context)
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
        _ = housekeeping => {}
        _ = restarts => {}
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

/// Keeps the `NADs managed` gauge current from the NAD cache, writes the
/// Event series that are due, and forgets the failures of namespaces gone
/// and what was said of them.
async fn housekeeping(
    nads: Store<DynamicObject>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    shared: &Shared,
) {
    loop {
        let managed = nads
            .state()
            .iter()
            .filter(|nad| reconcile::maker(nad) == Maker::Controller)
            .count();
        shared.metrics.managed.set(managed as i64);
        shared.events.flush().await;
        if !shared.backoff.is_empty() {
            shared
                .backoff
                .retain(|name| namespaces.get(&ObjectRef::new(name)).is_some());
        }
        shared
            .said
            .retain(|name| namespaces.get(&ObjectRef::new(name)).is_some());
        tokio::time::sleep(HOUSEKEEPING).await;
    }
}

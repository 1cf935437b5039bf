//! The reconcile of one namespace: the rules' decision
//! ([`cluster::decide`]) carried out with the writes it needs, each behind
//! the leadership's fence and with a deadline.
//!
//! * A new NAD is *created* (POST), marked with the controller's label, which
//!   no render sets: Git's apply of the rendered NAD later takes it over
//!   without a conflict. Where one of that name exists already (the cache had
//!   not seen it yet), the API server answers AlreadyExists and it stays
//!   whoever's it is: read back, a NAD Git holds is left without a word, a
//!   user's gets a Warning Event on the Namespace saying so.
//! * Its own NAD, edited or out of date, is put back by a JSON merge patch of
//!   exactly its fields (its label and `spec.config`; the mark of its earlier
//!   releases removed), so a field taken by a hand edit is taken back; the
//!   patch carries the resourceVersion the cache showed as its own, so a NAD
//!   taken over meanwhile (Git's apply) makes it fail with 409 instead.
//! * Its own NAD no longer needed is deleted with the uid and
//!   resourceVersion it saw as preconditions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::controller::FIELD_MANAGER;
use crate::controller::api::{CallError, call, call_until};
use crate::controller::backoff::Backoff;
use crate::controller::config_map::LiveConfig;
use crate::controller::events::{Events, Kind};
use crate::controller::lease::Fence;
use crate::controller::metrics::Metrics;
use crate::controller::opt_ins;
use crate::k8s::namespace::MULTUS_ANNOTATION;
use crate::linkerd_cni::cluster::{self, Kept, LiveNad};
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::settings::Settings;
use crate::multus::nad::{self, Maker, Record};

/// Where the NAD cache keeps the digest of a NAD's `spec.config`.
pub const CONFIG_DIGEST: &str = "configDigest";
/// Where the NAD cache keeps who holds a NAD ([`Holder`]).
const HOLDER: &str = "holder";

/// Who holds a NAD, read from its labels and managedFields when the cache stores it
/// (which keeps neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Who holds it.
    pub maker: Maker,
    /// Whether it carries a mark the controller replaces ([`Record::legacy`]).
    pub legacy: bool,
    /// Whether it is the Go operator's, which the controller adopts ([`Record::go_operators`]).
    pub go_operator: bool,
}

impl Holder {
    /// Keeps it in the cached NAD's `data`.
    pub fn keep(self, nad: &mut DynamicObject) {
        let maker = match self.maker {
            Maker::Rendered => "rendered",
            Maker::Controller if self.go_operator => "go-operator",
            Maker::Controller if self.legacy => "legacy",
            Maker::Controller => "controller",
            Maker::Other => "other",
        };
        nad.data[HOLDER] = serde_json::json!(maker);
    }

    /// What [`Holder::keep`] kept.
    pub fn of(nad: &DynamicObject) -> Self {
        let (maker, legacy, go_operator) = match nad.data[HOLDER].as_str() {
            Some("rendered") => (Maker::Rendered, false, false),
            Some("go-operator") => (Maker::Controller, true, true),
            Some("legacy") => (Maker::Controller, true, false),
            Some("controller") => (Maker::Controller, false, false),
            _ => (Maker::Other, false, false),
        };
        Holder {
            maker,
            legacy,
            go_operator,
        }
    }
}

/// What the cluster records of who wrote a NAD read whole ([`Record::read`]).
pub fn record(nad: &DynamicObject) -> Record<'_> {
    let writes = nad.metadata.managed_fields.iter().flatten().map(|entry| {
        (
            entry.manager.as_deref().unwrap_or_default(),
            entry.operation.as_deref().unwrap_or_default(),
        )
    });
    let client_side = nad.annotations().contains_key(nad::LAST_APPLIED_ANNOTATION);
    Record::read(nad.labels(), writes, client_side)
}

/// What every reconcile shares.
pub struct Context {
    /// The rules' settings.
    pub settings: Arc<Settings>,
    /// The API client.
    pub client: Client,
    /// The NADs of the controller's name, with the digest of their config.
    pub nad_store: Store<DynamicObject>,
    /// The NAD resource.
    pub nad_resource: ApiResource,
    /// The NAD config from the live ConfigMap.
    pub config: watch::Receiver<LiveConfig>,
    /// Where Events go.
    pub events: Arc<Events>,
    /// The controller's metrics.
    pub metrics: Arc<Metrics>,
    /// Each namespace's failures in a row.
    pub backoff: Arc<Backoff>,
    /// What was said of each namespace's opt-in annotations written wrong.
    pub said: Arc<opt_ins::Said>,
    /// Whether this replica may write now.
    pub fence: Fence,
    /// The deadline of each call (`--api-timeout`).
    pub api_timeout: Duration,
}

/// Why a reconcile failed; every one is retried after the namespace's backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused a write, or did not answer in time.
    #[error("{action} NetworkAttachmentDefinition {namespace}/{name}: {source}{}", hint(.source))]
    Write {
        /// What was written.
        action: &'static str,
        /// The NAD's namespace.
        namespace: String,
        /// The NAD's name.
        name: String,
        /// The failure (boxed: kube's errors are large).
        #[source]
        source: Box<CallError>,
    },
    /// The NAD changed since the cache saw it (409 on the guarded patch).
    #[error(
        "NetworkAttachmentDefinition {namespace}/{name} changed since the controller's cache saw it; tried again once the cache has it"
    )]
    Stale {
        /// The NAD's namespace.
        namespace: String,
        /// The NAD's name.
        name: String,
    },
    /// This replica's term ended before the write could start.
    #[error(
        "NetworkAttachmentDefinition {namespace}/{name} not written: this replica no longer leads (its Lease was not renewed within the renew deadline)"
    )]
    NotLeading {
        /// The NAD's namespace.
        namespace: String,
        /// The NAD's name.
        name: String,
    },
}

/// What to do about a refused or unanswered write, after its message.
fn hint(error: &CallError) -> &'static str {
    match error.code() {
        Some(403) => {
            "; the controller's ServiceAccount lacks the right: apply deploy-nad-controller/ (rbac.yaml)"
        }
        None if matches!(error, CallError::Timeout(_)) => {
            " (--api-timeout, or the end of this replica's term)"
        }
        _ => "",
    }
}

impl Context {
    /// The NADs of one namespace.
    fn nads_in(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.nad_resource)
    }

    /// Runs one NAD write, if this replica's term lasts: it must start
    /// before the term ends, and is cut off at its end or `--api-timeout`.
    async fn write<T>(
        &self,
        action: &'static str,
        namespace: &str,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, Error> {
        let name = self.settings.nad_name.clone();
        let Some(until) = self.fence.until() else {
            return Err(Error::NotLeading {
                namespace: namespace.to_string(),
                name,
            });
        };
        self.metrics.wrote();
        let deadline = until.min(Instant::now() + self.api_timeout);
        call_until(deadline, request)
            .await
            .map_err(|source| Error::Write {
                action,
                namespace: namespace.to_string(),
                name,
                source: Box::new(source),
            })
    }
}

/// Who holds a NAD in the cache.
pub fn maker(nad: &DynamicObject) -> Maker {
    Holder::of(nad).maker
}

/// An Event's reason and note, for a write done.
type Done = Option<(&'static str, String)>;

/// Brings one namespace's NAD in line with the rules.
pub async fn reconcile(
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
    if let Some(note) = context.said.note(&name, annotations) {
        publish(&context, &namespace, Kind::Warning, opt_ins::REASON, note).await;
    }
    let needed = cluster::needs_nad(&name, annotations, settings);
    let terminating = namespace.metadata.deletion_timestamp.is_some();
    let key = ObjectRef::new_with(&settings.nad_name, context.nad_resource.clone()).within(&name);
    let live = context.nad_store.get(&key);
    let live_view = live.as_deref().map(|nad| {
        let holder = Holder::of(nad);
        LiveNad {
            maker: holder.maker,
            config: nad.data[CONFIG_DIGEST].as_str(),
            legacy: holder.legacy,
        }
    });
    let digest = config.as_ref().map(|c| c.digest.as_str());
    let action = cluster::decide(needed, terminating, live_view, digest);
    let metrics = &context.metrics;
    let done = match action {
        cluster::Action::Keep(kept) => {
            metrics.reconciled(match kept {
                Kept::UpToDate | Kept::NotNeeded => "unchanged",
                Kept::NotOurs(_) | Kept::NoConfig | Kept::Terminating => "skipped",
            });
            if let Kept::NotOurs(maker) = kept {
                tracing::debug!(namespace = %name, ?maker, "NetworkAttachmentDefinition {name}/{} is not the controller's: left as it is", settings.nad_name);
            }
            Ok(None)
        }
        cluster::Action::Create => {
            let config = config.expect("decide creates only with a config");
            create(&context, &namespace, &config.text).await
        }
        cluster::Action::Update => {
            let config = config.expect("decide patches only with a config");
            let live = live.expect("decide updates only a live NAD");
            update(&context, &name, &config.text, &live).await
        }
        cluster::Action::Delete => {
            let live = live.expect("decide deletes only a live NAD");
            delete(&context, &name, &live).await
        }
    };
    match done {
        Ok(done) => {
            context.backoff.succeeded(&name);
            if let Some((reason, note)) = done {
                publish(&context, &namespace, Kind::Normal, reason, note).await;
            }
            Ok(Action::await_change())
        }
        Err(error) => Err(failed(&context, &namespace, error).await),
    }
}

/// Creates the NAD; one that exists already is left to whoever made it.
async fn create(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    config: &str,
) -> Result<Done, Error> {
    let name = namespace.name_any();
    let nad_name = &context.settings.nad_name;
    let at = format!("NetworkAttachmentDefinition {name}/{nad_name}");
    let body: DynamicObject =
        serde_json::from_value(cluster::controller_nad(&name, config, &context.settings))
            .expect("the controller's NAD is an object");
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let api = context.nads_in(&name);
    match context
        .write("creating", &name, api.create(&params, &body))
        .await
    {
        Ok(_) => {}
        Err(Error::Write { source, .. })
            if source.status().is_some_and(|s| s.is_already_exists()) =>
        {
            context.metrics.reconciled("skipped");
            exists_already(context, namespace, &api).await;
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    context.metrics.reconciled("created");
    tracing::info!(namespace = %name, "{at} created");
    Ok(Some((
        "NADCreated",
        format!(
            "{at} created from ConfigMap {}/{CONFIG_MAP_NAME}",
            context.settings.cni_namespace
        ),
    )))
}

/// Says why a NAD that exists already was not created, by who holds it (read back): nothing
/// for a NAD Git holds (it won the race of a first sync: a healthy flow), a Warning Event for
/// a user's, which the controller never adopts.
async fn exists_already(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    api: &Api<DynamicObject>,
) {
    let name = namespace.name_any();
    let at = format!(
        "NetworkAttachmentDefinition {name}/{}",
        context.settings.nad_name
    );
    let read = call(context.api_timeout, api.get(&context.settings.nad_name)).await;
    let live = match &read {
        Ok(live) => Some(record(live)),
        Err(e) => {
            tracing::debug!(namespace = %name, error = %e, "{at} exists already and could not be read back");
            None
        }
    };
    match live.map(|r| (r.holder(), r.applied_by)) {
        Some((Maker::Rendered, _)) => {
            tracing::info!(namespace = %name, "{at} exists already, rendered from Git: left to Git");
        }
        Some((Maker::Controller, _)) => {
            tracing::debug!(namespace = %name, "{at} exists already, the controller's own");
        }
        Some((Maker::Other, Some(applier))) => {
            tracing::info!(namespace = %name, "{at} exists already, applied by {applier}: left to it");
        }
        Some((Maker::Other, None)) | None => {
            tracing::info!(namespace = %name, "{at} exists already: not created, left as it is");
            let note = format!(
                "{at} exists already (made since the controller last looked), so the controller did not create it and adopts nothing: a NAD without the label {}: {} stays with whoever made it; delete it for the controller to make its own",
                nad::CREATED_BY_LABEL,
                nad::CONTROLLER_MANAGED_BY
            );
            publish(context, namespace, Kind::Warning, "NADExists", note).await;
        }
    }
}

/// Puts its own NAD's fields back: a merge patch of exactly them, guarded
/// by the resourceVersion the cache showed as its own.
async fn update(
    context: &Context,
    name: &str,
    config: &str,
    live: &DynamicObject,
) -> Result<Done, Error> {
    let nad_name = &context.settings.nad_name;
    let at = format!("NetworkAttachmentDefinition {name}/{nad_name}");
    let version = live.resource_version().unwrap_or_default();
    let holder = Holder::of(live);
    let legacy = holder.legacy;
    let digest = cluster::config_digest(config);
    let relabel_only = legacy && live.data[CONFIG_DIGEST].as_str() == Some(digest.as_str());
    let body = cluster::controller_patch(config, legacy, &version);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let api = context.nads_in(name);
    let patch = Patch::Merge(&body);
    let patched = context.write("patching", name, api.patch(nad_name, &params, &patch));
    stale_on_conflict(patched.await)?;
    context.metrics.reconciled("updated");
    if holder.go_operator {
        tracing::info!(namespace = %name, "{at} adopted from the Go operator: labelled {}: {}, spec.config set to the ConfigMap's", nad::CREATED_BY_LABEL, nad::CONTROLLER_MANAGED_BY);
        return Ok(Some((
            "NADAdopted",
            format!(
                "{at}, made by the Go operator (field manager {}), adopted: the same object, labelled {}: {} and its spec.config set to the config of ConfigMap {}/{CONFIG_MAP_NAME}",
                nad::GO_OPERATOR_FIELD_MANAGER,
                nad::CREATED_BY_LABEL,
                nad::CONTROLLER_MANAGED_BY,
                context.settings.cni_namespace
            ),
        )));
    }
    if relabel_only {
        tracing::info!(namespace = %name, "{at} relabelled: {}: {} replaces the earlier mark {}: {}, which a render's server-side apply conflicts with", nad::CREATED_BY_LABEL, nad::CONTROLLER_MANAGED_BY, nad::MANAGED_BY_LABEL, nad::CONTROLLER_MANAGED_BY);
        return Ok(None);
    }
    tracing::info!(namespace = %name, "{at} updated");
    Ok(Some((
        "NADUpdated",
        format!(
            "{at}: spec.config set to the config of ConfigMap {}/{CONFIG_MAP_NAME} (the ConfigMap changed, or the NAD was edited by hand: the controller owns that field of its NADs)",
            context.settings.cni_namespace
        ),
    )))
}

/// A write refused for its precondition (409: the NAD changed since the
/// cache saw it) as [`Error::Stale`].
fn stale_on_conflict<T>(result: Result<T, Error>) -> Result<T, Error> {
    match result {
        Err(Error::Write {
            namespace,
            name,
            source,
            ..
        }) if source.code() == Some(409) => Err(Error::Stale { namespace, name }),
        result => result,
    }
}

/// Deletes its own NAD, as the cache showed it.
async fn delete(context: &Context, name: &str, live: &DynamicObject) -> Result<Done, Error> {
    let nad_name = &context.settings.nad_name;
    let at = format!("NetworkAttachmentDefinition {name}/{nad_name}");
    // Only the NAD it saw as its own: had Git or a user taken it over
    // since, its resourceVersion changed and the delete fails.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: live.uid(),
            resource_version: live.resource_version(),
        }),
        ..DeleteParams::default()
    };
    let api = context.nads_in(name);
    let deleted = context.write("deleting", name, api.delete(nad_name, &params));
    match stale_on_conflict(deleted.await) {
        Err(Error::Write { source, .. }) if source.code() == Some(404) => {}
        result => {
            result?;
        }
    }
    context.metrics.reconciled("deleted");
    tracing::info!(namespace = %name, "{at} removed");
    Ok(Some((
        "NADRemoved",
        format!("{at} removed: the namespace is no longer annotated {MULTUS_ANNOTATION}: enabled"),
    )))
}

/// Counts, logs and reports a failed reconcile: a Warning Event for a write
/// the API server refused or left unanswered.
async fn failed(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    error: Error,
) -> Error {
    context.metrics.reconciled("error");
    if let Error::Write { .. } = error {
        publish(
            context,
            namespace,
            Kind::Warning,
            "NADFailed",
            error.to_string(),
        )
        .await;
    }
    error
}

/// The wait before a failed namespace is tried again: its backoff. A write
/// not started for want of leadership counts no failure: the next term
/// starts over.
pub fn error_policy(
    namespace: Arc<PartialObjectMeta<Namespace>>,
    error: &Error,
    context: Arc<Context>,
) -> Action {
    let name = namespace.name_any();
    if let Error::NotLeading { .. } = error {
        tracing::debug!(namespace = %name, error = %error);
        return Action::requeue(context.api_timeout);
    }
    let wait = context.backoff.failed(&name);
    match error {
        Error::Stale { .. } => {
            tracing::debug!(namespace = %name, error = %error, "retrying in {wait:.1?}")
        }
        _ => {
            tracing::warn!(namespace = %name, error = %error, "reconcile failed; retrying in {wait:.1?}")
        }
    }
    Action::requeue(wait)
}

/// An Event on the Namespace (Events of cluster-scoped objects go to `default`).
async fn publish(
    context: &Context,
    namespace: &PartialObjectMeta<Namespace>,
    kind: Kind,
    reason: &'static str,
    note: String,
) {
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Namespace".into()),
        name: Some(namespace.name_any()),
        uid: namespace.uid(),
        ..ObjectReference::default()
    };
    context
        .events
        .publish(&reference, kind, reason, "Reconcile", note)
        .await;
}

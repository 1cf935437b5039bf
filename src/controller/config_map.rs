//! The live Linkerd-CNI ConfigMap, followed by a watch and checked
//! ([`cluster::config_text`]) before any NAD is written from it.

use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::controller::events::{Events, Kind};
use crate::controller::metrics::Metrics;
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::settings::Settings;

/// What the live ConfigMap gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveConfig {
    /// Not listed yet.
    Unread,
    /// Missing or invalid: nothing is created or changed.
    Unusable,
    /// A NAD config.
    Ready(Arc<NadConfig>),
}

/// A NAD config and its digest, made once per ConfigMap change.
#[derive(Debug, PartialEq, Eq)]
pub struct NadConfig {
    /// The `spec.config` text.
    pub text: String,
    /// [`cluster::config_digest`] of the text, as the NAD cache keeps live configs.
    pub digest: String,
}

/// What reading the ConfigMap needs.
pub struct Reader {
    /// The rules' settings.
    pub settings: Arc<Settings>,
    /// Where the current config goes.
    pub config: watch::Sender<LiveConfig>,
    /// Where an invalid ConfigMap is reported.
    pub events: Arc<Events>,
    /// The ConfigMap gauges.
    pub metrics: Arc<Metrics>,
}

/// Follows the ConfigMap: keeps the NAD config current, reports a missing or
/// invalid one each time it changes, and yields each time the config changes.
pub fn changes(
    watch_events: impl futures_util::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>>
    + Send
    + 'static,
    reader: Reader,
) -> impl futures_util::Stream<Item = ()> + Send + 'static {
    let reader = Arc::new(reader);
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
        let reader = reader.clone();
        async move {
            let cm = settled?;
            let live = match read(cm.as_ref(), &reader).await {
                Some(text) => LiveConfig::Ready(Arc::new(NadConfig {
                    digest: cluster::config_digest(&text),
                    text,
                })),
                None => LiveConfig::Unusable,
            };
            let changed = *reader.config.borrow() != live;
            if let (LiveConfig::Ready(before), LiveConfig::Ready(now)) =
                (&*reader.config.borrow(), &live)
                && before.digest != now.digest
            {
                reader.metrics.config_changes.inc();
            }
            reader.config.send_replace(live);
            changed.then_some(())
        }
    })
}

/// The NAD config of the ConfigMap, or `None` when it is missing or invalid
/// (logged, counted and, when invalid, reported as an Event on it).
async fn read(cm: Option<&ConfigMap>, reader: &Reader) -> Option<String> {
    let at = format!(
        "ConfigMap {}/{CONFIG_MAP_NAME}",
        reader.settings.cni_namespace
    );
    let Some(cm) = cm else {
        reader.metrics.config_map(false, false);
        tracing::warn!("{at} not found: NADs are neither created nor changed until it exists");
        return None;
    };
    match cluster::config_text(cm.data.as_ref(), &reader.settings) {
        Ok(text) => {
            reader.metrics.config_map(true, true);
            tracing::info!(resource_version = ?cm.resource_version(), "{at} read");
            Some(text)
        }
        Err(e) => {
            reader.metrics.config_map(true, false);
            let note = format!("{at}: {e}; no NAD is created or changed until it is fixed");
            tracing::error!("{note}");
            let reference = cm.object_ref(&());
            reader
                .events
                .publish(
                    &reference,
                    Kind::Warning,
                    "InvalidConfig",
                    "ReadConfig",
                    note,
                )
                .await;
            None
        }
    }
}

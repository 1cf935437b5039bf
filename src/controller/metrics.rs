//! The NAD controller's metrics, served on its operations port.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// What a reconcile of one namespace did.
pub const OUTCOMES: [&str; 6] = [
    "created",
    "updated",
    "deleted",
    "unchanged",
    "skipped",
    "error",
];

/// Every metric of the controller.
#[derive(Debug)]
pub struct Metrics {
    reconciles: Family<OutcomeLabel, Counter>,
    writes: Counter,
    /// NADs in the cluster that the controller made.
    pub managed: Gauge,
    /// 1 while this replica holds the Lease.
    pub leader: Gauge,
    config_map_seen: Gauge,
    config_map_valid: Gauge,
    /// Changes of the ConfigMap's NAD config after the first read: the NAD updates they
    /// bring are rollouts, the others reverts of a hand edit.
    pub config_changes: Counter,
    /// Workloads restarted for a new Linkerd-CNI config (`--restart-stale-workloads`).
    pub restarts: Counter,
    /// Naked pods evicted for a new Linkerd-CNI config.
    pub evictions: Counter,
    /// Evictions the API server refused with 429 (a PodDisruptionBudget allows none now).
    pub evictions_blocked: Counter,
    /// Workloads rolling to a new config now.
    pub rolling: Gauge,
    /// Namespaces whose restarts are halted by a rollout that did not complete.
    pub halted: Gauge,
    /// Workloads and pods that run an older config and are not restarted (Git's, Jobs',
    /// naked pods, OnDelete).
    pub stale_reported: Gauge,
    /// Plans made over the watched cluster (one every two seconds while leading).
    pub passes: Counter,
}

impl Metrics {
    /// Registers the controller's metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            reconciles: Family::default(),
            writes: Counter::default(),
            managed: Gauge::default(),
            leader: Gauge::default(),
            config_map_seen: Gauge::default(),
            config_map_valid: Gauge::default(),
            config_changes: Counter::default(),
            restarts: Counter::default(),
            evictions: Counter::default(),
            evictions_blocked: Counter::default(),
            rolling: Gauge::default(),
            halted: Gauge::default(),
            stale_reported: Gauge::default(),
            passes: Counter::default(),
        };
        for outcome in OUTCOMES {
            let _ = metrics.reconciles.get_or_create(&OutcomeLabel { outcome });
        }
        registry.register(
            "linkerd_multus_nad_reconciles",
            "Namespaces reconciled by the NAD controller, by outcome: created, updated, deleted, unchanged, skipped (not its NAD, no valid ConfigMap, namespace terminating), error",
            metrics.reconciles.clone(),
        );
        registry.register(
            "linkerd_multus_nad_writes",
            "NAD applies and deletes the NAD controller sent to the API server",
            metrics.writes.clone(),
        );
        registry.register(
            "linkerd_multus_nads_managed",
            "NADs in the cluster the NAD controller made and holds (labelled app.kubernetes.io/created-by: linkerd-multus-controller, held by no one else)",
            metrics.managed.clone(),
        );
        registry.register(
            "linkerd_multus_nad_controller_leader",
            "1 while this replica holds the NAD controller's Lease and writes NADs",
            metrics.leader.clone(),
        );
        registry.register(
            "linkerd_multus_cni_config_map_seen",
            "1 while the Linkerd-CNI ConfigMap exists",
            metrics.config_map_seen.clone(),
        );
        registry.register(
            "linkerd_multus_cni_config_map_valid",
            "1 while the Linkerd-CNI ConfigMap gives a valid NAD config",
            metrics.config_map_valid.clone(),
        );
        registry.register(
            "linkerd_multus_cni_config_changes",
            "Changes of the NAD config the Linkerd-CNI ConfigMap gives, after the first read: the NADs updated without one were edited by hand and put back",
            metrics.config_changes.clone(),
        );
        registry.register(
            "linkerd_multus_config_restarts",
            "Workloads whose pod template the NAD controller stamped with their namespace's new Linkerd-CNI config hash, rolling them (--restart-stale-workloads)",
            metrics.restarts.clone(),
        );
        registry.register(
            "linkerd_multus_config_evictions",
            "Naked pods evicted for running an older Linkerd-CNI config (opted in with multus.linkerd.io/evict-on-config-change)",
            metrics.evictions.clone(),
        );
        registry.register(
            "linkerd_multus_config_evictions_blocked",
            "Evictions of naked pods refused with 429 (a PodDisruptionBudget allows no disruption now); a later pass asks again",
            metrics.evictions_blocked.clone(),
        );
        registry.register(
            "linkerd_multus_config_rollouts_in_progress",
            "Workloads rolling to their namespace's new Linkerd-CNI config now",
            metrics.rolling.clone(),
        );
        registry.register(
            "linkerd_multus_config_rollouts_halted_namespaces",
            "Namespaces where a rollout to a new Linkerd-CNI config did not complete by its deadline: no other workload there is restarted until it does",
            metrics.halted.clone(),
        );
        registry.register(
            "linkerd_multus_config_stale_reported",
            "Workloads and pods that run an older Linkerd-CNI config and that the controller does not restart (managed from Git, Jobs, naked pods not opted in to eviction, OnDelete)",
            metrics.stale_reported.clone(),
        );
        registry.register(
            "linkerd_multus_config_restart_passes",
            "Passes of the config restarts over the watched workloads and pods, once every watch has listed (--restart-stale-workloads)",
            metrics.passes.clone(),
        );
        metrics
    }

    /// Counts one reconcile's outcome, one of [`OUTCOMES`].
    pub fn reconciled(&self, outcome: &'static str) {
        self.reconciles
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Counts one write request.
    pub fn wrote(&self) {
        self.writes.inc();
    }

    /// Whether the ConfigMap exists and gives a valid NAD config.
    pub fn config_map(&self, seen: bool, valid: bool) {
        self.config_map_seen.set(seen.into());
        self.config_map_valid.set(valid.into());
    }
}

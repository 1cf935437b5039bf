//! Leader election over a `coordination.k8s.io` Lease, with
//! kube-lease-manager: the replica holding the Lease writes NADs; the others
//! wait and take over when it is released or expires.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::controller::{FIELD_MANAGER, Options};

/// How long to wait before trying to reach the Lease again.
const RETRY: Duration = Duration::from_secs(5);

/// This replica's part in the election.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    task: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Joins the election, trying again until the Lease can be read or
    /// created; `None` when `stop` turns true first.
    pub async fn acquire_loop(
        client: &Client,
        options: &Options,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Self> {
        loop {
            // The leader renews a third of the duration before it ends.
            let manager = LeaseManagerBuilder::new(client.clone(), &options.lease_name)
                .with_namespace(&options.lease_namespace)
                .with_identity(&options.identity)
                .with_duration(options.lease_seconds)
                .with_grace((options.lease_seconds / 3).max(1))
                .with_field_manager(FIELD_MANAGER)
                .build()
                .await;
            match manager {
                Ok(manager) => {
                    let (leading, task) = manager.watch().await;
                    return Some(Leadership { leading, task });
                }
                Err(e) => tracing::warn!(
                    lease = %format!("{}/{}", options.lease_namespace, options.lease_name),
                    error = %e,
                    "cannot reach the Lease; trying again in {RETRY:?}"
                ),
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = stop.wait_for(|s| *s) => return None,
            }
        }
    }

    /// Waits until this replica leads (`true`) or does not (`false`); false
    /// when the election itself has ended.
    pub async fn wait_for(&mut self, leading: bool) -> bool {
        self.leading.wait_for(|l| *l == leading).await.is_ok() && leading
    }

    /// Leaves the election, releasing the Lease if this replica holds it.
    pub async fn release(self) {
        drop(self.leading);
        match tokio::time::timeout(RETRY, self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("left the NAD controller's election"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "releasing the Lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "releasing the Lease"),
            Err(_) => tracing::warn!("releasing the Lease timed out; it expires by itself"),
        }
    }
}

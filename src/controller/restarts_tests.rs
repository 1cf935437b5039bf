//! What the watches keep of a pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::core::{ObjectMeta, PartialObjectMetaExt};

use super::*;

fn pod(hash: Option<&str>, deleting: bool) -> PartialObjectMeta<Pod> {
    ObjectMeta {
        name: Some("p".into()),
        namespace: Some("a".into()),
        annotations: hash.map(|h| BTreeMap::from([(HASH_ANNOTATION.to_string(), h.to_string())])),
        deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>()
}

#[test]
fn a_pod_is_kept_with_its_hash_and_dropped_once_it_is_being_deleted() {
    let mut pods: Mirror<PodEntry> = Mirror::default();
    pods.apply(
        watcher::Event::Apply(pod(Some("0123456789abcdef"), false)),
        read_pod,
    );
    let kept = &pods.objects[&("a".to_string(), "p".to_string())];
    assert_eq!(kept.hash, "0123456789abcdef");
    assert_eq!((kept.owner.clone(), kept.evict), (None, None));
    // Evicted (or deleted), it terminates for its grace period: neither evicted again nor
    // reported while it goes.
    pods.apply(
        watcher::Event::Apply(pod(Some("0123456789abcdef"), true)),
        read_pod,
    );
    assert!(pods.objects.is_empty());
    assert!(read_pod(&pod(Some("0123456789abcdef"), true)).is_none());
    assert!(read_pod(&pod(None, false)).is_none(), "no hash: not kept");
}
